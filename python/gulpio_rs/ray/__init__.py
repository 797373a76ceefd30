"""Gulp directories on a Ray cluster (``pip install ".[ray]"`` from a checkout).

- :func:`write_gulp`: pack a ``ray.data.Dataset`` of videos into a gulp directory;
- :func:`read_gulp`: a gulp directory as a ``ray.data.Dataset``, one row per video;
- ``GulpIngestor(..., executor="ray")`` / ``gulpio ingest ... --ray``: an adapter's chunks as
  Ray tasks (``gulpio_rs.ray._ingest``), the ``"ray"`` executor this package registers with
  the ingest when it is imported (``ingest.executors``: a ``GulpIngestor`` given
  ``executor="ray"`` imports it).

Ray is imported when one of these runs, never by ``import gulpio_rs`` or by importing this
package. See docs/INGEST.md ("Ray") for how chunk numbers are assigned and why retries are
safe.
"""

from __future__ import annotations

from ..ingest.executors import register_executor
from ._ingest import RayExecutor
from ._read import read_gulp
from ._write import write_gulp

register_executor("ray", RayExecutor)

__all__ = ["read_gulp", "write_gulp"]
