"""Reading helpers shared by the Python API: gulpio2's id and frame-selection forms, the
decode paths (built-in engine, user decoder, fallback decoder) and the decode thread count."""

from __future__ import annotations

import json
import os
import sys
from collections import namedtuple
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from . import _native
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

#: The frame indices the core takes (i64); any index beyond is out of range for every video.
_INDEX_MIN, _INDEX_MAX = -(2**63), 2**63 - 1


def frame_selection(
    selection: Selection, native_chunk: _native.Chunk, video: int
) -> list[int] | None:
    """gulpio2's frame selection forms as a list of frame indices for the core (``None`` =
    all frames). Negative indices count from the end; indices out of range raise IndexError
    (from the core, or here for those too large to pass to it)."""
    if selection is None:
        return None
    if isinstance(selection, slice):
        return list(range(*selection.indices(native_chunk.frame_count(video))))
    if isinstance(selection, (int, np.integer)) and not isinstance(selection, bool):
        frames = [int(selection)]
    elif isinstance(selection, list):
        frames = selection
    else:
        frames = np.asarray(selection).reshape(-1).tolist()
    if frames:
        try:
            lowest, highest = min(frames), max(frames)
        except TypeError:
            return frames  # not all numbers: the core says which argument is wrong
        if lowest < _INDEX_MIN or highest > _INDEX_MAX:
            bad = lowest if lowest < _INDEX_MIN else highest
            raise _frame_out_of_range(native_chunk, video, bad)
    return frames


_E = TypeVar("_E", bound=BaseException)


def with_location(err: _E, path: str | None, video_id: str | None, frame: int | None) -> _E:
    """``err`` (a builtin exception too: errors.py says which) carrying where it happened as
    ``path``, ``video_id`` and ``frame`` attributes."""
    vars(err).update(path=path, video_id=video_id, frame=frame)
    return err


def _frame_out_of_range(native_chunk: _native.Chunk, video: int, frame: int) -> IndexError:
    """The IndexError the core raises for an index out of range, for one it cannot take."""
    path, video_id = native_chunk.data_path, native_chunk.id(video)
    count = native_chunk.frame_count(video)
    err = IndexError(
        f"{path}: video {video_id!r} has {count} frames; frame index {frame} is out of range"
    )
    return with_location(err, path, video_id, frame)


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
    frames = frame_selection(selection, native_chunk, video)
    if jpeg_decoder is not None:
        return user_decoded(native_chunk, video, frames, check_data, jpeg_decoder)
    try:
        decoded = native_chunk.decode(
            video, frames, check_data, colorspace, decode_threads(), fast=GULPIO2_FAST
        )
    except UnsupportedJpegError:
        if fallback_decoder is None:
            raise
        return with_fallback(native_chunk, video, frames, check_data, colorspace, fallback_decoder)
    if isinstance(decoded, np.ndarray):
        # One (T, H, W, C) array: the frames are views into it, not separate allocations.
        return list(decoded[..., 0] if decoded.shape[3] == 1 else decoded)
    return [a[:, :, 0] if a.shape[2] == 1 else a for a in decoded]


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
    out = []
    for k in frames:
        try:
            frame = native_chunk.decode(video, [k], check_data, colorspace, 1, fast=GULPIO2_FAST)[0]
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


def decode_threads(threads: int | None = None, remote: bool = False) -> int:
    """Decode threads: the argument, else ``GULPIO_NUM_THREADS``, else this process's share of
    the usable cores: all of them (``0``) in a lone process; under torchrun
    (``LOCAL_WORLD_SIZE``) divided among the node's ranks, and inside a PyTorch DataLoader
    worker also among the loader's workers (at least 1), so that ranks x workers x threads
    stays at the core count instead of multiplying past it.

    ``remote``: the read is from object storage, where each worker also waits for round
    trips; its share is then not divided among the loader's workers, so that while one worker
    waits for its bytes the others can decode on its cores (measured in docs/REMOTE.md,
    "Read-ahead: hiding the round trip")."""
    if threads is not None:
        return thread_count(threads, "threads")
    env = os.environ.get("GULPIO_NUM_THREADS")
    if env and env.strip():
        value: int | str
        try:
            value = int(env)
        except ValueError:
            value = env
        return thread_count(value, "GULPIO_NUM_THREADS")
    sharers = _local_ranks()
    torch = sys.modules.get("torch")  # never import torch ourselves
    if torch is not None and not remote:
        get_worker_info = getattr(getattr(torch.utils, "data", None), "get_worker_info", None)
        info = get_worker_info() if get_worker_info is not None else None
        if info is not None:
            sharers *= max(1, int(getattr(info, "num_workers", 1) or 1))
    if sharers == 1:
        return 0
    return max(1, usable_cores() // sharers)


def thread_count(value: object, name: str, *, zero_means_all: bool = True) -> int:
    """``value`` checked as a count of threads (or worker processes) given as ``name``: an
    integer from 1 to ``MAX_THREADS`` (src/pool.rs says why there is a cap), or 0 for "all
    usable cores" where ``zero_means_all``. Anything else is a ``ValueError`` naming ``name``
    and the accepted range (``threads=10**9`` started threads until the process hung)."""
    from . import _native

    top = _native.MAX_THREADS
    low = 0 if zero_means_all else 1
    if (
        not isinstance(value, (int, np.integer))
        or isinstance(value, bool)
        or not low <= value <= top
    ):
        accepted = f"an integer from 1 to {top}" + (" (0: all usable cores)" if low == 0 else "")
        raise ValueError(f"{name} must be {accepted}, not {value!r}")
    return int(value)


def _local_ranks() -> int:
    """Processes of this job on this machine: torchrun's ``LOCAL_WORLD_SIZE``, else 1."""
    try:
        return max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        return 1


def usable_cores() -> int:
    """The CPUs this process may run on, as the Rust pools count them (affinity mask and cgroup
    CPU quota): one count for Python's shares and the core's ``threads=0``."""
    return _native.available_threads()
