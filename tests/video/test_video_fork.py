"""Forking while another thread reads video segments (docs/RELIABILITY.md, "Forking while
segments are decoded"): every child, whatever the moment of its fork, reads the right frames
and exits, under `os.fork`, multiprocessing's three start methods and a DataLoader.

Before the fix, a child forked while a parent thread was inside the AV1 decoder inherited
`parking_lot`'s table of parked threads with entries for threads it does not have, and died
(SIGSEGV, SIGABRT) or hung on its first segment read."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import threading
import time
import warnings

import numpy as np
import pytest

from gulpio_rs import GulpDirectory

CLIP = 8
FORKS = 40
# A hung child is what the test looks for: far above a clip read (milliseconds), so a slow,
# shared machine never trips it.
CHILD_DEADLINE_S = 120.0


@pytest.fixture(scope="module")
def whole(stored):
    """Each stored video of at least a clip's frames decoded whole, once: the frames every
    clip must equal."""
    gd = GulpDirectory(str(stored))
    return {id_: gd.read(id_) for id_ in gd.keys() if gd.num_frames(id_) >= CLIP}


def _clips(seed: int, whole: dict[str, np.ndarray], n: int) -> list[tuple[str, int]]:
    rng = random.Random(seed)
    ids = sorted(whole)
    out = []
    for _ in range(n):
        id_ = rng.choice(ids)
        out.append((id_, rng.randrange(0, len(whole[id_]) - CLIP + 1)))
    return out


def _read_clips(path: str, seed: int, whole: dict[str, np.ndarray]) -> int:
    """Reads 5 clips and returns the number that differ from the whole-video decode."""
    gd = GulpDirectory(path)
    wrong = 0
    for id_, s in _clips(seed, whole, 5):
        clip = gd.read(id_, frames=slice(s, s + CLIP))
        wrong += not np.array_equal(clip, whole[id_][s : s + CLIP])
    return wrong


class _BackgroundReader:
    """A parent thread reading random 8-frame clips until stopped: a fork lands at any point
    of a read, the AV1 decoder's included."""

    def __init__(self, path: str, whole: dict[str, np.ndarray]):
        self.gd = GulpDirectory(path)
        self.whole = whole
        self.stop = threading.Event()
        self.reads = 0
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        rng = random.Random(7)
        ids = sorted(self.whole)
        while not self.stop.is_set():
            id_ = rng.choice(ids)
            s = rng.randrange(0, len(self.whole[id_]) - CLIP + 1)
            try:
                clip = self.gd.read(id_, frames=slice(s, s + CLIP))
                assert np.array_equal(clip, self.whole[id_][s : s + CLIP])
            except BaseException as e:  # reported by the test, not lost in the thread
                self.errors.append(e)
                return
            self.reads += 1

    def __enter__(self) -> _BackgroundReader:
        # Python 3.12+ warns that forking a threaded process may deadlock: the point here.
        self.quiet = warnings.catch_warnings()
        self.quiet.__enter__()
        warnings.simplefilter("ignore", DeprecationWarning)
        self.thread.start()
        while self.reads == 0 and not self.errors:  # decoding has started
            time.sleep(0.001)
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()
        self.quiet.__exit__(*exc)
        assert not self.errors, self.errors


def _at_random_moments(seed: int, count: int):
    """0 .. count - 1, each after a random pause of up to 20 ms: a fork lands anywhere in a
    read of the background thread."""
    rng = random.Random(seed)
    for k in range(count):
        time.sleep(rng.uniform(0, 0.02))
        yield k


def _wait(pid: int) -> int:
    """The child's exit status; a child still running after the deadline is killed and
    reported as hung."""
    deadline = time.monotonic() + CHILD_DEADLINE_S
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return -1


def _describe(status: int) -> str:
    if status == -1:
        return "hung"
    if os.WIFSIGNALED(status):
        return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit {os.WEXITSTATUS(status)}"


def test_os_fork_during_segment_reads(stored, whole):
    path = str(stored)
    outcomes = []
    with _BackgroundReader(path, whole):
        for k in _at_random_moments(1, FORKS):
            pid = os.fork()
            if pid == 0:
                code = 3
                try:
                    code = 1 if _read_clips(path, k, whole) else 0
                finally:
                    os._exit(code)
            outcomes.append(_wait(pid))
    bad = [(k, _describe(s)) for k, s in enumerate(outcomes) if s != 0]
    assert not bad, f"{len(bad)} of {FORKS} children failed: {bad}"


def _child(path: str, seed: int, whole: dict[str, np.ndarray]) -> None:
    if _read_clips(path, seed, whole):
        raise SystemExit(1)


# fork is the case that failed; spawn and forkserver start clean interpreters (nothing of
# the parent's threads can reach them) and are here so that all three stay right. They cost
# an interpreter start each, hence fewer of them.
@pytest.mark.parametrize("method, count", [("fork", FORKS), ("forkserver", 8), ("spawn", 8)])
def test_multiprocessing_start_methods_during_segment_reads(stored, whole, method, count):
    ctx = multiprocessing.get_context(method)
    path = str(stored)
    procs = []
    with _BackgroundReader(path, whole):
        for k in _at_random_moments(2, count):
            p = ctx.Process(target=_child, args=(path, k, whole))
            p.start()
            procs.append(p)
        for p in procs:
            p.join(CHILD_DEADLINE_S)
    hung = [p for p in procs if p.is_alive()]
    for p in hung:
        p.kill()
        p.join()
    codes = [("hung" if p in hung else p.exitcode) for p in procs]
    assert codes == [0] * count, codes


def test_dataloader_workers_while_a_parent_thread_reads(stored, whole):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from gulpio_rs.torch import GulpVideoDataset

    ids = sorted(whole)
    ds = GulpVideoDataset(str(stored), frames=CLIP, offset="start", target=None, ids=ids)
    with _BackgroundReader(str(stored), whole):
        for _ in range(3):  # new forked workers each epoch
            loader = DataLoader(
                ds,
                batch_size=1,
                num_workers=2,
                multiprocessing_context="fork",
                timeout=CHILD_DEADLINE_S,
            )
            seen = 0
            for i, clip in enumerate(loader):
                expected = torch.from_numpy(whole[ids[i]][:CLIP]).permute(0, 3, 1, 2)
                assert torch.equal(clip[0], expected), ids[i]
                seen += 1
            assert seen == len(ids)
