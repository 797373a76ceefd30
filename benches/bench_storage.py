"""Storage benchmarks of gulpio-rs against gulpio2 0.0.4, measured side by side in one run.

What is measured (all on a warm page cache: the data was just written or read):

a. Opening a directory: wall time of ``GulpDirectory(path)`` and the peak and retained RSS it
   adds, each in a fresh Python subprocess so that import costs, allocator state and the
   garbage collector of one measurement never leak into another. The default dataset is
   100,000 videos x 30 frames in 1,000 chunks; frames are a few tiny (8x8) real JPEGs reused,
   because opening does not depend on frame content and a realistic 3M-frame dataset would
   take many GB. It is built once with gulpio_rs (so it carries our ``.gidx`` indexes, which
   gulpio2 ignores) and cached in ``--workdir``. A second, legacy dataset (the first
   ``--legacy-chunks`` chunks' ``.gulp``/``.gmeta`` only, no index) measures the path
   gulpio_rs takes for data written by gulpio/gulpio2: a JSON parse in Rust.

b. Random access to raw frame bytes, no decoding, in frames/s: seeded random videos, all
   frames or 8 random frames per video. gulpio_rs: ``gd.frame_bytes(id)`` (zero-copy
   memoryviews, CRC32 verified unless ``check_data=False``) and, for a like-for-like API,
   ``gd[id]`` with an identity ``jpeg_decoder``; gulpio2: ``gd[id]`` with an identity
   ``jpeg_decoder`` (its read path without the decode). "steady" runs after every chunk has
   been read once; "first read per chunk" reads one video from each chunk of a freshly opened
   directory, which for gulpio_rs includes the deferred full check of the chunk's index and
   ``.gmeta`` that a directory open skips. Each library runs in its own subprocess, so
   gulpio2's millions of metadata objects do not slow gulpio_rs through the garbage collector.
   Unchecked gulpio_rs reads never touch the frame bytes (zero-copy); checked ones read them,
   including page faults on ``.gulp`` pages the process has not mapped yet; gulpio2 copies
   them with ``read()``.

c. The cost of CRC verification relative to decoding, on ~200 real-size frames (256x144,
   panned and zoomed crops of real photos from /work/shared/data/jpeg-conformance, plus
   sensor-like noise; synthetic gradients, shapes and noise if those are missing), JPEG q90
   4:4:4 as gulpio2 writes them: ``zlib.crc32`` per frame, gulpio_rs ``frame_bytes`` and
   ``gd[id]`` with ``check_data`` True vs False (timed video by video in alternation, as the
   differences are small), and decoding with gulpio_rs's built-in decoder and with simplejpeg
   (libjpeg-turbo).

Every number is the median of ``--repeats`` timed repeats (the machine may be shared and
noisy); each repeat runs for about ``--budget`` seconds. ``--quick`` is a CI-sized run
(10,000 videos, shorter budgets) that finishes in well under 30 s once its dataset is cached.

    python benches/bench_storage.py            # full run, a few minutes
    python benches/bench_storage.py --quick    # CI smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numpy as np
from _table import print_table  # benches/ is on sys.path when a script runs
from _videos import jpeg_corpus

PHOTOS_DIR = jpeg_corpus()
# Real photographs among the conformance files (the others are synthetic, tiny or flat).
PHOTOS = [
    "pillow_xmp_test.jpg",
    "pillow_exif_gps_typeerror.jpg",
    "pillow_iptc.jpg",
    "pillow_flower2.jpg",
]

FULL = dict(videos=100_000, frames_per_video=30, videos_per_chunk=100, repeats=5, budget=1.0)
QUICK = dict(videos=10_000, frames_per_video=30, videos_per_chunk=100, repeats=3, budget=0.25)

# Targets from the brief / docs: (comparison, threshold) where the ratio is "how many times
# better gulpio_rs is", so every target reads as ratio >= threshold.
TARGET_OPEN_SPEED = 100.0
TARGET_OPEN_MEMORY = 20.0
TARGET_RAW_ACCESS = 5.0
TARGET_CRC_FRACTION = 0.03  # "a few percent at most" of a decode


# --------------------------------------------------------------------------------------------
# Measurement helpers
# --------------------------------------------------------------------------------------------


def proc_status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def reset_peak_rss() -> bool:
    """Resets VmHWM to the current RSS (Linux >= 4.0), so the next peak is the open's own."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def rate(step, items, units_per_item: int, budget: float) -> float:
    """Calls ``step(item)`` over ``items`` (cycling) for about ``budget`` s; returns units/s.

    The clock is read every 16 calls so that reading it costs nothing measurable even when a
    call takes a microsecond.
    """
    n = len(items)
    i = 0
    t0 = time.perf_counter()
    deadline = t0 + budget
    while True:
        for _ in range(16):
            step(items[i % n])
            i += 1
        now = time.perf_counter()
        if now >= deadline:
            return i * units_per_item / (now - t0)


