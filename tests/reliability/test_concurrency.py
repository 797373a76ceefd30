"""Readers (threads and processes) read a directory while another process publishes new
chunks: they never fail, never see a partial chunk, and see the new chunks after reopening.
Subprocesses run with faulthandler and timeouts, so a deadlock fails loudly."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np

from gulpio_rs import BrokenChunkWarning, GulpChunk, GulpDirectory

WRITER = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    from gulpio_rs import GulpChunk
    root = sys.argv[1]
    for k in range(2, 12):
        chunk = GulpChunk(f"{root}/data_{k}.gulp", f"{root}/meta_{k}.gmeta")
        with chunk.open("wb"):
            for v in range(3):
                frame = np.full((24, 32, 3), 10 * k + v, np.uint8)
                chunk.append(f"k{k}v{v}", {"k": k, "v": v}, [frame] * 4)
        time.sleep(0.05)
    """
)

READER = textwrap.dedent(
    """
    import sys, time, warnings
    from gulpio_rs import GulpDirectory, BrokenChunkWarning
    root, seconds = sys.argv[1], float(sys.argv[2])
    warnings.simplefilter("ignore", BrokenChunkWarning)
    end, reads = time.time() + seconds, 0
    while time.time() < end:
        gd = GulpDirectory(root)
        for id_ in gd.keys():
            frames, meta = gd[id_]
            assert len(frames) == 4
            assert abs(int(frames[0][0, 0, 0]) - (10 * meta["k"] + meta["v"])) <= 1
            reads += 1
    print(reads)
    """
)


def _check_all(root) -> int:
    with warnings.catch_warnings():
        # Between the back-to-back renames of a publication a reader may list a new chunk's
        # data file before its meta file: that chunk is skipped (not seen), never half-read.
        warnings.simplefilter("ignore", BrokenChunkWarning)
        gd = GulpDirectory(root)
    reads = 0
    batch = gd.read_batch(gd.keys())
    for id_, clip in zip(gd.keys(), batch, strict=True):
        meta = gd.meta(id_)
        assert clip.shape == (4, 24, 32, 3)
        assert abs(int(clip[0, 0, 0, 0]) - (10 * meta["k"] + meta["v"])) <= 1
        reads += 1
    return reads


def test_readers_during_publication(tmp_path):
    for k in range(2):
        chunk = GulpChunk(tmp_path / f"data_{k}.gulp", tmp_path / f"meta_{k}.gmeta")
        with chunk.open("wb"):
            for v in range(3):
                chunk.append(
                    f"k{k}v{v}", {"k": k, "v": v}, [np.full((24, 32, 3), 10 * k + v, np.uint8)] * 4
                )
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], env=env)
    readers = [
        subprocess.Popen(
            [sys.executable, "-c", READER, str(tmp_path), "2.0"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    errors: list[BaseException] = []
    counts: list[int] = []

    def thread_reader():
        try:
            end = time.time() + 2.0
            while time.time() < end:
                counts.append(_check_all(tmp_path))
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=thread_reader) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a reader thread hung"
    assert errors == []
    assert writer.wait(timeout=60) == 0
    for r in readers:
        out, err = r.communicate(timeout=60)
        assert r.returncode == 0, err
        assert int(out) > 0
    assert counts and min(counts) >= 6
    # After the writer is done, a reopened directory sees every chunk.
    assert _check_all(tmp_path) == 12 * 3
