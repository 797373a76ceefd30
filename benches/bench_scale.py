"""Opening a dataset of millions of videos: time, requests and memory per process (issue 36),
against MosaicML Streaming and LitData in the same run.

Data: ``--videos`` (1,000,000; ``--videos 10000000`` for the issue's 10M) synthetic videos of
one real 16x16 JPEG frame (encoded once by ``gulpio_rs.fileio.img_to_jpeg_bytes``, the same
bytes for every video), 24-byte ids (the length docs/DECISIONS.md's manifest sizes assume),
``{"label": v % 7}`` metadata, ``--per-chunk`` (100) videos per chunk, written with the public
writer (``GulpChunk(...).open("wb")`` + ``append``). The peers store the same samples (id,
JPEG bytes, label), ``--per-chunk`` per shard, so their ``index.json`` lists as many shards as
we have chunks: MosaicML Streaming with ``MDSWriter`` (``size_limit`` sized for that many
samples), LitData with ``litdata.optimize(chunk_size=...)``. Every dataset is cached in
``--workdir`` by size, so reruns only measure. A second, smaller local size (a tenth; its
chunks are hard links to the first chunks of the large one) gives the slope; the remote
dataset is the first ``--remote-chunks`` (10,000) chunks.

Measured, each open in a fresh process (``python bench_scale.py --probe``; imports done before
the clock starts), medians of ``--repeats``:

1. Local open: ``GulpDirectory(path)`` with the dataset's files evicted from the page cache
   first (``posix_fadvise(DONTNEED)`` per file: no root needed and nothing else is evicted;
   directory entries and inodes stay cached) and with every file read first; RSS growth from
   the open (``VmRSS`` before and after, split into anonymous and file-backed pages);
   ``len()``; random ids, one per chunk of up to 10,000 random chunks (``id in gd``;
   ``gd.num_frames(id)``, the first ask of its chunk, then again warm: by listing the chunk's
   index opens, through the manifest the video row answers); ``keys()`` (time and
   memory of every id as a Python string). The peers: their ``StreamingDataset`` constructor
   plus ``len()`` (LitData reads its index on first use), RSS growth; they have no lookup by
   id.
2. DataLoader workers: ``--workers`` (8) workers started with ``multiprocessing_context=
   "spawn"`` over (a) a trivial dataset (the baseline: torch and gulpio_rs imported),
   (b) a dataset holding a pickled ``GulpDirectory`` (``gd.num_frames(id)`` per item: the
   reopen alone) and (c) ``GulpVideoDataset(path, frames=1)`` (each worker opens the state
   its parent opened and maps a sampler's index to an id by position, as in training), at
   both local sizes (the
   baseline once). Each worker returns its pid from one item; the PSS of the live workers
   (``/proc/<pid>/smaps_rollup``) is summed, minus the baseline's.
3. Remote: the S3 test server (``s3s-fs`` on 127.0.0.1; ``.ci/install-test-servers``) behind
   the test suite's proxy adding ``--latency-ms`` (20) before every request (the proxy runs in
   a process of its own and counts requests by kind). Objects are uploaded with single PUTs
   (benches/bench_remote.py's ``upload``). Per fresh process, requests and seconds of: the
   open, a pickled copy of it (``pickle.loads``, as a spawned DataLoader worker opens it), the
   first lookup of an id (``id in gd``), the first ``gd.num_frames(id)``, and the
   first read of its frames (``gd[id]``). The peers: open (``remote=`` / an ``s3://`` input
   dir, index.json fetched into a fresh local cache) and first sample (``ds[i]``). LitData
   0.2.76's first sample fails there: ``ds[i]`` reads the one item by range by default, and
   ``optimize`` writes these samples (str, bytes, int) as an Arrow footer whose per-item
   offsets are all the header's end, so the range is empty; its whole-chunk download
   (obstore) refuses a plain-http endpoint (its client options do not allow http). The table
   prints the error. Both servers run on the benchmark's cores.

Then the issue's targets, ``met yes/NO``: remote open <= 5 requests and <= 1 s (at the remote
size: "at any chunk count"); local open <= 50 ms, RSS growth <= 50 MB and 8 spawned workers
<= 100 MB PSS, all at 10M videos (below 10M, the value at 10M is extrapolated linearly from
the two local sizes, the workers' scaled to 8 workers, and marked ``~``); a random id <= 50 us
warm locally and <= 2 requests cold remotely; ``len()`` O(1) (under 10 us at both sizes).

How the dataset was opened is reported as the library reports it (docs/FORMAT.md §7.5: through
the manifest or by listing). Every open goes through ``GulpDirectory(path, **mode.open_kwargs)``
for each mode of ``modes()``, a column each: today one, the per-chunk indexes. Once
``GulpDirectory`` has FORMAT.md §7.5's ``manifest=`` parameter, two: ``manifest="off"``
(listing) and ``manifest="require"`` (``gulpio index`` writes the manifest of each cached
dataset that has none first); ``--no-manifest`` keeps the listing alone.

    python benches/bench_scale.py                        # 1M videos, ~15 min the first time
    python benches/bench_scale.py --quick                # 20k videos, 200 remote chunks, 2 workers
    python benches/bench_scale.py --videos 10000000      # the issue's 10M (~25 GB in --workdir)
    python benches/bench_scale.py --no-remote --no-workers --json out.json
"""

from __future__ import annotations

import argparse
import collections
import inspect
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from _table import print_table  # noqa: E402

# The targets (issue 36, "What must hold").
TARGET_REMOTE_OPEN_REQUESTS = 5
TARGET_REMOTE_OPEN_S = 1.0
TARGET_LOCAL_OPEN_MS = 50.0  # at 10M videos
TARGET_RSS_MB = 50.0  # at 10M videos
TARGET_WORKERS_MB = 100.0  # 8 spawned workers together, at 10M videos
TARGET_LOOKUP_US = 50.0
TARGET_COLD_LOOKUP_REQUESTS = 2
TARGET_LEN_US = 10.0  # "O(1)": a constant bound at both sizes
AT = 10_000_000  # the size the targets are stated for
TARGET_WORKERS = 8

