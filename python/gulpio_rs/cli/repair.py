"""``gulpio repair``: make a damaged dataset consistent again without losing anything intact.

A dry run by default: it lists what it would do. With ``--apply`` it
- removes temporary files left by interrupted writes (``.gulpio-tmp.*``; not those of a
  process that is still running),
- cuts unpublished tails (bytes an interrupted append left past a chunk's published end),
- rewrites indexes that are damaged or no longer match their ``.gmeta`` (a chunk's videos
  stored as segments are rebuilt by decoding each segment, once while planning, dry run
  included, to find any that cannot be, and again when applying),
- rewrites a damaged ``.gmeta`` from its chunk's checksummed index (only when the result is
  byte for byte the file the index was written with),
- moves data files without a meta file (and meta files without data) into
  ``gulpio-quarantine/``,
- rewrites each chunk with damaged frames (or segments), or with videos stored as segments
  whose lost index cannot be rebuilt, so that it keeps every intact video; the damaged
  videos are listed with their reasons in ``gulpio-quarantine/quarantine.json`` and the
  original chunk files are kept in ``gulpio-quarantine/`` (hard links made before anything
  is replaced).

It never writes, truncates or deletes through a symbolic link or outside the directory: an
action on a file that is a symlink (or not a regular file, or has other hard links, for a
truncation), or a quarantine folder that is not a real folder inside the directory, is
refused and listed as refused, with the reason; the exit code is then 1. The check is made
again, race-free, when the action runs (files are opened without following symlinks).

Run it while no writer is working on the directory (a chunk a writer holds is refused).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import stat
import warnings
from typing import Any

from .. import _manifest
from .._atomic import write_json_atomically
from .._files import open_for_reading
from .._names import QUARANTINE_DIR, chunk_names, chunk_number
from .._plural import plural
from ..errors import BrokenChunkWarning, GulpError, UnsafeFileError, WriteConflictError
from ._common import Subparsers, refuse_remote, say

QUARANTINE = QUARANTINE_DIR

EPILOG = """examples:
  gulpio repair /data/gulps            list what would be done (changes nothing)
  gulpio repair /data/gulps --apply    do it
  gulpio repair /data/gulps --decode   also treat frames that do not decode as damaged
"""


def add_parser(sub: Subparsers) -> None:
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


#: Why repair refuses to act on a file; said with every refusal.
NEVER_THROUGH_LINKS = (
    "repair never writes, truncates or deletes through a symlink or outside the directory"
)


def _unsafe(path: str, *, in_place: bool) -> str | None:
    """Why ``path`` must not be changed (None if it may): a symlink, not a regular file, or
    (for changes in place) a file with other hard links. ``lstat``: links are not followed."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return f"it is a symbolic link (to {os.readlink(path)!r})"
    if not stat.S_ISREG(st.st_mode):
        return "it is not a regular file"
    if in_place and st.st_nlink != 1:
        return f"it has {st.st_nlink} hard links (changing it would change the other names)"
    return None


def _refusal(path: str, why: str, action: str) -> dict[str, Any]:
    return {
        "action": "refuse",
        "path": path,
        "reason": f"not done ({action}): {why}; {NEVER_THROUGH_LINKS}",
    }


def _guarded(directory: str, a: dict[str, Any]) -> dict[str, Any]:
    """``a``, or a refusal when it would change a file through a link or outside."""
    kind, path = a["action"], a["path"]
    if kind == "remove_temp":
        # Removing a name never touches what a symlink points to; a folder is not ours.
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return a  # gone already: removing it is a no-op
        if stat.S_ISDIR(st.st_mode):
            return _refusal(path, "it is a folder, not a temporary file", "remove")
        return a
    if kind == "cut_tail":
        why = _unsafe(path, in_place=True)
        return _refusal(path, why, "cut the unpublished tail") if why else a
    if kind in ("quarantine_file", "rewrite_chunk"):
        why = _quarantine_problem(directory)
        what = "move to quarantine" if kind == "quarantine_file" else "rewrite"
        if why is None and kind == "rewrite_chunk":
            why = _unsafe(path, in_place=False)
        return _refusal(path, why, what) if why else a
    return a


def _quarantine_problem(directory: str) -> str | None:
    """Why the quarantine folder cannot be used (None if it can, or does not exist yet)."""
    path = os.path.join(directory, QUARANTINE)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return f"{path} is a symbolic link (to {os.readlink(path)!r}), which could lead outside"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a folder"
    return None


