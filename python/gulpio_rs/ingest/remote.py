"""Ingesting into a remote dataset (``s3://``, ``gs://``, ``az://``): the local ingest runs into
a staging folder on this machine (with its restart and failure semantics), and every chunk it
publishes is uploaded while the next ones are encoded (``publish.upload_chunk``: data and
index first, the ``.gmeta`` last, the commit point of docs/FORMAT.md §4a). A rerun after a
crash resumes the local part from the staging folder and skips chunks whose ``.gmeta`` is
already uploaded with the same bytes. After a complete upload the staging folder is removed:
a later run learns what the remote dataset holds from the remote itself."""

from __future__ import annotations

import hashlib
import os
import queue
import re
import threading
import warnings
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING

from .._names import chunk_number
from ..errors import BrokenChunkWarning, EmptyDirectoryWarning
from .plan import ids_by_chunk
from .publish import upload_chunk
from .report import ChunkResult, IngestError, IngestReport

if TYPE_CHECKING:
    from ..directory import GulpDirectory

#: Files beside the chunks that are uploaded too (written by the adapters into the staging
#: folder when the command line runs them).
SIDECARS = ("label2idx.json",)


_URL_TYPO = re.compile(r"(?i)^(s3|gs|gcs|az|abfss?|azure|https?)(?::/?|//)(?!/)(.+)$")


def url_like(path: str | bytes | os.PathLike[str]) -> str | None:
    """The dataset URL a local path was probably meant to be (``s3//bucket/x``, ``s3:/bucket/x``
    and ``s3:bucket/x`` all mean ``s3://bucket/x``), or None for an ordinary path."""
    m = _URL_TYPO.match(os.fsdecode(path))
    return f"{m.group(1).lower()}://{m.group(2)}" if m else None


def staging_folder(url: str, given: str | None = None) -> str:
    """Where an ingest into ``url`` stages its chunks: ``given``, ``$GULPIO_STAGING_DIR/<key>``
    or ``~/.cache/gulpio/staging/<key>``; the same URL always gets the same folder, so a rerun
    finds the previous run's work."""
    if given:
        return os.fspath(given)
    key = hashlib.sha256(url.rstrip("/").encode()).hexdigest()[:16]
    base = os.environ.get("GULPIO_STAGING_DIR") or os.path.join(
        os.path.expanduser("~"), ".cache", "gulpio", "staging"
    )
    return os.path.join(base, key)


def ingest_remote(
    ingestor: object,
    url: str,
    ingest_into: Callable[[str, IngestReport, dict[str, tuple[int, str]]], IngestReport],
) -> IngestReport:
    """Runs ``ingestor`` into the staging folder, then uploads its chunks to ``url``; removes
    the staging folder once everything is uploaded (it is kept after a failure or Ctrl-C, so
    a rerun resumes from it). ``ingest_into(folder, report, elsewhere)`` is the ingestor's
    local run (handed in by the runner, see ``GulpIngestor._ingest_into``)."""
    from ..directory import GulpDirectory

    given = getattr(ingestor, "staging_dir", None)
    staging = staging_folder(url, given)
    # Ours to remove afterwards: the default folder, or a given one this call creates.
    ours = given is None or not os.path.exists(staging)
    os.makedirs(staging, exist_ok=True)
    # The remote dataset is opened first: bad credentials or a missing bucket fail before any
    # video is decoded.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BrokenChunkWarning)
        warnings.simplefilter("ignore", EmptyDirectoryWarning)  # a new dataset: expected
        remote = GulpDirectory(url, storage_options=getattr(ingestor, "storage_options", None))
    uploader = _Uploader(remote, staging)

    class _StreamingReport(IngestReport):
        def add(self, r: ChunkResult) -> None:
            super().add(r)
            uploader.chunk_published(r.chunk)

    # What the remote dataset holds: its ids are skipped before decoding and its chunk
    # numbers are not reused, also once the staging folder of an earlier run is gone.
    elsewhere = ids_by_chunk(remote)
    try:
        report = ingest_into(staging, _StreamingReport(output_folder=staging), elsewhere)
    finally:
        uploader.close()
    uploader.raise_if_failed()
    report.output_folder = url
    # Chunks the uploader did not get to (none unless an earlier attempt left some) and the
    # sidecar files.
    upload_staged(remote, staging, skip=uploader.uploaded)
    remove_staging(staging, whole=ours)
    return report


