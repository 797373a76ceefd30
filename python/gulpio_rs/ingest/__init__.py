"""Ingestion: gulpio2's ``ChunkWriter`` and ``GulpIngestor``, made parallel, resumable and
shardable.

A run cuts the adapter into slices of ``videos_per_chunk`` items; slice ``i`` always becomes
chunk ``first_chunk + i``. ``first_chunk`` is fixed once per run in a small plan file under
``<output>/.gulpio-ingest/`` (created atomically, so every shard of a job array agrees on it),
which is what makes both restarts and sharding work:

- restart: a slice whose chunk is already published is not written again; an interrupted
  chunk was never published (the writer publishes atomically), so it is simply redone;
- shards: shard ``s`` of ``n`` writes the slices with ``i % n == s``, so chunk names of
  different shards cannot collide and together they cover the adapter exactly once.

See docs/INGEST.md for the details and the guarantees.
"""

from __future__ import annotations

from .._encode_options import EncodeOptions
from .locks import STATE_DIR
from .plan import calculate_chunk_slices
from .report import (
    ChunkResult,
    IngestError,
    IngestInterrupted,
    IngestReport,
    IngestWarning,
    NothingToIngestError,
    SettingsChangedError,
)
from .runner import GulpIngestor
from .sidecars import SidecarConflictError
from .transcode import GulpSource, transcode
from .write import ChunkWriter, write_chunk

__all__ = [
    "ChunkResult",
    "ChunkWriter",
    "EncodeOptions",
    "GulpIngestor",
    "GulpSource",
    "IngestError",
    "IngestInterrupted",
    "NothingToIngestError",
    "SettingsChangedError",
    "SidecarConflictError",
    "IngestReport",
    "IngestWarning",
    "STATE_DIR",
    "calculate_chunk_slices",
    "transcode",
    "write_chunk",
]

# Defined in submodules, public here (see gulpio_rs.adapters for why the module is set).
for _obj in (
    ChunkResult,
    ChunkWriter,
    GulpIngestor,
    GulpSource,
    IngestError,
    IngestInterrupted,
    IngestReport,
    IngestWarning,
    NothingToIngestError,
    SettingsChangedError,
    SidecarConflictError,
    transcode,
):
    _obj.__module__ = __name__
del _obj
