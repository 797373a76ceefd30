"""``gulpio index``: write checksummed indexes for chunks written by gulpio/gulpio2, without
touching their ``.gulp`` and ``.gmeta`` files."""

from __future__ import annotations

import argparse

from .._plural import plural
from ._common import Subparsers, open_directory, refuse_remote, say

EPILOG = """examples:
  gulpio index /data/something_something_gulps
"""


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "index",
        help="write checksummed indexes for chunks that lack them (gulpio/gulpio2 data)",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("directory")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    refuse_remote(
        args.directory,
        "index",
        "index a local copy and upload the data_*.gidx files (they are only ever added)",
    )
    gd = open_directory(args.directory)
    written = gd.write_indexes()
    say(
        f"{args.directory}: wrote {plural(written, 'index file')}; "
        f"{plural(gd.num_chunks, 'chunk')} in all"
    )
    return 0
