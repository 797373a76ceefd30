"""Frame timestamps: how ingest stores each frame's presentation time, and how readers get it
back (docs/FORMAT.md §2.1).

They travel in the ``.gmeta`` as one extra element of the video's ``meta_data`` list, after
the adapter's metadata: ``{"gulpio-rs": {"time": {...}}}``. Readers of gulpio2's API return
element 0 only, so what a user sees as the video's metadata does not change, and the element
is in the index's meta blob too, so local, remote and gulpio2-style readers all have it
without another file.

The times are integer ticks of a time base (the video stream's own when it is exact, else
microseconds), stored as the first frame's tick and the run-length-coded steps from each
frame to the next (the last step: how long the last frame is shown). A constant-rate video
costs one run whatever its length; a variable-rate one keeps every irregular step.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any, NamedTuple, NotRequired, SupportsFloat, TypedDict

import numpy as np
import numpy.typing as npt

from .errors import FormatError

#: The key of the ``meta_data`` element reserved for gulpio-rs.
RESERVED_KEY = "gulpio-rs"
#: Frames per second assumed where a video's rate is known from nowhere else: the last frame
#: of a one-frame video without a rate, and videos stored without timestamps whose metadata
#: has no ``fps`` (the datasets' fallback, docs/TORCH.md "Time-based sampling").
DEFAULT_FPS = 30.0
#: A time base finer than this many ticks per second is not kept: times are rounded to
#: microseconds instead (a stream's is usually 1/90000 or coarser).
_MAX_TICKS_PER_SECOND = 10**9
_MICROSECONDS = 10**6
#: Slack of "at or before": a requested time this close after a frame's timestamp counts as
#: that frame's (timestamps may be rounded to microseconds).
TOLERANCE = 1e-6


class VideoTimes(NamedTuple):
    """A video's stored frame times (:meth:`gulpio_rs.GulpDirectory.timestamps`).

    ``timestamps``: float64 seconds, one per frame in frame order (the source's presentation
    times; at a resampled rate, the instant each stored frame stands for). ``fps``: the source
    video's average frame rate (``None`` if unknown). ``end``: when the last frame stops being
    shown, in seconds (so the video lasts ``end - timestamps[0]``).
    """

    timestamps: npt.NDArray[np.float64]
    fps: float | None
    end: float


class StoredTime(TypedDict):
    """The ``"time"`` entry of the reserved element, as :func:`time_element` writes it (JSON:
    the lists are lists, not tuples)."""

    #: The source's average frame rate, rounded to 6 decimals; absent when unknown.
    fps: NotRequired[float]
    #: ``[num, den]``: a tick is ``num / den`` seconds.
    base: list[int]
    #: The first frame's tick.
    start: int
    #: The run-length-coded steps: a step taken once, or ``[step, count]``.
    steps: list[int | list[int]]


#: A number of seconds: an int, a float, a :class:`~fractions.Fraction` or a NumPy scalar
#: (what ``float()`` takes; strings are not seconds).
Seconds = SupportsFloat


def time_element(
    timestamps: Sequence[Seconds], *, fps: Seconds | None = None, end: Seconds | None = None
) -> dict[str, dict[str, StoredTime]]:
    """The reserved ``meta_data`` element holding ``timestamps`` (seconds, one per frame:
    ints, floats or :class:`~fractions.Fraction`), the source ``fps`` and ``end`` (when the
    last frame stops being shown; default: one more step like the last, or ``1/fps``).

    Raises ``ValueError`` for no timestamps, or a value that is not a finite number.
    """
    times = [_exact(t, "timestamp") for t in timestamps]
    if not times:
        raise ValueError("timestamps: a video has at least one frame")
    rate = None if fps is None else _exact(fps, "fps")
    if rate is not None and not rate > 0:
        raise ValueError(f"fps must be positive, not {fps!r}")
    if end is not None:
        last = _exact(end, "end")
    elif len(times) > 1 and times[-1] > times[-2]:
        last = times[-1] + (times[-1] - times[-2])
    else:
        last = times[-1] + 1 / (rate or Fraction(DEFAULT_FPS))
    points = [*times, last]
    den = 1
    for t in points:
        den = math.lcm(den, t.denominator)
        if den > _MAX_TICKS_PER_SECOND:
            den = _MICROSECONDS
            break
    ticks = [round(t * den) for t in points]
    steps = _run_lengths([b - a for a, b in zip(ticks, ticks[1:], strict=False)])
    time: StoredTime = {"base": [1, den], "start": ticks[0], "steps": steps}
    if rate is not None:
        time = {"fps": round(float(rate), 6), **time}
    return {RESERVED_KEY: {"time": time}}


def find_times(
    meta_data: list[Any], frame_count: int, *, where: str, video_id: str
) -> VideoTimes | None:
    """The :class:`VideoTimes` stored in a video's ``meta_data`` list, or ``None`` when it has
    none or they do not describe its ``frame_count`` frames (frames appended after ingest).

    Raises :class:`~gulpio_rs.errors.FormatError` naming ``where`` and the video when the
    reserved element is there but malformed.
    """
    element = None
    for value in reversed(meta_data[1:]):
        if isinstance(value, dict) and list(value) == [RESERVED_KEY]:
            element = value[RESERVED_KEY]
            break
    if not isinstance(element, dict) or "time" not in element:
        return None
    try:
        return _decode(element["time"], frame_count)
    except (TypeError, ValueError, KeyError, OverflowError) as e:
        error = FormatError(
            f"{where}: video {video_id!r} has malformed frame timestamps ({e}) in its "
            f"{RESERVED_KEY!r} metadata element"
        )
        error.path, error.video_id, error.frame = where, video_id, None
        raise error from None


def _decode(time: dict[str, Any], frame_count: int) -> VideoTimes | None:
    num, den = time["base"]
    if not (_is_int(num) and _is_int(den) and num > 0 and den > 0):
        raise ValueError(f"time base {time['base']!r}")
    start = time["start"]
    if not _is_int(start):
        raise ValueError(f"start {start!r}")
    values: list[int] = []
    counts: list[int] = []
    for run in time["steps"]:
        step, count = (run, 1) if _is_int(run) else run
        if not (_is_int(step) and _is_int(count) and count > 0):
            raise ValueError(f"step {run!r}")
        values.append(step)
        counts.append(count)
    if sum(counts) != frame_count:
        return None
    fps = time.get("fps")
    if fps is not None and not (isinstance(fps, (int, float)) and fps > 0):
        raise ValueError(f"fps {fps!r}")
    steps = np.repeat(np.asarray(values, dtype=np.float64), counts)
    # Divided, not multiplied by 1/den: ticks / den is the correctly rounded float.
    points = (start + np.concatenate(([0.0], np.cumsum(steps)))) * num / den
    return VideoTimes(points[:-1], None if fps is None else float(fps), float(points[-1]))


def _run_lengths(steps: list[int]) -> list[int | list[int]]:
    out: list[int | list[int]] = []
    for step in steps:
        if out and isinstance(out[-1], list) and out[-1][0] == step:
            out[-1][1] += 1
        elif out and not isinstance(out[-1], list) and out[-1] == step:
            out[-1] = [step, 2]
        else:
            out.append(step)
    return out


def _exact(value: Seconds, what: str) -> Fraction:
    if isinstance(value, bool):
        raise ValueError(f"{what} must be a number of seconds, not {value!r}")
    if isinstance(value, (Fraction, int, np.integer)):
        return Fraction(int(value)) if isinstance(value, np.integer) else Fraction(value)
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{what} must be finite, not {value!r}")
    # A float is a decimal someone computed: its exact binary value would need a huge base.
    return Fraction(round(number * _MICROSECONDS), _MICROSECONDS)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
