"""Several writers add chunks to one directory at once (processes and threads, through
``new_chunks(1)`` + ``open('wb')`` + ``append``), on a local disk and in an S3 bucket: every
video a writer was told is published is readable afterwards, with its own frames and metadata,
and no chunk is torn (data of one writer, meta of another). Writers of one chunk exclude each
other. docs/FORMAT.md §4 and §4a.

The writers take their chunk's number before a barrier and publish after it, so they all
start from the same number: the case where publication used to replace another writer's
chunk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings
import zlib

import numpy as np
import pytest

from gulpio_rs import (
    GulpChunk,
    GulpDirectory,
    WriteConflictError,
)
from gulpio_rs.cli.check import verify

WRITER = textwrap.dedent(
    """
    import json, os, sys, threading, time, warnings, zlib
    import numpy as np
    from gulpio_rs import GulpDirectory
    warnings.simplefilter("ignore")
    root, tag, threads, rounds, sync = sys.argv[1:6]
    threads, rounds = int(threads), int(rounds)
    options = json.loads(sys.argv[6]) if len(sys.argv) > 6 else None
    printing = threading.Lock()

    def wait_for(path):
        deadline = time.monotonic() + 120
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                raise TimeoutError(path)
            time.sleep(0.002)

    def write(t):
        name = f"{tag}t{t}"
        for r in range(rounds):
            gd = GulpDirectory(root, storage_options=options)
            chunk = next(gd.new_chunks(1))
            open(os.path.join(sync, f"ready-{r}-{name}"), "w").close()
            wait_for(os.path.join(sync, f"go-{r}"))
            ids = [f"{name}r{r}v{v}" for v in range(2)]
            with chunk.open("wb"):
                for id_ in ids:
                    value = zlib.crc32(id_.encode()) % 200 + 20
                    frames = [np.full((16, 24, 3), value, np.uint8)] * 3
                    chunk.append(id_, {"writer": name, "round": r}, frames)
            with printing:  # acknowledged: the `with` block ended without an error
                print(json.dumps(ids), flush=True)

    workers = [threading.Thread(target=write, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    """
)

PROCESSES, THREADS, ROUNDS = 3, 2, 2


def _run_writers(root: str, sync, options=None) -> list[str]:
    """Runs the writers with a barrier per round; returns every acknowledged video id."""
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    extra = [json.dumps(options)] if options else []
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, root, f"p{p}", str(THREADS), str(ROUNDS), str(sync)]
            + extra,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for p in range(PROCESSES)
    ]
    try:
        for r in range(ROUNDS):
            deadline = time.monotonic() + 180
            while len([n for n in os.listdir(sync) if n.startswith(f"ready-{r}-")]) < (
                PROCESSES * THREADS
            ):
                assert all(p.poll() is None for p in procs), "a writer died"
                assert time.monotonic() < deadline, "writers did not get ready"
                time.sleep(0.01)
            (sync / f"go-{r}").touch()
        outs = [p.communicate(timeout=300)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in procs] == [0] * PROCESSES
    acknowledged = [i for out in outs for line in out.splitlines() for i in json.loads(line)]
    assert len(acknowledged) == PROCESSES * THREADS * ROUNDS * 2
    return acknowledged


def _assert_everything_readable(gd: GulpDirectory, acknowledged: list[str]) -> None:
    assert gd.problems == []  # no data without meta, no torn or damaged chunk
    assert sorted(gd.keys()) == sorted(acknowledged)
    assert gd.num_chunks == PROCESSES * THREADS * ROUNDS
    for id_ in acknowledged:
        clip = gd.read(id_)  # frame CRCs checked against the index
        value = zlib.crc32(id_.encode()) % 200 + 20
        assert clip.shape == (3, 16, 24, 3)
        assert np.abs(clip.astype(int) - value).max() <= 2, id_
        meta = gd.meta(id_)
        assert id_.startswith(meta["writer"]) and meta["round"] == int(id_.split("r")[-1][0])
    # Each chunk holds the videos of one writer: its data and meta come from the same write.
    for chunk in gd.chunks():
        writers = {gd.meta(i)["writer"] for i in chunk.keys()}
        assert len(writers) == 1, writers


def test_writers_through_new_chunks_never_replace_each_other(tmp_path):
    root, sync = tmp_path / "ds", tmp_path / "sync"
    root.mkdir()
    sync.mkdir()
    acknowledged = _run_writers(str(root), sync)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gd = GulpDirectory(str(root))
    _assert_everything_readable(gd, acknowledged)
    report = verify(str(root))
    assert report["ok"], report["problems"]
    assert not [n for n in os.listdir(root) if n.startswith(".gulpio-tmp.")]


def test_writers_of_an_s3_directory_never_replace_each_other(tmp_path, s3_server, fault_proxy):
    # s3s-fs checks If-None-Match and then writes (two creates of one key at once can both
    # succeed there); real object stores decide in one step, which the proxy restores.
    proxy = fault_proxy(s3_server.endpoint, atomic_conditional_puts=True)
    options = s3_server.storage_options(endpoint=proxy.url)
    url = f"s3://{s3_server.make_bucket()}/shared"
    sync = tmp_path / "sync"
    sync.mkdir()
    acknowledged = _run_writers(url, sync, options)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gd = GulpDirectory(url, storage_options=s3_server.storage_options())
    _assert_everything_readable(gd, acknowledged)


def _write(chunk, ids, value=50):
    for id_ in ids:
        chunk.append(id_, {"id": id_}, [np.full((16, 24, 3), value, np.uint8)] * 2)


def test_a_new_chunk_whose_number_was_taken_takes_the_next(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gd = GulpDirectory(tmp_path)
    first, second = next(gd.new_chunks(1)), next(gd.new_chunks(1))
    assert first.data_file_path == second.data_file_path == os.path.join(tmp_path, "data_0.gulp")
    with first.open("wb"):
        _write(first, ["a"])
    with second.open("wb"):
        _write(second, ["b"])
    assert second.data_file_path == os.path.join(tmp_path, "data_1.gulp")
    assert second.meta_file_path == os.path.join(tmp_path, "meta_1.gmeta")
    assert GulpDirectory(tmp_path).keys() == ["a", "b"]
    # Its number is final once published: appending goes to the same chunk.
    with second.open("ab"):
        _write(second, ["c"])
    assert sorted(GulpChunk(tmp_path / "data_1.gulp", tmp_path / "meta_1.gmeta").keys()) == [
        "b",
        "c",
    ]


def test_an_explicit_chunk_published_meanwhile_is_a_conflict(tmp_path):
    paths = (tmp_path / "data_0.gulp", tmp_path / "meta_0.gmeta")
    mine, theirs = GulpChunk(*paths), GulpChunk(*paths)
    with pytest.raises(WriteConflictError, match="published this chunk first"):
        with mine.open("wb"):
            _write(mine, ["mine"])
            with theirs.open("wb"):
                _write(theirs, ["theirs"])
    assert GulpDirectory(tmp_path).keys() == ["theirs"]
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".gulpio-tmp.")]


@pytest.mark.parametrize("second_mode", ["ab", "wb"])
def test_one_chunk_has_one_writer_at_a_time(tmp_path, second_mode):
    paths = (tmp_path / "data_0.gulp", tmp_path / "meta_0.gmeta")
    with GulpChunk(*paths).open("wb") as _:
        pass
    first = GulpChunk(*paths)
    with first.open("ab"):
        _write(first, ["first"])
        second = GulpChunk(*paths)
        with pytest.raises(WriteConflictError, match="another writer"):
            with second.open(second_mode):
                _write(second, ["second"])
    assert GulpDirectory(tmp_path).keys() == ["first"]
    # Once the first is done, the next writer works.
    with GulpChunk(*paths).open("ab"):
        pass


def test_threads_appending_to_one_chunk_lose_nothing(tmp_path):
    """Writers that wait their turn (retrying the conflict) all get their videos in."""
    paths = (tmp_path / "data_0.gulp", tmp_path / "meta_0.gmeta")
    with GulpChunk(*paths).open("wb"):
        pass
    done, errors = [], []

    def append(t):
        for _ in range(2000):
            chunk = GulpChunk(*paths)
            try:
                with chunk.open("ab"):
                    _write(chunk, [f"t{t}"], value=30 + t)
            except WriteConflictError:
                time.sleep(0.001)
                continue
            except BaseException as e:
                errors.append(e)
            done.append(t)
            return

    threads = [threading.Thread(target=append, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and sorted(done) == list(range(6))
    gd = GulpDirectory(tmp_path)
    assert sorted(gd.keys()) == [f"t{t}" for t in range(6)]
    for t in range(6):
        assert np.abs(gd.read(f"t{t}").astype(int) - (30 + t)).max() <= 2
