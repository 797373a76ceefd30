"""Reading from object storage against reading local files, in one run.

Servers: the S3 test server of the test suite (``s3s-fs``, a real process on 127.0.0.1; install
with ``.ci/install-test-servers``) behind the test suite's fault-injecting proxy (in a process
of its own), which adds ``--latency-ms`` (default 20 ms) before every request, like a cloud
object store's first-byte latency. Objects are uploaded with single PUTs: s3s-fs hashes a
multipart-uploaded object whole on every GET to make its ETag, a cost no real store has.
Both servers run on the benchmark's cores, so remote reading pays their CPU time too.
Frames: the real Big Buck Bunny JPEG frames shipped in ``gulpio_rs/data/bbb``
(16-frame clips, repeated under distinct ids).

Measured:

1. DataLoader: ``GulpVideoDataset(path, frames=16)`` with 2 fork workers, batches of 16 clips
   in a random order drawn by ``GulpDistributedSampler``, ``gulp_collate``, persistent
   workers; clips/s from the server (through the proxy) and from the same files on local disk.
   Target: remote >= 0.8x local. Workers hide the latency by reading ahead: the sampler's
   order tells each worker its next batch, whose bytes it fetches while decoding the current
   one. The same loader in the DataLoader's default order (``shuffle=False``, no sampler: workers
   see their batches are runs of consecutive samples and read the next run ahead), with
   ``shuffle=True`` (an order workers cannot know: a waiting worker's cores decode for the
   other) and with a local block cache are reported too.
2. Requests and bytes: per 16-clip batch, requests sent and response bytes, against the frame
   bytes the clips need. Target: bytes <= 1.1x.
3. Opening a 1,000-chunk, 100,000-video dataset over the server with the latency: seconds and
   resident memory added (in a fresh process). Target: <= 2 s and <= 50 MB.

    python benches/bench_remote.py           # a few minutes
    python benches/bench_remote.py --quick   # smaller, for a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from _table import print_table  # noqa: E402
from servers import FaultProxyProcess, S3Server, s3_binary  # noqa: E402

import gulpio_rs  # noqa: E402

CLIP = 16
BATCH = 16


def bbb_clips() -> list[list[bytes]]:
    root = Path(str(resources.files("gulpio_rs") / "data" / "bbb"))
    clips = []
    for clip in sorted(root.glob("clip_*")):
        frames = [p.read_bytes() for p in sorted(clip.glob("frame_*.jpg"))]
        clips += [frames[i : i + CLIP] for i in range(0, len(frames) - CLIP + 1, 8)]
    return clips


def write_videos(folder: Path, videos: int, per_chunk: int = 64) -> list[str]:
    clips = bbb_clips()
    gd = gulpio_rs.GulpDirectory(str(folder))
    ids = []
    chunks = gd.new_chunks((videos + per_chunk - 1) // per_chunk)
    for c, chunk in enumerate(chunks):
        with chunk.open("wb"):
            for v in range(c * per_chunk, min(videos, (c + 1) * per_chunk)):
                vid = f"video-{v:06d}"
                chunk.append(vid, {"label": v % 7}, clips[v % len(clips)])
                ids.append(vid)
    return ids


def upload(s3: S3Server, folder: Path, bucket: str, prefix: str) -> None:
    client = s3.client()
    files = [p for p in sorted(folder.iterdir()) if p.is_file()]

    def put(p: Path) -> None:
        client.put_object(Bucket=bucket, Key=f"{prefix}/{p.name}", Body=p.read_bytes())

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, files))


def loader_rate(path: str, ids: list[str], epochs: int, order: str = "sampler", **options) -> float:
    """Clips/s of a 2-worker DataLoader over ``path``, batches in a random order:
    ``order="sampler"`` draws them with GulpDistributedSampler (whose order lets workers read
    ahead), ``"sequential"`` in the DataLoader's default order (no sampler, ``shuffle=False``),
    ``"shuffle"`` with the DataLoader's own ``shuffle=True`` (no read-ahead)."""
    import torch
    from torch.utils.data import DataLoader

    from gulpio_rs.torch import GulpDistributedSampler, GulpVideoDataset, gulp_collate

    ds = GulpVideoDataset(path, frames=CLIP, ids=ids, target=None, **options)
    if order == "sampler":
        sampler = GulpDistributedSampler(ds, num_replicas=1, rank=0, seed=0)
        kw = {"sampler": sampler}
    elif order == "sequential":
        sampler = None
        kw = {}
    else:
        sampler = None
        kw = {"shuffle": True, "generator": torch.Generator().manual_seed(0)}
    loader = DataLoader(
        ds,
        batch_size=BATCH,
        num_workers=2,
        persistent_workers=True,
        multiprocessing_context="fork",
        collate_fn=gulp_collate,
        **kw,
    )
    for _ in loader:  # warm-up epoch: workers started, chunks opened
        pass
    start = time.perf_counter()
    clips = 0
    for epoch in range(1, epochs + 1):
        if sampler is not None:
            sampler.set_epoch(epoch)
        for batch in loader:
            clips += batch.shape[0]
    return clips / (time.perf_counter() - start)


OPEN_PROBE = """
import json, sys, time
import gulpio_rs
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
url, options = sys.argv[1], json.loads(sys.argv[2])
before = rss()
t = time.perf_counter()
gd = gulpio_rs.GulpDirectory(url, storage_options=options)
seconds = time.perf_counter() - t
print(json.dumps({"seconds": seconds, "rss": rss() - before, "videos": len(gd)}))
"""


