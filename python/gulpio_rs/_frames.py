"""Turning an adapter's frames into the JPEG bytes a chunk stores.

Frames arrive as uint8 arrays, PIL images, JPEG bytes or image file paths. Already-encoded
JPEGs are stored as they are (a second lossy encode only loses quality) once a strict decode
has shown they are whole; everything else is converted to RGB or gray, resized by the Rust
core when asked, and encoded with libjpeg-turbo through simplejpeg. Both the resize and the
encoder release the GIL, so a thread pool spreads one video's frames over the cores.

Why simplejpeg and not a Rust encoder: on this project's machine libjpeg-turbo encoded
227x128 q90 4:2:0 frames at 11.6k frames/s against 3.9k for the jpeg-encoder crate with AVX2,
at equal size and PSNR (docs/DECISIONS.md).
"""

from __future__ import annotations

import io
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import simplejpeg
from PIL import Image

from . import _native
from .errors import DecodeError, UnsupportedJpegError

_SUBSAMPLING = {"4:4:4": "444", "4:2:2": "422", "4:2:0": "420", "4:4:0": "440"}


@dataclass(frozen=True)
class EncodeOptions:
    """How frames are stored: JPEG ``quality`` (1-100), chroma ``subsampling`` (``"4:2:0"``,
    ``"4:2:2"``, ``"4:4:4"`` or ``"4:4:0"``), and ``threads`` for resize/encode/check."""

    quality: int = 90
    subsampling: str = "4:2:0"
    threads: int = 1

    def __post_init__(self):
        if not 1 <= int(self.quality) <= 100:
            raise ValueError(f"quality must be in 1..100, not {self.quality}")
        if self.subsampling not in _SUBSAMPLING and self.subsampling not in _SUBSAMPLING.values():
            raise ValueError(
                f"subsampling must be one of {sorted(_SUBSAMPLING)}, not {self.subsampling!r}"
            )
        if int(self.threads) < 1:
            raise ValueError(f"threads must be >= 1, not {self.threads}")

    @property
    def simplejpeg_subsampling(self) -> str:
        return _SUBSAMPLING.get(self.subsampling, self.subsampling)


def _is_jpeg(data) -> bool:
    return bytes(data[:3]) == b"\xff\xd8\xff"


def _pil_to_array(img: Image.Image) -> np.ndarray:
    """RGB, or gray for one-channel images; palette, alpha, CMYK and 16-bit modes converted."""
    if img.mode in ("L", "RGB"):
        return np.asarray(img)
    if img.mode in ("I;16", "I;16B", "I;16L", "I"):
        # Scale 16/32-bit gray to 8 bits instead of letting PIL clip it.
        arr = np.asarray(img, dtype=np.float64)
        top = 65535.0 if img.mode.startswith("I;16") else max(float(arr.max()), 1.0)
        return np.clip(np.rint(arr * (255.0 / top)), 0, 255).astype(np.uint8)
    if img.mode in ("1", "LA"):
        return np.asarray(img.convert("L"))
    return np.asarray(img.convert("RGB"))


def load_image(path) -> np.ndarray | bytes:
    """An image file as JPEG bytes (if it is a JPEG) or as a uint8 array."""
    with open(path, "rb") as f:
        data = f.read()
    if _is_jpeg(data):
        return data
    try:
        with Image.open(path) as img:
            img.load()
            return _pil_to_array(img)
    except (OSError, ValueError, SyntaxError) as e:
        raise DecodeError(f"{os.fspath(path)}: cannot read image: {e}") from e