def remove_staging(staging: str, whole: bool) -> None:
    """Removes the staging copy after a complete upload: the whole folder when it is ours,
    else only what an ingest writes into it (chunks, temporaries, the run state, sidecars)."""
    import shutil

    from .._names import temporary_of
    from .locks import STATE_DIR

    if whole:
        shutil.rmtree(staging, ignore_errors=True)
        return
    for name in os.listdir(staging):
        path = os.path.join(staging, name)
        if name == STATE_DIR and os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        elif chunk_number(name) is not None or temporary_of(name) or name in SIDECARS:
            if os.path.isfile(path) or os.path.islink(path):
                os.unlink(path)


def fetch_sidecars(url: str, staging: str, storage_options: dict[str, str] | None = None) -> None:
    """Copies the remote dataset's sidecar files (``label2idx.json``) into ``staging`` when
    it has none, so that an adapter extending the dataset keeps its label indices."""
    from ..directory import GulpDirectory

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BrokenChunkWarning)
        warnings.simplefilter("ignore", EmptyDirectoryWarning)
        remote = GulpDirectory(url, storage_options=storage_options)
    for name in SIDECARS:
        path = os.path.join(staging, name)
        if os.path.exists(path):
            continue
        there = remote.read_file(name)
        if there is not None:
            os.makedirs(staging, exist_ok=True)
            with open(path, "wb") as f:
                f.write(there)


class _Uploader:
    """Uploads each chunk as soon as the local ingest has published it, on a background thread,
    so the upload of chunk k overlaps the encoding of the chunks after it (a 10-hour ingest
    no longer ends with hours of uploading). One chunk at a time, in the order of
    docs/FORMAT.md §4a inside each. The first failure stops the ingest at its next chunk."""

    def __init__(self, remote: GulpDirectory, staging: str) -> None:
        self.remote = remote
        self.staging = staging
        self.uploaded: set[int] = set()
        self.error: BaseException | None = None
        self._queue: queue.Queue[int | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="gulpio-upload", daemon=True)
        self._thread.start()

    def chunk_published(self, number: int) -> None:
        self.raise_if_failed()
        self._queue.put(number)

    def raise_if_failed(self) -> None:
        if self.error is not None:
            raise IngestError(
                f"{self.remote.output_dir}: uploading a chunk failed: {self.error} (the staged "
                f"chunks stay in {self.staging}; rerun the same ingest to resume)"
            ) from self.error

    def _run(self) -> None:
        while (number := self._queue.get()) is not None:
            if self.error is not None:
                continue
            try:
                if upload_chunk(self.remote, self.staging, number):
                    self.uploaded.add(number)
            except BaseException as e:  # reported by the ingest's thread
                self.error = e

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()


def upload_staged(remote: GulpDirectory, staging: str, skip: AbstractSet[int] = frozenset()) -> int:
    """Uploads every chunk published in ``staging`` that ``remote`` lacks (except ``skip``),
    in chunk order, and the sidecar files; returns how many chunks were looked at."""
    numbers = sorted(
        n for name in os.listdir(staging) if (n := chunk_number(name, "meta")) is not None
    )
    uploaded = 0
    for number in numbers:
        if number not in skip and upload_chunk(remote, staging, number):
            uploaded += 1
    for name in SIDECARS:
        path = os.path.join(staging, name)
        if os.path.exists(path):
            remote.native.upload_file(path, name)
    return uploaded


__all__ = [
    "url_like",
    "fetch_sidecars",
    "ingest_remote",
    "remove_staging",
    "staging_folder",
    "upload_staged",
]
