"""Copies of an open see the state the original saw (docs/FORMAT.md §7.5, "Copies of an
open"): a pickled ``GulpDirectory`` (a DataLoader worker under spawn), ``reopen()`` (under
fork) and the datasets' workers hold the same videos at the same positions as the directory
they copy, whatever was committed since; a state that cannot be read any more is a
``StaleIndexError``, never other videos. Remotely a copy opens without reading ``LATEST`` or
probing the log."""

from __future__ import annotations

import os
import pickle
import shutil
import warnings

import numpy as np
import pytest
from helpers import ListAdapter

from gulpio_rs import GulpDirectory, GulpIngestor
from gulpio_rs.errors import ManifestWarning, StaleIndexError


def _items(ids, seed=0):
    rng = np.random.default_rng(seed)
    return ListAdapter(
        [
            {
                "id": i,
                "meta": {"id": i},
                "frames": [rng.integers(0, 255, (16, 24, 3), np.uint8) for _ in range(2)],
            }
            for i in ids
        ]
    )


def _open(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ManifestWarning)
        return GulpDirectory(str(path), **kw)


def _append(path, ids, **kw):
    """One chunk more, by another writer (committed to the manifest, then published)."""
    writer = _open(path, **kw)
    (chunk,) = writer.new_chunks(1)
    with chunk.open("wb"):
        for i in ids:
            chunk.append(i, {"id": i}, [np.full((16, 24, 3), 7, np.uint8)])


@pytest.fixture
def dataset(tmp_path):
    out = tmp_path / "ds"
    GulpIngestor(_items([f"v{i}" for i in range(6)]), out, 2, 1, progress=False)()
    return out


def _same_videos(copy, original):
    assert len(copy) == len(original)
    assert copy.keys() == original.keys()
    assert [copy.id_at(p) for p in range(len(copy))] == original.keys()
    for i in original.keys():
        np.testing.assert_array_equal(np.stack(copy[i][0]), np.stack(original[i][0]))


@pytest.mark.parametrize("how", ["pickle", "reopen"])
def test_a_copy_holds_the_videos_its_original_opened(dataset, how):
    gd = _open(dataset, manifest="require")
    _append(dataset, ["late0", "late1"])  # a tail commit after the original opened
    copy = pickle.loads(pickle.dumps(gd)) if how == "pickle" else gd.reopen()
    assert type(copy) is GulpDirectory
    assert copy.opened["how"] == "manifest"
    assert copy.opened["version"] == gd.opened["version"]
    _same_videos(copy, gd)
    assert "late0" not in copy and "late0" not in copy.keys()
    with pytest.raises(KeyError):
        copy["late0"]
    # A copy of the copy is the same state; a new open sees the commit.
    _same_videos(pickle.loads(pickle.dumps(copy)), gd)
    fresh = _open(dataset)
    assert len(fresh) == len(gd) + 2 and "late0" in fresh


def test_a_copy_made_after_a_tail_keeps_the_tail_and_its_positions(dataset):
    _append(dataset, ["t0"])
    gd = _open(dataset, manifest="require")
    assert gd.opened["tail"] == 1
    _append(dataset, ["t1", "t2"])
    copy = pickle.loads(pickle.dumps(gd))
    _same_videos(copy, gd)
    assert copy.id_at(len(copy) - 1) == "t0"


def test_a_copy_whose_chunk_was_removed_since_raises_stale_index(dataset):
    _append(dataset, ["t0"])
    gd = _open(dataset, manifest="require")
    blob = pickle.dumps(gd)
    number = max(r[0] for r in gd.chunk_table())
    # Another tool deletes the tail's chunk: the pinned state no longer exists.
    for name in (f"data_{number}.gulp", f"meta_{number}.gmeta", f"data_{number}.gidx"):
        os.remove(dataset / name)
    with pytest.raises(StaleIndexError, match="open the dataset again") as err:
        pickle.loads(blob)
    assert str(dataset) in str(err.value)


def test_a_copy_whose_base_was_deleted_raises_stale_index(dataset):
    gd = _open(dataset, manifest="require")
    blob = pickle.dumps(gd)
    shutil.rmtree(dataset / "_gulpio" / "snap")
    with pytest.raises(StaleIndexError, match="cannot be read any more"):
        pickle.loads(blob)


def test_a_directory_opened_by_listing_is_copied_by_listing(dataset):
    gd = _open(dataset, manifest="off")
    assert gd.manifest_state is None
    _append(dataset, ["late"])
    copy = pickle.loads(pickle.dumps(gd))
    assert copy.opened["how"] == "listing" and "late" in copy


def test_a_damaged_pin_is_a_value_error_not_another_state(dataset):
    gd = _open(dataset, manifest="require")
    state = gd.__getstate__()
    pin = bytearray(state["manifest_state"])
    for at in range(0, len(pin), max(1, len(pin) // 16)):
        damaged = bytearray(pin)
        damaged[at] ^= 0x40
        copy = GulpDirectory.__new__(GulpDirectory)
        with pytest.raises(ValueError, match="pin"):
            copy.__setstate__({**state, "manifest_state": bytes(damaged)})


def _remote_dataset(tmp_path, s3_server, fault_proxy, videos):
    """An ingested dataset on the S3 server behind the counting proxy: (url, options, proxy)."""
    bucket = s3_server.make_bucket()
    proxy = fault_proxy(s3_server.endpoint)
    options = s3_server.storage_options(endpoint=proxy.url)
    url = f"s3://{bucket}/ds"
    GulpIngestor(
        _items([f"v{i}" for i in range(videos)]),
        url,
        2,
        1,
        progress=False,
        storage_options=options,
        staging_dir=tmp_path / "staging",
    )()
    return url, options, proxy


def test_a_remote_copy_opens_in_one_request(tmp_path, s3_server, fault_proxy):
    url, options, proxy = _remote_dataset(tmp_path, s3_server, fault_proxy, 5)
    gd = _open(url, storage_options=options, manifest="require")
    assert gd.opened["tail"] == 0
    blob = pickle.dumps(gd)
    _append(url, ["late"], storage_options=options)
    proxy.reset_counters()
    copy = pickle.loads(blob)
    # The base's front (the whole base, at this size): no LATEST, no probe of the log, no
    # canary.
    assert proxy.requests == 1, proxy.log()
    _same_videos(copy, gd)
    assert "late" not in copy


def test_new_remote_chunks_take_their_first_number_from_the_manifest(
    tmp_path, s3_server, fault_proxy
):
    url, options, proxy = _remote_dataset(tmp_path, s3_server, fault_proxy, 4)
    gd = _open(url, storage_options=options, manifest="require")
    proxy.reset_counters()
    (chunk,) = gd.new_chunks(1)
    assert chunk.number == 2
    assert not [r for r in proxy.log() if "list-type" in r[1]], proxy.log()


def test_ranks_agree_on_one_state_through_manifest_state(dataset):
    rank0 = _open(dataset)
    state = rank0.manifest_state
    assert isinstance(state, bytes) and len(state) < 1024
    _append(dataset, ["late"])
    rank1 = GulpDirectory(str(dataset), manifest_state=state)
    _same_videos(rank1, rank0)
    assert rank1.manifest_state == state
    # The state of another dataset does not open this one as that one.
    other = dataset.parent / "other"
    GulpIngestor(_items(["o0"]), other, 2, 1, progress=False)()
    with pytest.raises((StaleIndexError, ValueError)):
        GulpDirectory(str(other), manifest_state=state)
