"""Ingestion: gulpio2's ``ChunkWriter`` and ``GulpIngestor``, made parallel, resumable and
shardable.

A run cuts the adapter into slices of ``videos_per_chunk`` items; slice ``i`` always becomes
chunk ``first_chunk + i``. ``first_chunk`` is fixed once per run in a small plan file under
``<output>/.gulpio-ingest/`` (created atomically, so every shard of a job array agrees on it),
which is what makes both restarts and sharding work:

- restart: a slice whose chunk is already published is not written again; an interrupted
  chunk was never published (the writer publishes atomically), so it is simply redone;
- shards: shard ``s`` of ``n`` writes the slices with ``i % n == s``, so chunk names of
  different shards cannot collide and together they cover the adapter exactly once.

See docs/INGEST.md for the details and the guarantees.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import re
import sys
import time
import uuid
import warnings
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import asdict, dataclass, field

from . import _native
from ._frames import EncodeOptions, FrameEncoder
from ._reading import _id_str, _usable_cores
from .chunk import GulpChunk
from .directory import GulpDirectory
from .errors import GulpError, GulpWarning

STATE_DIR = ".gulpio-ingest"
_TMP = re.compile(r"^\.gulpio-tmp\.(?:data|meta)_(\d+)\.\w+\.(\d+)-\d+$")
_DATA = re.compile(r"^data_(\d+)\.gulp$")


class IngestError(GulpError):
    """A video could not be ingested and ``strict=True`` was asked for (or the run cannot
    start). The message names the video id and the reason."""


class IngestWarning(GulpWarning):
    """Some videos were skipped; the report lists them."""


def calculate_chunk_slices(items_per_chunk: int, num_items: int) -> list[slice]:
    """Slices of ``items_per_chunk`` items covering ``range(num_items)``."""
    assert items_per_chunk > 0
    assert num_items > 0
    return [
        slice(i, min(i + items_per_chunk, num_items)) for i in range(0, num_items, items_per_chunk)
    ]


# ------------------------------------------------------------------------------------------
# results
# ------------------------------------------------------------------------------------------
@dataclass
class ChunkResult:
    """What writing one chunk did."""

    chunk: int
    videos: int = 0
    frames: int = 0
    bytes: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    resumed: bool = False


@dataclass
class IngestReport:
    """The outcome of a run: totals over every chunk this shard owns (also those finished by an
    earlier, interrupted run), and each video that was skipped with the reason."""

    output_folder: str
    videos: int = 0
    frames: int = 0
    bytes: int = 0
    chunks_written: int = 0
    chunks_resumed: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    #: Frames written by this call (``frames`` also counts chunks finished earlier).
    frames_written: int = 0

    def add(self, r: ChunkResult) -> None:
        self.videos += r.videos
        self.frames += r.frames
        self.bytes += r.bytes
        self.failures.extend(r.failures)
        if r.resumed:
            self.chunks_resumed += 1
        else:
            self.chunks_written += 1
            self.frames_written += r.frames

    @property
    def failed_ids(self) -> list[str]:
        return [id_ for id_, _ in self.failures]

    def __iter__(self):
        # gulpio-rs 0.1 returned the skipped ids; keep `for id in ingestor()` working.
        return iter(self.failed_ids)

    def summary(self) -> str:
        """A few lines for a terminal: totals, then every failed video and why."""
        rate = f", {self.frames_written / self.seconds:,.0f} frames/s" if self.seconds > 0 else ""
        lines = [
            f"{self.videos:,} videos, {self.frames:,} frames, {self.bytes / 1e6:,.1f} MB in "
            f"{self.chunks_written} new chunks ({self.chunks_resumed} already done) "
            f"in {self.seconds:.1f} s{rate} -> {self.output_folder}"
        ]
        if self.failures:
            lines.append(f"{len(self.failures)} videos skipped:")
            lines += [f"  {id_}: {reason}" for id_, reason in self.failures]
        return "\n".join(lines)


# ------------------------------------------------------------------------------------------
# writing one chunk
# ------------------------------------------------------------------------------------------
def _fail(result: ChunkResult, id_: str, reason: str, strict: bool) -> None:
    if strict:
        raise IngestError(f"video {id_!r}: {reason}")
    result.failures.append((id_, reason))


def write_chunk(
    adapter,
    output_chunk: GulpChunk,
    input_slice: slice,
    *,
    encoder: FrameEncoder,
    number: int = -1,
    strict: bool = False,
    existing_ids: Callable[[str], str | None] | None = None,
    progress: Callable[[int, int], None] | None = None,
    before_publish: Callable[[ChunkResult, set[str]], None] | None = None,
) -> ChunkResult:
    """Writes the videos of ``adapter.iter_data(input_slice)`` into ``output_chunk`` and
    publishes it atomically. A video that cannot be written (an adapter ``'error'``, no frames,
    a frame that does not decode, a duplicate id) is skipped and reported, or raises
    :class:`IngestError` under ``strict``, in which case nothing of the chunk is published.
    ``before_publish(result, ids)`` runs after the last append, before publication; if it
    raises, nothing is published.
    """
    result = ChunkResult(chunk=number)
    seen: set[str] = set()
    with output_chunk.open("wb"):
        for video in adapter.iter_data(input_slice):
            id_ = _id_str(video.get("id"))
            if video.get("error"):
                _fail(result, id_, str(video["error"]), strict)
            elif id_ in seen:
                _fail(result, id_, "duplicate id in this chunk", strict)
            elif existing_ids is not None and (where := existing_ids(id_)) is not None:
                _fail(result, id_, f"id already in the dataset ({where})", strict)
            else:
                frames = video.get("frames")
                if frames is None or len(frames) == 0:
                    _fail(result, id_, "no frames", strict)
                else:
                    try:
                        jpegs = encoder.encode(frames, video.get("size"))
                    except (GulpError, ValueError, OSError) as e:
                        _fail(result, id_, str(e), strict)
                    else:
                        output_chunk._writer.append(id_, json.dumps(video.get("meta", {})), jpegs)
                        seen.add(id_)
                        result.videos += 1
                        result.frames += len(jpegs)
                        result.bytes += sum(len(j) for j in jpegs)
                        if progress is not None:
                            progress(1, len(jpegs))
                        continue
            if progress is not None:
                progress(1, 0)
        if before_publish is not None:
            before_publish(result, seen)
    return result


class ChunkWriter:
    """Writes the videos of one adapter slice into one chunk (gulpio2's ``ChunkWriter``).

    Frames are stored as gulpio2 stores them (q90 4:4:4 for arrays) unless ``options`` says
    otherwise. Returns the ids that were skipped.
    """

    def __init__(self, adapter, options: EncodeOptions | None = None):
        self.adapter = adapter
        self.options = options or EncodeOptions(subsampling="4:4:4")
        self.skipped: list[str] = []

    def write_chunk(self, output_chunk: GulpChunk, input_slice):
        with FrameEncoder(self.options) as encoder:
            r = write_chunk(self.adapter, output_chunk, input_slice, encoder=encoder)
        for id_, reason in r.failures:
            warnings.warn(f"Failed to write video with id: {id_}; {reason}", stacklevel=2)
        self.skipped.extend(id_ for id_, _ in r.failures)
        return self.skipped


# ------------------------------------------------------------------------------------------
# the run plan
# ------------------------------------------------------------------------------------------
def _fingerprint(adapter) -> str:
    """Identifies the adapter's content, so a restart is recognised and a different dataset of
    the same size is not mistaken for one.

    ``adapter.fingerprint()`` if it has one; else a hash of a canonical form of its attributes
    (sets and dicts sorted, so it does not change with ``PYTHONHASHSEED`` between runs, as a
    pickle would); else, for attributes that have no canonical form, a fresh random value:
    such an adapter is never taken for a restart (it extends the dataset instead) and a warning
    says so.
    """
    fp = getattr(adapter, "fingerprint", None)
    if callable(fp):
        return str(fp())
    h = hashlib.sha256()
    try:
        _canonical(adapter, h, depth=0, seen=set())
    except _NoCanonicalForm as e:
        warnings.warn(
            f"cannot fingerprint {type(adapter).__qualname__} ({e}); an interrupted ingest "
            "will not be resumed. Give the adapter a fingerprint() method returning a string "
            "that identifies its content.",
            IngestWarning,
            stacklevel=3,
        )
        return "unresumable-" + uuid.uuid4().hex
    return h.hexdigest()


class _NoCanonicalForm(Exception):
    pass


def _canonical(obj, h, depth: int, seen: set) -> None:
    """Feeds a deterministic serialisation of ``obj`` into ``h``."""
    import numpy as np

    if depth > 50:
        raise _NoCanonicalForm("nested too deeply")

    def put(tag: str, text: str = "") -> None:
        h.update(f"{tag}{len(text)}:{text};".encode("utf-8", "surrogatepass"))

    if obj is None or isinstance(obj, (bool, int, float, complex, str)):
        put(type(obj).__name__, repr(obj))
    elif isinstance(obj, (bytes, bytearray)):
        put("bytes", bytes(obj).hex())
    elif isinstance(obj, os.PathLike):
        put("path", os.fspath(obj))
    elif isinstance(obj, slice):
        put("slice", repr((obj.start, obj.stop, obj.step)))
    elif isinstance(obj, np.ndarray):
        put("ndarray", f"{obj.dtype.str}{obj.shape}")
        h.update(np.ascontiguousarray(obj).tobytes())
    elif isinstance(obj, np.generic):
        put("npscalar", repr(obj.item()))
    elif id(obj) in seen:
        raise _NoCanonicalForm("it refers to itself")
    else:
        seen = seen | {id(obj)}
        if isinstance(obj, (list, tuple)):
            put(type(obj).__name__, str(len(obj)))
            for x in obj:
                _canonical(x, h, depth + 1, seen)
        elif isinstance(obj, (set, frozenset)):
            items = []
            for x in obj:
                sub = hashlib.sha256()
                _canonical(x, sub, depth + 1, seen)
                items.append(sub.hexdigest())
            put("set", ",".join(sorted(items)))
        elif isinstance(obj, dict):
            items = []
            for k, v in obj.items():
                sub = hashlib.sha256()
                _canonical(k, sub, depth + 1, seen)
                _canonical(v, sub, depth + 1, seen)
                items.append(sub.hexdigest())
            put(type(obj).__name__, ",".join(sorted(items)))
        elif hasattr(obj, "__dict__") or hasattr(type(obj), "__slots__"):
            cls = type(obj)
            put("object", f"{cls.__module__}.{cls.__qualname__}")
            state = dict(getattr(obj, "__dict__", {}))
            for name in getattr(cls, "__slots__", ()):
                if hasattr(obj, name):
                    state[name] = getattr(obj, name)
            if not state and callable(obj):
                put("callable", getattr(obj, "__qualname__", repr(obj)))
            _canonical(state, h, depth + 1, seen)
        else:
            raise _NoCanonicalForm(f"a {type(obj).__name__} attribute")


def _chunk_numbers(folder: str) -> list[int]:
    numbers = []
    for name in os.listdir(folder):
        m = re.match(r"^(?:data|meta)_(\d+)\.(?:gulp|gmeta|gidx)$", name)
        if m:
            numbers.append(int(m.group(1)))
    return numbers


def _plans(folder: str) -> list[dict]:
    state = os.path.join(folder, STATE_DIR)
    plans = []
    if os.path.isdir(state):
        for name in sorted(os.listdir(state)):
            if name.endswith(".json") and name.startswith("run-"):
                try:
                    with open(os.path.join(state, name)) as f:
                        plans.append(json.load(f))
                except (OSError, ValueError):
                    continue
    return plans


def _write_json_atomically(path: str, obj, *, exclusive: bool = False) -> bool:
    """Writes ``obj`` to ``path`` via a fsynced temporary file. With ``exclusive`` the file is
    only created if it does not exist yet (``link`` fails atomically if it does) and the return
    value says whether this call created it."""
    # Not the pid: job-array containers on one shared file system often have equal pids.
    tmp = f"{path}.{uuid.uuid4().hex}.tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    try:
        if exclusive:
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
        else:
            os.replace(tmp, path)
            return True
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return True


def _plan(folder: str, key: dict, num_slices: int) -> dict:
    """The run's plan: created by whichever shard gets there first, read by the others."""
    run_id = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    state = os.path.join(folder, STATE_DIR)
    os.makedirs(state, exist_ok=True)
    path = os.path.join(state, f"run-{run_id}.json")
    with _RunLock(folder):
        if not os.path.exists(path):
            _create_plan(folder, path, run_id, key, num_slices)
    with open(path) as f:
        plan = json.load(f)
    if plan.get("num_slices") != num_slices:
        raise IngestError(
            f"{path}: the plan is for {plan.get('num_slices')} chunks, not {num_slices}"
        )
    return plan


def _create_plan(folder: str, path: str, run_id: str, key: dict, num_slices: int) -> None:
    """Called under the run lock, so runs starting at once on one file system see each other's
    plans (and ``link`` keeps it exclusive where ``flock`` is not shared across machines)."""
    taken = _chunk_numbers(folder)
    for p in _plans(folder):
        taken.append(p["first_chunk"] + p["num_slices"] - 1)
    plan = {
        "run": run_id,
        "first_chunk": max(taken) + 1 if taken else 0,
        "num_slices": num_slices,
        **key,
    }
    _write_json_atomically(path, plan, exclusive=True)


def _chunk_done(folder: str, number: int) -> ChunkResult | None:
    """The result recorded for a finished chunk, or ``None`` if it must be (re)written."""
    record = os.path.join(folder, STATE_DIR, f"chunk-{number}.json")
    data = os.path.join(folder, f"data_{number}.gulp")
    meta = os.path.join(folder, f"meta_{number}.gmeta")
    try:
        with open(record) as f:
            r = ChunkResult(**json.load(f))
    except (OSError, ValueError, TypeError):
        r = None
    if not (os.path.exists(data) and os.path.exists(meta)):
        return None
    try:
        native, problem = _native.Chunk.open(data, meta)
    except (GulpError, OSError, ValueError):
        return None
    if problem or not native.indexed:
        return None  # published but not indexed: a crash inside the publication
    videos = len(native.ids())
    if r is None or r.videos != videos:
        # No record (older writer) or one from another attempt: count from the chunk itself.
        r = ChunkResult(chunk=number, videos=videos)
        infos = [native.frame_info(v) for v in range(videos)]
        r.frames = sum(len(i) for i in infos)
        r.bytes = sum(length - pad for info in infos for _, pad, length in info)
    r.failures = [tuple(f) for f in r.failures]
    r.resumed = True
    return r


def _remove_dead_temporaries(folder: str, numbers: set[int]) -> None:
    """Temporaries of this shard's chunks whose writer died (kill -9, machine loss). Only
    chunks this shard owns: in a directory shared by several machines, another machine's pid
    means nothing here, but no other live process writes these chunks."""
    for name in os.listdir(folder):
        m = _TMP.match(name)
        if m and int(m.group(1)) in numbers and not _pid_alive(int(m.group(2))):
            try:
                os.unlink(os.path.join(folder, name))
            except FileNotFoundError:
                pass


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        # A zombie (dead, not yet reaped) still answers kill(pid, 0).
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (OSError, IndexError):
        return True


# ------------------------------------------------------------------------------------------
# worker side
# ------------------------------------------------------------------------------------------
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
                    m = _DATA.match(os.path.basename(chunk.data_file_path))
                    if m and first <= int(m.group(1)) < end:
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
                data = os.path.join(self.folder, f"data_{n}.gulp")
                meta = os.path.join(self.folder, f"meta_{n}.gmeta")
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
        data = os.path.join(self.folder, f"data_{number}.gulp")
        meta = os.path.join(self.folder, f"meta_{number}.gmeta")
        record = os.path.join(self.folder, STATE_DIR, f"chunk-{number}.json")
        events = self.events
        excluded: dict[str, str] = {}

        def progress(videos: int, frames: int) -> None:
            if events is not None:
                events.put((videos, frames))

        def existing(id_: str) -> str | None:
            return excluded.get(id_) or self.existing(id_)

        lock = _RunLock(self.folder)

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
            _write_json_atomically(record, asdict(result))

        while True:
            try:
                return write_chunk(
                    self.adapter,
                    GulpChunk(data, meta),
                    input_slice,
                    encoder=self.encoder,
                    number=number,
                    strict=self.strict,
                    existing_ids=existing,
                    progress=progress,
                    before_publish=before_publish,
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


class _RunLock:
    """An exclusive ``flock`` on ``.gulpio-ingest/lock``: serialises the short critical
    sections of concurrent writers (choosing a run's first chunk, publishing a chunk)."""

    def __init__(self, folder: str):
        self.path = os.path.join(folder, STATE_DIR, "lock")
        self.fd: int | None = None

    def acquire(self) -> None:
        if self.fd is None:
            import fcntl

            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except BaseException:
                os.close(fd)
                raise
            self.fd = fd

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing drops the flock
            self.fd = None

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()


_WORKER: _Worker | None = None


def _init_worker(*args) -> None:
    global _WORKER
    _die_with_parent()
    _WORKER = _Worker(*args)


def _die_with_parent() -> None:
    """A worker must not outlive a killed ingest: it would go on publishing chunks while a
    restarted run writes the same ones. Linux: the kernel sends SIGKILL when the parent dies;
    elsewhere a thread polls the parent pid."""
    parent = os.getppid()
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0:
            if os.getppid() != parent:  # the parent died before prctl took effect
                os._exit(1)
            return
    except (OSError, AttributeError):
        pass
    import threading

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="gulpio-parent-watch").start()


def _run_in_worker(number: int, input_slice: slice) -> ChunkResult:
    assert _WORKER is not None
    return _WORKER.run(number, input_slice)


# ------------------------------------------------------------------------------------------
# the ingestor
# ------------------------------------------------------------------------------------------
class GulpIngestor:
    """Gulps an adapter into ``output_folder`` (gulpio2's ``GulpIngestor``, same arguments).

    ``num_workers`` processes write one chunk of ``videos_per_chunk`` videos at a time, each
    resizing and encoding with ``cores // num_workers`` threads. New chunks are numbered after
    the existing ones, so a new adapter extends the dataset.

    Beyond gulpio2:

    - ``quality`` / ``subsampling``: how arrays are encoded (default q90 4:2:0; gulpio2 wrote
      4:4:4, about 15% larger and 25% slower to read). JPEG inputs are stored unchanged.
    - Failures (adapter errors, no frames, undecodable frames, ids already present) skip the
      video and appear in the returned :class:`IngestReport`; ``strict=True`` stops instead,
      and publishes nothing of the chunk in progress.
    - Restart: running the same ingest again (same adapter content, ``videos_per_chunk`` and
      ``num_shards``) finishes an interrupted run without redoing finished chunks.
    - ``shard_index`` / ``num_shards``: independent processes or machines gulp disjoint parts
      of one adapter into one shared directory.
    - ``progress``: a tqdm bar with videos/s, frames/s and an ETA (on by default when stderr is
      a terminal).
    """

    def __init__(
        self,
        adapter,
        output_folder,
        videos_per_chunk,
        num_workers,
        *,
        quality: int = 90,
        subsampling: str = "4:2:0",
        strict: bool = False,
        shard_index: int = 0,
        num_shards: int = 1,
        threads: int | None = None,
        progress: bool | None = None,
    ):
        assert int(num_workers) > 0
        self.adapter = adapter
        self.output_folder = os.fspath(output_folder)
        self.videos_per_chunk = int(videos_per_chunk)
        self.num_workers = int(num_workers)
        if self.videos_per_chunk < 1:
            raise ValueError(f"videos_per_chunk must be >= 1, not {videos_per_chunk}")
        if not 0 <= int(shard_index) < int(num_shards):
            raise ValueError(f"need 0 <= shard_index < num_shards, got {shard_index}/{num_shards}")
        self.shard_index, self.num_shards = int(shard_index), int(num_shards)
        self.strict = bool(strict)
        if threads is None:
            threads = max(1, _usable_cores() // self.num_workers)
        self.options = EncodeOptions(int(quality), subsampling, int(threads))
        self.progress = sys.stderr.isatty() if progress is None else bool(progress)

    def __call__(self) -> IngestReport:
        t0 = time.perf_counter()
        folder = self.output_folder
        os.makedirs(folder, exist_ok=True)
        slices = calculate_chunk_slices(self.videos_per_chunk, len(self.adapter))
        key = {
            "adapter": f"{type(self.adapter).__module__}.{type(self.adapter).__qualname__}",
            "fingerprint": _fingerprint(self.adapter),
            "items": len(self.adapter),
            "videos_per_chunk": self.videos_per_chunk,
            "num_shards": self.num_shards,
        }
        plan = _plan(folder, key, len(slices))
        first = plan["first_chunk"]

        report = IngestReport(output_folder=folder)
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
            if self.num_workers == 1:
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

    def _run_pool(self, args, todo, report: IngestReport, bar) -> None:
        import multiprocessing

        ctx = multiprocessing.get_context()
        events = ctx.Queue()
        with ProcessPoolExecutor(
            max_workers=self.num_workers,
            mp_context=ctx,
            initializer=_init_worker,
            initargs=(*args, events),
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


__all__ = [
    "ChunkResult",
    "ChunkWriter",
    "EncodeOptions",
    "GulpIngestor",
    "IngestError",
    "IngestReport",
    "IngestWarning",
    "calculate_chunk_slices",
    "write_chunk",
]
