"""Opening dataset files from Python by the core's rules (``io::local`` in Rust, their one
owner): reads only of regular files within their kind's size limit, checked before anything
is read and without blocking on a FIFO; writes never through a symlink, only to a regular
file without other hard links."""

from __future__ import annotations

import os
from typing import IO, Any

from . import _native


def open_for_reading(path: str | bytes | os.PathLike[str], mode: str = "rb") -> IO[Any]:
    """``path`` opened for reading (``FormatError`` for a FIFO, device, directory or a file
    over its size limit)."""
    fd = _native.open_for_reading(os.fsdecode(path))
    return os.fdopen(fd, mode)


def open_for_writing(path: str | bytes | os.PathLike[str], mode: str) -> IO[Any]:
    """``path`` opened for writing with ``mode`` (``'wb'``, ``'w'``: emptied first; ``'ab'``:
    at its end), created when missing; ``UnsafeFileError`` for a symlink, a special file or a
    file with other hard links."""
    if mode not in ("wb", "w", "ab", "a"):
        raise ValueError(f"not a writing mode: {mode!r}")
    fd = _native.open_for_writing(os.fsdecode(path), truncate=mode.startswith("w"))
    return os.fdopen(fd, mode)
