"""What a new user hit (issue 13), one test each: empty inputs, reruns with other settings,
empty chunks, ``out=`` of the wrong dtype, empty and missing directories, the command line's
help, ``gulpio ls``, one size formatter, one problem per damaged place, the demo's output."""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from helpers import ListAdapter, image_folder

from gulpio_rs import GulpChunk, GulpDirectory, GulpIngestor
from gulpio_rs.adapters import ImageFolderAdapter
from gulpio_rs.cli import main
from gulpio_rs.ingest import (
    IngestWarning,
    NothingToIngestError,
    SettingsChangedError,
)


# -- ingest on an empty or wrongly laid out folder ------------------------------------------
@pytest.mark.parametrize("layout", ["empty", "no class folders", "wrong extension", "missing"])
def test_ingest_of_nothing_is_one_line_exit_2_and_creates_nothing(tmp_path, capsys, layout):
    src = tmp_path / "videos"
    if layout != "missing":
        src.mkdir()
    if layout == "no class folders":
        (src / "clip.mp4").write_bytes(b"not really a video")
    if layout == "wrong extension":
        (src / "walking").mkdir()
        (src / "walking" / "notes.txt").write_text("x")
    out = tmp_path / "out"
    assert main(["ingest", "video-folder", str(src), str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert err.startswith("gulpio ingest: error: ") and str(src) in err
    if layout == "no class folders":
        assert "<class>" in err and "no class subfolders" in err
    assert not out.exists()


def test_the_expected_layout_is_shown_without_a_double_slash(tmp_path, capsys):
    src = tmp_path / "flat"
    src.mkdir()
    (src / "clip.mp4").write_bytes(b"not really a video")
    assert main(["ingest", "video-folder", f"{src}/", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"expected {src}/<class>/<video> files" in err and "//" not in err


def test_ingestor_api_refuses_an_empty_adapter_before_creating_anything(tmp_path):
    with pytest.raises(NothingToIngestError, match="ListAdapter has no items"):
        GulpIngestor(ListAdapter([]), tmp_path / "out", 10, 1)()
    assert not (tmp_path / "out").exists()


# -- reruns with other settings; no empty chunks ---------------------------------------------
def test_rerun_with_other_settings_is_caught_before_any_work(tmp_path, capsys):
    src = image_folder(tmp_path / "imgs")
    out = tmp_path / "out"
    args = ["ingest", "image-folder", str(src), str(out), "--videos-per-chunk", "2"]
    assert main(args + ["--img-size", "16"]) == 0
    before = sorted(p.name for p in out.iterdir())
    capsys.readouterr()
    # Same settings: resumes (nothing to do), exit 0.
    assert main(args + ["--img-size", "16"]) == 0
    assert "nothing to do: 3 chunks done before" in capsys.readouterr().out
    for changed, expect in (
        (["--img-size", "12"], "image size: 16 -> 12"),
        (["--img-size", "16", "--quality", "80"], "JPEG quality: 90 -> 80"),
    ):
        assert main(args + changed) == 2
        err = capsys.readouterr().err
        assert expect in err and "new output directory" in err
    assert sorted(p.name for p in out.iterdir()) == before
    # Another videos-per-chunk is another run over the same input: caught as well.
    other = ["ingest", "image-folder", str(src), str(out), "--videos-per-chunk", "4"]
    assert main(other + ["--img-size", "16"]) == 2
    assert "videos per chunk: 2 -> 4" in capsys.readouterr().err
    # A different input extends the dataset as before.
    more = image_folder(tmp_path / "more", classes=("owl",))
    assert main(["ingest", "image-folder", str(more), str(out), "--img-size", "16"]) == 0
    assert len(GulpDirectory(str(out))) == 9


def test_api_raises_settings_changed_error(tmp_path):
    src = image_folder(tmp_path / "imgs")
    GulpIngestor(ImageFolderAdapter(src, tmp_path / "out", img_size=16), tmp_path / "out", 4, 1)()
    with pytest.raises(SettingsChangedError, match="image size: 16 -> 20"):
        GulpIngestor(
            ImageFolderAdapter(src, tmp_path / "out", img_size=20), tmp_path / "out", 4, 1
        )()


def _video(id_, seed):
    rng = np.random.default_rng(seed)
    return {"id": id_, "meta": {}, "frames": [rng.integers(0, 256, (16, 16, 3), np.uint8)]}


def test_a_chunk_whose_videos_are_all_skipped_is_not_published(tmp_path):
    items = [_video("a", 1), _video("b", 2), {"id": "c", "error": "unreadable"}, _video("d", 3)]
    items.insert(2, {"id": "x", "error": "unreadable"})
    # Chunks of 2: [a, b], [x, c] (all skipped), [d].
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IngestWarning)
        report = GulpIngestor(ListAdapter(items), tmp_path, 2, 1, progress=False)()
        assert report.chunks_written == 2 and report.failed_ids == ["x", "c"]
        assert not (tmp_path / "data_1.gulp").exists() and not (tmp_path / "meta_1.gmeta").exists()
        assert sorted(GulpDirectory(str(tmp_path)).keys()) == ["a", "b", "d"]
        # A rerun knows the empty chunk is done (its failures are still reported).
        again = GulpIngestor(ListAdapter(items), tmp_path, 2, 1, progress=False)()
    assert again.chunks_resumed == 2 and again.chunks_written == 0
    assert again.failed_ids == ["x", "c"]


def test_check_reports_and_repair_removes_empty_chunks(tmp_path, capsys):
    with GulpChunk(str(tmp_path / "data_0.gulp"), str(tmp_path / "meta_0.gmeta")).open("wb"):
        pass  # what older versions and gulpio2 published for a chunk of skipped videos
    ok = GulpChunk(str(tmp_path / "data_1.gulp"), str(tmp_path / "meta_1.gmeta"))
    with ok.open("wb"):
        ok.append("v", {}, [np.zeros((8, 8, 3), np.uint8)])
    assert main(["check", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "data_0.gulp: the chunk holds no videos" in out and "1 problem found" in out
    assert main(["repair", str(tmp_path)]) == 0
    assert "move data_0.gulp, meta_0.gmeta" in capsys.readouterr().out
    assert main(["repair", str(tmp_path), "--apply"]) == 0
    assert not (tmp_path / "data_0.gulp").exists()
    assert main(["check", str(tmp_path)]) == 0


# -- the demo ----------------------------------------------------------------------------------
def test_demo_writes_into_gulpio_demo_and_says_how_to_remove_it(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "gulpio-demo").is_dir()
    assert "gulpio-demo" in out and "rm -rf" in out
    # Running it again replaces its own earlier output; a foreign folder is refused.
    assert main(["demo"]) == 0
    capsys.readouterr()
    shutil.rmtree(tmp_path / "gulpio-demo")
    (tmp_path / "gulpio-demo").mkdir()
    (tmp_path / "gulpio-demo" / "mine.txt").write_text("keep me")
    assert main(["demo"]) == 2
    assert "not a demo output" in capsys.readouterr().err
    assert (tmp_path / "gulpio-demo" / "mine.txt").exists()
    assert os.listdir(tmp_path) == ["gulpio-demo"]


# -- reading: out= of the wrong kind, empty and missing directories ----------------------------
def _one_video(root: Path) -> GulpDirectory:
    chunk = GulpChunk(str(root / "data_0.gulp"), str(root / "meta_0.gmeta"))
    with chunk.open("wb"):
        chunk.append("v", {}, [np.zeros((8, 10, 3), np.uint8)] * 2)
    return GulpDirectory(str(root))


@pytest.mark.parametrize(
    "out, error, got",
    [
        (np.empty((2, 8, 10, 3), np.float32), TypeError, "dtype float32"),
        (np.empty((2, 8, 20, 3), np.uint8)[:, :, ::2], ValueError, "C-contiguous: no"),
        (np.empty((2, 8, 11, 3), np.uint8), ValueError, "shape (2, 8, 11, 3)"),
        ([[0]], TypeError, "not list"),
    ],
)
def test_out_of_the_wrong_kind_names_every_requirement(tmp_path, out, error, got):
    gd = _one_video(tmp_path)
    want = "out must be a C-contiguous, writeable uint8 array of shape (2, 8, 10, 3)"
    with pytest.raises(error) as info:
        gd.read("v", out=out)
    assert want in str(info.value) and got in str(info.value)
    frozen = np.empty((1, 2, 8, 10, 3), np.uint8)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="writeable: no"):
        gd.read_batch(["v"], out=frozen)


def test_empty_and_missing_directories_say_what_was_looked_for(tmp_path):
    from gulpio_rs.errors import EmptyDirectoryWarning

    with pytest.warns(EmptyDirectoryWarning, match=r"no gulp chunks here \(data_\*\.gulp"):
        gd = GulpDirectory(str(tmp_path))
    assert len(gd) == 0
    with pytest.raises(FileNotFoundError, match="no gulp directory here: the folder does not"):
        GulpDirectory(str(tmp_path / "absent"))
    # Writing into an empty directory stays legal.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyDirectoryWarning)
        (chunk,) = GulpDirectory(str(tmp_path)).new_chunks(1)
    with chunk.open("wb"):
        chunk.append("v", {}, [np.zeros((8, 8, 3), np.uint8)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(GulpDirectory(str(tmp_path))) == 1


def test_gulpio_without_arguments_prints_the_help(capsys):
    assert main([]) == 2
    err = capsys.readouterr().err
    assert "usage: gulpio" in err and "demo" in err and "ingest" in err and "check" in err


def test_ingest_help_is_whole_plain_and_explains_the_options(capsys):
    import inspect

    from gulpio_rs import adapters
    from gulpio_rs.cli.ingest import BUILTIN

    assert main(["ingest", "--help"]) == 0
    overview = capsys.readouterr().out
    assert "``" not in overview
    flat = " ".join(overview.split())
    for cls_name, _ in BUILTIN.values():
        first = (inspect.getdoc(getattr(adapters, cls_name)) or "").split("\n\n")[0]
        assert " ".join(first.replace("``", "").split()) in flat, cls_name
    with pytest.raises(SystemExit):
        main(["ingest", "video-folder", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "shm-dir-path" not in text and "``" not in text
    assert "folder the input folder" in text
    assert "shorter side is this many pixels (-1: keep the size)" in text
    # gulpio2's option is still accepted (and ignored).
    assert main(["ingest", "video-folder", "/nonexistent", "/tmp/x", "--shm-dir-path", "/x"]) == 2


# -- gulpio ls; one size formatter -------------------------------------------------------------
def test_ls_lists_ids_usable_with_show_and_sizes_agree_across_commands(tmp_path, capsys):
    import json

    src = image_folder(tmp_path / "imgs")
    out = tmp_path / "out"
    assert main(["ingest", "image-folder", str(src), str(out), "--videos-per-chunk", "4"]) == 0
    ingest_mb = capsys.readouterr().out.split(" MB in ")[0].rsplit(" ", 1)[-1]
    gd = GulpDirectory(str(out))
    assert main(["ls", str(out)]) == 0
    ids = capsys.readouterr().out.split()
    assert ids == list(gd.keys())
    assert main(["show", str(out), ids[-1], "-o", str(tmp_path / "s.png")]) == 0
    assert (tmp_path / "s.png").exists()
    capsys.readouterr()
    assert main(["ls", str(out), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in rows] == ids
    assert {r["label"] for r in rows} == {"cat", "dog"}
    assert all(r["frames"] == 1 and r["chunk"].startswith("data_") for r in rows)
    total = sum(r["bytes"] for r in rows)
    assert main(["ls", str(out), "--long"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["id", "frames", "size", "label", "chunk"]
    assert len(lines) == len(ids) + 1 and lines[1].startswith(ids[0])
    # ingest, check and info print the same figure for the same bytes.
    assert main(["check", str(out)]) == 0
    check_mb = capsys.readouterr().out.split(" MB)")[0].rsplit("(", 1)[-1]
    assert main(["info", str(out)]) == 0
    info_mb = capsys.readouterr().out.split(" MB of frames")[0].rsplit(" ", 1)[-1]
    assert ingest_mb == check_mb == info_mb == f"{total / 1e6:,.1f}"
    # ... and count the same quantity (their JSON reports), so the figures cannot drift apart.
    assert main(["check", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bytes"] == total
    assert main(["info", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["bytes"] == total < info["disk_bytes"]
