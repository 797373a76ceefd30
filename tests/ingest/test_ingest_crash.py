"""Interrupted ingests and their restart (python/gulpio_rs/ingest/).

An ingest running in a child process is killed with SIGKILL at a seeded random moment while
its chunks are being written (num_workers 1 and 2); running it again with the same arguments
must finish the job without rewriting the chunks finished before the kill and without
duplicating ids, and since the output is deterministic the result must be byte-identical to a
clean ingest. Also: an adapter raising KeyboardInterrupt midway, and restarts in a new
process.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import pytest
from helpers import synthetic_frame

from gulpio_rs import GulpChunk, GulpDirectory, GulpIngestor
from gulpio_rs.errors import BrokenChunkWarning

MODULE = "ingest_crash_adapters"
N, VPC, FRAMES = 36, 3, 2  # 12 chunks
CHUNKS = N // VPC
DELAY_ENV = "GULPIO_TEST_INGEST_DELAY"  # slows the child down; not part of the adapter
DELAY = 0.02  # s per video in the children that are killed

ADAPTERS = (
    textwrap.dedent(
        """
    import os
    import time

    import numpy as np

    from gulpio_rs.adapters import AbstractDatasetAdapter

    """
    )
    + inspect.getsource(synthetic_frame)
    + textwrap.dedent(
        f"""

    class Synth(AbstractDatasetAdapter):
        \"\"\"Deterministic videos c0..c(n-1). Records the pids that read it in `pid_dir`, and
        raises KeyboardInterrupt at video `interrupt_at` while the file `trigger` exists.\"\"\"

        def __init__(self, n, pid_dir=None, trigger=None, interrupt_at=None):
            self.n, self.pid_dir = n, pid_dir
            self.trigger, self.interrupt_at = trigger, interrupt_at

        def __len__(self):
            return self.n

        def iter_data(self, slice_element=None):
            if self.pid_dir is not None:
                open(os.path.join(self.pid_dir, str(os.getpid())), "w").close()
            delay = float(os.environ.get("{DELAY_ENV}", "0"))
            for i in range(self.n)[slice_element or slice(None)]:
                if i == self.interrupt_at and os.path.exists(self.trigger):
                    raise KeyboardInterrupt
                time.sleep(delay)
                frames = [synthetic_frame(48, 64, seed=1000 * i + k) for k in range({FRAMES})]
                yield {{"id": f"c{{i}}", "meta": {{"i": i}}, "frames": frames}}


    class Labelled(Synth):
        \"\"\"An adapter holding a set (iteration order depends on PYTHONHASHSEED).\"\"\"

        def __init__(self, n):
            super().__init__(n)
            self.labels = {{"walking", "running", "jumping", "sitting", "eating", "waving"}}
    """
    )
)

CHILD = textwrap.dedent(
    """
    import json, multiprocessing, sys, warnings
    sys.path.insert(0, sys.argv[1])
    import {module} as adapters
    from gulpio_rs import GulpIngestor
    if __name__ == "__main__":  # (spawned workers import this file again)
        job = json.loads(sys.argv[2])
        if job.get("start_method"):
            multiprocessing.set_start_method(job["start_method"])
        adapter = getattr(adapters, job["class"])(**job["args"])
        warnings.simplefilter("ignore")
        r = GulpIngestor(adapter, job["out"], job["vpc"], job["nw"], progress=False)()
        print(json.dumps({{"written": r.chunks_written, "resumed": r.chunks_resumed,
                          "videos": r.videos, "failures": r.failures}}))
    """
).format(module=MODULE)


# ------------------------------------------------------------------------------------------
# fixtures and helpers
# ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """The adapter module (written for the children, imported here too) and a clean
    reference ingest of Synth(N)."""
    folder = tmp_path_factory.mktemp("ingest-crash")
    (folder / f"{MODULE}.py").write_text(ADAPTERS)
    (folder / "child.py").write_text(CHILD)
    sys.path.insert(0, str(folder))
    try:
        sys.modules.pop(MODULE, None)
        module = importlib.import_module(MODULE)
    finally:
        sys.path.remove(str(folder))
    reference = folder / "reference"
    report = GulpIngestor(module.Synth(N), reference, VPC, 1, progress=False)()
    assert (report.videos, report.chunks_written, report.failures) == (N, CHUNKS, [])
    gd = GulpDirectory(reference)
    frames, meta = gd["c5"]
    for got, k in zip(frames, range(FRAMES), strict=True):  # q90 4:2:0 of the adapter's frame
        want = synthetic_frame(48, 64, seed=5000 + k).astype(int)
        assert abs(got.astype(int) - want).mean() < 12
    assert meta == {"i": 5}
    yield folder, module, reference
    sys.modules.pop(MODULE, None)


def chunk_files(folder) -> dict[str, bytes]:
    return {
        n: (Path(folder) / n).read_bytes()
        for n in sorted(os.listdir(folder))
        if not n.startswith(".") and (Path(folder) / n).is_file()
    }


def temporaries(folder) -> list[str]:
    return [n for n in os.listdir(folder) if n.startswith(".gulpio-tmp")]


def finished_chunks(folder) -> dict[str, tuple[int, int]]:
    """(inode, mtime) of the files of every chunk that is completely published: data, meta
    and a matching index."""
    out = {}
    for k in range(CHUNKS):
        names = [f"data_{k}.gulp", f"meta_{k}.gmeta", f"data_{k}.gidx"]
        paths = [Path(folder) / n for n in names]
        if not all(p.exists() for p in paths):
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                ok = GulpChunk(paths[0], paths[1]).indexed
            except Exception:  # noqa: BLE001 - anything unreadable is unfinished
                ok = False
        if ok and not caught:
            for n, p in zip(names, paths, strict=True):
                st = os.stat(p)
                out[n] = (st.st_ino, st.st_mtime_ns)
    return out


def alive(pid: int) -> bool:
    """True unless the process is gone or a zombie (a dead orphan nobody reaped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def wait_dead(pids, timeout: float) -> list[int]:
    """Waits up to `timeout` s for the processes to end; returns those still alive."""
    deadline = time.monotonic() + timeout
    while (left := [p for p in pids if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.02)
    return left


def gone(pid: int) -> bool:
    """True once the process is reaped (a zombie still holds its pid)."""
    return not os.path.exists(f"/proc/{pid}")


def start_child(folder, job: dict, stdout=subprocess.PIPE, **env) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(folder / "child.py"), str(folder), json.dumps(job)],
        stdout=stdout,
        text=True,
        start_new_session=True,
        env={**os.environ, **env},
    )


