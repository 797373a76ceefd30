"""A weighted mixture of several datasets as one map-style dataset: which source sample each
index of an epoch is, a pure function of ``(seed, epoch)``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, SupportsInt

import numpy as np
import numpy.typing as npt
import torch
from torch.utils.data import Dataset, get_worker_info

from ._base import MixtureSource, _GulpDataset
from ._collate import _Batch, _check_one_shape, _Owner
from ._readahead import BatchOrder, ReadAhead
from ._sampler import MASK64, mix64, mix64_array, shuffled_positions
from ._shared import handover, shared_batch

# Domain separation of the mixture's keys from the samplers' (any fixed constants would do).
_PASS_KEY = 0x6D69787475726501
_DRAW_KEY = 0x6D69787475726502

# One source's part of a batch: its number, the positions in the batch of its samples that were
# read, and its batch.
_Part = tuple[int, np.ndarray, _Batch]


def apportion(total: int, weights: Sequence[float]) -> list[int]:
    """``total`` split in proportion to ``weights`` into whole numbers that add up to
    ``total``: each gets the floor of its exact share, and the units left over go to the
    largest remainders (ties to the earlier weight), so every count is within 1 of its exact
    share ``total * w / sum(weights)`` (Hamilton's method)."""
    total = int(total)
    whole = math.fsum(weights)
    exact = [total * w / whole for w in weights]
    counts = [math.floor(x) for x in exact]
    left = total - sum(counts)
    by_remainder = sorted(range(len(exact)), key=lambda i: (counts[i] - exact[i], i))
    for i in by_remainder[:left]:
        counts[i] += 1
    return counts


class GulpMixture(Dataset[Any]):
    """One map-style dataset over several :class:`GulpVideoDataset` / :class:`GulpImageDataset`
    (local or remote, any sizes), drawing from each in proportion to its weight.

    **An epoch** has ``length`` samples (default: the sources' total size). Source ``s`` gets
    ``counts[s]`` of them: ``length`` split in proportion to ``weights`` (default: the
    sources' sizes, i.e. every sample once per epoch, a concatenation), each count within 1 of
    its exact share. Index ``i`` of the mixture is source ``s``'s ``k``-th draw of the epoch for
    ``offsets[s] <= i < offsets[s + 1]`` (the sources one after another: a shuffling sampler,
    such as :class:`GulpDistributedSampler`, mixes them). Which sample a draw is:

    * ``replacement=False`` (default), without replacement: each source is read round and
      round in a shuffled order (a permutation of its samples keyed by ``(seed, source,
      cycle)``, a new one whenever a round ends where an epoch ends, i.e. every
      ``lcm(size, count)`` draws); epoch ``e`` takes draws ``e * counts[s]`` to ``(e + 1) *
      counts[s] - 1`` of that endless sequence. So every sample of a source is drawn once
      before any is drawn again, across epochs too: a source with more samples than its count
      shows another part of itself in each epoch (all of it over ``size / count`` epochs),
      and within an epoch the draws of a sample differ in number by at most one between
      samples.
    * ``replacement=True``: every draw is an independent uniform choice among the source's
      samples, keyed by ``(seed, source, epoch, k)``.

    ``replacement`` may also be a list, one flag per source. Everything is a pure function of
    ``(seed, epoch)`` and the sources' lengths, computed in O(1) per index, so it does not
    depend on the number of workers or ranks, and resumes (also elastically) with the
    sampler. Call :meth:`set_epoch` before each epoch (it sets the sources' epoch too: their
    random offsets and crops with an integer ``seed``; a sample drawn twice in an epoch gets
    its own draws each time).

    Item ``i`` is the source's item plus the source's number: ``(clip, target, source)``, or
    ``(clip, source)`` when the sources have ``target=None``; :func:`gulp_collate` gives
    ``(clips, targets, sources)``. A batch is read with one ``read_batch`` per source present
    in it, and the clips are gathered into one batch tensor (one copy, in shared memory in a
    worker) when they have one shape; otherwise :class:`MixedShapesError`, unless
    ``ragged=True`` (lists, as for the datasets). Remote sources read the next batch ahead
    when the order says which (a :class:`GulpDistributedSampler` made with the mixture, or
    the DataLoader's default sequential order), as the datasets do.
    """

    def __init__(
        self,
        datasets: Sequence[_GulpDataset],
        weights: Sequence[float] | None = None,
        *,
        seed: int = 0,
        length: int | None = None,
        replacement: bool | Sequence[bool] = False,
        ragged: bool = False,
    ):
        datasets = list(datasets)
        if not datasets:
            raise ValueError("a mixture needs at least one dataset")
        for n, ds in enumerate(datasets):
            if not isinstance(ds, _GulpDataset):
                raise TypeError(
                    f"source {n} is a {type(ds).__name__}: a mixture takes GulpVideoDataset "
                    "and GulpImageDataset sources"
                )
        if len({ds.target is None for ds in datasets}) > 1:
            raise ValueError("give every source a target, or none (target=None on all)")
        sizes = [len(ds) for ds in datasets]
        if weights is None:
            weights = sizes
        weights = [float(w) for w in weights]
        if len(weights) != len(datasets):
            raise ValueError(f"{len(weights)} weights for {len(datasets)} datasets")
        if not all(math.isfinite(w) and w >= 0 for w in weights) or math.fsum(weights) <= 0:
            raise ValueError(f"weights must be finite, >= 0 and not all 0, not {weights}")
        for n, (w, size) in enumerate(zip(weights, sizes, strict=True)):
            if w > 0 and size == 0:
                raise ValueError(f"source {n} ({datasets[n].path}) is empty but has weight {w}")
        if length is None:
            length = sum(sizes)
        if isinstance(length, bool) or int(length) != length or length < 0:
            raise ValueError(f"length must be a non-negative integer, not {length!r}")
        if isinstance(replacement, (bool, np.bool_)):
            replacement = [bool(replacement)] * len(datasets)
        replacement = [bool(r) for r in replacement]
        if len(replacement) != len(datasets):
            raise ValueError(f"{len(replacement)} replacement flags for {len(datasets)} datasets")
        self.datasets = datasets
        self._sources = [MixtureSource(ds) for ds in datasets]
        self.weights = weights
        self.seed = int(seed)
        self.length = int(length)
        self.replacement = replacement
        self.ragged = bool(ragged)
        self.counts = apportion(self.length, weights)
        self.sizes = sizes
        self.offsets = [0]
        for c in self.counts:
            self.offsets.append(self.offsets[-1] + c)
        self._offsets = np.asarray(self.offsets, dtype=np.int64)
        self.epoch = 0
        self._order: BatchOrder | None = None
        self._ahead = ReadAhead()

    def __len__(self) -> int:
        return self.length

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose draws the next iteration reads, for the mixture and its sources;
        call it in the main process before iterating (workers copy the mixture when an
        epoch's iterator starts, so ``persistent_workers=True`` keeps the first epoch's)."""
        self.epoch = int(epoch)
        for ds in self.datasets:
            ds.set_epoch(self.epoch)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_ahead"] = ReadAhead()
        return state

    # -- which sample an index is ------------------------------------------------------------
    def locate(self, indices: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(sources, samples, draws)`` of mixture indices in the current epoch: the source's
        number, the index into that source, and the draw number that keys the sample's random
        offsets and crops (without replacement the round through the source, with it ``k +
        1``), different for each time a sample is drawn in an epoch."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= self.length):
            raise IndexError(f"index out of range for a mixture of {self.length} samples")
        offsets = self._offsets
        sources = np.searchsorted(offsets, idx, side="right") - 1
        samples = np.zeros_like(idx)
        draws = np.zeros_like(idx)
        for s in sorted(set(sources.tolist())):
            at = sources == s
            k = idx[at] - offsets[s]
            got, drawn = self._draw(s, k)
            samples[at], draws[at] = got, drawn
        return sources, samples, draws

    def _draw(self, s: int, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = self.sizes[s]
        key = mix64((self.seed & MASK64) ^ mix64(_PASS_KEY + s))
        if self.replacement[s]:
            base = mix64(key ^ mix64(_DRAW_KEY ^ (self.epoch & MASK64)))
            with np.errstate(over="ignore"):
                h = mix64_array(np.uint64(base) + k.astype(np.uint64))
            # Modulo bias n / 2**64: nothing to see at any dataset size.
            return (h % np.uint64(n)).astype(np.int64), k + 1
        # Draw t of the source's endless sequence: its permutation read round and round,
        # a new permutation each time a round ends where an epoch ends (every lcm(n, count)
        # draws), so that no epoch straddles two permutations.
        t = self.epoch * self.counts[s] + k
        cycles = t // math.lcm(n, self.counts[s])
        out = np.empty_like(k)
        for c in sorted(set(cycles.tolist())):
            at = cycles == c
            out[at] = shuffled_positions(t[at] % n, n, key, c).astype(np.int64)
        return out, t // n

    # -- items -------------------------------------------------------------------------------
    def _normalize(self, index: SupportsInt) -> int:
        index = int(index)
        if not -self.length <= index < self.length:
            raise IndexError(f"index {index} out of range for a mixture of {self.length} samples")
        return index % self.length

    def __getitem__(self, index: SupportsInt) -> tuple[Any, ...]:
        (s,), (j,), (d,) = self.locate([self._normalize(index)])
        item = self._sources[s].item(int(j), draw=int(d))
        return (*item, int(s)) if self._with_target else (item, int(s))

    def __getitems__(self, indices: Sequence[SupportsInt]) -> _Batch:
        """A whole batch: one batched read per source present in it, in the batch's order."""
        normalized = [self._normalize(i) for i in indices]
        if not normalized:
            return _Batch()
        sources, samples, draws = self.locate(normalized)
        self._read_ahead(normalized)
        parts: list[_Part] = []
        present = list(dict.fromkeys(sources.tolist()))
        for s in present:
            at = np.flatnonzero(sources == s)
            # Several sources are gathered into one shared tensor below: they decode into
            # private memory (one source's batch is handed over as it is).
            got = self._sources[s].batch(
                samples[at].tolist(), draws[at].tolist(), shared=len(present) == 1
            )
            kept = at if got.kept is None else at[got.kept]
            parts.append((s, kept, got))
        order = np.argsort(np.concatenate([kept for _, kept, _ in parts]), kind="stable")
        flat = [(s, sample) for s, _, got in parts for sample in got]
        batch = _Batch()
        first = parts[0][2] if parts else None
        batch.extras = (first.extras if first is not None else 0) + 1
        batch.ragged = self.ragged
        for n in order.tolist():
            s, sample = flat[n]
            batch.append((*sample, s) if self._with_target else (sample, s))
        if len(normalized) != len(batch):
            batch.kept = np.sort(np.concatenate([kept for _, kept, _ in parts])).tolist()
        batch.stacked = self._gather(parts, len(batch))
        if batch.stacked is None and not self.ragged:
            ids = [self._sources[s].video_id(int(j)) for s, j in zip(sources, samples, strict=True)]
            if batch.kept is not None:
                ids = [ids[n] for n in batch.kept]
            _check_one_shape(self._describe(), ids, batch)
        return batch

    @property
    def _with_target(self) -> bool:
        """Whether the sources' items are ``(clip, target)`` (the source's number joins the
        pair), not the clip alone: a transform may make a clip a tuple too (two views of it),
        which stays the item's first field."""
        return self.datasets[0].target is not None  # all sources agree (checked when made)

    def _gather(self, parts: list[_Part], count: int) -> torch.Tensor | None:
        """The sources' decoded batches as one batch tensor in the batch's order, or None when
        they cannot be one (shapes, layouts or transforms differ)."""
        decoded = [got.decoded for _, _, got in parts if got.decoded is not None]
        if not parts or len(decoded) != len(parts):
            return None
        shapes = {tuple(d.shape[1:]) for d in decoded}
        kinds = {(type(self.datasets[s]), self.datasets[s].layout) for s, _, _ in parts}
        if len(shapes) != 1 or len(kinds) != 1:
            return None
        owner = self._sources[parts[0][0]]
        if len(parts) == 1:
            return parts[0][2].stacked  # one source, in order: its batch as it is
        shape = (count, *shapes.pop())
        raw = (
            shared_batch(shape)
            if get_worker_info() is not None
            else torch.empty(shape, dtype=torch.uint8)
        )
        where = np.empty(0, dtype=np.int64)
        for _, kept, _ in parts:
            where = np.concatenate([where, kept])
        # Positions in the (possibly shortened) batch: ranks of the kept positions.
        rank = np.empty_like(where)
        rank[np.argsort(where, kind="stable")] = np.arange(where.size)
        # numpy's copy, not a torch op: torch's OpenMP threads would spin on after it and
        # take the cores from the next decode (docs/TORCH.md, Performance).
        target = raw.numpy()
        start = 0
        for (_, kept, _), d in zip(parts, decoded, strict=True):
            target[rank[start : start + kept.size]] = d.numpy()
            start += kept.size
        return handover(owner.shape_batch(raw))

    def _describe(self) -> _Owner:
        """What :func:`_check_one_shape` names: the mixture and its first source's layout."""
        first = self.datasets[0]
        return _Owner(
            f"GulpMixture of {len(self.datasets)} sources",
            first.layout,
            any(src.has_unfused_transform for src in self._sources),
        )

    # -- read-ahead --------------------------------------------------------------------------
    def _follow_sampler(self, sampler: BatchOrder) -> None:
        """Called by :class:`GulpDistributedSampler` when it is made for this mixture."""
        self._order = sampler

    def _read_ahead(self, indices: list[int]) -> None:
        """Prefetches the next batch's bytes from the remote sources in it (see
        :class:`~gulpio_rs.torch.GulpVideoDataset`)."""
        if not any(src.is_remote() for src in self._sources):
            return
        coming = self._ahead.coming(indices, self.length, self._order)
        if not coming:
            return
        sources, samples, draws = self.locate(coming)
        for s in dict.fromkeys(sources.tolist()):
            src = self._sources[s]
            if src.is_remote():
                at = sources == s
                src.prefetch(samples[at].tolist(), draws[at].tolist())
