"""``GulpImageDataset``: one frame of each item as an image."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, get_args

import torch

from .._choices import Colorspace, CropMode, ImageLayout, Io, OnError
from ._base import _GulpDataset
from ._options import (
    DatasetOptions,
    DatasetPath,
    Exclude,
    SizeArg,
    Target,
    Transform,
)

_IMAGE_LAYOUTS: dict[ImageLayout, tuple[int, int, int]] = {"HWC": (0, 1, 2), "CHW": (2, 0, 1)}
_LAYOUTS: tuple[ImageLayout, ...] = get_args(ImageLayout)


class GulpImageDataset(_GulpDataset):
    """A map-style dataset of single images (one-frame items, or frame ``frame`` of each
    item): item ``i`` is ``(image, target)`` with ``image`` a ``torch.uint8`` tensor in
    ``layout`` ``"CHW"`` (default) or ``"HWC"``, a view of the decoded array.

    ``target``, ``transform``, ``ids``, ``colorspace``, ``threads`` and batching are as in
    :class:`GulpVideoDataset`; ``collate_fn=gulp_collate`` returns ``(N, C, H, W)`` batches
    without a copy when all images of a batch have the same size. ``size``, ``crop``,
    ``scale``, ``ratio``, ``hflip`` and ``seed`` fuse a crop and resize into the decode as in
    :class:`GulpVideoDataset` (as does a leading run of torchvision geometric transforms),
    and so does ``fast_decode``. Images of different sizes in one batch raise
    :class:`MixedShapesError` unless ``size=`` makes them one size or ``ragged=True`` asks for
    lists (see :class:`GulpVideoDataset`). ``exclude`` and ``on_error`` are as in
    :class:`GulpVideoDataset`.
    """

    layout: ImageLayout

    def __init__(
        self,
        path: DatasetPath,
        *,
        frame: int = 0,
        seed: int | None = None,
        size: SizeArg = None,
        crop: CropMode | None = None,
        scale: Sequence[float] = (0.08, 1.0),
        ratio: Sequence[float] = (3.0 / 4.0, 4.0 / 3.0),
        hflip: float = 0.0,
        layout: ImageLayout = "CHW",
        transform: Transform | None = None,
        target: Target = "label",
        ids: Sequence[str] | None = None,
        colorspace: Colorspace | None = None,
        check_data: bool = True,
        threads: int | None = None,
        storage_options: Mapping[str, Any] | None = None,
        io: Io | None = None,
        ragged: bool = False,
        exclude: Exclude = None,
        on_error: OnError = "raise",
        fast_decode: bool = True,
    ) -> None:
        if layout not in _LAYOUTS:
            raise ValueError(f"layout must be one of {_LAYOUTS}, not {layout!r}")
        self.frame = int(frame)
        self.layout = layout
        options = DatasetOptions(
            transform=transform,
            target=target,
            ids=ids,
            seed=seed,
            colorspace=colorspace,
            check_data=check_data,
            threads=threads,
            storage_options=storage_options,
            io=io,
            size=size,
            crop=crop,
            scale=scale,
            ratio=ratio,
            hflip=hflip,
            ragged=ragged,
            exclude=exclude,
            on_error=on_error,
            fast_decode=fast_decode,
        )
        super().__init__(path, options, offset="center")

    def _frames(self, index: int, id_: str, draw: int = 0) -> list[int]:
        n = self._directory().num_frames(id_)
        if not -n <= self.frame < n:
            raise IndexError(f"item {id_!r} has {n} frames, there is no frame {self.frame}")
        return [self.frame % n]

    def _shape(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor[0].permute(_IMAGE_LAYOUTS[self.layout])

    def _shape_batch(self, batch: torch.Tensor) -> torch.Tensor:
        return batch[:, 0].permute(0, *(1 + p for p in _IMAGE_LAYOUTS[self.layout]))
