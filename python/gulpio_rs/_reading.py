"""Reading helpers shared by the Python API: gulpio2's id forms and the decode paths
(built-in engine, user decoder, fallback decoder). The frame-selection forms are the core's
(``src/python/read_spec.rs``), the read options ``_read_spec``'s, thread counts ``_threads``'."""

from __future__ import annotations

import json
from collections import namedtuple
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from . import _native
from ._read_spec import ReadSpec
from ._threads import decode_threads
from .errors import UnsupportedJpegError

#: gulpio2's per-frame record location (field order loc, pad, length). Pickles as
#: ``gulpio_rs.fileio.ImgInfo``, where gulpio2 users find it.
ImgInfo = namedtuple("ImgInfo", ["loc", "pad", "length"], module="gulpio_rs.fileio")

#: gulpio2's API (``gd[id]``, ``GulpChunk.read_frames``) decodes as gulpio2 does: simplejpeg's
#: ``fastdct=True, fastupsample=True`` (docs/COMPATIBILITY.md).
GULPIO2_FAST = True


def extract_input_for_getitem(element: object) -> tuple[str, Any]:
    """Split ``id`` or ``(id, frames)`` into ``(str(id), frames_or_None)``.

    Accepts numpy integer ids, which gulpio2 rejected.
    """
    if isinstance(element, tuple) and len(element) == 2:
        id_, slice_ = element
    elif isinstance(element, (int, str, np.integer, np.str_)):
        id_, slice_ = element, None
    else:
        raise TypeError("Undefined input type! id or (id, slice) expected")
    return id_str(id_), slice_


def id_str(id_: object) -> str:
    if isinstance(id_, np.integer):
        return str(int(id_))
    return str(id_)


#: gulpio2's frame selections (``gd[id, frames]``, ``read``): all (None), one index, a slice or
#: a list of indices.
Selection = int | slice | list[int] | None
#: A user's JPEG decoder (``jpeg_decoder=``, ``fallback_decoder=``): JPEG bytes to an array.
Decoder = Callable[[bytes], np.ndarray]

_E = TypeVar("_E", bound=BaseException)


def with_location(err: _E, path: str | None, video_id: str | None, frame: int | None) -> _E:
    """``err`` (a builtin exception too: errors.py says which) carrying where it happened as
    ``path``, ``video_id`` and ``frame`` attributes."""
    vars(err).update(path=path, video_id=video_id, frame=frame)
    return err


def first_meta(meta_data_json: str) -> dict[str, Any]:
    items = json.loads(meta_data_json)
    return dict(items[0]) if items else {}


def read_frames_of(
    native_chunk: _native.Chunk,
    video: int,
    selection: Selection,
    jpeg_decoder: Decoder | None,
    check_data: bool,
    colorspace: str | None,
    fallback_decoder: Decoder | None = None,
) -> list[np.ndarray]:
    """Frames of one video as gulpio2 returns them: a list of HxWx3 / HxW arrays, decoded
    with gulpio2's own settings (libjpeg-turbo's fast IDCT and chroma upsampling): gulpio2's
    pixels, at gulpio2's cost per frame."""
    if jpeg_decoder is not None:
        frames = native_chunk.select(video, selection)
        return user_decoded(native_chunk, video, frames, check_data, jpeg_decoder)
    spec = _gulpio2_spec(colorspace, check_data, decode_threads())
    try:
        decoded = native_chunk.decode(video, selection, spec)
    except UnsupportedJpegError:
        if fallback_decoder is None:
            raise
        frames = native_chunk.select(video, selection)
        return with_fallback(native_chunk, video, frames, check_data, colorspace, fallback_decoder)
    if isinstance(decoded, np.ndarray):
        # One (T, H, W, C) array: the frames are views into it, not separate allocations.
        return list(decoded[..., 0] if decoded.shape[3] == 1 else decoded)
    return [a[:, :, 0] if a.shape[2] == 1 else a for a in decoded]


def _gulpio2_spec(colorspace: str | None, check_data: bool, threads: int) -> ReadSpec:
    """The read options of gulpio2's list-of-frames reads (its fast IDCT and upsampling)."""
    return ReadSpec(colorspace=colorspace, threads=threads, fast=GULPIO2_FAST, check=check_data)


def user_decoded(
    native_chunk: _native.Chunk,
    video: int,
    frames: list[int] | None,
    check_data: bool,
    decoder: Decoder,
) -> list[np.ndarray]:
    """Frames decoded by a user's callable, which receives the JPEG ``bytes``."""
    return [decoder(bytes(v)) for v in native_chunk.frame_views(video, frames, check_data)]


def with_fallback(
    native_chunk: _native.Chunk,
    video: int,
    frames: list[int] | None,
    check_data: bool,
    colorspace: str | None,
    fallback: Decoder,
) -> list[np.ndarray]:
    """Frames decoded one at a time by the built-in decoder, and by ``fallback`` for those it
    does not support (gray frames as HxW, like gulpio2)."""
    if frames is None:
        frames = list(range(native_chunk.frame_count(video)))
    spec = _gulpio2_spec(colorspace, check_data, 1)
    out = []
    for k in frames:
        try:
            frame = native_chunk.decode(video, [k], spec)[0]
        except UnsupportedJpegError:
            view = native_chunk.frame_views(video, [k], check_data)[0]
            frame = np.asarray(fallback(bytes(view)))
        out.append(frame[:, :, 0] if frame.ndim == 3 and frame.shape[2] == 1 else frame)
    return out


def stack_frames(frames: list[Any], video_id: str) -> np.ndarray:
    """Stack decoded frames as ``(T, H, W, C)``."""
    frames = [np.asarray(f) for f in frames]
    frames = [f[:, :, None] if f.ndim == 2 else f for f in frames]
    if not frames:
        return np.zeros((0, 0, 0, 3), np.uint8)
    if any(f.shape != frames[0].shape for f in frames):
        err = ValueError(
            f"video {video_id!r} has frames of different sizes; use gd[id] for a list of frames"
        )
        raise with_location(err, None, video_id, None)
    return np.ascontiguousarray(np.stack(frames), dtype=np.uint8)
