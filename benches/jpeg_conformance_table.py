"""JPEG decoder conformance table: gulpio-rs's built-in decoder against Pillow (libjpeg-turbo).

Writes ``docs/JPEG-CONFORMANCE.md``: for every file of ``shared/data/jpeg-conformance`` and for
JPEGs generated here with Pillow and OpenCV (baseline and progressive, 4:4:4 / 4:2:2 / 4:2:0 /
4:4:0 / 4:1:1 chroma subsampling, restart intervals, grayscale, CMYK, YCCK, RGB without colour
transform, 1x1 and odd sizes, optimized Huffman tables, qualities 50/90/100, on synthetic frames
and on a crop of a real photo), the same bytes are decoded by ``gulpio_rs._native.decode_jpeg``
and by Pillow, and the table gives the outcome and the PSNR between the two decodes.

Rules (the same as ``tests/decode/test_jpeg_conformance.py``, which checks them; this script only
reports): a JPEG Pillow decodes must decode to the same size within ``--min-psnr`` dB (40) of
Pillow's decode, or raise ``UnsupportedJpegError`` if it is arithmetic-coded or 12-bit; a JPEG
Pillow cannot decode must raise ``DecodeError``. Pillow's decode is converted to RGB (``L`` for
grayscale), without applying EXIF orientation. The "luma PSNR" column compares
``decode_jpeg(..., "GRAY")`` with libjpeg's own Y channel (Pillow ``draft("L")``) for 3-component
JPEGs, which separates luma (IDCT) differences from chroma upsampling differences.

The script is standalone on purpose (the tests import nothing from here and vice versa); its
variant list and synthetic frames mirror the tests', so the numbers are the ones they assert.
OpenCV (``opencv-python-headless``) is optional: without it the OpenCV rows are left out.

Usage::

    python benches/jpeg_conformance_table.py                # writes docs/JPEG-CONFORMANCE.md
    python benches/jpeg_conformance_table.py --out - --corpus /path/to/jpeg-conformance
"""

from __future__ import annotations

import argparse
import io
import json
import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import PIL
from PIL import Image

import gulpio_rs
from gulpio_rs import _native

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benches"))
from _videos import jpeg_corpus  # noqa: E402

DEFAULT_CORPUS = jpeg_corpus()
DEFAULT_OUT = REPO / "docs" / "JPEG-CONFORMANCE.md"
MIN_PSNR = 40.0

# ---------------------------------------------------------------------------------------------
# Content, PSNR, header parsing, Pillow reference
# ---------------------------------------------------------------------------------------------


def synthetic_frame(height: int, width: int, *, gray: bool = False, seed: int = 0) -> np.ndarray:
    """Smooth gradients, flat shapes and sensor noise (same as tests/helpers.py)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    fy = y / max(height - 1, 1)
    fx = x / max(width - 1, 1)
    phase = rng.uniform(0, 2 * np.pi)
    img = np.stack(
        [
            255 * fx,
            255 * fy,
            127.5 + 120 * np.sin(2 * np.pi * rng.uniform(0.5, 2) * (fx + fy) + phase),
        ],
        axis=-1,
    )
    for _ in range(3):
        cy, cx = rng.uniform(0, height), rng.uniform(0, width)
        r = rng.uniform(0.1, 0.35) * min(height, width)
        img[(y - cy) ** 2 + (x - cx) ** 2 <= r**2] = rng.uniform(0, 255, 3)
        top, left = rng.integers(0, height), rng.integers(0, width)
        img[top : top + max(1, height // 4), left : left + max(1, width // 3)] = rng.uniform(
            0, 255, 3
        )
    img += rng.normal(0, 6, img.shape)
    img = np.clip(np.rint(img), 0, 255).astype(np.uint8)
    if gray:
        img = np.rint(img @ np.array([0.299, 0.587, 0.114])).clip(0, 255).astype(np.uint8)
    return np.ascontiguousarray(img)


def photo_crop(corpus: Path) -> np.ndarray | None:
    """A 160x120 crop of a real photo (pillow_flower2.jpg), or None without the corpus."""
    path = corpus / "pillow_flower2.jpg"
    if not path.is_file():
        return None
    return np.asarray(Image.open(path).convert("RGB"))[50:170, 70:230].copy()


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse)


SOF_MARKERS = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
ARITHMETIC_SOF = {0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


def sof_header(data: bytes) -> dict | None:
    """First SOF segment: marker, precision, height, width, components (None if absent)."""
    i = 2
    while i + 4 <= len(data):
        if data[i] != 0xFF:
            i += 1
            continue
        marker = data[i + 1]
        if marker == 0xFF or marker == 0x00 or 0xD0 <= marker <= 0xD8:
            i += 1 if marker == 0xFF else 2
            continue
        if marker in (0xD9, 0xDA):
            return None
        length = int.from_bytes(data[i + 2 : i + 4], "big")
        if marker in SOF_MARKERS and i + 10 <= len(data):
            return {
                "marker": marker,
                "precision": data[i + 4],
                "height": int.from_bytes(data[i + 5 : i + 7], "big"),
                "width": int.from_bytes(data[i + 7 : i + 9], "big"),
                "components": data[i + 9],
            }
        i += 2 + length
    return None


def unsupported_by_design(data: bytes) -> bool:
    """Arithmetic-coded or 12-bit: the only JPEGs allowed to raise UnsupportedJpegError."""
    sof = sof_header(data)
    return sof is not None and (sof["marker"] in ARITHMETIC_SOF or sof["precision"] != 8)


def pillow_decode(data: bytes) -> np.ndarray:
    """Pillow's decode as (H, W, C): RGB, or L (C = 1) for grayscale; no EXIF transpose."""
    im = Image.open(io.BytesIO(data))
    arr = np.asarray(im.convert("L" if im.mode in ("L", "1", "I;16") else "RGB"))
    return arr.reshape(arr.shape[0], arr.shape[1], -1)


