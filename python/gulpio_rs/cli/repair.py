"""``gulpio repair``: make a damaged dataset consistent again without losing anything intact.

A dry run by default: it lists what it would do. With ``--apply`` it
- removes temporary files left by interrupted writes (``.gulpio-tmp.*``; not those of a
  process that is still running),
- cuts unpublished tails (bytes an interrupted append left past a chunk's published end),
- rewrites indexes that are damaged or no longer match their ``.gmeta``,
- moves data files without a meta file (and meta files without data) into
  ``gulpio-quarantine/``,
- rewrites each chunk with damaged frames so that it keeps every intact video; the damaged
  videos are listed with their reasons in ``gulpio-quarantine/quarantine.json`` and the
  original chunk files are kept in ``gulpio-quarantine/`` (hard links made before anything
  is replaced).

Run it while no writer is working on the directory.
"""

from __future__ import annotations

import argparse
import json
import os
import warnings

from .._atomic import write_json_atomically
from .._names import chunk_names, chunk_number
from ..errors import BrokenChunkWarning, GulpError
from ._common import refuse_remote, say

QUARANTINE = "gulpio-quarantine"

EPILOG = """examples:
  gulpio repair /data/gulps            list what would be done (changes nothing)
  gulpio repair /data/gulps --apply    do it
  gulpio repair /data/gulps --decode   also treat frames that do not decode as damaged
"""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "repair",
        help="remove leftovers of interrupted writes and salvage every intact video",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("directory")
    p.add_argument("--apply", action="store_true", help="do it (default: dry run)")
    p.add_argument("--decode", action="store_true", help="decode every frame while checking")
    p.set_defaults(run=run)


def plan(directory: str, decode: bool = False) -> list[dict]:
    """The actions repair would take, from a full check of the directory."""
    from .check import verify

    report = verify(directory, decode=decode)
    actions = [
        {"action": "remove_temp", "path": p["path"]}
        for p in report["problems"]
        if p["kind"] == "leftover"
    ]
    damaged: dict[str, dict] = {}
    for p in report["problems"]:
        if p["kind"] == "leftover":
            continue
        if p["kind"] == "unpublished_tail":
            actions.append({"action": "cut_tail", "path": p["path"], "reason": p["message"]})
        elif p["kind"] == "index":
            data = (
                p["path"][: -len(".gidx")] + ".gulp" if p["path"].endswith(".gidx") else p["path"]
            )
            actions.append({"action": "reindex", "path": data, "reason": p["message"]})
        elif p["kind"] == "empty_chunk":
            actions.append({"action": "quarantine_file", "path": p["path"], "reason": p["message"]})
        elif p["kind"] == "chunk":
            actions.append({"action": "quarantine_file", "path": p["path"], "reason": p["message"]})
        elif p["video_id"] is not None:
            videos = damaged.setdefault(p["path"], {})
            videos.setdefault(p["video_id"], []).append(
                f"frame {p['frame']}: {p['message']}" if p["frame"] is not None else p["message"]
            )
    for data, videos in damaged.items():
        actions.append({"action": "rewrite_chunk", "path": data, "damaged_videos": videos})
    # A rewrite also produces a fresh index and drops any tail: don't do those twice.
    rewritten = set(damaged)
    return [
        a
        for a in actions
        if not (a["action"] in ("cut_tail", "reindex") and a["path"] in rewritten)
    ]


def _meta_path(data: str) -> str:
    from ..directory import GulpDirectory

    root = os.path.dirname(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BrokenChunkWarning)
        for _n, d, meta, _i, _f, _c in GulpDirectory(root).chunk_table():
            if d == data:
                return meta
    raise GulpError(f"{data}: not a readable chunk")


def _chunk_files(path: str) -> list[str]:
    """The existing files of the chunk ``path`` belongs to (data, meta, index)."""
    root, name = os.path.split(path)
    k = chunk_number(name)
    if k is None:
        return [path] if os.path.exists(path) else []
    names = chunk_names(k)
    return [os.path.join(root, n) for n in names if os.path.exists(os.path.join(root, n))]