def wait_for(predicate, proc: subprocess.Popen | None = None, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc is not None and proc.poll() is not None:
            return
        if time.monotonic() > deadline:  # a hang guard, not a speed check
            pytest.fail(f"gave up waiting after {timeout} s")
        time.sleep(0.005)


def check_finished_job(report, out, reference, finished_before) -> None:
    """The restart finished the job: nothing finished before was rewritten, every video is
    there once, and the files are those of a clean ingest."""
    assert report.failures == []
    assert (report.videos, report.frames) == (N, N * FRAMES)
    assert report.chunks_resumed == len(finished_before) // 3
    assert report.chunks_written == CHUNKS - report.chunks_resumed
    after = finished_chunks(out)
    assert {n: after.get(n) for n in finished_before} == finished_before
    assert temporaries(out) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error", BrokenChunkWarning)
        keys = GulpDirectory(out).keys()
    assert keys == [f"c{i}" for i in range(N)]  # each once, in order
    assert chunk_files(out) == chunk_files(reference)


# ------------------------------------------------------------------------------------------
# SIGKILL at a random moment, then the same ingest again
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(10))
def test_sigkill_at_a_random_moment_then_restart(tmp_path, env, seed):
    folder, module, reference = env
    rng = random.Random(seed)
    num_workers = 1 + seed % 2
    out = tmp_path / "out"
    job = {"class": "Synth", "args": {"n": N}, "out": str(out), "vpc": VPC, "nw": num_workers}
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    job["args"]["pid_dir"] = str(pid_dir)
    proc = start_child(folder, job, **{DELAY_ENV: str(DELAY)})
    try:
        # Chunks are being written once a temporary or published data file shows up.
        wait_for(
            lambda: (
                out.is_dir()
                and any(n.startswith((".gulpio-tmp.data_", "data_")) for n in os.listdir(out))
            ),
            proc,
        )
        # The adapter alone sleeps N * DELAY / num_workers s: kill within 80% of that.
        time.sleep(rng.uniform(0.02, 0.8 * N * DELAY / num_workers))
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the whole job, as a scheduler would
        except ProcessLookupError:
            pass
        proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "the ingest finished before it was killed"
    # Orphaned pool workers die with the group but are reaped by init, which here takes a
    # moment; until then their pids look alive and their temporaries are (rightly) kept, see
    # test_temporaries_of_a_zombie_writer_are_removed.
    pids = [int(p.name) for p in pid_dir.iterdir()]
    wait_for(lambda: all(gone(p) for p in pids), timeout=20.0)

    finished = finished_chunks(out)
    assert len(finished) // 3 < CHUNKS
    # The same ingest again (in this process; the adapter is equal, not the same object).
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing skipped, nothing broken
        report = GulpIngestor(
            module.Synth(N, pid_dir=str(pid_dir)), out, VPC, num_workers, progress=False
        )()
    check_finished_job(report, out, reference, finished)
    # and once more: nothing left to do
    again = GulpIngestor(module.Synth(N, pid_dir=str(pid_dir)), out, VPC, 1, progress=False)()
    assert (again.chunks_written, again.chunks_resumed) == (0, CHUNKS)


