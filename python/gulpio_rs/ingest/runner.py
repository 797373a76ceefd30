"""The ingestor: runs the plan's chunks in this process or in worker processes."""

from __future__ import annotations

import os
import queue
import sys
import time
import warnings
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, wait
from typing import TYPE_CHECKING, Any, Literal, Protocol

from .. import _encode_options, _manifest, _native
from .._choices import Encoding, Subsampling
from .._encode_options import DEFAULT, EncodeOptions
from .._fingerprint import digest
from .._names import chunk_paths
from .._plural import plural
from .._storage import storage_options_list
from .._threads import thread_count, usable_cores
from ..chunk import GulpChunk
from ..errors import GulpError, GulpWarning
from . import executors
from .encoder import FrameEncoder
from .executors import ChunkJob
from .locks import RunLock, pid_alive
from .plan import (
    RunKey,
    as_slices,
    check_settings,
    existing_plan,
    from_ranges,
    item_ids,
    load_or_create_plan,
    plan_fingerprint,
    plan_path,
    remove_dead_temporaries,
    run_settings,
    stored_ids,
    to_ranges,
)
from .progress import Progress
from .publish import finished, publish_chunk
from .remote import url_like
from .report import (
    ChunkResult,
    IngestError,
    IngestInterrupted,
    IngestReport,
    IngestWarning,
    NothingToIngestError,
)
from .write import Adapter, ChunkWriter

if TYPE_CHECKING:
    from multiprocessing.queues import Queue

    from _typeshed import StrPath


class IngestAdapter(Adapter, Protocol):
    """What an ingest needs of an adapter (gulpio2's contract): ``iter_data`` and ``len``.
    The optional methods (``item_ids``, ``fingerprint``, ``nothing_found``) are looked up."""

    def __len__(self) -> int: ...


class _Events(Protocol):
    """Where a worker sends ``(videos, frames)`` progress events: a process queue, or a
    :class:`_Callback` in this process."""

    def put(self, event: tuple[int, int], /) -> None: ...


class ExecutorClass(Protocol):
    """What gulpio2's ingest needs of its executor class: made as ``cls(max_workers=n)``
    (``ProcessPoolExecutor``, ``ThreadPoolExecutor``, or a stand-in)."""

    def __call__(self, *, max_workers: int) -> Executor: ...


def _our_executor() -> ExecutorClass:
    return ProcessPoolExecutor


def _our_writer() -> type[ChunkWriter]:
    return ChunkWriter


#: How GulpIngestor finds gulpio2's executor class and chunk writer class, at call time:
#: gulpio_rs.fileio installs lookups of its own ``ProcessPoolExecutor`` and ``ChunkWriter``,
#: so replacing those names in ``fileio`` (as gulpio2's tests and some users do, e.g. with a
#: ThreadPoolExecutor to debug) takes effect as it did in gulpio2.
executor_lookup = _our_executor
writer_lookup = _our_writer


