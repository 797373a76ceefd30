"""Dataset files that are not regular files: a ``.gmeta`` that is a symlink to ``/dev/zero``
(endless bytes) and a FIFO in place of any chunk file (an open that blocks until a writer
comes). Each is refused before it is read, with a typed error naming the file; nothing hangs
or reads without bound. Run in child processes with a timeout and an address-space limit, so a
hang or an unbounded read fails the test instead of the machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from gulpio_rs import GulpChunk

CHILD = textwrap.dedent(
    """
    import json, resource, sys, warnings
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
    from gulpio_rs import GulpDirectory, BrokenChunkWarning
    from gulpio_rs.cli.check import verify
    root = sys.argv[1]
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        gd = GulpDirectory(root)
    report = verify(root)
    print(json.dumps({
        "keys": gd.keys(),
        "problems": gd.problems,
        "check": [(p["path"], p["kind"], p["message"]) for p in report["problems"]],
    }))
    """
)


def _dataset(root):
    for k in range(2):
        chunk = GulpChunk(root / f"data_{k}.gulp", root / f"meta_{k}.gmeta")
        with chunk.open("wb"):
            chunk.append(f"v{k}", {"k": k}, [np.full((16, 24, 3), 60, np.uint8)] * 2)


def _open_in_child(root) -> dict:
    try:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(root)],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONFAULTHANDLER": "1"},
        )
    except subprocess.TimeoutExpired:
        pytest.fail("opening or checking the directory hung")
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("name", ["data_1.gulp", "meta_1.gmeta", "data_1.gidx"])
def test_a_fifo_in_place_of_a_chunk_file_is_refused_not_waited_for(tmp_path, name):
    _dataset(tmp_path)
    os.remove(tmp_path / name)
    os.mkfifo(tmp_path / name)
    got = _open_in_child(tmp_path)
    assert "v0" in got["keys"]  # the intact chunk stays readable
    said = [m for p in got["problems"] for m in (p["path"], p["message"])] + [
        m for c in got["check"] for m in (c[0], c[2])
    ]
    text = "\n".join(said)
    assert str(tmp_path / name) in text and "a FIFO" in text, text


def test_a_gmeta_linked_to_dev_zero_is_refused_before_reading(tmp_path):
    _dataset(tmp_path)
    os.remove(tmp_path / "meta_1.gmeta")
    os.remove(tmp_path / "data_1.gidx")
    os.symlink("/dev/zero", tmp_path / "meta_1.gmeta")
    got = _open_in_child(tmp_path)
    assert got["keys"] == ["v0"]
    (problem,) = got["problems"]
    assert problem["path"] == str(tmp_path / "meta_1.gmeta")
    assert "a character device" in problem["message"] and problem["chunk_skipped"]


PYTHON_SIDE = textwrap.dedent(
    """
    import sys
    from gulpio_rs import FormatError, GulpChunk
    from gulpio_rs.serializers import JSONSerializer

    class Serializer(JSONSerializer):  # not the built-in one: gulpio2's way of reading
        pass

    data, meta = sys.argv[1:3]
    chunk = GulpChunk(data, meta)
    try:
        with chunk.open("rb"):
            pass
    except FormatError as e:
        assert e.path == data and "a FIFO" in str(e), e
    else:
        raise AssertionError("open('rb') read a FIFO")
    try:
        GulpChunk(data, meta, Serializer())
    except FormatError as e:
        assert e.path == meta and "a FIFO" in str(e), e
    else:
        raise AssertionError("the serializer read a FIFO")
    """
)


def test_chunk_reads_from_python_refuse_special_files(tmp_path):
    """The Python side's own opens (gulpio2's ``open('rb')``, serializer-based chunks) go
    through the same check."""
    _dataset(tmp_path)
    for name in ("data_1.gulp", "meta_1.gmeta"):
        os.remove(tmp_path / name)
        os.mkfifo(tmp_path / name)
    args = [str(tmp_path / "data_1.gulp"), str(tmp_path / "meta_1.gmeta")]
    try:
        done = subprocess.run(
            [sys.executable, "-c", PYTHON_SIDE, *args], capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        pytest.fail("a read from Python hung on a FIFO")
    assert done.returncode == 0, done.stderr[-3000:]
