"""A writer stores no segment that disagrees with what it is declared to be (docs/RELIABILITY.md,
"Segments whose declarations lie"): `GulpChunk.append` of a `SegmentVideo` whose segments
declare frame counts, sizes or colour their streams do not have is refused with a typed error
naming the video and the segment, and nothing is published. Before the fix such videos were
stored and read back shifted by a frame, without an error."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gulpio_rs import GulpDirectory
from gulpio_rs.chunk import GulpChunk
from gulpio_rs.segments import Segment, SegmentVideo, encode_video


@pytest.fixture(scope="module")
def honest(videos):
    """24 frames of bikes as two 16- and 8-frame segments, as the encoder made them."""
    video = encode_video(videos["bikes"][:24], gop=16)
    assert [s.frames for s in video.segments] == [16, 8]
    return video


def _with_counts(video: SegmentVideo, counts: list[int]) -> SegmentVideo:
    segments = [Segment(s.data, n, s.keyframe) for s, n in zip(video.segments, counts, strict=True)]
    return dataclasses.replace(video, segments=segments)


def _append(tmp_path, video: SegmentVideo, refused: str | None = None) -> pytest.ExceptionInfo:
    """Appends a JPEG video and then ``video``; with ``refused``, the second append must
    raise a ValueError matching it, and the chunk is then published without it."""
    chunk = GulpChunk(str(tmp_path / "data_0.gulp"), str(tmp_path / "meta_0.gmeta"))
    with chunk.open("wb"):
        chunk.append("honest", {}, [np.zeros((8, 8, 3), np.uint8)])
        if refused is None:
            chunk.append("liar", {"k": 1}, video)
            return None
        with pytest.raises(ValueError, match=refused) as e:
            chunk.append("liar", {"k": 1}, video)
    gd = GulpDirectory(str(tmp_path))
    assert list(gd.keys()) == ["honest"]
    assert gd.read("honest").shape == (1, 8, 8, 3)
    return e


@pytest.mark.parametrize(
    "counts, segment",
    [
        ([15, 9], 0),  # total unchanged
        ([15, 8], 0),
        ([16, 7], 1),
        ([16, 9], 1),
        ([17, 7], 0),
    ],
)
def test_frame_counts_that_are_not_the_streams_are_refused(tmp_path, honest, counts, segment):
    e = _append(tmp_path, _with_counts(honest, counts), rf"segment {segment}\b.*temporal units")
    # A ValueError like every refusal of a caller's data, located like every error of ours.
    assert e.value.video_id == "liar"
    assert e.value.frame == sum(counts[:segment])
    assert e.value.path.endswith("data_0.gulp")


@pytest.mark.parametrize(
    "change, what",
    [
        ({"width": None}, "declared"),
        ({"height": None}, "declared"),
        ({"matrix": "bt709"}, "signals"),
        ({"full_range": True}, "signals"),
    ],
)
def test_sizes_and_colour_that_are_not_the_streams_are_refused(tmp_path, honest, change, what):
    if "width" in change:
        change = {"width": honest.width - 2}
    if "height" in change:
        change = {"height": honest.height + 2}
    _append(tmp_path, dataclasses.replace(honest, **change), rf"segment 0\b.*{what}")


def test_the_honest_video_is_stored_and_reads_frame_exact(tmp_path, honest):
    _append(tmp_path, honest)
    gd = GulpDirectory(str(tmp_path))
    whole = gd.read("liar")
    assert whole.shape[0] == 24
    for start in (0, 9, 15, 16, 20):
        clip = gd.read("liar", frames=slice(start, start + 4))
        assert np.array_equal(clip, whole[start : start + 4])