def to_array(frame) -> np.ndarray:
    """A frame as a C-contiguous uint8 ``HxW`` (gray) or ``HxWx3`` (RGB) array."""
    if isinstance(frame, Image.Image):
        return _pil_to_array(frame)
    arr = np.asarray(frame)
    if arr.dtype == np.bool_:
        arr = arr.astype(np.uint8) * 255
    if arr.dtype != np.uint8:
        raise ValueError(f"frames must be uint8 arrays, got dtype {arr.dtype}")
    if arr.ndim == 3 and arr.shape[2] in (1, 2):  # gray, gray + alpha
        arr = arr[:, :, 0]
    elif arr.ndim == 3 and arr.shape[2] == 4:  # RGBA: drop alpha, as PIL's convert does
        arr = arr[:, :, :3]
    if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[2] != 3):
        raise ValueError(f"frames must be HxW, HxWx1, HxWx3 or HxWx4 arrays, got {arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"frame has an empty shape {arr.shape}")
    return np.ascontiguousarray(arr)


def _encode(arr: np.ndarray, opts: EncodeOptions) -> bytes:
    if arr.ndim == 2:
        return simplejpeg.encode_jpeg(arr[:, :, None], quality=opts.quality, colorspace="Gray")
    return simplejpeg.encode_jpeg(
        arr, quality=opts.quality, colorspace="RGB", colorsubsampling=opts.simplejpeg_subsampling
    )


def _portable(data: bytes) -> bool:
    """Baseline, extended or progressive Huffman-coded 8-bit: what every gulpio reader (both
    builds of this one, gulpio2's simplejpeg) decodes. Not arithmetic-coded, lossless or
    12-bit. Unknown layouts count as portable; the strict decode judges them."""
    i = 2
    while i + 4 <= len(data) and data[i] == 0xFF:
        marker = data[i + 1]
        if marker in (0xDA, 0xD9):
            break
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            precision = data[i + 4] if i + 4 < len(data) else 8
            return marker in (0xC0, 0xC1, 0xC2) and precision == 8
        i += 2 + int.from_bytes(data[i + 2 : i + 4], "big")
    return True


def _check_jpeg(data: bytes, opts: EncodeOptions) -> bytes:
    """The JPEG itself when it is whole and every gulpio reader can read it back with the same
    shape; otherwise decoded and encoded again. A full strict decode: a truncated or damaged
    JPEG must not be stored as if it were whole."""
    try:
        if not _portable(data):
            raise UnsupportedJpegError("not baseline/progressive 8-bit Huffman")
        arr = _native.decode_jpeg(data)
    except UnsupportedJpegError:
        # Arithmetic-coded or 12-bit: readers may not decode it; store a baseline JPEG.
        try:
            with Image.open(io.BytesIO(data)) as img:
                img.load()
                return _encode(to_array(img), opts)
        except (OSError, ValueError, SyntaxError) as e:
            raise DecodeError(f"cannot decode JPEG ({e})") from e
    if _native.jpeg_info(data).components == 4:
        # CMYK/YCCK: gulpio2's decoder returns 4 channels where ours returns RGB; store RGB.
        return _encode(arr, opts)
    return data


def _map(fn, items: list, threads: int, pool: ThreadPoolExecutor | None) -> list:
    if pool is None or threads <= 1 or len(items) < 2:
        return [fn(x) for x in items]
    return list(pool.map(fn, items))


class FrameEncoder:
    """Prepares the frames of one video after another with a private thread pool."""

    def __init__(self, opts: EncodeOptions):
        self.opts = opts
        self._pool = (
            ThreadPoolExecutor(opts.threads, thread_name_prefix="gulpio-encode")
            if opts.threads > 1
            else None
        )

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def encode(self, frames, size: int | None = None) -> list[bytes]:
        """JPEG bytes for every frame, in order.

        JPEG inputs are kept as they are unless ``size`` asks for another shorter side; arrays
        and images are resized to ``size`` (if given) and encoded. Raises
        :class:`~gulpio_rs.errors.DecodeError` (naming the frame) for a damaged JPEG or image
        and :class:`ValueError` for an unusable array.
        """
        opts, threads = self.opts, self.opts.threads
        items = list(frames)
        loaded: list = [None] * len(items)

        def load(i: int):
            f = items[i]
            try:
                if isinstance(f, (str, os.PathLike)):
                    f = load_image(f)
                if isinstance(f, (bytes, bytearray, memoryview)):
                    f = bytes(f)
                    if not _is_jpeg(f):
                        raise DecodeError("bytes are not a JPEG (no SOI marker)")
                    return f
                return to_array(f)
            except (DecodeError, ValueError) as e:
                raise type(e)(f"frame {i}: {e}") from e
            except (OSError, SyntaxError) as e:  # Pillow's errors for damaged or missing files
                raise DecodeError(f"frame {i}: {e}") from e

        loaded = _map(load, list(range(len(items))), threads, self._pool)

        if size is not None and size >= 1:
            # A stored JPEG whose shorter side is already `size` needs no second encode.
            for i, f in enumerate(loaded):
                if isinstance(f, bytes):
                    info = _native.jpeg_info(f)
                    if min(info.width, info.height) != size:
                        arr = _native.decode_jpeg(f)
                        loaded[i] = arr[:, :, 0] if arr.shape[2] == 1 else arr
            arrays = [i for i, f in enumerate(loaded) if isinstance(f, np.ndarray)]
            if arrays:
                resized = _native.resize_frames([loaded[i] for i in arrays], size, threads)
                for i, r in zip(arrays, resized, strict=True):
                    loaded[i] = r

        def finish(i: int) -> bytes:
            f = loaded[i]
            try:
                return _check_jpeg(f, opts) if isinstance(f, bytes) else _encode(f, opts)
            except DecodeError as e:
                raise DecodeError(f"frame {i}: {e}") from e

        return _map(finish, list(range(len(loaded))), threads, self._pool)
