"""Ingesting into a remote dataset (``s3://``, ``gs://``, ``az://``): the local ingest runs into
a staging folder on this machine (with its restart and failure semantics), then every chunk it
published is uploaded in chunk order, data and index first and the ``.gmeta`` last (the commit
point, docs/FORMAT.md §4a). A rerun after a crash resumes the local part from the staging folder
and skips chunks whose ``.gmeta`` is already uploaded with the same bytes."""

from __future__ import annotations

import copy
import hashlib
import os
import warnings

from .._names import chunk_number, chunk_paths
from ..errors import BrokenChunkWarning
from .report import IngestError, IngestReport

#: Files beside the chunks that are uploaded too (written by the adapters into the staging
#: folder when the command line runs them).
SIDECARS = ("label2idx.json",)


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


def ingest_remote(ingestor, url: str) -> IngestReport:
    """Runs ``ingestor`` into the staging folder, then uploads its chunks to ``url``."""
    from ..directory import GulpDirectory

    staging = staging_folder(url, getattr(ingestor, "staging_dir", None))
    os.makedirs(staging, exist_ok=True)
    # The remote dataset is opened first: bad credentials or a missing bucket fail before any
    # video is decoded.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BrokenChunkWarning)
        remote = GulpDirectory(url, storage_options=getattr(ingestor, "storage_options", None))
    local = copy.copy(ingestor)
    local.output_folder = staging
    report = local()
    report.output_folder = url
    upload_staged(remote, staging)
    return report


def upload_staged(remote, staging: str) -> int:
    """Uploads every chunk published in ``staging`` that ``remote`` lacks, in chunk order;
    returns how many were uploaded. A chunk number that exists remotely with other content is
    an error: the remote dataset was not made by this ingest."""
    handle = remote._handle()
    numbers = sorted(
        n for name in os.listdir(staging) if (n := chunk_number(name, "meta")) is not None
    )
    uploaded = 0
    for number in numbers:
        data, meta = chunk_paths(staging, number)
        if not os.path.exists(data):
            continue
        with open(meta, "rb") as f:
            staged_meta = f.read()
        there = handle.read_file(os.path.basename(meta))
        if there is not None:
            if there == staged_meta:
                continue  # uploaded by an earlier attempt
            raise IngestError(
                f"{remote.output_dir}: chunk {number} already exists with other content; "
                "ingest into an empty prefix, or rerun with the staging folder of the run "
                f"that made it (this run staged in {staging})"
            )
        handle.upload_chunk(data, meta, number)
        uploaded += 1
    for name in SIDECARS:
        path = os.path.join(staging, name)
        if os.path.exists(path):
            handle.upload_file(path, name)
    return uploaded


__all__ = ["ingest_remote", "staging_folder", "upload_staged"]
