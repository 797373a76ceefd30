"""The ingest's frame encoder: turning an adapter's frames into what a chunk stores, JPEG
bytes per frame (here) or, with ``encoding="video"``, AV1 segments (prepared here, encoded by
``ingest.av1``).

Frames arrive as uint8 arrays, PIL images, JPEG bytes or image file paths. Already-encoded
JPEGs are stored as they are (a second lossy encode only loses quality) once a strict decode
has shown they are whole; everything else is converted to RGB or gray, then resized and
encoded. In libjpeg-turbo builds (the release wheels) the Rust core does both for a whole
video in one call, on its pool without the GIL (``_native.encode_frames``), with the settings
that give simplejpeg's bytes; zune-jpeg builds resize in Rust and encode with simplejpeg on a
thread pool.

Why libjpeg-turbo and not a pure-Rust encoder: it was about three times as fast at equal size
and PSNR. Why not through simplejpeg when it is there: it holds the GIL for part of each frame,
so a second thread adds little. The measurements: docs/DECISIONS.md, "Writing". The settings
(quality, subsampling, ...) and their defaults: ``_encode_options``.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Self, TypeVar

import numpy as np
import simplejpeg
from PIL import Image

from .. import _native
from .._encode_options import RUST_ENCODER, EncodeOptions
from .._pixels import to_frame
from ..errors import DecodeError, UnsupportedJpegError
from .av1 import SegmentVideo, encode_video

if TYPE_CHECKING:
    from _typeshed import StrPath

_T = TypeVar("_T")
_R = TypeVar("_R")


def _ready(f: object) -> bool:
    """An array the encoder takes as it is: uint8, C-contiguous, ``HxW`` or ``HxWx1|3``."""
    return (
        isinstance(f, np.ndarray)
        and f.dtype == np.uint8
        and f.flags.c_contiguous
        and (f.ndim == 2 or (f.ndim == 3 and f.shape[2] in (1, 3)))
        and f.shape[0] > 0
        and f.shape[1] > 0
    )


class _Encoded(bytes):
    """JPEG bytes this encoder made itself (nothing to check)."""


def _is_jpeg(data: bytes | bytearray | memoryview) -> bool:
    return bytes(data[:3]) == b"\xff\xd8\xff"


def load_image(path: StrPath) -> np.ndarray | bytes:
    """An image file as JPEG bytes (if it is a JPEG) or as a uint8 array."""
    with open(path, "rb") as f:
        data = f.read()
    if _is_jpeg(data):
        return data
    try:
        with Image.open(path) as img:
            img.load()
            return to_frame(img)
    except (OSError, ValueError, SyntaxError) as e:
        raise DecodeError(f"{os.fspath(path)}: cannot read image: {e}") from e


def _encode(arr: np.ndarray, opts: EncodeOptions) -> bytes:
    jpeg: bytes  # simplejpeg has no type information
    if arr.ndim == 2:
        jpeg = simplejpeg.encode_jpeg(arr[:, :, None], quality=opts.quality, colorspace="Gray")
    else:
        jpeg = simplejpeg.encode_jpeg(
            arr,
            quality=opts.quality,
            colorspace="RGB",
            colorsubsampling=opts.simplejpeg_subsampling,
        )
    return jpeg


#: SOF markers of Huffman-coded 8-bit-capable JPEGs every gulpio reader (both builds of this
#: one, gulpio2's simplejpeg) decodes: baseline, extended sequential, progressive.
_SOF_PORTABLE = (0xC0, 0xC1, 0xC2)


def frame_header(data: bytes) -> _native.JpegInfo | None:
    """The frame header (``_native.JpegInfo``: SOF marker, precision, components, ...) read by
    the one marker walk, in Rust; ``None`` when there is none before the scan or the markers
    are damaged (the strict decode then reports the frame)."""
    try:
        return _native.jpeg_info(data)
    except ValueError:  # DecodeError, FormatError: no usable frame header
        return None


def is_plain_jpeg(data: bytes) -> bool:
    """True for a JPEG whose bytes can be stored unchanged: baseline/extended/progressive
    Huffman, 8-bit, gray or YCbCr. Damage past the header is left to the strict decode."""
    info = frame_header(data)
    return (
        info is not None
        and info.sof in _SOF_PORTABLE
        and info.precision == 8
        and info.components in (1, 3)
    )


def _portable(data: bytes) -> bool:
    """What every gulpio reader decodes: not arithmetic-coded, lossless or 12-bit. Unknown
    layouts count as portable; the strict decode judges them."""
    info = frame_header(data)
    return info is None or (info.sof in _SOF_PORTABLE and info.precision == 8)


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
                return _encode(to_frame(img), opts)
        except (OSError, ValueError, SyntaxError) as e:
            raise DecodeError(f"cannot decode JPEG ({e})") from e
    if _native.jpeg_info(data).components == 4:
        # CMYK/YCCK: gulpio2's decoder returns 4 channels where ours returns RGB; store RGB.
        return _encode(arr, opts)
    return data


def _map(
    fn: Callable[[_T], _R], items: list[_T], threads: int, pool: ThreadPoolExecutor | None
) -> list[_R]:
    if pool is None or threads <= 1 or len(items) < 2:
        return [fn(x) for x in items]
    return list(pool.map(fn, items))


class FrameEncoder:
    """Prepares the frames of one video after another with a private thread pool."""

    def __init__(self, opts: EncodeOptions) -> None:
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

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def encode_stored(
        self, frames: Sequence[Any], size: int | None = None
    ) -> list[bytes] | SegmentVideo:
        """What the chunk stores for one video's frames, as :attr:`opts` says: JPEG bytes for
        every frame (:meth:`encode`), or, with ``encoding="video"``, a
        :class:`~gulpio_rs.segments.SegmentVideo` (:meth:`encode_video`)."""
        if self.opts.encoding == "video":
            return self.encode_video(frames, size)
        return self.encode(frames, size)

    def encode_video(self, frames: Sequence[Any], size: int | None = None) -> SegmentVideo:
        """The frames (arrays, images, JPEG bytes or image files; gray ones become RGB),
        resized to ``size`` if given, encoded as AV1 segments: a
        :class:`~gulpio_rs.segments.SegmentVideo`. Raises :class:`DecodeError` naming the
        frame for a damaged input and ``VideoEncodeError`` (a ``ValueError``) for frames that
        cannot be stored as video (mixed sizes, under 16 px)."""
        arrays: list[np.ndarray] = []
        for i, f in enumerate(frames):
            try:
                if isinstance(f, (str, os.PathLike)):
                    f = load_image(f)
                if isinstance(f, (bytes, bytearray, memoryview)):
                    if not _is_jpeg(f):
                        raise DecodeError("bytes are not a JPEG (no SOI marker)")
                    f = _native.decode_jpeg(bytes(f), "RGB")
                a = to_frame(f)
            except (DecodeError, ValueError) as e:
                raise type(e)(f"frame {i}: {e}") from e
            except (OSError, SyntaxError) as e:  # Pillow's errors for damaged or missing files
                raise DecodeError(f"frame {i}: {e}") from e
            if a.ndim == 2:
                a = a[:, :, None]
            if a.shape[2] == 1:
                a = np.repeat(a, 3, axis=2)
            arrays.append(np.ascontiguousarray(a))
        if size is not None and size >= 1 and arrays:
            arrays = _native.resize_frames(arrays, size, self.opts.threads)
        return encode_video(arrays, crf=self.opts.crf, gop=self.opts.gop, preset=self.opts.preset)

    def encode(self, frames: Sequence[Any], size: int | None = None) -> list[bytes]:
        """JPEG bytes for every frame, in order.

        JPEG inputs are kept as they are unless ``size`` asks for another shorter side; arrays
        and images are resized to ``size`` (if given) and encoded. Raises
        :class:`~gulpio_rs.errors.DecodeError` (naming the frame) for a damaged JPEG or image
        and :class:`ValueError` for an unusable array.
        """
        opts, threads = self.opts, self.opts.threads
        items = list(frames)
        resize = size is not None and size >= 1
        if RUST_ENCODER and items and all(_ready(f) for f in items):
            # The common case (decoded video frames): one call, nothing per frame in Python.
            return _native.encode_frames(
                items,
                int(opts.quality),
                opts.subsampling,
                size if resize else None,
                threads,
                restart_rows=opts.restart_rows,
            )
        loaded: list[Any] = [None] * len(items)

        def load(i: int) -> Any:
            f = items[i]
            try:
                if isinstance(f, (str, os.PathLike)):
                    f = load_image(f)
                if isinstance(f, (bytes, bytearray, memoryview)):
                    f = bytes(f)
                    if not _is_jpeg(f):
                        raise DecodeError("bytes are not a JPEG (no SOI marker)")
                    return f
                return to_frame(f)
            except (DecodeError, ValueError) as e:
                raise type(e)(f"frame {i}: {e}") from e
            except (OSError, SyntaxError) as e:  # Pillow's errors for damaged or missing files
                raise DecodeError(f"frame {i}: {e}") from e

        # Arrays only need a cheap normalisation: no thread hand-off for them. Files and bytes
        # are read and checked on the pool.
        if all(isinstance(f, np.ndarray) for f in items):
            loaded = [load(i) for i in range(len(items))]
        else:
            loaded = _map(load, list(range(len(items))), threads, self._pool)

        if resize:
            # A stored JPEG whose shorter side is already `size` needs no second encode.
            for i, f in enumerate(loaded):
                if isinstance(f, bytes):
                    info = _native.jpeg_info(f)
                    if min(info.width, info.height) != size:
                        arr = _native.decode_jpeg(f)
                        loaded[i] = arr[:, :, 0] if arr.shape[2] == 1 else arr
        arrays = [i for i, f in enumerate(loaded) if isinstance(f, np.ndarray)]
        if arrays and RUST_ENCODER:
            # Resize and encode in one call on the Rust pool, without the GIL.
            encoded = _native.encode_frames(
                [loaded[i] for i in arrays],
                int(opts.quality),
                opts.subsampling,
                size if resize else None,
                threads,
                restart_rows=opts.restart_rows,
            )
            for i, jpeg in zip(arrays, encoded, strict=True):
                loaded[i] = _Encoded(jpeg)
        elif arrays and resize and size is not None:
            resized = _native.resize_frames([loaded[i] for i in arrays], size, threads)
            for i, r in zip(arrays, resized, strict=True):
                loaded[i] = r

        def finish(i: int) -> bytes:
            f = loaded[i]
            if isinstance(f, _Encoded):
                return bytes(f)
            try:
                return _check_jpeg(f, opts) if isinstance(f, bytes) else _encode(f, opts)
            except DecodeError as e:
                raise DecodeError(f"frame {i}: {e}") from e

        if all(isinstance(f, _Encoded) for f in loaded):
            return [bytes(f) for f in loaded]
        return _map(finish, list(range(len(loaded))), threads, self._pool)
