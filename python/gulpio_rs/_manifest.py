"""The dataset manifest (docs/FORMAT.md §7) as ``gulpio info``, ``check`` and ``index`` show it:
one place that turns ``_native.manifest_status`` into words and problems."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from typing import Any

from . import _native
from ._names import chunk_paths
from ._plural import plural
from ._storage import StorageOptions
from .errors import GulpError, ManifestWarning

#: The manifest's folders where writers create temporaries (``_gulpio/`` for ``LATEST``).
_FOLDERS = ("", "log", "snap", "body")


def beside_chunks(directory: str) -> list[tuple[str, str]]:
    """``(folder, name)`` of every entry of the dataset's folder and of the manifest's folders
    (not following a symlinked ``_gulpio``): where writers leave temporaries."""
    out = [(directory, name) for name in sorted(os.listdir(directory))]
    top = os.path.join(directory, _native.MANIFEST_DIR)
    for sub in _FOLDERS:
        folder = os.path.join(top, sub) if sub else top
        if os.path.isdir(folder) and not os.path.islink(folder):
            out += [(folder, name) for name in sorted(os.listdir(folder))]
    return out


MANIFEST_KINDS = ("unrecorded", "manifest", "pending")


def create_if_new(path: str, storage_options: StorageOptions | None = None) -> bool:
    """Gives a dataset being created (a folder or URL without a manifest or any chunk file)
    its empty manifest, so it opens through one from its first chunk on (docs/FORMAT.md §7.6);
    True when this call created it. Datasets with chunks and no manifest are left as they
    are (``gulpio index`` records them). A local folder that does not exist gets none: the
    writer's own error says more about that."""
    if not _native.is_remote_url(path) and not os.path.isdir(path):
        return False
    return _native.manifest_create(
        path, None if storage_options is None else storage_options.pairs()
    )


def compact_after_run(path: str, storage_options: StorageOptions | None = None) -> int | None:
    """What a writing run (an ingest, Ray's ``write_gulp``) does once its chunks are
    published: a snapshot of the manifest, so that readers open without reading the run's
    commits one by one (docs/FORMAT.md §7.6, "Compaction"). The version compacted, or
    ``None`` (no manifest, or nothing to compact). A failure is a :class:`ManifestWarning`,
    not the run's: the chunks are published and recorded, only opening reads more."""
    try:
        return _native.manifest_compact(
            path, None if storage_options is None else storage_options.pairs()
        )
    except GulpError as e:
        warnings.warn(
            f"{path}: the dataset manifest was not compacted after this run ({e}); it is "
            "complete, readers only read the run's commits one by one until `gulpio index` "
            "compacts it",
            ManifestWarning,
            stacklevel=2,
        )
        return None


def status(directory: str) -> _native._ManifestStatus | None:
    """The manifest compared with a listing of the local dataset, ``None`` without one."""
    return _native.manifest_status(directory)


def status_or_none(directory: str) -> _native._ManifestStatus | None:
    """:func:`status`, or ``None`` also when the manifest cannot be read (``gulpio check``
    reports that)."""
    try:
        return status(directory)
    except Exception:
        return None


def summary(st: _native._ManifestStatus | None) -> str:
    """One line: the manifest's version, base and what is outstanding."""
    if st is None:
        return "none (`gulpio index` creates one)"
    base = f"snapshot of version {st['base_version']}" if st["base"] == "snapshot" else "genesis"
    line = (
        f"version {st['version']} ({base} + {plural(st['tail'], 'commit')}), "
        f"{plural(st['chunks'], 'chunk')}, {st['videos']:,} videos"
    )
    outstanding = [
        plural(len(st[key]), what)  # type: ignore[literal-required]
        for key, what in (
            ("pending", "pending operation"),
            ("unrecorded", "unrecorded chunk"),
            ("mismatched", "record that does not match its chunk"),
        )
        if st[key]  # type: ignore[literal-required]
    ]
    if outstanding:
        line += "; " + ", ".join(outstanding)
    return line


def opened_line(opened: Mapping[str, Any]) -> str:
    """How a ``GulpDirectory`` was opened (its ``opened``), in words."""
    if opened["how"] == "manifest":
        extra = [
            plural(opened[key], what)
            for key, what in (
                ("tail", "commit after its base"),
                ("pending", "pending operation"),
                ("changed", "chunk changed by another tool"),
            )
            if opened[key]
        ]
        return f"through the manifest (version {opened['version']}" + (
            ", " + ", ".join(extra) + ")" if extra else ")"
        )
    return f"by listing its chunks (one index read per chunk): {opened['reason']}"


def problems(directory: str) -> list[dict[str, Any]]:
    """What ``gulpio check`` reports about the manifest: chunks it does not record, records
    that do not match their chunk, operations that did not take effect, or the manifest's own
    damage."""
    try:
        st = status(directory)
    except Exception as e:  # a damaged manifest file: a finding, not a crash of the check
        folder = os.path.join(directory, _native.MANIFEST_DIR)
        return [
            _problem(
                folder,
                "manifest",
                f"{e}; `gulpio repair --apply` rebuilds the manifest from the chunks",
            )
        ]
    if st is None:
        return []
    found = []
    for k in st["unrecorded"]:
        found.append(
            _problem(
                chunk_paths(directory, k)[1],
                "unrecorded",
                f"chunk {k} is not recorded in the dataset manifest (added by a tool that does "
                "not keep it); `gulpio index` records it",
            )
        )
    for k in st["mismatched"]:
        found.append(
            _problem(
                chunk_paths(directory, k)[1],
                "manifest",
                f"the manifest's record of chunk {k} does not match its files (changed or "
                "removed by a tool that does not keep the manifest); `gulpio index` updates it",
            )
        )
    for k, v in st["pending"]:
        found.append(
            _problem(
                chunk_paths(directory, k)[1],
                "pending",
                f"operation on chunk {k} committed in manifest version {v} has not taken "
                "effect (a writer at work, or one that died); `gulpio index --abort-pending` "
                "aborts it once no writer is at work",
            )
        )
    return found


def _problem(path: str, kind: str, message: str) -> dict[str, Any]:
    return {"path": path, "video_id": None, "frame": None, "kind": kind, "message": message}
