"""gulpio2's ``fileio`` module: the same names, arguments and return shapes, implemented by
``chunk``, ``directory``, ``ingest``, ``serializers`` and ``_reading`` (see
docs/COMPATIBILITY.md for what differs on purpose).

A facade: it only re-exports, and installs its ``img_to_jpeg_bytes`` as the encoder of
``GulpChunk.append``. No module of the package imports it (the package root does, to install
the encoder); tests/package/test_import_graph.py checks both.
"""

from __future__ import annotations

from . import chunk as _chunk
from . import utils
from ._reading import ImgInfo, extract_input_for_getitem
from .chunk import GulpChunk
from .directory import GulpDirectory
from .ingest import ChunkWriter, GulpIngestor, calculate_chunk_slices
from .serializers import (
    AbstractSerializer,
    JSONSerializer,
    PickleSerializer,
    json_serializer,
    pickle_serializer,
)

img_to_jpeg_bytes = utils.img_to_jpeg_bytes
jpeg_bytes_to_img = utils.jpeg_bytes_to_img


def _installed_encoder():
    # Read at call time, so monkeypatching `fileio.img_to_jpeg_bytes` (as gulpio2 users do)
    # changes what GulpChunk.append encodes with.
    return img_to_jpeg_bytes


_chunk.encoder_lookup = _installed_encoder

__all__ = [
    "AbstractSerializer",
    "ChunkWriter",
    "GulpChunk",
    "GulpDirectory",
    "GulpIngestor",
    "ImgInfo",
    "JSONSerializer",
    "PickleSerializer",
    "calculate_chunk_slices",
    "extract_input_for_getitem",
    "img_to_jpeg_bytes",
    "jpeg_bytes_to_img",
    "json_serializer",
    "pickle_serializer",
]