def pillow_luma(data: bytes) -> np.ndarray:
    """libjpeg's own Y channel for YCbCr JPEGs (no chroma upsampling), else Pillow's L."""
    im = Image.open(io.BytesIO(data))
    im.draft("L", im.size)
    return np.asarray(im.convert("L"))[..., None]


# ---------------------------------------------------------------------------------------------
# Generated variants
# ---------------------------------------------------------------------------------------------

SIZE = (120, 160)  # default (height, width); deliberately not a multiple of 16 rows
ODD_SIZES_WH = [(1, 1), (17, 9), (33, 65), (1, 97)]


def pil_jpeg(frame: np.ndarray, mode: str | None = None, **options) -> bytes:
    im = Image.fromarray(frame)
    if mode is not None:
        im = im.convert(mode)
    out = io.BytesIO()
    im.save(out, "JPEG", **{"quality": 90, **options})
    return out.getvalue()


def adobe_transform_offset(data: bytes) -> int:
    """Offset of the colour-transform byte of the Adobe APP14 segment."""
    at = data.find(b"\xff\xee")
    while at >= 0 and data[at + 4 : at + 9] != b"Adobe":
        at = data.find(b"\xff\xee", at + 2)
    if at < 0:
        raise ValueError("no Adobe APP14 segment")
    return at + 4 + 11  # marker, length, "Adobe", version, flags0, flags1


def ycck_jpeg(frame: np.ndarray, **options) -> bytes:
    """A YCCK JPEG (Adobe transform 2), which neither Pillow nor OpenCV writes.

    Pillow stores CMYK inverted (Adobe convention) with transform 0. libjpeg's YCCK is those
    stored values with C, M, Y run through the RGB->YCbCr equations on (255 - stored), i.e. on
    the un-inverted C, M, Y; K is kept. So: compute that YCC, hand Pillow the inverse of what
    must be stored (it inverts again), and flip the transform byte to 2.
    """
    cmyk = np.asarray(Image.fromarray(frame).convert("CMYK")).astype(np.float64)
    c, m, y, k = (cmyk[..., i] for i in range(4))
    luma = 0.299 * c + 0.587 * m + 0.114 * y
    cb = 128 - 0.168736 * c - 0.331264 * m + 0.5 * y
    cr = 128 + 0.5 * c - 0.418688 * m - 0.081312 * y
    stored = np.stack([luma, cb, cr, 255 - k], axis=-1)
    given = np.clip(np.rint(255 - stored), 0, 255).astype(np.uint8)
    out = io.BytesIO()
    Image.fromarray(given, "CMYK").save(out, "JPEG", **{"quality": 90, **options})
    data = bytearray(out.getvalue())
    data[adobe_transform_offset(bytes(data))] = 2
    return bytes(data)


