"""Faults between client and server, for every kind of response a remote dataset needs: the
listing, the chunks' indexes (``.gidx``), their metadata (``.gmeta``) and the frames
(``.gulp`` ranges). A fault-injecting proxy (tests/servers/proxy.py) in front of the real S3
server cuts bodies by a reset or an early close, stalls them past the client's timeout, or
answers range requests with the whole object as a server that ignores ``Range`` does. Every
read must give the local dataset's pixels, or a typed error whose message says exactly how
many retries were made."""

from __future__ import annotations

import re
import urllib.parse
import warnings

import numpy as np
import pytest

from gulpio_rs import GulpDirectory
from gulpio_rs.errors import BrokenChunkWarning, EmptyDirectoryWarning, RemoteError

KINDS = ["listing", ".gidx", ".gmeta", ".gulp"]


def _write(root, make_frame) -> list[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyDirectoryWarning)
        gd = GulpDirectory(str(root))
    ids = []
    for k, chunk in enumerate(gd.new_chunks(2)):
        with chunk.open("wb"):
            for v in range(3):
                vid = f"c{k}-v{v}"
                frames = [make_frame(48, 64, seed=10 * k + v + s) for s in range(5)]
                chunk.append(vid, {"label": f"l{v}"}, frames)
                ids.append(vid)
    return ids


@pytest.fixture
def dataset(tmp_path, make_frame, s3_server):
    local = tmp_path / "ds"
    local.mkdir()
    ids = _write(local, make_frame)
    bucket = s3_server.make_bucket()
    s3_server.upload_dir(local, bucket, "ds")
    return local, f"s3://{bucket}/ds", ids


def _objects(s3_server):
    """The whole object a path-style ``GET /bucket/key`` asks for, from the server's files."""

    def whole(target: str) -> bytes:
        path = urllib.parse.unquote(target.split("?")[0]).lstrip("/")
        return (s3_server.root / path).read_bytes()

    return whole


@pytest.fixture
def proxy(s3_server):
    from servers import FaultProxy

    started = FaultProxy(s3_server.endpoint, objects=_objects(s3_server)).start()
    yield started
    started.stop()


def _options(s3_server, proxy, **extra):
    defaults = {"max_retries": "5", "retry_timeout": "30", "timeout": "2"}
    return {**s3_server.storage_options(), "aws_endpoint": proxy.url, **defaults, **extra}


def _same_pixels(local: GulpDirectory, remote: GulpDirectory, ids):
    assert remote.keys() == local.keys()
    for i in ids:
        np.testing.assert_array_equal(remote.read(i), local.read(i))
        assert remote.meta(i) == local.meta(i)


def _open_and_read(url, options, local, ids):
    """Opens (listing, indexes) and reads everything (frames, metadata), with a chunk that
    falls back to its metadata (no CRCs) being a failure."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", BrokenChunkWarning)
        remote = GulpDirectory(url, storage_options=options)
        _same_pixels(local, remote, ids)
    return remote


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "fault",
    [{"reset_mid_body": 2}, {"truncate_body": 2}, {"slow_body": 1, "slow_ms": 5000}],
    ids=["reset", "early-close", "slow"],
)
def test_cut_bodies_are_retried_for_every_kind_of_response(dataset, s3_server, proxy, kind, fault):
    local_dir, url, ids = dataset
    proxy.set_faults(only=kind, **fault)
    _open_and_read(url, _options(s3_server, proxy), GulpDirectory(str(local_dir)), ids)
    hit = [what for _, target, what in proxy.log() if what]
    assert len(hit) == next(iter(fault.values())), proxy.log()


# `.gmeta` files are fetched whole, without `Range`: nothing for a server to ignore.
@pytest.mark.parametrize("kind", [".gidx", ".gulp"])
def test_a_server_that_ignores_range_gives_the_right_bytes(dataset, s3_server, proxy, kind):
    """Answered with the whole object, a range read cuts its bytes out of it (the object's
    size must be the listed one), never returns the whole body or fails."""
    local_dir, url, ids = dataset
    proxy.set_faults(only=kind, ignore_range=1000)
    _open_and_read(url, _options(s3_server, proxy), GulpDirectory(str(local_dir)), ids)
    assert any(what == "ignore_range" for _, _, what in proxy.log()), proxy.log()


def test_ignored_range_on_a_plain_http_server(tmp_path, make_frame, http_server, fault_proxy):
    """The same with a WebDAV server, whose requests are unsigned: the proxy drops the
    ``Range`` header and the server answers with the whole object."""
    local = tmp_path / "ds"
    local.mkdir()
    ids = _write(local, make_frame)
    server = http_server(tmp_path)
    proxy = fault_proxy(server.url)
    proxy.set_faults(ignore_range=1000)
    remote = GulpDirectory(f"{proxy.url}/ds")
    _same_pixels(GulpDirectory(str(local)), remote, ids)
    assert any(what == "ignore_range" for _, _, what in proxy.log())


def test_a_listing_that_keeps_failing_says_how_many_retries_were_made(dataset, s3_server, proxy):
    _, url, _ = dataset
    proxy.set_faults(only="listing", reset_mid_body=1000)
    with pytest.raises(RemoteError) as info:
        GulpDirectory(url, storage_options=_options(s3_server, proxy, max_retries="3"))
    message = str(info.value)
    assert "gave up after 3 retries" in message, message
    listings = [t for _, t, what in proxy.log() if what]
    assert len(listings) == 4  # the first attempt and 3 retries, as the message says


def test_retries_are_counted_for_frames_too(dataset, s3_server, proxy):
    _, url, ids = dataset
    remote = GulpDirectory(url, storage_options=_options(s3_server, proxy, max_retries="2"))
    proxy.reset_counters()
    proxy.set_faults(only=".gulp", truncate_body=1000)
    with pytest.raises(RemoteError) as info:
        remote.read(ids[0])
    message = str(info.value)
    assert re.search(r"gave up after 2 retries", message), message
    assert len([1 for _, _, what in proxy.log() if what]) == 3


def test_errors_that_retrying_cannot_fix_are_not_retried(dataset, s3_server, proxy):
    _, url, _ = dataset
    proxy.set_faults(status=400, count=1000)
    with pytest.raises(RemoteError) as info:
        GulpDirectory(url, storage_options=_options(s3_server, proxy))
    assert "not retried" in str(info.value)
    assert proxy.requests == 1


def test_max_retries_zero_is_said(dataset, s3_server, proxy):
    _, url, _ = dataset
    proxy.set_faults(only="listing", truncate_body=1)
    with pytest.raises(RemoteError, match="not retried: max_retries is 0"):
        GulpDirectory(url, storage_options=_options(s3_server, proxy, max_retries="0"))
