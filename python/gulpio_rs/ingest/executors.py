"""Where an ingest runs its chunks: executors by name (``GulpIngestor(executor=...)``).

An executor is a factory registered under a name with :func:`register_executor`: called with
the run's ``address`` (``GulpIngestor(ray_address=)``, ``gulpio ingest --ray ADDRESS``), it
returns a :class:`ChunkExecutor`, which chooses the encode threads per worker when the caller
gave none and writes a run's chunks (a :class:`ChunkJob`). The ingest knows executors only
through this registry: ``"process"`` (the runner's process pool, the default) is registered by
``ingest.runner``, the others by the feature that provides them when it is imported.

:func:`executor` finds a name that is not registered yet in :data:`PROVIDED_BY` (the feature
subpackage that registers it, imported then: such a feature's own dependencies, Ray for
instance, are imported only when a run starts).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .encoder import FrameEncoder
    from .progress import Progress
    from .report import ChunkResult, IngestReport


class ChunkWorker(Protocol):
    """What an executor needs of the runner's per-process worker: its encoder (closed when
    the worker is dropped) and ``run``, which writes and publishes one chunk."""

    encoder: FrameEncoder

    def run(self, number: int, input_slice: slice | list[slice]) -> ChunkResult: ...


@dataclass(frozen=True)
class ChunkJob:
    """A run's chunks for an executor to write: ``todo`` holds ``(chunk number, slices)``
    pairs; ``new_worker(*worker_args, events)`` makes a worker (``events``: a queue of
    ``(videos, frames)`` progress events, or None); ``run`` is the plan's run token. Each
    result goes to ``report.add`` and ``bar.update`` as it arrives."""

    new_worker: Callable[..., ChunkWorker]
    worker_args: tuple[Any, ...]
    run: str
    todo: list[tuple[int, list[slice]]]
    num_workers: int
    report: IngestReport
    bar: Progress

    @property
    def adapter(self) -> Any:
        return self.worker_args[0]

    @property
    def folder(self) -> str:
        folder: str = self.worker_args[1]
        return folder


class ChunkExecutor(Protocol):
    """Runs the chunks of an ingest."""

    def threads_per_worker(self, num_workers: int) -> int:
        """Encode threads per worker when the caller gave no ``threads``."""
        ...

    def run(self, job: ChunkJob) -> None:
        """Writes every chunk of ``job``; raises what a chunk raised (``IngestError`` under
        ``strict``) after stopping the others."""
        ...


#: ``factory(address) -> ChunkExecutor``.
ExecutorFactory = Callable[[str | None], ChunkExecutor]

_EXECUTORS: dict[str, ExecutorFactory] = {}

#: Executors of optional features: the subpackage that registers each when imported.
PROVIDED_BY: dict[str, str] = {"ray": "gulpio_rs.ray"}


def register_executor(name: str, factory: ExecutorFactory) -> None:
    """Makes ``GulpIngestor(executor=name)`` run its chunks with ``factory(address)``."""
    _EXECUTORS[name] = factory


def names() -> list[str]:
    """The executor names an ingest accepts, the default first."""
    return list(dict.fromkeys([*_EXECUTORS, *PROVIDED_BY]))


def executor(name: str, address: str | None = None) -> ChunkExecutor:
    """The executor registered as ``name``, made for ``address``; ``ValueError`` for a name
    no one registers."""
    if name not in _EXECUTORS and name in PROVIDED_BY:
        importlib.import_module(PROVIDED_BY[name])
    factory = _EXECUTORS.get(name)
    if factory is None:
        *others, last = [repr(n) for n in names()]
        known = f"{', '.join(others)} or {last}" if others else last
        raise ValueError(f"executor must be {known}, not {name!r}")
    return factory(address)
