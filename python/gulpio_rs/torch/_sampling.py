"""Temporal sampling: which frames of a video make a clip. Pure functions of the video length
and an offset in ``[0, 1]``; the random draw (if any) is the caller's."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def sample_frame_indices(
    num_frames: int,
    frames: int | None = None,
    *,
    stride: int = 1,
    num_segments: int | None = None,
    offset: float | Sequence[float] = 0.5,
) -> list[int]:
    """Frame indices of one clip from a video of ``num_frames`` frames.

    Three modes, as video models sample:

    * ``frames=None, num_segments=None``: every ``stride``-th frame of the whole video
      (``range(0, num_frames, stride)``).
    * ``frames=T`` (dense sampling, e.g. I3D/SlowFast): ``T`` frames ``stride`` apart, a
      window of ``span = (T - 1) * stride + 1`` frames. ``offset`` places the window: ``0``
      at the start, ``1`` at the end, ``0.5`` centred; a uniform ``offset`` in ``[0, 1)``
      picks each of the ``num_frames - span + 1`` possible starts with equal probability.
      **Short videos** (``num_frames < span``) loop: the indices are
      ``(k * stride) % num_frames``, as if the video played again from its start.
    * ``num_segments=K`` (TSN): the video is cut into ``K`` equal segments and one frame is
      taken from each, at ``offset`` within the segment (``0.5``: its centre; a sequence of
      ``K`` offsets gives each segment its own, e.g. independent random draws for training).
      Videos shorter than ``K`` frames repeat frames in order (``0, 0, 1, 1, 2, ...``): no
      padding rule is needed.

    Raises ``ValueError`` for a video without frames (except in the first mode, which returns
    ``[]``) and for invalid arguments.
    """
    n = _non_negative_int(num_frames, "num_frames")
    stride = _positive_int(stride, "stride")
    if num_segments is not None:
        if frames is not None:
            raise ValueError("give frames= or num_segments=, not both")
        if stride != 1:
            raise ValueError("stride= does not apply to num_segments= (one frame per segment)")
        k = _positive_int(num_segments, "num_segments")
        offsets = _offsets(offset, k)
        if n == 0:
            raise ValueError("the video has no frames")
        return [min(n - 1, int((i + u) * n / k)) for i, u in enumerate(offsets)]
    if frames is None:
        _offsets(offset, 1)
        return list(range(0, n, stride))
    t = _positive_int(frames, "frames")
    (u,) = _offsets(offset, 1)
    if n == 0:
        raise ValueError("the video has no frames")
    span = (t - 1) * stride + 1
    if n < span:
        return [(j * stride) % n for j in range(t)]
    slots = n - span + 1
    start = min(slots - 1, int(u * slots))
    return list(range(start, start + span, stride))


def _offsets(offset: float | Iterable[float], count: int) -> list[float]:
    if isinstance(offset, (int, float)):
        values = [float(offset)] * count
    else:
        values = [float(u) for u in offset]
        if len(values) != count:
            raise ValueError(f"expected {count} offsets, got {len(values)}")
    for u in values:
        if not 0.0 <= u <= 1.0:
            raise ValueError(f"offsets must be in [0, 1], not {u}")
    return values


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise ValueError(f"{name} must be a positive integer, not {value!r}")
    return int(value)


def _non_negative_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or int(value) != value or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, not {value!r}")
    return int(value)
