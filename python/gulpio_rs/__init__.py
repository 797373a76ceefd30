"""gulpio-rs: fast, checksummed, gulpio2-compatible storage for video and image datasets.

Drop-in for gulpio2: ``import gulpio_rs as gulpio2``. See README.md and docs/FORMAT.md.
"""

from __future__ import annotations

# fileio: gulpio2's module, and the installer of GulpChunk.append's encoder (its docstring).
from . import errors, fileio

# JPEG_BACKEND: the decoder this build uses, "libjpeg-turbo" or "zune-jpeg" (chosen when the
# package was built; see build_backend/gulpio_rs_build.py).
from ._native import JPEG_BACKEND, __version__
from .chunk import GulpChunk
from .directory import GulpDirectory
from .errors import (
    BrokenChunkWarning,
    CorruptDataError,
    DecodeError,
    DuplicateIdError,
    EmptyDirectoryWarning,
    FormatError,
    GulpError,
    GulpWarning,
    RemoteConfigError,
    RemoteError,
    RemoteNotFoundError,
    RemotePermissionError,
    StaleIndexError,
    UnsafeFileError,
    UnsupportedJpegError,
    WriteConflictError,
)
from .ingest import ChunkWriter, GulpIngestor, IngestError, IngestReport, IngestWarning
from .video import VideoDecodeError


def _decoder_note(because: str | None = None) -> str | None:
    """How to get the faster decoder, when this build decodes with zune-jpeg (``because``: why a
    source build fell back to it, which implies it)."""
    if JPEG_BACKEND != "zune-jpeg" and because is None:
        return None
    why = f" ({because})" if because else ""
    return (
        f"this gulpio-rs build decodes JPEG with zune-jpeg{why}, about 20% slower than "
        "libjpeg-turbo. For libjpeg-turbo install the release wheel (.ci/build-wheel makes it), "
        "or install nasm (e.g. apt-get install nasm) and reinstall from the source checkout: "
        "pip install --force-reinstall --no-deps . (GULPIO_JPEG_BACKEND=zune keeps zune-jpeg "
        "and this quiet)"
    )


def _zune_fallback_reason() -> str | None:
    """Why a source build fell back to zune-jpeg: pip hides a successful build's output, so the
    build backend (build_backend/gulpio_rs_build.py) records it in the wheel."""
    import json
    from importlib import resources

    try:
        info = json.loads((resources.files(__name__) / "_build_info.json").read_text())
    except (OSError, ValueError):
        return None
    return info.get("zune_jpeg_because") if isinstance(info, dict) else None


if (_because := _zune_fallback_reason()) is not None:
    import warnings

    warnings.warn(_decoder_note(_because), GulpWarning, stacklevel=1)


def write_index(data_file_path: str, meta_file_path: str) -> int:
    """Write the checksummed index (``data_k.gidx``) of a chunk written by gulpio/gulpio2.

    Neither the ``.gulp`` nor the ``.gmeta`` is modified. Returns the number of videos.
    """
    from . import _native

    return _native.write_index(str(data_file_path), str(meta_file_path))


__all__ = [
    "__version__",
    "JPEG_BACKEND",
    "errors",
    "fileio",
    "GulpDirectory",
    "GulpChunk",
    "ChunkWriter",
    "GulpIngestor",
    "write_index",
    "GulpError",
    "FormatError",
    "StaleIndexError",
    "CorruptDataError",
    "DecodeError",
    "UnsupportedJpegError",
    "DuplicateIdError",
    "RemoteError",
    "RemoteNotFoundError",
    "RemotePermissionError",
    "RemoteConfigError",
    "UnsafeFileError",
    "WriteConflictError",
    "GulpWarning",
    "BrokenChunkWarning",
    "EmptyDirectoryWarning",
    "IngestError",
    "IngestReport",
    "IngestWarning",
    "VideoDecodeError",
]
