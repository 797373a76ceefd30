"""What the command line says when a new user gets something slightly wrong (issue 27): a file
given where the dataset folder is expected, an unknown id, a demo output folder that holds
other files, the zune-jpeg note said once per installation, and Ctrl-C outside an ingest."""

from __future__ import annotations

import os
import shlex

import numpy as np
import pytest

from gulpio_rs import GulpChunk
from gulpio_rs.cli import main


def _dataset(root, ids=("walking-001", "walking-002", "running-001")):
    chunk = GulpChunk(str(root / "data_0.gulp"), str(root / "meta_0.gmeta"))
    with chunk.open("wb"):
        for id_ in ids:
            chunk.append(id_, {}, [np.zeros((8, 8, 3), np.uint8)])
    return root


@pytest.mark.parametrize("command", ["info", "ls"])
def test_a_chunk_file_instead_of_the_folder_says_which_folder(tmp_path, capsys, command):
    _dataset(tmp_path)
    assert main([command, str(tmp_path / "data_0.gulp")]) == 1
    err = capsys.readouterr().err
    assert "no such directory" not in err
    assert "is a file" in err and "dataset's folder" in err and str(tmp_path) in err


def test_show_with_an_unknown_id_suggests_close_ones(tmp_path, capsys):
    _dataset(tmp_path)
    out = str(tmp_path / "sheet.png")
    assert main(["show", str(tmp_path), "walking-01", "-o", out]) == 1
    err = capsys.readouterr().err
    assert "unknown video id 'walking-01'" in err and "did you mean" in err
    assert "'walking-001'" in err
    assert main(["show", str(tmp_path), "zzzz", "-o", out]) == 1
    assert "3 videos" in capsys.readouterr().err
    assert not os.path.exists(out)


def test_demo_refuses_a_folder_with_other_files(tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("keep me")
    assert main(["demo", "--output", str(mine)]) == 2
    assert "not a demo output" in capsys.readouterr().err
    assert sorted(os.listdir(mine)) == ["thesis.tex"]


def test_demo_never_suggests_deleting_a_folder_it_did_not_create(tmp_path, capsys):
    given = tmp_path / "empty"
    given.mkdir()
    assert main(["demo", "--output", str(given)]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    command = line.split("remove them with: ", 1)[1]
    words = shlex.split(command)
    assert words[:2] == ["rm", "-rf"] and str(given) not in words
    assert sorted(words[2:]) == sorted(str(given / n) for n in os.listdir(given))
    # A second demo into it replaces its own files (and still keeps the folder).
    assert main(["demo", "--output", str(given)]) == 0
    assert str(given) not in shlex.split(capsys.readouterr().out.splitlines()[-1])
    # A folder the demo created may go whole.
    new = tmp_path / "new"
    assert main(["demo", "--output", str(new)]) == 0
    assert capsys.readouterr().out.rstrip().endswith(f"rm -rf {new}")


def test_the_zune_note_is_said_once_per_installation(tmp_path):
    from gulpio_rs._decoder_notes import decoder_note, first_notice

    assert first_notice("nasm was not on PATH", str(tmp_path)) is True
    assert first_notice("nasm was not on PATH", str(tmp_path)) is False
    # Another build's note (another reason) is said again, once.
    assert first_notice("the libjpeg-turbo build failed", str(tmp_path)) is True
    assert first_notice("the libjpeg-turbo build failed", str(tmp_path)) is False
    # Where nothing can be recorded it is not repeated on every import either.
    assert first_notice("x", str(tmp_path / "missing" / "folder")) is False
    note = decoder_note("nasm was not on PATH")
    assert "apt-get install nasm" in note and "release wheel" in note
    assert ".ci/" not in note


def test_ctrl_c_in_any_command_is_one_line_and_130(tmp_path, capsys, monkeypatch):
    from gulpio_rs.cli import ls

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(ls, "run", interrupted)
    _dataset(tmp_path)
    assert main(["ls", str(tmp_path)]) == 130
    assert capsys.readouterr().err == "gulpio ls: interrupted\n"