def cv2_jpeg(frame: np.ndarray, **params) -> bytes:
    """OpenCV (libjpeg-turbo) encode; params by name: quality, progressive, optimize,
    rst_interval, sampling ("444", "422", "420", "440", "411")."""
    import cv2

    flags = {
        "quality": cv2.IMWRITE_JPEG_QUALITY,
        "progressive": cv2.IMWRITE_JPEG_PROGRESSIVE,
        "optimize": cv2.IMWRITE_JPEG_OPTIMIZE,
        "rst_interval": cv2.IMWRITE_JPEG_RST_INTERVAL,
        "sampling": cv2.IMWRITE_JPEG_SAMPLING_FACTOR,
    }
    params = {"quality": 90, **params}
    args: list[int] = []
    for name, value in params.items():
        if name == "sampling":
            value = getattr(cv2, f"IMWRITE_JPEG_SAMPLING_FACTOR_{value}")
        args += [flags[name], int(value)]
    image = frame if frame.ndim == 2 else frame[..., ::-1]  # RGB -> BGR
    ok, encoded = cv2.imencode(".jpg", np.ascontiguousarray(image), args)
    if not ok:
        raise RuntimeError(f"cv2.imencode failed for {params}")
    return encoded.tobytes()


@dataclass(frozen=True)
class Variant:
    id: str  # "<encoder>-<variant>"
    make: Callable[[], bytes]


def generated_variants(corpus: Path | None = None) -> list[Variant]:
    """Every generated JPEG variant (OpenCV ones only if cv2 imports; photo ones only with
    the corpus)."""
    h, w = SIZE
    rgb = synthetic_frame(h, w, seed=1)
    gray = synthetic_frame(h, w, gray=True, seed=2)
    photo = photo_crop(corpus) if corpus is not None else None
    out: list[Variant] = []

    def add(id_: str, make: Callable[[], bytes]) -> None:
        out.append(Variant(id_, make))

    for ss in ("4:4:4", "4:2:2", "4:2:0"):
        tag = ss.replace(":", "")
        add(f"pillow-baseline-{tag}", lambda ss=ss: pil_jpeg(rgb, subsampling=ss))
        add(
            f"pillow-progressive-{tag}",
            lambda ss=ss: pil_jpeg(rgb, subsampling=ss, progressive=True),
        )
    add("pillow-restart-1-block-420", lambda: pil_jpeg(rgb, restart_marker_blocks=1))
    add("pillow-restart-2-rows-444", lambda: pil_jpeg(rgb, subsampling=0, restart_marker_rows=2))
    add(
        "pillow-progressive-restart-1-row-420",
        lambda: pil_jpeg(rgb, progressive=True, restart_marker_rows=1),
    )
    add("pillow-optimized-420", lambda: pil_jpeg(rgb, optimize=True))
    add(
        "pillow-optimized-progressive-444",
        lambda: pil_jpeg(rgb, subsampling=0, optimize=True, progressive=True),
    )
    for q in (50, 90, 100):
        add(f"pillow-q{q}-420", lambda q=q: pil_jpeg(rgb, quality=q))
        if photo is not None:
            add(f"pillow-photo-q{q}-420", lambda q=q: pil_jpeg(photo, quality=q))
    add("pillow-q100-444", lambda: pil_jpeg(rgb, quality=100, subsampling=0))
    add("pillow-rgb-no-transform", lambda: pil_jpeg(rgb, subsampling=0, keep_rgb=True))
    add("pillow-gray", lambda: pil_jpeg(gray))
    add("pillow-gray-progressive", lambda: pil_jpeg(gray, progressive=True))
    add("pillow-cmyk", lambda: pil_jpeg(rgb, "CMYK"))
    add("pillow-cmyk-progressive", lambda: pil_jpeg(rgb, "CMYK", progressive=True))
    add("pillow-ycck", lambda: ycck_jpeg(rgb))
    add("pillow-ycck-progressive", lambda: ycck_jpeg(rgb, progressive=True))
    for sw, sh in ODD_SIZES_WH:
        small = synthetic_frame(sh, sw, seed=sw * 1000 + sh)
        for ss in ("4:4:4", "4:2:0"):
            add(
                f"pillow-{sw}x{sh}-{ss.replace(':', '')}",
                lambda small=small, ss=ss: pil_jpeg(small, subsampling=ss),
            )
        add(
            f"pillow-{sw}x{sh}-gray",
            lambda sh=sh, sw=sw: pil_jpeg(synthetic_frame(sh, sw, gray=True, seed=sw + sh)),
        )

    try:
        import cv2  # noqa: F401
    except ImportError:
        return out
    for ss in ("444", "422", "420", "440", "411"):
        add(f"opencv-baseline-{ss}", lambda ss=ss: cv2_jpeg(rgb, sampling=ss))
    for ss in ("444", "420", "440"):
        add(f"opencv-progressive-{ss}", lambda ss=ss: cv2_jpeg(rgb, sampling=ss, progressive=1))
    add("opencv-restart-1-420", lambda: cv2_jpeg(rgb, rst_interval=1))
    add("opencv-restart-7-444", lambda: cv2_jpeg(rgb, rst_interval=7, sampling="444"))
    add("opencv-restart-3-440", lambda: cv2_jpeg(rgb, rst_interval=3, sampling="440"))
    add(
        "opencv-progressive-restart-2-420",
        lambda: cv2_jpeg(rgb, rst_interval=2, progressive=1),
    )
    add("opencv-optimized-420", lambda: cv2_jpeg(rgb, optimize=1))
    for q in (50, 90, 100):
        add(f"opencv-q{q}-420", lambda q=q: cv2_jpeg(rgb, quality=q))
        if photo is not None:
            add(f"opencv-photo-q{q}-420", lambda q=q: cv2_jpeg(photo, quality=q))
    add("opencv-gray", lambda: cv2_jpeg(gray))
    add("opencv-gray-progressive", lambda: cv2_jpeg(gray, progressive=1))
    for sw, sh in ODD_SIZES_WH:
        small = synthetic_frame(sh, sw, seed=sw * 1000 + sh)
        for ss in ("444", "420", "440"):
            add(f"opencv-{sw}x{sh}-{ss}", lambda small=small, ss=ss: cv2_jpeg(small, sampling=ss))
    return out


