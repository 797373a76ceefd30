"""The ingestor: runs the plan's chunks in this process or in worker processes."""

from __future__ import annotations

import os
import queue
import sys
import time
import warnings
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict

from .. import _native
from .._atomic import write_json_atomically
from .._frames import EncodeOptions, FrameEncoder
from .._names import chunk_number, chunk_paths
from .._reading import _usable_cores
from ..chunk import GulpChunk
from ..directory import GulpDirectory
from ..errors import GulpError
from ..utils import _gulpio2_encoding, _gulpio2_quality_changed
from .locks import STATE_DIR, RunLock, pid_alive
from .plan import (
    _chunk_done,
    _fingerprint,
    _plan,
    _remove_dead_temporaries,
    calculate_chunk_slices,
    check_settings,
    run_settings,
)
from .report import ChunkResult, IngestError, IngestReport, IngestWarning, NothingToIngestError
from .write import ChunkWriter, write_chunk


def _our_executor():
    return ProcessPoolExecutor


def _our_writer():
    return ChunkWriter


#: How GulpIngestor finds gulpio2's executor class and chunk writer class, at call time:
#: gulpio_rs.fileio installs lookups of its own ``ProcessPoolExecutor`` and ``ChunkWriter``,
#: so replacing those names in ``fileio`` (as gulpio2's tests and some users do, e.g. with a
#: ThreadPoolExecutor to debug) takes effect as it did in gulpio2.
executor_lookup = _our_executor
writer_lookup = _our_writer


class _Worker:
    """Per-process state: the adapter (unpickled once, not once per chunk), an encoder with
    its threads, and the ids already in the dataset outside this run's chunks."""

    def __init__(self, adapter, folder, options, strict, run_range, events):
        self.adapter = adapter
        self.folder = folder
        self.encoder = FrameEncoder(options)
        self.strict = strict
        self.run_range = run_range
        self.events = events
        self._existing: dict[str, str] | None = None
        self._published: dict[int, list[str]] = {}

    def existing(self, id_: str) -> str | None:
        if self._existing is None:
            self._existing = {}
            first, end = self.run_range
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                gd = GulpDirectory(self.folder)
                for chunk in gd.chunks():
                    n = chunk_number(os.fsdecode(chunk.data_file_path), "data")
                    if n is not None and first <= n < end:
                        continue
                    for k in chunk.keys():
                        self._existing[k] = os.path.basename(chunk.data_file_path)
                gd.close()
        return self._existing.get(id_)

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

    def run(self, number: int, input_slice: slice) -> ChunkResult:
        data, meta = chunk_paths(self.folder, number)
        record = os.path.join(self.folder, STATE_DIR, f"chunk-{number}.json")
        events = self.events
        excluded: dict[str, str] = {}

        def progress(videos: int, frames: int) -> None:
            if events is not None:
                events.put((videos, frames))

        def existing(id_: str) -> str | None:
            return excluded.get(id_) or self.existing(id_)

        lock = RunLock(self.folder)

        def before_publish(result: ChunkResult, ids: set[str]) -> None:
            # Ids must be unique across the run's chunks too (a user adapter may repeat one in
            # two slices). Checked under the run's lock, held until the chunk is published, so
            # two workers cannot both pass the check with the same id.
            lock.acquire()
            clashes = {i: n for i, n in self._run_ids(number).items() if i in ids}
            if clashes:
                raise _Redo(
                    {i: f"id already in data_{n}.gulp of this run" for i, n in clashes.items()}
                )
            # Recorded before publication: a record is only trusted once its chunk is
            # published, and then it carries the failures the chunk itself cannot.
            write_json_atomically(record, asdict(result), indent=1, sort_keys=True)

        while True:
            try:
                result = write_chunk(
                    self.adapter,
                    GulpChunk(data, meta),
                    input_slice,
                    encoder=self.encoder,
                    number=number,
                    strict=self.strict,
                    existing_ids=existing,
                    progress=progress,
                    before_publish=before_publish,
                    publish_empty=False,
                )
                if not result.published:
                    # Every video was skipped: nothing is published, and the record says the
                    # chunk is done, so a rerun does not decode its videos again.
                    write_json_atomically(record, asdict(result), indent=1, sort_keys=True)
                return result
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


def _init_worker(main_pid: int, *args) -> None:
    global _WORKER
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
        return libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _run_in_worker(number: int, input_slice: slice) -> ChunkResult:
    assert _WORKER is not None
    return _WORKER.run(number, input_slice)


