"""Open files stay bounded (src/io/open_files.rs): reading every chunk of a dataset with more
chunks than a process may hold descriptors (1,024 by default on Linux) must not fail with
EMFILE, and a data file replaced after its chunk was opened is an error naming it, never the
new file's bytes read as the old one's."""

from __future__ import annotations

import os
import resource

import numpy as np
import pytest

from gulpio_rs import GulpChunk, GulpDirectory
from gulpio_rs.errors import GulpError

BOUND = 256  # src/io/open_files.rs OPEN_FILES
CHUNKS = 400  # more than the bound, and than the lowered limit below


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture(scope="module")
def many_chunks(tmp_path_factory):
    root = tmp_path_factory.mktemp("many")
    for k in range(CHUNKS):
        chunk = GulpChunk(root / f"data_{k}.gulp", root / f"meta_{k}.gmeta")
        with chunk.open("wb"):
            chunk.append(f"v{k}", {"k": k}, [np.full((8, 8, 3), k % 251, np.uint8)])
    return root


def test_reading_every_chunk_holds_a_bounded_number_of_descriptors(many_chunks):
    gd = GulpDirectory(str(many_chunks))
    before = _fds()
    for _round in range(2):
        for k in range(CHUNKS):
            frames, meta = gd[f"v{k}"]
            assert meta == {"k": k} and int(frames[0][0, 0, 0]) in (
                k % 251 - 1,
                k % 251,
                k % 251 + 1,
            )
    assert _fds() - before <= BOUND


def test_a_dataset_of_more_chunks_than_the_descriptor_limit_reads_whole(many_chunks):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # Lowered below the number of chunks for this test, above the bound (children of the test
    # process would inherit it; none is started here).
    limit = _fds() + BOUND + 64
    assert limit < _fds() + CHUNKS
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    try:
        gd = GulpDirectory(str(many_chunks))
        assert sum(len(gd[f"v{k}"][0]) for k in range(CHUNKS)) == CHUNKS
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_data_file_replaced_after_its_chunk_was_opened_is_an_error(tmp_path):
    root = tmp_path / "ds"
    root.mkdir()
    for k in range(CHUNKS):
        chunk = GulpChunk(root / f"data_{k}.gulp", root / f"meta_{k}.gmeta")
        with chunk.open("wb"):
            chunk.append(f"v{k}", {}, [np.full((8, 8, 3), 7, np.uint8)])
    gd = GulpDirectory(str(root))
    gd["v0"]  # chunk 0 opened
    for k in range(1, CHUNKS):
        gd[f"v{k}"]  # chunk 0's descriptor is closed to stay within the bound
    # Another tool replaces chunk 0's data file with different bytes of the same length.
    data = (root / "data_0.gulp").read_bytes()
    (root / "new.gulp").write_bytes(bytes(len(data)))
    os.replace(root / "new.gulp", root / "data_0.gulp")
    with pytest.raises(GulpError, match="data_0.gulp.*replaced"):
        gd["v0"]


MAX_OPEN_CHUNKS = 4096  # src/directory.rs


def _mappings() -> int:
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


def test_chunk_readers_stay_bounded_so_mappings_do_too(tmp_path):
    """Each chunk read keeps a mapping of its index; the kernel allows 65,530 per process, so
    readers past MAX_OPEN_CHUNKS are dropped (a 10M-video dataset has 100k chunks)."""
    extra = 104
    frame = np.full((8, 8, 3), 5, np.uint8)
    for k in range(MAX_OPEN_CHUNKS + extra):
        chunk = GulpChunk(tmp_path / f"data_{k}.gulp", tmp_path / f"meta_{k}.gmeta")
        with chunk.open("wb"):
            chunk.append(f"v{k}", {"k": k}, [frame])
    gd = GulpDirectory(str(tmp_path))
    before = _mappings()
    first = gd._chunk(0)
    for k in range(MAX_OPEN_CHUNKS + extra):
        assert gd.meta(f"v{k}") == {"k": k}
    assert _mappings() - before < MAX_OPEN_CHUNKS + extra // 2
    # The chunk read first was dropped and opens again; the object handed out still reads.
    assert gd["v0"][1] == {"k": 0}
    assert (first.ids(), first.frame_count(0)) == (["v0"], 1)