# ------------------------------------------------------------------------------------------
# KeyboardInterrupt raised by the adapter
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("num_workers", [1, 2])
def test_keyboard_interrupt_in_the_adapter_then_restart(tmp_path, env, num_workers):
    _, module, reference = env
    out, trigger = tmp_path / "out", tmp_path / "interrupt"
    trigger.touch()
    interrupt_at = 2 * VPC + 1  # in chunk 2

    def ingest():
        adapter = module.Synth(N, trigger=str(trigger), interrupt_at=interrupt_at)
        return GulpIngestor(adapter, out, VPC, num_workers, progress=False)()

    with pytest.raises(KeyboardInterrupt):
        ingest()
    names = set(chunk_files(out))
    assert not {"data_2.gulp", "meta_2.gmeta", "data_2.gidx"} & names  # not published
    assert temporaries(out) == []
    finished = finished_chunks(out)
    assert len(finished) == len(names)  # whatever was published is complete
    if num_workers == 1:  # chunks 0 and 1 were done before the interrupt
        assert set(finished) == {
            f"{name}_{k}.{ext}"
            for k in (0, 1)
            for name, ext in (("data", "gulp"), ("data", "gidx"), ("meta", "gmeta"))
        }
    trigger.unlink()
    report = ingest()
    assert report.chunks_resumed > 0 or num_workers > 1
    check_finished_job(report, out, reference, finished)


# ------------------------------------------------------------------------------------------
# what a kill of the main process alone leaves running
# ------------------------------------------------------------------------------------------
# forkserver: the workers' parent is the fork server, not the ingest (Python 3.14's default).
@pytest.mark.parametrize("start_method", ["fork", "spawn", "forkserver"])
def test_workers_do_not_outlive_a_killed_ingest(tmp_path, env, start_method):
    folder, _, _ = env
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    job = {
        "class": "Synth",
        "args": {"n": N, "pid_dir": str(pid_dir)},
        "out": str(tmp_path / "out"),
        "vpc": VPC,
        "nw": 2,
        "start_method": start_method,
    }
    # stdout not piped: orphans holding the pipe would keep it open
    proc = start_child(folder, job, stdout=subprocess.DEVNULL, **{DELAY_ENV: str(DELAY)})
    workers: list[int] = []
    try:
        wait_for(lambda: len(os.listdir(pid_dir)) >= 2, proc)
        workers = [int(p.name) for p in pid_dir.iterdir()]
        os.kill(proc.pid, signal.SIGKILL)  # the main process only (kill -9 <pid>)
        proc.wait(timeout=30)
        survivors = wait_dead(workers, 60.0)  # a hang guard, not a speed check
    finally:
        for pid in workers:  # our own grandchildren, by pid
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        wait_dead(workers, 10.0)
    assert proc.returncode == -signal.SIGKILL
    assert len(workers) == 2 and proc.pid not in workers
    assert survivors == []
    assert_nothing_half_published(tmp_path / "out")


# A child whose worker processes stop right after the fork, before multiprocessing runs
# anything in them (the pool's initializer included): each records its pid, then waits there.
HELD_CHILD = textwrap.dedent(
    """
    import json, multiprocessing, os, sys, time, warnings
    sys.path.insert(0, sys.argv[1])
    import {module} as adapters
    from gulpio_rs import GulpIngestor
    job = json.loads(sys.argv[2])

    def hold_new_process():
        open(os.path.join(job["held"], str(os.getpid())), "w").close()
        time.sleep(job["hold"])

    multiprocessing.set_start_method("fork")  # workers are forks of this process
    os.register_at_fork(after_in_child=hold_new_process)
    warnings.simplefilter("ignore")
    adapter = getattr(adapters, job["class"])(**job["args"])
    GulpIngestor(adapter, job["out"], job["vpc"], job["nw"], progress=False)()
    """
).format(module=MODULE)


