"""Temporal sampling: which frames of a video make a clip. Pure functions of the video length
(or its frame timestamps) and an offset: a number in ``[0, 1]`` or one of the names the
datasets take (:data:`OFFSETS`); ``"random"`` draws from the generator the caller passes."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, get_args

import numpy as np
import numpy.typing as npt

from .._choices import OffsetName
from .._times import TOLERANCE

#: Where named offsets put a clip: ``"start"`` at the video's start (each segment's first
#: frame), ``"center"`` centred (each segment's middle).
NAMED_OFFSETS: dict[str, float] = {"start": 0.0, "center": 0.5}
#: The offset names the datasets and the sampling functions take: the named positions and
#: ``"random"`` (a uniform draw in ``[0, 1)``; for segments, one per segment).
OFFSETS: tuple[OffsetName, ...] = get_args(OffsetName)

#: An offset: a number in ``[0, 1]`` (for segments also one per segment) or a name in
#: :data:`OFFSETS`.
Offset = float | OffsetName | Sequence[float]


def sample_frame_indices(
    num_frames: int,
    frames: int | None = None,
    *,
    stride: int = 1,
    num_segments: int | None = None,
    offset: Offset = 0.5,
    rng: np.random.Generator | int | None = None,
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

    ``offset`` may also be a name, as the datasets take it: ``"start"`` (``0``), ``"center"``
    (``0.5``) or ``"random"``, a uniform draw from ``rng`` (a numpy ``Generator`` or a seed;
    ``None``: a fresh unseeded one), one per segment with ``num_segments``.

    Raises ``ValueError`` for a video without frames (except in the first mode, which returns
    ``[]``) and for invalid arguments.
    """
    n = _non_negative_int(num_frames, "num_frames")
    stride = positive_int(stride, "stride")
    if num_segments is not None:
        if frames is not None:
            raise ValueError("give frames= or num_segments=, not both")
        if stride != 1:
            raise ValueError("stride= does not apply to num_segments= (one frame per segment)")
        k = positive_int(num_segments, "num_segments")
        offsets = _offsets(offset, k, rng)
        if n == 0:
            raise ValueError("the video has no frames")
        return [min(n - 1, int((i + u) * n / k)) for i, u in enumerate(offsets)]
    if frames is None:
        _offsets(offset, 1, rng)
        return list(range(0, n, stride))
    t = positive_int(frames, "frames")
    (u,) = _offsets(offset, 1, rng)
    if n == 0:
        raise ValueError("the video has no frames")
    span = (t - 1) * stride + 1
    if n < span:
        return [(j * stride) % n for j in range(t)]
    slots = n - span + 1
    start = min(slots - 1, int(u * slots))
    return list(range(start, start + span, stride))


def segment_aligned_clip(
    num_frames: int, segment_starts: Sequence[int], frames: int, stride: int, offset: float
) -> list[int]:
    """Frame indices of a clip of ``frames`` frames ``stride`` apart that starts where a
    segment starts: among the ``segment_starts`` where the whole window fits, the one
    ``offset`` (in ``[0, 1]``) picks as :func:`sample_frame_indices` picks a start among all
    frames (``0`` the first, ``0.5`` the middle one, a uniform draw each with equal
    probability). A video shorter than the window loops from frame 0, as there."""
    n = _non_negative_int(num_frames, "num_frames")
    t = positive_int(frames, "frames")
    stride = positive_int(stride, "stride")
    span = (t - 1) * stride + 1
    fits = [s for s in segment_starts if s + span <= n]
    if not fits:
        return sample_frame_indices(n, t, stride=stride, offset=0.0)
    start = fits[min(len(fits) - 1, int(offset * len(fits)))]
    return list(range(start, start + span, stride))


