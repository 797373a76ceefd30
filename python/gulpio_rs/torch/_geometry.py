"""Spatial geometry of a clip: ONE crop box, ONE output size and ONE horizontal flip per clip,
so the core can decode only the crop and resize it in a single pass
(``read_batch(ids, frames, crop=..., size=(h, w), flip=...)``).

Two sources of geometry:

* our own crop modes (:func:`sample_crop`, :func:`sample_flip`), drawn from a
  ``numpy.random.Generator`` so that they are a pure function of a seed;
* a leading run of torchvision v2 geometric transforms (:func:`split_fusable`,
  :func:`plan_fused`), whose parameters are drawn by torchvision's own code from torch's
  global RNG, exactly as the transforms' ``forward`` would draw them: a seeded pipeline picks
  the same crops fused or not, and whatever runs after the fused prefix sees the same RNG
  state.

A box is ``(top, left, height, width)`` in the stored frame's pixel coordinates (floats;
``0 <= top``, ``top + height <= H``, same for the width). The result of a clip is "crop the
frames to the box, resize (antialiased bilinear) to ``size``, then mirror left-right if
``flip``".

torchvision is imported lazily: the crop modes need only numpy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, get_args

import numpy as np

from .._choices import CropMode
from ._sampling import positive_int

Box = tuple[float, float, float, float]

#: ``crop=``'s values: the modes and ``None`` (the whole frame).
CROP_MODES: tuple[CropMode | None, ...] = (*get_args(CropMode), None)

# The random-resized crop's attempts before its centre-crop fallback (torchvision's constant).
_RRC_ATTEMPTS = 10


class NeedsPaddingError(ValueError):
    """A fused ``CenterCrop`` is larger than the image it crops: torchvision would pad it with
    zeros, which a crop box inside the stored frame cannot express."""


# -- our own crop modes -----------------------------------------------------------------------


def sample_crop(
    mode: str | None,
    height: int,
    width: int,
    size: int | Sequence[int] | None = None,
    *,
    scale: Sequence[float] = (0.08, 1.0),
    ratio: Sequence[float] = (3.0 / 4.0, 4.0 / 3.0),
    rng: np.random.Generator | None = None,
) -> Box:
    """The crop box ``(top, left, height, width)`` of one clip whose frames are
    ``height`` x ``width``; all four values are whole numbers, returned as floats.

    ``mode``:

    * ``"random-resized"``: torchvision's ``RandomResizedCrop`` box (10 attempts at a random
      area fraction, uniform in ``scale``, and aspect ratio, log-uniform in ``ratio``; else
      the centred crop of the whole frame with its ratio clamped to ``ratio``), drawn from
      ``rng`` instead of torch's RNG. ``size`` is only validated: the box does not depend on
      the output size.
    * ``"center"``: torchvision's ``CenterCrop(size)``: a ``size`` box at the centre
      (``top = round((height - h) / 2)``, Python's rounding, as torchvision).
    * ``"random"``: torchvision's ``RandomCrop(size)`` without padding: a ``size`` box at a
      uniformly random position (whole pixels).
    * ``None``: the whole frame, ``(0, 0, height, width)``.

    ``size`` is ``(h, w)`` or an int for a square. We never pad: when the frame is smaller
    than ``size`` along an axis ("center" and "random"), the box is instead the largest box
    with ``size``'s aspect ratio that fits (its other side rounded to whole pixels), centred
    or at a random whole-pixel position along the axis that has room; the resize to ``size``
    then upsamples it.

    ``rng`` is required for the random modes. Raises ``ValueError`` for an unknown mode, a
    non-positive frame or ``size``, and a ``scale``/``ratio`` that is not ``(min, max)`` of
    positive numbers.
    """
    if mode not in CROP_MODES:
        raise ValueError(f"crop must be one of {CROP_MODES}, not {mode!r}")
    height = positive_int(height, "height")
    width = positive_int(width, "width")
    out = None if size is None else _size_pair(size)
    scale = _min_max(scale, "scale")
    ratio = _min_max(ratio, "ratio")
    if mode is None:
        return (0.0, 0.0, float(height), float(width))
    if mode == "random-resized":
        return _floats(_random_resized_box(height, width, scale, ratio, _need_rng(rng, mode)))
    if out is None:
        raise ValueError(f"crop={mode!r} needs a size (h, w)")
    box_h, box_w = _fit_box(height, width, *out)
    if mode == "center":
        top = int(round((height - box_h) / 2.0))
        left = int(round((width - box_w) / 2.0))
    else:
        rng = _need_rng(rng, mode)
        # Always two draws (even with no room), so every clip consumes the same amount of RNG.
        top = int(rng.integers(0, height - box_h + 1))
        left = int(rng.integers(0, width - box_w + 1))
    return _floats((top, left, box_h, box_w))


def sample_flip(p: float, rng: np.random.Generator) -> bool:
    """Whether to mirror a clip left-right, with probability ``p`` in ``[0, 1]``.

    One ``rng.random()`` draw per call, even for ``p`` of 0 or 1 (as torchvision's
    ``RandomHorizontalFlip``), so the draws that follow do not depend on ``p``.
    """
    if isinstance(p, bool) or not 0.0 <= p <= 1.0:
        raise ValueError(f"the flip probability must be in [0, 1], not {p!r}")
    return bool(rng.random() < p)


def _random_resized_box(
    height: int, width: int, scale: tuple[float, float], ratio: tuple[float, float], rng: Any
) -> tuple[int, int, int, int]:
    """torchvision's ``RandomResizedCrop.make_params``, line for line, drawing from ``rng``:
    anything with numpy's ``uniform(low, high)`` and ``integers(low, high_exclusive)`` (the
    tests drive it with torch's RNG to compare with torchvision draw for draw)."""
    area = height * width
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(_RRC_ATTEMPTS):
        target_area = area * float(rng.uniform(scale[0], scale[1]))
        aspect_ratio = math.exp(float(rng.uniform(log_ratio[0], log_ratio[1])))
        w = int(round(math.sqrt(target_area * aspect_ratio)))
        h = int(round(math.sqrt(target_area / aspect_ratio)))
        if 0 < w <= width and 0 < h <= height:
            top = int(rng.integers(0, height - h + 1))
            left = int(rng.integers(0, width - w + 1))
            return top, left, h, w
    in_ratio = width / height
    if in_ratio < ratio[0]:
        w, h = width, int(round(width / ratio[0]))
    elif in_ratio > ratio[1]:
        w, h = int(round(height * ratio[1])), height
    else:
        w, h = width, height
    # torchvision can round a sliver of a frame to 0 pixels here; an empty box is never useful.
    h, w = max(h, 1), max(w, 1)
    return (height - h) // 2, (width - w) // 2, h, w


def _fit_box(height: int, width: int, out_h: int, out_w: int) -> tuple[int, int]:
    """``(out_h, out_w)`` if it fits the frame, else the largest box of that aspect ratio."""
    if out_h <= height and out_w <= width:
        return out_h, out_w
    # Integer cross-multiplication picks the limiting axis without float ties.
    if height * out_w <= width * out_h:
        return height, min(width, max(1, int(round(out_w * height / out_h))))
    return min(height, max(1, int(round(out_h * width / out_w)))), width


def _size_pair(size: int | Sequence[int]) -> tuple[int, int]:
    if isinstance(size, Sequence) and not isinstance(size, str):
        if len(size) == 1:
            size = (size[0], size[0])
        if len(size) != 2:
            raise ValueError(f"size must be an int or (h, w), not {size!r}")
        return positive_int(size[0], "size[0]"), positive_int(size[1], "size[1]")
    side = positive_int(size, "size")
    return side, side


def _min_max(pair: Sequence[float], name: str) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in pair)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a pair (min, max), not {pair!r}") from None
    if not (0.0 < lo <= hi and math.isfinite(hi)):
        raise ValueError(f"{name} must be (min, max) with 0 < min <= max, not {pair!r}")
    return lo, hi


