"""The one atomic JSON writer (python/gulpio_rs/_atomic.py)."""

from __future__ import annotations

import json
import os
import threading

import pytest

from gulpio_rs._atomic import write_json_atomically


def test_replaces_the_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"old": 1}')
    assert write_json_atomically(path, {"new": 2}, indent=1) is True
    assert json.loads(path.read_text()) == {"new": 2}
    assert os.listdir(tmp_path) == ["x.json"]


def test_a_failed_dump_keeps_the_old_file(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"old": 1}')
    with pytest.raises(TypeError):
        write_json_atomically(path, {"new": object()})
    assert json.loads(path.read_text()) == {"old": 1}
    assert os.listdir(tmp_path) == ["x.json"]


def test_exclusive_creates_only_once(tmp_path):
    path = tmp_path / "plan.json"
    assert write_json_atomically(path, {"first": True}, exclusive=True) is True
    assert write_json_atomically(path, {"first": False}, exclusive=True) is False
    assert json.loads(path.read_text()) == {"first": True}
    assert os.listdir(tmp_path) == ["plan.json"]


def test_concurrent_writers_of_one_file_do_not_collide(tmp_path):
    # A fixed temporary name (repair's old `quarantine.json.tmp`) makes writers rename each
    # other's temporaries away: FileNotFoundError, or a file holding two writers' bytes.
    path = tmp_path / "quarantine.json"
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(100):
                write_json_atomically(path, {"writer": n, "i": i, "pad": "x" * 4096}, indent=1)
        except BaseException as e:  # noqa: BLE001 (reported by the main thread)
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert json.loads(path.read_text())["i"] == 99
    assert os.listdir(tmp_path) == ["quarantine.json"]
