"""``gulpio index``: write checksummed indexes for chunks written by gulpio/gulpio2, without
touching their ``.gulp`` and ``.gmeta`` files, and record every chunk in the dataset manifest
(docs/FORMAT.md §7), creating it when missing."""

from __future__ import annotations

import argparse

from .. import _native
from .._plural import plural
from ..errors import GulpError
from ._common import Subparsers, is_url, open_directory, refuse_remote, say

EPILOG = """examples:
  gulpio index /data/something_something_gulps
  gulpio index /data/gulps --abort-pending    after a writer was killed mid-publication
  gulpio index /data/gulps --no-manifest      indexes only, as before the manifest
  gulpio index s3://bucket/gulps              adds a manifest under _gulpio/ (chunks need indexes)
"""


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "index",
        help="write checksummed indexes for chunks that lack them (gulpio/gulpio2 data) and "
        "record every chunk in the dataset manifest",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("directory")
    p.add_argument(
        "--no-manifest",
        action="store_true",
        help="write the indexes only; leave the manifest (_gulpio/) alone",
    )
    p.add_argument(
        "--abort-pending",
        action="store_true",
        help="abort the operations of writers that died before publishing their chunk "
        "(only while no writer is at work on the dataset)",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    remote = is_url(args.directory)
    shown = _native.redact_url(args.directory) if remote else args.directory
    if remote:
        if args.no_manifest:
            refuse_remote(
                args.directory,
                "index --no-manifest",
                "index a local copy and upload the data_*.gidx files (they are only ever added)",
            )
        # Only files under _gulpio/ are added: a chunk without an index is recorded from its
        # .gmeta and read through it.
    else:
        gd = open_directory(args.directory, manifest="off")
        written = gd.write_indexes()
        say(
            f"{args.directory}: wrote {plural(written, 'index file')}; "
            f"{plural(gd.num_chunks, 'chunk')} in all"
        )
        if args.no_manifest:
            return 0
    try:
        r = _native.manifest_index(args.directory, abort_pending=args.abort_pending)
    except ValueError as e:  # nothing to index at a URL (a local one was refused above)
        raise GulpError(str(e)) from None
    changes = ", ".join(
        plural(r[key], *what)  # type: ignore[literal-required]
        for key, what in (
            ("added", ("chunk added", "chunks added")),
            ("replaced", ("record updated", "records updated")),
            ("removed", ("record removed", "records removed")),
            ("aborted", ("pending operation aborted", "pending operations aborted")),
        )
        if r[key]  # type: ignore[literal-required]
    )
    say(
        f"{shown}: manifest {'created' if r['created'] else 'updated'} at version "
        f"{r['version']}: {plural(r['chunks'], 'chunk')}, {r['videos']:,} videos"
        + (f" ({changes})" if changes else "")
    )
    return 0