class _Worker:
    """Per-process state: the adapter (unpickled once, not once per chunk), an encoder with
    its threads, and the ids already in the dataset outside this run's chunks (``stored``:
    id -> data file name)."""

    def __init__(
        self,
        adapter: IngestAdapter,
        folder: str,
        options: EncodeOptions,
        strict: bool,
        run_range: tuple[int, int],
        stored: dict[str, str],
        skip_truncated: bool,
        events: _Events | None,
    ) -> None:
        self.adapter = adapter
        self.folder = folder
        self.encoder = FrameEncoder(options)
        self.strict = strict
        self.skip_truncated = skip_truncated
        self.run_range = run_range
        self.stored = stored
        self.events = events
        self._ids: list[str] | None | Literal[False] = False  # False: not asked yet
        self._published: dict[int, list[str]] = {}

    def existing(self, id_: str) -> str | None:
        return self.stored.get(id_)

    def _skip_stored(self, parts: list[slice]) -> tuple[list[slice], int]:
        """``parts`` without the items whose ids the dataset already holds, decided from the
        adapter's ``item_ids()`` before any frame is produced; and how many were left out."""
        if self._ids is False:
            self._ids = item_ids(self.adapter)
        if self._ids is None or not self.stored:
            return parts, 0
        keep = [p for s in parts for p in range(s.start, s.stop) if self._ids[p] not in self.stored]
        total = sum(s.stop - s.start for s in parts)
        return as_slices(keep), total - len(keep)

    def _run_ids(self, number: int) -> dict[str, int]:
        """Ids of this run's other published chunks (cached: a published chunk of a run in
        progress never changes)."""
        first, end = self.run_range
        out: dict[str, int] = {}
        for n in range(first, end):
            if n == number:
                continue
            ids = self._published.get(n)
            if ids is None:
                data, meta = chunk_paths(self.folder, n)
                if not (os.path.exists(data) and os.path.exists(meta)):
                    continue
                try:
                    native, problem = _native.Chunk.open(data, meta)
                except (GulpError, OSError, ValueError):
                    continue
                if problem or not native.indexed:
                    continue
                ids = self._published[n] = native.ids()
            for id_ in ids:
                out[id_] = n
        return out

    def run(self, number: int, input_slice: slice | list[slice]) -> ChunkResult:
        parts = input_slice if isinstance(input_slice, list) else [input_slice]
        parts, already = self._skip_stored(parts)
        events = self.events
        excluded: dict[str, str] = {}

        def progress(videos: int, frames: int) -> None:
            if events is not None:
                events.put((videos, frames))

        lock = RunLock(self.folder)

        def check(result: ChunkResult, ids: set[str]) -> None:
            # Ids must be unique across the run's chunks too (a user adapter may repeat one in
            # two slices). Checked under the run's lock, held until the chunk is published, so
            # two workers cannot both pass the check with the same id.
            lock.acquire()
            clashes = {i: n for i, n in self._run_ids(number).items() if i in ids}
            if clashes:
                raise _Redo(
                    {i: f"id already in data_{n}.gulp of this run" for i, n in clashes.items()}
                )

        if already:
            progress(already, 0)
        while True:
            try:
                return publish_chunk(
                    self.adapter,
                    self.folder,
                    number,
                    parts,
                    encoder=self.encoder,
                    strict=self.strict,
                    existing_ids=self.existing,
                    refused_ids=excluded.get,
                    progress=progress,
                    check=check,
                    already_stored=already,
                    skip_truncated=self.skip_truncated,
                )
            except _Redo as redo:
                if self.strict:
                    id_, reason = next(iter(redo.reasons.items()))
                    raise IngestError(f"video {id_!r}: {reason}") from None
                excluded.update(redo.reasons)
            finally:
                lock.release()


class _Redo(Exception):
    """The chunk must be written again without these ids."""

    def __init__(self, reasons: dict[str, str]):
        super().__init__(reasons)
        self.reasons = reasons


_WORKER: _Worker | None = None


def _init_worker(main_pid: int, *args: Any) -> None:
    # args: _Worker's, as GulpIngestor's run hands them to the pool (initargs).
    global _WORKER
    import signal

    # Ctrl-C in a terminal reaches every process of the group: the parent stops the workers
    # (and reports once); a worker must not print its own KeyboardInterrupt traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with(main_pid)
    _WORKER = _Worker(*args)


def _die_with(main_pid: int) -> None:
    """A worker must not outlive a killed ingest: it would go on publishing chunks while a
    restarted run writes the same ones. ``main_pid`` is the ingest's process, taken there (a
    worker asking for its parent's pid could already get the reaper's, if the ingest was
    killed before the worker got that far).

    Linux: the kernel sends SIGKILL when the parent exits (``PR_SET_PDEATHSIG``), and the
    parent is checked to still be the ingest afterwards (it may have died before the request
    took effect). When the ingest is not the parent (a forkserver started the worker), or
    elsewhere, a thread checks every 0.5 s that the ingest still runs. Nothing happens when
    "worker" code runs inside the ingest's own process (an executor of threads)."""
    if os.getpid() == main_pid:
        return
    if _kill_me_with_parent() and os.getppid() == main_pid:
        return
    if not pid_alive(main_pid):
        os._exit(1)
    import threading

    def watch() -> None:
        while pid_alive(main_pid):
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="gulpio-ingest-watch").start()