def _need_rng(rng: np.random.Generator | None, mode: str) -> np.random.Generator:
    if rng is None:
        raise ValueError(f"crop={mode!r} needs rng (a numpy.random.Generator)")
    return rng


def _floats(box: tuple[int, int, int, int]) -> Box:
    return (float(box[0]), float(box[1]), float(box[2]), float(box[3]))


# -- fusing a leading prefix of a torchvision v2 transform ------------------------------------


def split_fusable(
    transform: Callable[..., Any] | None,
) -> tuple[list[Callable[..., Any]], Callable[..., Any] | None]:
    """Split ``transform`` into the longest leading run of geometric transforms that
    :func:`plan_fused` can turn into one crop + resize + flip, and what remains.

    ``transform`` is a ``torchvision.transforms.v2.Compose`` (nested ones are flattened), a
    single transform, any other callable, or ``None``. Returns ``(ops, rest)``: ``rest`` is a
    ``v2.Compose`` of the remaining transforms, ``None`` when nothing remains, or
    ``transform`` itself when nothing was fused.

    Fusable (exact classes, since a subclass may change what they draw or do):
    ``v2.RandomResizedCrop`` and ``v2.Resize`` (``max_size`` honoured) with bilinear
    interpolation and ``antialias=True``; ``v2.CenterCrop``; ``v2.RandomCrop`` without
    ``padding`` or ``pad_if_needed``; ``v2.RandomHorizontalFlip``. The first other transform
    ends the run.
    """
    if transform is None:
        return [], None
    v2 = _v2()
    compose: type = v2.Compose
    kind: type = type(transform)
    if kind is not compose:
        return ([transform], None) if is_fusable(transform) else ([], transform)
    steps = _flatten(transform, compose)
    n = 0
    while n < len(steps) and is_fusable(steps[n]):
        n += 1
    if n == 0:
        return [], transform
    rest = steps[n:]
    return steps[:n], (compose(rest) if rest else None)


