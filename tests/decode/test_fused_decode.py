"""Fused decoding: ``GulpDirectory.read`` / ``read_batch`` with ``crop=``, ``size=``, ``flip=``
(src/jpeg/reframe.rs, src/jpeg/restart.rs, src/batch.rs, src/python/decode.rs,
python/gulpio_rs/directory.py) and restart markers at every MCU row with their version-2
``.gidx`` restart table (src/format/index.rs, ``restart_rows`` of ``encode_frames``,
``EncodeOptions`` and ``GulpIngestor``).

Covered:

- quality of crop + resize against "full decode, crop, antialiased bilinear" references (torch's
  ``interpolate`` for integer boxes, a small float-box reference for fractional ones), with and
  without DCT scaling, downscales and upscales;
- exactness: plain crops equal full decode then crop, DCT-scaled crops equal crops of a scaled
  whole-frame decode, flips equal numpy flips, restart frames read exactly like plain ones (4:2:0,
  4:2:2, 4:4:4, 4:4:0, gray; the shipped Big Buck Bunny frames; restart intervals of several rows
  written by Pillow);
- the API: read vs read_batch, ``out=``, per-video crops, int sizes, mixed frame sizes, the user
  ``jpeg_decoder`` / ``fallback_decoder`` paths, threads, colorspace ``GRAY``, CMYK;
- errors: crops outside the frame, bad crop/size arguments, wrong list lengths, valid float crops;
- the on-disk side: index version 1 vs 2, the restart table's content, older readers (Pillow,
  simplejpeg, gulpio2), ``gulpio check``, damage to the restart table (FORMAT.md §3.4 rule 1 and
  2: the chunk falls back to its ``.gmeta`` with a warning), ``'ab'`` appends, ``write_indexes``;
- ``GulpIngestor(..., restart_rows=True)`` end to end.

Remote datasets are covered elsewhere (test_remote_*.py).
"""

from __future__ import annotations

import io
import json
import math
import os
import struct
import subprocess
import sys
import warnings
import zlib
from pathlib import Path

import numpy as np
import pytest
from helpers import JPEG_CORPUS, NO_CORPUS, ListAdapter, bbb_frame_paths, synthetic_frame
from PIL import Image

import gulpio_rs
from gulpio_rs import GulpChunk, GulpDirectory, GulpIngestor, _native
from gulpio_rs._encode_options import EncodeOptions
from gulpio_rs.errors import BrokenChunkWarning

torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
H, W = 200, 264  # 12.5 MCU rows of 16 pixels, 16.5 MCU columns: partial MCUs at both edges
#: The libjpeg-turbo build encodes (and writes restart markers) in Rust; the zune-jpeg build
#: has no encoder of its own, so the tests encode with Pillow there, which has no 4:4:0.
RUST_ENCODER = gulpio_rs.JPEG_BACKEND == "libjpeg-turbo"
KINDS = ["4:2:0", "4:2:2", "4:4:4", "gray"] + (["4:4:0"] if RUST_ENCODER else [])
PSNR_DCT, PSNR_FULL = 30.0, 40.0


# ------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------
def write_chunk(folder, number: int, videos: dict, flag: str = "wb") -> None:
    """Write (or with ``flag='ab'`` append) ``{id: [jpeg bytes, ...]}`` as chunk ``number``."""
    chunk = GulpChunk(
        os.path.join(folder, f"data_{number}.gulp"), os.path.join(folder, f"meta_{number}.gmeta")
    )
    with chunk.open(flag):
        for id_, frames in videos.items():
            chunk.append(id_, {"id": id_}, frames)


def encode(kind: str, restart: bool, height: int = H, width: int = W, n: int = 2, seed: int = 0):
    """``n`` synthetic frames as JPEG bytes: ``kind`` is a subsampling or ``"gray"``."""
    gray = kind == "gray"
    frames = [synthetic_frame(height, width, gray=gray, seed=seed + k) for k in range(n)]
    sub = "4:2:0" if gray else kind
    if RUST_ENCODER:
        return _native.encode_frames(frames, 90, sub, restart_rows=restart)
    # Pillow's libjpeg-turbo: the same kind of frames, a marker after every MCU row.
    options = {"restart_marker_rows": 1} if restart else {}
    if not gray:
        options["subsampling"] = sub
    return [pil_jpeg(f, **options) for f in frames]


def encode_444(frame: np.ndarray) -> list[bytes]:
    if RUST_ENCODER:
        return _native.encode_frames([frame], 95, "4:4:4")
    return [pil_jpeg(frame, quality=95, subsampling="4:4:4")]


def vid(kind: str, restart: bool) -> str:
    return f"{kind}-{'rst' if restart else 'plain'}"


def pil_jpeg(arr: np.ndarray, **options) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "JPEG", **{"quality": 90, **options})
    return buf.getvalue()


def pil_decode(jpeg) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(bytes(jpeg))).convert("RGB"))


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return math.inf if mse == 0 else 10 * math.log10(255**2 / mse)


def torch_reference(full: np.ndarray, box, size) -> np.ndarray:
    """Integer ``box`` of ``full`` (T, H, W, C), resized by torch (antialiased bilinear)."""
    t, left, h, w = (int(v) for v in box)
    x = torch.from_numpy(np.ascontiguousarray(full[:, t : t + h, left : left + w]))
    x = x.permute(0, 3, 1, 2).double()
    y = torch.nn.functional.interpolate(
        x, size=tuple(size), mode="bilinear", antialias=True, align_corners=False
    )
    return y.round().clamp(0, 255).permute(0, 2, 3, 1).numpy().astype(np.uint8)


def _weights(start: float, length: float, out_len: int, limit: int) -> np.ndarray:
    """``(out_len, limit)`` antialiased bilinear sampling of ``[start, start + length)``
    (Pillow's triangle filter, widened by the scale when reducing), crop first: only pixels
    of the box's integer hull contribute."""
    scale = length / out_len
    support = max(scale, 1.0)
    lo, hi = math.floor(start), min(math.ceil(start + length), limit)
    centers = start + (np.arange(out_len) + 0.5) * scale
    pixels = np.arange(lo, hi) + 0.5
    w = np.clip(1 - np.abs(pixels[None, :] - centers[:, None]) / support, 0, None)
    m = np.zeros((out_len, limit))
    m[:, lo:hi] = w / w.sum(axis=1, keepdims=True)
    return m


