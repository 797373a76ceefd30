"""Writers killed with SIGKILL at random moments (seeded): the directory always opens, every
published video reads back, and the leftovers are only temporary files, unpublished tails, or
an index left one publication behind (ignored, with a warning)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

from gulpio_rs import EmptyDirectoryWarning, GulpDirectory
from gulpio_rs.cli.check import verify

WRITER = textwrap.dedent(
    """
    import itertools
    import sys
    import numpy as np
    from gulpio_rs import GulpChunk
    root, mode = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(0)
    frames = [rng.integers(0, 255, (48, 64, 3), dtype=np.uint8) for _ in range(4)]
    print("ready", flush=True)
    for k in itertools.count():  # until killed
        if mode == "append":
            chunk = GulpChunk(f"{root}/data_0.gulp", f"{root}/meta_0.gmeta")
            flag = "ab"
        else:
            chunk = GulpChunk(f"{root}/data_{k}.gulp", f"{root}/meta_{k}.gmeta")
            flag = "wb"
        with chunk.open(flag):
            for v in range(5):
                chunk.append(f"{mode}-{k}-{v}", {"k": k, "v": v}, frames)
                if v == 2:
                    chunk.flush()  # a publication in the middle of a chunk, too
    """
)


@pytest.mark.parametrize("mode", ["new-chunks", "append"])
@pytest.mark.parametrize("seed", range(10))
def test_sigkill_at_a_random_moment_leaves_a_consistent_directory(tmp_path, mode, seed):
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path), mode], stdout=subprocess.PIPE, text=True
    )
    # The kill lands while the writer works, however long its imports took on a busy machine.
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(random.Random(seed).uniform(0.1, 1.3))
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL  # killed mid-work, not finished

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gd = GulpDirectory(tmp_path)
    # The one visible trace a crash may leave (FORMAT.md section 4): killed between publishing
    # the new .gmeta and the new index, the old index no longer matches and is ignored; the
    # chunk reads through its new .gmeta. Nothing may be unreadable or skipped.
    # Killed between the renames of a new chunk's first publication, the chunk being written
    # (the highest number) can show a data file without its meta file: it is skipped, and its
    # videos were never visible. Every other chunk must read.
    last = max((int(n[5:-5]) for n in os.listdir(tmp_path) if n.startswith("data_")), default=0)
    unfinished = f"chunk {last} has a data file but no meta file"
    # Killed before it renamed anything into place (on a busy machine the writer can take longer
    # than the sleep to get there): an empty directory, which says so, and nothing to check.
    if not any(n.startswith(("data_", "meta_")) for n in os.listdir(tmp_path)):
        assert len(gd) == 0
        assert all(isinstance(w.message, EmptyDirectoryWarning) for w in caught), caught
        return
    for w in caught:
        text = str(w.message)
        assert "index does not match its chunk" in text or unfinished in text, text
    report = verify(str(tmp_path))
    for p in report["problems"]:
        expected = p["kind"] in ("unpublished_tail", "index", "leftover")
        assert expected or unfinished in p["message"], p
    expected = np.random.default_rng(0)
    frames = [expected.integers(0, 255, (48, 64, 3), dtype=np.uint8) for _ in range(4)]
    for id_ in gd.keys():
        got, meta = gd[id_]
        assert len(got) == 4 and meta["v"] == int(id_.rsplit("-", 1)[1])
        # q90 JPEG of noise: only check the frames decode to the right shape and order.
        assert [f.shape for f in got] == [f.shape for f in frames]
    # Published videos come in whole groups: ids of a chunk are a prefix of 0..4.
    by_chunk: dict[str, list[int]] = {}
    for id_ in gd.keys():
        _, k, v = id_.rsplit("-", 2)
        by_chunk.setdefault(k, []).append(int(v))
    for vs in by_chunk.values():
        assert vs == list(range(len(vs))) and len(vs) in (3, 5)