def plan(directory: str, decode: bool = False) -> list[dict[str, Any]]:
    """The actions repair would take, from a full check of the directory; actions it must
    not take (they would go through a symlink or outside) are ``refuse`` entries."""
    from .. import _native
    from .check import verify

    report = verify(directory, decode=decode)
    actions = [
        {"action": "remove_temp", "path": p["path"]}
        for p in report["problems"]
        if p["kind"] == "leftover"
    ]
    damaged: dict[str, dict[str, Any]] = {}
    for p in report["problems"]:
        if p["kind"] == "leftover":
            continue
        if p["kind"] == "unpublished_tail":
            actions.append({"action": "cut_tail", "path": p["path"], "reason": p["message"]})
        elif p["kind"] == "index":
            data = (
                p["path"][: -len(".gidx")] + ".gulp" if p["path"].endswith(".gidx") else p["path"]
            )
            # One per chunk, though each of its videos stored as segments reports the index.
            if not any(a["action"] == "reindex" and a["path"] == data for a in actions):
                actions.append({"action": "reindex", "path": data, "reason": p["message"]})
                # A video whose segments cannot be rebuilt would stop the whole index: the
                # chunk is rewritten without it instead, as for damaged frames.
                for id_, frame, message in _native.rebuild_failures(data, _meta_path(data)):
                    videos = damaged.setdefault(data, {})
                    videos.setdefault(id_, []).append(
                        f"frame {frame}: {message}" if frame is not None else message
                    )
        elif p["kind"] == "meta":
            data = _data_of(p["path"])
            actions.append({"action": "restore_meta", "path": data, "reason": p["message"]})
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
    planned = [
        _guarded(directory, a)
        for a in actions
        if not (a["action"] in ("cut_tail", "reindex") and a["path"] in rewritten)
    ]
    # Last, the manifest records what the actions (and other tools) changed.
    manifest = [p for p in report["problems"] if p["kind"] in _manifest.MANIFEST_KINDS]
    changes = any(a["action"] not in ("remove_temp", "refuse") for a in planned)
    folder = os.path.join(directory, _native.MANIFEST_DIR)
    unreadable = [p for p in manifest if p["path"] == folder]
    if unreadable:
        # The manifest's own files fail their checks: nothing can be built on them. It holds
        # nothing the chunks do not say, so it is built again from them.
        reason = unreadable[0]["message"]
        planned.append({"action": "rebuild_manifest", "path": folder, "reason": reason})
    elif manifest or (changes and _manifest.status_or_none(directory) is not None):
        reason = manifest[0]["message"] if manifest else "the actions above change chunks"
        planned.append({"action": "update_manifest", "path": folder, "reason": reason})
    return planned


def _data_of(meta: str) -> str:
    """The data file of the chunk whose meta file is ``meta``."""
    root, name = os.path.split(meta)
    k = chunk_number(name)
    return os.path.join(root, chunk_names(k)[0]) if k is not None else meta


def _meta_path(data: str) -> str:
    from ..directory import GulpDirectory

    root = os.path.dirname(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BrokenChunkWarning)
        for _n, d, meta, _i, _f, _c in GulpDirectory(root, manifest="off").chunk_table():
            if d == data:
                return meta
    raise GulpError(f"{data}: not a readable chunk")


def _chunk_files(path: str) -> list[str]:
    """The existing files of the chunk ``path`` belongs to (data, meta, index)."""
    root, name = os.path.split(path)
    k = chunk_number(name)
    if k is None:
        return [path] if os.path.lexists(path) else []
    names = chunk_names(k)
    return [os.path.join(root, n) for n in names if os.path.lexists(os.path.join(root, n))]


def _quarantine_dir(directory: str) -> str:
    path = os.path.join(directory, QUARANTINE)
    try:
        os.mkdir(path)
    except FileExistsError:
        pass
    why = _quarantine_problem(directory)
    if why is not None:
        raise UnsafeFileError(f"{why}; {NEVER_THROUGH_LINKS}")
    return path


def _record(directory: str, entries: list[dict[str, Any]]) -> None:
    path = os.path.join(_quarantine_dir(directory), "quarantine.json")
    existing = []
    if os.path.lexists(path):
        with open_for_reading(path, "r") as f:
            existing = json.load(f)
    write_json_atomically(path, existing + entries, indent=1)


def _rewrite(directory: str, data: str, damaged: dict[str, list[str]]) -> int:
    """Rewrite a chunk keeping its intact videos; returns how many were kept."""
    from .. import _native

    meta = _meta_path(data)
    chunk, _ = _native.Chunk.open(data, meta)
    keep: list[tuple[str, Any, dict[str, Any] | list[bytes]]] = []
    for video, id_ in enumerate(chunk.ids()):
        if id_ in damaged:
            continue
        # A video stored as segments is copied as stored, never re-encoded.
        stored: dict[str, Any] | list[bytes] | None = chunk.segment_streams(video)
        if stored is None:
            stored = [bytes(v) for v in chunk.frame_views(video, None, True)]
        keep.append((id_, json.loads(chunk.meta_data(video)), stored))
    # The originals stay available until (and after) the new version is published.
    qdir = _quarantine_dir(directory)
    for path in (data, meta, data[: -len(".gulp")] + ".gidx"):
        if os.path.lexists(path):
            target = os.path.join(qdir, os.path.basename(path))
            if os.path.lexists(target):
                os.remove(target)
            # The name itself (a symlink stays a link), never what a link points to.
            os.link(path, target, follow_symlinks=False)
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
        for id_, meta_data, stored in keep:
            elements = meta_data or [{}]
            if isinstance(stored, dict):
                segments = stored.pop("segments")
                writer.append_segments(id_, json.dumps(elements[0]), segments, **stored)
            else:
                writer.append(id_, json.dumps(elements[0]), stored)
            for extra in elements[1:]:
                writer.append(id_, json.dumps(extra), [])
    except BaseException:
        writer.abort()
        raise
    writer.close()
    return len(keep)


