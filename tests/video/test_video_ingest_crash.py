"""An ``encoding="video"`` ingest killed with SIGKILL at a random moment (in a child process,
one and two workers), then run again with the same arguments: the rerun finishes the job
without rewriting what was finished, and the result is byte for byte a clean ingest (the
encoder is deterministic), every segment checked by ``gulpio check --decode``."""

from __future__ import annotations

import inspect
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from helpers import synthetic_frame

from gulpio_rs import GulpDirectory, GulpIngestor
from gulpio_rs.cli import main

N, VPC, FRAMES = 8, 2, 20  # 4 chunks of 2 videos, 2 segments each (gop 16)
DELAY_ENV = "GULPIO_TEST_VIDEO_INGEST_DELAY"  # slows the child; not part of the adapter
DELAY = 0.15  # s per video in the child that is killed

ADAPTER = (
    "import os, time\nimport numpy as np\n\n"
    + inspect.getsource(synthetic_frame)
    + textwrap.dedent(
        f"""

    class Clips:
        def __len__(self):
            return {N}

        def iter_data(self, slice_element=None):
            for i in range({N})[slice_element or slice(None)]:
                time.sleep(float(os.environ.get("{DELAY_ENV}", "0")))
                frames = [synthetic_frame(48, 64, seed=100 * i + k) for k in range({FRAMES})]
                yield {{"id": f"v{{i}}", "meta": {{"i": i}}, "frames": frames}}
    """
    )
)

CHILD = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, sys.argv[1])
    from video_crash_adapter import Clips
    from gulpio_rs import GulpIngestor
    if __name__ == "__main__":
        out, workers = sys.argv[2], int(sys.argv[3])
        GulpIngestor(Clips(), out, {vpc}, workers, encoding="video",
                     progress=False)()
    """
).format(vpc=VPC)


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    folder = tmp_path_factory.mktemp("video-crash")
    (folder / "video_crash_adapter.py").write_text(ADAPTER)
    (folder / "child.py").write_text(CHILD)
    sys.path.insert(0, str(folder))
    try:
        from video_crash_adapter import Clips
    finally:
        sys.path.remove(str(folder))
    reference = folder / "reference"
    report = GulpIngestor(Clips(), str(reference), VPC, 1, encoding="video", progress=False)()
    assert (report.videos, report.failures) == (N, [])
    yield folder, Clips, reference
    sys.modules.pop("video_crash_adapter", None)


_FILES = [("data", ".gulp"), ("data", ".gidx"), ("meta", ".gmeta")]


def _files(folder: Path) -> dict[str, bytes]:
    return {
        n: (folder / n).read_bytes()
        for n in sorted(os.listdir(folder))
        if not n.startswith(".") and (folder / n).is_file()
    }


@pytest.mark.parametrize("seed", range(4))
def test_sigkill_then_the_same_ingest_finishes_it(tmp_path, env, seed, capsys):
    folder, clips, reference = env
    rng = random.Random(seed)
    workers = 1 + seed % 2
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, str(folder / "child.py"), str(folder), str(out), str(workers)],
        start_new_session=True,
        env={**os.environ, DELAY_ENV: str(DELAY)},
    )
    try:
        deadline = time.monotonic() + 120  # a hang guard, not a speed check
        while not (out.is_dir() and any(n.startswith(".gulpio-tmp") for n in os.listdir(out))):
            assert proc.poll() is None, "the ingest ended before writing"
            assert time.monotonic() < deadline, "the ingest never started writing"
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.8 * N * DELAY / workers))
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "the ingest finished before it was killed"
    # The killed workers are reaped by init a moment later; until then their pids look alive
    # and their temporaries are (rightly) kept by the rerun.
    writers = {
        int(n.rsplit(".", 1)[1].split("-")[0]) for n in os.listdir(out) if ".gulpio-tmp" in n
    }
    deadline = time.monotonic() + 20
    while any(os.path.exists(f"/proc/{p}") for p in writers) and time.monotonic() < deadline:
        time.sleep(0.01)
    # Chunks whose publication finished (the .gmeta is linked last, the commit point).
    done = [n[len("meta_") : -len(".gmeta")] for n in os.listdir(out) if n.endswith(".gmeta")]
    names = [f"{kind}_{k}{ext}" for k in done for kind, ext in _FILES]
    finished = {n: os.stat(out / n).st_ino for n in names}
    report = GulpIngestor(clips(), str(out), VPC, workers, encoding="video", progress=False)()
    assert report.failures == [] and report.videos == N and report.already_stored == 0
    assert report.chunks_resumed == len(done)
    assert not [n for n in os.listdir(out) if n.startswith(".gulpio-tmp")]
    assert _files(out) == _files(reference)
    # What was published before the kill was kept, not rewritten.
    assert {n: os.stat(out / n).st_ino for n in finished} == finished
    assert GulpDirectory(str(out)).keys() == [f"v{i}" for i in range(N)]
    assert main(["check", str(out), "--decode"]) == 0
    capsys.readouterr()
