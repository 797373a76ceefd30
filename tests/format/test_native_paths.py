"""File naming exported by ``_native`` (Rust ``format::paths``): what the Python side must
use instead of its own patterns."""

from __future__ import annotations

import os

import pytest

from gulpio_rs import _native
from gulpio_rs.chunk import GulpChunk


def test_chunk_file_names_parse_back():
    for k in (0, 3, 12, 2**64 - 1):
        data, meta, index = _native.chunk_file_names(k)
        assert (data, meta, index) == (f"data_{k}.gulp", f"meta_{k}.gmeta", f"data_{k}.gidx")
        assert _native.parse_chunk_file_name(data) == ("data", k)
        assert _native.parse_chunk_file_name(meta) == ("meta", k)
        assert _native.parse_chunk_file_name(index) == ("index", k)


@pytest.mark.parametrize(
    "name",
    ["data_.gulp", "data_1.gmeta", "meta_1.gidx", "data1.gulp", "data_1.gulp.bak", "x_1.gulp"],
)
def test_other_names_are_not_chunk_files(name):
    assert _native.parse_chunk_file_name(name) is None


@pytest.mark.parametrize(
    ("name", "number"),
    [
        ("data_3.gulp", 3),
        ("meta_3.gmeta", 3),
        ("data_007.gulp", 7),  # gulpio's rule: the first run of digits
        ("data-a12b3.gulp", 12),
        ("data.gulp", None),  # listed by the glob, but no number
        ("data_3.gidx", None),  # not listed by gulpio's globs
        (".gulpio-tmp.data_3.gulp.1-2", None),
    ],
)
def test_gulpio_chunk_number(name, number):
    assert _native.gulpio_chunk_number(name) == number


def test_writer_temporaries_name_their_target_and_pid(tmp_path):
    """A writer that has appended but not published leaves a temporary data file that the
    predicate recognises as this process's."""
    chunk = GulpChunk(str(tmp_path / "data_5.gulp"), str(tmp_path / "meta_5.gmeta"))
    writer = _native.NativeWriter(chunk.data_file_path, chunk.meta_file_path)
    try:
        temps = [n for n in os.listdir(tmp_path) if n.startswith(_native.TEMP_PREFIX)]
        assert temps, os.listdir(tmp_path)
        for name in temps:
            target, pid = _native.parse_temp_name(name)
            assert pid == os.getpid()
            assert _native.parse_chunk_file_name(target) == ("data", 5)
    finally:
        writer.abort()
    assert not [n for n in os.listdir(tmp_path) if _native.parse_temp_name(n)]


@pytest.mark.parametrize(
    "name",
    [
        "data_3.gulp",
        ".gulpio-tmp.data_3.gulp",
        ".gulpio-tmp.data_3.gulp.12",
        ".gulpio-tmp.data_3.gulp.12-",
        ".gulpio-tmp.data_3.gulp.a-1",
        "gulpio-tmp.data_3.gulp.12-1",
    ],
)
def test_other_names_are_not_temporaries(name):
    assert _native.parse_temp_name(name) is None
