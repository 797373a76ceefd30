"""`gulpio show` (contact sheet of one video) and `gulp2_sanity_check` (gulpio2's checks)."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from gulpio_rs import GulpChunk, GulpDirectory
from gulpio_rs.cli import main, sanity
from gulpio_rs.cli.show import frame_spec, select_frames
from gulpio_rs.contact_sheet import contact_sheet

H, W = 48, 64


def gulp(directory, chunks):
    """Write ``chunks``: a list (one item per chunk) of ``{id: (meta, frames)}``."""
    for k, videos in enumerate(chunks):
        chunk = GulpChunk(directory / f"data_{k}.gulp", directory / f"meta_{k}.gmeta")
        with chunk.open("wb"):
            for id_, (meta, frames) in videos.items():
                chunk.append(id_, meta, frames)
    return str(directory)


@pytest.fixture
def clip(make_frame):
    """Frames factory: ``clip(n)`` -> n distinct 48x64 RGB frames."""
    return lambda n: [make_frame(H, W, seed=s) for s in range(n)]


@pytest.fixture
def dataset(tmp_path, clip):
    """Two chunks: 'cat6' (6 frames, labelled), 'long' (30 frames), 'nolabel' (3), 'empty' (0)."""
    return gulp(
        tmp_path,
        [
            {"cat6": ({"label": "cat"}, clip(6)), "long": ({"label": "dog"}, clip(30))},
            {"nolabel": ({"source": "x"}, clip(3)), "empty": ({"label": "none"}, [])},
        ],
    )


def show(directory, id_, out, *extra):
    return main(["show", directory, id_, "-o", str(out), *extra])


# -- gulpio show -----------------------------------------------------------------------------


def test_show_draws_the_frames_with_numbers_and_caption(dataset, tmp_path, clip, capsys):
    out = tmp_path / "sheet.png"
    assert show(dataset, "cat6", out) == 0
    assert capsys.readouterr().out == f"{out}: 6 of 6 frames of 'cat6'\n"
    sheet = Image.open(out)
    assert sheet.format == "PNG"
    # Same pixels as the library's contact sheet with the expected caption and numbers.
    frames, _ = GulpDirectory(dataset)["cat6"]
    expected = contact_sheet(frames, list(range(6)), "cat6  label: cat")
    assert sheet.size == expected.size
    assert np.array_equal(np.asarray(sheet.convert("RGB")), np.asarray(expected))
    # The first thumbnail (below the 20 px caption, 4 px padding) is the first frame, downscaled.
    thumb_w = round(W * 96 / H)
    thumb = np.asarray(sheet.convert("RGB").crop((4, 20, 4 + thumb_w, 20 + 96)), dtype=float)
    original, other = (
        np.asarray(Image.fromarray(f).resize((thumb_w, 96), Image.BILINEAR), dtype=float)
        for f in clip(2)
    )
    assert np.abs(thumb - original).mean() < 8
    assert np.abs(thumb - other).mean() > 3 * np.abs(thumb - original).mean()


def test_show_caption_without_label_names_id_and_frame_count(dataset, tmp_path):
    out = tmp_path / "sheet.png"
    assert show(dataset, "nolabel", out) == 0
    frames, _ = GulpDirectory(dataset)["nolabel"]
    expected = contact_sheet(frames, [0, 1, 2], "nolabel  3 frames")
    assert np.array_equal(np.asarray(Image.open(out).convert("RGB")), np.asarray(expected))


def test_show_sheet_grows_with_the_number_of_frames(dataset, tmp_path):
    areas = []
    for spec in ["0:1", "0:2", "0:6", "0:12"]:
        out = tmp_path / f"sheet_{spec.replace(':', '_')}.png"
        assert show(dataset, "long", out, "--frames", spec) == 0
        areas.append(Image.open(out).width * Image.open(out).height)
    assert areas == sorted(set(areas))


@pytest.mark.parametrize(
    "args, picks",
    [
        ([], [round(i * 29 / 23) for i in range(24)]),  # default: 24 evenly spaced of 30
        (["--frames", "2:8:2"], [2, 4, 6]),
        (["--frames=-3:"], [27, 28, 29]),
        (["--frames", "0,5,-1"], [0, 5, 29]),
        (["--frames", "7"], [7]),
        (["--frames", "::-10"], [29, 19, 9]),
    ],
)
def test_show_frame_selection(dataset, tmp_path, capsys, args, picks):
    out = tmp_path / "sheet.png"
    assert show(dataset, "long", out, "--columns", "4", "--thumb-height", "32", *args) == 0
    assert f": {len(picks)} of 30 frames" in capsys.readouterr().out
    frames, _ = GulpDirectory(dataset)["long", picks]
    expected = contact_sheet(frames, picks, "long  label: dog", columns=4, thumb_height=32)
    assert np.array_equal(np.asarray(Image.open(out).convert("RGB")), np.asarray(expected))


def test_select_frames_defaults():
    assert select_frames(None, 5, "v") == [0, 1, 2, 3, 4]
    picks = select_frames(None, 1000, "v")
    assert len(picks) == 24 and picks[0] == 0 and picks[-1] == 999
    assert all(0 < b - a <= 44 for a, b in zip(picks, picks[1:], strict=False))


@pytest.mark.parametrize("text", ["", "a", "1:2:3:4", "::0", "1,,2", "1:x"])
def test_bad_frame_specs_are_refused(text):
    with pytest.raises(argparse.ArgumentTypeError):
        frame_spec(text)


@pytest.mark.parametrize(
    "id_, extra, message",
    [
        ("nope", [], "unknown video id 'nope'"),
        ("empty", [], "video 'empty' has no frames"),
        ("cat6", ["--frames", "0,6"], "frame 6 is out of range: video 'cat6' has 6 frames"),
        ("cat6", ["--frames", "4:2"], "--frames selects no frames"),
    ],
)
def test_show_errors_are_one_line(dataset, tmp_path, capsys, id_, extra, message):
    out = tmp_path / "sheet.png"
    assert show(dataset, id_, out, *extra) == 1
    err = capsys.readouterr().err
    assert err.startswith("gulpio show: error: ") and message in err and err.count("\n") == 1
    assert not out.exists()


def test_show_refuses_missing_and_non_gulp_directories(tmp_path, capsys):
    assert show(str(tmp_path / "missing"), "v", tmp_path / "s.png") == 1
    assert "no such directory" in capsys.readouterr().err
    assert show(str(tmp_path), "v", tmp_path / "s.png") == 1
    assert "not a gulp directory" in capsys.readouterr().err


def test_show_bad_frames_spec_is_a_usage_error(dataset, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        show(dataset, "cat6", tmp_path / "s.png", "--frames", "1:x")
    assert exc.value.code == 2
    assert "invalid frame selection '1:x'" in capsys.readouterr().err


def test_show_error_from_the_command_line_has_no_traceback(dataset, tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "gulpio_rs", "show", dataset, "x", "-o", str(tmp_path / "s.png")],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("gulpio show: error: unknown video id 'x'")
    assert len(proc.stderr.splitlines()) == 1 and "Traceback" not in proc.stderr


# -- gulp2_sanity_check ----------------------------------------------------------------------


@pytest.fixture
def good(tmp_path, clip):
    return gulp(
        tmp_path,
        [
            {"a": ({"label": "cat"}, clip(3)), "b": ({}, clip(2))},
            {"c": ({"label": "dog"}, clip(4))},
        ],
    )


def gulpio2_output(directory) -> str:
    """What gulpio2's ``gulp2_sanity_check`` prints for ``directory`` (its run_tests loop)."""
    gulpio2_fileio = pytest.importorskip("gulpio2.fileio")
    su = pytest.importorskip("gulpio2.sanity_utils")
    tests = [
        {"message": "Check for empty meta files", "check": su.check_meta_file_size_larger_zero},
        {"message": "Check for empty data files", "check": su.check_data_file_size_larger_zero},
        {
            "message": "Check data file size equals size in meta file",
            "check": su.check_data_file_size,
        },
        {"message": "Check presence of duplicate ids", "check": su.check_for_duplicate_ids},
    ]
    gulp_directory = gulpio2_fileio.GulpDirectory(directory)
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        for test in tests:
            test["failures"] = test["check"](gulp_directory)
            su.check_for_failures(test)
    return buffer.getvalue()


