"""Writing a small JSON or text file so that readers see the old or the new content, never a
part.

The one writer of ``label2idx.json``, the ingest plan and chunk records, repair's
``quarantine.json``, check's ``--bad-list`` and the files ``gulpio transcode`` copies beside
the chunks.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from _typeshed import StrPath


def _fsync_dir(folder: str) -> None:
    """Makes a rename in ``folder`` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(folder or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_json_atomically(
    path: StrPath, obj: object, *, exclusive: bool = False, **dump_kwargs: Any
) -> bool:
    """Writes ``obj`` as JSON to ``path`` through a fsynced temporary file in the same folder,
    then renames it into place and fsyncs the folder. ``dump_kwargs`` go to :func:`json.dump`.

    The temporary name is unique (not the pid: job-array containers on one shared file system
    often have equal pids), so concurrent writers of one file cannot write into each other's
    temporary; the last rename wins. With ``exclusive`` the file is only created if it does
    not exist yet (``link`` fails atomically if it does) and the return value says whether
    this call created it. Permissions follow the umask, as a plain ``open`` would.
    """
    return _write_atomically(path, lambda f: json.dump(obj, f, **dump_kwargs), exclusive)


def write_text_atomically(path: StrPath, text: str) -> None:
    """Writes ``text`` (UTF-8) to ``path`` as :func:`write_json_atomically` writes JSON: the
    old content or the new, never a part; a symlink at ``path`` is replaced, not followed."""
    _write_atomically(path, lambda f: f.write(text), False)


def copy_file_atomically(source: StrPath, path: StrPath) -> None:
    """Copies the bytes of ``source`` to ``path`` as :func:`write_json_atomically` writes: the
    old content or the new, never a part; a symlink at ``path`` is replaced, not followed."""
    path = os.fspath(path)
    tmp = _temporary_for(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as out, open(source, "rb") as inp:
            shutil.copyfileobj(inp, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
        _fsync_dir(os.path.dirname(path))
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


#: ``<name>.<32 hex digits>.tmp``: the temporaries of this module's writers.
_TEMPORARY = re.compile(r".+\.[0-9a-f]{32}\.tmp")


def _temporary_for(path: str) -> str:
    # Unique, not the pid: see write_json_atomically.
    return f"{path}.{uuid.uuid4().hex}.tmp"


def is_temporary(name: str) -> bool:
    """True if ``name`` (a file name) is a temporary of this module's writers: one that a
    write stopped by a crash left behind, never a file anyone asked for."""
    return _TEMPORARY.fullmatch(os.path.basename(name)) is not None


def _write_atomically(path: StrPath, write: Callable[[TextIO], object], exclusive: bool) -> bool:
    path = os.fspath(path)
    tmp = _temporary_for(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        if exclusive:
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
        else:
            os.replace(tmp, path)
        _fsync_dir(os.path.dirname(path))
        return True
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)
