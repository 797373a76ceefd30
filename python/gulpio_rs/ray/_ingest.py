"""``GulpIngestor(..., executor="ray")``: the plan's chunks as Ray tasks, the ``"ray"``
executor of ``ingest.executors`` (registered by this package's ``__init__``).

Each task runs the process pool's per-chunk worker (the job's ``new_worker``), so a chunk's
bytes do not depend on where or how often it ran. Chunk numbers come from the run's plan, fixed
before any task starts; a task first asks whether its chunk is already published (a retry after
the worker died between publication and reply: ``ingest.publish.earlier_attempt``) and returns
that chunk's record instead of writing it again.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..ingest.executors import ChunkJob, ChunkWorker
from ..ingest.publish import earlier_attempt
from ._common import connect, remove_temporaries, task_error

if TYPE_CHECKING:
    from ..ingest.progress import Progress
    from ..ingest.report import ChunkResult, IngestReport


class RayExecutor:
    """Chunks as Ray tasks on the cluster at ``address`` (``None``: the one ``ray.init()``
    finds or starts), one CPU per encode thread."""

    def __init__(self, address: str | None = None) -> None:
        self.address = address

    def threads_per_worker(self, num_workers: int) -> int:
        # A task asks for one CPU per encode thread; one thread keeps tasks small.
        return 1

    def run(self, job: ChunkJob) -> None:
        run_chunks(
            job.new_worker, job.worker_args, job.run, job.todo, job.report, job.bar, self.address
        )


#: Per worker process: the ``_Worker`` of the latest run it served, by that run's token (its
#: caches of ids survive across the run's tasks).
_WORKERS: dict[str, ChunkWorker] = {}

#: Tasks a worker death may cost before the run stops.
MAX_RETRIES = 3


def _write_one(
    worker_cls: Callable[..., ChunkWorker],
    args: tuple[Any, ...],
    token: str,
    number: int,
    input_slice: slice | list[slice],
) -> ChunkResult:
    done = earlier_attempt(args[1], number)
    if done is not None:
        return done
    worker = _WORKERS.get(token)
    if worker is None:
        for old in _WORKERS.values():
            old.encoder.close()
        _WORKERS.clear()
        worker = _WORKERS[token] = worker_cls(*args, None)
    return worker.run(number, input_slice)


def run_chunks(
    worker_cls: Callable[..., ChunkWorker],
    args: tuple[Any, ...],
    run: str,
    todo: list[tuple[int, list[slice]]],
    report: IngestReport,
    bar: Progress,
    address: str | None,
) -> None:
    """Writes chunks ``todo`` (``(number, slices)`` pairs) as Ray tasks, adding each result to
    ``report`` and the progress bar as it arrives."""
    ray = connect(address)
    options = args[2]
    task = ray.remote(_write_one).options(num_cpus=options.threads, max_retries=MAX_RETRIES)
    args_ref = ray.put(args)
    # One token per call: two runs of one plan (same dataset into two folders, or strict and
    # not) must not share a worker.
    token = f"{run}-{uuid.uuid4().hex}"
    pending = [task.remote(worker_cls, args_ref, token, n, s) for n, s in todo]
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1, timeout=0.5)
            for ref in done:
                r = ray.get(ref)
                report.add(r)
                bar.update(r.videos + len(r.failures) + r.already_stored, r.frames)
    except ray.exceptions.RayError as e:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise task_error(ray, e) from None
    except BaseException:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
    remove_temporaries(args[1], {n for n, _ in todo})
