"""`gulpio repair`: a dry run changes nothing; --apply leaves a dataset that `gulpio check`
passes, with every intact video unchanged and every damaged one listed."""

from __future__ import annotations

import json
import os

import pytest

from gulpio_rs import GulpChunk, GulpDirectory
from gulpio_rs.cli import main
from gulpio_rs.cli.check import verify


@pytest.fixture
def damaged(tmp_path, make_frame):
    for k in range(3):
        chunk = GulpChunk(tmp_path / f"data_{k}.gulp", tmp_path / f"meta_{k}.gmeta")
        with chunk.open("wb"):
            for v in range(3):
                frames = [make_frame(16, 24, seed=100 * k + 10 * v + j) for j in range(3)]
                chunk.append(f"c{k}v{v}", {"k": k, "v": v}, frames)
    with chunk.open("ab"):  # a second meta_data element must survive a rewrite
        chunk.append("c2v0", {"again": True}, [])
    truth = {
        i: [bytes(b) for b in GulpDirectory(tmp_path).frame_bytes(i)]
        for i in GulpDirectory(tmp_path).keys()
    }
    # chunk 1: a flipped bit in video c1v1, frame 2
    with open(tmp_path / "meta_1.gmeta") as f:
        loc = json.load(f)["c1v1"]["frame_info"][2][0]
    raw = bytearray((tmp_path / "data_1.gulp").read_bytes())
    raw[loc + 25] ^= 0x08
    (tmp_path / "data_1.gulp").write_bytes(bytes(raw))
    # chunk 0: an unpublished tail; chunk 2: its index deleted and replaced by a stale one
    with open(tmp_path / "data_0.gulp", "ab") as f:
        f.write(b"torn append")
    os.replace(tmp_path / "data_0.gidx", tmp_path / "keep.gidx")
    (tmp_path / "data_0.gidx").write_bytes((tmp_path / "keep.gidx").read_bytes()[:-3])
    os.remove(tmp_path / "keep.gidx")
    # an orphan data file and a dead writer's temporary file
    (tmp_path / "data_9.gulp").write_bytes(b"\xff\xd8orphan")
    (tmp_path / ".gulpio-tmp.data_5.gulp.999999-0").write_bytes(b"partial")
    return tmp_path, truth


def _snapshot(root):
    return {n: (root / n).read_bytes() for n in sorted(os.listdir(root)) if (root / n).is_file()}


def test_dry_run_lists_everything_and_changes_nothing(damaged, capsys):
    root, _ = damaged
    before = _snapshot(root)
    assert main(["repair", str(root)]) == 0
    out = capsys.readouterr().out
    assert _snapshot(root) == before
    assert "would remove leftover temporary file" in out
    assert "would cut the unpublished tail of" in out and "data_0.gulp" in out
    assert "would rewrite the index of" in out
    assert "would move data_9.gulp to gulpio-quarantine/" in out
    assert "without its 1 damaged video 'c1v1'" in out
    assert "dry run: 5 actions" in out


def test_apply_salvages_every_intact_video(damaged, capsys):
    root, truth = damaged
    assert main(["repair", str(root), "--apply"]) == 0
    assert verify(str(root))["ok"]
    gd = GulpDirectory(root)
    assert sorted(gd.keys()) == sorted(i for i in truth if i != "c1v1")
    for id_ in gd.keys():
        assert [bytes(b) for b in gd.frame_bytes(id_)] == truth[id_], id_
    assert gd.merged_meta_dict["c2v0"]["meta_data"] == [{"k": 2, "v": 0}, {"again": True}]
    assert all(c.indexed for c in gd)
    quarantine = root / "gulpio-quarantine"
    listed = json.loads((quarantine / "quarantine.json").read_text())
    assert [(e["id"], e["chunk"]) for e in listed] == [("c1v1", "data_1.gulp")]
    assert "frame 2: CRC mismatch" in listed[0]["reasons"][0]
    # The original damaged chunk and the orphan are kept, byte for byte.
    assert (quarantine / "data_1.gulp").exists() and (quarantine / "data_9.gulp").exists()
    assert not [n for n in os.listdir(root) if n.startswith(".gulpio-tmp.")]
    capsys.readouterr()
    assert main(["repair", str(root)]) == 0
    assert "nothing to repair" in capsys.readouterr().out


def test_temporary_files_of_a_live_process_are_kept(tmp_path, make_frame):
    chunk = GulpChunk(tmp_path / "data_0.gulp", tmp_path / "meta_0.gmeta")
    with chunk.open("wb"):
        chunk.append("a", {}, [make_frame(8, 8)])
    live = tmp_path / f".gulpio-tmp.data_1.gulp.{os.getppid()}-0"
    live.write_bytes(b"in progress")
    assert main(["repair", str(tmp_path), "--apply"]) == 0
    assert live.exists()
