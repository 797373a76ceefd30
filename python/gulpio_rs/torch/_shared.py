"""Shared-memory batches a DataLoader worker decodes into, and reuses once no process holds
them any more.

Why: a worker decodes each batch straight into shared memory so that it reaches the main
process as a handle instead of a copy. A fresh segment per batch costs the kernel's page
faults and zeroing for every page the decoder writes (for a batch of 16 clips x 16 frames at
456x256, 90 MB), about a fifth of the worker's time on full frames (docs/TORCH.md). Reusing a
segment is only safe once the main process (and anything it handed the batch to) has let go
of it, and torch gives a worker no way to know that for its default ``file_descriptor``
sharing. Its refcounted segments (the ``file_system`` strategy's) do: every process that maps
one counts itself in the segment's header, and the sender counts the copy in flight. So the
worker allocates those, pickles its batch itself (the pickled batch is a plain tensor again in
the receiving process), and takes a segment again only when it alone maps it and nothing in
the worker references it.
"""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable
from typing import SupportsIndex, cast

import torch

# torch's RefcountedMapAllocator keeps the number of processes mapping a segment in an int at
# the segment's start, this many bytes before the data (checked by `_refcounts_readable`).
_HEADER = 64
#: Segments one process keeps for reuse: the DataLoader's default prefetch (2 per worker), the
#: batch the main process works on, and one spare.
KEEP = 4

_readable: bool | None = None
_lock = threading.Lock()

#: A tensor's place in its storage, as pickled: ``(storage offset, shape, stride)``.
_Layout = tuple[int | torch.SymInt, tuple[int, ...], tuple[int, ...]]


# torch leaves these unannotated (Python shims over C++), so strict mypy refuses to call them;
# the casts give each the signature that torch implements (torch/storage.py, torch/_tensor.py,
# torch/multiprocessing/reductions.py).
def _incref(storage: torch.UntypedStorage) -> None:
    cast("Callable[[], None]", storage._shared_incref)()


def _share_filename(storage: torch.UntypedStorage) -> tuple[bytes, bytes, int]:
    """``(manager socket, segment name, bytes)``: the handle another process maps."""
    share = cast("Callable[[], tuple[bytes, bytes, int]]", storage._share_filename_cpu_)
    return share()