def sample_time_indices(
    timestamps: npt.ArrayLike,
    end: float,
    *,
    fps: float | None = None,
    clip_seconds: float | None = None,
    offset: float | OffsetName = 0.5,
    rng: np.random.Generator | int | None = None,
) -> tuple[list[int], np.ndarray]:
    """Frames of one clip picked by time: ``(frame indices, clip times)`` for a video whose
    frames are shown from ``timestamps[i]`` (seconds, one per frame) until the next frame's,
    the last until ``end``.

    The video lasts ``D = end - timestamps[0]``.

    * ``fps=F, clip_seconds=C``: ``T = round(C * F)`` times (halves round up) ``1/F`` apart,
      ``s, s + 1/F, ..., s + (T-1)/F``, from a window of ``C`` seconds starting at
      ``s = timestamps[0] + offset * (D - C)`` (``0``: the video's start, ``0.5``: centred,
      a uniform draw in ``[0, 1)``: any start with equal probability). **Short videos**
      (``D < C``) loop, as :func:`sample_frame_indices` does: ``s`` is the video's start and a
      time ``t`` past the end shows what is on screen at ``t - D`` (as if the video played
      again from its start), so the clip still has ``T`` frames.
    * ``fps=F`` alone: the whole video at ``F`` frames per second, times
      ``timestamps[0] + k/F`` before ``end`` (``offset`` unused).
    * ``clip_seconds=C`` alone: the stored frames whose timestamps fall in the window
      ``[s, s + C)`` placed as above (the whole video when it is shorter; the frame on screen
      at ``s`` when no timestamp falls in it); no times are made up, so the clip has as many
      frames as the video stores in that window (clip times: their timestamps).

    Each time ``t`` maps to the frame on screen at ``t``: the last frame whose timestamp is at
    or before ``t`` (1 microsecond of slack for rounded timestamps), so a clip of 2 s at
    8 fps holds the same moments of the video whatever rate it was stored at. Timestamps that
    go backwards are taken as their running maximum.

    ``offset`` may be a name, as the datasets take it: ``"start"``, ``"center"`` or
    ``"random"`` (a uniform draw from ``rng``, as :func:`sample_frame_indices` makes it).
    """
    ts = np.maximum.accumulate(np.asarray(timestamps, dtype=np.float64).reshape(-1))
    if ts.size == 0:
        raise ValueError("the video has no frames")
    (u,) = _offsets(offset, 1, rng)
    start = float(ts[0])
    duration = float(end) - start
    if not duration > 0:
        duration = 0.0
    if fps is None and clip_seconds is None:
        raise ValueError("give fps=, clip_seconds= or both")
    rate = None if fps is None else positive_number(fps, "fps")
    seconds = None if clip_seconds is None else positive_number(clip_seconds, "clip_seconds")
    if seconds is None:
        assert rate is not None  # one of the two was given
        count = max(1, math.ceil(duration * rate - TOLERANCE))
        times = start + np.arange(count) / rate
        return _at_or_before(ts, times), times
    s = start + u * max(0.0, duration - seconds)
    if rate is None:
        first = int(np.searchsorted(ts, s - TOLERANCE, side="left"))
        last = int(np.searchsorted(ts, s + seconds - TOLERANCE, side="left")) - 1
        picked = list(range(first, last + 1)) or _at_or_before(ts, np.array([s]))
        return picked, ts[picked]
    count = clip_frame_count(rate, seconds)
    times = s + np.arange(count) / rate
    if duration < seconds and duration > 0:
        times = start + np.mod(times - start, duration)
    return _at_or_before(ts, times), times


def clip_frame_count(fps: float, clip_seconds: float) -> int:
    """Frames in a clip of ``clip_seconds`` at ``fps``: ``round(clip_seconds * fps)``, halves
    rounded up; ``ValueError`` when that is 0."""
    count = math.floor(clip_seconds * fps + 0.5)
    if count < 1:
        raise ValueError(
            f"clip_seconds={clip_seconds!r} at fps={fps!r} is less than one frame "
            f"(round({clip_seconds!r} * {fps!r}) = 0)"
        )
    return count


def _at_or_before(ts: np.ndarray, times: np.ndarray) -> list[int]:
    picked = np.searchsorted(ts, times + TOLERANCE, side="right") - 1
    indices: list[int] = np.maximum(picked, 0).tolist()
    return indices


def positive_number(value: object, name: str) -> float:
    """``value`` as a float if it is a finite positive number, else a ValueError naming
    ``name`` and the value."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a positive number, not {value!r}")
    number = float(value)
    if not (math.isfinite(number) and number > 0):
        raise ValueError(f"{name} must be a positive number, not {value!r}")
    return number


def _offsets(
    offset: float | OffsetName | Iterable[float], count: int, rng: np.random.Generator | int | None
) -> list[float]:
    """``count`` offsets in ``[0, 1]`` from a number, a name in :data:`OFFSETS` or one number
    per segment; ValueError naming what is wrong."""
    if isinstance(offset, str):
        if offset == "random":
            return [float(u) for u in np.random.default_rng(rng).random(count)]
        if offset not in NAMED_OFFSETS:
            raise ValueError(
                f"offset must be a number in [0, 1] or one of {OFFSETS}, not {offset!r}"
            )
        return [NAMED_OFFSETS[offset]] * count
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


def positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise ValueError(f"{name} must be a positive integer, not {value!r}")
    return int(value)


def _non_negative_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or int(value) != value or value < 0:
        raise ValueError(f"{name} must be a non-negative integer, not {value!r}")
    return int(value)
