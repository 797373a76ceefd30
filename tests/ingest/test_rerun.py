"""Reruns and extensions of an ingest as a new user makes them (issue 27): the same run
whatever the path spelling or where the output folder moved, videos already stored are not
decoded again (exit 0, counted), a video `gulpio repair` dropped comes back, settings that
really differ are named in words, and frame size 0 is refused."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from helpers import image_folder

from gulpio_rs import GulpDirectory, GulpIngestor, _native
from gulpio_rs.adapters import ImageFolderAdapter, VideoFolderAdapter
from gulpio_rs.cli import main
from gulpio_rs.ingest import SettingsChangedError


@pytest.fixture
def decoded(monkeypatch):
    """The image files the adapters read (decode) during the test, in order."""
    from gulpio_rs.adapters import items

    seen: list[str] = []
    real = items._image_frame

    def counting(path, size):
        seen.append(os.path.basename(os.path.dirname(path)) + "/" + os.path.basename(path))
        return real(path, size)

    monkeypatch.setattr(items, "_image_frame", counting)
    return seen


def _ingest(src, out, *more) -> list[str]:
    return ["ingest", "image-folder", str(src), str(out), "--img-size", "16",
            "--videos-per-chunk", "2", "--num-workers", "1", *more]  # fmt: skip


def _chunks(out: Path) -> list[str]:
    return sorted(p.name for p in out.iterdir() if p.name.endswith((".gulp", ".gmeta")))


@pytest.mark.parametrize(
    "src1, out1, src2, out2",
    [
        ("imgs", "out/", "imgs", "out"),
        ("imgs", "out", "imgs", "out/"),
        ("imgs", "out", "imgs", "./out"),
        ("imgs/", "out", "imgs", "out"),
        ("imgs", "out", "./imgs/", "out"),
    ],
)
def test_a_rerun_is_the_same_run_however_the_paths_are_spelled(
    tmp_path, monkeypatch, capsys, decoded, src1, out1, src2, out2
):
    monkeypatch.chdir(tmp_path)
    image_folder(tmp_path / "imgs")
    assert main(_ingest(src1, out1)) == 0
    before = _chunks(tmp_path / "out")
    decoded.clear()
    capsys.readouterr()
    assert main(_ingest(src2, out2)) == 0
    captured = capsys.readouterr()
    assert "nothing to do: 3 chunks done before hold 6 videos" in captured.out, captured
    assert decoded == [] and captured.err == ""
    assert _chunks(tmp_path / "out") == before


@pytest.mark.parametrize("how", ["copied", "moved"])
def test_a_copied_or_moved_output_folder_resumes_where_it_was(tmp_path, capsys, decoded, how):
    src = image_folder(tmp_path / "imgs")
    assert main(_ingest(src, tmp_path / "out")) == 0
    (shutil.copytree if how == "copied" else shutil.move)(tmp_path / "out", tmp_path / "elsewhere")
    decoded.clear()
    capsys.readouterr()
    assert main(_ingest(src, tmp_path / "elsewhere")) == 0
    assert "nothing to do: 3 chunks done before hold 6 videos" in capsys.readouterr().out
    assert decoded == []


def test_a_moved_input_folder_is_the_same_data(tmp_path, decoded):
    src = image_folder(tmp_path / "imgs")
    out = tmp_path / "out"
    GulpIngestor(ImageFolderAdapter(src, out, img_size=16), out, 2, 1)()
    moved = shutil.move(src, tmp_path / "renamed")
    decoded.clear()
    report = GulpIngestor(ImageFolderAdapter(moved, out, img_size=16), out, 2, 1)()
    assert (report.chunks_written, report.chunks_resumed, decoded) == (0, 3, [])


def test_an_extension_decodes_only_the_new_videos_and_exits_0(tmp_path, capsys, decoded):
    src = image_folder(tmp_path / "imgs", classes=("cat", "dog"))
    out = tmp_path / "out"
    assert main(_ingest(src, out)) == 0
    image_folder(src, classes=("emu",))  # three new videos: a superset of the first input
    decoded.clear()
    capsys.readouterr()
    assert main(_ingest(src, out)) == 0
    text = capsys.readouterr().out
    assert sorted(decoded) == ["emu/0.png", "emu/1.png", "emu/2.png"]
    assert "6 videos were already in the dataset" in text and "skipped:" not in text
    gd = GulpDirectory(str(out))
    assert len(gd) == 9 and gd.num_chunks == 5  # the 3 new videos in 2 chunks of 2
    # And once more: everything is stored, nothing is decoded.
    decoded.clear()
    assert main(_ingest(src, out)) == 0
    assert decoded == []


def test_api_extension_counts_already_stored_and_is_not_a_failure(tmp_path, decoded):
    src = image_folder(tmp_path / "imgs", classes=("cat",))
    out = tmp_path / "out"
    GulpIngestor(ImageFolderAdapter(src, out, img_size=16), out, 2, 1)()
    image_folder(src, classes=("dog",))
    decoded.clear()
    report = GulpIngestor(ImageFolderAdapter(src, out, img_size=16), out, 2, 1, strict=True)()
    assert report.already_stored == 3 and report.failures == [] and report.videos == 3
    assert len(decoded) == 3


def test_a_video_repair_dropped_comes_back_on_rerun(tmp_path, capsys):
    src = image_folder(tmp_path / "imgs")
    out = tmp_path / "out"
    assert main(_ingest(src, out)) == 0
    gd = GulpDirectory(str(out))
    victim = gd.keys()[1]
    # Damage one byte of the victim's only frame (in the middle of its JPEG data).
    for _number, data, meta, *_rest in gd.chunk_table():
        native, _ = _native.Chunk.open(data, meta)
        if victim in native.ids():
            offset, _pad, length = native.frame_info(native.ids().index(victim))[0]
            break
    del native
    gd.close()
    data = Path(data)
    blob = bytearray(data.read_bytes())
    blob[offset + length // 2] ^= 0xFF
    data.write_bytes(bytes(blob))
    assert main(["repair", str(out), "--apply"]) == 0
    assert "come back when the `gulpio ingest`" in capsys.readouterr().out
    assert victim not in GulpDirectory(str(out)).keys()
    capsys.readouterr()
    assert main(_ingest(src, out)) == 0
    said = capsys.readouterr().out
    assert " in 1 new chunk in " in said and "with the 2 chunks done before: 6 videos" in said
    assert victim in GulpDirectory(str(out)).keys() and len(GulpDirectory(str(out))) == 6
    assert main(["check", str(out)]) == 0


def test_other_settings_are_named_in_words(tmp_path, capsys):
    src = image_folder(tmp_path / "imgs")
    out = tmp_path / "out"
    assert main(_ingest(src, out)) == 0
    capsys.readouterr()
    assert main(_ingest(src, str(out) + "/", "--img-size", "12", "--quality", "80")) == 2
    err = capsys.readouterr().err
    assert "image size: 16 -> 12" in err and "JPEG quality: 90 -> 80" in err, err
    assert "adapter" + " content" not in err and "img_size" not in err
    with pytest.raises(SettingsChangedError, match="image size: 16 -> 20"):
        GulpIngestor(ImageFolderAdapter(str(src) + "/", out, img_size=20), out, 2, 1)()


def test_frame_size_zero_is_refused(tmp_path, capsys):
    src = image_folder(tmp_path / "imgs")
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exit_:
        main(["ingest", "video-folder", str(src), str(out), "--frame-size", "0"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--frame-size" in err and "-1 to keep" in err
    with pytest.raises(SystemExit):
        main(["ingest", "image-folder", str(src), str(out), "--img-size", "-3"])
    assert "--img-size" in capsys.readouterr().err
    with pytest.raises(ValueError, match="frame_size must be .* or -1"):
        VideoFolderAdapter(src, out, frame_size=0)
    with pytest.raises(ValueError, match="img_size must be"):
        ImageFolderAdapter(src, out, img_size=0)
    assert not out.exists()