def jpeg_with_red_padding(edge: str, sampling: str) -> bytes:
    """A 6-pixel-wide (``edge="right"``) or -high (``"bottom"``) blue q100 JPEG whose MCU
    padding beyond that edge is red: encoded as 32x32, then the frame header patched to 6."""
    img = np.zeros((32, 32, 3), np.uint8)
    img[:] = (0, 0, 255)
    if edge == "right":
        img[:, 6:] = (255, 0, 0)
    else:
        img[6:, :] = (255, 0, 0)
    if sampling == "4:4:0":
        data = cv2_jpeg(img, quality=100, sampling="440")
    else:
        data = pil_jpeg(img, quality=100, subsampling=sampling)
    offset = data.index(b"\xff\xc0") + (7 if edge == "right" else 5)
    return data[:offset] + (6).to_bytes(2, "big") + data[offset + 2 :]


PADDING_CASES = [("right", "4:2:2"), ("right", "4:2:0"), ("bottom", "4:2:0"), ("bottom", "4:4:0")]


def padding_rows() -> list[str]:
    """Markdown rows: does chroma from the MCU padding bleed into the last column / row?"""
    rows = []
    for edge, sampling in PADDING_CASES:
        try:
            data = jpeg_with_red_padding(edge, sampling)
        except ImportError:
            continue  # 4:4:0 needs OpenCV
        ours, ref = _native.decode_jpeg(data), pillow_decode(data)
        spot = (-1, 0) if edge == "bottom" else (0, -1)
        worst = int(np.abs(ours.astype(int) - ref.astype(int)).max())
        rows.append(
            f"| {edge} | {sampling} | {ours[spot].tolist()} | {ref[spot].tolist()} | {worst} | "
            f"{'pass' if worst <= 8 else '**FAIL**'} |"
        )
    return rows


NOT_GENERATED = [
    (
        "pillow-*-440",
        "Pillow's `subsampling` has no 4:4:0 (it accepts 4:4:4, 4:2:2, 4:2:0; 4:1:1 is "
        "mapped to 4:2:0); 4:4:0 is covered by the OpenCV rows",
    ),
    (
        "opencv-cmyk / opencv-ycck",
        "OpenCV writes only grayscale and YCbCr JPEGs; CMYK comes from Pillow, YCCK is "
        "crafted from Pillow's CMYK output (Adobe transform byte patched to 2)",
    ),
]


