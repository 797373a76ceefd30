"""The `gulpio` command: demo and index."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from PIL import Image

from gulpio_rs import GulpChunk, GulpDirectory
from gulpio_rs.cli import main


def test_demo_gulps_checks_reads_and_draws(tmp_path, capsys):
    assert main(["demo", "--output", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "gulped 4 videos, 96 frames" in out and "all intact" in out
    gd = GulpDirectory(tmp_path)
    assert len(gd) == 4 and all(c.indexed for c in gd)
    assert gd.meta("bbb_clip_01")["label"] == "stretching"
    frames, _ = gd["bbb_clip_03"]
    assert len(frames) == 24 and frames[0].shape == (144, 256, 3)
    sheet = Image.open(tmp_path / "contact_sheet.png")
    assert sheet.width > 256 and sheet.height > 144


def test_demo_replaces_its_own_output_and_refuses_another_dataset(tmp_path, capsys):
    assert main(["demo", "-o", str(tmp_path / "demo")]) == 0
    assert main(["demo", "-o", str(tmp_path / "demo")]) == 0  # its own earlier output
    os.remove(tmp_path / "demo" / ".gulpio-demo")  # now a dataset like any other
    capsys.readouterr()
    assert main(["demo", "-o", str(tmp_path / "demo")]) == 2
    assert "not a demo output" in capsys.readouterr().err
    assert len(GulpDirectory(tmp_path / "demo")) == 4


def test_installed_command_runs(tmp_path):
    exe = shutil.which("gulpio")
    if exe is None:
        pytest.skip("the gulpio console script is not on PATH (package not installed)")
    proc = subprocess.run([exe, "demo", "-o", str(tmp_path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_index_upgrades_legacy_chunks(tmp_path, make_frame, capsys):
    chunk = GulpChunk(tmp_path / "data_0.gulp", tmp_path / "meta_0.gmeta")
    with chunk.open("wb"):
        chunk.append("a", {}, [make_frame(8, 8)])
    os.remove(tmp_path / "data_0.gidx")
    assert main(["index", str(tmp_path)]) == 0
    assert "wrote 1 index file;" in capsys.readouterr().out
    assert GulpDirectory(tmp_path).chunk_objs_lookup[0].indexed


@pytest.mark.parametrize("args", [["index", "/nonexistent/gulps"], ["index", "."]])
def test_errors_are_one_line_without_traceback(args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "gulpio_rs", *args], capture_output=True, text=True
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1
