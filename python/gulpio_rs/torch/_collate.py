"""The batches the datasets return and how they are collated: :func:`gulp_collate` (the
decoded batch as it is, no copy) and the one-shape check that raises
:class:`MixedShapesError` when the clips of a batch cannot be stacked."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.utils.data import default_collate


class MixedShapesError(ValueError):
    """The clips of one batch have different shapes (frame sizes, frame counts or channels),
    so they cannot be stacked into one batch tensor; the message names the videos and what to
    pass instead (``size=``, ``crop=``, ``frames=``, a :class:`GulpBucketBatchSampler`, or
    ``ragged=True`` for a list)."""


class _Batch(list[Any]):
    """The samples ``__getitems__`` returns, plus the stacked tensor they are views of (when
    there is one), so that :func:`gulp_collate` can return it without copying."""

    stacked: torch.Tensor | None = None
    # The decoder's (N, T, H, W, C) tensor that `stacked` is a permutation of.
    decoded: torch.Tensor | None = None
    # Fields of each sample after the clip: 1 for (clip, target), 0 for a clip alone, 2 for
    # a mixture's (clip, target, source).
    extras: int = 1
    # ragged=True on the dataset: the clips are collated as a list whatever their shapes.
    ragged: bool = False
    # Positions of the requested indices that are in the batch (None: all), when samples
    # that failed to read were skipped (on_error="skip").
    kept: list[int] | None = None


def gulp_collate(samples: list[Any]) -> Any:
    """``collate_fn`` for the DataLoader that returns the batch the dataset decoded in one
    call as it is, instead of stacking the samples again (:func:`default_collate` copies every
    clip once more). Returns ``(clips, targets)`` (or ``clips`` when ``target=None``) like
    ``default_collate`` does; ``clips`` is a view in the dataset's layout, not necessarily
    contiguous (call ``.contiguous()`` if a model needs it). For a dataset made with
    ``ragged=True``, ``clips`` is always a list of clip tensors (their shapes may differ).
    Anything else (samples changed by a transform, other datasets) goes to
    ``default_collate``.
    """
    if not isinstance(samples, _Batch):
        return default_collate(samples)
    clips: list[Any] | torch.Tensor | None
    if samples.ragged:
        clips = [s[0] for s in samples] if samples.extras else list(samples)
    else:
        clips = samples.stacked
        if clips is None or clips.shape[0] != len(samples):
            return default_collate(samples)
    if not samples.extras:
        return clips
    return (
        clips,
        *(default_collate([s[k] for s in samples]) for k in range(1, 1 + samples.extras)),
    )


class _Owner:
    """What :func:`_check_one_shape` says about the dataset a batch comes from."""

    def __init__(self, name: str, layout: str, transformed: bool):
        self.name, self.layout, self.transformed = name, layout, transformed


def _check_one_shape(owner: _Owner, ids: list[str], samples: Sequence[Any]) -> None:
    """Raises :class:`MixedShapesError` when the clips of a batch cannot be stacked: what
    ``default_collate`` would otherwise fail on with an error that names neither the videos
    nor the way out (and, in a worker, as "Trying to resize storage that is not resizable")."""
    clips = [s[0] if isinstance(s, tuple) else s for s in samples]
    if not all(isinstance(c, torch.Tensor) for c in clips):
        return  # a transform made something else: collating it is the transform's business
    shapes = [tuple(c.shape) for c in clips]
    if len(set(shapes)) <= 1:
        return
    first: dict[tuple[int, ...], str] = {}
    for id_, shape in zip(ids, shapes, strict=True):
        first.setdefault(shape, id_)
    listed = ", ".join(f"{id_!r} {shape}" for shape, id_ in list(first.items())[:4])
    more = f" and {len(first) - 4} more shapes" if len(first) > 4 else ""
    layout = owner.layout if len(owner.layout) == len(shapes[0]) else None
    differ = set()
    if layout is not None and len({len(s) for s in shapes}) == 1:
        differ = {layout[d] for d in range(len(layout)) if len({s[d] for s in shapes}) > 1}
    ways = []
    if differ & {"H", "W"} or not differ:
        ways.append(
            "size=(h, w) (with crop='center', 'random' or 'random-resized' to choose the box "
            "that is resized) to decode every clip at one size"
        )
        ways.append(
            "GulpBucketBatchSampler(dataset, batch_size=...) as the DataLoader's batch_sampler, "
            "so that each batch holds videos of one frame size"
        )
    if "T" in differ:
        ways.append("frames=T for clips of T frames")
    if "C" in differ:
        ways.append("colorspace='RGB' for 3 channels in every clip (grayscale videos give 1)")
    ways.append("ragged=True to get each batch's clips as a list (gulp_collate returns it)")
    after = " after the transform" if owner.transformed else ""
    raise MixedShapesError(
        f"{owner.name}: the clips of this batch have different shapes{after} "
        f"({owner.layout}): {listed}{more}; they cannot be stacked into one batch tensor. "
        "Pass " + "; or ".join(ways) + "."
    )