# ---------------------------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------------------------


@dataclass
class Row:
    source: str
    name: str
    size: str  # W x H as the header declares it
    outcome: str  # "decoded", "UnsupportedJpegError", "DecodeError", "other: ..."
    psnr: float | None
    luma_psnr: float | None
    ok: bool
    note: str = ""


def evaluate(data: bytes, pil_decodes: bool, min_psnr: float = MIN_PSNR):
    """(outcome, psnr, luma_psnr, ok, note) of gulpio-rs on ``data`` against Pillow."""
    try:
        ours = _native.decode_jpeg(data)
    except gulpio_rs.UnsupportedJpegError:
        ok = not pil_decodes or unsupported_by_design(data)
        note = "" if ok else "Pillow decodes it and it is neither arithmetic nor 12-bit"
        return "UnsupportedJpegError", None, None, ok, note
    except gulpio_rs.DecodeError as e:
        ok = not pil_decodes
        return "DecodeError", None, None, ok, "" if ok else f"Pillow decodes it; we: {e}"
    except Exception as e:  # noqa: BLE001 - reported, never expected
        return f"other: {type(e).__name__}", None, None, False, str(e)
    if not pil_decodes:
        return "decoded", None, None, False, "Pillow cannot decode it but we returned an image"
    ref = pillow_decode(data)
    if ours.shape != ref.shape:
        return "decoded", None, None, False, f"shape {ours.shape} != Pillow {ref.shape}"
    value = psnr(ours, ref)
    luma_value, note = None, ""
    if ours.shape[2] == 3:
        try:
            luma_value = psnr(_native.decode_jpeg(data, "GRAY"), pillow_luma(data))
        except gulpio_rs.DecodeError as e:
            note = f'colorspace="GRAY" raises {type(e).__name__}: {e}'
        if luma_value is not None and luma_value < min_psnr:
            note = 'colorspace="GRAY" output is far from libjpeg\'s luma'
    return "decoded", value, luma_value, value >= min_psnr, note


def corpus_rows(corpus: Path, min_psnr: float = MIN_PSNR) -> list[Row]:
    rows = []
    for entry in json.loads((corpus / "manifest.json").read_text()):
        data = (corpus / entry["file"]).read_bytes()
        sof = sof_header(data)
        size = f"{sof['width']}x{sof['height']}" if sof else "?"
        outcome, value, luma, ok, note = evaluate(data, entry["pil_decodes"], min_psnr)
        if not entry["pil_decodes"]:
            pil_error = re.sub(r" at 0x[0-9a-f]+", "", entry.get("pil_error", ""))
            note = note or f"Pillow: {pil_error}"
        rows.append(Row("corpus", entry["file"], size, outcome, value, luma, ok, note))
    return rows


def generated_rows(corpus: Path | None, min_psnr: float = MIN_PSNR) -> list[Row]:
    rows = []
    for variant in generated_variants(corpus):
        data = variant.make()
        sof = sof_header(data)
        size = f"{sof['width']}x{sof['height']}" if sof else "?"
        outcome, value, luma, ok, note = evaluate(data, True, min_psnr)
        source, _, name = variant.id.partition("-")
        rows.append(Row(source, name, size, outcome, value, luma, ok, note))
    return rows


def fmt_db(value: float | None) -> str:
    if value is None:
        return "-"
    return "inf" if math.isinf(value) else f"{value:.1f}"


