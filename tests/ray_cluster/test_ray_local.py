"""``gulpio ingest ... --ray`` on a machine where no Ray cluster runs (issue 27): as
docs/INGEST.md says, a local cluster is started for the run (Ray's own message named a
``--address`` flag gulpio does not have)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

import pytest
from helpers import image_folder

from gulpio_rs import GulpDirectory

_WHY = 'optional dependency: pip install ".[ray]" (CI installs it)'
pytest.importorskip("ray", reason=_WHY)


def test_ray_without_an_address_and_without_a_cluster_starts_a_local_one(tmp_path):
    src = image_folder(tmp_path / "imgs", per_class=2)
    out = tmp_path / "out"
    # A Ray temp folder of its own (short: Ray's socket paths must fit 107 bytes), so that no
    # running cluster of this machine is found, and no RAY_ADDRESS.
    ray_tmp = tempfile.mkdtemp(prefix="gr", dir="/tmp")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["RAY_TMPDIR"] = ray_tmp
    try:
        done = subprocess.run(
            [sys.executable, "-m", "gulpio_rs", "ingest", "image-folder", str(src), str(out),
             "--videos-per-chunk", "2", "--ray", "--no-progress"],
            env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "--address" not in done.stderr
    assert len(GulpDirectory(str(out))) == 4
