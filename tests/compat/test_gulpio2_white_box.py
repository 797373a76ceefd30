"""White-box uses of gulpio2 that real code makes too (and gulpio2's own tests make, see
test_gulpio2_unit_tests.py), checked here without gulpio2's test files: replacing
``fileio.ProcessPoolExecutor`` / ``fileio.ChunkWriter``, handing ``ChunkWriter`` a mock chunk,
setting gulpio2's JPEG quality knob, running ``sanity_utils`` on mock chunks, replacing
``PIL.Image.open`` under ``utils.resize_images``."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from unittest import mock

import numpy as np
import pytest

import gulpio_rs
import gulpio_rs.fileio
import gulpio_rs.sanity_utils
import gulpio_rs.utils
from gulpio_rs.adapters import AbstractDatasetAdapter


class Arrays(AbstractDatasetAdapter):
    def __init__(self, n, prefix="v"):
        self.n, self.prefix = n, prefix

    def __len__(self):
        return self.n

    def iter_data(self, slice_element=None):
        for i in range(self.n)[slice_element or slice(None)]:
            frames = [np.full((4 + i, 3, 3), 10 * i, np.uint8) for _ in range(2)]
            yield {"id": f"{self.prefix}{i}", "meta": {"i": i}, "frames": frames}


def test_a_replaced_executor_gets_the_work_as_gulpio2_handed_it(tmp_path):
    with (
        mock.patch("gulpio_rs.fileio.ProcessPoolExecutor") as pool,
        mock.patch("gulpio_rs.fileio.ChunkWriter") as writer,
    ):
        executor = pool.return_value.__enter__.return_value
        executor.map.return_value = []
        adapter = Arrays(3)
        gulpio_rs.GulpIngestor(adapter, tmp_path / "out", 2, 1)()
    pool.assert_called_once_with(max_workers=1)
    writer.assert_called_once_with(adapter)
    (call,) = executor.map.call_args_list
    fn, chunks, slices = call.args
    assert fn is writer.return_value.write_chunk
    assert slices == [slice(0, 2), slice(2, 3)]
    assert [os.path.basename(c.data_file_path) for c in chunks] == ["data_0.gulp", "data_1.gulp"]


def test_a_thread_pool_in_its_place_writes_the_dataset_and_resumes(tmp_path):
    out = tmp_path / "out"
    with mock.patch("gulpio_rs.fileio.ProcessPoolExecutor", ThreadPoolExecutor):
        report = gulpio_rs.GulpIngestor(Arrays(5), out, 2, 3)()
        assert (report.videos, report.chunks_written, report.failures) == (5, 3, [])
        again = gulpio_rs.GulpIngestor(Arrays(5), out, 2, 3)()
    assert (again.chunks_written, again.chunks_resumed) == (0, 3)
    gd = gulpio_rs.GulpDirectory(out)
    assert sorted(gd.keys()) == [f"v{i}" for i in range(5)]
    assert gd.meta("v4") == {"i": 4} and gd.read("v4").shape == (2, 8, 3, 3)


def test_chunk_writer_takes_any_chunk_object():
    adapter = Arrays(1)
    chunk = mock.MagicMock()  # its class defines no `append`
    gulpio_rs.ChunkWriter(adapter).write_chunk(chunk, slice(0, 1))
    chunk.open.assert_called_once_with("wb")
    ((id_, meta, frames),) = [c.args for c in chunk.append.call_args_list]
    assert (id_, meta, len(frames)) == ("v0", {"i": 0}, 2)


@pytest.fixture
def quality_100():
    with mock.patch.object(gulpio_rs.utils, "_JPEG_WRITE_QUALITY", 100):
        yield


def test_the_quality_knob_reaches_the_ingestor_and_chunk_writer(tmp_path, quality_100):
    frames = Arrays(1).iter_data().__next__()["frames"]
    gulpio2_bytes = [gulpio_rs.fileio.img_to_jpeg_bytes(f) for f in frames]  # q100 4:4:4
    gulpio_rs.GulpIngestor(Arrays(1), tmp_path / "a", 1, 1)()
    got = [bytes(b) for b in gulpio_rs.GulpDirectory(tmp_path / "a").frame_bytes("v0")]
    assert got == gulpio2_bytes
    chunk = gulpio_rs.GulpChunk(tmp_path / "data_0.gulp", tmp_path / "meta_0.gmeta")
    gulpio_rs.ChunkWriter(Arrays(1)).write_chunk(chunk, slice(0, 1))
    assert [bytes(b) for b in chunk.frame_bytes("v0")] == gulpio2_bytes
    # Explicit settings win over the knob.
    gulpio_rs.GulpIngestor(Arrays(1), tmp_path / "b", 1, 1, quality=50)()
    got = [bytes(b) for b in gulpio_rs.GulpDirectory(tmp_path / "b").frame_bytes("v0")]
    assert got != gulpio2_bytes


def test_sanity_checks_answer_from_meta_dict_of_mock_chunks(tmp_path):
    data = tmp_path / "data"
    data.write_bytes(bytes(12))
    chunk = mock.Mock(data_file_path=str(data))
    chunk.meta_dict = {"a": {"frame_info": [[0, 1, 4], [4, 3, 8]], "meta_data": [{}]}}
    directory = mock.Mock()
    directory.chunks.return_value = [chunk]
    assert gulpio_rs.sanity_utils.check_data_file_size(directory) == []
    data.write_bytes(bytes(11))
    assert gulpio_rs.sanity_utils.check_data_file_size(directory) == [str(data)]


def test_resize_images_passes_on_what_image_open_returns():
    with (
        mock.patch("PIL.Image.open", side_effect=["OPENED1", "OPENED2"]),
        mock.patch("gulpio_rs.utils.resize_by_short_edge", side_effect=lambda i, s: (i, s)),
    ):
        got = list(gulpio_rs.utils.resize_images(["p1", "p2"], img_size=4))
    assert got == [("OPENED1", 4), ("OPENED2", 4)]
