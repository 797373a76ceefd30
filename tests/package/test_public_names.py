"""The public names stay where users and the docs find them: every exception of
``gulpio_rs.errors`` at the package root (``errors.__all__`` is the one list), the source
video reader as ``gulpio_rs.video`` and the segment encoder as ``gulpio_rs.segments``, whatever
modules implement them."""

from __future__ import annotations

import pickle

import gulpio_rs
from gulpio_rs import errors


def test_the_root_exports_every_error_of_errors_all():
    for name in errors.__all__:
        assert name in gulpio_rs.__all__
        assert getattr(gulpio_rs, name) is getattr(errors, name)
    exceptions = {
        n for n, v in vars(errors).items() if isinstance(v, type) and issubclass(v, BaseException)
    }
    assert {n for n in exceptions if not n.startswith("_")} == set(errors.__all__)
    assert len(set(gulpio_rs.__all__)) == len(gulpio_rs.__all__)


def test_video_and_segments_are_the_public_modules():
    from gulpio_rs import segments as public
    from gulpio_rs import source_video, video
    from gulpio_rs.ingest import av1

    assert set(video.__all__) <= set(source_video.__all__)
    for name in video.__all__:
        assert getattr(video, name) is getattr(source_video, name)
    assert video.VideoDecodeError is gulpio_rs.VideoDecodeError
    for name in ("Segment", "SegmentVideo", "encode_segments", "encode_video", "DEFAULT_PRESET"):
        assert getattr(public, name) is getattr(av1, name)
    assert public.VideoEncodeError is gulpio_rs.VideoEncodeError
    assert callable(public.stage_times)


def test_video_decode_errors_keep_their_location_across_processes():
    e = gulpio_rs.VideoDecodeError("no frames", path="a.mp4", frame=3)
    back = pickle.loads(pickle.dumps(e))
    assert (type(back), str(back), back.path, back.frame) == (type(e), "no frames", "a.mp4", 3)
