"""The training data layer's own costs (gulpio_rs.torch): what the samplers, the mixture and
the bucketing add to a DataLoader, against the time to read the batches they pick.

1. **Sampler cost per batch** against reading that batch: ``GulpDistributedSampler`` (the
   indices of a batch of 16), ``GulpBucketBatchSampler`` (one batch), and
   ``GulpMixture.locate`` (which source sample each index of a batch is), each timed alone
   over 500 batches (epoch after epoch); then ``dataset.__getitems__`` of one epoch's
   batches (one parallel decode each). The issue's target: the sampler's share <= 1% of the read.
2. **Bucketing 100,000 videos from the index**: ``GulpBucketBatchSampler(dataset,
   batch_size=16)`` made from a freshly opened dataset of 100k one-frame videos in 100
   chunks (four frame sizes): ``GulpDirectory.video_shapes`` (every chunk's index opened),
   the keys and the bucket setup. Target: <= 1 s.
3. **Mixture DataLoader clips/s** against one dataset's: ``GulpMixture`` of two datasets
   (weights 3:1) and one ``GulpVideoDataset`` of the same videos, 16-frame clips in batches
   of 16 through ``GulpDistributedSampler`` and ``gulp_collate``, 0 and 2 workers (fork,
   persistent). The mixture gathers its sources' decoded batches with one copy.

Frames are synthetic (smooth gradients, shapes and noise, 228x128, the encoder's default
quality), written once into ``--workdir`` and reused. Medians of ``--repeats`` repeats.

    python benches/bench_training.py            # a few minutes on 2 cores
    python benches/bench_training.py --quick    # a short run that checks the script works
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from _table import print_table  # noqa: E402  (benches/ is on sys.path when a script runs)

WIDTH, HEIGHT = 228, 128
CLIP_LEN = 16
BATCH = 16
PER_CHUNK = 64
BUCKET_VIDEOS = 100_000
BUCKET_CHUNKS = 100
BUCKET_SIZES = [(128, 228), (128, 170), (128, 128), (96, 228)]
SAMPLED = 500  # batches over which a sampler's own cost is timed

FULL = dict(repeats=5, videos=256, bucket_videos=BUCKET_VIDEOS)
QUICK = dict(repeats=1, videos=48, bucket_videos=2_000)


def frame(seed: int, height: int = HEIGHT, width: int = WIDTH) -> np.ndarray:
    """A real-looking frame: gradients, a disc and noise (JPEG sizes near camera frames)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    img = np.stack([255 * x / width, 255 * y / height, 128 + 100 * np.sin(x / 7 + seed)], -1)
    cy, cx, r = rng.uniform(0, height), rng.uniform(0, width), rng.uniform(10, 40)
    img[(y - cy) ** 2 + (x - cx) ** 2 <= r * r] = rng.uniform(0, 255, 3)
    img += rng.normal(0, 6, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def write_dataset(path: Path, videos: int, seed: int) -> None:
    from gulpio_rs import GulpChunk

    if path.exists():
        return
    tmp = path.with_name(path.name + ".building")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    from gulpio_rs._native import encode_frames

    frames = encode_frames([frame(seed * 1000 + k) for k in range(CLIP_LEN * 4)])
    for first in range(0, videos, PER_CHUNK):
        k = first // PER_CHUNK
        chunk = GulpChunk(tmp / f"data_{k}.gulp", tmp / f"meta_{k}.gmeta")
        with chunk.open("wb"):
            for v in range(first, min(videos, first + PER_CHUNK)):
                start = (v * 5) % (len(frames) - CLIP_LEN)
                chunk.append(f"s{seed}_{v:06d}", {"label": v % 7}, frames[start : start + CLIP_LEN])
    tmp.rename(path)


def write_bucket_dataset(path: Path, videos: int) -> None:
    """``videos`` one-frame videos in BUCKET_CHUNKS chunks, four frame sizes."""
    from gulpio_rs import GulpChunk

    if path.exists():
        return
    tmp = path.with_name(path.name + ".building")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    from gulpio_rs._native import encode_frames

    tiles = [frame(k, 16, 16) for k in range(4)]
    per_chunk = -(-videos // BUCKET_CHUNKS)
    # One JPEG per size, stored as is in every video (the bucketing never reads a frame: only
    # the sizes in the index matter).
    jpegs = []
    for n, (h, w) in enumerate(BUCKET_SIZES):
        big = np.ascontiguousarray(np.tile(tiles[n], (h // 16, w // 16 + 1, 1))[:, :w])
        jpegs.append(encode_frames([big])[0])
    for first in range(0, videos, per_chunk):
        k = first // per_chunk
        chunk = GulpChunk(tmp / f"data_{k}.gulp", tmp / f"meta_{k}.gmeta")
        with chunk.open("wb"):
            for v in range(first, min(videos, first + per_chunk)):
                chunk.append(f"b{v:07d}", {}, [jpegs[(v * 7) % len(jpegs)]])
    tmp.rename(path)


def median(xs):
    return statistics.median(xs)


# --------------------------------------------------------------------------------------------


def sampler_costs(path_a: Path, path_b: Path, repeats: int) -> list[tuple]:
    from torch.utils.data import BatchSampler

    from gulpio_rs.torch import (
        GulpBucketBatchSampler,
        GulpDistributedSampler,
        GulpMixture,
        GulpVideoDataset,
    )

    ds = GulpVideoDataset(path_a, frames=CLIP_LEN, target="label")
    other = GulpVideoDataset(path_b, frames=CLIP_LEN, target="label")
    mix = GulpMixture([ds, other], [3, 1], seed=1)
    results = {"distributed": [], "bucket": [], "mixture": [], "read": []}
    for r in range(repeats):
        # The sampling costs over SAMPLED batches (epochs after epoch, whatever the dataset's
        # size), so that one slow call does not decide the figure.
        sampler = GulpDistributedSampler(ds, 1, 0, seed=r)
        t, got, epoch = time.perf_counter(), 0, 0
        while got < SAMPLED:
            sampler.set_epoch(epoch)
            got += sum(1 for _ in BatchSampler(sampler, BATCH, drop_last=False))
            epoch += 1
        results["distributed"].append((time.perf_counter() - t) / got)

        buckets = GulpBucketBatchSampler(ds, BATCH, num_replicas=1, rank=0, seed=r)
        t, got, epoch = time.perf_counter(), 0, 0
        while got < SAMPLED:
            buckets.set_epoch(epoch)
            got += sum(1 for _ in buckets)
            epoch += 1
        results["bucket"].append((time.perf_counter() - t) / got)

        msampler = GulpDistributedSampler(mix, 1, 0, seed=r)
        mbatches = [list(b) for b in BatchSampler(msampler, BATCH, drop_last=False)]
        t, got = time.perf_counter(), 0
        while got < SAMPLED:
            for b in mbatches:
                mix.locate(b)
            got += len(mbatches)
        results["mixture"].append((time.perf_counter() - t) / got)

        batches = [list(b) for b in BatchSampler(sampler, BATCH, drop_last=False)]
        t = time.perf_counter()
        for b in batches:
            ds.__getitems__(b)
        results["read"].append((time.perf_counter() - t) / len(batches))
    read = median(results["read"])
    rows = [("#", f"cost per batch of {BATCH} ({len(ds)} videos, {CLIP_LEN} frames each)")]
    for name, label in [
        ("distributed", "GulpDistributedSampler: a batch's indices"),
        ("bucket", "GulpBucketBatchSampler: one batch"),
        ("mixture", "GulpMixture.locate: a batch's sources and samples"),
    ]:
        cost = median(results[name])
        rows.append((label, f"{cost * 1e6:,.0f} us", f"{100 * cost / read:.2f}% of the read"))
    rows.append(("dataset.__getitems__: reading the batch", f"{read * 1e6:,.0f} us", "100%"))
    return rows


def bucketing(path: Path, repeats: int) -> list[tuple]:
    from gulpio_rs import GulpDirectory
    from gulpio_rs.torch import GulpBucketBatchSampler, GulpVideoDataset

    shapes_t, whole_t = [], []
    videos = 0
    for _ in range(repeats):
        t = time.perf_counter()
        GulpDirectory(path).video_shapes()
        shapes_t.append(time.perf_counter() - t)
        ds = GulpVideoDataset(path, frames=1, target=None)  # opened: its index fronts read
        t = time.perf_counter()
        sampler = GulpBucketBatchSampler(ds, BATCH)
        whole_t.append(time.perf_counter() - t)
        videos = sum(n for _, n, _ in sampler.buckets)
    return [
        ("#", f"bucketing {videos:,} videos from the index ({BUCKET_CHUNKS} chunks)"),
        (
            "GulpDirectory(path).video_shapes() (open + every index)",
            f"{median(shapes_t):.3f} s",
            "",
        ),
        ("GulpBucketBatchSampler(dataset, 16) (target <= 1 s)", f"{median(whole_t):.3f} s", ""),
    ]


def loaders(path_a: Path, path_b: Path, repeats: int) -> list[tuple]:
    from torch.utils.data import DataLoader

    from gulpio_rs.torch import GulpDistributedSampler, GulpMixture, GulpVideoDataset, gulp_collate

    def single():
        return GulpVideoDataset(path_a, frames=CLIP_LEN, target="label")

    def mixture():
        a = GulpVideoDataset(path_a, frames=CLIP_LEN, target="label")
        b = GulpVideoDataset(path_b, frames=CLIP_LEN, target="label")
        return GulpMixture([a, b], [3, 1], length=len(a), seed=2)

    rows = [("#", f"DataLoader clips/s, batches of {BATCH} clips of {CLIP_LEN} frames")]
    for workers in (0, 2):
        rates = {"single": [], "mixture": []}
        runs = {}
        for name, make in (("single", single), ("mixture", mixture)):
            ds = make()
            sampler = GulpDistributedSampler(ds, 1, 0, seed=0)
            runs[name] = DataLoader(
                ds,
                batch_size=BATCH,
                sampler=sampler,
                num_workers=workers,
                collate_fn=gulp_collate,
                persistent_workers=workers > 0,
                multiprocessing_context="fork" if workers else None,
            )
            next(iter(runs[name]))  # workers started, files mapped
        for _ in range(repeats):
            for name, loader in runs.items():  # in turn: slow phases hit both alike
                t = time.perf_counter()
                clips = sum(batch[0].shape[0] for batch in loader)
                rates[name].append(clips / (time.perf_counter() - t))
        single_rate, mix_rate = median(rates["single"]), median(rates["mixture"])
        rows.append((f"GulpVideoDataset, {workers} workers", f"{single_rate:,.0f}", ""))
        rows.append(
            (
                f"GulpMixture of 2 (3:1), {workers} workers",
                f"{mix_rate:,.0f}",
                f"{mix_rate / single_rate:.2f}x",
            )
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run (checks the script)")
    parser.add_argument("--workdir", default="/tmp/gulpio-bench-training")
    args = parser.parse_args()
    cfg = QUICK if args.quick else FULL
    work = Path(args.workdir) / ("quick" if args.quick else "full")
    work.mkdir(parents=True, exist_ok=True)
    path_a, path_b = work / "a", work / "b"
    write_dataset(path_a, cfg["videos"], seed=1)
    write_dataset(path_b, cfg["videos"], seed=2)
    bucket_path = work / f"buckets_{cfg['bucket_videos']}"
    write_bucket_dataset(bucket_path, cfg["bucket_videos"])

    import gulpio_rs

    version = sys.version.split()[0]
    print(f"gulpio_rs {gulpio_rs.__version__}, {gulpio_rs.JPEG_BACKEND}; python {version}")
    print(f"{len(os.sched_getaffinity(0))} usable cores; medians of {cfg['repeats']} repeats\n")
    rows = sampler_costs(path_a, path_b, cfg["repeats"])
    rows += bucketing(bucket_path, cfg["repeats"])
    rows += loaders(path_a, path_b, cfg["repeats"])
    print_table(rows, ("measurement", "value", "relative"))


if __name__ == "__main__":
    main()
