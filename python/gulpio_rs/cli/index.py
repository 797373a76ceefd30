"""``gulpio index``: write checksummed indexes for chunks written by gulpio/gulpio2, without
touching their ``.gulp`` and ``.gmeta`` files."""

from __future__ import annotations

import argparse
import os

from ..errors import GulpError

EPILOG = """examples:
  gulpio index /data/something_something_gulps
"""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "index",
        help="write checksummed indexes for chunks that lack them (gulpio/gulpio2 data)",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("directory")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..fileio import GulpDirectory

    if not os.path.isdir(args.directory):
        raise GulpError(f"{args.directory}: no such directory")
    gd = GulpDirectory(args.directory)
    if gd.num_chunks == 0:
        raise GulpError(f"{args.directory}: not a gulp directory (no data*.gulp / meta*.gmeta)")
    written = gd.write_indexes()
    print(f"{args.directory}: wrote {written} index file(s); {gd.num_chunks} chunk(s) in all")
    return 0
