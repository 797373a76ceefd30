"""Clean-up of the manifest (docs/FORMAT.md §7.6, "Clean-up"): every compaction deletes the
snapshots a newer one replaced more than a week ago and the commits only they needed, locally
and on object stores; what a reader may still use stays, and a copy of an open whose base was
deleted raises ``StaleIndexError`` instead of reading another state."""

from __future__ import annotations

import pickle
import time
import warnings

import numpy as np
import pytest
from helpers import ListAdapter

from gulpio_rs import GulpDirectory, GulpIngestor, _native
from gulpio_rs.errors import ManifestWarning, StaleIndexError


def _items(ids):
    return ListAdapter(
        [{"id": i, "meta": {"id": i}, "frames": [np.full((8, 8, 3), 9, np.uint8)]} for i in ids]
    )


def _open(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ManifestWarning)
        return GulpDirectory(str(path), **kw)


def _append_and_compact(path, ids, options=None):
    (chunk,) = _open(path, storage_options=options).new_chunks(1)
    with chunk.open("wb"):
        for i in ids:
            chunk.append(i, {"id": i}, [np.full((8, 8, 3), 3, np.uint8)])
    pairs = None if options is None else list(options.items())
    assert _native.manifest_compact(str(path), pairs) is not None


def _history(path, options=None, staging=None):
    """An ingest (compacted at its end), then two more compactions: three snapshots."""
    GulpIngestor(
        _items(["a", "b", "c"]),
        str(path),
        2,
        1,
        progress=False,
        storage_options=options,
        staging_dir=staging,
    )()
    first = _open(path, storage_options=options)
    blob = pickle.dumps(first)
    _append_and_compact(path, ["d"], options)
    _append_and_compact(path, ["e", "f"], options)
    time.sleep(0.01)  # the last snapshot is strictly older than "now" for keep_seconds=0
    return blob


def test_replaced_snapshots_and_their_commits_are_deleted_after_the_retention(tmp_path):
    path = tmp_path / "ds"
    blob = _history(path)
    gulpio = path / "_gulpio"
    assert len(list((gulpio / "snap").iterdir())) == 3
    # The default retention (a week) keeps everything just written.
    assert _native.manifest_prune(str(path)) == (0, 0, 0)
    before = _open(path)
    keys = before.keys()
    snapshots, commits, bodies = _native.manifest_prune(str(path), 0)
    assert (snapshots, bodies) == (2, 0) and commits > 0
    assert len(list((gulpio / "snap").iterdir())) == 1
    assert (gulpio / "log" / f"{0:020}.glog").is_file()  # the genesis stays
    after = _open(path, manifest="require")
    assert after.keys() == keys == ["a", "b", "c", "d", "e", "f"]
    for i in keys:
        np.testing.assert_array_equal(np.stack(after[i][0]), np.stack(before[i][0]))
    # A copy of an open made on a deleted base says so.
    with pytest.raises(StaleIndexError, match="cannot be read any more"):
        pickle.loads(blob)
    # Writers go on; the next clean-up deletes the base their compaction replaced and the
    # commit before it, nothing else.
    _append_and_compact(path, ["g"])
    assert "g" in _open(path)
    time.sleep(0.01)
    assert _native.manifest_prune(str(path), 0) == (1, 1, 0)
    assert _native.manifest_prune(str(path), 0) == (0, 0, 0)
    assert _open(path, manifest="require").keys() == [*keys, "g"]


def test_keep_seconds_is_checked(tmp_path):
    with pytest.raises(ValueError, match="keep_seconds"):
        _native.manifest_prune(str(tmp_path), -1)


def test_clean_up_on_an_object_store(tmp_path, s3_server, fault_proxy):
    bucket = s3_server.make_bucket()
    proxy = fault_proxy(s3_server.endpoint)
    options = s3_server.storage_options(endpoint=proxy.url)
    url = f"s3://{bucket}/ds"
    blob = _history(url, options, staging=tmp_path / "staging")
    pairs = list(options.items())
    assert _native.manifest_prune(url, None, pairs) == (0, 0, 0)
    keys = _open(url, storage_options=options).keys()
    snapshots, commits, _ = _native.manifest_prune(url, 0, pairs)
    assert snapshots == 2 and commits > 0
    snaps = [n for n in s3_server.keys(bucket) if "/_gulpio/snap/" in n]
    assert len(snaps) == 1, snaps
    again = _open(url, storage_options=options, manifest="require")
    assert again.keys() == keys
    with pytest.raises(StaleIndexError):
        pickle.loads(blob)
