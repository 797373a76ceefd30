"""``gulpio check``: verify a dataset completely and say exactly where any damage is.

Checks every chunk's index against its files, every frame's CRC32 (in parallel, at page-cache
speed), the CRC of each chunk's published data, leftovers of interrupted writes (unpublished
tails, and temporary files whose writer is gone), and with ``--decode`` decodes every frame.
Exit code 0 only when everything is intact and nothing is left over.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from typing import Any

from .. import _manifest
from .._atomic import write_text_atomically
from .._names import temporary_of
from .._plural import plural
from .._sizes import megabytes
from .._threads import thread_count
from ..errors import BrokenChunkWarning, GulpError
from ..ingest.locks import pid_alive
from ._common import Subparsers, count_arg, is_url, open_directory, say

EPILOG = """examples:
  gulpio check /data/gulps              CRC of every frame, one line per problem
  gulpio check /data/gulps --decode     also decode every frame
  gulpio check /data/gulps --json       machine-readable report
  gulpio check /data/gulps --decode --bad-list bad.txt
                                        ids of the videos that fail, one per line, for
                                        GulpVideoDataset(..., exclude="bad.txt")
"""


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "check",
        help="verify every frame's checksum (and optionally decode); exit 0 only if intact",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("directory")
    p.add_argument("--decode", action="store_true", help="also decode every frame")
    p.add_argument("--json", action="store_true", help="print a JSON report on stdout")
    p.add_argument(
        "--threads", type=count_arg("--threads"), default=0, help="threads (default: all cores)"
    )
    p.add_argument(
        "--bad-list",
        metavar="FILE",
        help="write the ids of the videos that fail to FILE, one per line (replaced whole)",
    )
    p.set_defaults(run=run)


def _problem(
    path: str,
    kind: str,
    message: str,
    video_id: str | None = None,
    frame: int | None = None,
) -> dict[str, Any]:
    return {"path": path, "video_id": video_id, "frame": frame, "kind": kind, "message": message}


def verify(
    directory: str, *, decode: bool = False, threads: int = 0, progress: bool = False
) -> dict[str, Any]:
    """The check as data: a report dict (see ``--json``)."""
    threads = thread_count(threads, "--threads")
    start = time.perf_counter()
    # Problems are reported below instead; every chunk on disk is checked, recorded or not.
    gd = open_directory(directory, quiet=True, manifest="off")
    # A skipped chunk is unreadable; otherwise only its index was ignored.
    problems = [
        _problem(
            p["path"],
            "chunk" if p["chunk_skipped"] else "index",
            p["message"],
            p["video_id"],
            p["frame"],
        )
        for p in gd.problems
    ]
    # bytes: the frames' JPEG bytes (as ingest, info and ls count them); data_bytes: what was
    # read and CRC-checked (padding included), the base of the GB/s figure.
    totals = {"videos": 0, "frames": 0, "bytes": 0, "data_bytes": 0, "legacy_chunks": 0}
    table = gd.chunk_table()
    bad_ids: list[str] = []
    rows = table
    if progress:
        from tqdm import tqdm

        rows = tqdm(table, desc="checking", unit="chunk", file=sys.stderr)
    for pos, (_number, data, meta, index, _first, count) in enumerate(rows):
        if count == 0:
            # Not damage, but nothing a dataset needs: what older versions (and gulpio2)
            # published when every video of a chunk was skipped. `gulpio repair` moves it away.
            problems.append(_problem(data, "empty_chunk", "the chunk holds no videos"))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", BrokenChunkWarning)
                chunk = gd.native_chunk(pos)
        except GulpError as e:
            problems.append(_problem(data, "chunk", str(e)))
            bad_ids.extend(gd.keys()[_first : _first + count])  # none of them can be read
            continue
        if chunk.meta_problem is not None:
            problems.append(_problem(meta, "meta", chunk.meta_problem))
        if chunk.index_problem is not None:
            problems.append(_problem(index, "index", chunk.index_problem))
        elif not chunk.indexed:
            totals["legacy_chunks"] += 1
        videos, frames, data_bytes, frame_bytes, findings = chunk.verify(decode, threads)
        totals["videos"] += videos
        totals["frames"] += frames
        totals["bytes"] += frame_bytes
        totals["data_bytes"] += data_bytes
        for kind, video_id, frame, message in findings:
            problems.append(_problem(data, kind, message, video_id, frame))
            if video_id is not None:
                bad_ids.append(video_id)
    if not is_url(directory):
        problems += leftovers(directory)
        problems += _manifest.problems(directory)
    seconds = time.perf_counter() - start
    return {
        "directory": directory,
        "ok": not problems,
        "chunks": len(table),
        **totals,
        "decoded": decode,
        "seconds": round(seconds, 6),
        "problems": problems,
        # Videos that failed, each once: what --bad-list writes.
        "bad_ids": list(dict.fromkeys(bad_ids)),
    }


def leftovers(directory: str) -> list[dict[str, Any]]:
    """Temporary files of writers that are gone (killed, crashed): never read, only taking
    space; ``gulpio repair --apply`` removes them. Those of a running writer are its work in
    progress, not a problem. Liveness is judged on this machine (as repair judges it)."""
    found = []
    for folder, name in _manifest.beside_chunks(directory):
        temp = temporary_of(name)
        # Our own pid cannot be a live writer's: checking writes nothing.
        if temp is None or (temp[1] != os.getpid() and pid_alive(temp[1])):
            continue
        found.append(
            _problem(
                os.path.join(folder, name),
                "leftover",
                f"temporary file of an interrupted write (its writer, process {temp[1]}, is "
                "gone); `gulpio repair --apply` removes it",
            )
        )
    return found


def _line(p: dict[str, Any]) -> str:
    where, message = p["path"], p["message"]
    # Messages from the core may start with the file already.
    message = message.removeprefix(f"{where}: ")
    if p["video_id"] is not None:
        where += f": video {p['video_id']!r}"
    if p["frame"] is not None:
        where += f" frame {p['frame']}"
    return f"{where}: {message}"


def _write_bad_list(path: str, ids: list[str], quiet: bool) -> None:
    """One id per line, as the PyTorch datasets' ``exclude=`` reads it; the file is replaced
    whole (never half-written). Ids with a line break cannot be listed so: said on stderr."""
    listable = [i for i in ids if "\n" not in i and "\r" not in i]
    for i in ids:
        if i not in listable:
            print(f"not in {path}: video {i!r} has a line break in its id", file=sys.stderr)
    write_text_atomically(path, "".join(f"{i}\n" for i in listable))
    if not quiet:
        say(f"{plural(len(listable), 'failing video id')} written to {path}")


def run(args: argparse.Namespace) -> int:
    show_progress = not args.json and sys.stderr.isatty()
    report = verify(
        args.directory, decode=args.decode, threads=args.threads, progress=show_progress
    )
    if args.bad_list is not None:
        _write_bad_list(args.bad_list, report["bad_ids"], quiet=args.json)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0 if report["ok"] else 1
    for p in report["problems"]:
        say(_line(p))
    seconds = report["seconds"]
    if report["decoded"]:
        # Decoding is bound by frames, not bytes: a video segment of a few kB holds 16
        # frames, so its GB/s would say nothing (it printed 0.00).
        what = "decoded and CRC-checked"
        rate = f"{report['frames'] / seconds:,.0f} frames/s" if seconds else ""
    else:
        what = "CRC-checked"
        rate = f"{report['data_bytes'] / seconds / 1e9:.2f} GB/s" if seconds else ""
    say(
        f"{what} {plural(report['frames'], 'frame')} of {plural(report['videos'], 'video')} "
        f"in {plural(report['chunks'], 'chunk')} ({megabytes(report['bytes'])}) in "
        f"{seconds:.2f} s" + (f" ({rate})" if rate else "")
    )
    if report["legacy_chunks"]:
        say(
            f"{plural(report['legacy_chunks'], 'chunk has', 'chunks have')} no checksummed "
            "index (written by "
            "gulpio/gulpio2): their frames were checked for placement only; run `gulpio index`"
        )
    if report["ok"]:
        say("all intact")
        return 0
    say(f"{plural(len(report['problems']), 'problem')} found")
    return 1