def is_fusable(op: Any) -> bool:
    """Whether :func:`plan_fused` can fuse the transform ``op`` (see :func:`split_fusable`)."""
    v2 = _v2()
    kind = type(op)
    if kind is v2.RandomHorizontalFlip or kind is v2.CenterCrop:
        return True
    if kind is v2.RandomCrop:
        return op.padding is None and not op.pad_if_needed
    if kind is v2.Resize or kind is v2.RandomResizedCrop:
        # The core resizes with antialiased bilinear only; anything else would look different.
        return _is_bilinear(op.interpolation) and op.antialias is True
    return False


def plan_fused(
    ops: Sequence[Callable[..., Any]], height: int, width: int
) -> tuple[Box, tuple[int, int], bool]:
    """The crop box (source coordinates, floats), output size ``(h, w)`` and flip that make
    one pass equivalent to applying ``ops`` (from :func:`split_fusable`) in order to a frame
    of ``height`` x ``width``.

    Each op's parameters are drawn by torchvision's own ``make_params`` from torch's global
    RNG, in order and exactly as the ops' ``forward`` would draw them (a
    ``RandomHorizontalFlip`` draws one ``torch.rand(1)`` even when ``p`` is 0 or 1), so after
    this call the RNG is where running ``ops`` would leave it.

    The ops act on a "virtual image": a box of the source frame resized to a virtual size,
    mirrored if the flip is on. ``Resize`` changes only the virtual size; a crop picks a
    sub-box of the virtual image, mapped back to the source by the box/virtual scale (and
    mirrored first when the flip is on); a flip toggles the flag.

    Raises :class:`NeedsPaddingError` when a ``CenterCrop`` is larger than the image it gets:
    torchvision pads there, and a box inside the frame cannot. This is checked here rather
    than in :func:`split_fusable` because only the frame size tells (most clips of a dataset
    may be large enough). Save ``torch.get_rng_state()`` first to fall back to running the
    transforms themselves. A ``RandomCrop`` larger than its input raises torchvision's own
    ``ValueError``, as it would unfused. Raises ``ValueError`` for an op that is not fusable.
    """
    v2 = _v2()
    height = positive_int(height, "height")
    width = positive_int(width, "width")
    state = _Virtual(height, width)
    op: Any  # a torchvision transform: its attributes are read below
    for op in ops:
        kind = type(op)
        if not is_fusable(op):
            raise ValueError(f"cannot fuse {op!r}: see split_fusable for the fusable transforms")
        if kind is v2.RandomHorizontalFlip:
            state.apply_flip(op)
        elif kind is v2.Resize:
            state.apply_resize(op)
        elif kind is v2.CenterCrop:
            state.apply_center_crop(op)
        else:  # RandomCrop, RandomResizedCrop: torchvision draws the box
            params = _make_params(op, state.virt_h, state.virt_w)
            state.crop(params["top"], params["left"], params["height"], params["width"])
            if kind is v2.RandomResizedCrop:
                state.virt_h, state.virt_w = int(op.size[0]), int(op.size[1])
    return state.result(height, width)


