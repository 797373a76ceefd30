"""Regenerates tests/segments/: small real AV1 segments for the Rust tests of src/video/.

Frames: the first 16 Big Buck Bunny frames shipped in python/gulpio_rs/data/bbb/clip_00,
resized to 128x72 (and 127x71 for odd sizes), encoded by SVT-AV1 through PyAV as closed GOPs
of 8 (two segments per variant), the way ingest encodes (python/gulpio_rs/ingest/av1.py). For
each segment the manifest (``manifest.tsv``: file, width, height, frames, matrix, full range,
then per frame ``r,g,b``) records its shape and colour signalling and the mean of each RGB
channel of FFmpeg's own decode (``to_ndarray(format="rgb24")``): a test that converts with the
wrong matrix or range misses those means by several levels.

    python tools/make_segment_fixtures.py        # needs PyAV with libsvtav1 and Pillow
"""

from __future__ import annotations

import sys
from pathlib import Path

import av
import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
from gulpio_rs.segments import encode_segments  # noqa: E402

OUT = ROOT / "tests" / "segments"
SOURCE = ROOT / "python" / "gulpio_rs" / "data" / "bbb" / "clip_00"

# (name, size, matrix, full range)
VARIANTS = [
    ("bt601-128x72", (128, 72), "bt601", False),
    ("bt709-128x72", (128, 72), "bt709", False),
    ("bt601-full-128x72", (128, 72), "bt601", True),
    ("bt601-127x71", (127, 71), "bt601", False),
]


def ffmpeg_means(data: bytes) -> list[list[float]]:
    cc = av.CodecContext.create("libdav1d", "r")
    frames = cc.decode(av.Packet(data)) + cc.decode(None)
    return [[float(c) for c in f.to_ndarray(format="rgb24").reshape(-1, 3).mean(0)] for f in frames]


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    paths = sorted(SOURCE.glob("frame_*.jpg"))[:16]
    manifest = []
    for name, size, matrix, full in VARIANTS:
        frames = [
            np.asarray(Image.open(p).convert("RGB").resize(size, Image.BILINEAR)) for p in paths
        ]
        segments = encode_segments(frames, gop=8, matrix=matrix, full_range=full)
        for k, seg in enumerate(segments):
            file = f"{name}-{k}.av1"
            (OUT / file).write_bytes(seg.data)
            means = " ".join(",".join(f"{c:.3f}" for c in m) for m in ffmpeg_means(seg.data))
            row = [file, size[0], size[1], seg.frames, matrix, int(full), means]
            manifest.append("\t".join(map(str, row)))
    (OUT / "manifest.tsv").write_text("\n".join(manifest) + "\n")
    print(f"wrote {len(manifest)} segments to {OUT}")


if __name__ == "__main__":
    main()
