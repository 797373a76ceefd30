"""`gulpio check` throughput on a dataset of at least 1 GB in the page cache, against the
page-cache read rate measured in the same run (target: >= 0.5x) and against gulpio2's
`gulp2_sanity_check` checks (which compare sizes only).

The dataset is built once in --workdir (about 2.9 GB: 2,000 videos x 32 frames of ~45 KB
455x256 q90 JPEG frames in 20 chunks) with gulpio_rs and reused.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import time
from pathlib import Path

import numpy as np
from PIL import Image


def build(root: Path, videos: int, frames: int, per_chunk: int) -> None:
    from gulpio_rs import GulpChunk

    rng = np.random.default_rng(0)
    jpegs = []
    for k in range(16):  # distinct realistic frames: gradients, shapes and noise
        y, x = np.mgrid[0:256, 0:455]
        img = np.stack([x * 255 / 455, y * 255 / 256, (x + y + 40 * k) % 256], -1)
        img += rng.normal(0, 12, img.shape)
        buf = io.BytesIO()
        Image.fromarray(np.clip(img, 0, 255).astype(np.uint8)).save(buf, "JPEG", quality=90)
        jpegs.append(buf.getvalue())
    root.mkdir(parents=True, exist_ok=True)
    for c in range(videos // per_chunk):
        chunk = GulpChunk(root / f"data_{c}.gulp", root / f"meta_{c}.gmeta")
        with chunk.open("wb"):
            for v in range(per_chunk):
                vid = c * per_chunk + v
                chunk.append(
                    str(vid),
                    {"label": f"class_{vid % 10}"},
                    [jpegs[(vid + j) % 16] for j in range(frames)],
                )


def page_cache_rate(root: Path) -> float:
    total, start = 0, time.perf_counter()
    for path in sorted(root.glob("data_*.gulp")):
        with open(path, "rb", buffering=0) as f:
            while chunk := f.read(8 << 20):
                total += len(chunk)
    return total / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workdir", default="/tmp/gulpio_bench_check")
    parser.add_argument("--videos", type=int, default=2000)
    parser.add_argument("--frames", type=int, default=32)
    parser.add_argument("--per-chunk", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    root = Path(args.workdir) / f"{args.videos}v_{args.frames}f"
    if not (root / "data_0.gidx").exists():
        build(root, args.videos, args.frames, args.per_chunk)
    size = sum(p.stat().st_size for p in root.glob("data_*.gulp"))

    from gulpio_rs.cli.check import verify

    page_cache_rate(root)  # bring the files into the page cache
    cache, ours, ours1 = [], [], []
    for _ in range(args.repeats):
        cache.append(page_cache_rate(root))
        report = verify(str(root))
        assert report["ok"], report["problems"][:3]
        ours.append(report["data_bytes"] / report["seconds"])
        report = verify(str(root), threads=1)
        ours1.append(report["data_bytes"] / report["seconds"])
    g2 = None
    try:
        import gulpio2
        from gulpio2 import sanity_utils as su

        start = time.perf_counter()
        gd2 = gulpio2.GulpDirectory(str(root))
        for check in (
            su.check_meta_file_size_larger_zero,
            su.check_data_file_size_larger_zero,
            su.check_data_file_size,
            su.check_for_duplicate_ids,
        ):
            check(gd2)
        g2 = time.perf_counter() - start
    except ImportError:
        pass
    med = statistics.median
    print(f"dataset: {root} ({size / 1e9:.2f} GB of .gulp), {os.cpu_count()} CPUs")
    print(f"page-cache read rate (read(), 8 MB blocks)   {med(cache) / 1e9:6.2f} GB/s")
    print(
        f"gulpio check, all cores                       {med(ours) / 1e9:6.2f} GB/s  "
        f"{med(ours) / med(cache):.2f}x page cache (target >= 0.5x)"
    )
    print(
        f"gulpio check, 1 thread                        {med(ours1) / 1e9:6.2f} GB/s  "
        f"{med(ours1) / med(cache):.2f}x page cache"
    )
    if g2 is not None:
        print(
            f"gulp2_sanity_check checks (sizes only)        {g2:6.2f} s   "
            f"vs gulpio check {size / med(ours):.2f} s (every byte CRC-checked)"
        )


if __name__ == "__main__":
    main()
