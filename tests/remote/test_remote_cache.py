"""The local block cache of remote datasets (``cache_dir=``), against a real S3 server process
through a counting proxy: a second read makes no data requests, the folder stays within its
bound, a damaged cache file is never served, a replaced object is not read from an older copy,
and processes share one cache folder."""

from __future__ import annotations

import multiprocessing
import os
import warnings

import numpy as np
import pytest
from test_remote_read import _write_dataset

from gulpio_rs import GulpDirectory
from gulpio_rs.errors import RemoteConfigError


@pytest.fixture
def remote(tmp_path, make_frame, s3_server, fault_proxy):
    """``(local GulpDirectory, url, options through a counting proxy, ids, proxy)``."""
    local = tmp_path / "ds"
    local.mkdir()
    ids = _write_dataset(local, make_frame, legacy_chunk=2)
    bucket = s3_server.make_bucket()
    s3_server.upload_dir(local, bucket, "cached")
    proxy = fault_proxy(s3_server.endpoint)
    options = dict(s3_server.storage_options(), aws_endpoint=proxy.url)
    return GulpDirectory(str(local)), f"s3://{bucket}/cached", options, ids, proxy


def _gulp_gets(proxy) -> int:
    """Range requests for frame data (``.gulp`` objects), as the proxy saw them."""
    return sum(m == "GET" and t.split("?")[0].endswith(".gulp") for m, t, _ in proxy.log())


def _cache_bytes(folder) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if not p.name.startswith("."))


def test_second_read_makes_no_data_requests(remote, tmp_path):
    local, url, options, ids, proxy = remote
    cache = tmp_path / "cache"
    gd = GulpDirectory(url, storage_options=options, cache_dir=cache)
    first = {i: gd[i][0] for i in ids}
    assert any(cache.iterdir())
    # A fresh reader (another epoch, another process): only the listing and the index fronts
    # are fetched; every frame comes from the cache, CRC-checked, equal to the local dataset.
    fetched = _gulp_gets(proxy)
    assert fetched > 0
    again = GulpDirectory(url, storage_options=options, cache_dir=cache)
    for i in ids:
        for a, b, c in zip(again[i][0], local[i][0], first[i], strict=True):
            np.testing.assert_array_equal(a, b)
            np.testing.assert_array_equal(c, b)
    assert _gulp_gets(proxy) == fetched, "frames were fetched although they were cached"


def test_cache_stays_within_its_bound(remote, tmp_path):
    _, url, options, ids, _ = remote
    cache = tmp_path / "small"
    block = 4096
    bound = 6 * block
    gd = GulpDirectory(
        url,
        storage_options=dict(options, cache_block_size=str(block)),
        cache_dir=cache,
        cache_size=bound,
    )
    for i in ids:
        gd[i]
        # One block (plus its header) may exceed the bound until the next write evicts.
        assert _cache_bytes(cache) <= bound + block + 512
    assert _cache_bytes(cache) > 0


def test_a_damaged_cache_file_is_never_served(remote, tmp_path):
    local, url, options, ids, proxy = remote
    cache = tmp_path / "cache"
    gd = GulpDirectory(url, storage_options=options, cache_dir=cache)
    want = {i: local[i][0] for i in ids}
    for i in ids:
        gd[i]
    for path in cache.iterdir():
        raw = bytearray(path.read_bytes())
        raw[len(raw) // 2] ^= 0x40
        path.write_bytes(bytes(raw))
    again = GulpDirectory(url, storage_options=options, cache_dir=cache)
    before = _gulp_gets(proxy)
    for i in ids:
        for a, b in zip(again[i][0], want[i], strict=True):
            np.testing.assert_array_equal(a, b)
    assert _gulp_gets(proxy) > before  # fetched again, not read from the damaged files
    # The damaged files were replaced by good ones: a third reader makes no frame requests.
    third = GulpDirectory(url, storage_options=options, cache_dir=cache)
    fetched = _gulp_gets(proxy)
    for i in ids:
        third[i]
    assert _gulp_gets(proxy) == fetched


def test_a_replaced_object_is_not_read_from_the_cache(tmp_path, make_frame, s3_server):
    local = tmp_path / "v1"
    local.mkdir()
    ids = _write_dataset(local, make_frame, legacy_chunk=None)
    bucket = s3_server.make_bucket()
    s3_server.upload_dir(local, bucket, "ds")
    url = f"s3://{bucket}/ds"
    options = s3_server.storage_options()
    cache = tmp_path / "cache"
    gd = GulpDirectory(url, storage_options=options, cache_dir=cache)
    for i in ids:
        gd[i]
    # The same names with other frames (a re-gulped dataset uploaded over the old one).
    other = tmp_path / "v2"
    other.mkdir()
    _write_dataset(other, lambda *a, **k: 255 - make_frame(*a, **k), legacy_chunk=None)
    s3_server.upload_dir(other, bucket, "ds")
    fresh = GulpDirectory(url, storage_options=options, cache_dir=cache)
    truth = GulpDirectory(str(other))
    for i in ids:
        for a, b in zip(fresh[i][0], truth[i][0], strict=True):
            np.testing.assert_array_equal(a, b)


def _read_in_child(url, options, cache, ids, queue):
    gd = GulpDirectory(url, storage_options=options, cache_dir=cache)
    out = {}
    for _ in range(3):
        for i in ids:
            frames, _ = gd[i]
            out[i] = [f.tobytes() for f in frames]
    queue.put(out)


def test_processes_share_one_cache_folder(remote, tmp_path):
    local, url, options, ids, _ = remote
    cache = str(tmp_path / "shared")
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    children = [
        ctx.Process(target=_read_in_child, args=(url, options, cache, ids, queue)) for _ in range(3)
    ]
    for c in children:
        c.start()
    results = [queue.get(timeout=120) for _ in children]
    for c in children:
        c.join(60)
        assert c.exitcode == 0
    want = {i: [f.tobytes() for f in local[i][0]] for i in ids}
    assert all(r == want for r in results)
    assert not [n for n in os.listdir(cache) if n.startswith(".tmp-")]


def test_cache_options_are_checked(remote, tmp_path):
    _, url, options, _, _ = remote
    with pytest.raises(RemoteConfigError, match="cache_size"):
        GulpDirectory(url, storage_options=options, cache_dir=tmp_path, cache_size="lots")
    with pytest.raises(ValueError, match="dataset URLs"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            GulpDirectory(str(tmp_path), cache_dir=tmp_path / "c")
    gd = GulpDirectory(url, storage_options=options, cache_dir=tmp_path / "c", cache_size="1GB")
    assert gd.storage_options["cache_dir"] == str(tmp_path / "c")
