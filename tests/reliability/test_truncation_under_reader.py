"""A ``.gulp`` cut short while a reader has the directory open (another tool truncating it, or
``cp`` over it, which truncates first): every read of a frame past the cut raises
``FormatError`` naming the file, the video and the frame; frames before the cut still read.
No SIGBUS, no bare ``OSError``. The reader runs in a child process, so a SIGBUS fails the test
instead of killing pytest. docs/RELIABILITY.md, docs/REMOTE.md."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from gulpio_rs import GulpChunk

READER = textwrap.dedent(
    """
    import json, os, sys
    from gulpio_rs import FormatError, GulpDirectory
    root, io = sys.argv[1], sys.argv[2]
    gd = GulpDirectory(root, io=None if io == "default" else io)
    ids = gd.keys()
    gd.read_batch(ids)  # everything opened and read once
    [bytes(v) for i in ids for v in gd.frame_bytes(i)]
    data = os.path.join(root, "data_0.gulp")
    os.truncate(data, os.path.getsize(data) // 2)
    out = {}
    for id_ in ids:
        got = []
        for read in (
            lambda: gd.read(id_),
            lambda: gd[id_],
            lambda: [bytes(v) for v in gd.frame_bytes(id_)],
            lambda: gd.read_batch([id_]),
        ):
            try:
                read()
                got.append("ok")
            except FormatError as e:
                got.append(["FormatError", e.path, str(e)])
        out[id_] = got
    try:
        gd.read_batch(ids)
        out["batch"] = "ok"
    except FormatError as e:
        out["batch"] = ["FormatError", e.path, str(e)]
    print(json.dumps(out))
    """
)


@pytest.mark.parametrize("io", ["default", "pread"])
def test_a_data_file_cut_under_a_live_reader_is_a_format_error(tmp_path, io):
    chunk = GulpChunk(tmp_path / "data_0.gulp", tmp_path / "meta_0.gmeta")
    rng = np.random.default_rng(0)
    with chunk.open("wb"):
        for v in range(6):
            frames = [rng.integers(0, 256, (32, 48, 3), dtype=np.uint8) for _ in range(4)]
            chunk.append(f"v{v}", {"v": v}, frames)
    done = subprocess.run(
        [sys.executable, "-c", READER, str(tmp_path), io],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != -signal.SIGBUS, "the reader was killed by SIGBUS"
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout)
    data = str(tmp_path / "data_0.gulp")
    assert got["v0"] == ["ok"] * 4  # before the cut
    cut = [i for i in (f"v{v}" for v in range(6)) if got[i] != ["ok"] * 4]
    assert cut == ["v3", "v4", "v5"] or cut == ["v2", "v3", "v4", "v5"], got
    for id_ in cut[-2:]:  # wholly past the cut: every way of reading fails the same way
        for kind, path, message in got[id_]:
            assert kind == "FormatError" and path == data
            assert f'video "{id_}" frame' in message and "truncated: " in message, message
    assert got["batch"][0] == "FormatError" and "truncated: " in got["batch"][2]