class _Virtual:
    """The image the next op sees: ``box`` of the source resized to ``virt_h`` x ``virt_w``,
    mirrored when ``flip``."""

    def __init__(self, height: int, width: int) -> None:
        self.top, self.left = 0.0, 0.0
        self.box_h, self.box_w = float(height), float(width)
        self.virt_h, self.virt_w = height, width
        self.flip = False

    def apply_flip(self, op: Any) -> None:
        import torch

        # _RandomApplyTransform.forward: `if torch.rand(1) >= self.p: return inputs`; it draws
        # even for p == 0 or p == 1 (no short cut), so we do too.
        if not bool(torch.rand(1) >= op.p):
            self.flip = not self.flip

    def apply_resize(self, op: Any) -> None:
        new_h, new_w = _resized_output_size((self.virt_h, self.virt_w), op.size, op.max_size)
        self.virt_h, self.virt_w = int(new_h), int(new_w)

    def apply_center_crop(self, op: Any) -> None:
        crop_h, crop_w = int(op.size[0]), int(op.size[1])
        if crop_h > self.virt_h or crop_w > self.virt_w:
            raise NeedsPaddingError(
                f"CenterCrop{(crop_h, crop_w)} of a {self.virt_h}x{self.virt_w} image would pad "
                "it, which cannot be fused: resize first, or leave this transform unfused"
            )
        # torchvision's _center_crop_compute_crop_anchor (Python's round: halves to even).
        top = int(round((self.virt_h - crop_h) / 2.0))
        left = int(round((self.virt_w - crop_w) / 2.0))
        self.crop(top, left, crop_h, crop_w)

    def crop(self, top: int, left: int, height: int, width: int) -> None:
        """Crop the virtual image; the cropped part becomes the new virtual image."""
        if self.flip:
            # The virtual image is mirrored: its columns [left, left+width) are the unmirrored
            # columns [virt_w - left - width, virt_w - left).
            left = self.virt_w - left - width
        scale_y = self.box_h / self.virt_h
        scale_x = self.box_w / self.virt_w
        self.top += top * scale_y
        self.left += left * scale_x
        self.box_h, self.box_w = height * scale_y, width * scale_x
        self.virt_h, self.virt_w = int(height), int(width)

    def result(self, height: int, width: int) -> tuple[Box, tuple[int, int], bool]:
        # Float rounding of the scale factors can overshoot the frame by an ulp: clamp.
        top = min(max(self.top, 0.0), float(height))
        left = min(max(self.left, 0.0), float(width))
        box = (top, left, min(self.box_h, height - top), min(self.box_w, width - left))
        return box, (self.virt_h, self.virt_w), self.flip


def _make_params(op: Any, height: int, width: int) -> dict[str, Any]:
    import torch

    # make_params only asks the input its size (query_size reads the last two dims of a plain
    # tensor), so an unallocated meta tensor stands in for the frames.
    fake = torch.empty((1, height, width), device="meta")
    params: dict[str, Any] = op.make_params([fake])
    return params


def _resized_output_size(
    image_size: tuple[int, int], size: Any, max_size: int | None
) -> tuple[int, int]:
    """``v2.Resize(size, max_size=max_size)``'s output ``(h, w)`` for an ``image_size`` input.

    The one call of a private torchvision function
    (``v2.functional._geometry._compute_resized_output_size``): torchvision's own arithmetic,
    so that the int() truncations and ``max_size`` match exactly. A torchvision that moved it
    or changed its parameters raises ``ImportError`` naming the version and what to do, not
    an error from inside torchvision. (Its ``ValueError`` for a ``max_size`` too small is
    the transform's own, raised as it would be unfused.)"""
    try:
        from torchvision.transforms.v2.functional._geometry import (
            _compute_resized_output_size as compute,
        )
    except ImportError as e:
        raise _torchvision_changed(e) from e
    try:
        new_h, new_w = compute(image_size, size, max_size)
    except TypeError as e:
        raise _torchvision_changed(e) from e
    return int(new_h), int(new_w)


def _torchvision_changed(cause: Exception) -> ImportError:
    import torchvision

    return ImportError(
        "gulpio_rs.torch fuses v2.Resize with torchvision's private helper "
        f"_compute_resized_output_size, which torchvision {torchvision.__version__} does not "
        f"provide as expected ({type(cause).__name__}: {cause}); install the torchvision "
        "gulpio-rs is tested with (see the [torch] extra in pyproject.toml), or give the "
        "dataset size= (its own resize) instead of a leading v2.Resize"
    )


def _is_bilinear(mode: Any) -> bool:
    from torchvision.transforms import InterpolationMode

    if isinstance(mode, InterpolationMode):
        return mode is InterpolationMode.BILINEAR
    if isinstance(mode, str):
        return mode == "bilinear"
    # Pillow's integer constant, which torchvision also accepts (PIL.Image.BILINEAR == 2).
    return isinstance(mode, int) and not isinstance(mode, bool) and mode == 2


def _flatten(transform: Any, compose: type) -> list[Any]:
    steps: list[Any] = []
    for step in transform.transforms:
        steps.extend(_flatten(step, compose) if type(step) is compose else [step])
    return steps


def _v2() -> Any:
    from torchvision.transforms import v2

    return v2
