"""Which batch a DataLoader process reads next, from the sampler's order: what lets a worker
of a remote dataset fetch that batch's bytes while it decodes the current one."""

from __future__ import annotations


def coming_batch(
    sampler,
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
    coming = sampler._indices(epoch, start, start + b).tolist()
    if not coming:
        full = max(b, batch_size or 0)
        start = worker_id * full
        coming = sampler._indices(epoch + 1, start, start + full).tolist()
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
