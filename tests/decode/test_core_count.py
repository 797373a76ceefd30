"""One owner of the core count: Python's thread shares and the Rust pools' ``threads=0`` both
come from Rust's count (``std::thread::available_parallelism``: the affinity mask and a
cgroup CPU quota), so under a CPU-quota container they cannot disagree."""

from __future__ import annotations

import os
import subprocess
import sys
import types

import pytest

from gulpio_rs import GulpIngestor, _native, _threads


def test_python_counts_the_cores_rust_counts():
    assert _threads.usable_cores() == _native.available_threads() >= 1


def test_a_cpu_quota_below_the_affinity_mask_is_what_python_shares_out(monkeypatch, tmp_path):
    # A container limited to 2 CPUs by a cgroup quota on a machine whose affinity mask shows
    # more: Rust's count says 2 (os.sched_getaffinity would still say all of them).
    monkeypatch.setattr(_native, "available_threads", lambda: 2)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)), raising=False)
    monkeypatch.delenv("GULPIO_NUM_THREADS", raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert _threads.usable_cores() == 2
    # Shared among a DataLoader's workers (a stand-in torch: gulpio_rs never imports it).
    fake = types.ModuleType("torch")
    info = types.SimpleNamespace(num_workers=2)
    fake.utils = types.SimpleNamespace(data=types.SimpleNamespace(get_worker_info=lambda: info))
    monkeypatch.setitem(sys.modules, "torch", fake)
    assert _threads.decode_threads() == 1
    # And among the ingest's worker processes.
    assert GulpIngestor([None], tmp_path, 1, num_workers=1).options.threads == 2


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this OS")
def test_an_affinity_mask_is_respected_by_both():
    code = (
        "import os; os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]}); "
        "from gulpio_rs import _native, _threads; "
        "print(_native.available_threads(), _threads.usable_cores())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "1"]