def seconds_per_call(fn, budget: float) -> float:
    """Seconds per ``fn()`` call, averaged over about ``budget`` seconds."""
    return 1.0 / rate(lambda _: fn(), [None], 1, budget)


def paired_seconds(fa, fb, items, budget: float) -> tuple[float, float]:
    """Seconds per item of ``fa`` and ``fb``, timed item by item in alternation for about
    ``budget`` seconds; which one goes first flips every round, so neither is favoured by
    caches warmed by the other."""
    clock = time.perf_counter
    ta = tb = 0.0
    rounds = 0
    deadline = clock() + budget
    while rounds < 2 or clock() < deadline:
        a_first = rounds % 2 == 0
        for item in items:
            t0 = clock()
            (fa if a_first else fb)(item)
            t1 = clock()
            (fb if a_first else fa)(item)
            t2 = clock()
            ta += (t1 - t0) if a_first else (t2 - t1)
            tb += (t2 - t1) if a_first else (t1 - t0)
        rounds += 1
    return ta / (rounds * len(items)), tb / (rounds * len(items))


def median(xs):
    return statistics.median(xs)


def run_child(mode: str, payload: dict) -> dict:
    """Runs this script in a fresh interpreter and returns the JSON it prints last."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", mode, json.dumps(payload)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise RuntimeError(f"child {mode} {payload} failed with code {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------------------------
# Datasets
# --------------------------------------------------------------------------------------------


def tiny_jpegs() -> list[bytes]:
    """Four distinct 8x8 RGB JPEGs: real headers (the writer parses the SOF), ~600 bytes."""
    import simplejpeg

    out = []
    for k in range(4):
        y, x = np.mgrid[0:8, 0:8]
        img = np.stack([x * 30 + k * 40, y * 30, (x + y) * 15 + k * 10], axis=-1)
        out.append(simplejpeg.encode_jpeg((img % 256).astype(np.uint8), quality=90))
    return out


def build_synthetic(path: Path, videos: int, frames: int, per_chunk: int) -> float:
    """Writes the open/access dataset with gulpio_rs; returns seconds taken.

    Built under a temporary name and renamed, so an interrupted build is never mistaken for a
    cached dataset.
    """
    import gulpio_rs

    tmp = path.with_name(path.name + ".building")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    jpegs = tiny_jpegs()
    # Rotating the tiny JPEGs per video gives frames different CRCs and lengths.
    per_video = [[jpegs[(s + k) % len(jpegs)] for k in range(frames)] for s in range(len(jpegs))]
    t0 = time.perf_counter()
    for c, first in enumerate(range(0, videos, per_chunk)):
        chunk = gulpio_rs.GulpChunk(tmp / f"data_{c}.gulp", tmp / f"meta_{c}.gmeta")
        with chunk.open("wb"):
            for i in range(first, min(first + per_chunk, videos)):
                meta = {"label": f"class_{i % 100}", "idx": i}
                chunk.append(str(i), meta, per_video[i % len(per_video)])
    tmp.rename(path)
    return time.perf_counter() - t0


def build_legacy(src: Path, path: Path, chunks: int) -> None:
    """Copies the first ``chunks`` chunks' .gulp/.gmeta (no .gidx): data as gulpio2 leaves it."""
    tmp = path.with_name(path.name + ".building")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for c in range(chunks):
        for name in (f"data_{c}.gulp", f"meta_{c}.gmeta"):
            if (src / name).exists():
                shutil.copyfile(src / name, tmp / name)
    tmp.rename(path)