def _quarantine_dir(directory: str) -> str:
    path = os.path.join(directory, QUARANTINE)
    os.makedirs(path, exist_ok=True)
    return path


def _record(directory: str, entries: list[dict]) -> None:
    path = os.path.join(_quarantine_dir(directory), "quarantine.json")
    existing = []
    if os.path.exists(path):
        with open(path) as f:
            existing = json.load(f)
    write_json_atomically(path, existing + entries, indent=1)


def _rewrite(directory: str, data: str, damaged: dict[str, list[str]]) -> int:
    """Rewrite a chunk keeping its intact videos; returns how many were kept."""
    from .. import _native

    meta = _meta_path(data)
    chunk, _ = _native.Chunk.open(data, meta)
    keep = []
    for video, id_ in enumerate(chunk.ids()):
        if id_ in damaged:
            continue
        frames = [bytes(v) for v in chunk.frame_views(video, None, True)]
        keep.append((id_, json.loads(chunk.meta_data(video)), frames))
    # The originals stay available until (and after) the new version is published.
    qdir = _quarantine_dir(directory)
    for path in (data, meta, data[: -len(".gulp")] + ".gidx"):
        if os.path.exists(path):
            target = os.path.join(qdir, os.path.basename(path))
            if os.path.exists(target):
                os.remove(target)
            os.link(path, target)
    _record(
        directory,
        [
            {"id": id_, "chunk": os.path.basename(data), "reasons": reasons}
            for id_, reasons in damaged.items()
        ],
    )
    del chunk
    writer = _native.NativeWriter(data, meta)
    try:
        for id_, meta_data, frames in keep:
            elements = meta_data or [{}]
            writer.append(id_, json.dumps(elements[0]), frames)
            for extra in elements[1:]:
                writer.append(id_, json.dumps(extra), [])
    except BaseException:
        writer.abort()
        raise
    writer.close()
    return len(keep)


def apply(directory: str, actions: list[dict]) -> None:
    from .. import _native

    for a in actions:
        kind, path = a["action"], a["path"]
        if kind == "remove_temp":
            os.remove(path)
        elif kind == "cut_tail":
            chunk, _ = _native.Chunk.open(path, _meta_path(path))
            published = chunk.published_len
            del chunk
            os.truncate(path, published)
        elif kind == "reindex":
            _native.write_index(path, _meta_path(path))
        elif kind == "quarantine_file":
            for f in _chunk_files(path):
                os.replace(f, os.path.join(_quarantine_dir(directory), os.path.basename(f)))
        elif kind == "rewrite_chunk":
            _rewrite(directory, path, a["damaged_videos"])


def _describe(a: dict) -> str:
    kind, path = a["action"], a["path"]
    if kind == "remove_temp":
        return f"remove leftover temporary file {path}"
    if kind == "cut_tail":
        return f"cut the unpublished tail of {path} ({a['reason']})"
    if kind == "reindex":
        return f"rewrite the index of {path} ({a['reason']})"
    if kind == "quarantine_file":
        files = ", ".join(os.path.basename(f) for f in _chunk_files(path))
        return f"move {files} to {QUARANTINE}/ ({a['reason']})"
    ids = ", ".join(repr(i) for i in sorted(a["damaged_videos"]))
    return f"rewrite {path} without its damaged video(s) {ids} (originals kept in {QUARANTINE}/)"


def run(args: argparse.Namespace) -> int:
    refuse_remote(
        args.directory,
        "repair",
        "object stores cannot truncate or rename, and rewriting chunks under running readers "
        "is unsafe; run `gulpio check` on the URL, repair a local copy and upload it",
    )
    actions = plan(args.directory, decode=args.decode)
    if not actions:
        say(f"{args.directory}: nothing to repair")
        return 0
    for a in actions:
        say(("" if args.apply else "would ") + _describe(a))
    if not args.apply:
        say(f"dry run: {len(actions)} action(s); run again with --apply to do them")
        return 0
    apply(args.directory, actions)
    say(f"done: {len(actions)} action(s); `gulpio check {args.directory}` should now pass")
    return 0