def float_reference(full: np.ndarray, box, size) -> np.ndarray:
    """A fractional ``box`` of ``full`` (T, H, W, C) resized to ``size``."""
    top, left, h, w = box
    wy = _weights(top, h, size[0], full.shape[1])
    wx = _weights(left, w, size[1], full.shape[2])
    rows = np.tensordot(wy, full.astype(np.float64), axes=([1], [1]))  # (oh, T, W, C)
    out = np.tensordot(wx, rows, axes=([1], [2])).transpose(2, 1, 0, 3)  # (T, oh, ow, C)
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def random_box(rng, height: int, width: int, step: int = 1) -> tuple[int, int, int, int]:
    """An integer crop inside a ``height`` x ``width`` frame, every value a multiple of ``step``."""
    hs, ws = height // step, width // step
    h, w = int(rng.integers(1, hs + 1)), int(rng.integers(1, ws + 1))
    top, left = int(rng.integers(0, hs - h + 1)), int(rng.integers(0, ws - w + 1))
    return top * step, left * step, h * step, w * step


def edge_boxes(height: int, width: int) -> list[tuple[int, int, int, int]]:
    """MCU-aligned, off by one, at every edge and corner, single pixels, the whole frame."""
    return [
        (0, 0, height, width),
        (16, 16, 32, 32),
        (15, 17, 33, 31),
        (17, 15, 1, 1),
        (0, 0, 1, 1),
        (height - 1, width - 1, 1, 1),
        (height - 16, width - 16, 16, 16),
        (height - 17, 0, 17, width),
        (0, width - 9, height, 9),
        (31, 0, 2, width),
        (32, 5, 16, 7),
        (height // 2, width // 2, height - height // 2, width - width // 2),
    ]


def edge_report(diff: np.ndarray) -> dict[str, int]:
    """Largest value of a (T, H, W, C) difference on each edge (corners left out: they belong
    to two edges) and inside."""
    return {
        "top": int(diff[:, 0, 2:-2].max()),
        "bottom": int(diff[:, -1, 2:-2].max()),
        "left": int(diff[:, 2:-2, 0].max()),
        "right": int(diff[:, 2:-2, -1].max()),
        "inside": int(diff[:, 1:-1, 1:-1].max()),
    }


def index_version(folder, number: int = 0) -> int:
    data = Path(folder, f"data_{number}.gidx").read_bytes()
    return struct.unpack_from("<I", data, 8)[0]


def restart_layout(gidx: bytes) -> dict:
    """Offsets of a version-2 index's restart table (layout of src/format/index.rs)."""
    videos, frames, ids_len, meta_len = struct.unpack_from("<QQQQ", gidx, 16)
    ids_at = 128 + 40 * videos
    meta_end = ids_at + ids_len + (-ids_len % 8) + 24 * frames + meta_len
    table_at = meta_end + (-meta_end % 8)
    return {
        "frames": frames,
        "meta_end": meta_end,
        "starts_at": table_at,
        "markers_at": table_at + 4 * (frames + 1),
        "markers": struct.unpack_from("<Q", gidx, 88)[0],
    }


def restart_table(folder, number: int = 0) -> list[list[int]]:
    """Each frame's restart marker positions as the chunk's index records them (frame table
    order); ``[]`` for every frame of a version-1 index."""
    gidx = Path(folder, f"data_{number}.gidx").read_bytes()
    frames = struct.unpack_from("<Q", gidx, 24)[0]
    if struct.unpack_from("<I", gidx, 8)[0] < 2:
        return [[] for _ in range(frames)]
    lay = restart_layout(gidx)
    starts = struct.unpack_from(f"<{frames + 1}I", gidx, lay["starts_at"])
    markers = struct.unpack_from(f"<{lay['markers']}I", gidx, lay["markers_at"])
    return [list(markers[a:b]) for a, b in zip(starts, starts[1:], strict=False)]


def scan_markers(jpeg: bytes) -> list[int]:
    """Positions of the RSTn markers in the entropy-coded data (after the SOS segment)."""
    sos = jpeg.index(b"\xff\xda")
    start = sos + 2 + struct.unpack_from(">H", jpeg, sos + 2)[0]
    return [
        i for i in range(start, len(jpeg) - 1) if jpeg[i] == 0xFF and 0xD0 <= jpeg[i + 1] <= 0xD7
    ]


def mcu_rows(jpeg: bytes) -> int:
    """MCU rows of a frame (16-pixel rows for subsampled frames, 8 for 4:4:4 and gray)."""
    sof = jpeg.index(b"\xff\xc0")
    height, _width, comps = struct.unpack_from(">HHB", jpeg, sof + 5)
    factors = [jpeg[sof + 10 + 3 * c + 1] for c in range(comps)]
    v_max = max(f & 0x0F for f in factors) if comps > 1 else 1
    return math.ceil(height / (8 * v_max))


def chunk_frames(gd: GulpDirectory, number: int) -> list[bytes]:
    """The JPEG bytes of every frame of chunk ``number``, in frame-table order."""
    for num, _data, _meta, _index, first, count in gd.chunk_table():
        if num == number:
            ids = gd.keys()[first : first + count]
            return [bytes(v) for id_ in ids for v in gd.frame_bytes(id_)]
    raise KeyError(number)


def gulpio_check(folder, *args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gulpio_rs", "check", str(folder), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


# ------------------------------------------------------------------------------------------------
# the dataset most tests read
# ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    """Chunk 0: every kind with and without restart markers (``vid(kind, restart)``), the first
    four Big Buck Bunny frames (``bbb``, 256x144 4:2:0), 360x480 frames (``large-plain``,
    ``large-rst``). Chunk 1: smaller frames (``small``, 96x128) and a gray video (``g``)."""
    folder = tmp_path_factory.mktemp("fused")
    videos = {vid(k, r): encode(k, r) for k in KINDS for r in (False, True)}
    videos["bbb"] = [p.read_bytes() for p in bbb_frame_paths(0)[:4]]
    for r in (False, True):
        videos[vid("large", r)] = encode("4:2:0", r, 360, 480, n=2, seed=7)
    write_chunk(folder, 0, videos)
    small = {"small": encode("4:2:0", True, 96, 128, n=2, seed=3)}
    small["g"] = encode("gray", False, 96, 128, n=2, seed=4)
    write_chunk(folder, 1, small)
    return folder


@pytest.fixture
def gd(dataset) -> GulpDirectory:
    return GulpDirectory(dataset)


# ------------------------------------------------------------------------------------------------
# 1. quality against "full decode, crop, resize"
# ------------------------------------------------------------------------------------------------
QUALITY_CASES = [
    ("bbb", (0, 0, 144, 256), (72, 128)),  # whole frame to half size
    ("bbb", (8, 20, 128, 128), (112, 112)),  # 128 -> 112
    ("bbb", (5, 7, 128, 128), (112, 112)),
    ("bbb", (10, 30, 64, 80), (112, 140)),  # upscale
    ("large-plain", (50, 100, 224, 224), (112, 112)),  # 224 -> 112
    ("large-rst", (50, 100, 224, 224), (112, 112)),
    ("large-rst", (3, 5, 224, 224), (112, 112)),
    ("large-plain", (0, 0, 360, 480), (100, 133)),  # uneven scales
    ("large-rst", (136, 256, 224, 224), (160, 160)),  # 7/8 DCT scale
    ("4:2:2-rst", (40, 40, 96, 96), (40, 40)),
    ("4:4:4-rst", (40, 40, 96, 96), (40, 40)),
    ("gray-rst", (40, 40, 96, 96), (40, 40)),
]


@pytest.mark.parametrize("dct_scaling", [True, False], ids=["dct", "full-scale"])
@pytest.mark.parametrize("id_,box,size", QUALITY_CASES)
def test_resized_crop_is_close_to_crop_then_interpolate(gd, id_, box, size, dct_scaling):
    full = gd.read(id_)
    got = gd.read(id_, crop=box, size=size, dct_scaling=dct_scaling)
    assert got.shape == (full.shape[0], *size, full.shape[3])
    want = torch_reference(full, box, size)
    assert psnr(got, want) >= (PSNR_DCT if dct_scaling else PSNR_FULL)


FRACTIONAL_CASES = [
    ("bbb", (8.5, 20.25, 100.5, 100.75), (112, 112)),
    ("bbb", (0.3, 0.7, 143.4, 255.1), (64, 100)),
    ("large-rst", (33.3, 47.9, 250.6, 301.2), (112, 112)),
    ("large-plain", (100.5, 120.5, 40.25, 50.5), (90, 101)),  # upscale
]


@pytest.mark.parametrize("dct_scaling", [True, False], ids=["dct", "full-scale"])
@pytest.mark.parametrize("id_,box,size", FRACTIONAL_CASES)
def test_fractional_crop_is_close_to_a_float_box_reference(gd, id_, box, size, dct_scaling):
    full = gd.read(id_)
    got = gd.read(id_, crop=box, size=size, dct_scaling=dct_scaling)
    assert psnr(got, float_reference(full, box, size)) >= (PSNR_DCT if dct_scaling else PSNR_FULL)


def test_float_box_reference_agrees_with_torch(gd):
    full = gd.read("bbb")
    for box, size in [((8, 20, 128, 128), (112, 112)), ((10, 30, 64, 80), (112, 140))]:
        diff = float_reference(full, box, size).astype(int) - torch_reference(full, box, size)
        assert np.abs(diff).max() <= 1


def test_size_alone_resizes_whole_frames(gd):
    full_box = gd.read("bbb", crop=(0, 0, 144, 256), size=(72, 128))
    assert np.array_equal(gd.read("bbb", size=(72, 128)), full_box)
    assert psnr(full_box, torch_reference(gd.read("bbb"), (0, 0, 144, 256), (72, 128))) >= 30


@pytest.mark.parametrize("dct_scaling", [True, False], ids=["dct", "full-scale"])
def test_pixels_outside_the_crop_do_not_change_a_resized_read(tmp_path, dct_scaling):
    """Crop first, then resize: two frames that are identical inside an 8-aligned box of a 4:4:4
    frame (each 8x8 block decodes on its own) and differ everywhere else must give the same
    resized crop, on all four edges alike."""
    a = synthetic_frame(96, 128, seed=1)
    b = a.copy()
    box = (32, 48, 32, 40)
    outside = np.ones(a.shape[:2], bool)
    outside[32:64, 48:88] = False
    b[outside] = 255 - b[outside]
    write_chunk(tmp_path, 0, {"a": encode_444(a), "b": encode_444(b)})
    gd = GulpDirectory(tmp_path)
    inside = np.s_[:, 32:64, 48:88]
    assert np.array_equal(gd.read("a")[inside], gd.read("b")[inside])
    for size in [(64, 80), (20, 33), (16, 20)]:
        got_a = gd.read("a", crop=box, size=size, dct_scaling=dct_scaling).astype(int)
        got_b = gd.read("b", crop=box, size=size, dct_scaling=dct_scaling).astype(int)
        diff = np.abs(got_a - got_b)
        assert diff.max() == 0, f"size {size}: outside pixels leak in: {edge_report(diff)}"


# ------------------------------------------------------------------------------------------------
# 2. exactness: plain crops, DCT-scaled crops, flips, restart frames
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("restart", [False, True], ids=["plain", "restart"])
@pytest.mark.parametrize("kind", KINDS)
def test_plain_crop_equals_full_decode_then_crop(gd, kind, restart):
    id_ = vid(kind, restart)
    full = gd.read(id_)
    rng = np.random.default_rng(KINDS.index(kind))
    boxes = edge_boxes(H, W) + [random_box(rng, H, W) for _ in range(60)]
    for top, left, h, w in boxes:
        got = gd.read(id_, crop=(top, left, h, w))
        want = full[:, top : top + h, left : left + w]
        assert np.array_equal(got, want), f"{id_}: crop {(top, left, h, w)}"
        # The same box with an explicit size of its own.
        assert np.array_equal(gd.read(id_, crop=(top, left, h, w), size=(h, w)), want)


def test_bbb_crops_equal_full_decode_then_crop(gd):
    full = gd.read("bbb")
    rng = np.random.default_rng(5)
    for top, left, h, w in edge_boxes(144, 256) + [random_box(rng, 144, 256) for _ in range(40)]:
        got = gd.read("bbb", crop=(top, left, h, w))
        assert np.array_equal(got, full[:, top : top + h, left : left + w]), (top, left, h, w)


@pytest.mark.parametrize("scale", [2, 4], ids=["half", "quarter"])
@pytest.mark.parametrize("restart", [False, True], ids=["plain", "restart"])
@pytest.mark.parametrize("kind", KINDS)
def test_scaled_crop_equals_crop_of_a_scaled_whole_decode(gd, kind, restart, scale):
    """A box whose coordinates are multiples of ``scale``, read at ``1/scale`` (the DCT scale
    then leaves exactly the output), equals that box of the whole frame read at ``1/scale``.
    The zune-jpeg build has no DCT scaling: there a reduced read is exactly the resize of the
    crop of a full decode (the same resampler)."""
    id_ = vid(kind, restart)
    whole = gd.read(id_, size=(H // scale, W // scale))
    full = gd.read(id_)
    rng = np.random.default_rng(100 + KINDS.index(kind))
    for _ in range(40):
        top, left, h, w = random_box(rng, H - H % scale, W - W % scale, step=scale)
        size = (h // scale, w // scale)
        got = gd.read(id_, crop=(top, left, h, w), size=size)
        if RUST_ENCODER:
            t, lf, hh, ww = top // scale, left // scale, h // scale, w // scale
            want = whole[:, t : t + hh, lf : lf + ww]
        else:
            frames = _native.reframe_frames(list(full), (top, left, h, w), size)
            want = np.stack([f if f.ndim == 3 else f[:, :, None] for f in frames])
        assert np.array_equal(got, want), f"{id_} at 1/{scale}: crop {(top, left, h, w)}"


@pytest.mark.parametrize("kind", KINDS)
def test_restart_frames_read_like_plain_frames(gd, kind):
    """Restart markers change the bytes, not the coefficients: any fused read of a frame with
    markers equals the same read of the frame without them."""
    plain, rst = vid(kind, False), vid(kind, True)
    assert np.array_equal(gd.read(plain), gd.read(rst))
    rng = np.random.default_rng(200 + KINDS.index(kind))
    for n in range(60):
        h, w = rng.uniform(4, H), rng.uniform(4, W)
        box = (rng.uniform(0, H - h), rng.uniform(0, W - w), h, w)
        if n % 2:
            box = tuple(float(int(v)) for v in box)
        size = (int(rng.integers(1, 2 * box[2])), int(rng.integers(1, 2 * box[3])))
        dct = bool(n % 3)
        want = gd.read(plain, crop=box, size=size, dct_scaling=dct)
        got = gd.read(rst, crop=box, size=size, dct_scaling=dct)
        assert np.array_equal(got, want), f"{kind}: crop {box} size {size} dct {dct}"


def test_flip_mirrors_left_right(gd):
    for id_ in ["bbb", "4:2:0-rst", "gray-plain"]:
        full = gd.read(id_)
        assert np.array_equal(gd.read(id_, flip=True), full[:, :, ::-1])
        box = (17, 9, 50, 61)
        crop = full[:, 17:67, 9:70]
        assert np.array_equal(gd.read(id_, crop=box, flip=True), crop[:, :, ::-1])
        resized = gd.read(id_, crop=box, size=(30, 37))
        assert np.array_equal(gd.read(id_, crop=box, size=(30, 37), flip=True), resized[:, :, ::-1])


def test_read_batch_flips_per_video(gd):
    box = (10, 20, 40, 48)
    got = gd.read_batch(["bbb", "4:4:4-rst"], crop=box, flip=[True, False])
    assert np.array_equal(got[0], gd.read("bbb", crop=box)[:, :, ::-1])
    assert np.array_equal(got[1], gd.read("4:4:4-rst", crop=box))


# ------------------------------------------------------------------------------------------------
# 3. the API: read vs read_batch, out=, per-video crops, sizes, decoders, threads
# ------------------------------------------------------------------------------------------------
def test_read_and_read_batch_agree(gd):
    ids = ["bbb", "4:2:0-rst", "4:4:4-plain", "small"]
    crops = [(8.5, 20, 100, 120), None, (0, 0, 64, 64), (10, 10, 50, 70)]
    flips = [False, True, True, False]
    got = gd.read_batch(ids, [0, -1], crop=crops, size=(56, 64), flip=flips)
    assert got.shape == (4, 2, 56, 64, 3)
    for n, id_ in enumerate(ids):
        want = gd.read(id_, [0, -1], crop=crops[n], size=(56, 64), flip=flips[n])
        assert np.array_equal(got[n], want), id_


def test_out_receives_the_fused_shape(gd):
    out = np.zeros((4, 30, 40, 3), np.uint8)
    got = gd.read("bbb", crop=(10, 10, 90, 120), size=(30, 40), out=out)
    assert got is out or np.shares_memory(got, out)
    assert np.array_equal(out, gd.read("bbb", crop=(10, 10, 90, 120), size=(30, 40)))
    batch_out = np.zeros((2, 2, 24, 24, 3), np.uint8)
    got = gd.read_batch(["4:2:0-rst", "small"], crop=(0, 0, 48, 48), size=24, out=batch_out)
    assert got is batch_out or np.shares_memory(got, batch_out)
    assert np.array_equal(batch_out[1], gd.read("small", crop=(0, 0, 48, 48), size=24))


@pytest.mark.parametrize(
    "shape", [(4, 30, 41, 3), (4, 40, 30, 3), (3, 30, 40, 3), (4, 144, 256, 3)]
)
def test_out_of_the_wrong_shape_is_a_clear_error(gd, shape):
    with pytest.raises(ValueError, match=r"\(4, 30, 40, 3\)"):
        gd.read("bbb", crop=(10, 10, 90, 120), size=(30, 40), out=np.zeros(shape, np.uint8))
    with pytest.raises(ValueError, match=r"\(1, 4, 30, 40, 3\)"):
        gd.read_batch(["bbb"], size=(30, 40), out=np.zeros((1, *shape), np.uint8))


def test_int_size_is_a_square(gd):
    assert np.array_equal(gd.read("bbb", size=64), gd.read("bbb", size=(64, 64)))
    assert gd.read("bbb", crop=(0, 0, 100, 200), size=np.int64(50)).shape == (4, 50, 50, 3)


def test_crop_alone_keeps_the_rounded_box_size(gd):
    got = gd.read("bbb", crop=(10.2, 5.5, 20.4, 30.6))
    assert got.shape == (4, 20, 31, 3)
    assert gd.read("bbb", crop=np.array([1, 2, 3, 4])).shape == (4, 3, 4, 3)


def test_per_video_crops(gd):
    ids = ["bbb", "small", "4:4:4-rst"]
    crops = [(0, 0, 20, 30), None, (5, 6, 20, 30)]
    # Without a size each video keeps its own crop's size: a list when they differ.
    got = gd.read_batch(ids, crop=crops)
    assert isinstance(got, list)
    assert [v.shape for v in got] == [(4, 20, 30, 3), (2, 96, 128, 3), (2, 20, 30, 3)]
    for n, id_ in enumerate(ids):
        assert np.array_equal(got[n], gd.read(id_, crop=crops[n]))
    # With a size: one array.
    got = gd.read_batch(ids, 0, crop=crops, size=(16, 24))
    assert got.shape == (3, 1, 16, 24, 3)
    # One box as a 4-element numpy array, and as a list of four numbers, for four videos.
    four = ["bbb", "small", "4:2:0-rst", "gray-rst"]
    box = np.array([3.0, 4.0, 20.0, 24.0])
    one = gd.read_batch(four, 0, crop=box, colorspace="RGB")
    assert one.shape == (4, 1, 20, 24, 3)
    assert np.array_equal(one, gd.read_batch(four, 0, crop=[3, 4, 20, 24], colorspace="RGB"))


def test_mixed_frame_sizes(gd, tmp_path):
    ids = ["bbb", "small", "large-rst"]  # 144x256, 96x128, 360x480
    listed = gd.read_batch(ids, 0)
    assert isinstance(listed, list) and len({v.shape for v in listed}) == 3
    stacked = gd.read_batch(ids, 0, size=(48, 64))
    assert stacked.shape == (3, 1, 48, 64, 3)
    for n, id_ in enumerate(ids):
        assert np.array_equal(stacked[n], gd.read(id_, 0, size=(48, 64)))
    # One video whose frames differ in size: stacked with a size, refused without.
    write_chunk(
        tmp_path, 0, {"mix": encode("4:2:0", True, 48, 64, 1) + encode("4:2:0", False, 40, 56, 1)}
    )
    mixed = GulpDirectory(tmp_path)
    with pytest.raises(ValueError, match="different sizes"):
        mixed.read("mix")
    assert mixed.read("mix", size=(20, 30)).shape == (2, 20, 30, 3)
    assert mixed.read("mix", crop=(0, 0, 30, 30)).shape == (2, 30, 30, 3)


def test_threads_do_not_change_pixels(gd):
    ids = ["bbb", "4:2:0-rst", "4:2:2-plain", "gray-rst"]
    crops = [(1.5, 2.5, 120, 140), (30, 40, 100, 100), None, (0, 0, 64, 64)]
    one = gd.read_batch(ids, [0, 1], crop=crops, size=(40, 50), colorspace="RGB", threads=1)
    two = gd.read_batch(ids, [0, 1], crop=crops, size=(40, 50), colorspace="RGB", threads=2)
    assert one.shape == (4, 2, 40, 50, 3)
    assert np.array_equal(one, two)


def test_whole_frame_reads_are_unchanged_after_fused_reads(gd):
    """The decoder handle of a thread is reused: a region, scaled or fast decode must not leave
    its cropping region, scale or precision behind for the next whole-frame read."""
    before = gd.read("4:2:0-rst", threads=1)
    fast = gd.read("4:2:0-rst", threads=1, fast_decode=True)
    gd.read("4:2:0-rst", crop=(40, 40, 50, 60), size=(10, 12), threads=1)
    gd.read("4:2:0-plain", crop=(41, 35, 50, 60), threads=1, fast_decode=True)
    assert np.array_equal(gd.read("4:2:0-rst", threads=1), before)
    assert np.array_equal(gd["4:2:0-rst"][0][0], fast[0])  # gulpio2's settings
    assert np.array_equal(gd.read("4:2:0-rst", threads=1), before)


def test_user_decoder_reads_match_builtin_reads(dataset):
    """A ``jpeg_decoder`` giving the same pixels as the built-in decoder (Pillow's libjpeg-turbo)
    gives the same fused reads: exactly for plain crops and flips, within rounding (2 levels)
    for resized crops."""
    builtin, user = GulpDirectory(dataset), GulpDirectory(dataset, jpeg_decoder=pil_decode)
    # zune-jpeg's pixels are not libjpeg-turbo's (Pillow's) to the bit: a few levels apart.
    slack = 0 if RUST_ENCODER else 8
    assert np.abs(user.read("bbb").astype(int) - builtin.read("bbb")).max() <= slack
    box = (9, 13, 70, 90)
    for kwargs in [{}, {"flip": True}]:
        mine = user.read("bbb", crop=box, **kwargs).astype(int)
        assert np.abs(mine - builtin.read("bbb", crop=box, **kwargs)).max() <= slack
    for size in [(35, 45), (112, 140), (50, 50)]:
        mine = user.read("bbb", crop=box, size=size, dct_scaling=False).astype(int)
        theirs = builtin.read("bbb", crop=box, size=size, dct_scaling=False).astype(int)
        diff = np.abs(mine - theirs)
        assert diff.max() <= 2 + slack, f"size {size}: max difference {edge_report(diff)}"
    got = user.read_batch(["bbb", "small"], 0, crop=[box, None], size=(35, 45), flip=[True, False])
    assert got.shape == (2, 1, 35, 45, 3)


def test_fallback_decoder_frames_are_cropped_and_resized(tmp_path):
    monkey12 = JPEG_CORPUS / "ljt_monkey12.jpg"  # 12-bit: not for the built-in decoder
    if not monkey12.is_file():
        pytest.skip(NO_CORPUS)
    jpeg = monkey12.read_bytes()
    info = _native.jpeg_info(jpeg)
    picture = synthetic_frame(info.height, info.width, seed=5)
    write_chunk(tmp_path, 0, {"m": [jpeg, jpeg]})
    gd = GulpDirectory(tmp_path, fallback_decoder=lambda _: picture)
    box = (10, 20, 50, 60)
    assert np.array_equal(gd.read("m", crop=box)[1], picture[10:60, 20:80])
    want = _native.reframe_frames([picture], box, (25, 30), True)[0]
    assert np.array_equal(gd.read("m", crop=box, size=(25, 30), flip=True)[0], want)
    batch = gd.read_batch(["m"], crop=[box], size=(25, 30), flip=[True])
    assert np.array_equal(batch[0, 1], want)
    with pytest.raises(ValueError, match="frame 0"):
        gd.read("m", crop=(0, 0, info.height + 1, 10))


# ------------------------------------------------------------------------------------------------
# 4. errors
# ------------------------------------------------------------------------------------------------
OUTSIDE = [
    (0, 0, 145, 10),
    (0, 0, 10, 257),
    (140, 0, 10, 10),
    (0, 250, 10, 10),
    (-1, 0, 10, 10),
    (0, -0.5, 10, 10),
    (0, 0, 0, 10),
    (0, 0, 10, -3),
    (float("nan"), 0, 10, 10),
    (0, 0, float("inf"), 10),
]


@pytest.mark.parametrize("box", OUTSIDE, ids=str)
def test_crop_outside_the_frame_names_file_video_and_frame(gd, dataset, box):
    for call in (
        lambda: gd.read("bbb", crop=box),
        lambda: gd.read("bbb", crop=box, size=(20, 20)),
        lambda: gd.read_batch(["small", "bbb"], crop=[None, box], size=8),
    ):
        with pytest.raises(ValueError) as err:
            call()
        message = str(err.value)
        assert str(dataset / "data_0.gulp") in message
        assert '"bbb"' in message and "frame 0" in message


def test_crop_outside_one_frame_names_that_frame(tmp_path):
    write_chunk(
        tmp_path, 0, {"mix": encode("4:2:0", False, 48, 64, 1) + encode("4:2:0", False, 40, 56, 1)}
    )
    with pytest.raises(ValueError, match=r'data_0\.gulp: video "mix" frame 1'):
        GulpDirectory(tmp_path).read("mix", crop=(0, 0, 44, 10))


def test_crop_outside_the_frame_with_a_user_decoder_names_file_and_video(dataset):
    gd = GulpDirectory(dataset, jpeg_decoder=pil_decode)
    with pytest.raises(ValueError) as err:
        gd.read("bbb", crop=(0, 0, 145, 10))
    assert str(dataset / "data_0.gulp") in str(err.value) and "bbb" in str(err.value)


@pytest.mark.parametrize(
    "crop,error",
    [
        (5, TypeError),
        (5.0, TypeError),
        ((1, 2, None, 4), TypeError),
        ((1, 2, 3), ValueError),
        ((1, 2, 3, 4, 5), ValueError),
        ((), ValueError),
        ("abcd", (TypeError, ValueError)),
        ("0088", (TypeError, ValueError)),  # a string is not a box, even of digits
        ((1, 2, "x", 4), (TypeError, ValueError)),
    ],
    ids=repr,
)
def test_bad_crop_arguments(gd, crop, error):
    with pytest.raises(error):
        gd.read("bbb", crop=crop)


@pytest.mark.parametrize(
    "size",
    [0, -1, (0, 5), (5, -2), (0.4, 0.4), (1, 2, 3), (3,), "ab", 2.5, True, (2.5, 3.5)],
    ids=repr,
)
def test_bad_sizes_are_value_errors(gd, size):
    with pytest.raises(ValueError, match="size"):
        gd.read("bbb", size=size)
    with pytest.raises(ValueError, match="size"):
        gd.read_batch(["bbb"], size=size)


def test_per_video_lists_of_the_wrong_length(gd):
    for crops in ([(0, 0, 4, 4)], [(0, 0, 4, 4)] * 3, [None]):
        with pytest.raises(ValueError, match="crop"):
            gd.read_batch(["bbb", "small"], crop=crops)
    with pytest.raises(ValueError, match="flip"):
        gd.read_batch(["bbb", "small"], flip=[True])
    with pytest.raises(ValueError, match=r"crop\[1\]"):
        gd.read_batch(["bbb", "small"], crop=[(0, 0, 4, 4), (1, 2, 3)])


@pytest.mark.parametrize("decoder", [None, pil_decode], ids=["builtin", "jpeg_decoder"])
@pytest.mark.parametrize(
    "id_,box,size",
    [
        ("4:2:0-plain", (22.2, 0, 9.8, 64), (8, 8)),  # ends on row 32 up to float rounding
        (
            "small",
            (12.310185577570442, 7.03039753633492, 75.68981442242956, 63.96960246366508),
            (18, 17),
        ),
        ("small", (1e-7, 1e-7, 96, 128), (48, 64)),  # inside the 1e-6 slack the reader allows
    ],
)
def test_valid_float_crops_ending_on_a_pixel_boundary(dataset, id_, box, size, decoder):
    """Crops inside the frame (as the reader itself judges) whose end is a whole pixel only up
    to float rounding read like any other."""
    gd = GulpDirectory(dataset, jpeg_decoder=decoder)
    frames = gd.num_frames(id_)
    assert gd.read(id_, crop=box, size=size).shape == (frames, *size, 3)


def test_random_resized_crop_boxes_in_the_corner(gd):
    """RandomResizedCrop-style boxes computed in floats in the bottom-right corner."""
    for f in np.linspace(0.3, 0.99, 70):
        h, w = 96 * f, 128 * f
        for id_ in ("small", "g"):
            got = gd.read(id_, crop=(96 - h, 128 - w, h, w), size=(24, 24))
            assert got.shape[:3] == (2, 24, 24), (id_, f)


def test_random_crops_either_read_or_raise_value_error(gd):
    """Never a panic nor a decode error for a crop argument: valid boxes give the planned
    shape, invalid ones a ValueError."""
    rng = np.random.default_rng(9)
    for _ in range(300):
        box = tuple(float(v) for v in rng.uniform(-5, 110, 4).round(rng.integers(0, 4)))
        size = None if rng.random() < 0.3 else tuple(int(v) for v in rng.integers(1, 70, 2))
        fits = box[0] >= 0 and box[1] >= 0 and box[2] > 0 and box[3] > 0
        fits = fits and box[0] + box[2] <= 96 and box[1] + box[3] <= 128
        if not fits:
            with pytest.raises(ValueError, match="not inside"):
                gd.read("small", crop=box, size=size)
            continue
        got = gd.read("small", crop=box, size=size, dct_scaling=bool(rng.integers(0, 2)))
        want = size or (max(1, round(box[2])), max(1, round(box[3])))
        assert got.shape == (2, *want, 3), (box, size)


# ------------------------------------------------------------------------------------------------
# 5. restart markers on disk: index versions, the table, older readers, check, damage, appends
# ------------------------------------------------------------------------------------------------
def test_index_version_2_only_with_restart_frames(tmp_path):
    with_rst, without = tmp_path / "rst", tmp_path / "plain"
    for folder, restart in [(with_rst, True), (without, False)]:
        folder.mkdir()
        write_chunk(folder, 0, {"a": encode("4:2:0", restart, 96, 128)})
    assert index_version(with_rst) == 2
    assert index_version(without) == 1


def test_index_records_every_marker_of_every_frame(dataset, gd):
    table = restart_table(dataset)
    frames = chunk_frames(gd, 0)
    assert len(table) == len(frames)
    for jpeg, recorded in zip(frames, table, strict=True):
        markers = scan_markers(jpeg)
        if markers:
            assert len(markers) == mcu_rows(jpeg) - 1
            assert b"\xff\xdd" in jpeg  # the DRI segment
        assert recorded == markers


def test_restart_intervals_of_several_rows_written_by_pillow(tmp_path):
    frame = synthetic_frame(H, W, seed=2)
    videos = {"plain": [pil_jpeg(frame)]}
    for rows in (1, 2, 3):
        videos[f"rows{rows}"] = [pil_jpeg(frame, restart_marker_rows=rows)]
    videos["blocks5"] = [pil_jpeg(frame, restart_marker_blocks=5)]  # not whole rows
    write_chunk(tmp_path, 0, videos)
    table = restart_table(tmp_path)
    gd = GulpDirectory(tmp_path)
    ids = list(videos)
    rows_total = mcu_rows(videos["plain"][0])
    for n, id_ in enumerate(ids):
        want = {"plain": 0, "blocks5": 0}.get(id_)
        if want is None:
            want = math.ceil(rows_total / int(id_[-1])) - 1
        assert len(table[n]) == want, id_
        full = gd.read(id_)
        assert np.array_equal(full, gd.read("plain"))
        rng = np.random.default_rng(n)
        for top, left, h, w in edge_boxes(H, W) + [random_box(rng, H, W) for _ in range(30)]:
            got = gd.read(id_, crop=(top, left, h, w))
            assert np.array_equal(got, full[:, top : top + h, left : left + w]), id_


def test_restart_frames_decode_identically_in_other_readers(gd):
    simplejpeg = pytest.importorskip("simplejpeg")
    for kind in ["4:2:0", "4:2:2", "4:4:4", "gray"]:
        id_ = vid(kind, True)
        ours = gd.read(id_)
        for k, view in enumerate(gd.frame_bytes(id_)):
            jpeg = bytes(view)
            pil = np.asarray(Image.open(io.BytesIO(jpeg)))
            space = "GRAY" if kind == "gray" else "RGB"
            sj = simplejpeg.decode_jpeg(jpeg, colorspace=space, fastdct=False, fastupsample=False)
            if RUST_ENCODER:  # the same libjpeg-turbo: the same pixels
                assert np.array_equal(pil.reshape(ours[k].shape), ours[k]), id_
                assert np.array_equal(sj.reshape(ours[k].shape), ours[k]), id_
            else:  # zune-jpeg: within its usual difference from libjpeg-turbo
                assert psnr(pil.reshape(ours[k].shape), ours[k]) > 40, id_
                assert psnr(sj.reshape(ours[k].shape), ours[k]) > 40, id_


def test_gulpio2_reads_a_restart_dataset(dataset):
    gulpio2 = pytest.importorskip("gulpio2")
    g2 = gulpio2.GulpDirectory(str(dataset))
    same_decoder = GulpDirectory(dataset, jpeg_decoder=gulpio2.utils.jpeg_bytes_to_img)
    ours = GulpDirectory(dataset)
    for kind in KINDS:
        id_ = vid(kind, True)
        frames, meta = g2[id_]
        assert meta == {"id": id_}
        mine, _ = same_decoder[id_]
        for a, b in zip(frames, mine, strict=True):
            assert np.array_equal(a, b)
        stacked = np.stack(frames).reshape(ours.read(id_).shape)
        assert psnr(stacked, ours.read(id_)) >= 30


def test_check_passes_on_a_restart_dataset(dataset):
    result = gulpio_check(dataset, "--decode")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "all intact" in result.stdout


def _damage_spots(gidx: bytes) -> dict[str, int]:
    lay = restart_layout(gidx)
    spots = {
        "header restart count": 88,
        "header restart crc": 96,
        "restart starts": lay["starts_at"] + 4,
        "restart markers": lay["markers_at"] + 4 * (lay["markers"] // 2) + 1,
    }
    if lay["starts_at"] > lay["meta_end"]:
        spots["padding before the table"] = lay["meta_end"]
    return spots


@pytest.mark.parametrize(
    "spot",
    [
        "header restart count",
        "header restart crc",
        "restart starts",
        "restart markers",
        "padding before the table",
    ],
)
def test_a_flipped_bit_in_the_restart_table_is_detected(tmp_path, spot):
    """FORMAT.md §3.4: a damaged index is not used (rule 1 when opening, rule 2 before the first
    read): the chunk is read through its ``.gmeta`` with a warning naming the index, reads stay
    exact, and ``gulpio check`` reports it."""
    gidx_path = tmp_path / "data_0.gidx"
    # The second id's length moves the table: the first that leaves padding before it.
    for second in ("b" * n for n in range(1, 9)):
        for f in tmp_path.iterdir():
            f.unlink()
        videos = {"a": encode("4:2:0", True, 96, 128, n=3), second: encode("4:2:2", True, 96, 128)}
        write_chunk(tmp_path, 0, videos)
        spots = _damage_spots(gidx_path.read_bytes())
        if "padding before the table" in spots:
            break
    before = GulpDirectory(tmp_path)
    full, other = before.read("a"), before.read(second)
    gidx = bytearray(gidx_path.read_bytes())
    gidx[spots[spot]] ^= 0x04
    gidx_path.write_bytes(bytes(gidx))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gd = GulpDirectory(tmp_path)
        got = gd.read("a", crop=(40, 8, 30, 50))
    messages = [str(w.message) for w in caught if issubclass(w.category, BrokenChunkWarning)]
    assert any("data_0.gidx" in m for m in messages), messages
    assert np.array_equal(got, full[:, 40:70, 8:58])
    assert np.array_equal(gd.read(second, crop=(8, 8, 40, 40)), other[:, 8:48, 8:48])
    result = gulpio_check(tmp_path)
    assert result.returncode == 1
    assert "data_0.gidx" in result.stdout + result.stderr


def test_append_keeps_the_restart_table(tmp_path):
    write_chunk(
        tmp_path, 0, {"a": encode("4:2:0", True, 96, 128), "b": encode("4:2:0", False, 96, 128)}
    )
    before = restart_table(tmp_path)
    write_chunk(
        tmp_path,
        0,
        {
            "c": encode("4:2:2", True, 96, 128, seed=20),
            "a": encode("4:2:0", True, 96, 128, n=1, seed=30),  # more frames for "a"
            "d": encode("4:4:4", False, 96, 128, seed=40),
        },
        flag="ab",
    )
    assert index_version(tmp_path) == 2
    after = restart_table(tmp_path)
    # Frame table order: a0 a1 a2 b0 b1 c0 c1 d0 d1.
    assert after[:2] == before[:2] and after[3:5] == before[2:4] == [[], []]
    gd = GulpDirectory(tmp_path)
    assert after == [scan_markers(jpeg) for jpeg in chunk_frames(gd, 0)]
    assert [len(m) for m in after] == [5, 5, 5, 0, 0, 11, 11, 0, 0]  # 4:2:2: 8-pixel MCU rows
    assert gd.num_frames("a") == 3
    for id_ in "abcd":
        full = gd.read(id_)
        assert np.array_equal(gd.read(id_, crop=(50, 20, 30, 70)), full[:, 50:80, 20:90]), id_


def test_appending_restart_frames_to_a_version_1_chunk(tmp_path):
    write_chunk(tmp_path, 0, {"p": encode("4:2:0", False, 96, 128)})
    assert index_version(tmp_path) == 1
    write_chunk(tmp_path, 0, {"q": encode("4:2:0", True, 96, 128, seed=5)}, flag="ab")
    assert index_version(tmp_path) == 2
    assert restart_table(tmp_path)[:2] == [[], []]
    gd = GulpDirectory(tmp_path)
    full = gd.read("q")
    assert np.array_equal(gd.read("q", crop=(33, 7, 40, 90)), full[:, 33:73, 7:97])


def test_write_indexes_rebuilds_the_same_version_2_index(tmp_path):
    write_chunk(tmp_path, 0, {"a": encode("4:2:0", True, 96, 128), "b": encode("gray", False)})
    original = (tmp_path / "data_0.gidx").read_bytes()
    (tmp_path / "data_0.gidx").unlink()
    assert GulpDirectory(tmp_path).write_indexes() == 1
    assert (tmp_path / "data_0.gidx").read_bytes() == original


def test_format_documents_the_restart_table():
    """docs/FORMAT.md is normative: a version-2 index must be described there, and the
    docstrings of the feature point at docs/FUSED.md."""
    text = (REPO / "docs" / "FORMAT.md").read_text()
    assert "restart" in text.lower() and "version 2" in text.lower()
    assert (REPO / "docs" / "FUSED.md").is_file()


# ------------------------------------------------------------------------------------------------
# 6. gray output, gray frames, CMYK
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("id_", ["4:2:0-rst", "4:2:2-plain", "bbb", "gray-rst"])
def test_gray_output_with_crop_and_size(gd, id_):
    gray = gd.read(id_, colorspace="GRAY")
    assert gray.shape[-1] == 1
    box = (9, 17, 64, 96)
    assert np.array_equal(gd.read(id_, crop=box, colorspace="GRAY"), gray[:, 9:73, 17:113])
    got = gd.read(id_, crop=box, size=(32, 48), colorspace="GRAY")
    assert got.shape == (gray.shape[0], 32, 48, 1)
    assert psnr(got, torch_reference(gray, box, (32, 48))) >= PSNR_DCT


def test_gray_frames_as_rgb_with_crop_and_size(gd):
    rgb = gd.read("gray-rst", colorspace="RGB")
    got = gd.read("gray-rst", crop=(9, 17, 64, 64), size=(32, 32), colorspace="RGB")
    assert got.shape == (2, 32, 32, 3)
    assert np.array_equal(got[..., 0], got[..., 2])
    assert psnr(got, torch_reference(rgb, (9, 17, 64, 64), (32, 32))) >= PSNR_DCT
    # Auto: gray videos stay one channel, also resized.
    assert gd.read("g", crop=(1, 2, 30, 40), size=10).shape == (2, 10, 10, 1)


def test_cmyk_frames_with_crop_and_size(tmp_path):
    frame = synthetic_frame(96, 128, seed=3)
    buf = io.BytesIO()
    Image.fromarray(frame).convert("CMYK").save(buf, "JPEG", quality=95)
    jpeg = buf.getvalue()
    assert _native.jpeg_info(jpeg).components == 4
    write_chunk(tmp_path, 0, {"cmyk": [jpeg, jpeg]})
    gd = GulpDirectory(tmp_path)
    full = gd.read("cmyk")
    assert full.shape == (2, 96, 128, 3) and psnr(full[0], frame) >= 35
    assert np.array_equal(gd.read("cmyk", crop=(10, 13, 50, 60)), full[:, 10:60, 13:73])
    assert np.array_equal(gd.read("cmyk", flip=True), full[:, :, ::-1])
    for dct in (True, False):
        got = gd.read("cmyk", crop=(10, 13, 64, 64), size=(32, 40), dct_scaling=dct)
        assert psnr(got, torch_reference(full, (10, 13, 64, 64), (32, 40))) >= PSNR_FULL
    gray = gd.read("cmyk", colorspace="GRAY")
    assert np.array_equal(
        gd.read("cmyk", crop=(5, 6, 40, 50), colorspace="GRAY"), gray[:, 5:45, 6:56]
    )


# ------------------------------------------------------------------------------------------------
# 8. GulpIngestor(restart_rows=True) end to end
# ------------------------------------------------------------------------------------------------
def _items():
    items = [
        {
            "id": f"v{i}",
            "meta": {"i": i},
            "frames": [synthetic_frame(120, 160, seed=10 * i + k) for k in range(3)],
        }
        for i in range(4)
    ]
    items.append({"id": "g", "meta": {}, "frames": [synthetic_frame(120, 160, gray=True)]})
    return items


@pytest.mark.parametrize("workers", [1, 2])
def test_ingestor_restart_rows_end_to_end(tmp_path, workers):
    out = tmp_path / "out"
    if not RUST_ENCODER:
        # The zune-jpeg build cannot write markers, and says so rather than ignore the option.
        with pytest.raises(ValueError, match="restart_rows needs the libjpeg-turbo build"):
            GulpIngestor(ListAdapter(_items()), out, 3, workers, restart_rows=True)
        return
    report = GulpIngestor(
        ListAdapter(_items()), out, 3, workers, restart_rows=True, progress=False
    )()
    assert report.videos == 5 and not report.failures
    assert [index_version(out, n) for n in (0, 1)] == [2, 2]
    gd = GulpDirectory(out)
    tables = restart_table(out, 0) + restart_table(out, 1)
    frames = chunk_frames(gd, 0) + chunk_frames(gd, 1)
    for jpeg, recorded in zip(frames, tables, strict=True):
        markers = scan_markers(jpeg)
        assert len(markers) == mcu_rows(jpeg) - 1 > 0
        assert recorded == markers
    for id_ in gd.keys():
        full = gd.read(id_)
        for top, left, h, w in edge_boxes(120, 160):
            assert np.array_equal(
                gd.read(id_, crop=(top, left, h, w)), full[:, top : top + h, left : left + w]
            )


def test_ingestor_default_writes_no_markers(tmp_path):
    GulpIngestor(ListAdapter(_items()[:2]), tmp_path, 3, 1, progress=False)()
    assert index_version(tmp_path) == 1
    gd = GulpDirectory(tmp_path)
    assert all(not scan_markers(bytes(v)) for v in gd.frame_bytes("v0"))
    assert not EncodeOptions().restart_rows
    if RUST_ENCODER:
        assert EncodeOptions(restart_rows=True).restart_rows


def test_markers_the_frame_does_not_have_are_not_used_and_check_reports_them(tmp_path):
    """An index with valid CRCs whose markers are not the frame's (a writer bug, or an index
    written for other bytes): cropped reads check the positions and decode the frame whole
    (pixels stay exact), and ``gulpio check`` names the frames."""
    write_chunk(tmp_path, 0, {"a": encode("4:2:0", True, 96, 128, n=2)})
    full = GulpDirectory(tmp_path).read("a")
    gidx = bytearray((tmp_path / "data_0.gidx").read_bytes())
    lay = restart_layout(bytes(gidx))
    for i in range(lay["markers"]):  # every marker one byte later, CRCs recomputed
        at = lay["markers_at"] + 4 * i
        struct.pack_into("<I", gidx, at, struct.unpack_from("<I", gidx, at)[0] + 1)
    table = bytes(gidx[lay["starts_at"] :])
    struct.pack_into("<I", gidx, 96, zlib.crc32(table))
    struct.pack_into("<I", gidx, 124, zlib.crc32(bytes(gidx[:124])))
    (tmp_path / "data_0.gidx").write_bytes(bytes(gidx))
    with warnings.catch_warnings():
        warnings.simplefilter("error", BrokenChunkWarning)  # the index itself is intact
        gd = GulpDirectory(tmp_path)
        assert np.array_equal(gd.read("a", crop=(40, 8, 30, 50)), full[:, 40:70, 8:58])
    result = gulpio_check(tmp_path, "--json")
    assert result.returncode == 1
    problems = json.loads(result.stdout)["problems"]
    assert {(p["kind"], p["video_id"], p["frame"]) for p in problems} == {
        ("restarts", "a", 0),
        ("restarts", "a", 1),
    }
