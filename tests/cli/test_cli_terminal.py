"""What the CLI puts on a terminal: ids, labels and messages from the data are escaped in human
output (an id must not clear the screen or forge a line), ``--json`` stays exact, and a reader
that goes away (``| head -1``) ends a command quietly, as it ends ``ls`` or ``cat``."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys

import pytest

from gulpio_rs import GulpChunk
from gulpio_rs.cli import main

# Ids and labels anyone may have written: a screen clear, a newline that would start a forged
# line, a carriage return, a bidi override, a C1 control (CSI), a line separator.
HOSTILE_IDS = ["\x1b[2Jclear", "fake\nall intact", "cr\rid", "\u202eevil", "c1\x9b31m", "ls\u2028x"]
LABELS = ["\x1b]0;title\x07", "two\nlines", "ok", "\u2066iso\u2069", "del\x7f", "\u200frlm"]
# What must never reach a terminal (newlines only as line ends; checked per line).
UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")


# A directory name is data too (paths appear in check, repair, info, show and error lines).
DIR_NAME = "gulps\x1b[2J\nall intact"
SHOWN_DIR = "gulps\\x1b[2J\\nall intact"


@pytest.fixture
def hostile(tmp_path, make_frame):
    root = tmp_path / DIR_NAME
    root.mkdir()
    chunk = GulpChunk(root / "data_0.gulp", root / "meta_0.gmeta")
    with chunk.open("wb"):
        for k, (id_, label) in enumerate(zip(HOSTILE_IDS, LABELS, strict=True)):
            chunk.append(id_, {"label": label}, [make_frame(8, 8, seed=k) for _ in range(2)])
    return root


def lines_of(text: str) -> list[str]:
    lines = text.split("\n")
    assert lines[-1] == ""  # every line ends with a newline
    for line in lines[:-1]:
        assert not UNSAFE.search(line), repr(line)
    return lines[:-1]


def test_ls_prints_one_escaped_line_per_id(hostile, capsys):
    assert main(["ls", str(hostile)]) == 0
    lines = lines_of(capsys.readouterr().out)
    assert lines == [
        "\\x1b[2Jclear",
        "fake\\nall intact",
        "cr\\rid",
        "\\u202eevil",
        "c1\\x9b31m",
        "ls\\u2028x",
    ]


def test_ls_long_escapes_before_aligning(hostile, capsys):
    assert main(["ls", str(hostile), "--long"]) == 0
    lines = lines_of(capsys.readouterr().out)
    assert len(lines) == 1 + len(HOSTILE_IDS)
    assert "\\x1b]0;title\\x07" in lines[1] and "two\\nlines" in lines[2]
    assert "\\u2066iso\\u2069" in lines[4] and "del\\x7f" in lines[5] and "\\u200frlm" in lines[6]
    # The chunk column starts at the same place on every line (widths of the escaped text).
    assert len({line.index("data_0.gulp") for line in lines[1:]}) == 1


def test_ls_json_is_exact_and_terminal_safe(hostile, capsys):
    assert main(["ls", str(hostile), "--json"]) == 0
    out = capsys.readouterr().out
    lines_of(out)
    rows = json.loads(out)
    assert [r["id"] for r in rows] == HOSTILE_IDS
    assert [r["label"] for r in rows] == LABELS


def test_info_escapes_labels_and_json_is_exact(hostile, capsys):
    assert main(["info", str(hostile)]) == 0
    text = "".join(lines_of(capsys.readouterr().out))
    assert "two\\nlines (1)" in text and "\\u200frlm (1)" in text
    assert main(["info", str(hostile), "--json"]) == 0
    out = capsys.readouterr().out
    lines_of(out)
    assert set(json.loads(out)["labels"]) == set(LABELS)


def _damage_first_frame(root, video_id):
    with open(root / "meta_0.gmeta") as f:
        loc = json.load(f)[video_id]["frame_info"][0][0]
    raw = bytearray((root / "data_0.gulp").read_bytes())
    raw[loc + 40] ^= 0xFF
    (root / "data_0.gulp").write_bytes(bytes(raw))


def test_check_and_repair_cannot_forge_lines(hostile, capsys):
    _damage_first_frame(hostile, "fake\nall intact")
    assert main(["check", str(hostile)]) == 1
    lines = lines_of(capsys.readouterr().out)
    (problem,) = [line for line in lines if "CRC mismatch" in line]
    assert problem.startswith(f"{hostile.parent}/{SHOWN_DIR}/data_0.gulp: video 'fake\\nall")
    assert "all intact" not in [line.strip() for line in lines]
    assert lines[-1] == "1 problem found"
    assert main(["repair", str(hostile)]) == 0
    lines = lines_of(capsys.readouterr().out)
    assert lines[0] == (
        f"would rewrite {hostile.parent}/{SHOWN_DIR}/data_0.gulp without its 1 damaged video "
        "'fake\\nall intact' (originals kept in gulpio-quarantine/)"
    )
    report = json.loads(_json(capsys, "check", str(hostile)))
    assert report["problems"][0]["video_id"] == "fake\nall intact"
    assert report["problems"][0]["path"] == str(hostile / "data_0.gulp")


def _json(capsys, *args) -> str:
    main([*args, "--json"])
    out = capsys.readouterr().out
    lines_of(out)
    return out


def test_show_and_error_lines_escape_paths_and_ids(hostile, capsys):
    out_png = hostile / "sheet.png"
    assert main(["show", str(hostile), "\u202eevil", "-o", str(out_png)]) == 0
    assert lines_of(capsys.readouterr().out) == [
        f"{hostile.parent}/{SHOWN_DIR}/sheet.png: 2 of 2 frames of '\\u202eevil'"
    ]
    assert main(["show", str(hostile), "\x1b[31mnope", "-o", str(out_png)]) == 1
    (line,) = lines_of(capsys.readouterr().err)
    # The id escaped; then the hint of where to find the ids.
    assert line.startswith("gulpio show: error: unknown video id '\\x1b[31mnope' ("), line
    assert "\x1b" not in line
    assert main(["index", str(hostile / "missing\r")]) == 1
    assert lines_of(capsys.readouterr().err) == [
        f"gulpio index: error: {hostile.parent}/{SHOWN_DIR}/missing\\r: no such directory"
    ]


def test_a_path_that_is_not_utf8_is_printed_escaped(hostile, tmp_path):
    # A file name with a byte that is not UTF-8 arrives as a lone surrogate (PEP 383): printed
    # escaped, never as a UnicodeEncodeError or a raw byte.
    sheet = os.fsencode(tmp_path) + b"/sheet\xff.png"
    proc = subprocess.run(
        [sys.executable, "-m", "gulpio_rs", "show", str(hostile), "cr\rid", "-o", sheet],
        capture_output=True,
        env={**_env(), "PYTHONUTF8": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == os.fsencode(tmp_path) + b"/sheet\\udcff.png: 2 of 2 frames of 'cr\\rid'\n"


# ------------------------------------------------------------------------------------------
# a reader that goes away
# ------------------------------------------------------------------------------------------
EXIT_SIGPIPE = 128 + signal.SIGPIPE
N_VIDEOS = 3000  # ids and labels of about 60 characters: 180 KB of `ls`, far over a pipe's 64 KB


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    from helpers import synthetic_frame

    from gulpio_rs.utils import img_to_jpeg_bytes

    root = tmp_path_factory.mktemp("big")
    jpeg = img_to_jpeg_bytes(synthetic_frame(8, 8))
    chunk = GulpChunk(root / "data_0.gulp", root / "meta_0.gmeta")
    with chunk.open("wb"):
        for i in range(N_VIDEOS):
            label = f"label_{i:05d}_" + "y" * 48
            chunk.append(f"video_{i:05d}_" + "x" * 48, {"label": label}, [jpeg])
    return root


def _env() -> dict:
    # Only our own messages on stderr (not, say, a decoder warning of a zune-jpeg build).
    return {**os.environ, "PYTHONWARNINGS": "ignore"}


#: command -> how its first line starts
FIRST_LINES = {"ls": b"video_00000_", "ls --long": b"id ", "ls --json": b"[", "info --json": b"{"}


@pytest.mark.parametrize("command", FIRST_LINES)
def test_piped_into_head_it_stops_quietly(big, command):
    name, *options = command.split()
    cmd = [sys.executable, "-m", "gulpio_rs", name, str(big), *options]
    gulpio = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    head = subprocess.Popen(["head", "-1"], stdin=gulpio.stdout, stdout=subprocess.PIPE)
    gulpio.stdout.close()  # head holds the only reading end now
    first, _ = head.communicate(timeout=120)
    err = gulpio.stderr.read()
    gulpio.stderr.close()
    assert gulpio.wait(timeout=120) == EXIT_SIGPIPE, err
    assert err == b""
    assert first.startswith(FIRST_LINES[command]) and first.count(b"\n") == 1


def _closed_pipe_run(cmd: list[str], cwd) -> tuple[int, bytes]:
    """Runs ``cmd`` with stdout a pipe whose reading end is already closed."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            cmd, stdout=write_end, stderr=subprocess.PIPE, cwd=cwd, env=_env(), timeout=300
        )
    finally:
        os.close(write_end)
    return proc.returncode, proc.stderr


