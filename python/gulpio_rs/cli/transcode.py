"""``gulpio transcode``: store a dataset's videos again in another encoding (JPEG frames as
AV1 video segments, or back), keeping ids, metadata and the files beside the chunks;
parallel, resumable, with progress."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from .._encode_options import DEFAULT, ENCODINGS, SUBSAMPLINGS
from ._common import Subparsers, count_arg, error_line, say

EPILOG = """examples:
  gulpio transcode /data/ssv2_gulps /data/ssv2_video --encoding video
  gulpio transcode /data/ssv2_video /data/ssv2_jpeg --encoding jpeg --quality 90

Rerunning the same command after an interruption finishes the job; videos the destination
already holds are skipped. The files beside the chunks (label2idx.json and any other file but
the chunks and gulpio's own state: .gulpio-*, gulpio-quarantine/) are copied once the videos
are stored; of a dataset URL only label2idx.json. gulpio2 cannot read datasets stored with
--encoding video.
"""


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "transcode",
        help="store a dataset again as video segments or as JPEG frames",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("source", help="the gulp directory (or dataset URL) to read")
    p.add_argument("destination", help="where to write the transcoded dataset")
    p.add_argument("--encoding", required=True, choices=ENCODINGS,
                   help="video: AV1 segments (14-17x smaller; slower to write and, at "
                   "256 px, to read: README, 'Video as video'); jpeg: a JPEG per "
                   "frame")  # fmt: skip
    p.add_argument("--crf", type=int, default=DEFAULT.crf,
                   help="--encoding video: quality, 0-63 (default: %(default)s)")  # fmt: skip
    p.add_argument("--gop", type=int, default=DEFAULT.gop,
                   help="--encoding video: frames per segment (default: %(default)s)")  # fmt: skip
    p.add_argument("--preset", type=int, default=DEFAULT.preset,
                   help="--encoding video: SVT-AV1's speed, 0-13 "
                   "(default: %(default)s)")  # fmt: skip
    p.add_argument("--quality", type=int, default=DEFAULT.quality,
                   help="--encoding jpeg: JPEG quality (default: %(default)s)")  # fmt: skip
    p.add_argument("--subsampling", default=DEFAULT.subsampling, choices=SUBSAMPLINGS,
                   help="--encoding jpeg: chroma subsampling (default: %(default)s)")  # fmt: skip
    p.add_argument("--videos-per-chunk", type=int, default=100,
                   help="videos per chunk file (default: %(default)s)")  # fmt: skip
    p.add_argument("--num-workers", type=count_arg("--num-workers", zero_means_all=False),
                   default=None, help="worker processes (default: the usable cores)")  # fmt: skip
    p.add_argument("--strict", action="store_true", help="stop at the first bad video")
    p.add_argument("--report", metavar="PATH", help="also write the report as JSON to PATH")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar (default: when stderr is a terminal)")  # fmt: skip
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from .._threads import usable_cores
    from ..ingest.transcode import transcode
    from .ingest import exit_status

    jpeg = args.encoding == "jpeg"
    try:
        report = transcode(
            args.source,
            args.destination,
            encoding=args.encoding,
            videos_per_chunk=args.videos_per_chunk,
            num_workers=args.num_workers or usable_cores(),
            crf=args.crf,
            gop=args.gop,
            preset=args.preset,
            quality=args.quality if jpeg else None,
            subsampling=args.subsampling if jpeg else None,
            strict=args.strict,
            progress=args.progress,
        )
    except ValueError as e:
        # A setting out of range (--crf 64, --preset 14): a usage error, not a traceback.
        return error_line("gulpio transcode", e, status=2)
    for line in report.summary().splitlines():
        say(line)
    if report.sidecars:
        say(f"copied beside the chunks: {', '.join(report.sidecars)}")
    if args.report:
        with open(args.report, "w") as f:
            json.dump(asdict(report), f, indent=1)
    return exit_status(report)