FULL = dict(videos=1_000_000, remote_chunks=10_000, workers=8, repeats=5, remote_repeats=1)
QUICK = dict(videos=20_000, remote_chunks=200, workers=2, repeats=3, remote_repeats=1)
LOOKUPS = 10_000  # random ids per warm-lookup measurement
PEERS = ("Streaming", "LitData")
MARK = "@@"  # prefixes the probe's result lines (libraries may print to stdout)


def video_id(v: int) -> str:
    """24 bytes, distinct, not in insertion order after the number."""
    return f"video-{v:010d}-{(v * 2654435761) & 0xFFFFFFF:07x}"


def jpeg_frame() -> bytes:
    import numpy as np

    from gulpio_rs.fileio import img_to_jpeg_bytes

    y, x = np.mgrid[0:16, 0:16]
    img = np.stack([y * 16, x * 16, (x + y) * 8], axis=-1).astype(np.uint8)
    return img_to_jpeg_bytes(img)


# --------------------------------------------------------------------------------------------
# How gulpio_rs opens: the modes compared
# --------------------------------------------------------------------------------------------


@dataclass
class Mode:
    name: str  # the column's title
    open_kwargs: dict = field(default_factory=dict)  # GulpDirectory(path, **open_kwargs)
    needs_manifest: bool = False  # `gulpio index` writes one before the first open


def has_manifest_support() -> bool:
    import gulpio_rs

    return "manifest" in inspect.signature(gulpio_rs.GulpDirectory).parameters


def modes(manifest: bool) -> list[Mode]:
    """Today: the per-chunk indexes (the only way). With the manifest (docs/FORMAT.md §7.5):
    listing (``manifest="off"``) against the manifest (``manifest="require"``), or the
    listing alone when ``manifest`` is false."""
    if not has_manifest_support():
        return [Mode("gulpio-rs")]
    if not manifest:
        return [Mode("gulpio-rs listing", {"manifest": "off"})]
    return [
        Mode("gulpio-rs listing", {"manifest": "off"}),
        Mode("gulpio-rs manifest", {"manifest": "require"}, needs_manifest=True),
    ]


def how_opened(gd) -> str:
    """How ``gd`` was opened, as the library reports it (``GulpDirectory.opened``, FORMAT.md
    §7.5: through the manifest, or by listing and why)."""
    if not hasattr(gd, "opened"):
        return "per-chunk indexes (no manifest support)"
    opened = gd.opened
    if opened["how"] == "manifest":
        return f"manifest (version {opened['version']}, tail {opened['tail']})"
    return f"per-chunk indexes (listing: {opened['reason']})"


def write_manifest(folder: Path) -> None:
    """``gulpio index`` writes the manifest of an existing dataset (FORMAT.md §7.6). The
    smaller sizes are hard links to chunks of the large one, without its ``_gulpio/``."""
    if (folder / "_gulpio" / "LATEST").exists():
        return
    subprocess.run([sys.executable, "-m", "gulpio_rs", "index", str(folder)], check=True)
    if not (folder / "_gulpio" / "LATEST").exists():
        sys.exit(f"`gulpio index {folder}` wrote no _gulpio/LATEST: no manifest to measure")


# --------------------------------------------------------------------------------------------
# The datasets (cached in --workdir)
# --------------------------------------------------------------------------------------------


def chunk_files(k: int) -> tuple[str, ...]:
    return (f"data_{k}.gulp", f"meta_{k}.gmeta", f"data_{k}.gidx")


