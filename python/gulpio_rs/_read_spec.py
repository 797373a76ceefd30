"""The options of a read, normalised once: the one owner of the argument rules of ``read``,
``read_batch``, the PyTorch datasets and ``gulpio_rs.ray`` (crop boxes, output sizes, flips,
per-video lists, thread counts). The core takes the result as one object
(``src/python/read_spec.rs``), which also owns the frame-selection forms."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ._choices import Colorspace
from ._threads import decode_threads

#: A crop box ``(top, left, height, width)`` in stored-frame pixels (fractions allowed).
CropBox = tuple[float, float, float, float]
#: An output size ``(height, width)``.
Size = tuple[int, int]


@dataclass(frozen=True, slots=True)
class ReadSpec:
    """What every video of one read is decoded with. Per-video lists have one entry per
    video of the read; ``None`` means nothing of that kind for any video."""

    crops: list[CropBox | None] | None = None
    sizes: list[Size | None] | None = None
    flips: list[bool] | None = None
    colorspace: Colorspace | str | None = None
    threads: int = 0
    dct_scaling: bool = True
    fast: bool = False
    check: bool = True

    def of(self, n: int) -> tuple[CropBox | None, Size | None, bool]:
        """``(crop, size, flip)`` of the ``n``-th video."""
        return (
            None if self.crops is None else self.crops[n],
            None if self.sizes is None else self.sizes[n],
            False if self.flips is None else self.flips[n],
        )


def read_spec(
    videos: int,
    *,
    crop: Any = None,
    size: Any = None,
    flip: Any = False,
    colorspace: Colorspace | str | None = None,
    threads: int | None = None,
    dct_scaling: bool = True,
    fast_decode: bool = False,
    check: bool = True,
    remote: bool = False,
) -> ReadSpec:
    """The :class:`ReadSpec` of a read of ``videos`` videos: ``crop`` one box for every video
    or a list of one (or None) per video, ``size`` one size (an int is a square) or a list,
    ``flip`` one bool or a list; ``threads`` as :func:`~gulpio_rs._threads.decode_threads`
    counts them (``remote``: the read is from object storage)."""
    return ReadSpec(
        crops=per_video_crops(crop, videos),
        sizes=per_video_sizes(size, videos),
        flips=per_video_flips(flip, videos),
        colorspace=colorspace,
        threads=decode_threads(threads, remote),
        dct_scaling=bool(dct_scaling),
        fast=bool(fast_decode),
        check=bool(check),
    )


def crop_box(box: Any, what: str = "crop") -> CropBox | None:
    """``(top, left, height, width)`` as floats, or None."""
    if box is None:
        return None
    if isinstance(box, (str, bytes)):
        raise TypeError(f"{what} must be (top, left, height, width) or None, not {box!r}")
    try:
        values = tuple(float(v) for v in box)
    except TypeError:
        raise TypeError(f"{what} must be (top, left, height, width) or None, not {box!r}") from None
    if len(values) != 4:
        raise ValueError(f"{what} must be (top, left, height, width), not {box!r}")
    return values[0], values[1], values[2], values[3]


def per_video_crops(crop: Any, n: int) -> list[CropBox | None] | None:
    """One crop box for every video, or one (or None) per video."""
    if crop is None:
        return None
    items = list(crop) if isinstance(crop, (list, tuple, np.ndarray)) else None
    is_one_box = (
        items is not None
        and len(items) == 4
        and all(isinstance(v, (int, float, np.integer, np.floating)) for v in items)
    )
    if is_one_box:
        return [crop_box(crop)] * n
    if items is None or len(items) != n:
        raise ValueError(
            f"crop must be one (top, left, height, width) box or a list of {n} (one per video)"
        )
    return [crop_box(b, f"crop[{i}]") for i, b in enumerate(items)]


def per_video_sizes(size: Any, n: int) -> list[Size | None] | None:
    """One output size for every video, or a list of one (a pair, or None) per video."""
    if size is None:
        return None
    if isinstance(size, list) and all(s is None or isinstance(s, (tuple, list)) for s in size):
        if len(size) != n:
            raise ValueError(f"size must be one (height, width) or a list of {n} (one per video)")
        return [out_size(s) for s in size]
    return [out_size(size)] * n


def per_video_flips(flip: Any, n: int) -> list[bool] | None:
    """One flip for every video, or a list of one per video."""
    if isinstance(flip, (list, tuple, np.ndarray)):
        flips = [bool(f) for f in flip]
        if len(flips) != n:
            raise ValueError(f"flip must have one entry per video ({n} videos)")
        return flips
    return [True] * n if flip else None


def out_size(size: Any) -> Size | None:
    """``size`` as ``(height, width)``: an int is a square."""
    if size is None:
        return None
    if isinstance(size, (int, np.integer)) and not isinstance(size, bool):
        size = (size, size)
    try:
        h, w = size
        if any(isinstance(v, bool) or int(v) != v for v in (h, w)):
            raise ValueError
        h, w = int(h), int(w)
    except (TypeError, ValueError):
        raise ValueError(
            f"size must be (height, width) of integers, or an int, not {size!r}"
        ) from None
    if h <= 0 or w <= 0:
        raise ValueError(f"size must be positive, not {size!r}")
    return h, w


def per_video_frames(frames: Any, n: int) -> list[Any]:
    """``frames`` as one selection per video: a list with one selection (None, a slice, a
    list or array of indices) per video, or one selection for every video."""
    per_video = (
        isinstance(frames, (list, tuple))
        and len(frames) == n
        and all(f is None or isinstance(f, (slice, list, tuple, np.ndarray)) for f in frames)
    )
    return list(frames) if per_video else [frames] * n
