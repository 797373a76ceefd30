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
    FormatError,
    GulpError,
    GulpWarning,
    RemoteConfigError,
    RemoteError,
    RemoteNotFoundError,
    RemotePermissionError,
    StaleIndexError,
    UnsupportedJpegError,
)
from .ingest import ChunkWriter, GulpIngestor, IngestError, IngestReport, IngestWarning
from .video import VideoDecodeError


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
    "GulpWarning",
    "BrokenChunkWarning",
    "IngestError",
    "IngestReport",
    "IngestWarning",
    "VideoDecodeError",
]