def apply(directory: str, actions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Takes the actions; returns those refused when they ran (as ``refuse`` entries): a
    file that became unsafe since the plan, or a chunk a writer holds."""
    refused = []
    for a in actions:
        if a["action"] == "refuse":
            continue
        try:
            _apply_one(directory, a)
        except (UnsafeFileError, WriteConflictError) as e:
            refused.append(_refusal(a["path"], str(e), a["action"]))
    return refused


def _apply_one(directory: str, a: dict[str, Any]) -> None:
    from .. import _native

    kind, path = a["action"], a["path"]
    if kind == "remove_temp":
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
    elif kind == "cut_tail":
        # Opened without following a symlink, checked, then cut through that descriptor.
        _native.cut_tail(path, _meta_path(path))
    elif kind == "reindex":
        _native.write_index(path, _meta_path(path))
    elif kind == "restore_meta":
        _native.restore_meta(path, _meta_path(path))
    elif kind == "quarantine_file":
        for f in _chunk_files(path):
            os.replace(f, os.path.join(_quarantine_dir(directory), os.path.basename(f)))
    elif kind == "rewrite_chunk":
        _rewrite(directory, path, a["damaged_videos"])
    elif kind == "update_manifest":
        # No writer is at work (repair's own condition): pending operations are dead.
        _native.manifest_index(directory, abort_pending=True)
    elif kind == "rebuild_manifest":
        if os.path.islink(path) or not os.path.isdir(path):
            raise UnsafeFileError(
                f"{path} is not a folder of the dataset (a symbolic link or a file); repair "
                "never deletes through one"
            )
        # rmtree removes links inside it, never what they point to.
        shutil.rmtree(path)
        _native.manifest_index(directory, abort_pending=True)


def _describe(a: dict[str, Any]) -> str:
    kind, path = a["action"], a["path"]
    if kind == "refuse":
        return f"refuse to change {path}: {a['reason']}"
    if kind == "remove_temp":
        return f"remove leftover temporary file {path}"
    if kind == "cut_tail":
        return f"cut the unpublished tail of {path} ({a['reason']})"
    if kind == "reindex":
        return f"rewrite the index of {path} ({a['reason']})"
    if kind == "restore_meta":
        return f"rewrite the .gmeta of {path} from its checksummed index"
    if kind == "quarantine_file":
        files = ", ".join(os.path.basename(f) for f in _chunk_files(path))
        return f"move {files} to {QUARANTINE}/ ({a['reason']})"
    if kind == "update_manifest":
        return f"record every chunk in the dataset manifest {path} ({a['reason']})"
    if kind == "rebuild_manifest":
        return (
            f"remove the damaged dataset manifest {path} and build it again from the chunks "
            f"({a['reason']})"
        )
    damaged = sorted(a["damaged_videos"])
    ids = ", ".join(repr(i) for i in damaged)
    return (
        f"rewrite {path} without its {plural(len(damaged), 'damaged video')} {ids} (originals "
        f"kept in {QUARANTINE}/)"
    )


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
    refused = [a for a in actions if a["action"] == "refuse"]
    todo = [a for a in actions if a["action"] != "refuse"]
    for a in todo:
        say(("" if args.apply else "would ") + _describe(a))
    for a in refused:
        say(_describe(a))
    if not args.apply:
        say(
            f"dry run: {plural(len(todo), 'action')}; run again with --apply to do them"
            + (f"; {len(refused)} refused (see above)" if refused else "")
        )
        return 1 if refused else 0
    late = apply(args.directory, todo)
    for a in late:
        say(_describe(a))
    refused += late
    done = len(todo) - len(late)
    if refused:
        say(
            f"done: {plural(done, 'action')}; {len(refused)} refused (see above): deal with those "
            f"files by hand, then run `gulpio repair {args.directory}` again"
        )
        return 1
    say(f"done: {plural(done, 'action')}; `gulpio check {args.directory}` should now pass")
    if any(a["action"] in ("rewrite_chunk", "quarantine_file") for a in todo):
        # docs/INGEST.md, "Restart": a chunk that lost videos is written again by a rerun.
        say(
            "videos left out come back when the `gulpio ingest` (or GulpIngestor) that wrote "
            "this dataset is run again with the same input and settings"
        )
    return 0
