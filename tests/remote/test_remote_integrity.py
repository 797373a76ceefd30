"""Checks survive faults in transit: an index or ``.gmeta`` response damaged on its way from a
real S3 server (through the fault-injecting proxy) is fetched again, so no chunk is read
without its frame CRCs because of a transient fault; the same damage on every fetch is the
stored file's (read as local damage is); damage that differs every time makes the directory
unreadable for now, never unchecked."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from gulpio_rs import GulpDirectory
from gulpio_rs.errors import (
    BrokenChunkWarning,
    CorruptDataError,
    EmptyDirectoryWarning,
    RemoteError,
)


def _write(root, make_frame) -> list[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyDirectoryWarning)  # about to be written
        gd = GulpDirectory(str(root))
    ids = []
    for k, chunk in enumerate(gd.new_chunks(3)):
        with chunk.open("wb"):
            for v in range(3):
                vid = f"c{k}-v{v}"
                frames = [make_frame(40, 56, seed=100 * k + 10 * v + s) for s in range(4)]
                chunk.append(vid, {"label": f"l{k}{v}"}, frames)
                ids.append(vid)
    return ids


@pytest.fixture
def served(tmp_path, make_frame, s3_server, fault_proxy):
    """``(local GulpDirectory, open(**kw) -> remote GulpDirectory through the proxy, ids,
    proxy)``."""
    local = tmp_path / "ds"
    local.mkdir()
    ids = _write(local, make_frame)
    bucket = s3_server.make_bucket()
    s3_server.upload_dir(local, bucket, "ds")
    proxy = fault_proxy(s3_server.endpoint)
    options = dict(
        s3_server.storage_options(), aws_endpoint=proxy.url, retry_timeout="20", max_retries="6"
    )

    def open_remote(**kw):
        return GulpDirectory(f"s3://{bucket}/ds", storage_options=options, **kw)

    return GulpDirectory(str(local)), open_remote, ids, proxy


def _everything(gd, ids):
    return {i: (gd.read(i), gd[i][1]) for i in ids}


def _assert_same(got, want):
    assert got.keys() == want.keys()
    for i in want:
        np.testing.assert_array_equal(got[i][0], want[i][0])
        assert got[i][1] == want[i][1]


def _checked_everywhere(gd):
    """Every chunk reads through its checksummed index."""
    return all(gd.native_chunk(pos).indexed for pos in range(len(gd.chunk_table())))


@pytest.mark.parametrize("what", [".gidx", ".gmeta"])
@pytest.mark.parametrize("when", ["open", "first read"])
@pytest.mark.parametrize("cache", [False, True], ids=["direct", "cache_dir"])
def test_an_index_or_meta_damaged_in_transit_is_fetched_again(served, what, when, cache, tmp_path):
    local, open_remote, ids, proxy = served
    want = _everything(local, ids)
    kw = {"cache_dir": str(tmp_path / "cache")} if cache else {}
    with warnings.catch_warnings():
        warnings.simplefilter("error", BrokenChunkWarning)
        if when == "open":
            proxy.set_faults(flip_byte=2, flip_random=True, only=what)
            remote = open_remote(**kw)
        else:
            remote = open_remote(**kw)
            proxy.set_faults(flip_byte=2, flip_random=True, only=what)
        got = _everything(remote, ids)
    _assert_same(got, want)
    assert _checked_everywhere(remote)
    assert proxy.faults_injected() >= 1


def test_frames_are_still_checked_after_a_damaged_index_fetch(served):
    """The probe's finding: after an index fetch arrived damaged, frames flipped in transit
    were returned as if correct. They must be caught by their CRCs."""
    local, open_remote, ids, proxy = served
    proxy.set_faults(flip_byte=3, flip_random=True, only=".gidx")
    remote = open_remote()
    remote.read(ids[0])
    proxy.set_faults(flip_byte=10_000, only=".gulp")
    for i in ids:
        with pytest.raises(CorruptDataError) as info:
            remote.read(i)
        assert info.value.video_id == i


def test_the_same_damage_on_every_fetch_is_the_files_and_is_reported(served):
    """A deterministic flip (the same bytes every time) cannot be told from damage at rest:
    the chunk reads through its .gmeta as a locally damaged index would, with a warning."""
    local, open_remote, ids, proxy = served
    want = _everything(local, ids)
    proxy.set_faults(flip_byte=10_000, only="data_1.gidx")
    with pytest.warns(BrokenChunkWarning, match="data_1.gidx"):
        remote = open_remote()
        got = _everything(remote, ids)
    _assert_same(got, want)
    indexed = [remote.native_chunk(pos).indexed for pos in range(3)]
    assert indexed == [True, False, True]


def test_damage_that_differs_every_time_is_an_error_not_an_unchecked_read(served):
    """Found at open (a flip in the front sections the probe checks) or at the chunk's first
    read (a flip in the frame table or meta blob): never read without the index."""
    _, open_remote, ids, proxy = served
    proxy.set_faults(flip_byte=10_000, flip_random=True, only="data_2.gidx")
    with pytest.raises(RemoteError, match="different bytes each time") as info:
        open_remote().read(ids[-1])
    assert "data_2.gidx" in str(info.value)
    assert not isinstance(info.value, CorruptDataError)


def test_damage_that_differs_every_time_at_first_read_is_retried_on_the_next_read(served):
    """Found when the chunk is first read: that read fails, the chunk is not marked broken
    for the session, and a read after the fault is gone succeeds with every check on."""
    local, open_remote, ids, proxy = served
    remote = open_remote()
    proxy.set_faults(flip_byte=10_000, flip_random=True, only="data_0.gidx")
    with pytest.raises(RemoteError, match="different bytes each time"):
        remote.read(ids[0])
    proxy.set_faults()
    np.testing.assert_array_equal(remote.read(ids[0]), local.read(ids[0]))
    assert remote.native_chunk(0).indexed
