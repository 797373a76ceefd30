"""Thread and worker counts: the one owner of how many cores a read, an ingest or a check
uses (the argument, ``GULPIO_NUM_THREADS``, or this process's share of the usable cores)."""

from __future__ import annotations

import os
import sys

import numpy as np

from . import _native


def decode_threads(threads: int | None = None, remote: bool = False) -> int:
    """Decode threads: the argument, else ``GULPIO_NUM_THREADS``, else this process's share of
    the usable cores: all of them (``0``) in a lone process; under torchrun
    (``LOCAL_WORLD_SIZE``) divided among the node's ranks, and inside a PyTorch DataLoader
    worker also among the loader's workers (at least 1), so that ranks x workers x threads
    stays at the core count instead of multiplying past it.

    ``remote``: the read is from object storage, where each worker also waits for round
    trips; its share is then not divided among the loader's workers, so that while one worker
    waits for its bytes the others can decode on its cores (measured in docs/REMOTE.md,
    "Read-ahead: hiding the round trip")."""
    if threads is not None:
        return thread_count(threads, "threads")
    env = os.environ.get("GULPIO_NUM_THREADS")
    if env and env.strip():
        value: int | str
        try:
            value = int(env)
        except ValueError:
            value = env
        return thread_count(value, "GULPIO_NUM_THREADS")
    sharers = _local_ranks()
    torch = sys.modules.get("torch")  # never import torch ourselves
    if torch is not None and not remote:
        get_worker_info = getattr(getattr(torch.utils, "data", None), "get_worker_info", None)
        info = get_worker_info() if get_worker_info is not None else None
        if info is not None:
            sharers *= max(1, int(getattr(info, "num_workers", 1) or 1))
    if sharers == 1:
        return 0
    return max(1, usable_cores() // sharers)


def thread_count(value: object, name: str, *, zero_means_all: bool = True) -> int:
    """``value`` checked as a count of threads (or worker processes) given as ``name``: an
    integer from 1 to ``MAX_THREADS`` (src/pool.rs says why there is a cap), or 0 for "all
    usable cores" where ``zero_means_all``. Anything else is a ``ValueError`` naming ``name``
    and the accepted range (``threads=10**9`` started threads until the process hung)."""
    top = _native.MAX_THREADS
    low = 0 if zero_means_all else 1
    if (
        not isinstance(value, (int, np.integer))
        or isinstance(value, bool)
        or not low <= value <= top
    ):
        accepted = f"an integer from 1 to {top}" + (" (0: all usable cores)" if low == 0 else "")
        raise ValueError(f"{name} must be {accepted}, not {value!r}")
    return int(value)


def _local_ranks() -> int:
    """Processes of this job on this machine: torchrun's ``LOCAL_WORLD_SIZE``, else 1."""
    try:
        return max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        return 1


def usable_cores() -> int:
    """The CPUs this process may run on, as the Rust pools count them (affinity mask and cgroup
    CPU quota): one count for Python's shares and the core's ``threads=0``."""
    return _native.available_threads()
