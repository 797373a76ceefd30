"""gulpio2's ``fileio`` module: the same names, arguments and return shapes, implemented by
``chunk``, ``directory``, ``ingest``, ``serializers`` and ``_reading`` (see
docs/COMPATIBILITY.md for what differs on purpose).

A facade: it only re-exports, installs its ``img_to_jpeg_bytes`` as the encoder of
``GulpChunk.append`` and its ``ProcessPoolExecutor`` and ``ChunkWriter`` as the ones
``GulpIngestor`` uses (replaced here, they are replaced there, as in gulpio2). No module of
the package imports it (the package root does, to install these);
tests/package/test_import_graph.py checks both.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from . import chunk as _chunk
from . import utils
from ._reading import ImgInfo, extract_input_for_getitem
from .chunk import GulpChunk
from .directory import GulpDirectory
from .ingest import ChunkWriter, GulpIngestor, calculate_chunk_slices
from .ingest import runner as _runner
from .serializers import (
    AbstractSerializer,
    JSONSerializer,
    PickleSerializer,
    json_serializer,
    pickle_serializer,
)

img_to_jpeg_bytes = utils.img_to_jpeg_bytes
jpeg_bytes_to_img = utils.jpeg_bytes_to_img


def _installed_encoder() -> Callable[[np.ndarray], bytes]:
    # Read at call time, so monkeypatching `fileio.img_to_jpeg_bytes` (as gulpio2 users do)
    # changes what GulpChunk.append encodes with.
    return img_to_jpeg_bytes


_chunk.encoder_lookup = _installed_encoder


def _installed_executor() -> _runner.ExecutorClass:
    # As gulpio2's GulpIngestor used `fileio.ProcessPoolExecutor` and `fileio.ChunkWriter`:
    # replacing them here (mock.patch, a ThreadPoolExecutor to debug) reaches the ingestor.
    return ProcessPoolExecutor


def _installed_writer() -> type[ChunkWriter]:
    return ChunkWriter


_runner.executor_lookup = _installed_executor
_runner.writer_lookup = _installed_writer

__all__ = [
    "AbstractSerializer",
    "ChunkWriter",
    "GulpChunk",
    "GulpDirectory",
    "GulpIngestor",
    "ImgInfo",
    "JSONSerializer",
    "PickleSerializer",
    "ProcessPoolExecutor",
    "calculate_chunk_slices",
    "extract_input_for_getitem",
    "img_to_jpeg_bytes",
    "jpeg_bytes_to_img",
    "json_serializer",
    "pickle_serializer",
]
