"""The keyword arguments :class:`GulpVideoDataset` and :class:`GulpImageDataset` share, as
one :class:`DatasetOptions`: listed (and typed) once here, and checked once, by the datasets'
common base (``_base._GulpDataset``), whichever class they were given to. The public
constructors keep their own signatures (users call them with keywords; ``help()`` and type
checkers see every parameter with its default) and hand these over as one value."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .._choices import Colorspace, CropMode, Io, OnError
from ..directory import GulpDirectory

#: What the datasets' ``path`` may be: a directory (or dataset URL), or an open
#: :class:`~gulpio_rs.GulpDirectory` (its storage options and ``io`` are the defaults).
DatasetPath = str | os.PathLike[str] | GulpDirectory
#: ``transform=``: applied to each decoded clip (a torchvision v2 ``Compose``, say).
Transform = Callable[[torch.Tensor], Any]
#: ``target=``: a meta field name, a callable ``meta -> target``, or None (no target).
Target = str | Callable[[dict[str, Any]], Any] | None
#: ``size=``: ``(height, width)``, or an int for a square.
SizeArg = int | Sequence[int] | None
#: ``exclude=``: a file with one id per line, or a collection of ids.
Exclude = str | os.PathLike[str] | Iterable[str] | None


@dataclass(frozen=True)
class DatasetOptions:
    """The shared keyword arguments, as the dataset was given them (the base checks them;
    see :class:`~gulpio_rs.torch.GulpVideoDataset` for what each does). No defaults here:
    the public signatures hold them.

    ``transform``, ``target``, ``ids``: what an item is (the clip transformed, with its
    target) and which videos are the dataset. ``seed``: the random draws (offsets, crops) are
    a pure function of ``(seed, epoch, index)`` with an integer seed. ``colorspace``,
    ``check_data``, ``threads``, ``fast_decode``: how frames are decoded. ``storage_options``,
    ``io``: how the directory is read. ``size``, ``crop``, ``scale``, ``ratio``, ``hflip``:
    the geometry fused into the decode. ``ragged``: batches of clips as lists. ``exclude``,
    ``on_error``: known-bad samples left out, and failed reads skipped or raised.
    """

    transform: Transform | None
    target: Target
    ids: Sequence[str] | None
    seed: int | None
    colorspace: Colorspace | None
    check_data: bool
    threads: int | None
    storage_options: Mapping[str, Any] | None
    io: Io | None
    size: SizeArg
    crop: CropMode | None
    scale: Sequence[float]
    ratio: Sequence[float]
    hflip: float
    ragged: bool
    exclude: Exclude
    on_error: OnError
    fast_decode: bool


def exclusions(exclude: Exclude) -> frozenset[str]:
    """The ids ``exclude=`` names: a file (path) with one id per line (``gulpio check
    --bad-list`` writes it; empty lines and lines starting with ``#`` are ignored), or a
    collection of ids."""
    if exclude is None:
        return frozenset()
    if isinstance(exclude, (str, bytes, os.PathLike)):
        with open(exclude, encoding="utf-8") as f:
            lines = [line.rstrip("\r\n") for line in f]
        return frozenset(line for line in lines if line and not line.startswith("#"))
    if isinstance(exclude, dict) or not hasattr(exclude, "__iter__"):
        raise TypeError(f"exclude must be a file path or a collection of ids, not {exclude!r}")
    return frozenset(str(i) for i in exclude)
