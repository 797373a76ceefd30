"""Which batch a DataLoader process reads next, from the sampler's order: what lets a worker
of a remote dataset fetch that batch's bytes while it decodes the current one."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

import numpy as np
import numpy.typing as npt
from torch.utils.data import get_worker_info


class BatchOrder(Protocol):
    """What the read-ahead needs of an order of batches (what
    :class:`~gulpio_rs.torch.GulpDistributedSampler` and
    :class:`~gulpio_rs.torch.GulpBucketBatchSampler` offer): described here rather than
    imported, so that the samplers, which use this module, are not needed to read it."""

    @property
    def epoch(self) -> int: ...

    def read_ahead_batch(
        self,
        indices: list[int],
        epochs: list[int],
        workers: int,
        worker_id: int,
        batch_size: int,
    ) -> tuple[int, list[int]] | None: ...


class SampleOrder(Protocol):
    """What :func:`coming_batch` needs of an order of samples (what
    :class:`~gulpio_rs.torch.GulpDistributedSampler` offers)."""

    def epoch_indices(self, epoch: int, start: int, stop: int | None) -> np.ndarray: ...

    def locate(self, batch: npt.ArrayLike, epochs: Iterable[int]) -> tuple[int, int] | None: ...


def coming_batch(
    sampler: SampleOrder,
    indices: list[int],
    epochs: list[int],
    workers: int,
    worker_id: int,
    batch_size: int | None = None,
) -> tuple[int, list[int]] | None:
    """``(epoch, coming)``: the epoch ``indices`` were found in, and the indices of the batch
    the process that got them gets next; None when the order does not say.

    ``sampler`` is a :class:`~gulpio_rs.torch.GulpDistributedSampler`; ``epochs`` the epochs
    to look for ``indices`` in (a persistent worker keeps its first epoch's copy of the
    sampler, so the epoch is found from the batch itself); ``workers`` the DataLoader's worker
    count (1 for the main process) and ``worker_id`` this process's. The DataLoader deals
    batches to workers in turn, so after samples ``k..k+b`` of the epoch a worker's next batch
    starts at ``k + workers * b``. After its last batch of an epoch, a worker's next is the
    first it gets of the next epoch (each epoch deals from worker 0 again), in the next epoch's
    order (``set_epoch`` is called before every epoch). ``batch_size``: the loader's (the
    epoch's last batch may be shorter than the next epoch's first); default ``len(indices)``.
    """
    found = sampler.locate(indices, epochs)
    if found is None:
        return None
    epoch, k = found
    b = len(indices)
    start = k + workers * b
    coming = sampler.epoch_indices(epoch, start, start + b).tolist()
    if not coming:
        full = max(b, batch_size or 0)
        start = worker_id * full
        coming = sampler.epoch_indices(epoch + 1, start, start + full).tolist()
    return (epoch, coming) if coming else None


def sequential_batch(
    indices: list[int],
    length: int,
    workers: int,
    worker_id: int,
    batch_size: int | None = None,
) -> list[int] | None:
    """The indices of the batch the process that got ``indices`` gets next when the loader
    draws samples in order (``0, 1, ..., length - 1``: the DataLoader's default
    ``SequentialSampler``, ``shuffle=False``); None when ``indices`` are not a run of
    consecutive ascending indices, i.e. the order is something else.

    Batches are dealt to workers in turn as for :func:`coming_batch`: after ``k..k+b`` a
    worker's next batch starts at ``k + workers * b``; past the end, its first batch of the
    next epoch (which starts at 0 again)."""
    if not indices:
        return None
    k, b = indices[0], len(indices)
    if any(i != k + n for n, i in enumerate(indices)):
        return None
    start = k + workers * b
    if start < length:
        return list(range(start, min(length, start + b)))
    full = max(b, batch_size or 0)
    start = worker_id * full
    coming = list(range(start, min(length, start + full)))
    return coming or None


class ReadAhead:
    """One process's read-ahead state for a dataset: which batch of indices comes to this
    process next, from the order the batches are drawn in (a sampler with
    ``read_ahead_batch``, such as :class:`~gulpio_rs.torch.GulpDistributedSampler`), else from
    the DataLoader's default sequential order while the batches look like it."""

    def __init__(self) -> None:
        # The epoch the last batch was found in (a persistent worker's copy of the sampler
        # keeps its first epoch, so the epoch is found from the batches themselves).
        self.epoch: int | None = None
        self.batch_size = 0
        # Without an order: the batch expected next if the order is sequential, and how many
        # such guesses in a row were wrong.
        self.expected: list[int] | None = None
        self.misses = 0

    def coming(self, indices: list[int], length: int, order: BatchOrder | None) -> list[int] | None:
        """The indices of the batch this process gets after ``indices``, or None."""
        if not indices:
            return None
        info = get_worker_info()
        workers, me = (1, 0) if info is None else (max(1, int(info.num_workers)), int(info.id))
        self.batch_size = max(self.batch_size, len(indices))
        if order is not None:
            epochs = []
            for e in (self.epoch, order.epoch):
                for x in () if e is None else (e, e + 1):
                    if x not in epochs:
                        epochs.append(x)
            found = order.read_ahead_batch(indices, epochs, workers, me, self.batch_size)
            if found is None:
                return None
            self.epoch, found_batch = found
            return found_batch
        confirmed = self.expected == indices
        if self.expected is not None:
            self.misses = 0 if confirmed else self.misses + 1
        coming = sequential_batch(indices, length, workers, me, self.batch_size)
        self.expected = coming
        # A single index is a run of one whatever the order: wait until the guess it gives
        # has come true once (a shuffled order would waste every prefetch). Runs in another
        # order (a sampler shuffling blocks of consecutive samples) stop the guessing after
        # two wrong guesses in a row.
        if coming is None or self.misses >= 2 or (len(indices) < 2 and not confirmed):
            return None
        return coming
