"""What keeping a dataset manifest costs writers (issue 36, docs/FORMAT.md §7.6), through the
public paths: the same chunks published into a local folder without a manifest and into one
whose manifest ``gulpio index`` created, in the same run, alternating.

  * ``new_chunks(1)`` + ``open("wb")`` + ``append`` of one small video per chunk,
    ``--chunks`` (300) times: ms per publication and the ratio with/without (each publication
    with a manifest also writes and fsyncs one commit under ``_gulpio/log/``);
  * ``GulpIngestor(adapter, out, videos_per_chunk=--per-chunk, num_workers=1)()`` of
    ``--videos`` (2,000) videos of one 16x24 frame: seconds and the ratio;
  * the tools: ``gulpio index`` creating the manifest of the result and ``manifest_status``
    (what ``gulpio check`` adds), seconds, and the manifest's bytes;
  * a new dataset as users make it: ``GulpIngestor(...)()`` into an empty folder, which gives
    it a manifest and compacts it at the end, against ``manifest=False``: the ingest's seconds,
    then ``GulpDirectory(out)`` opening each (median of 5 opens, page cache warm) and how it
    opened.

    python benches/bench_manifest_writes.py [--chunks 300] [--videos 2000] [--per-chunk 10]

No peer writes a manifest per publication: MosaicML Streaming and LitData write one index per
writer and merge them afterwards (``merge_index``), which gives no reader a consistent view
while writers run; bench_scale.py compares their opens.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from _table import print_table  # noqa: E402

from gulpio_rs import GulpChunk, GulpDirectory, GulpIngestor, _native  # noqa: E402
from gulpio_rs.adapters import AbstractDatasetAdapter  # noqa: E402

FRAME = np.full((16, 24, 3), 120, np.uint8)


class Videos(AbstractDatasetAdapter):
    """``n`` videos of one frame, ids ``v{i}``."""

    def __init__(self, n: int, tag: str = "v"):
        self.n, self.tag = n, tag

    def __len__(self) -> int:
        return self.n

    def iter_data(self, slice_element=None):
        for i in range(self.n)[slice_element or slice(None)]:
            yield {"id": f"{self.tag}{i}", "meta": {"i": i}, "frames": [FRAME]}


def seed(folder: Path, manifest: bool) -> None:
    folder.mkdir()
    chunk = GulpChunk(folder / "data_0.gulp", folder / "meta_0.gmeta")
    with chunk.open("wb"):
        chunk.append("seed", {}, [FRAME])
    if manifest:
        _native.manifest_index(str(folder))


def publish(folder: Path, n: int, tag: str) -> float:
    """Seconds per publication of ``n`` one-video chunks through ``new_chunks``."""
    gd = GulpDirectory(str(folder))
    start = time.perf_counter()
    for i in range(n):
        (chunk,) = gd.new_chunks(1)
        with chunk.open("wb"):
            chunk.append(f"{tag}{i}", {}, [FRAME])
    return (time.perf_counter() - start) / n


def ingest(folder: Path, videos: int, per_chunk: int) -> float:
    start = time.perf_counter()
    GulpIngestor(Videos(videos), str(folder), videos_per_chunk=per_chunk, num_workers=1)()
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chunks", type=int, default=300)
    ap.add_argument("--videos", type=int, default=2000)
    ap.add_argument("--per-chunk", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    rows: list[tuple] = []
    with tempfile.TemporaryDirectory(prefix="bench-manifest-") as tmp:
        work = Path(tmp)
        per_pub: dict[bool, list[float]] = {False: [], True: []}
        per_ingest: dict[bool, list[float]] = {False: [], True: []}
        for r in range(args.rounds):
            for manifest in (False, True):  # alternating: the machine's drift hits both
                folder = work / f"pub-{r}-{int(manifest)}"
                seed(folder, manifest)
                per_pub[manifest].append(publish(folder, args.chunks, "p"))
                out = work / f"ing-{r}-{int(manifest)}"
                seed(out, manifest)
                per_ingest[manifest].append(ingest(out, args.videos, args.per_chunk))
                if manifest:
                    st = _native.manifest_status(str(out))
                    assert st is not None and not (st["pending"] or st["unrecorded"]), st
        plain, kept = (statistics.median(per_pub[m]) for m in (False, True))
        rows += [
            (
                "#",
                f"new_chunks + one-video chunk, {args.chunks} publications, median of "
                f"{args.rounds}",
            ),
            ("without a manifest", f"{plain * 1e3:.2f} ms", "1.00x"),
            ("with a manifest", f"{kept * 1e3:.2f} ms", f"{kept / plain:.2f}x"),
        ]
        plain, kept = (statistics.median(per_ingest[m]) for m in (False, True))
        rows += [
            ("#", f"GulpIngestor, {args.videos:,} videos, {args.per_chunk} per chunk, 1 worker"),
            ("without a manifest", f"{plain:.2f} s", "1.00x"),
            ("with a manifest", f"{kept:.2f} s", f"{kept / plain:.2f}x"),
        ]
        # The tools, on an ingest's result without a manifest.
        target = work / "ing-0-0"
        start = time.perf_counter()
        _native.manifest_index(str(target))
        index_s = time.perf_counter() - start
        start = time.perf_counter()
        _native.manifest_status(str(target))
        status_s = time.perf_counter() - start
        size = sum(f.stat().st_size for f in (target / "_gulpio").rglob("*") if f.is_file())
        rows += [
            (
                "#",
                f"tools on {args.videos + 1:,} videos in {args.videos // args.per_chunk + 1} "
                "chunks",
            ),
            ("gulpio index (creates the manifest)", f"{index_s:.3f} s", f"{size:,} B"),
            ("manifest_status (gulpio check's part)", f"{status_s:.3f} s", ""),
        ]
        # A new dataset, as users make it: the ingest creates and compacts the manifest.
        made: dict[bool, list[float]] = {False: [], True: []}
        opens: dict[bool, list[float]] = {False: [], True: []}
        how: dict[bool, str] = {}
        for r in range(args.rounds):
            for manifest in (False, True):
                out = work / f"new-{r}-{int(manifest)}"
                start = time.perf_counter()
                GulpIngestor(
                    Videos(args.videos),
                    str(out),
                    videos_per_chunk=args.per_chunk,
                    num_workers=1,
                    manifest=manifest,
                )()
                made[manifest].append(time.perf_counter() - start)
                for _ in range(5):
                    start = time.perf_counter()
                    gd = GulpDirectory(str(out))
                    opens[manifest].append(time.perf_counter() - start)
                how[manifest] = gd.opened["how"] + (
                    f", tail {gd.opened['tail']}" if gd.opened["how"] == "manifest" else ""
                )
        plain, kept = (statistics.median(made[m]) for m in (False, True))
        plain_open, kept_open = (statistics.median(opens[m]) for m in (False, True))
        rows += [
            ("#", f"a new dataset: GulpIngestor(...)() of {args.videos:,} videos, then its open"),
            ("manifest=False: ingest", f"{plain:.2f} s", "1.00x"),
            ("default (manifest): ingest", f"{kept:.2f} s", f"{kept / plain:.2f}x"),
            (f"manifest=False: open ({how[False]})", f"{plain_open * 1e3:.2f} ms", "1.00x"),
            (
                f"default: open ({how[True]})",
                f"{kept_open * 1e3:.2f} ms",
                f"{kept_open / plain_open:.2f}x",
            ),
        ]
    print(f"bench_manifest_writes, {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}")
    print_table(rows, ("", "time", "ratio / bytes"))


if __name__ == "__main__":
    main()