def _share_memory(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` moved to shared memory (in place; returns it)."""
    return cast("Callable[[], torch.Tensor]", tensor.share_memory_)()


def _mapping_start(address: int) -> int | None:
    """Start of this process's memory mapping that holds ``address``."""
    with open("/proc/self/maps") as f:
        for line in f:
            span = line.split(" ", 1)[0]
            lo, hi = (int(x, 16) for x in span.split("-"))
            if lo <= address < hi:
                return lo
    return None


def _refcount(storage: torch.UntypedStorage) -> int:
    return ctypes.c_int.from_address(storage.data_ptr() - _HEADER).value


def _refcounts_readable() -> bool:
    """Whether this torch lays refcounted segments out as read here: the mapping starts
    ``_HEADER`` bytes before the data, and the count there follows increments. Checked once
    per process; without it, batches are never reused (fresh segments, as before)."""
    global _readable
    if _readable is None:
        try:
            s = torch.UntypedStorage._new_using_filename_cpu(_HEADER)
            ok = _mapping_start(s.data_ptr()) == s.data_ptr() - _HEADER
            if ok:
                before = _refcount(s)
                _incref(s)
                during = _refcount(s)
                s._shared_decref()
                ok = (before, during, _refcount(s)) == (1, 2, 1)
            _readable = ok
        except (AttributeError, OSError, RuntimeError, ValueError):
            _readable = False
    return _readable


class _Handover(torch.Tensor):
    """A pooled batch on its way out of the worker: pickles as a refcounted segment handle,
    and unpickles as a plain tensor over that segment."""

    # torch's own way to opt a subclass out of __torch_function__ dispatch; its stubs type the
    # function less precisely than Tensor's classmethod.
    __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]

    def __reduce_ex__(
        self, protocol: SupportsIndex
    ) -> tuple[Callable[..., torch.Tensor], tuple[bytes, bytes, int, _Layout]]:
        storage = self.untyped_storage()
        manager, handle, nbytes = _share_filename(storage)
        # The copy in flight holds a reference until the receiver has mapped the segment
        # (what torch's own file_system reducer does; the receiver drops it).
        _incref(storage)
        meta = (self.storage_offset(), tuple(self.shape), tuple(self.stride()))
        return (_rebuild, (manager, handle, nbytes, meta))


def _rebuild(manager: bytes, handle: bytes, nbytes: int, meta: _Layout) -> torch.Tensor:
    from torch.multiprocessing.reductions import rebuild_storage_filename

    rebuild = cast(
        "Callable[[type[torch.UntypedStorage], bytes, bytes, int], torch.UntypedStorage]",
        rebuild_storage_filename,
    )
    storage = rebuild(torch.UntypedStorage, manager, handle, nbytes)
    offset, shape, stride = meta
    return torch.empty(0, dtype=torch.uint8).set_(storage, offset, shape, stride)


class SharedBatches:
    """The segments one process decodes batches into: :meth:`take` hands out a free one of
    the right size (or a new one), :func:`handover` marks a batch for sending."""

    def __init__(self, keep: int = KEEP):
        self.keep = keep
        self._pid = os.getpid()
        # (storage, its data pointer when made): a storage pickled through torch's fd strategy
        # is moved to a new segment, and is then no longer one of ours.
        self._kept: list[tuple[torch.UntypedStorage, int]] = []

    def _free(self, storage: torch.UntypedStorage, ptr: int) -> bool:
        # Only this pool refers to it in this process, and no other process maps it (nor has
        # it in flight).
        return (
            storage.data_ptr() == ptr
            and torch._C._storage_Use_Count(storage._cdata) == 1
            and _refcount(storage) == 1
        )

    def take(self, shape: tuple[int, ...]) -> torch.Tensor:
        """A uint8 tensor of ``shape`` in shared memory that no one else uses."""
        nbytes = 1
        for d in shape:
            nbytes *= int(d)
        if os.getpid() != self._pid:  # inherited across a fork: the parent's, not ours
            self._kept, self._pid = [], os.getpid()
        storage = None
        if nbytes > 0 and _refcounts_readable():
            with _lock:
                self._kept = [(s, p) for s, p in self._kept if s.data_ptr() == p]
                for i, (s, p) in enumerate(self._kept):
                    if s.nbytes() == nbytes and self._free(s, p):
                        storage = s
                        # Most recently used last: the first free entry is the one to evict.
                        self._kept.append(self._kept.pop(i))
                        break
                if storage is None:
                    storage = torch.UntypedStorage._new_using_filename_cpu(nbytes)
                    if len(self._kept) >= self.keep:
                        idle = [i for i, (s, p) in enumerate(self._kept) if self._free(s, p)]
                        if idle:
                            self._kept.pop(idle[0])
                    if len(self._kept) < self.keep:
                        self._kept.append((storage, storage.data_ptr()))
        if storage is None:
            return _fresh(shape)
        return torch.empty(0, dtype=torch.uint8).set_(storage).view(shape)

    def owns(self, tensor: torch.Tensor) -> bool:
        ptr = tensor.untyped_storage().data_ptr()
        return any(p == ptr and s.data_ptr() == p for s, p in self._kept)


def _fresh(shape: tuple[int, ...]) -> torch.Tensor:
    """A new shared-memory tensor (torch's default sharing), not kept for reuse."""
    numel = 1
    for d in shape:
        numel *= int(d)
    new_shared = getattr(torch.UntypedStorage, "_new_shared", None)
    if new_shared is None:  # a private torch API; without it, copy zeros into shared memory
        return _share_memory(torch.empty(shape, dtype=torch.uint8))
    return torch.empty(0, dtype=torch.uint8).set_(new_shared(numel)).view(shape)


_POOL = SharedBatches()


def shared_batch(shape: tuple[int, ...]) -> torch.Tensor:
    """A batch to decode into in a DataLoader worker: a reused segment when one is free."""
    return _POOL.take(shape)


def handover(batch: torch.Tensor) -> torch.Tensor:
    """``batch`` (a view of a :func:`shared_batch`) as it should leave the worker: pickled as
    a handle to its refcounted segment, so the segment is known to be free once the receiver
    drops it. Other tensors are returned as they are."""
    if _POOL.owns(batch):
        return batch.as_subclass(_Handover)
    return batch


def shared_zeros(size: int, dtype: torch.dtype) -> torch.Tensor:
    """A tensor of ``size`` zeros in shared memory: a counter that the DataLoader's workers
    and the main process all see."""
    return _share_memory(torch.zeros(size, dtype=dtype))
