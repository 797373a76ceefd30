"""A frame's pixels never depend on what was decoded before it.

libjpeg keeps a decompressor's Huffman and quantization tables from one image to the next (for
"abbreviated" datastreams), so a decoder reused across frames decodes a frame that uses a table
without defining it with the previous frame's table. Such frames are common: MJPEG frames (what
webcams, IP cameras and AVI1 files hold) carry no DHT segment and mean the standard tables.
Found by the ``jpeg`` fuzz target run against libjpeg-turbo (docs/RELIABILITY.md, finding 6).

Every read here runs on one decode thread, so the frames really follow each other on one
decoder, and each outcome (pixels, or the error) is compared with the same frame read on its
own and, for the MJPEG frame, with the same frame carrying its tables explicitly, with either
backend (zune-jpeg, which refuses such frames, gets a copy with the tables written in).
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from gulpio_rs import GulpChunk, GulpDirectory
from gulpio_rs.errors import DecodeError
from gulpio_rs.utils import jpeg_bytes_to_img

FUZZ_FOUND = Path(__file__).resolve().parents[2] / "fuzz" / "artifacts-found"


def picture(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:64, 0:96]
    img = np.stack([(x * 2) % 256, (y * 4) % 256, ((x ^ y) * 3) % 256], -1)
    return np.clip(img + rng.integers(-20, 20, img.shape), 0, 255).astype(np.uint8)


def pil_jpeg(img: np.ndarray, **options) -> bytes:
    out = io.BytesIO()
    Image.fromarray(img).save(out, "JPEG", quality=90, **options)
    return out.getvalue()


def without_dht(jpeg: bytes) -> bytes:
    """The JPEG with its Huffman table segments removed, as an MJPEG frame stores it."""
    out, i = bytearray(jpeg[:2]), 2
    while i < len(jpeg):
        marker = jpeg[i + 1]
        if marker == 0xDA:
            return bytes(out + jpeg[i:])
        length = int.from_bytes(jpeg[i + 2 : i + 4], "big")
        if marker != 0xC4:
            out += jpeg[i : i + 2 + length]
        i += 2 + length
    raise AssertionError("no scan")


@pytest.fixture
def frames() -> dict[str, bytes]:
    standard = pil_jpeg(picture(0))
    mjpeg = without_dht(standard)
    assert b"\xff\xc4" not in mjpeg[: mjpeg.index(b"\xff\xda")]
    return {
        "standard": standard,  # the standard tables, written out
        "mjpeg": mjpeg,  # the same frame relying on them
        "optimized": pil_jpeg(picture(1), optimize=True),  # tables of its own
    }


@pytest.fixture
def gulp(tmp_path: Path, frames: dict[str, bytes]) -> GulpDirectory:
    order = ["optimized", "mjpeg", "optimized", "mjpeg", "standard"]
    chunk = GulpChunk(tmp_path / "data_0.gulp", tmp_path / "meta_0.gmeta")
    with chunk.open("wb"):
        chunk.append("mixed", {"order": order}, [frames[k] for k in order])
        chunk.append("mjpeg", {}, [frames["mjpeg"]])
        chunk.append("optimized", {}, [frames["optimized"]])
    return GulpDirectory(tmp_path)


def test_mjpeg_frame_after_one_with_its_own_tables(gulp, monkeypatch):
    monkeypatch.setenv("GULPIO_NUM_THREADS", "1")
    alone = gulp["mjpeg"][0][0]
    optimized = gulp["optimized"][0][0]
    for k in range(4):
        got = gulp["mixed", [k]][0][0]
        np.testing.assert_array_equal(got, alone if k % 2 else optimized, f"frame {k} alone")
    # The whole video in one read; the standard tables written out or implied: one frame.
    mixed, _ = gulp["mixed"]
    for k in (1, 3, 4):
        np.testing.assert_array_equal(mixed[k], alone, err_msg=f"frame {k}")
    np.testing.assert_array_equal(mixed[0], optimized)


@pytest.mark.parametrize("fast_decode", [False, True])
def test_read_batch_in_any_order(gulp, fast_decode):
    kw = {"fast_decode": fast_decode, "threads": 1}
    one = gulp.read_batch(["mjpeg"], **kw)[0]
    for ids in (["optimized", "mjpeg"], ["mjpeg", "optimized", "mjpeg"]):
        got = gulp.read_batch(ids, **kw)
        for k, clip in zip(ids, got, strict=True):
            if k == "mjpeg":
                np.testing.assert_array_equal(clip, one, err_msg=str(ids))


def test_bytes_decoder_after_other_frames(frames):
    reference = jpeg_bytes_to_img(frames["standard"])
    for before in ("optimized", "standard", "mjpeg"):
        jpeg_bytes_to_img(frames[before])
        np.testing.assert_array_equal(jpeg_bytes_to_img(frames["mjpeg"]), reference, before)


def test_fuzz_found_frame_decodes_the_same_every_time(frames):
    # A baseline frame whose first scan uses an AC table a later DHT defines: libjpeg-turbo
    # decodes it with the standard table on a new decoder, and did with its own later one on a
    # reused decoder; zune-jpeg refuses it (a component without a quantization table).
    jpeg = (FUZZ_FOUND / "jpeg-table-used-before-defined.jpg").read_bytes()

    def outcome() -> np.ndarray | str:
        try:
            return jpeg_bytes_to_img(jpeg)
        except DecodeError as e:
            return str(e)

    first = outcome()
    for before in (jpeg, frames["optimized"], jpeg):
        try:
            jpeg_bytes_to_img(before)
        except DecodeError:
            pass
        again = outcome()
        if isinstance(first, str) or isinstance(again, str):
            assert again == first
        else:
            np.testing.assert_array_equal(again, first)
