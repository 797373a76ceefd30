"""Requests too large for the machine, and thread counts out of range, are typed errors with
the numbers, never an abort (SIGABRT from an allocation that cannot be made) or a process
that starts threads until it hangs. Each case runs in a child process under an address-space
limit (as tests/decode/test_jpeg_robustness.py does), so an abort or a hang fails the test
instead of killing pytest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings

import pytest

import gulpio_rs
from gulpio_rs import GulpDirectory
from gulpio_rs.errors import EmptyDirectoryWarning

MEMORY_LIMIT = 4 << 30  # address space of the child process

CHILD = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit}))
import numpy as np
from gulpio_rs import GulpDirectory
gd = GulpDirectory({root!r})
ids = gd.keys()
try:
{body}
    outcome = {{"kind": "ok"}}
except BaseException as e:
    outcome = {{"kind": "error", "type": type(e).__name__, "message": str(e)[:600]}}
print(json.dumps(outcome))
"""


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    from helpers import synthetic_frame

    root = tmp_path_factory.mktemp("bounds")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyDirectoryWarning)
        chunk = next(GulpDirectory(str(root)).new_chunks(1))
    with chunk.open("wb"):
        for v in range(30):
            frames = [synthetic_frame(48, 64, seed=v * 8 + s) for s in range(8)]
            chunk.append(f"v{v}", {"label": v}, frames)
    return str(root)


def run_child(root: str, body: str, env: dict | None = None, timeout: float = 120) -> dict:
    code = CHILD.format(limit=MEMORY_LIMIT, root=root, body=textwrap.indent(body, "    "))
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "RUST_BACKTRACE": "0", **(env or {})},
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the child did not finish within {timeout} s (a hang): {body}")
    assert proc.returncode == 0, f"child died ({proc.returncode}): {proc.stderr[-1500:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- oversized requests ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        # 300 clips x 8 frames x 4096 x 4096 x 3: 121 GB, over the per-read limit.
        "gd.read_batch(ids * 10, size=(4096, 4096))",
        "gd.read(ids[0], frames=[0] * 10_000_000)",
        "gd[ids[0], [0] * 10_000_000]",
        "gd.read_batch(ids, frames=[0] * 400_000)",
    ],
    ids=["read_batch-size", "read-frames", "getitem-frames", "read_batch-frames"],
)
def test_a_request_over_the_read_limit_is_a_value_error_with_the_numbers(dataset, body):
    got = run_child(dataset, body)
    assert got["kind"] == "error" and got["type"] == "ValueError", got
    message = got["message"]
    assert str(gulpio_rs._native.MAX_READ_BYTES) in message, message
    assert "bytes" in message and "fewer" in message, message


@pytest.mark.parametrize(
    "body",
    [
        # 30 clips x 8 frames x 4096 x 4096 x 3 = 12 GB: under the limit, over the 4 GiB
        # address space the child has.
        "gd.read_batch(ids, size=(4096, 4096))",
        "gd.read_batch(ids, size=[(4096, 4096)] * 29 + [(4000, 4000)])",
        # 2000 frames x 1024 x 1024 x 3: 6.3 GB.
        "gd.read(ids[0], frames=[0] * 2000, size=(1024, 1024))",
    ],
    ids=["stacked", "per-video", "one-video"],
)
def test_an_allocation_that_cannot_be_made_is_a_memory_error(dataset, body):
    got = run_child(dataset, body)
    assert got["kind"] == "error" and got["type"] == "MemoryError", got
    message = got["message"]
    assert "cannot allocate" in message and "fewer" in message, message


def test_reads_under_the_limits_still_work(dataset):
    got = run_child(
        dataset, "assert gd.read_batch(ids, size=(96, 128)).shape == (30, 8, 96, 128, 3)"
    )
    assert got == {"kind": "ok"}


