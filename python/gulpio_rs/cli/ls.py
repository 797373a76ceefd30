"""``gulpio ls``: the ids of a dataset, one per line in the dataset's order (each usable with
``gulpio show DIR ID``); ``--long`` adds frames, stored size, label and chunk, ``--json`` prints
the same as a JSON list."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from .._sizes import kilobytes
from .._terminal import json_text, printable
from ._common import Subparsers, open_directory

EPILOG = """examples:
  gulpio ls /data/gulps                     ids, one per line
  gulpio ls /data/gulps --long              id, frames, size, label and chunk, in columns
  gulpio ls s3://bucket/gulps --json        the same as JSON (credentials from AWS_*)
  gulpio show /data/gulps "$(gulpio ls /data/gulps | head -1)" -o first.png
"""


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "ls",
        help="list the ids of a dataset (with --long: frames, size, label, chunk)",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("directory", help="a gulp directory or dataset URL")
    p.add_argument("--long", "-l", action="store_true", help="frames, size, label and chunk too")
    p.add_argument("--json", action="store_true", help="print a JSON list of objects")
    p.add_argument("--label-field", default="label", help="metadata field shown as the label")
    p.set_defaults(run=run)


def entries(
    directory: str, label_field: str = "label", details: bool = True
) -> list[dict[str, Any]]:
    """``{id, frames, bytes, label?, chunk}`` per video, in the dataset's order (``{id}``
    only without ``details``)."""
    gd = open_directory(directory)
    out: list[dict[str, Any]] = []
    for pos, (_number, data, _meta, _index, _first, _count) in enumerate(gd.chunk_table()):
        chunk = gd.native_chunk(pos)
        name = os.path.basename(data)
        for video, id_ in enumerate(chunk.ids()):
            if not details:
                out.append({"id": id_})
                continue
            info = chunk.frame_info(video)
            entry = {
                "id": id_,
                "frames": len(info),
                "bytes": sum(length - pad for _, pad, length in info),
                "chunk": name,
            }
            if label_field:
                meta = json.loads(chunk.meta_data(video) or "[]")
                if meta and isinstance(meta[0], dict) and label_field in meta[0]:
                    entry["label"] = meta[0][label_field]
            out.append(entry)
    return out


def run(args: argparse.Namespace) -> int:
    rows = entries(args.directory, args.label_field, details=args.long or args.json)
    if args.json:
        print(json_text(rows, indent=1))
        return 0
    if not args.long:
        for row in rows:
            print(printable(row["id"]))
        return 0
    # Escaped before the widths are taken, so the columns line up as shown.
    table = [
        (
            printable(r["id"]),
            f"{r['frames']:,}",
            kilobytes(r["bytes"]),
            printable(r.get("label", "")),
            printable(r["chunk"]),
        )
        for r in rows
    ]
    header = ("id", "frames", "size", "label", "chunk")
    widths = [max(len(x) for x in col) for col in zip(header, *table, strict=True)]
    for line in [header, *table]:
        cells = [
            cell.rjust(w) if i in (1, 2) else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(line, widths, strict=True))
        ]
        print("  ".join(cells).rstrip())
    return 0
