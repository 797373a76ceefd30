"""The files a dataset directory holds beside its chunks: the adapters' ``label2idx.json`` and
whatever else its owner keeps there (a README, split lists, ...). ``gulpio transcode`` copies
them, so that the new dataset reads as the old one (the PyTorch datasets' ``target="label"``
maps labels through ``label2idx.json``); the remote ingest uploads the adapters' one.

Not sidecars: the chunks' files (``_names.is_chunk_file``) and what this package keeps for
itself inside a dataset (``_names.is_ours``: writers' temporaries, the ingest's state folder,
repair's quarantine, the demo's marker).
"""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .. import _native
from .._atomic import copy_file_atomically
from .._names import is_chunk_file, is_ours
from ..errors import BrokenChunkWarning, EmptyDirectoryWarning, GulpWarning
from .report import IngestError

if TYPE_CHECKING:
    from ..directory import GulpDirectory


class SidecarConflictError(IngestError):
    """The destination already holds a file beside its chunks with the name of one of the
    source's but other content (another dataset's ``label2idx.json``): found before any
    work, nothing is overwritten. The message names both files."""


@dataclass(frozen=True)
class Sidecar:
    """One file beside the chunks: ``name``, its POSIX path inside the dataset folder, and
    where its bytes are: ``path`` (a local file) or ``data`` (read from a remote dataset)."""

    name: str
    path: str | None = None
    data: bytes | None = None

    def read(self) -> bytes:
        """The file's bytes."""
        if self.data is not None:
            return self.data
        assert self.path is not None  # one of the two is always set
        with open(self.path, "rb") as f:
            return f.read()


def find_sidecars(dataset: str, storage_options: dict[str, str] | None = None) -> list[Sidecar]:
    """The sidecar files of ``dataset`` (a folder, or a dataset URL), sorted by name. A
    folder's are found at any depth (symlinked files are read through; symlinked folders are
    not entered); a URL's are the objects directly under its prefix (an object store has no
    folders to walk: what lies deeper belongs to other prefixes)."""
    if _native.is_remote_url(dataset):
        remote = _open(dataset, storage_options)
        names = [n for n in remote.file_names() if not (is_ours(n) or is_chunk_file(n))]
        found = [(name, remote.read_file(name)) for name in names]
        return [Sidecar(name, data=data) for name, data in found if data is not None]
    out = []
    for dirpath, dirnames, filenames in os.walk(dataset):
        dirnames[:] = sorted(d for d in dirnames if not is_ours(d))
        rel = os.path.relpath(dirpath, dataset)
        for name in filenames:
            path = os.path.join(dirpath, name)
            if is_ours(name) or is_chunk_file(name) or not os.path.isfile(path):
                continue
            shown = name if rel == "." else f"{rel}/{name}".replace(os.sep, "/")
            out.append(Sidecar(shown, path=path))
    return sorted(out, key=lambda s: s.name)


def check_destination(
    sidecars: list[Sidecar], destination: str, storage_options: dict[str, str] | None = None
) -> None:
    """Raises :class:`SidecarConflictError` if ``destination`` holds a file of the same name
    as one of ``sidecars`` with other bytes (the same bytes: a rerun, nothing to do)."""
    remote = _native.is_remote_url(destination)
    there_dir = _open(destination, storage_options) if remote and sidecars else None
    for sidecar in sidecars:
        if there_dir is not None:
            if "/" in sidecar.name:
                continue  # not uploaded (see copy_sidecars)
            there = there_dir.read_file(sidecar.name)
        else:
            target = os.path.join(destination, *sidecar.name.split("/"))
            if not os.path.isfile(target):
                continue
            with open(target, "rb") as f:
                there = f.read()
        if there is not None and there != sidecar.read():
            shown = _native.redact_url(destination.rstrip("/")) + "/" + sidecar.name
            raise SidecarConflictError(
                f"{shown} already exists with other content than the source's {sidecar.name}; "
                "write into a new destination, or remove that file first"
            )


def copy_sidecars(
    sidecars: list[Sidecar], destination: str, storage_options: dict[str, str] | None = None
) -> list[str]:
    """Copies ``sidecars`` into ``destination`` (a folder: each file replaced atomically; a
    dataset URL: uploaded beside the chunks); returns the names copied. A URL takes plain
    names only: files in subfolders are left out with a :class:`GulpWarning` naming them."""
    if not sidecars:
        return []
    if not _native.is_remote_url(destination):
        for sidecar in sidecars:
            target = os.path.join(destination, *sidecar.name.split("/"))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if sidecar.path is not None:
                copy_file_atomically(sidecar.path, target)
            else:
                with _staged(sidecar) as staged:
                    copy_file_atomically(staged, target)
        return [s.name for s in sidecars]
    nested = [s.name for s in sidecars if "/" in s.name]
    if nested:
        warnings.warn(
            f"{_native.redact_url(destination)}: files in subfolders are not uploaded beside "
            f"the chunks (a dataset URL takes plain names): {', '.join(nested)}",
            GulpWarning,
            stacklevel=2,
        )
    remote = _open(destination, storage_options)
    copied = []
    for sidecar in sidecars:
        if "/" in sidecar.name:
            continue
        if sidecar.path is not None:
            remote.native.upload_file(sidecar.path, sidecar.name)
        else:
            with _staged(sidecar) as staged:
                remote.native.upload_file(staged, sidecar.name)
        copied.append(sidecar.name)
    return copied


@contextmanager
def _staged(sidecar: Sidecar) -> Iterator[str]:
    """A remote sidecar's bytes in a local temporary file (what uploads and copies read)."""
    fd, path = tempfile.mkstemp(prefix="gulpio-sidecar-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(sidecar.read())
        yield path
    finally:
        os.unlink(path)


def _open(url: str, storage_options: dict[str, str] | None) -> GulpDirectory:
    from ..directory import GulpDirectory

    with warnings.catch_warnings():
        # A new destination has no chunks yet; a damaged chunk is no concern of its sidecars.
        warnings.simplefilter("ignore", BrokenChunkWarning)
        warnings.simplefilter("ignore", EmptyDirectoryWarning)
        return GulpDirectory(url, storage_options=storage_options)


__all__ = [
    "Sidecar",
    "SidecarConflictError",
    "check_destination",
    "copy_sidecars",
    "find_sidecars",
]