def build_gulp(folder: Path, videos: int, per_chunk: int) -> float:
    """Writes the dataset through the public writer; returns videos/s."""
    import gulpio_rs

    jpeg = jpeg_frame()
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    chunks = (videos + per_chunk - 1) // per_chunk
    t0 = time.perf_counter()
    for k in range(chunks):
        chunk = gulpio_rs.GulpChunk(tmp / f"data_{k}.gulp", tmp / f"meta_{k}.gmeta")
        with chunk.open("wb"):
            for v in range(k * per_chunk, min(videos, (k + 1) * per_chunk)):
                chunk.append(video_id(v), {"label": v % 7}, [jpeg])
        if (k + 1) % max(1, chunks // 10) == 0:
            print(f"  {k + 1:,}/{chunks:,} chunks", flush=True)
    rate = videos / (time.perf_counter() - t0)
    tmp.rename(folder)
    return rate


def link_subset(source: Path, folder: Path, chunks: int) -> None:
    """The first ``chunks`` chunks of ``source`` as hard links (no copy, same bytes)."""
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for k in range(chunks):
        for name in chunk_files(k):
            os.link(source / name, tmp / name)
    tmp.rename(folder)


def build_mds(folder: Path, videos: int, per_chunk: int) -> None:
    from streaming import MDSWriter

    jpeg = jpeg_frame()
    columns = {"id": "str", "jpeg": "bytes", "label": "int"}
    # An MDS sample: its offset (4), each variable column's length (4) and bytes, the int (8);
    # a shard: a 4-byte count and an offset per sample plus one.
    sample = 4 + (4 + 24) + (4 + len(jpeg)) + 8
    size_limit = 4 + 4 * (per_chunk + 1) + sample * per_chunk
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    with MDSWriter(out=str(tmp), columns=columns, size_limit=size_limit, progress_bar=False) as w:
        for v in range(videos):
            w.write({"id": video_id(v), "jpeg": jpeg, "label": v % 7})
    tmp.rename(folder)


_LITDATA_JPEG = b""


def _litdata_sample(v: int) -> dict:
    # Module level: optimize() pickles it for its worker.
    return {"id": video_id(v), "jpeg": _LITDATA_JPEG, "label": v % 7}


def build_litdata(folder: Path, videos: int, per_chunk: int) -> None:
    import litdata

    global _LITDATA_JPEG
    _LITDATA_JPEG = jpeg_frame()
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        litdata.optimize(
            fn=_litdata_sample,
            inputs=list(range(videos)),
            output_dir=str(tmp),
            chunk_size=per_chunk,
            num_workers=1,
            start_method="fork",
            verbose=False,
        )
    tmp.rename(folder)


def shard_count(system: str, folder: Path) -> int:
    index = json.loads((folder / "index.json").read_text())
    return len(index["shards"] if system == "Streaming" else index["chunks"])


@dataclass
class Data:
    """The cached datasets of one size."""

    videos: int
    per_chunk: int
    gulp: Path
    peers: dict[str, Path]


def prepare(work: Path, sizes: list[int], per_chunk: int, peers: bool) -> dict[int, Data]:
    """Builds (or finds) the gulp dataset of the largest size, hard-links the smaller ones
    from it, and builds the peers' datasets of each size."""
    largest = max(sizes)
    out = {}
    big = work / f"gulp-{largest}-{per_chunk}"
    if not big.exists():
        print(f"writing {largest:,} videos, {per_chunk} per chunk, to {big} ...", flush=True)
        rate = build_gulp(big, largest, per_chunk)
        print(f"  {rate:,.0f} videos/s", flush=True)
    for n in sizes:
        folder = big if n == largest else work / f"gulp-{n}-{per_chunk}"
        if not folder.exists():
            link_subset(big, folder, n // per_chunk)
        data = Data(n, per_chunk, folder, {})
        if peers:
            for system, build in (("Streaming", build_mds), ("LitData", build_litdata)):
                folder = work / f"{system.lower()}-{n}-{per_chunk}"
                if not folder.exists():
                    print(f"writing {n:,} samples for {system} ...", flush=True)
                    t0 = time.perf_counter()
                    build(folder, n, per_chunk)
                    print(f"  {n / (time.perf_counter() - t0):,.0f} samples/s", flush=True)
                data.peers[system] = folder
        out[n] = data
    return out


def evict(folder: Path) -> None:
    """Drops ``folder``'s files from the page cache (written back first)."""
    for root, _dirs, files in os.walk(folder):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fdatasync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def load(folder: Path) -> None:
    """Reads every file of ``folder`` into the page cache."""
    for root, _dirs, files in os.walk(folder):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                while f.read(1 << 20):
                    pass


# --------------------------------------------------------------------------------------------
# The probe: one fresh process per open
# --------------------------------------------------------------------------------------------


def status() -> dict[str, int]:
    """``VmRSS``, ``RssAnon`` and ``RssFile`` of this process, in bytes."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile"):
                out[key] = int(value.split()[0]) * 1024
    return out


def grown(before: dict[str, int]) -> dict[str, int]:
    after = status()
    return {
        "rss": after["VmRSS"] - before["VmRSS"],
        "rss_anon": after["RssAnon"] - before["RssAnon"],
        "rss_file": after["RssFile"] - before["RssFile"],
    }


def per_call_us(fn, calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) * 1e6 / calls


class Probe:
    """Runs in the fresh process: phases in order, one result line each; with
    ``interactive`` it waits for a line on stdin before each phase (the parent reads and
    resets the proxy's counters in between)."""

    def __init__(self, spec: dict):
        self.spec = spec
        self.obj = None
        self._ids: list[str] | None = None

    @property
    def ids(self) -> list[str]:
        """Random videos of distinct chunks (up to LOOKUPS), so that the first lookup of each
        is the first touch of its chunk. Made after the open: allocations before it change
        how much the open's own allocations grow the RSS (by megabytes, seen at 100k)."""
        if self._ids is None:
            rng = random.Random(self.spec.get("seed", 0))
            per_chunk = self.spec["per_chunk"]
            chunks = self.spec["videos"] // per_chunk
            picked = rng.sample(range(chunks), min(chunks, LOOKUPS))
            self._ids = [video_id(c * per_chunk + rng.randrange(per_chunk)) for c in picked]
        return self._ids

    def run(self) -> None:
        for phase in self.spec["phases"]:
            if self.spec.get("interactive"):
                sys.stdin.readline()
            result = getattr(self, f"{self.spec['kind']}_{phase}")()
            print(MARK + json.dumps({"phase": phase, **result}), flush=True)

    # gulpio-rs
    def gulp_open(self) -> dict:
        import gulpio_rs

        kwargs = dict(self.spec.get("open_kwargs", {}))
        if self.spec.get("storage_options"):
            kwargs["storage_options"] = self.spec["storage_options"]
        before = status()
        t0 = time.perf_counter()
        gd = gulpio_rs.GulpDirectory(self.spec["path"], **kwargs)
        seconds = time.perf_counter() - t0
        mem = grown(before)
        self.obj = gd
        return {"seconds": seconds, **mem, "videos": len(gd), "opened": how_opened(gd)}

    def gulp_copy(self) -> dict:
        # What a DataLoader worker under spawn does with the dataset's directory; the copy
        # is the one read from after (it opened the same state).
        import pickle

        blob = pickle.dumps(self.obj)
        t0 = time.perf_counter()
        self.obj = pickle.loads(blob)
        return {"seconds": time.perf_counter() - t0, "bytes": len(blob)}

    def gulp_len(self) -> dict:
        gd = self.obj
        return {"us": min(per_call_us(lambda: len(gd), 1000) for _ in range(5))}

    def gulp_lookup_cold(self) -> dict:
        t0 = time.perf_counter()
        found = self.ids[0] in self.obj
        return {"us": (time.perf_counter() - t0) * 1e6, "found": found}

    def gulp_frames_cold(self) -> dict:
        t0 = time.perf_counter()
        frames = self.obj.num_frames(self.ids[0])
        return {"us": (time.perf_counter() - t0) * 1e6, "frames": frames}

    def gulp_read_first(self) -> dict:
        t0 = time.perf_counter()
        frames, _meta = self.obj[self.ids[0]]
        return {"seconds": time.perf_counter() - t0, "frames": len(frames)}

    def gulp_lookups(self) -> dict:
        gd, ids = self.obj, self.ids

        def timed(fn) -> float:
            t0 = time.perf_counter()
            for i in ids:
                fn(i)
            return (time.perf_counter() - t0) * 1e6 / len(ids)

        contains = timed(gd.__contains__)
        first = timed(gd.num_frames)  # the first ask of each id's chunk
        warm = timed(gd.num_frames)
        return {"contains_us": contains, "frames_first_us": first, "frames_warm_us": warm}

    def gulp_keys(self) -> dict:
        before = status()
        t0 = time.perf_counter()
        keys = self.obj.keys()
        seconds = time.perf_counter() - t0
        return {"seconds": seconds, **grown(before), "count": len(keys)}

    # the peers: constructor + len() (LitData reads its index on first use), first sample
    def _peer_open(self, make) -> dict:
        before = status()
        t0 = time.perf_counter()
        ds = make()
        constructed = time.perf_counter() - t0
        videos = len(ds)
        seconds = time.perf_counter() - t0
        self.obj = ds
        return {"seconds": seconds, "constructor": constructed, **grown(before), "videos": videos}

    def Streaming_open(self) -> dict:
        from streaming import StreamingDataset
        from streaming.base.util import clean_stale_shared_memory

        clean_stale_shared_memory()
        if self.spec.get("remote"):
            cache = tempfile.mkdtemp(prefix="bench-scale-mds-")
            return self._peer_open(
                lambda: StreamingDataset(remote=self.spec["path"], local=cache, batch_size=1)
            )
        return self._peer_open(lambda: StreamingDataset(local=self.spec["path"], batch_size=1))

    def LitData_open(self) -> dict:
        from litdata import StreamingDataset

        if self.spec.get("remote"):
            cache = tempfile.mkdtemp(prefix="bench-scale-litdata-")
            return self._peer_open(
                lambda: StreamingDataset(
                    self.spec["path"],
                    cache_dir=cache,
                    storage_options=self.spec["storage_options"],
                )
            )
        return self._peer_open(lambda: StreamingDataset(self.spec["path"]))

    def _peer_read_first(self) -> dict:
        index = int(self.ids[0].split("-")[1])
        t0 = time.perf_counter()
        try:
            sample = self.obj[index]
        except Exception as e:  # reported in the table (LitData, remote: see the docstring)
            return {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"}
        seconds = time.perf_counter() - t0
        assert sample["id"] == self.ids[0], (sample["id"], self.ids[0])
        return {"seconds": seconds}

    Streaming_read_first = LitData_read_first = _peer_read_first

    # DataLoader workers
    def workers_pss(self) -> dict:
        from torch.utils.data import DataLoader

        import gulpio_rs
        from gulpio_rs.torch import GulpVideoDataset

        # More workers than cores is the point here, not a mistake to warn about.
        warnings.filterwarnings("ignore", message="This DataLoader will create")
        path, count = self.spec["path"], self.spec["workers"]
        kwargs = self.spec.get("open_kwargs", {})
        # The mode's open options, as far as the dataset takes them.
        takes = inspect.signature(GulpVideoDataset).parameters
        ds_kwargs = {k: v for k, v in kwargs.items() if k in takes}
        made = {
            "baseline": lambda: Pids(None, self.spec["videos"]),
            "directory": lambda: Pids(gulpio_rs.GulpDirectory(path, **kwargs), 0),
            "dataset": lambda: Pids(GulpVideoDataset(path, frames=1, target=None, **ds_kwargs), 0),
        }
        out = {}
        for name in self.spec["datasets"]:
            ds = made[name]()
            loader = DataLoader(
                ds,
                batch_size=None,
                num_workers=count,
                multiprocessing_context="spawn",
                persistent_workers=True,
            )
            t0 = time.perf_counter()
            it = iter(loader)
            pids = {next(it) for _ in range(count)}
            ready = time.perf_counter() - t0
            if len(pids) != count:
                raise RuntimeError(f"{len(pids)} workers answered, not {count}")
            rollups = [smaps_rollup(pid) for pid in pids]
            out[name] = {
                "ready_s": ready,
                "pss": sum(r["Pss"] for r in rollups),
                "pss_anon": sum(r.get("Pss_Anon", 0) for r in rollups),
                "rss": sum(r["Rss"] for r in rollups),
            }
            del it, loader
        return out


class Pids:
    """An item is the pid of the worker that made it, after reading what a real item
    reads: nothing (``inner`` None), ``gd.num_frames(id)`` (a ``GulpDirectory``) or the
    sample (``GulpVideoDataset``: its index -> id map is ``keys()``)."""

    def __init__(self, inner, videos: int):
        self.inner, self.videos = inner, videos

    def __len__(self) -> int:
        return self.videos if self.inner is None else len(self.inner)

    def __getitem__(self, i: int) -> int:
        import gulpio_rs

        if isinstance(self.inner, gulpio_rs.GulpDirectory):
            self.inner.num_frames(video_id(i))
        elif self.inner is not None:
            self.inner[i]
        return os.getpid()


def smaps_rollup(pid: int) -> dict[str, int]:
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[2] == "kB":
                out[parts[0].rstrip(":")] = int(parts[1]) * 1024
    return out


def probe_main(spec_json: str) -> None:
    import gulpio_rs  # noqa: F401  (imported before any clock starts, as in every probe)

    spec = json.loads(spec_json)
    if spec["kind"] in ("Streaming", "workers"):
        import torch  # noqa: F401  (Streaming imports it; imported before the clock)
    if spec["kind"] == "LitData":
        import litdata  # noqa: F401
    if spec["kind"] == "Streaming":
        import streaming  # noqa: F401
    Probe(spec).run()


class ProbeProcess:
    """The parent's side of a probe: ``next()`` lets the probe run its next phase and
    returns its result."""

    def __init__(self, spec: dict, env: dict | None = None):
        self.spec = spec
        self.what = f"{spec['kind']} {spec['phases']}"  # no storage options: they hold keys
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--probe", json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )

    def next(self) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if self.spec.get("interactive"):
            self.proc.stdin.write("\n")
            self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                self.proc.wait()
                raise RuntimeError(f"the probe ({self.what}) exited with {self.proc.returncode}")
            if line.startswith(MARK):
                return json.loads(line[len(MARK) :])

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        if self.proc.wait(600):
            raise RuntimeError(f"the probe ({self.what}) exited with {self.proc.returncode}")


def probe(spec: dict, env: dict | None = None) -> dict[str, dict]:
    """Runs every phase of a non-interactive probe; results by phase."""
    p = ProbeProcess(spec, env)
    results = {}
    for _ in spec["phases"]:
        r = p.next()
        results[r.pop("phase")] = r
    p.close()
    return results


# --------------------------------------------------------------------------------------------
# Local measurements
# --------------------------------------------------------------------------------------------

GULP_PHASES = ["open", "len", "lookups"]


def median_of(runs: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def measure_local(data: Data, mode: Mode, repeats: int, keys: bool) -> dict:
    base = {"kind": "gulp", "path": str(data.gulp), "videos": data.videos}
    base["per_chunk"] = data.per_chunk
    base["open_kwargs"] = mode.open_kwargs
    cold = []
    for r in range(repeats):
        evict(data.gulp)
        cold.append(probe({**base, "phases": ["open"], "seed": r})["open"])
    load(data.gulp)  # every file, not only what the open read
    warm = [probe({**base, "phases": GULP_PHASES, "seed": r}) for r in range(repeats)]
    out = {
        "opened": cold[0]["opened"],
        "open_cold_ms": median_of(cold, "seconds") * 1e3,
        "open_warm_ms": median_of([w["open"] for w in warm], "seconds") * 1e3,
    }
    for key in ("rss", "rss_anon", "rss_file"):
        out[key + "_mb"] = median_of([w["open"] for w in warm], key) / 1e6
    out["len_us"] = median_of([w["len"] for w in warm], "us")
    for key in ("contains_us", "frames_first_us", "frames_warm_us"):
        out[key] = median_of([w["lookups"] for w in warm], key)
    if keys:
        k = probe({**base, "phases": ["open", "keys"]})["keys"]
        out["keys_ms"], out["keys_mb"] = k["seconds"] * 1e3, k["rss"] / 1e6
    return out


def measure_peer_local(system: str, data: Data, repeats: int) -> dict:
    folder = data.peers[system]
    spec = {"kind": system, "path": str(folder), "videos": data.videos, "phases": ["open"]}
    spec["per_chunk"] = data.per_chunk
    cold = []
    for _ in range(repeats):
        evict(folder)
        cold.append(probe(spec)["open"])
    load(folder)
    warm = [probe(spec)["open"] for _ in range(repeats)]
    return {
        "open_cold_ms": median_of(cold, "seconds") * 1e3,
        "open_warm_ms": median_of(warm, "seconds") * 1e3,
        "constructor_ms": median_of(warm, "constructor") * 1e3,
        "rss_mb": median_of(warm, "rss") / 1e6,
        "rss_anon_mb": median_of(warm, "rss_anon") / 1e6,
        "rss_file_mb": median_of(warm, "rss_file") / 1e6,
        "shards": shard_count(system, folder),
    }


def measure_workers(data: Data, mode: Mode, workers: int, datasets: list[str]) -> dict:
    spec = {
        "kind": "workers",
        "path": str(data.gulp),
        "videos": data.videos,
        "per_chunk": data.per_chunk,
        "workers": workers,
        "open_kwargs": mode.open_kwargs,
        "datasets": datasets,
        "phases": ["pss"],
    }
    return probe(spec)["pss"]


# --------------------------------------------------------------------------------------------
# Remote measurements
# --------------------------------------------------------------------------------------------


def request_kind(method: str, target: str) -> str:
    path = target.split("?")[0]
    if "list-type=" in target:
        return "LIST"
    name = path.rsplit("/", 1)[-1]
    suffix = name.rsplit(".", 1)[-1] if "." in name else name
    return f"{method} {suffix}"


def counted(proxy) -> dict:
    log = proxy.log()
    proxy.reset_counters()
    kinds = collections.Counter(request_kind(m, t) for m, t, _ in log)
    return {"requests": len(log), "kinds": dict(kinds.most_common())}


def upload_tree(s3, folder: Path, bucket: str, prefix: str) -> None:
    from bench_remote import upload

    upload(s3, folder, bucket, prefix)
    for sub in sorted(p for p in folder.rglob("*") if p.is_dir()):
        upload(s3, sub, bucket, f"{prefix}/{sub.relative_to(folder).as_posix()}")


def measure_remote_probe(spec: dict, proxy, repeats: int, env: dict | None = None) -> dict:
    """Runs ``spec``'s phases in ``repeats`` fresh processes, counting each phase's requests
    at the proxy; the requests are the middle run's, the open's seconds the median."""
    runs = []
    for r in range(repeats):
        p = ProbeProcess({**spec, "interactive": True, "seed": 100 + r}, env)
        proxy.reset_counters()
        run = {}
        for _ in spec["phases"]:
            result = p.next()
            run[result.pop("phase")] = {**result, **counted(proxy)}
        p.close()
        runs.append(run)
    out = runs[len(runs) // 2]
    out["open"]["seconds"] = statistics.median(r["open"]["seconds"] for r in runs)
    return out


def measure_remote(args, data: Data, mode_list: list[Mode]) -> dict:
    from servers import FaultProxyProcess, S3Server

    out: dict = {"videos": data.videos, "chunks": data.videos // args.per_chunk}
    with S3Server() as s3, FaultProxyProcess(s3.endpoint) as proxy:
        bucket = s3.make_bucket()
        t0 = time.perf_counter()
        upload_tree(s3, data.gulp, bucket, "gulp")
        for system, folder in data.peers.items():
            upload_tree(s3, folder, bucket, system.lower())
        out["upload_s"] = time.perf_counter() - t0
        print(f"  uploaded in {out['upload_s']:.0f} s", flush=True)
        proxy.set_faults(latency_ms=args.latency_ms)
        options = s3.storage_options(proxy.url)
        base = {"videos": data.videos, "per_chunk": data.per_chunk}
        for mode in mode_list:
            print(f"  {mode.name} ...", flush=True)
            spec = {
                **base,
                "kind": "gulp",
                "path": f"s3://{bucket}/gulp",
                "storage_options": options,
                "open_kwargs": mode.open_kwargs,
                "phases": ["open", "copy", "lookup_cold", "frames_cold", "read_first"],
            }
            out[mode.name] = measure_remote_probe(spec, proxy, args.remote_repeats)
        env = {**s3.env(), "S3_ENDPOINT_URL": proxy.url, "AWS_ENDPOINT_URL": proxy.url}
        boto = {
            "endpoint_url": proxy.url,
            "aws_access_key_id": s3.access_key,
            "aws_secret_access_key": s3.secret_key,
            "region_name": s3.region,
        }
        for system in data.peers:
            print(f"  {system} ...", flush=True)
            spec = {
                **base,
                "kind": system,
                "path": f"s3://{bucket}/{system.lower()}",
                "remote": True,
                "storage_options": boto,
                "phases": ["open", "read_first"],
            }
            try:
                out[system] = measure_remote_probe(spec, proxy, args.remote_repeats, env)
            except RuntimeError as e:
                out[system] = {"error": str(e)}
    return out


# --------------------------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------------------------


def at_target(points: dict[int, float]) -> tuple[float, bool]:
    """The value at ``AT`` videos: measured, or extrapolated linearly (through the smallest
    and largest size; in proportion with one size). Second: whether it was extrapolated."""
    if AT in points:
        return points[AT], False
    lo, hi = min(points), max(points)
    if lo == hi:
        return points[hi] * AT / hi, True
    slope = (points[hi] - points[lo]) / (hi - lo)
    return points[hi] + slope * (AT - hi), True


def fmt(value: float | None, spec: str = ",.1f") -> str:
    return "-" if value is None else format(value, spec)


LOCAL_ROWS = (
    # (label, key, unit, format); a system without the key shows "-"
    ("open, fresh process, files evicted", "open_cold_ms", "ms", ",.1f"),
    ("open, fresh process, page cache warm", "open_warm_ms", "ms", ",.1f"),
    ("RSS growth from open", "rss_mb", "MB", ",.1f"),
    ("  of which anonymous", "rss_anon_mb", "MB", ",.1f"),
    ("  of which file-backed", "rss_file_mb", "MB", ",.1f"),
    ("RSS growth per video (slope from the smaller size)", "rss_per_video", "B", ",.0f"),
    ("shards in index.json", "shards", "", ",d"),
    ("len()", "len_us", "us", ",.2f"),
    ("id in gd, warm", "contains_us", "us", ",.2f"),
    ("gd.num_frames(id), first in its chunk", "frames_first_us", "us", ",.2f"),
    ("gd.num_frames(id), warm", "frames_warm_us", "us", ",.2f"),
    ("keys(): every id as a str", "keys_ms", "ms", ",.1f"),
    ("keys(): memory", "keys_mb", "MB", ",.1f"),
)
WORKER_ROWS = (
    ("trivial dataset (baseline): PSS of the workers", "baseline_mb", "MB", ",.1f"),
    ("  workers ready (first item from each)", "baseline_ready_s", "s", ",.2f"),
    ("pickled GulpDirectory: PSS added", "directory_mb", "MB", ",.1f"),
    ("  of which anonymous", "directory_anon_mb", "MB", ",.1f"),
    ("  workers ready", "directory_ready_s", "s", ",.2f"),
    ("GulpVideoDataset(frames=1): PSS added", "dataset_mb", "MB", ",.1f"),
    ("  of which anonymous", "dataset_anon_mb", "MB", ",.1f"),
    ("  workers ready", "dataset_ready_s", "s", ",.2f"),
)
REMOTE_ROWS = (
    ("open: requests", "open_requests", "", ",d"),
    ("open: time", "open_s", "s", ",.3f"),
    ("open: RSS growth", "open_rss_mb", "MB", ",.1f"),
    ("a pickled copy (spawned worker): requests", "copy_requests", "", ",d"),
    ("a pickled copy (spawned worker): time", "copy_s", "s", ",.3f"),
    ("first id in gd: requests", "lookup_cold_requests", "", ",d"),
    ("first id in gd: time", "lookup_cold_s", "s", ",.3f"),
    ("first gd.num_frames(id): requests", "frames_cold_requests", "", ",d"),
    ("first gd.num_frames(id): time", "frames_cold_s", "s", ",.3f"),
    ("first read of a video / a sample: requests", "read_first_requests", "", ",d"),
    ("first read of a video / a sample: time", "read_first_s", "s", ",.3f"),
)


def worker_cells(w: dict) -> dict:
    """The rows of WORKER_ROWS from one mode's workers: PSS added over the baseline."""
    out = {"baseline_mb": w["baseline"]["pss"] / 1e6, "baseline_ready_s": w["baseline"]["ready_s"]}
    for name in ("directory", "dataset"):
        out[f"{name}_mb"] = (w[name]["pss"] - w["baseline"]["pss"]) / 1e6
        out[f"{name}_anon_mb"] = (w[name]["pss_anon"] - w["baseline"]["pss_anon"]) / 1e6
        out[f"{name}_ready_s"] = w[name]["ready_s"]
    return out


def remote_cells(r: dict) -> dict:
    """The rows of REMOTE_ROWS from one system's remote phases."""
    if "error" in r:
        return {}
    out = {}
    for phase, result in r.items():
        if "error" in result:
            continue
        out[f"{phase}_requests"] = result["requests"]
        out[f"{phase}_s"] = result["seconds"] if "seconds" in result else result["us"] / 1e6
    out["open_rss_mb"] = r["open"]["rss"] / 1e6
    return out


def section(rows: list[tuple], title: str, spec: tuple, cells: dict, systems: list[str]) -> None:
    """A titled block of rows: one per entry of ``spec`` that some system has."""
    rows.append(("#", title))
    for label, key, unit, form in spec:
        values = [cells.get(s, {}).get(key) for s in systems]
        if any(v is not None for v in values):
            rows.append((label, *(fmt(v, form) for v in values), unit))


def report(args, sizes, local, peers, workers, remote, mode_list) -> None:
    ours = [m.name for m in mode_list]
    systems = ours + (list(PEERS) if peers else [])
    rows: list[tuple] = []
    for n in sizes:
        cells = {s: local[s][n] for s in ours} | {p: peers[p][n] for p in peers}
        if n != sizes[0]:  # the slope from the smaller size: what each video adds
            for s, c in cells.items():
                before = (local[s] if s in local else peers[s])[sizes[0]]["rss_mb"]
                c["rss_per_video"] = (c["rss_mb"] - before) * 1e6 / (n - sizes[0])
        title = f"local, {n:,} videos in {n // args.per_chunk:,} chunks of {args.per_chunk}"
        section(rows, title, LOCAL_ROWS, cells, systems)
    big = max(sizes)
    for s in ours:
        rows.append(("#", f"{s} opened through: {local[s][big]['opened']}"))
    if peers:
        rows.append(("#", f"peer / {ours[-1]} at {big:,} videos (> 1: the peer needs more)"))
        mine = local[ours[-1]][big]
        for label, key in (
            ("open, page cache warm", "open_warm_ms"),
            ("open, files evicted", "open_cold_ms"),
            ("RSS growth", "rss_mb"),
        ):
            ratios = [fmt(peers[p][big][key] / mine[key], ".2f") for p in peers]
            rows.append((label, *([""] * len(ours)), *ratios, "x"))
    for n in sizes if workers else ():
        title = f"{args.workers} DataLoader workers (spawn) at {n:,} videos, summed PSS"
        cells = {s: worker_cells(w[n]) for s, w in workers.items()}
        spec = WORKER_ROWS if n == big else WORKER_ROWS[2:]  # the baseline: measured once
        section(rows, title, spec, cells, systems)
    if remote:
        title = (
            f"S3 + {args.latency_ms:g} ms per request: {remote['videos']:,} videos in "
            f"{remote['chunks']:,} chunks (uploaded in {remote['upload_s']:.0f} s)"
        )
        cells = {s: remote_cells(remote[s]) for s in systems if s in remote}
        section(rows, title, REMOTE_ROWS, cells, systems)
        for s in systems:
            if "error" in remote.get(s, {}):
                rows.append(("#", f"{s}, remote: {remote[s]['error']}"))
            elif s in remote:
                for phase, result in remote[s].items():
                    if "error" in result:
                        rows.append(("#", f"{s}, remote {phase} failed: {result['error']}"))
                    elif result["requests"]:
                        kinds = ", ".join(f"{k} {v:,}" for k, v in result["kinds"].items())
                        rows.append(("#", f"{s}, remote {phase}: {kinds}"))
    print_table(rows, ("measure", *systems, "unit"))


def checks(args, sizes, local, workers, remote, mode_list) -> list[tuple]:
    """The issue's targets, per mode: ``(what, measured, target, met)`` rows."""
    out: list[tuple] = []
    big = max(sizes)
    for mode in mode_list:
        m = local[mode.name]
        rows = []
        for label, key, target, unit in (
            ("local open at 10M, page cache warm", "open_warm_ms", TARGET_LOCAL_OPEN_MS, "ms"),
            ("RSS growth from open at 10M", "rss_mb", TARGET_RSS_MB, "MB"),
        ):
            value, guessed = at_target({n: m[n][key] for n in sizes})
            mark = "~" if guessed else ""
            rows.append(
                (label, f"{mark}{value:,.1f} {unit}", f"<= {target:g} {unit}", value <= target)
            )
        warm = m[big]["frames_warm_us"]
        rows.append(
            (
                f"random id warm, local (gd.num_frames, {big:,} videos)",
                f"{warm:.2f} us",
                f"<= {TARGET_LOOKUP_US:g} us",
                warm <= TARGET_LOOKUP_US,
            )
        )
        lens = [m[n]["len_us"] for n in sizes]
        rows.append(
            (
                "len() O(1): under a constant at every size",
                " / ".join(f"{x:.2f}" for x in lens) + " us",
                f"<= {TARGET_LEN_US:g} us",
                max(lens) <= TARGET_LEN_US,
            )
        )
        if workers:
            w = workers[mode.name]
            added, guessed = at_target({n: worker_cells(w[n])["dataset_mb"] for n in sizes})
            value = added * TARGET_WORKERS / args.workers
            guessed = guessed or args.workers != TARGET_WORKERS
            rows.append(
                (
                    f"{TARGET_WORKERS} spawned workers at 10M (GulpVideoDataset), PSS added",
                    f"{'~' if guessed else ''}{value:,.0f} MB",
                    f"<= {TARGET_WORKERS_MB:g} MB",
                    value <= TARGET_WORKERS_MB,
                )
            )
        if remote:
            r = remote_cells(remote[mode.name])
            chunks = remote["chunks"]
            cold = r["lookup_cold_requests"] + r["frames_cold_requests"]
            rows += [
                (
                    f"remote open: requests ({chunks:,} chunks)",
                    f"{r['open_requests']:,}",
                    f"<= {TARGET_REMOTE_OPEN_REQUESTS}",
                    r["open_requests"] <= TARGET_REMOTE_OPEN_REQUESTS,
                ),
                (
                    f"remote open: time ({chunks:,} chunks)",
                    f"{r['open_s']:.2f} s",
                    f"<= {TARGET_REMOTE_OPEN_S:g} s",
                    r["open_s"] <= TARGET_REMOTE_OPEN_S,
                ),
                (
                    "remote cold lookup: requests (first id in gd + num_frames)",
                    f"{cold}",
                    f"<= {TARGET_COLD_LOOKUP_REQUESTS}",
                    cold <= TARGET_COLD_LOOKUP_REQUESTS,
                ),
            ]
        out.append(("#", mode.name))
        out += [(what, value, target, "yes" if ok else "NO") for what, value, target, ok in rows]
    print_table(out, ("target (issue 36)", "measured", "target", "met"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    ap.add_argument(
        "--videos", type=int, help="videos of the large local size (1,000,000; quick: 20,000)"
    )
    ap.add_argument(
        "--per-chunk", type=int, default=100, help="videos per chunk and samples per peer shard"
    )
    ap.add_argument(
        "--remote-chunks", type=int, help="chunks on the S3 server (10,000; quick: 200)"
    )
    ap.add_argument("--workers", type=int, help="spawned DataLoader workers (8; quick: 2)")
    ap.add_argument("--repeats", type=int, help="fresh processes per local open (5; quick: 3)")
    ap.add_argument("--remote-repeats", type=int, help="fresh processes per remote open (1)")
    ap.add_argument("--latency-ms", type=float, default=20.0, help="added before every request")
    ap.add_argument("--workdir", default="/tmp/gulpio_bench_scale", help="dataset cache")
    ap.add_argument("--no-peers", action="store_true", help="skip Streaming and LitData")
    ap.add_argument("--no-workers", action="store_true", help="skip the DataLoader workers")
    ap.add_argument("--no-remote", action="store_true", help="skip the S3 server")
    ap.add_argument(
        "--no-manifest",
        action="store_true",
        help="once gulpio_rs has the dataset manifest: measure opening by listing only",
    )
    ap.add_argument("--quick", action="store_true", help="smoke run")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--probe", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.probe:
        probe_main(args.probe)
        return
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)

    import gulpio_rs

    if args.videos % args.per_chunk:
        sys.exit(f"--videos must be a multiple of --per-chunk ({args.per_chunk})")
    remote_videos = min(args.remote_chunks * args.per_chunk, args.videos)
    small = max(args.per_chunk, args.videos // 10 // args.per_chunk * args.per_chunk)
    sizes = sorted({small, args.videos})
    needed = sorted(set(sizes) | ({remote_videos} if not args.no_remote else set()))
    if not args.no_remote:
        from servers import s3_binary

        if s3_binary() is None:
            sys.exit("needs the S3 test server (.ci/install-test-servers), or --no-remote")
    t_all = time.perf_counter()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    data = prepare(work, needed, args.per_chunk, not args.no_peers)
    mode_list = modes(not args.no_manifest)
    for mode in mode_list:
        if mode.needs_manifest:
            for n in needed:
                write_manifest(data[n].gulp)
    print(
        f"gulpio_rs {gulpio_rs.__version__}, Python {sys.version.split()[0]}, "
        f"{len(os.sched_getaffinity(0))} usable cores, load average {os.getloadavg()[0]:.2f}\n"
        f"{args.videos:,} videos (and {small:,}), {args.per_chunk} per chunk, one "
        f"{len(jpeg_frame())}-byte 16x16 JPEG frame each, 24-byte ids; medians of "
        f"{args.repeats} fresh processes",
        flush=True,
    )
    local: dict = {m.name: {} for m in mode_list}
    peers: dict = {p: {} for p in PEERS} if not args.no_peers else {}
    for n in sizes:
        for mode in mode_list:
            print(f"local {n:,}: {mode.name} ...", flush=True)
            local[mode.name][n] = measure_local(data[n], mode, args.repeats, n == max(sizes))
        for system in peers:
            print(f"local {n:,}: {system} ...", flush=True)
            peers[system][n] = measure_peer_local(system, data[n], args.repeats)
    workers = {}
    if not args.no_workers:
        for mode in mode_list:
            print(f"{args.workers} spawned workers: {mode.name} ...", flush=True)
            # The baseline once, at the large size (it holds no dataset).
            w = {}
            for n in reversed(sizes):
                names = (["baseline"] if n == max(sizes) else []) + ["directory", "dataset"]
                w[n] = measure_workers(data[n], mode, args.workers, names)
                w[n].setdefault("baseline", w[max(sizes)]["baseline"])
            workers[mode.name] = w
    remote = None
    if not args.no_remote:
        print(f"remote: {remote_videos:,} videos ...", flush=True)
        remote = measure_remote(args, data[remote_videos], mode_list)
    print()
    report(args, sizes, local, peers, workers, remote, mode_list)
    print()
    check_rows = checks(args, sizes, local, workers, remote, mode_list)
    print(f"\nload average now {os.getloadavg()[0]:.2f}; total {time.perf_counter() - t_all:.0f} s")
    if args.json:
        results = {
            "args": vars(args),
            "sizes": sizes,
            "local": local,
            "peers": peers,
            "workers": workers,
            "remote": remote,
            "checks": [r for r in check_rows if r[0] != "#"],
            "load_average": os.getloadavg(),
        }
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=str)


if __name__ == "__main__":
    main()
