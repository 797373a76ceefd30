"""gulpio-rs: fast, checksummed, gulpio2-compatible storage for video and image datasets.

Drop-in for gulpio2: ``import gulpio_rs as gulpio2``. See README.md and docs/FORMAT.md.

What the modules are:

- public API: the names this package exports (``GulpDirectory``, ``GulpChunk``,
  ``GulpIngestor``, ``ChunkWriter``, ``write_index``, the errors), defined in ``directory``,
  ``chunk``, ``ingest`` (its ``__init__``'s names), ``errors`` and ``video``;
- gulpio2 facades, gulpio2's module names and signatures over the API above: ``fileio``,
  ``utils``, ``adapters``, ``sanity_utils``, ``serializers``;
- features, each with its own dependencies or entry point: ``torch`` (the ``[torch]``
  extra), ``ray`` (``[ray]``), ``cli`` (the ``gulpio`` command and gulpio2's ``gulp2_*``
  scripts), ``contact_sheet``;
- internals, shared by the modules above and free to change: ``_native`` (the Rust
  extension, typed in ``_native.pyi``) and every module whose name starts with ``_``
  (``_reading``, ``_frames``, ``_encode_options``, ...), as well as the submodules of
  ``ingest`` behind its ``__init__`` (``plan``, ``publish``, ``remote``, ...).

A class's underscored members are its own. Where one package of ours needs more of another
than the public API, it goes through a named seam: ``GulpDirectory.native`` and
``native_chunk`` (the Rust directory and chunk readers), ``GulpDirectory.storage_options``
and ``io``, ``ingest.publish`` (the one write path of every ingest) and
``_encode_options.EncodeOptions`` (the encode settings and their defaults).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, overload

if TYPE_CHECKING:
    import numpy as np

from . import chunk as _chunk
from . import errors

# JPEG_BACKEND: the decoder this build uses, "libjpeg-turbo" or "zune-jpeg" (chosen when the
# package was built; see build_backend/gulpio_rs_build.py).
from ._native import JPEG_BACKEND, __version__
from ._times import VideoTimes
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
    NoTimestampsWarning,
    RemoteConfigError,
    RemoteError,
    RemoteNotFoundError,
    RemotePermissionError,
    StaleIndexError,
    UnsafeFileError,
    UnsupportedJpegError,
    WriteConflictError,
)
from .video import VideoDecodeError

# Opening and reading a dataset needs neither the ingest (multiprocessing, filelock) nor the
# gulpio2 facades (PIL): they are imported on first use, which keeps `import gulpio_rs` at
# about half the memory (docs/DECISIONS.md, "Lazy imports").
_FROM_INGEST = ("ChunkWriter", "GulpIngestor", "IngestError", "IngestReport", "IngestWarning")
_SUBMODULES = ("fileio", "utils", "adapters", "serializers", "sanity_utils", "video", "ingest")


def __getattr__(name: str) -> object:
    import importlib

    if name in _FROM_INGEST:
        # Through the facade, which installs gulpio2's replaceable executor and chunk writer
        # (fileio's docstring) before any ingest runs.
        importlib.import_module(".fileio", __name__)
        value = getattr(importlib.import_module(".ingest", __name__), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_FROM_INGEST) | set(_SUBMODULES))


def _encoder_from_fileio() -> Callable[[np.ndarray], bytes]:
    # GulpChunk.append encodes arrays with fileio's img_to_jpeg_bytes (gulpio2 users patch
    # it there); the facade is imported when the first array is appended, and installs a
    # lookup of its own.
    from . import fileio

    return fileio.img_to_jpeg_bytes


_chunk.encoder_lookup = _encoder_from_fileio


@overload
def _decoder_note(because: str) -> str: ...
@overload
def _decoder_note(because: None = None) -> str | None: ...
def _decoder_note(because: str | None = None) -> str | None:
    """How to get the faster decoder, when this build decodes with zune-jpeg (``because``: why a
    source build fell back to it, which implies it)."""
    if JPEG_BACKEND != "zune-jpeg" and because is None:
        return None
    why = f" ({because})" if because else ""
    return (
        f"this gulpio-rs build decodes JPEG with zune-jpeg{why}, about 20% slower than "
        "libjpeg-turbo. For libjpeg-turbo, install a gulpio-rs release wheel (pip install "
        "gulpio_rs-*.whl), or install nasm (apt-get install nasm) and reinstall from the "
        "source checkout: pip install --force-reinstall --no-deps . (said once per "
        "installation; `gulpio demo` repeats it; GULPIO_JPEG_BACKEND=zune at install time "
        "keeps zune-jpeg and this quiet)"
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


def _first_notice(because: str, folder: str | None = None) -> bool:
    """True the first time this installation tells about its zune-jpeg fallback: a marker
    file beside the package's modules records it (per installation, not per import: the
    warning on every command was noise). False when the marker exists or cannot be written
    (a read-only installation: `gulpio demo` still says it)."""
    import os

    path = os.path.join(folder or os.path.dirname(__file__), "_zune_notice")
    stamp = f"{__version__}: {because}\n"
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == stamp:
                return False
    except FileNotFoundError:
        pass
    except (OSError, ValueError):
        return False
    try:
        # Another build's marker (a reinstall leaves files pip did not install) is replaced.
        with open(path, "w", encoding="utf-8") as f:
            f.write(stamp)
    except OSError:
        return False
    return True


if (_because := _zune_fallback_reason()) is not None and _first_notice(_because):
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
    "NoTimestampsWarning",
    "VideoTimes",
    "IngestError",
    "IngestReport",
    "IngestWarning",
    "VideoDecodeError",
]
