"""Chunk and temporary-file names for the Python side, from the one definition in Rust
(``format::paths``, exposed as ``_native.chunk_file_names`` and friends): no regex or f-string
elsewhere spells a chunk file's name."""

from __future__ import annotations

import os

from . import _native
from ._atomic import is_temporary

TEMP_PREFIX: str = _native.TEMP_PREFIX
#: What every name this package keeps for itself inside a dataset starts with: the chunk
#: writers' temporaries (:data:`TEMP_PREFIX`), the ingest's state folder (``.gulpio-ingest``)
#: and the demo's marker (``.gulpio-demo``).
OWN_PREFIX = ".gulpio"
#: The folder ``gulpio repair`` moves damaged chunk files into, inside the dataset.
QUARANTINE_DIR = "gulpio-quarantine"
#: The dataset manifest's folder (docs/FORMAT.md §7): part of the dataset, but not a sidecar
#: a copy of the chunks should carry (its records would not match the copy's files).
MANIFEST_DIR: str = _native.MANIFEST_DIR


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


def is_chunk_file(name: str) -> bool:
    """True for a chunk's file: named as this package names them (``data_{k}.gulp``,
    ``meta_{k}.gmeta``, ``data_{k}.gidx``) or as gulpio's readers glob them (``data*.gulp``,
    ``meta*.gmeta`` with a number)."""
    base = os.path.basename(name)
    return chunk_number(base) is not None or _native.gulpio_chunk_number(base) is not None


def is_ours(name: str) -> bool:
    """True for a file or folder name this package keeps for itself inside a dataset (see
    :data:`OWN_PREFIX`, :data:`QUARANTINE_DIR`, :data:`MANIFEST_DIR`) and the temporaries of
    ``_atomic``'s writers: state of a writer or a tool, or the manifest, never a sidecar."""
    base = os.path.basename(name)
    return (
        base.startswith(OWN_PREFIX) or base in (QUARANTINE_DIR, MANIFEST_DIR) or is_temporary(base)
    )
