"""`gulpio check` finds every damaged place and exits 1; `gulpio info` summarises."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gulpio_rs import GulpChunk
from gulpio_rs.cli import main


@pytest.fixture
def dataset(tmp_path, make_frame):
    for k in range(2):
        chunk = GulpChunk(tmp_path / f"data_{k}.gulp", tmp_path / f"meta_{k}.gmeta")
        with chunk.open("wb"):
            for v in range(3):
                label = "cat" if v % 2 else "dog"
                frames = [make_frame(16, 24, seed=10 * v + j) for j in range(4)]
                chunk.append(f"c{k}v{v}", {"label": label}, frames)
    return tmp_path


def _frame_info(root, k, video):
    with open(os.path.join(root, f"meta_{k}.gmeta")) as f:
        return json.load(f)[video]["frame_info"]


def _report(capsys, *args):
    code = main(["check", *args, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_intact_dataset(dataset, capsys):
    assert main(["check", str(dataset)]) == 0
    out = capsys.readouterr().out
    assert "CRC-checked 24 frames of 6 videos in 2 chunks" in out and "all intact" in out
    code, report = _report(capsys, str(dataset), "--decode")
    assert code == 0 and report["ok"] and report["frames"] == 24 and report["decoded"]


def test_flipped_bits_are_reported_with_file_video_and_frame(dataset, capsys):
    data = dataset / "data_1.gulp"
    raw = bytearray(data.read_bytes())
    for video, frame in [("c1v0", 2), ("c1v2", 0)]:
        loc = _frame_info(dataset, 1, video)[frame][0]
        raw[loc + 30] ^= 0x20
    data.write_bytes(bytes(raw))
    code, report = _report(capsys, str(dataset))
    assert code == 1 and not report["ok"]
    crc = [(p["video_id"], p["frame"]) for p in report["problems"] if p["kind"] == "crc"]
    assert sorted(crc) == [("c1v0", 2), ("c1v2", 0)]
    assert {p["path"] for p in report["problems"]} == {str(data)}
    # One problem per damaged frame; the chunk's data CRC failing too is said in the first.
    assert len(report["problems"]) == 2
    assert "CRC of the published data" in report["problems"][0]["message"]
    assert main(["check", str(dataset)]) == 1
    out = capsys.readouterr().out
    assert f"{data}: video 'c1v0' frame 2: CRC mismatch in bytes" in out
    assert "2 problems found" in out


def test_truncation_tail_and_missing_meta(dataset, capsys):
    data0 = dataset / "data_0.gulp"
    cut = _frame_info(dataset, 0, "c0v2")[1][0]
    data0.write_bytes(data0.read_bytes()[:cut])
    with open(dataset / "data_1.gulp", "ab") as f:
        f.write(b"half a frame")
    (dataset / "data_7.gulp").write_bytes(b"orphan")
    code, report = _report(capsys, str(dataset))
    assert code == 1
    kinds = {(p["kind"], p["video_id"], p["frame"]) for p in report["problems"]}
    assert ("truncated", "c0v2", 1) in kinds and ("truncated", "c0v2", 3) in kinds
    assert ("truncated", "c0v2", 0) not in kinds
    assert ("unpublished_tail", None, None) in kinds
    assert any(
        p["kind"] == "chunk" and p["path"].endswith("data_7.gulp") for p in report["problems"]
    )


def test_a_dead_writers_temporary_file_is_reported_and_repaired(dataset, capsys):
    # A writer that is gone (its pid, reaped) and one that is running (this test's parent).
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    leftover = dataset / f".gulpio-tmp.data_2.gulp.{dead.pid}-0"
    leftover.write_bytes(b"half a chunk")
    running = dataset / f".gulpio-tmp.data_3.gulp.{os.getppid()}-0"
    running.write_bytes(b"work in progress")
    assert main(["check", str(dataset)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        f"{leftover}: temporary file of an interrupted write (its writer, process "
        f"{dead.pid}, is gone); `gulpio repair --apply` removes it"
    )
    assert out[-1] == "1 problem found" and "all intact" not in out
    code, report = _report(capsys, str(dataset))
    assert code == 1
    assert [(p["kind"], p["path"]) for p in report["problems"]] == [("leftover", str(leftover))]
    assert main(["repair", str(dataset), "--apply"]) == 0
    assert f"remove leftover temporary file {leftover}" in capsys.readouterr().out
    assert not leftover.exists() and running.exists()
    running.unlink()
    assert main(["check", str(dataset)]) == 0


def test_legacy_chunks_are_named(dataset, capsys):
    os.remove(dataset / "data_0.gidx")
    assert main(["check", str(dataset)]) == 0
    assert "1 chunk has no checksummed index" in capsys.readouterr().out


def test_errors_are_one_line(tmp_path, capsys):
    assert main(["check", str(tmp_path / "missing")]) == 1
    assert main(["check", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "no such directory" in err[0] and "not a gulp directory" in err[1]


def test_info(dataset, capsys):
    assert main(["info", str(dataset), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["chunks"] == 2 and info["indexed_chunks"] == 2
    assert info["videos"] == 6 and info["frames"] == 24
    assert info["frame_sizes"] == {"24x16": 24} and info["channels"] == {"3": 24}
    assert info["labels"] == {"dog": 4, "cat": 2}
    assert info["frames_per_video"] == {"min": 4, "max": 4, "mean": 4.0}
    assert main(["info", str(dataset)]) == 0
    out = capsys.readouterr().out
    assert "videos   6" in out and "labels   2: dog (4), cat (2)" in out
