"""Publishing one chunk of an ingest: the one write path of the process pool's workers,
``GulpIngestor(executor="ray")``'s tasks and ``gulpio_rs.ray.write_gulp``, into a folder or
to a dataset URL.

A chunk is written under temporary names and published by the writer's renames, so nothing is
visible before it is whole (docs/FORMAT.md §4). This module owns what goes with that:

- the run's record of each chunk (``.gulpio-ingest/chunk-N.json``), written just before the
  chunk is published (a record counts only once its chunk is published, and then carries the
  failures the chunk itself cannot) or, when every video was skipped and nothing is
  published, after the attempt, so that a rerun does not decode those videos again;
- reading it back: :func:`finished` for a run deciding what is left to do, and
  :func:`earlier_attempt` for a retried task whose first attempt published before it died;
- the upload of a chunk published in a local staging folder to a dataset URL
  (:func:`upload_chunk`): data and index first, the ``.gmeta`` last (the commit point,
  docs/FORMAT.md §4a).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING

from .. import _native
from .._atomic import write_json_atomically
from .._names import chunk_names, chunk_paths
from ..chunk import GulpChunk
from ..errors import GulpError
from .locks import STATE_DIR
from .report import ChunkResult, IngestError, failure_pairs
from .write import Adapter, Encoder, write_chunk

if TYPE_CHECKING:
    from ..directory import GulpDirectory


def record_path(folder: str, number: int) -> str:
    """Where the run keeps its record of chunk ``number``."""
    return os.path.join(folder, STATE_DIR, f"chunk-{number}.json")


def _write_record(folder: str, result: ChunkResult) -> None:
    write_json_atomically(
        record_path(folder, result.chunk), asdict(result), indent=1, sort_keys=True
    )


def publish_chunk(
    adapter: Adapter,
    folder: str,
    number: int,
    parts: slice | list[slice] = slice(None),
    *,
    encoder: Encoder,
    strict: bool = False,
    existing_ids: Callable[[str], str | None] | None = None,
    refused_ids: Callable[[str], str | None] | None = None,
    progress: Callable[[int, int], None] | None = None,
    check: Callable[[ChunkResult, set[str]], None] | None = None,
    already_stored: int = 0,
    skip_truncated: bool = False,
    record: bool = True,
    remote: GulpDirectory | None = None,
) -> ChunkResult:
    """Writes the videos of ``adapter.iter_data(parts)`` as chunk ``number`` of ``folder`` and
    publishes it; returns what it did (``published`` is False when every video was skipped:
    nothing is published then). The arguments up to ``skip_truncated`` are
    :func:`~gulpio_rs.ingest.write_chunk`'s; ``check(result, ids)`` runs after the last video,
    before anything is recorded or published, and may refuse the chunk by raising.

    ``record``: keep the run's record of the chunk in ``folder`` (see the module's docstring;
    off for a throwaway staging folder). ``remote``: the ``GulpDirectory`` of a dataset URL;
    ``folder`` is then a staging folder, and the chunk, once published there, is uploaded
    (:func:`upload_chunk`).
    """

    def before_publish(result: ChunkResult, ids: set[str]) -> None:
        if check is not None:
            check(result, ids)
        if record:
            _write_record(folder, result)

    result = write_chunk(
        adapter,
        GulpChunk(*chunk_paths(folder, number)),
        parts,
        encoder=encoder,
        number=number,
        strict=strict,
        existing_ids=existing_ids,
        refused_ids=refused_ids,
        progress=progress,
        before_publish=before_publish,
        publish_empty=False,
        already_stored=already_stored,
        skip_truncated=skip_truncated,
    )
    if not result.published:
        if record:
            _write_record(folder, result)
    elif remote is not None:
        upload_chunk(remote, folder, number)
    return result


def finished(folder: str, number: int) -> ChunkResult | None:
    """The result recorded for a finished chunk (``resumed``), or ``None`` if it must be
    (re)written."""
    data, meta = chunk_paths(folder, number)
    try:
        with open(record_path(folder, number)) as f:
            r = ChunkResult(**json.load(f))
    except (OSError, ValueError, TypeError):
        r = None
    if not (os.path.exists(data) and os.path.exists(meta)):
        if r is not None and not r.published and not os.path.exists(data):
            # Every video was skipped (recorded after the attempt, nothing published).
            r.failures = failure_pairs(r.failures)
            r.truncated = failure_pairs(r.truncated)
            r.resumed = True
            return r
        return None
    try:
        native, problem = _native.Chunk.open(data, meta)
    except (GulpError, OSError, ValueError):
        return None
    if problem or not native.indexed:
        return None  # published but not indexed: a crash inside the publication
    videos = len(native.ids())
    if r is not None and r.videos > videos:
        # The chunk lost videos since it was written (`gulpio repair --apply` rewrote it
        # without its damaged ones): write it again, so the dataset gets them back.
        return None
    if r is None or r.videos != videos:
        # No record (older writer) or one from another attempt: count from the chunk itself.
        r = counted(number, native)
    r.failures = failure_pairs(r.failures)
    r.truncated = failure_pairs(r.truncated)
    r.resumed = True
    return r


def counted(number: int, native: _native.Chunk) -> ChunkResult:
    """The result of published chunk ``number`` as its index tells it (``native``: its
    ``_native.Chunk``): videos, frames and JPEG bytes; the videos it skipped are not known."""
    infos = [native.frame_info(v) for v in range(len(native))]
    return ChunkResult(
        chunk=number,
        videos=len(infos),
        frames=sum(len(i) for i in infos),
        bytes=sum(length - pad for info in infos for _, pad, length in info),
    )


def earlier_attempt(folder: str, number: int, ids: list[str] | None = None) -> ChunkResult | None:
    """For a retried task (its worker died between publishing chunk ``number`` and replying):
    the result of the attempt that finished the chunk, counted as written by this run (not
    ``resumed``), or ``None`` if the chunk must be written. With ``ids`` (the videos this task
    writes, in order), a published chunk must hold exactly those (the ones skipped
    included), else :class:`IngestError`: it is another run's chunk."""
    done = finished(folder, number)
    if done is None:
        return None
    if ids is not None and done.published:
        native, _ = _native.Chunk.open(*chunk_paths(folder, number))
        have = set(native.ids()) | {i for i, _ in done.failures}
        if have != set(ids):
            raise IngestError(
                f"{chunk_names(number)[0]} is already published with other videos than this "
                f"run's {ids[0]!r}..{ids[-1]!r}; move it away or write into another directory"
            )
    done.resumed = False
    return done


def upload_chunk(remote: GulpDirectory, staging: str, number: int) -> bool:
    """Uploads chunk ``number``, published in ``staging``, to the dataset URL of ``remote``
    (a ``GulpDirectory``) unless it has it already with the same ``.gmeta``; True when the
    remote now has it. A chunk number that exists remotely with other content is an
    :class:`IngestError`: the remote dataset was not made by this ingest."""
    data, meta = chunk_paths(staging, number)
    if not (os.path.exists(data) and os.path.exists(meta)):
        return False  # nothing was published under this number (every video skipped)
    with open(meta, "rb") as f:
        staged_meta = f.read()
    there = remote.read_file(os.path.basename(meta))
    if there is not None:
        if there == staged_meta:
            return True  # uploaded by an earlier attempt
        raise IngestError(
            f"{remote.output_dir}: chunk {number} already exists with other content; "
            "ingest into an empty prefix, or rerun with the staging folder of the run "
            f"that made it (this run staged in {staging})"
        )
    remote.native.upload_chunk(data, meta, number)
    return True