# -- thread counts -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        "gd.read(ids[0], threads=10**9)",
        "gd.read_batch(ids, threads=10**9)",
        "gd.read(ids[0], threads=-3)",
        "gd.read_batch(ids, threads=2.5)",
        "from gulpio_rs.utils import resize_frames\n"
        "resize_frames([np.zeros((8, 8, 3), np.uint8)], 4, threads=10**9)",
    ],
    ids=["read-huge", "batch-huge", "negative", "float", "resize-huge"],
)
def test_thread_counts_out_of_range_are_value_errors(dataset, body):
    got = run_child(dataset, body)
    assert got["kind"] == "error" and got["type"] == "ValueError", got
    assert "threads" in got["message"] and "1024" in got["message"], got


@pytest.mark.parametrize("value", ["100000", "-3", "lots"])
def test_gulpio_num_threads_is_validated(dataset, value):
    got = run_child(dataset, "gd.read(ids[0])", env={"GULPIO_NUM_THREADS": value})
    assert got["kind"] == "error" and got["type"] == "ValueError", got
    assert "GULPIO_NUM_THREADS" in got["message"], got


def test_thread_counts_in_range_are_accepted(dataset):
    body = "for n in (0, 1, 3, 1024):\n    gd.read(ids[0], threads=n)"
    assert run_child(dataset, body) == {"kind": "ok"}
    assert run_child(dataset, "gd.read(ids[0])", env={"GULPIO_NUM_THREADS": "2"}) == {"kind": "ok"}


def test_many_different_thread_counts_do_not_pile_up_threads(dataset):
    """One pool is kept per recent thread count, not per count ever used."""
    body = (
        "import os, time\n"
        "for n in range(2, 40):\n"
        "    gd.read(ids[0], threads=n)\n"
        "# A dropped pool's threads exit on their own schedule: wait for them (bounded).\n"
        "deadline = time.monotonic() + 20\n"
        "while (tasks := len(os.listdir('/proc/self/task'))) >= 4 * 40:\n"
        "    assert time.monotonic() < deadline, tasks\n"
        "    time.sleep(0.1)"
    )
    assert run_child(dataset, body) == {"kind": "ok"}


def test_datasets_validate_threads_when_made(dataset):
    pytest.importorskip("torch")
    from gulpio_rs.torch import GulpVideoDataset

    with pytest.raises(ValueError, match="threads"):
        GulpVideoDataset(dataset, frames=4, threads=10**9)
    with pytest.raises(ValueError, match="threads"):
        GulpVideoDataset(dataset, frames=4, threads=-1)


def test_ingest_workers_and_encode_threads_are_validated(tmp_path):
    from gulpio_rs import GulpIngestor

    for kwargs in ({"num_workers": 10**9}, {"num_workers": 0}, {"num_workers": 1, "threads": -3}):
        with pytest.raises(ValueError, match="num_workers|threads"):
            GulpIngestor(object(), str(tmp_path / "out"), 10, **kwargs)


@pytest.mark.parametrize("value", ["-3", "100000"])
def test_cli_thread_flags_are_validated(dataset, value):
    """In a child: `--threads 100000` used to start 100000 threads."""
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "gulpio_rs", "check", "--threads", value, dataset],
            capture_output=True,
            text=True,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"gulpio check --threads {value} did not finish within 120 s")
    assert proc.returncode == 2, proc.stdout + proc.stderr[-1000:]
    assert "--threads" in proc.stderr and "1024" in proc.stderr, proc.stderr


def test_cli_ingest_workers_are_validated(tmp_path, capsys):
    from gulpio_rs.cli import main

    (tmp_path / "v").mkdir()
    with pytest.raises(SystemExit) as info:
        main(
            [
                "ingest",
                "video-folder",
                str(tmp_path / "v"),
                str(tmp_path / "o"),
                "--num-workers",
                "0",
            ]
        )
    assert info.value.code == 2
    assert "--num-workers" in capsys.readouterr().err