def realistic_frames(count: int, width: int = 256, height: int = 144, seed: int = 0):
    """``count`` video-like RGB frames: a slow pan and zoom over real photos, plus noise."""
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(seed)
    photos = [PHOTOS_DIR / p for p in PHOTOS if (PHOTOS_DIR / p).exists()]
    frames = []
    if photos:
        images = [Image.open(p).convert("RGB") for p in photos]
        per_shot = -(-count // len(images))
        for i in range(count):
            img = images[i // per_shot]
            t = (i % per_shot) / per_shot
            # A 16:9 window at 60-90% of the photo, drifting and zooming like a hand-held shot.
            scale = 0.9 - 0.3 * t
            cw = min(img.width, int(img.height * 16 / 9)) * scale
            ch = cw * 9 / 16
            x0 = (img.width - cw) * t
            y0 = (img.height - ch) * (0.5 + 0.3 * np.sin(6 * t))
            crop = img.resize((width, height), Image.BILINEAR, box=(x0, y0, x0 + cw, y0 + ch))
            frames.append(np.asarray(crop, dtype=np.float32))
    else:
        y, x = np.mgrid[0:height, 0:width].astype(np.float32)
        for i in range(count):
            base = np.stack([x + i, y * 1.5, (x + y) / 2 + 2 * i], axis=-1) % 256
            img = Image.fromarray(base.astype(np.uint8))
            draw = ImageDraw.Draw(img)
            for _ in range(6):
                x1, y1 = rng.integers(0, width), rng.integers(0, height)
                box = (x1, y1, x1 + rng.integers(10, 80), y1 + rng.integers(10, 60))
                draw.ellipse(box, fill=tuple(int(v) for v in rng.integers(0, 256, 3)))
            frames.append(np.asarray(img, dtype=np.float32))
    noise = rng.normal(0, 3, size=(count, height, width, 3)).astype(np.float32)
    return [np.clip(f + n, 0, 255).astype(np.uint8) for f, n in zip(frames, noise, strict=True)]


def build_realsize(path: Path, videos: int, frames: int) -> list[bytes]:
    """Writes the CRC-vs-decode dataset; returns the JPEG bytes of all frames in order."""
    import gulpio_rs
    from gulpio_rs import utils

    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    # gulpio_rs.utils.img_to_jpeg_bytes is gulpio2's encoding (libjpeg-turbo, q90, 4:4:4).
    jpegs = [utils.img_to_jpeg_bytes(f) for f in realistic_frames(videos * frames)]
    chunk = gulpio_rs.GulpChunk(path / "data_0.gulp", path / "meta_0.gmeta")
    with chunk.open("wb"):
        for v in range(videos):
            chunk.append(str(v), {"label": "real"}, jpegs[v * frames : (v + 1) * frames])
    return jpegs


# --------------------------------------------------------------------------------------------
# Child processes
# --------------------------------------------------------------------------------------------


def child_open(p: dict) -> dict:
    t0 = time.perf_counter()
    mod = __import__(p["lib"])
    import_s = time.perf_counter() - t0
    peak_reset = reset_peak_rss()
    rss0 = proc_status_kb("VmRSS")
    hwm0 = proc_status_kb("VmHWM")
    anon0, file0 = proc_status_kb("RssAnon"), proc_status_kb("RssFile")
    t0 = time.perf_counter()
    gd = mod.GulpDirectory(p["path"])
    open_s = time.perf_counter() - t0
    hwm1 = proc_status_kb("VmHWM")
    rss1 = proc_status_kb("VmRSS")
    anon1, file1 = proc_status_kb("RssAnon"), proc_status_kb("RssFile")
    if not peak_reset and hwm1 <= hwm0:
        # Without a reset the import's peak may hide the open's; fall back to what is kept.
        hwm1 = rss1
    # Counted after the clock stopped; gulpio2 has no len() of its own.
    videos = len(gd) if p["lib"] == "gulpio_rs" else len(gd.merged_meta_dict)
    return dict(
        import_s=import_s,
        open_s=open_s,
        peak_mb=(hwm1 - rss0) / 1024,
        retained_mb=(rss1 - rss0) / 1024,
        # Split of the retained RSS: private heap vs mapped (page-cache) pages of index files.
        anon_mb=(anon1 - anon0) / 1024,
        file_mb=(file1 - file0) / 1024,
        videos=videos,
    )


def child_access(p: dict) -> dict:
    """Random raw-frame access for one library; returns frames/s per variant per repeat."""
    lib, path, budget = p["lib"], p["path"], p["budget"]
    videos, frames, per_chunk = p["videos"], p["frames"], p["per_chunk"]
    rng = random.Random(p["seed"])
    pool = [str(rng.randrange(videos)) for _ in range(100_000)]
    k = min(8, frames)
    pool_sel = [(i, sorted(rng.sample(range(frames), k))) for i in pool]
    # One random video from every chunk, in random chunk order.
    n_chunks = -(-videos // per_chunk)
    firsts = [
        str(c * per_chunk + rng.randrange(min(per_chunk, videos - c * per_chunk)))
        for c in range(n_chunks)
    ]
    rng.shuffle(firsts)

    def identity(b):
        return b

    def first_pass(gd_factory, step):
        gd = gd_factory()
        t0 = time.perf_counter()
        for i in firsts:
            step(gd, i)
        return len(firsts) * frames / (time.perf_counter() - t0)

    results: dict[str, list[float]] = {}
    if lib == "gulpio_rs":
        import gulpio_rs

        gd = gulpio_rs.GulpDirectory(path)
        gd_nc = gulpio_rs.GulpDirectory(path, check_data=False)
        gd_id = gulpio_rs.GulpDirectory(path, jpeg_decoder=identity)
        variants = {
            "full_check": (lambda i: gd.frame_bytes(i), pool, frames),
            "full_nocheck": (lambda i: gd_nc.frame_bytes(i), pool, frames),
            "full_getitem": (lambda i: gd_id[i], pool, frames),
            "sel_check": (lambda t: gd.frame_bytes(*t), pool_sel, k),
            "sel_nocheck": (lambda t: gd_nc.frame_bytes(*t), pool_sel, k),
            "sel_getitem": (lambda t: gd_id[t], pool_sel, k),
        }

        def first_step(g, i):
            g.frame_bytes(i)

        def first_factory():
            return gulpio_rs.GulpDirectory(path)

        # Steady state means every chunk's deferred check has already happened.
        for g in (gd, gd_nc, gd_id):
            for i in firsts:
                g.frame_bytes(i)
    else:
        import gulpio2

        gd = gulpio2.GulpDirectory(path, jpeg_decoder=identity)
        variants = {
            "full_getitem": (lambda i: gd[i], pool, frames),
            "sel_getitem": (lambda t: gd[t], pool_sel, k),
        }

        def first_step(g, i):
            g[i]

        # gulpio2 keeps no per-chunk state, so reopening (seconds) would only add noise.
        def first_factory():
            return gd

    # Round-robin over variants so slow phases of a noisy machine hit them all alike.
    for _ in range(p["repeats"]):
        for name, (step, items, units) in variants.items():
            results.setdefault(name, []).append(rate(step, items, units, budget))
        results.setdefault("first", []).append(first_pass(first_factory, first_step))
    return results


# --------------------------------------------------------------------------------------------
# Benchmarks run by the parent
# --------------------------------------------------------------------------------------------


def bench_open(path: Path, repeats: int, g2_repeats: int) -> dict:
    out = {}
    for lib, n in (("gulpio_rs", repeats), ("gulpio2", g2_repeats)):
        runs = [run_child("open", {"lib": lib, "path": str(path)}) for _ in range(n)]
        out[lib] = {key: median([r[key] for r in runs]) for key in runs[0]}
    return out


def bench_crc_vs_decode(path: Path, jpegs: list[bytes], videos: int, repeats: int, budget):
    """Per-frame seconds of CRC32 and decode variants on the real-size dataset.

    The check/no-check pairs differ by under a microsecond per frame, less than the drift of a
    shared machine over one timed repeat, so each pair is timed video by video in alternation
    (see ``paired_seconds``) and the difference is taken within each repeat.
    """
    import simplejpeg

    import gulpio_rs

    gd = gulpio_rs.GulpDirectory(path)
    gd_nc = gulpio_rs.GulpDirectory(path, check_data=False)
    ids = [str(v) for v in range(videos)]
    n = len(jpegs)
    by_video = {i: jpegs[v * (n // videos) : (v + 1) * (n // videos)] for v, i in enumerate(ids)}
    single = {"zlib_crc32": lambda: [zlib.crc32(b) for b in jpegs]}
    # (name of a, name of b, a, b): per-video calls timed in alternation.
    pairs = [
        ("rs_bytes_check", "rs_bytes_nocheck", gd.frame_bytes, gd_nc.frame_bytes),
        ("rs_decode_check", "rs_decode_nocheck", gd.__getitem__, gd_nc.__getitem__),
        (
            "rs_decode",
            "simplejpeg_decode",
            gd_nc.__getitem__,
            lambda i: [simplejpeg.decode_jpeg(b) for b in by_video[i]],
        ),
    ]
    # First-touch costs (the chunk's deferred check, page faults) are not measured here.
    for i in ids:
        gd[i], gd_nc[i]
    times: dict[str, list[float]] = {}
    for _ in range(repeats):
        for name, fn in single.items():
            times.setdefault(name, []).append(seconds_per_call(fn, budget) / n)
        for name_a, name_b, fa, fb in pairs:
            a, b = paired_seconds(fa, fb, ids, budget)
            times.setdefault(name_a, []).append(a / (n / videos))
            times.setdefault(name_b, []).append(b / (n / videos))
            times.setdefault(f"{name_a}-{name_b}", []).append((a - b) / (n / videos))
    return {name: median(ts) for name, ts in times.items()}


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

    def compare(self, what, ours, theirs, fmt, better_when_lower, target=None):
        """A row with our value, gulpio2's and how many times better ours is."""
        r = (theirs / ours) if better_when_lower else (ours / theirs)
        met = "" if target is None else ("yes" if r >= target else "NO")
        tgt = "" if target is None else f">= {target:g}x"
        self.row(what, fmt(ours), fmt(theirs), f"{r:,.1f}x", tgt, met)

    def print(self):
        print_table(
            self.rows, ("measurement", "gulpio_rs", "gulpio2/ref", "better by", "target", "met")
        )


def ms(x):
    return f"{x * 1e3:,.1f} ms"


def us(x):
    return f"{x * 1e6:,.2f} us"


def mb(x):
    return f"{x:,.1f} MB"


def fps(x):
    return f"{x:,.0f} f/s"


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    ap.add_argument("--videos", type=int, help="videos in the open/access dataset (100000)")
    ap.add_argument("--frames-per-video", type=int, help="frames per video (30)")
    ap.add_argument("--videos-per-chunk", type=int, help="videos per chunk (100)")
    ap.add_argument("--workdir", default="/tmp/gulpio_bench", help="datasets are cached here")
    ap.add_argument("--repeats", type=int, help="timed repeats per measurement (5; quick: 3)")
    ap.add_argument("--budget", type=float, help="seconds per timed repeat (1.0; quick: 0.25)")
    ap.add_argument("--legacy-chunks", type=int, default=100, help="chunks in the legacy copy")
    ap.add_argument(
        "--gulpio2-open-repeats",
        type=int,
        help="fresh-process opens for gulpio2, which takes seconds each (default: min(3, repeats))",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="small CI-friendly run (10k videos)")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.child:
        mode, payload = args.child
        result = {"open": child_open, "access": child_access}[mode](json.loads(payload))
        print(json.dumps(result))
        return

    preset = QUICK if args.quick else FULL
    for key, value in preset.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    g2_open_repeats = args.gulpio2_open_repeats or min(3, args.repeats)
    videos, frames, per_chunk = args.videos, args.frames_per_video, args.videos_per_chunk

    import gulpio2

    import gulpio_rs

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    synth = work / f"synthetic_{videos}v_{frames}f_{per_chunk}pc"
    n_chunks = -(-videos // per_chunk)
    legacy_chunks = min(args.legacy_chunks, n_chunks)
    legacy = work / f"legacy_{legacy_chunks}of_{synth.name}"
    t_all = time.perf_counter()
    if not synth.exists():
        print(f"building {synth} ...", flush=True)
        print(f"  built in {build_synthetic(synth, videos, frames, per_chunk):.1f} s", flush=True)
        shutil.rmtree(legacy, ignore_errors=True)  # copied from the old build
    if not legacy.exists():
        build_legacy(synth, legacy, legacy_chunks)
    real_videos, real_frames = 10, 20
    jpegs = build_realsize(work / "realsize", real_videos, real_frames)

    print(
        f"gulpio_rs {gulpio_rs.__version__} vs gulpio2 {gulpio2.__version__}, "
        f"Python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print(
        f"dataset: {videos:,} videos x {frames} frames, {n_chunks:,} chunks, "
        f"{sum(f.stat().st_size for f in synth.iterdir()) / 2**20:,.0f} MB on disk; "
        f"medians of {args.repeats} repeats ({g2_open_repeats} for gulpio2 opens)\n",
        flush=True,
    )
    table = Table()

    # a. open ---------------------------------------------------------------------------------
    o = bench_open(synth, args.repeats, g2_open_repeats)
    rs, g2 = o["gulpio_rs"], o["gulpio2"]
    assert rs["videos"] == g2["videos"] == videos, o
    table.section(f"a. GulpDirectory(path), {videos:,} videos in {n_chunks:,} indexed chunks")
    table.compare("open time", rs["open_s"], g2["open_s"], ms, True, TARGET_OPEN_SPEED)
    table.compare("peak RSS increase", rs["peak_mb"], g2["peak_mb"], mb, True, TARGET_OPEN_MEMORY)
    table.compare("RSS retained after open", rs["retained_mb"], g2["retained_mb"], mb, True)
    table.compare("  of which anonymous (heap)", rs["anon_mb"], g2["anon_mb"], mb, True)
    table.row("  of which file-backed (mmap)", mb(rs["file_mb"]), mb(g2["file_mb"]))
    table.compare("import time (not in open)", rs["import_s"], g2["import_s"], ms, True)

    lo = bench_open(legacy, args.repeats, args.repeats)
    lrs, lg2 = lo["gulpio_rs"], lo["gulpio2"]
    legacy_videos = min(videos, legacy_chunks * per_chunk)
    table.section(f"a'. legacy open (no .gidx), {legacy_videos:,} videos in {legacy_chunks} chunks")
    table.compare("open time", lrs["open_s"], lg2["open_s"], ms, True)
    table.compare("peak RSS increase", lrs["peak_mb"], lg2["peak_mb"], mb, True)
    table.compare(
        "open time per video",
        lrs["open_s"] / legacy_videos,
        lg2["open_s"] / legacy_videos,
        us,
        True,
    )
    print("a. done", flush=True)

    # b. random raw access -------------------------------------------------------------------
    payload = dict(
        path=str(synth),
        videos=videos,
        frames=frames,
        per_chunk=per_chunk,
        seed=args.seed,
        repeats=args.repeats,
        budget=args.budget,
    )
    ars = {k: median(v) for k, v in run_child("access", {**payload, "lib": "gulpio_rs"}).items()}
    ag2 = {k: median(v) for k, v in run_child("access", {**payload, "lib": "gulpio2"}).items()}
    k = min(8, frames)
    table.section(f"b. random raw frame bytes (no decode), all {frames} frames of a video")
    table.compare(
        "frame_bytes(id), CRC checked",
        ars["full_check"],
        ag2["full_getitem"],
        fps,
        False,
        TARGET_RAW_ACCESS,
    )
    table.compare(
        "frame_bytes(id), check_data=False",
        ars["full_nocheck"],
        ag2["full_getitem"],
        fps,
        False,
        TARGET_RAW_ACCESS,
    )
    table.compare(
        "gd[id], identity jpeg_decoder", ars["full_getitem"], ag2["full_getitem"], fps, False
    )
    table.compare("first read per chunk, frame_bytes(id)", ars["first"], ag2["first"], fps, False)
    table.section(f"b'. random raw frame bytes, {k} random frames of a video")
    table.compare(
        f"frame_bytes(id, [{k}]), CRC checked",
        ars["sel_check"],
        ag2["sel_getitem"],
        fps,
        False,
        TARGET_RAW_ACCESS,
    )
    table.compare(
        f"frame_bytes(id, [{k}]), check_data=False",
        ars["sel_nocheck"],
        ag2["sel_getitem"],
        fps,
        False,
        TARGET_RAW_ACCESS,
    )
    table.compare(
        f"gd[id, [{k}]], identity jpeg_decoder", ars["sel_getitem"], ag2["sel_getitem"], fps, False
    )
    print("b. done", flush=True)

    # c. CRC vs decode -----------------------------------------------------------------------
    t = bench_crc_vs_decode(work / "realsize", jpegs, real_videos, args.repeats, args.budget)
    mean_kb = sum(map(len, jpegs)) / len(jpegs) / 1024
    table.section(
        f"c. CRC vs decode per frame, {len(jpegs)} frames 256x144 q90 4:4:4, {mean_kb:.1f} KB avg"
    )
    decode = t["rs_decode_nocheck"]
    table.row(
        "zlib.crc32 per frame",
        us(t["zlib_crc32"]),
        f"{mean_kb * 1024 / t['zlib_crc32'] / 1e9:.2f} GB/s",
    )
    table.row(
        "frame_bytes(id) check / no check", us(t["rs_bytes_check"]), us(t["rs_bytes_nocheck"])
    )
    table.row("gd[id] decode check / no check", us(t["rs_decode_check"]), us(decode))
    table.compare(
        "decode: gulpio_rs gd[id] vs simplejpeg",
        t["rs_decode"],
        t["simplejpeg_decode"],
        us,
        True,
        1.0,
    )
    for what, cost in (
        ("zlib.crc32 / gulpio_rs decode", t["zlib_crc32"]),
        ("check_data cost in frame_bytes / decode", t["rs_bytes_check-rs_bytes_nocheck"]),
        ("check_data cost in gd[id] / decode", t["rs_decode_check-rs_decode_nocheck"]),
    ):
        frac = cost / decode
        ok = "yes" if frac <= TARGET_CRC_FRACTION else "NO"
        table.row(what, f"{frac:.2%}", "", "", f"<= {TARGET_CRC_FRACTION:.0%}", ok)
    print("c. done\n", flush=True)

    table.print()
    print(f"\ntotal {time.perf_counter() - t_all:.0f} s")


if __name__ == "__main__":
    main()
