"""gulpio2's ``fileio`` module: the same names, arguments and return shapes, implemented by
``chunk``, ``directory``, ``ingest``, ``serializers`` and ``_reading`` (see
docs/COMPATIBILITY.md for what differs on purpose).
"""

from __future__ import annotations

from collections import namedtuple

from . import utils
from ._reading import extract_input_for_getitem
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

# GulpChunk.append looks this up here at call time, so monkeypatching
# `fileio.img_to_jpeg_bytes` (as gulpio2 users do) still takes effect.
img_to_jpeg_bytes = utils.img_to_jpeg_bytes
jpeg_bytes_to_img = utils.jpeg_bytes_to_img

ImgInfo = namedtuple("ImgInfo", ["loc", "pad", "length"])

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