def open_big(s3: S3Server, proxy: FaultProxyProcess, chunks: int, per_chunk: int, tmp: Path):
    folder = tmp / "big"
    folder.mkdir()
    tiny = bbb_clips()[0][0]
    gd = gulpio_rs.GulpDirectory(str(folder))
    for c, chunk in enumerate(gd.new_chunks(chunks)):
        with chunk.open("wb"):
            for v in range(per_chunk):
                chunk.append(f"c{c:04d}-v{v:03d}", {"label": v % 7}, [tiny])
    bucket = s3.make_bucket()
    upload(s3, folder, bucket, "big")
    options = s3.storage_options(proxy.url)
    out = subprocess.run(
        [sys.executable, "-c", OPEN_PROBE, f"s3://{bucket}/big", json.dumps(options)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--latency-ms", type=float, default=20.0)
    ap.add_argument("--videos", type=int, default=512)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--open-chunks", type=int, default=1000)
    ap.add_argument("--open-videos-per-chunk", type=int, default=100)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.videos, args.epochs, args.repeats = 128, 1, 1
        args.open_chunks, args.open_videos_per_chunk = 100, 100
    if s3_binary() is None:
        sys.exit("needs the S3 test server: .ci/install-test-servers")

    rows = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        S3Server() as s3,
        FaultProxyProcess(s3.endpoint) as proxy,
    ):
        tmp = Path(tmp)
        local = tmp / "ds"
        local.mkdir()
        ids = write_videos(local, args.videos)
        bucket = s3.make_bucket()
        upload(s3, local, bucket, "ds")
        url = f"s3://{bucket}/ds"
        options = s3.storage_options(proxy.url)
        proxy.set_faults(latency_ms=args.latency_ms)

        # 1. DataLoader
        names = ("local", "remote", "sequential", "shuffled", "cached")
        rates: dict[str, list[float]] = {k: [] for k in names}
        for n in range(args.repeats):
            rates["local"].append(loader_rate(str(local), ids, args.epochs))
            rates["remote"].append(loader_rate(url, ids, args.epochs, storage_options=options))
            rates["sequential"].append(
                loader_rate(url, ids, args.epochs, order="sequential", storage_options=options)
            )
            rates["shuffled"].append(
                loader_rate(url, ids, args.epochs, order="shuffle", storage_options=options)
            )
            # With a local block cache: the warm-up epoch fills it, the measured ones read it.
            cached = dict(options, cache_dir=str(tmp / f"cache{n}"))
            rates["cached"].append(loader_rate(url, ids, args.epochs, storage_options=cached))

        def ratio(name: str) -> float:
            pairs = zip(rates[name], rates["local"], strict=True)
            return statistics.median(remote / local for remote, local in pairs)

        rows.append(("#", f"DataLoader, 2 workers, {BATCH}x{CLIP}-frame clips, random order"))
        rows.append(("local files", f"{statistics.median(rates['local']):,.0f}", "clips/s", ""))
        rows.append(
            (
                f"S3 + {args.latency_ms:g} ms per request, GulpDistributedSampler (read-ahead)",
                f"{statistics.median(rates['remote']):,.0f}",
                "clips/s",
                f"{ratio('remote'):.2f}x local (target >= 0.8x)",
            )
        )
        rows.append(
            (
                "same, the DataLoader's default order (shuffle=False, no sampler: read-ahead)",
                f"{statistics.median(rates['sequential']):,.0f}",
                "clips/s",
                f"{ratio('sequential'):.2f}x local",
            )
        )
        rows.append(
            (
                "same, shuffle=True (order unknown to workers: no read-ahead)",
                f"{statistics.median(rates['shuffled']):,.0f}",
                "clips/s",
                f"{ratio('shuffled'):.2f}x local",
            )
        )
        rows.append(
            (
                "S3 with cache_dir (epochs after the first)",
                f"{statistics.median(rates['cached']):,.0f}",
                "clips/s",
                f"{ratio('cached'):.2f}x local",
            )
        )

        # 2. Requests and bytes per batch
        remote = gulpio_rs.GulpDirectory(url, storage_options=options)
        local_gd = gulpio_rs.GulpDirectory(str(local))
        batches = [ids[i : i + BATCH] for i in range(0, len(ids), BATCH)]
        remote.read_batch(batches[0], frames=slice(0, CLIP))  # chunks opened
        proxy.reset_counters()
        t = time.perf_counter()
        for b in batches:
            remote.read_batch(b, frames=slice(0, CLIP))
        per_batch_s = (time.perf_counter() - t) / len(batches)
        needed = sum(len(x) for i in ids for x in local_gd.frame_bytes(i, slice(0, CLIP)))
        rows.append(("#", f"read_batch of {BATCH} clips, {args.latency_ms:g} ms per request"))
        rows.append(("requests per batch", f"{proxy.requests / len(batches):.1f}", "", ""))
        rows.append(
            (
                "bytes fetched / frame bytes",
                f"{proxy.body_bytes / needed:.3f}",
                "",
                "target <= 1.1",
            )
        )
        rows.append(("seconds per batch", f"{per_batch_s:.3f}", "s", ""))

        # 3. Opening a big dataset
        n = args.open_chunks * args.open_videos_per_chunk
        opened = open_big(s3, proxy, args.open_chunks, args.open_videos_per_chunk, tmp)
        assert opened["videos"] == n, opened
        rows.append(("#", f"open {args.open_chunks:,} chunks, {n:,} videos, S3 + latency"))
        rows.append(("seconds", f"{opened['seconds']:.2f}", "s", "target <= 2 s"))
        rows.append(("memory added", f"{opened['rss'] / 1e6:.1f}", "MB", "target <= 50 MB"))
    print_table(rows, ("measure", "value", "unit", "comparison"))


if __name__ == "__main__":
    main()
