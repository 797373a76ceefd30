"""``GulpVideoDataset(clip_align="segment")``: clips of a video-encoded dataset start where an AV1
segment starts (so a read decodes no frame it does not return), drawn among the starts where
the window fits; JPEG videos and short videos are sampled as with the default."""

from __future__ import annotations

import collections

import numpy as np
import pytest
from helpers import ListAdapter, arrays_dataset

from gulpio_rs import GulpDirectory, GulpIngestor
from gulpio_rs.torch import GulpVideoDataset
from gulpio_rs.torch._sampling import segment_aligned_clip

GOP = 8
# Each frame is flat at STEP * its index: its decoded mean says which frame it is.
STEP = 6
LENGTHS = {"long": 40, "short": 5, "odd": 21}


@pytest.fixture(scope="module")
def video_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("clip_align") / "video"
    items = [
        {
            "id": name,
            "meta": {"label": name},
            "frames": [np.full((64, 64, 3), STEP * k, np.uint8) for k in range(n)],
        }
        for name, n in LENGTHS.items()
    ]
    GulpIngestor(ListAdapter(items), root, 3, 1, encoding="video", gop=GOP, progress=False)()
    return root


def _first_frames(clip) -> list[int]:
    """The index of each frame of a THWC/TCHW clip of flat frames."""
    arr = clip.numpy()
    return [round(float(f.mean()) / STEP) for f in arr]


def test_segment_starts_come_from_the_index(video_root, tmp_path):
    gd = GulpDirectory(str(video_root))
    assert gd.segment_starts("long") == [0, 8, 16, 24, 32]
    assert gd.segment_starts("odd") == [0, 8, 16]
    assert gd.segment_starts("short") == [0]
    GulpIngestor(arrays_dataset(1, frames=3), tmp_path / "jpeg", 1, 1, progress=False)()
    assert GulpDirectory(str(tmp_path / "jpeg")).segment_starts("v0") is None


def test_random_clips_start_on_segments_where_they_fit_each_equally_often(video_root):
    ds = GulpVideoDataset(
        str(video_root), frames=8, clip_align="segment", offset="random", seed=3,
        ids=["long"], layout="THWC",
    )  # fmt: skip
    starts = collections.Counter()
    for epoch in range(200):
        ds.set_epoch(epoch)
        clip, _ = ds[0]
        got = _first_frames(clip)
        assert got == list(range(got[0], got[0] + 8))
        starts[got[0]] += 1
    # 40 frames, windows of 8: every segment start fits, none other is drawn.
    assert set(starts) == {0, 8, 16, 24, 32}
    assert min(starts.values()) > 200 / 5 / 2


def test_stride_and_a_window_that_fits_only_early_segments(video_root):
    # A window of 1 + 7 * 2 = 15 frames in a 21-frame video fits from 0 only (8 + 15 > 21).
    ds = GulpVideoDataset(
        str(video_root), frames=8, stride=2, clip_align="segment", offset="random", seed=1,
        ids=["odd"], layout="THWC",
    )  # fmt: skip
    for epoch in range(20):
        ds.set_epoch(epoch)
        assert _first_frames(ds[0][0]) == list(range(0, 15, 2))


def test_named_offsets_pick_the_first_and_the_middle_start(video_root):
    for offset, first in (("start", 0), ("center", 16)):
        ds = GulpVideoDataset(
            str(video_root), frames=8, clip_align="segment", offset=offset, ids=["long"],
            layout="THWC",
        )  # fmt: skip
        assert _first_frames(ds[0][0])[0] == first


def test_videos_shorter_than_the_window_loop_from_their_start(video_root):
    ds = GulpVideoDataset(
        str(video_root), frames=8, clip_align="segment", offset="random", seed=0,
        ids=["short"], layout="THWC",
    )  # fmt: skip
    assert _first_frames(ds[0][0]) == [0, 1, 2, 3, 4, 0, 1, 2]


def test_batches_read_the_same_clips_as_items(video_root):
    ds = GulpVideoDataset(
        str(video_root), frames=8, clip_align="segment", offset="random", seed=5, layout="THWC"
    )
    batch = ds.__getitems__([0, 1, 2])
    for i, (clip, _) in enumerate(batch):
        assert _first_frames(clip) == _first_frames(ds[i][0])


def test_jpeg_videos_are_sampled_as_with_frame_alignment(tmp_path):
    items = [{"id": "j", "meta": {}, "frames": [np.full((16, 16, 3), STEP * k, np.uint8)
                                                for k in range(30)]}]  # fmt: skip
    GulpIngestor(ListAdapter(items), tmp_path / "j", 1, 1, progress=False)()
    kwargs = dict(frames=4, offset="random", seed=2, layout="THWC", target=None)
    aligned = GulpVideoDataset(str(tmp_path / "j"), clip_align="segment", **kwargs)
    plain = GulpVideoDataset(str(tmp_path / "j"), **kwargs)
    for epoch in range(10):
        aligned.set_epoch(epoch)
        plain.set_epoch(epoch)
        assert _first_frames(aligned[0]) == _first_frames(plain[0])


@pytest.mark.parametrize(
    "kwargs, says",
    [
        (dict(frames=None), "frames=None"),
        (dict(num_segments=3), "num_segments="),
        (dict(fps=10.0, clip_seconds=1.0), "by time"),
        (dict(frames=4, clip_align="gop"), "clip_align must be one of"),
    ],
)
def test_what_alignment_does_not_apply_to_is_refused(video_root, kwargs, says):
    kwargs = {"clip_align": "segment", **kwargs}
    with pytest.raises(ValueError, match=says):
        GulpVideoDataset(str(video_root), **kwargs)


@pytest.mark.parametrize("n", [1, 7, 8, 9, 16, 17, 100])
@pytest.mark.parametrize("frames, stride", [(1, 1), (8, 1), (4, 3), (16, 1)])
def test_the_rule_alone(n, frames, stride):
    starts = list(range(0, n, GOP))
    span = (frames - 1) * stride + 1
    fits = [s for s in starts if s + span <= n]
    seen = set()
    for u in np.linspace(0, 1, 101):
        got = segment_aligned_clip(n, starts, frames, stride, float(u))
        assert len(got) == frames
        if fits:
            assert got[0] in fits and got == list(range(got[0], got[0] + span, stride))
            seen.add(got[0])
        else:
            assert got == [(j * stride) % n for j in range(frames)]
    assert seen == set(fits)
