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
  (``_reading``, ``_encode_options``, ...), as well as the submodules of ``ingest`` behind
  its ``__init__`` (``plan``, ``publish``, ``encoder``, ``av1``, ...) and ``source_video``
  (whose public name is ``video``).

A class's underscored members are its own, and a module's underscored names are its
package's: modules of one subpackage (``adapters``, ``torch``) share them, others import only
public names (``tests/package/test_seams.py``). Where one package of ours needs more of another
than the public API, it goes through a named seam: ``GulpDirectory.native`` and
``native_chunk`` (the Rust directory and chunk readers), ``GulpDirectory.storage_options``
and ``io``, ``ingest.publish`` (the one write path of every ingest),
``_read_spec.read_spec`` (a read's options as the one object the core's read takes),
``_encode_options.EncodeOptions`` (the encode settings and their defaults, and
``unset_settings``, through which the gulpio2 layer's quality rule reaches the writers) and
``ingest.executors`` (where an ingest runs its chunks: ``ray`` registers its executor there).
The ingest imports neither a gulpio2 facade nor a feature (tests/package/test_import_graph.py).
The closed string options are ``Literal`` types in ``_choices``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

from . import _decoder_notes, errors
from . import chunk as _chunk

# JPEG_BACKEND and AV1_BACKEND: the decoders this build uses, "libjpeg-turbo" or "zune-jpeg"
# and "libdav1d" or "rav1d" (chosen when the package was built; see
# build_backend/gulpio_rs_build.py).
from ._native import AV1_BACKEND, JPEG_BACKEND, __version__
from ._times import VideoTimes
from .chunk import GulpChunk
from .directory import GulpDirectory

# The exceptions and warnings: errors.__all__ is the one list of them, exported here as it is.
from .errors import *  # noqa: F403

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


if (_because := _decoder_notes.zune_fallback_reason()) is not None and _decoder_notes.first_notice(
    _because
):
    import warnings

    warnings.warn(_decoder_notes.decoder_note(_because), errors.GulpWarning, stacklevel=1)


def write_index(data_file_path: str, meta_file_path: str) -> int:
    """Write the checksummed index (``data_k.gidx``) of a chunk written by gulpio/gulpio2.

    Neither the ``.gulp`` nor the ``.gmeta`` is modified. Returns the number of videos.
    """
    from . import _native

    return _native.write_index(str(data_file_path), str(meta_file_path))


__all__ = [
    "__version__",
    "JPEG_BACKEND",
    "AV1_BACKEND",
    "errors",
    "GulpDirectory",
    "GulpChunk",
    "write_index",
    "VideoTimes",
]
# The exceptions and warnings, from their one list.
__all__ += errors.__all__
# Loaded on first use (``__getattr__``): the gulpio2 facade, and the ingest's classes and errors.
__all__ += ["fileio", *_FROM_INGEST]  # noqa: F405  (defined by __getattr__)