def test_workers_killed_with_the_ingest_before_they_start_end_too(tmp_path, env):
    """The main process SIGKILLed while its 2 workers are still starting: when they get to
    run, their parent is already gone (they were reparented), and they must notice that
    rather than wait for work forever or do some."""
    folder, _, _ = env
    (folder / "held_child.py").write_text(HELD_CHILD)
    held, out = tmp_path / "held", tmp_path / "out"
    held.mkdir()
    job = {"class": "Synth", "args": {"n": N}, "out": str(out), "vpc": VPC, "nw": 2}
    job.update(held=str(held), hold=2.0)
    proc = subprocess.Popen(
        [sys.executable, str(folder / "held_child.py"), str(folder), json.dumps(job)],
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    workers: list[int] = []
    try:
        wait_for(lambda: len(os.listdir(held)) >= 2, proc)
        workers = [int(p.name) for p in held.iterdir()]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        survivors = wait_dead(workers, 60.0)  # a hang guard: they end once the hold is over
    finally:
        for pid in workers:  # our own grandchildren, by pid
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        wait_dead(workers, 10.0)
    assert proc.returncode == -signal.SIGKILL
    assert len(workers) == 2 and proc.pid not in workers
    assert survivors == []
    assert_nothing_half_published(out)


def assert_nothing_half_published(out) -> None:
    """What a killed ingest left is safe to read: every chunk a reader uses is completely
    published and reads back with its CRCs; the only other trace may be a data file whose
    publication was cut before its meta file (skipped with a warning; never visible)."""
    if not out.exists() or not any(n.endswith(".gulp") for n in os.listdir(out)):
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gd = GulpDirectory(out)
    for w in caught:
        assert "has a data file but no meta file" in str(w.message), w.message
    finished = finished_chunks(out)
    for chunk in gd.chunks():
        assert os.path.basename(chunk.data_file_path) in finished
    for id_ in gd.keys():
        assert len(gd.frame_bytes(id_)) == FRAMES


# ------------------------------------------------------------------------------------------
# a restart in a new process
# ------------------------------------------------------------------------------------------
def test_restart_in_a_new_process_writes_nothing(tmp_path, env):
    folder, _, reference = env
    job = {"class": "Synth", "args": {"n": N}, "out": str(tmp_path / "out"), "vpc": VPC, "nw": 1}
    results = []
    for _ in range(2):
        proc = start_child(folder, job)
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        results.append(json.loads(out))
    assert [(r["written"], r["resumed"]) for r in results] == [(CHUNKS, 0), (0, CHUNKS)]
    assert chunk_files(tmp_path / "out") == chunk_files(reference)


def test_restart_of_an_adapter_holding_a_set_in_a_new_process(tmp_path, env):
    folder, _, _ = env
    job = {"class": "Labelled", "args": {"n": 4}, "out": str(tmp_path / "out"), "vpc": 2, "nw": 1}
    results = []
    for seed in ("1", "2"):
        proc = start_child(folder, job, PYTHONHASHSEED=seed)
        out, _ = proc.communicate(timeout=120)
        assert proc.returncode == 0
        results.append(json.loads(out))
    assert results[0] == {"written": 2, "resumed": 0, "videos": 4, "failures": []}
    assert results[1] == {"written": 0, "resumed": 2, "videos": 4, "failures": []}


def test_temporaries_of_a_zombie_writer_are_removed(tmp_path, env):
    _, module, _ = env
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])  # not waited for: a zombie
    try:
        wait_for(lambda: not alive(zombie.pid), timeout=30.0)
        assert not gone(zombie.pid)  # dead, but its pid is still taken
        out = tmp_path / "out"
        out.mkdir()
        leftover = out / f".gulpio-tmp.data_0.gulp.{zombie.pid}-0"
        leftover.write_bytes(b"x" * 100)  # what a killed writer leaves
        GulpIngestor(module.Synth(2), out, 2, 1, progress=False)()
        assert temporaries(out) == []
    finally:
        zombie.wait()
