"""Ctrl-C during an ingest (issue 27), with a real SIGINT to a real process: one line and exit
130 from `gulpio ingest` (no traceback, from the main process or a worker), `KeyboardInterrupt`
from the API once the workers have stopped, no worker left publishing chunks, and a rerun of
the same command that finishes the job."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from gulpio_rs import GulpDirectory
from gulpio_rs.ingest.locks import pid_alive

ADAPTER = '''
import os
import time

import numpy as np
from gulpio_rs.adapters import AbstractDatasetAdapter


class Slow(AbstractDatasetAdapter):
    """Deterministic one-frame videos, ``delay`` seconds each; every process that produces
    videos leaves its pid in ``pids_dir``."""

    def __init__(self, pids_dir, videos=60, delay=0.1):
        self.pids_dir, self.videos, self.delay = pids_dir, int(videos), float(delay)

    def __len__(self):
        return self.videos

    def iter_data(self, slice_element=None):
        open(os.path.join(self.pids_dir, str(os.getpid())), "w").close()
        for i in range(self.videos)[slice_element or slice(None)]:
            time.sleep(self.delay)
            rng = np.random.default_rng(i)
            frame = rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)
            yield {"id": f"v{i:03d}", "meta": {}, "frames": [frame]}
'''

API = """
import sys
from slow_adapter import Slow
from gulpio_rs import GulpIngestor
try:
    GulpIngestor(Slow({pids!r}), {out!r}, 2, 2, progress=False)()
except KeyboardInterrupt as e:
    print(type(e).__name__, e.report.chunks_written, flush=True)
    sys.exit(7)
print("finished", flush=True)
"""


@pytest.fixture
def slow(tmp_path):
    folder = tmp_path / "adapter"
    folder.mkdir()
    (folder / "slow_adapter.py").write_text(ADAPTER)
    pids = tmp_path / "pids"
    pids.mkdir()
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(folder), os.environ.get("PYTHONPATH", "")])
    )
    return env, pids


def _like_a_terminal() -> None:
    """In the child before exec: SIGINT at its default, as for a terminal's foreground job.
    An ignored SIGINT is inherited across exec (and Python then installs no KeyboardInterrupt
    handler), so the child must not depend on how the test runner's process left it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _published(out) -> set[str]:
    if not out.exists():
        return set()
    return {p.name for p in out.iterdir() if p.name.endswith((".gulp", ".gmeta", ".gidx"))}


def _interrupt_after_first_chunk(proc, out, group: bool) -> None:
    deadline = time.monotonic() + 60
    while not any(n.endswith(".gmeta") for n in _published(out)):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no chunk was published"
        time.sleep(0.02)
    if group:  # what a terminal does: SIGINT to every process of the foreground group
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal(signal.SIGINT)


def _workers_gone(pids, main_pid: int) -> None:
    workers = [int(p.name) for p in pids.iterdir() if int(p.name) != main_pid]
    deadline = time.monotonic() + 10
    while any(pid_alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p for p in workers if pid_alive(p)], "a worker outlived the interrupted ingest"


@pytest.mark.parametrize("workers", [1, 2])
def test_ctrl_c_is_one_line_exit_130_and_a_rerun_finishes(tmp_path, slow, workers):
    env, pids = slow
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "gulpio_rs", "ingest", "--adapter", "slow_adapter:Slow",
           str(pids), str(out), "--videos-per-chunk", "2", "--num-workers", str(workers),
           "--no-progress"]  # fmt: skip
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True, preexec_fn=_like_a_terminal,
    )  # fmt: skip
    try:
        _interrupt_after_first_chunk(proc, out, group=True)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (stdout, stderr)
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert lines[0].startswith("gulpio ingest: interrupted after ")
    assert lines[0].endswith("; rerun the same command to resume")
    _workers_gone(pids, proc.pid)
    # Nothing is published after the command has returned, and what is there reads whole.
    published = _published(out)
    time.sleep(0.5)
    assert _published(out) == published
    gd = GulpDirectory(str(out))
    for i in gd.keys():
        gd.read(i)
    # The same command finishes the job: every video once.
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    gd = GulpDirectory(str(out))
    assert sorted(gd.keys()) == [f"v{i:03d}" for i in range(60)]


def test_api_raises_keyboard_interrupt_once_the_workers_are_stopped(tmp_path, slow):
    env, pids = slow
    out = tmp_path / "out"
    code = API.format(pids=str(pids), out=str(out))
    proc = subprocess.Popen(
        [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, preexec_fn=_like_a_terminal,
    )  # fmt: skip
    try:
        # SIGINT to the main process only: its workers never see it and must be stopped.
        _interrupt_after_first_chunk(proc, out, group=False)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 7, (stdout, stderr)
    name, chunks = stdout.split()
    assert "Traceback" not in stderr, stderr
    _workers_gone(pids, proc.pid)
    published = _published(out)
    # The report counts the chunks this call saw finished (a worker's last one may not have
    # reached it yet).
    assert name == "IngestInterrupted"
    assert int(chunks) <= sum(n.endswith(".gmeta") for n in published)
    time.sleep(0.5)
    assert _published(out) == published