def markdown(rows: list[Row], corpus: Path | None, min_psnr: float) -> str:
    failed = [r for r in rows if not r.ok]
    lines = [
        "# JPEG decoder conformance",
        "",
        "Generated by `python benches/jpeg_conformance_table.py`; checked by",
        "`tests/decode/test_jpeg_conformance.py`. Each JPEG is decoded by gulpio-rs's built-in "
        "decoder",  # one line of the table's text
        f"(zune-jpeg, strict mode) and by Pillow {PIL.__version__} (libjpeg-turbo); PSNR is",
        "between the two RGB (or gray) decodes of the same bytes, over all channels. Luma PSNR",
        'compares `decode_jpeg(data, "GRAY")` with libjpeg\'s Y channel (Pillow `draft("L")`),',
        "so a low PSNR with a high luma PSNR is a chroma-upsampling difference.",
        "",
        f"Pass rule: Pillow decodes it -> same size and PSNR >= {min_psnr:g} dB, or",
        "`UnsupportedJpegError` for arithmetic-coded / 12-bit files; Pillow cannot decode it ->",
        "`DecodeError`. Sizes are W x H as the frame header declares them.",
        "",
        f"Result against that strict rule: {len(rows) - len(failed)} of {len(rows)} pass"
        + (f"; **{len(failed)} fail** (marked FAIL)." if failed else "."),
        "",
        "## Known differences (accepted by `tests/decode/test_jpeg_conformance.py`, with reasons)",
        "",
        "- **Chroma planes at most 2 samples wide or high** (`pillow_app13.jpg` 4x4, `1x97-420`):",
        "  libjpeg replicates chroma samples there instead of interpolating (`jdsample.c`);",
        "  zune-jpeg interpolates. Luma is identical; only these tiny images are affected.",
        "- **`pillow_hopper_bad_exif.jpg`**: junk bytes inside the entropy-coded data. Pillow",
        "  decodes it because it ignores libjpeg's warnings; libjpeg-turbo with warnings as",
        "  errors (`simplejpeg strict=True`) refuses it, and so do we (`DecodeError`).",
        "- **Right/bottom edge not a multiple of the MCU size, subsampled chroma**: zune-jpeg",
        "  interpolates the last chroma sample with the encoder's MCU padding where libjpeg",
        "  replicates the last real sample. With padding crafted to differ from the edge (the",
        "  table below) the last column/row is tinted; with encoders that pad by replication",
        "  (libjpeg, OpenCV) the difference stays in the last column (<= 40 levels at a hard",
        "  colour edge there) and odd-size frames of real content decode at >= 50 dB.",
        "- **A scan cut short and closed with an EOI marker** decodes (missing blocks filled)",
        "  as it does with libjpeg: the decoder does not report the early EOI. A truncated file",
        "  (no EOI) raises `DecodeError`; stored frames are protected by their CRC32.",
        "",
    ]
    if corpus is None:
        lines += [
            "The corpus (shared/data/jpeg-conformance) was not found: generated rows only.",
            "",
        ]
    lines += [
        "| source | file / variant | size | outcome | PSNR dB | luma PSNR dB | verdict | note |",
        "|---|---|---|---|---:|---:|---|---|",
    ]
    for r in rows:
        note = r.note.replace("|", "\\|").replace("\n", " ")
        lines.append(
            f"| {r.source} | {r.name} | {r.size} | {r.outcome} | {fmt_db(r.psnr)} | "
            f"{fmt_db(r.luma_psnr)} | {'pass' if r.ok else '**FAIL**'} | {note} |"
        )
    lines += [
        "",
        "## Chroma padding at the image edge",
        "",
        "A blue image 6 pixels wide (high) whose MCU padding beyond the edge is red (the",
        "standard leaves padding to the encoder). libjpeg replicates the last chroma sample when",
        "upsampling, so padding never shows; the pass rule is max |diff| <= 8 against Pillow.",
        "",
        "| edge | sampling | our last pixel | Pillow's | max abs diff | verdict |",
        "|---|---|---|---|---:|---|",
        *padding_rows(),
    ]
    lines += ["", "## Not generated", "", "| variant | why |", "|---|---|"]
    lines += [f"| {name} | {why} |" for name, why in NOT_GENERATED]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="corpus folder")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="markdown file, or - for stdout")
    parser.add_argument("--min-psnr", type=float, default=MIN_PSNR, help="pass threshold (dB)")
    args = parser.parse_args(argv)

    corpus = args.corpus if (args.corpus / "manifest.json").is_file() else None
    rows = (corpus_rows(corpus, args.min_psnr) if corpus else []) + generated_rows(
        corpus, args.min_psnr
    )
    text = markdown(rows, corpus, args.min_psnr)
    if args.out == "-":
        sys.stdout.write(text)
    else:
        Path(args.out).write_text(text)
        failed = sum(not r.ok for r in rows)
        print(f"wrote {args.out}: {len(rows)} rows, {failed} failing", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