def test_every_command_stops_quietly_when_nobody_reads(big, tmp_path):
    module = [sys.executable, "-m", "gulpio_rs"]
    script = [sys.executable, "-c"]
    commands = {
        "ls": [*module, "ls", str(big)],
        "info": [*module, "info", str(big)],
        "check": [*module, "check", str(big)],
        "check --json": [*module, "check", str(big), "--json"],
        "show": [*module, "show", str(big), "video_00001_" + "x" * 48, "-o", "s.png"],
        "repair": [*module, "repair", str(big)],
        "index": [*module, "index", str(big)],
        "demo": [*module, "demo", "-o", str(tmp_path / "demo")],
        "help": [*module, "--help"],
        "ingest --help": [*module, "ingest", "--help"],
        "gulp2_sanity_check": [
            *script,
            "import sys; from gulpio_rs.cli.sanity import main; sys.exit(main([sys.argv[1]]))",
            str(big),
        ],
        "gulp2_video_folder --help": [
            *script,
            "import sys; sys.argv[1:] = ['--help']; from gulpio_rs.cli.gulp2 import video_folder;"
            " video_folder()",
        ],
    }
    outcomes = {name: _closed_pipe_run(cmd, tmp_path) for name, cmd in commands.items()}
    # argparse swallows the EPIPE of a help text longer than the output buffer itself (and
    # then exits 0): quiet too.
    for name in ("help", "gulp2_video_folder --help"):
        if outcomes[name] == (0, b""):
            outcomes[name] = (EXIT_SIGPIPE, b"")
    assert outcomes == {name: (EXIT_SIGPIPE, b"") for name in commands}
