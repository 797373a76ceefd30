"""Chunk and temporary-file names for the Python side, from the one definition in Rust
(``format::paths``, exposed as ``_native.chunk_file_names`` and friends): no regex or f-string
elsewhere spells a chunk file's name."""

from __future__ import annotations

import os

from . import _native

TEMP_PREFIX: str = _native.TEMP_PREFIX


def chunk_names(number: int) -> tuple[str, str, str]:
    """``(data, meta, index)`` file names of chunk ``number``."""
    return _native.chunk_file_names(number)


def chunk_paths(folder: str, number: int) -> tuple[str, str]:
    """``(data, meta)`` paths of chunk ``number`` in ``folder``."""
    data, meta, _ = _native.chunk_file_names(number)
    return os.path.join(folder, data), os.path.join(folder, meta)


def chunk_number(name: str, kind: str | None = None) -> int | None:
    """The number of a file named as this package names chunk files (``data_{k}.gulp``,
    ``meta_{k}.gmeta``, ``data_{k}.gidx``), optionally only of one ``kind`` (``"data"``,
    ``"meta"``, ``"index"``); ``None`` for any other name."""
    parsed = _native.parse_chunk_file_name(os.path.basename(name))
    if parsed is None or (kind is not None and parsed[0] != kind):
        return None
    return parsed[1]


def temporary_of(name: str) -> tuple[int | None, int] | None:
    """If ``name`` is a chunk writer's temporary file: ``(chunk number or None, writer pid)``;
    the number is ``None`` when the file it stands in for is not a chunk file. Else ``None``."""
    parsed = _native.parse_temp_name(os.path.basename(name))
    if parsed is None:
        return None
    target, pid = parsed
    return chunk_number(target), pid