def test_sanity_output_matches_gulpio2_on_a_good_dataset(good, capsys):
    expected = gulpio2_output(good)
    assert expected.count("Test passed") == 4
    assert sanity.main([good]) == 0
    captured = capsys.readouterr()
    assert captured.out == expected and captured.err == ""


def test_sanity_reports_a_data_file_with_extra_bytes(good, capsys):
    damaged = os.path.join(good, "data_1.gulp")
    with open(damaged, "ab") as f:
        f.write(b"\0" * 10)
    assert sanity.main([good]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[4:6] == [
        "Sanity Check: Check data file size equals size in meta file",
        f"Test failed for: {[damaged]}",
    ]
    assert out.count("Test passed") == 3


def test_sanity_reports_chunks_it_could_not_read(good, capsys):
    os.remove(os.path.join(good, "meta_1.gmeta"))
    assert sanity.main([good]) == 1
    captured = capsys.readouterr()
    assert captured.out.count("Test passed") == 4
    assert captured.err.count("\n") == 1
    assert captured.err.startswith(f"gulp2_sanity_check: {os.path.join(good, 'data_1.gulp')}: ")


def test_sanity_refuses_a_missing_directory(tmp_path, capsys):
    assert sanity.main([str(tmp_path / "missing")]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"gulp2_sanity_check: error: {tmp_path / 'missing'}: no such directory\n"


def test_sanity_runs_as_a_module(good):
    cmd = [sys.executable, "-m", "gulpio_rs.cli.sanity", good]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.count("Test passed") == 4, proc.stderr
    with open(os.path.join(good, "data_0.gulp"), "ab") as f:
        f.write(b"x")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 1 and "Test failed for:" in proc.stdout
    assert "Traceback" not in proc.stderr
