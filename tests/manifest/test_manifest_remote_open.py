"""A dataset on an object store opens through its manifest (docs/FORMAT.md §7.5): a constant
number of requests whatever its number of chunks, lookups in at most two, and every fault of
the manifest's responses (in transit or at rest) refetched, or a fallback by listing with a
warning, never other frames."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from helpers import upload_tree

from gulpio_rs import GulpChunk, GulpDirectory, _native
from gulpio_rs.cli import main
from gulpio_rs.errors import ManifestWarning, StaleIndexError


def _write(folder: Path, k: int, ids: list[str]) -> None:
    chunk = GulpChunk(folder / f"data_{k}.gulp", folder / f"meta_{k}.gmeta")
    with chunk.open("wb"):
        for i, id_ in enumerate(ids):
            chunk.append(id_, {"k": k}, [np.full((16, 24, 3), (10 * k + i) % 256, np.uint8)] * 2)


@pytest.fixture
def remote_dataset(tmp_path, s3_server, fault_proxy):
    """12 chunks with a manifest (and one commit after it), uploaded; a proxy in front."""
    local = tmp_path / "local"
    local.mkdir()
    for k in range(11):
        _write(local, k, [f"c{k}v{v}" for v in range(3)])
    assert main(["index", str(local)]) == 0
    _write(local, 11, ["late"])
    bucket = s3_server.make_bucket()
    upload_tree(s3_server, local, bucket, "ds")
    proxy = fault_proxy(s3_server.endpoint)
    return f"s3://{bucket}/ds", s3_server.storage_options(endpoint=proxy.url), proxy, local


def _frames(gd, ids):
    return {i: np.stack(gd[i][0]) for i in ids}


def _open(url, options, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ManifestWarning)
        return GulpDirectory(url, storage_options=options, **kw)


def test_a_remote_dataset_opens_through_its_manifest_in_a_few_requests(remote_dataset):
    url, options, proxy, local = remote_dataset
    proxy.reset_counters()
    gd = _open(url, options)
    opened_with = proxy.requests
    assert gd.opened["how"] == "manifest", gd.opened
    # LATEST, the base's front, the probe for the commit after it (found: one more probe and
    # its read), a HEAD of the chunk it names, the canary.
    assert opened_with <= 7, "\n".join(map(str, proxy.log()))
    assert len(gd) == 34
    proxy.reset_counters()
    assert "c7v1" in gd
    assert proxy.requests <= 2, proxy.log()
    listed = _open(url, options, manifest="off")
    assert listed.opened["how"] == "listing"
    # The listing pays per chunk: one listing and an index probe per chunk.
    ids = listed.keys()
    assert sorted(gd.keys()) == sorted(ids)
    want = _frames(GulpDirectory(str(local), manifest="off"), ids)
    got = _frames(gd, ids)
    for i in ids:
        np.testing.assert_array_equal(got[i], want[i])
    counts, shapes = gd.video_shapes()
    assert (counts.tolist(), shapes.tolist()) == tuple(
        a.tolist() for a in listed.video_shapes(gd.keys())
    )


def test_a_compacted_remote_manifest_opens_in_four_requests(tmp_path, s3_server, fault_proxy):
    local = tmp_path / "local"
    local.mkdir()
    for k in range(30):
        _write(local, k, [f"c{k}v0"])
    assert main(["index", str(local)]) == 0
    bucket = s3_server.make_bucket()
    upload_tree(s3_server, local, bucket, "ds")
    proxy = fault_proxy(s3_server.endpoint)
    options = s3_server.storage_options(endpoint=proxy.url)
    proxy.reset_counters()
    gd = _open(f"s3://{bucket}/ds", options)
    assert gd.opened["how"] == "manifest"
    # LATEST, the front, the probe for a newer commit, the canary: whatever the chunk count.
    assert proxy.requests == 4, proxy.log()
    proxy.reset_counters()
    # From the manifest's rows (the whole small base came with the front): no chunk index.
    assert gd.num_frames("c17v0") == 2
    assert proxy.requests <= 2, proxy.log()
    assert "missing" not in gd


@pytest.mark.parametrize("only", ["LATEST", ".glog", ".gidx", ".gmeta", ".gulp"])
def test_damage_in_transit_is_fetched_again(remote_dataset, only):
    url, options, proxy, local = remote_dataset
    ids = GulpDirectory(str(local), manifest="off").keys()
    want = _frames(GulpDirectory(str(local), manifest="off"), ids)
    # Every copy differs (as a damaging connection would): a second fetch is good.
    proxy.set_faults(flip_byte=1, flip_random=True, only=only)
    gd = GulpDirectory(url, storage_options=options)
    got = _frames(gd, ids)
    for i in ids:
        np.testing.assert_array_equal(got[i], want[i])
    if only in ("LATEST", ".glog"):
        # LATEST is a hint (a damaged one leaves the genesis as the base); the base is
        # fetched again.
        assert gd.opened["how"] == "manifest", gd.opened


def test_damage_at_rest_falls_back_to_listing_with_a_warning(remote_dataset):
    url, options, proxy, local = remote_dataset
    ids = GulpDirectory(str(local), manifest="off").keys()
    want = _frames(GulpDirectory(str(local), manifest="off"), ids)
    # The same byte flipped in every copy of the base's front: the file's own damage.
    proxy.set_faults(flip_byte=100, only="00000000000000000000.glog")
    with pytest.warns(ManifestWarning, match="gulpio index"):
        gd = GulpDirectory(url, storage_options=options)
    assert gd.opened["how"] == "listing" and gd.opened["warned"]
    proxy.set_faults()
    got = _frames(gd, ids)
    for i in ids:
        np.testing.assert_array_equal(got[i], want[i])


def test_a_chunk_added_remotely_behind_the_manifest_is_found_by_the_canary(
    remote_dataset, s3_server, tmp_path
):
    url, options, proxy, _local = remote_dataset
    other = tmp_path / "other"
    other.mkdir()
    _write(other, 12, ["foreign"])
    bucket = url.split("/")[2]
    client = s3_server.client()
    for name in ("data_12.gidx", "data_12.gulp", "meta_12.gmeta"):
        client.upload_file(str(other / name), bucket, f"ds/{name}")
    with pytest.warns(ManifestWarning, match="meta_12.gmeta"):
        gd = GulpDirectory(url, storage_options=options)
    assert "foreign" in gd


def test_a_gulpio2_dataset_is_indexed_remotely_and_read_through_its_gmeta_files(
    tmp_path, s3_server, fault_proxy
):
    local = tmp_path / "local"
    local.mkdir()
    for k in range(8):
        _write(local, k, [f"c{k}v{v}" for v in range(3)])
    for index in local.glob("*.gidx"):
        index.unlink()  # as gulpio2 writes chunks
    bucket = s3_server.make_bucket()
    upload_tree(s3_server, local, bucket, "ds")
    proxy = fault_proxy(s3_server.endpoint)
    options = s3_server.storage_options(endpoint=proxy.url)
    url = f"s3://{bucket}/ds"
    report = _native.manifest_index(url, False, list(options.items()))
    assert (report["chunks"], report["videos"]) == (8, 24)
    assert not any(name.endswith(".gidx") for name in s3_server.keys(bucket, "ds/"))
    proxy.reset_counters()
    gd = _open(url, options)
    assert gd.opened["how"] == "manifest", gd.opened
    assert proxy.requests <= 5, proxy.log()
    listed = GulpDirectory(str(local), manifest="off")
    assert gd.keys() == listed.keys()
    assert [gd.num_frames(i) for i in gd.keys()] == [2] * 24
    for i, frames in _frames(listed, listed.keys()).items():
        np.testing.assert_array_equal(np.stack(gd[i][0]), frames)
    # A `.gmeta` replaced after indexing (another chunk's, other ids) is not read as the
    # recorded chunk: rule M3 compares the recorded `.gmeta` CRC, then the ids.
    client = s3_server.client()
    client.upload_file(str(local / "meta_6.gmeta"), bucket, "ds/meta_5.gmeta")
    client.upload_file(str(local / "data_6.gulp"), bucket, "ds/data_5.gulp")
    gd = _open(url, options)
    with pytest.raises(StaleIndexError, match="meta_5.gmeta"):
        gd["c5v0"]
    np.testing.assert_array_equal(np.stack(gd["c4v2"][0]), np.stack(listed["c4v2"][0]))