class GulpIngestor:
    """Gulps an adapter into ``output_folder`` (gulpio2's ``GulpIngestor``, same arguments).

    ``num_workers`` processes write one chunk of ``videos_per_chunk`` videos at a time, each
    resizing and encoding with ``cores // num_workers`` threads. New chunks are numbered after
    the existing ones, so a new adapter extends the dataset.

    Beyond gulpio2:

    - ``quality`` / ``subsampling``: how arrays are encoded (default q90 4:2:0; gulpio2 wrote
      4:4:4, about 15% larger and 25% slower to read). JPEG inputs are stored unchanged. With
      neither given and gulpio2's knob ``utils._JPEG_WRITE_QUALITY`` changed, frames are
      written as gulpio2 wrote them with it (4:4:4 at that quality).
    - ``restart_rows=True``: a restart marker after every MCU row of the encoded frames
      (+0.1% bytes), so that cropped reads (``read(..., crop=)``, the PyTorch datasets'
      ``crop=``) skip the rows above the crop; whole-frame decodes get 4-10% slower. Off by
      default, which keeps the bytes gulpio2 writes (docs/FUSED.md).
    - Failures (adapter errors, no frames, undecodable frames, ids already present) skip the
      video and appear in the returned :class:`IngestReport`; ``strict=True`` stops instead,
      and publishes nothing of the chunk in progress.
    - Restart: running the same ingest again (same adapter content, ``videos_per_chunk`` and
      ``num_shards``) finishes an interrupted run without redoing finished chunks.
    - ``shard_index`` / ``num_shards``: independent processes or machines gulp disjoint parts
      of one adapter into one shared directory.
    - ``progress``: a tqdm bar with videos/s, frames/s and an ETA (on by default when stderr is
      a terminal).
    - ``output_folder`` may be a dataset URL (``s3://``, ``gs://``, ``az://``; credentials from
      the environment or ``storage_options``): chunks are staged in ``staging_dir`` (default
      ``~/.cache/gulpio/staging/<hash of the URL>``, or under ``$GULPIO_STAGING_DIR``) and
      uploaded data first, ``.gmeta`` last; rerunning after a crash resumes from the staging
      folder and skips chunks already uploaded.
    - ``executor="ray"``: each chunk is a Ray task on the cluster at ``ray_address`` (default:
      the one ``ray.init()`` finds or starts), ``threads`` (default 1) CPUs each; the output
      is byte-identical to the process pool's (see docs/INGEST.md, "Ray"). Every node must see
      the output folder (for a dataset URL: ``staging_dir``) at the same path.
    """

    def __init__(
        self,
        adapter,
        output_folder,
        videos_per_chunk,
        num_workers,
        *,
        quality: int | None = None,
        subsampling: str | None = None,
        restart_rows: bool = False,
        strict: bool = False,
        shard_index: int = 0,
        num_shards: int = 1,
        threads: int | None = None,
        progress: bool | None = None,
        storage_options: dict | None = None,
        staging_dir=None,
        executor: str = "process",
        ray_address: str | None = None,
    ):
        assert int(num_workers) > 0
        if executor not in ("process", "ray"):
            raise ValueError(f"executor must be 'process' or 'ray', not {executor!r}")
        self.executor = executor
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
        if threads is None:
            # A Ray task asks for one CPU per encode thread; one thread keeps tasks small.
            cores = 1 if executor == "ray" else _usable_cores() // self.num_workers
            threads = max(1, cores)
        if quality is None and subsampling is None and _gulpio2_quality_changed():
            # gulpio2's quality knob was set (as its tests do): write what gulpio2's ingestor
            # wrote with it, its encoder's 4:4:4 at that quality.
            quality, subsampling = _gulpio2_encoding().quality, "4:4:4"
        default = EncodeOptions()
        self.options = EncodeOptions(
            default.quality if quality is None else int(quality),
            subsampling or default.subsampling,
            int(threads),
            bool(restart_rows),
        )
        self.progress = sys.stderr.isatty() if progress is None else bool(progress)
        self.storage_options = storage_options
        self.staging_dir = staging_dir

    #: What collects the chunk results (remote ingest uploads each chunk as it is added).
    _report_class = IngestReport

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
        if _native.is_remote_url(os.fsdecode(self.output_folder)):
            from .remote import ingest_remote

            return ingest_remote(self, os.fsdecode(self.output_folder))
        t0 = time.perf_counter()
        folder = os.fsdecode(self.output_folder)
        os.makedirs(folder, exist_ok=True)
        slices = calculate_chunk_slices(self.videos_per_chunk, len(self.adapter))
        key = {
            "adapter": f"{type(self.adapter).__module__}.{type(self.adapter).__qualname__}",
            "fingerprint": _fingerprint(self.adapter),
            "items": len(self.adapter),
            "videos_per_chunk": self.videos_per_chunk,
            "num_shards": self.num_shards,
        }
        # restart_rows only when on, so plans of runs from before the option still match.
        extra = {"restart_rows": True} if self.options.restart_rows else {}
        settings = run_settings(
            self.adapter,
            videos_per_chunk=self.videos_per_chunk,
            quality=self.options.quality,
            subsampling=self.options.subsampling,
            **extra,
        )
        check_settings(folder, key, settings)
        plan = _plan(folder, key, len(slices), settings)
        first = plan["first_chunk"]

        report = self._report_class(output_folder=folder)
        todo = []
        for i, s in enumerate(slices):
            if i % self.num_shards != self.shard_index:
                continue
            done = _chunk_done(folder, first + i)
            if done is not None:
                report.add(done)
            else:
                todo.append((first + i, s))

        _remove_dead_temporaries(folder, {n for n, _ in todo})
        total = sum(s.stop - s.start for _, s in todo)
        with _Progress(total, self.progress) as bar:
            args = (self.adapter, folder, self.options, self.strict, (first, first + len(slices)))
            executor_cls, writer_cls = executor_lookup(), writer_lookup()
            if self.executor == "ray":
                from ..ray._ingest import run_chunks

                run_chunks(_Worker, args, plan["run"], todo, report, bar, self.ray_address)
            elif executor_cls is not ProcessPoolExecutor or writer_cls is not ChunkWriter:
                self._run_as_gulpio2(executor_cls, writer_cls, folder, todo, report, bar)
            elif self.num_workers == 1:
                worker = _Worker(*args, _Callback(bar.update))
                try:
                    for number, s in todo:
                        report.add(worker.run(number, s))
                finally:
                    worker.encoder.close()
            else:
                self._run_pool(args, todo, report, bar)
        report.seconds = time.perf_counter() - t0
        if report.failures:
            warnings.warn(
                f"{len(report.failures)} videos were skipped (see the report): "
                + "; ".join(f"{i}: {r}" for i, r in report.failures[:5])
                + (" ..." if len(report.failures) > 5 else ""),
                IngestWarning,
                stacklevel=2,
            )
        return report

    def _run_as_gulpio2(self, executor_cls, writer_cls, folder, todo, report, bar) -> None:
        """gulpio2's way, for an executor class or chunk writer put in place of ours
        (``fileio.ProcessPoolExecutor`` / ``fileio.ChunkWriter``): ``writer_cls(adapter)``'s
        ``write_chunk`` mapped over the chunks and their slices in
        ``executor_cls(max_workers=num_workers)``, whatever ``num_workers``. The plan still
        numbers the chunks, and chunks an earlier run finished are not written again."""
        writer = writer_cls(self.adapter)
        chunks = [GulpChunk(*chunk_paths(folder, number)) for number, _ in todo]
        with executor_cls(max_workers=self.num_workers) as ex:
            results = ex.map(writer.write_chunk, chunks, [s for _, s in todo])
            skipped: dict[str, None] = {}
            # (A stand-in executor, such as a test's mock, may return fewer results.)
            for (number, _), result in zip(todo, results, strict=False):
                # Our ChunkWriter returns the ids it skipped so far (each warned about).
                if isinstance(result, (list, tuple)):
                    skipped.update(dict.fromkeys(str(i) for i in result))
                done = _chunk_done(folder, number)
                if done is not None:
                    done.resumed = False
                    report.add(done)
                    bar.update(done.videos, done.frames)
        report.failures.extend((id_, "skipped by the chunk writer") for id_ in skipped)

    def _run_pool(self, args, todo, report: IngestReport, bar) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context()
        # Progress events cost a pipe write per video (3% of a worker's time, profiled): only
        # when a bar shows them.
        events = ctx.Queue() if bar.bar is not None else None
        with ProcessPoolExecutor(
            max_workers=self.num_workers,
            mp_context=ctx,
            initializer=_init_worker,
            initargs=(os.getpid(), *args, events),
        ) as ex:
            pending = {ex.submit(_run_in_worker, n, s) for n, s in todo}
            try:
                while pending:
                    done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                    _drain(events, bar)
                    for fut in done:
                        report.add(fut.result())
                _drain(events, bar)
            except BaseException:
                for fut in pending:
                    fut.cancel()
                raise


class _Callback:
    """Stands in for the worker's event queue when everything runs in this process."""

    def __init__(self, fn):
        self.put = lambda ev: fn(*ev)


def _drain(events, bar) -> None:
    if events is None:
        return
    while True:
        try:
            ev = events.get_nowait()
        except queue.Empty:
            return
        bar.update(*ev)


class _Progress:
    """tqdm over videos, with frames/s in the postfix; silent when disabled."""

    def __init__(self, total: int, enabled: bool):
        self.bar = None
        self.frames = 0
        self.t0 = time.perf_counter()
        if enabled and total > 0:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, unit="video", desc="gulping", smoothing=0.1)

    def update(self, videos: int, frames: int) -> None:
        self.frames += frames
        if self.bar is not None:
            self.bar.update(videos)
            dt = time.perf_counter() - self.t0
            if dt > 0:
                self.bar.set_postfix_str(f"{self.frames / dt:,.0f} frames/s", refresh=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.close()
