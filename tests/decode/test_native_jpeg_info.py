"""``_native.jpeg_info``: the frame header as the Rust marker walk reads it."""

from __future__ import annotations

import io

import numpy as np
import pytest
from helpers import JPEG_CORPUS, NO_CORPUS
from PIL import Image

from gulpio_rs import _native
from gulpio_rs.errors import DecodeError

CONFORMANCE = JPEG_CORPUS


def _jpeg(mode: str, size=(40, 24), **save) -> bytes:
    rng = np.random.default_rng(1)
    channels = {"L": 1, "RGB": 3, "CMYK": 4}[mode]
    arr = rng.integers(0, 255, (size[1], size[0], channels), dtype=np.uint8)
    img = Image.fromarray(arr[:, :, 0] if channels == 1 else arr, mode)
    buf = io.BytesIO()
    img.save(buf, "JPEG", **save)
    return buf.getvalue()


@pytest.mark.parametrize(
    ("mode", "save", "components", "sof", "progressive"),
    [
        ("RGB", {}, 3, 0xC0, False),
        ("RGB", {"progressive": True}, 3, 0xC2, True),
        ("L", {}, 1, 0xC0, False),
        ("CMYK", {}, 4, 0xC0, False),
    ],
)
def test_header_fields(mode, save, components, sof, progressive):
    info = _native.jpeg_info(_jpeg(mode, **save))
    assert isinstance(info, _native.JpegInfo)
    assert (info.width, info.height) == (40, 24)
    assert info.components == components
    assert info.precision == 8
    assert info.sof == sof
    assert info.progressive is progressive
    assert info.arithmetic is False
    assert info.lossless is False
    assert f"sof=0x{sof:02X}" in repr(info)


def test_frozen():
    info = _native.jpeg_info(_jpeg("RGB"))
    with pytest.raises(AttributeError):
        info.width = 1


def test_fill_bytes_before_the_frame_header():
    data = _jpeg("RGB")
    # Three extra 0xFF fill bytes before the second marker: still the same header.
    padded = data[:2] + b"\xff\xff\xff" + data[2:]
    assert _native.jpeg_info(padded).width == 40


def test_arithmetic_coded():
    path = CONFORMANCE / "ljt_testimgari.jpg"
    if not path.exists():
        pytest.skip(NO_CORPUS)
    info = _native.jpeg_info(path.read_bytes())
    assert info.arithmetic is True
    assert info.lossless is False
    assert 0xC9 <= info.sof <= 0xCB


@pytest.mark.parametrize(
    "data", [b"", b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff\xe0\x00\x10JF", b"\xff\xd8\xff\xd9"]
)
def test_not_a_jpeg_is_a_decode_error(data):
    with pytest.raises(DecodeError):
        _native.jpeg_info(data)