def _kill_me_with_parent() -> bool:
    """``prctl(PR_SET_PDEATHSIG, SIGKILL)``; False where that does not exist."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        status: int = libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        return status == 0
    except (OSError, AttributeError):
        return False


def _run_in_worker(number: int, input_slice: slice | list[slice]) -> ChunkResult:
    assert _WORKER is not None
    return _WORKER.run(number, input_slice)


class GulpIngestor:
    """Gulps an adapter into ``output_folder`` (gulpio2's ``GulpIngestor``, same arguments).

    ``num_workers`` processes write one chunk of ``videos_per_chunk`` videos at a time, each
    resizing and encoding with ``cores // num_workers`` threads. New chunks are numbered after
    the existing ones, so a new adapter extends the dataset.

    Beyond gulpio2:

    - ``quality`` / ``subsampling``: how arrays are encoded (default q90 4:2:0; gulpio2 wrote
      4:4:4, larger and slower to read: docs/INGEST.md). JPEG inputs are stored unchanged.
      The defaults and choices: :class:`~gulpio_rs.ingest.EncodeOptions`. With neither
      given and gulpio2's knob ``utils._JPEG_WRITE_QUALITY`` changed, frames are written as
      gulpio2 wrote them with it (4:4:4 at that quality).
    - ``encoding="video"``: each video stored as AV1 segments of ``gop`` frames (default
      16) at quality ``crf`` (default 29: 38 dB RGB PSNR against the input frames), 14-17x
      fewer bytes than JPEG q90, encoded by SVT-AV1 at speed ``preset`` (0-13, default 8;
      12 encodes about 2.5x faster for about 1.3x the bytes at equal quality); read exactly
      as JPEG datasets are (docs/FORMAT.md §6). Ingest is several times slower than JPEG's
      (the encoder; rates in docs/DECISIONS.md, "Video segments"). gulpio2 cannot read such
      chunks. Needs PyAV with SVT-AV1 (its wheels have it).
    - ``restart_rows=True``: a restart marker after every MCU row of the encoded frames (a
      few bytes per frame), so that cropped reads (``read(..., crop=)``, the PyTorch datasets'
      ``crop=``) skip the rows above the crop; whole-frame decodes get a little slower. Off
      by default, which keeps the bytes gulpio2 writes (costs measured in docs/FUSED.md).
    - Failures (adapter errors, no frames, undecodable frames, ids already present) skip the
      video and appear in the returned :class:`IngestReport`; ``strict=True`` stops instead,
      and publishes nothing of the chunk in progress.
    - Videos whose file decodes to fewer frames than its container declares (a file cut
      short that still opens; built-in video adapters) are stored and listed in
      ``report.truncated`` with a warning; ``skip_truncated=True`` skips them as failures
      instead. Files with audio streams are counted in ``report.audio_ignored`` (only the
      video is stored).
    - Restart: running the same ingest again (same adapter content, ``videos_per_chunk`` and
      ``num_shards``; wherever the input and output folders are, however their paths are
      spelled) finishes an interrupted run without redoing finished chunks.
    - Videos whose ids the dataset already holds are not written again, nor decoded when the
      adapter has ``item_ids()`` (every built-in adapter): rerunning over a superset of the
      input adds only the new videos. They are counted in ``report.already_stored``, not
      failures.
    - Ctrl-C (``KeyboardInterrupt``): the worker processes are stopped at once (nothing
      half-written stays visible) and :class:`~gulpio_rs.ingest.IngestInterrupted`, a
      ``KeyboardInterrupt`` with the report of what was finished, is raised.
    - ``shard_index`` / ``num_shards``: independent processes or machines gulp disjoint parts
      of one adapter into one shared directory.
    - ``progress``: a tqdm bar with videos/s, frames/s and an ETA (on by default when stderr is
      a terminal).
    - ``output_folder`` may be a dataset URL (``s3://``, ``gs://``, ``az://``; credentials from
      the environment or ``storage_options``): chunks are staged in ``staging_dir`` (default
      ``~/.cache/gulpio/staging/<hash of the URL>``, or under ``$GULPIO_STAGING_DIR``) and
      uploaded data first, ``.gmeta`` last; rerunning after a crash resumes from the staging
      folder and skips chunks already uploaded. The staging copy is removed once everything
      is uploaded; ids the URL holds are skipped on later runs.
    - ``executor="ray"``: each chunk is a Ray task on the cluster at ``ray_address`` (default:
      the one ``ray.init()`` finds or starts), ``threads`` (default 1) CPUs each; the output
      is byte-identical to the process pool's (see docs/INGEST.md, "Ray"). Every node must see
      the output folder (for a dataset URL: ``staging_dir``) at the same path.
    - ``manifest`` (default True): a new dataset (an output without chunk files) gets a
      dataset manifest, so that it opens with a few reads whatever its size
      (docs/FORMAT.md §7); ``False`` leaves it out (the chunks are the same either way, and
      gulpio2 reads both). A dataset that has a manifest keeps it current whatever this
      says, and the run ends by compacting it.
    """

    def __init__(
        self,
        adapter: IngestAdapter,
        output_folder: StrPath,
        videos_per_chunk: int,
        num_workers: int,
        *,
        quality: int | None = None,
        subsampling: Subsampling | None = None,
        restart_rows: bool = DEFAULT.restart_rows,
        encoding: Encoding = DEFAULT.encoding,
        crf: int = DEFAULT.crf,
        gop: int = DEFAULT.gop,
        preset: int = DEFAULT.preset,
        strict: bool = False,
        skip_truncated: bool = False,
        shard_index: int = 0,
        num_shards: int = 1,
        threads: int | None = None,
        progress: bool | None = None,
        storage_options: dict[str, str] | None = None,
        staging_dir: str | os.PathLike[str] | None = None,
        executor: str = "process",
        ray_address: str | None = None,
        manifest: bool = True,
    ) -> None:
        # Processes, bounded like threads (gulpio2 asserted > 0; a ValueError says more).
        num_workers = thread_count(int(num_workers), "num_workers", zero_means_all=False)
        self.executor = executor
        self._runs_chunks = executors.executor(executor, ray_address)  # ValueError if unknown
        self.ray_address = ray_address
        self.adapter = adapter
        self.output_folder = output_folder  # as given, as gulpio2 keeps it
        self.videos_per_chunk = int(videos_per_chunk)
        self.num_workers = int(num_workers)
        if self.videos_per_chunk < 1:
            raise ValueError(f"videos_per_chunk must be >= 1, not {videos_per_chunk}")
        if not 0 <= int(shard_index) < int(num_shards):
            raise ValueError(f"need 0 <= shard_index < num_shards, got {shard_index}/{num_shards}")
        self.shard_index, self.num_shards = int(shard_index), int(num_shards)
        self.strict = bool(strict)
        self.skip_truncated = bool(skip_truncated)
        if threads is None:
            threads = self._runs_chunks.threads_per_worker(self.num_workers)
        self.options = EncodeOptions(
            DEFAULT.quality if quality is None else int(quality),
            subsampling or DEFAULT.subsampling,
            int(threads),
            bool(restart_rows),
            encoding,
            int(crf),
            int(gop),
            int(preset),
        )
        if quality is None and subsampling is None:
            # Neither chosen: the installed rule may change them (gulpio2's quality knob).
            self.options = _encode_options.unset_settings(self.options)
        self.progress = sys.stderr.isatty() if progress is None else bool(progress)
        self.storage_options = storage_options
        self.staging_dir = staging_dir
        self.manifest = bool(manifest)

    def __call__(self) -> IngestReport:
        if len(self.adapter) == 0:
            # Before anything is created: an empty input is a mistake (a wrong path, a
            # folder without class subfolders), not an empty dataset to publish.
            explain = getattr(self.adapter, "nothing_found", None)
            raise NothingToIngestError(
                explain()
                if callable(explain)
                else f"{type(self.adapter).__name__} has no items (len(adapter) == 0)"
            )
        folder = os.fsdecode(self.output_folder)
        remote = _native.is_remote_url(folder)
        options = storage_options_list(self.storage_options) if remote else None
        if not remote and (url := url_like(folder)) is not None:
            warnings.warn(
                f"{folder!r} looks like a dataset URL with a typo (did you mean {url}?); "
                f"writing to the local folder {os.path.abspath(folder)}",
                GulpWarning,
                stacklevel=2,
            )
        if self.manifest:
            if not remote:
                os.makedirs(folder, exist_ok=True)
            _manifest.create_if_new(folder, options)
        if remote:
            from .remote import ingest_remote

            report = ingest_remote(self, folder, self._ingest_into)
        else:
            report = self._ingest_into(folder)
        _manifest.compact_after_run(folder, options)
        return report

    def _ingest_into(
        self,
        folder: str,
        report: IngestReport | None = None,
        elsewhere: dict[str, tuple[int, str]] | None = None,
    ) -> IngestReport:
        """The run into the local ``folder``. For a remote ingest (``ingest.remote``, which
        gets this method handed in) ``folder`` is the staging folder, ``report`` collects the
        chunk results (uploading each as it is added), and ``elsewhere`` lists the ids the
        remote dataset holds (id -> (chunk number, data file name)): they are not written
        again, and their chunk numbers are not reused."""
        t0 = time.perf_counter()
        elsewhere = elsewhere or {}
        os.makedirs(folder, exist_ok=True)
        ids = item_ids(self.adapter)
        data = None if ids is None else digest(ids)
        key: RunKey = {
            "adapter": f"{type(self.adapter).__module__}.{type(self.adapter).__qualname__}",
            "fingerprint": plan_fingerprint(self.adapter),
            "items": len(self.adapter),
            "videos_per_chunk": self.videos_per_chunk,
            "num_shards": self.num_shards,
        }
        # restart_rows only when on, so plans of runs from before the option still match.
        extra: dict[str, object] = {"restart_rows": True} if self.options.restart_rows else {}
        if self.options.encoding != DEFAULT.encoding:
            # Only when not JPEG, so plans of runs from before the option still match.
            extra.update(encoding=self.options.encoding, crf=self.options.crf, gop=self.options.gop)
            if self.options.preset != DEFAULT.preset:
                # Likewise only when changed: runs from before the option keep their plans.
                extra["preset"] = self.options.preset
        if self.skip_truncated:
            # Only when on, for the same reason; resuming with it changed would store a file
            # cut short in one chunk and skip another in the next.
            extra["skip_truncated"] = True
        settings = run_settings(
            self.adapter,
            videos_per_chunk=self.videos_per_chunk,
            quality=self.options.quality,
            subsampling=self.options.subsampling,
            **extra,
        )
        check_settings(folder, key, settings, data)
        stored = dict(elsewhere)
        stored.update(stored_ids(folder))
        if report is None:
            report = IngestReport(output_folder=folder)
        plan = existing_plan(folder, key)
        if plan is None:
            # Ids the dataset already holds are left out of a new run before anything is
            # decoded (an extension with a superset of the input, a rerun after the output was
            # moved): the plan lists the positions to write, so every shard agrees on them.
            wanted = list(range(len(self.adapter)))
            if ids is not None:
                wanted = [p for p, id_ in enumerate(ids) if id_ not in stored]
            if not wanted:
                report.already_stored = len(self.adapter)
                report.seconds = time.perf_counter() - t0
                return report
            plan = load_or_create_plan(
                folder,
                key,
                settings=settings,
                taken=sorted({n for n, _ in elsewhere.values()}),
                extra={
                    "todo": to_ranges(wanted),
                    "num_slices": -(-len(wanted) // self.videos_per_chunk),
                    "already_stored": len(self.adapter) - len(wanted),
                    "data": data,
                },
            )
        positions = from_ranges(plan["todo"]) if "todo" in plan else list(range(len(self.adapter)))
        slices = [
            as_slices(positions[i : i + self.videos_per_chunk])
            for i in range(0, len(positions), self.videos_per_chunk)
        ]
        if plan.get("num_slices") != len(slices):
            raise IngestError(
                f"{plan_path(folder, key)}: the plan is for {plan.get('num_slices')} chunks, "
                f"not {len(slices)}"
            )
        first = plan["first_chunk"]
        end = first + len(slices)
        report.already_stored = plan.get("already_stored", 0)
        outside = {id_: name for id_, (n, name) in stored.items() if not first <= n < end}

        todo: list[tuple[int, list[slice]]] = []  # (chunk number, its parts)
        for i, parts in enumerate(slices):
            if i % self.num_shards != self.shard_index:
                continue
            done = finished(folder, first + i)
            if done is not None:
                report.add(done)
            else:
                todo.append((first + i, parts))

        remove_dead_temporaries(folder, {n for n, _ in todo})
        total = sum(s.stop - s.start for _, parts in todo for s in parts)
        try:
            with Progress(total, self.progress) as bar:
                args = (
                    self.adapter,
                    folder,
                    self.options,
                    self.strict,
                    (first, end),
                    outside,
                    self.skip_truncated,
                )
                job = ChunkJob(_Worker, args, plan["run"], todo, self.num_workers, report, bar)
                self._runs_chunks.run(job)
        except KeyboardInterrupt:
            # The workers are stopped (see _run_pool) and no chunk is half published: a rerun
            # of the same ingest resumes. The report says how far this one got.
            report.seconds = time.perf_counter() - t0
            report.stopped = "interrupted"
            raise IngestInterrupted(report) from None
        report.seconds = time.perf_counter() - t0
        if report.has_problems:
            warnings.warn(_problems(report), IngestWarning, stacklevel=3)
        return report


class _ProcessExecutor:
    """The ingest's own executor (``executor="process"``, the default): ``num_workers``
    processes of this machine, each encoding with ``cores // num_workers`` threads; the
    chunks in this process when ``num_workers`` is 1; gulpio2's way (:func:`_run_as_gulpio2`)
    when ``fileio.ProcessPoolExecutor`` or ``fileio.ChunkWriter`` was replaced."""

    def __init__(self, address: str | None = None) -> None:
        del address  # this machine's processes: nothing to connect to

    def threads_per_worker(self, num_workers: int) -> int:
        return max(1, usable_cores() // num_workers)

    def run(self, job: ChunkJob) -> None:
        executor_cls, writer_cls = executor_lookup(), writer_lookup()
        if executor_cls is not ProcessPoolExecutor or writer_cls is not ChunkWriter:
            _run_as_gulpio2(executor_cls, writer_cls, job)
        elif job.num_workers == 1:
            worker = job.new_worker(*job.worker_args, _Callback(job.bar.update))
            try:
                for number, parts in job.todo:
                    job.report.add(worker.run(number, parts))
            finally:
                worker.encoder.close()
        else:
            _run_pool(job)


executors.register_executor("process", _ProcessExecutor)


def _run_as_gulpio2(
    executor_cls: ExecutorClass, writer_cls: type[ChunkWriter], job: ChunkJob
) -> None:
    """gulpio2's way, for an executor class or chunk writer put in place of ours
    (``fileio.ProcessPoolExecutor`` / ``fileio.ChunkWriter``): ``writer_cls(adapter)``'s
    ``write_chunk`` mapped over the chunks and their slices in
    ``executor_cls(max_workers=num_workers)``, whatever ``num_workers``. The plan still
    numbers the chunks, and chunks an earlier run finished are not written again."""
    folder, todo, report, bar = job.folder, job.todo, job.report, job.bar
    writer = writer_cls(job.adapter)
    chunks = [GulpChunk(*chunk_paths(folder, number)) for number, _ in todo]
    with executor_cls(max_workers=job.num_workers) as ex:
        # A chunk's items as gulpio2 gave them: one slice (a list only when ids already
        # stored were left out of it).
        parts = [p[0] if len(p) == 1 else p for _, p in todo]
        results = ex.map(writer.write_chunk, chunks, parts)
        skipped: dict[str, None] = {}
        # (A stand-in executor, such as a test's mock, may return fewer results.)
        for (number, _), result in zip(todo, results, strict=False):
            # Our ChunkWriter returns the ids it skipped so far (each warned about).
            if isinstance(result, (list, tuple)):
                skipped.update(dict.fromkeys(str(i) for i in result))
            done = finished(folder, number)
            if done is not None:
                done.resumed = False
                report.add(done)
                bar.update(done.videos, done.frames)
    report.failures.extend((id_, "skipped by the chunk writer") for id_ in skipped)


def _run_pool(job: ChunkJob) -> None:
    import multiprocessing

    args, todo, report, bar = job.worker_args, job.todo, job.report, job.bar

    ctx = multiprocessing.get_context()
    # Progress events cost a pipe write per video (docs/INGEST.md, part a): only when a
    # bar shows them.
    events = ctx.Queue() if bar.bar is not None else None
    ex = ProcessPoolExecutor(
        max_workers=job.num_workers,
        mp_context=ctx,
        initializer=_init_worker,
        initargs=(os.getpid(), *args, events),
    )
    pending: set[Future[ChunkResult]] = set()
    interrupted = False
    try:
        pending = {ex.submit(_run_in_worker, n, s) for n, s in todo}
        while pending:
            done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            _drain(events, bar)
            for fut in done:
                report.add(fut.result())
        _drain(events, bar)
    except KeyboardInterrupt:
        # Ctrl-C: a worker must not go on writing once this call has given up, so they
        # are stopped now, not after their chunk. What a chunk in progress left are
        # temporaries of dead processes, which no reader trusts: removed here (a rerun
        # would). A finished chunk is published whole (the writer's renames), so
        # nothing half-written is ever visible. (The pending futures are not cancelled:
        # the pool fails them itself once its workers are gone, and Python 3.11's pool
        # breaks on a future cancelled before that.)
        interrupted = True
        _stop_workers(ex)
        remove_dead_temporaries(job.folder, {n for n, _ in todo})
        raise
    except BaseException:
        # Another chunk failed (strict, an adapter's exception): the chunks in progress
        # end as they would (published, or aborted without a trace), the rest never start.
        for fut in pending:
            fut.cancel()
        raise
    finally:
        ex.shutdown(wait=True, cancel_futures=not interrupted)
        if events is not None:
            events.close()
            events.cancel_join_thread()


def _problems(report: IngestReport) -> str:
    """The warning of a run that skipped videos or stored some cut short: counts and the
    first few reasons (the report lists them all)."""
    parts = []
    for pairs, what in (
        (report.failures, ("video was skipped", "videos were skipped")),
        (report.truncated, ("video was stored cut short", "videos were stored cut short")),
    ):
        if pairs:
            shown = "; ".join(f"{i}: {r}" for i, r in pairs[:5])
            more = " ..." if len(pairs) > 5 else ""
            parts.append(f"{plural(len(pairs), *what)} (see the report): {shown}{more}")
    return "; ".join(parts)


def _stop_workers(ex: ProcessPoolExecutor) -> None:
    """Terminates the pool's worker processes and waits for them (they ignore SIGINT, see
    :func:`_init_worker`, so a Ctrl-C reaches only this process's handling)."""
    procs = list((getattr(ex, "_processes", None) or {}).values())
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(5)
        if p.is_alive():
            p.kill()
            p.join()


class _Callback:
    """Stands in for the worker's event queue when everything runs in this process."""

    def __init__(self, fn: Callable[[int, int], None]) -> None:
        self.put: Callable[[tuple[int, int]], None] = lambda ev: fn(*ev)


def _drain(events: Queue[tuple[int, int]] | None, bar: Progress) -> None:
    if events is None:
        return
    while True:
        try:
            ev = events.get_nowait()
        except queue.Empty:
            return
        bar.update(*ev)
