"""Damaged and hostile input: every case gets a typed exception (or a warning plus a still
readable directory) naming the file, and the video id and frame where they apply."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import warnings

import pytest

import gulpio_rs
from gulpio_rs import (
    BrokenChunkWarning,
    CorruptDataError,
    FormatError,
    GulpChunk,
    GulpDirectory,
    StaleIndexError,
)


def _write(directory, chunk, videos):
    c = GulpChunk(
        os.path.join(directory, f"data_{chunk}.gulp"),
        os.path.join(directory, f"meta_{chunk}.gmeta"),
    )
    with c.open("wb"):
        for id_, frames in videos:
            c.append(id_, {"id": id_}, frames)


@pytest.fixture
def two_chunks(tmp_path, make_frame):
    _write(tmp_path, 0, [("a", [make_frame(16, 16, seed=k) for k in range(3)])])
    _write(tmp_path, 1, [("b", [make_frame(16, 16, seed=9)])])
    return tmp_path


def _frame_info(path, chunk, id_):
    with open(os.path.join(path, f"meta_{chunk}.gmeta")) as f:
        return json.load(f)[id_]["frame_info"]


def test_flipped_bit_is_a_crc_error_naming_file_video_and_frame(two_chunks):
    loc, _pad, _length = _frame_info(two_chunks, 0, "a")[1]
    data = two_chunks / "data_0.gulp"
    raw = bytearray(data.read_bytes())
    raw[loc + 40] ^= 0x04
    data.write_bytes(bytes(raw))
    gd = GulpDirectory(two_chunks)
    with pytest.raises(CorruptDataError) as info:
        gd["a"]
    err = info.value
    assert err.path == str(data) and err.video_id == "a" and err.frame == 1
    assert "expected 0x" in str(err) and "found 0x" in str(err) and "data_0.gulp" in str(err)
    assert isinstance(err, ValueError)
    # Unaffected frames and videos still read; opting out of the check returns the bytes.
    assert len(gd["a", [0, 2]][0]) == 2
    assert len(gd["b"][0]) == 1
    assert len(GulpDirectory(two_chunks, check_data=False).frame_bytes("a")) == 3


def test_truncated_data_file_fails_only_for_the_frames_it_cut(two_chunks):
    info = _frame_info(two_chunks, 0, "a")
    data = two_chunks / "data_0.gulp"
    data.write_bytes(data.read_bytes()[: info[2][0] + 10])
    gd = GulpDirectory(two_chunks)
    assert len(gd["a", [0, 1]][0]) == 2
    with pytest.raises(FormatError, match=r"video \"a\" frame 2: truncated") as e:
        gd["a"]
    assert e.value.path == str(data)


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[: len(b) // 2],
        lambda b: b"",
        lambda b: b.replace(b"frame_info", b"frame_inf0", 1),
        lambda b: b"[1, 2, 3]",
    ],
    ids=["truncated", "empty", "no-frame-info", "not-an-object"],
)
def test_invalid_gmeta_skips_only_that_chunk(two_chunks, damage):
    meta = two_chunks / "meta_0.gmeta"
    meta.write_bytes(damage(meta.read_bytes()))
    (two_chunks / "data_0.gidx").unlink()
    with pytest.warns(BrokenChunkWarning, match="meta_0.gmeta"):
        gd = GulpDirectory(two_chunks)
    assert gd.keys() == ["b"]
    assert gd.problems[0]["chunk_skipped"]
    with pytest.raises(FormatError, match="meta_0.gmeta") as e:
        GulpDirectory(two_chunks, strict=True)
    assert e.value.path.endswith("meta_0.gmeta")


def test_data_file_without_meta_file_keeps_the_rest_readable(two_chunks):
    (two_chunks / "meta_0.gmeta").unlink()
    with pytest.warns(
        BrokenChunkWarning, match=r"data_0.gulp.*no meta file.*Restore the meta file"
    ):
        gd = GulpDirectory(two_chunks)
    assert gd.keys() == ["b"]
    with pytest.raises(KeyError):
        gd["a"]


def test_index_copied_from_another_chunk_is_not_trusted(two_chunks):
    shutil.copy(two_chunks / "data_0.gidx", two_chunks / "data_1.gidx")
    with pytest.warns(BrokenChunkWarning, match="data_1.gidx.*does not match"):
        gd = GulpDirectory(two_chunks)
    assert gd.keys() == ["a", "b"]
    assert len(gd["b"][0]) == 1
    assert not gd.chunk_objs_lookup[1].indexed


def test_same_size_meta_change_is_caught_before_the_first_read(two_chunks):
    # Chunk 1's meta rewritten with different content of the same length: the size check at
    # open passes; the full CRC check before the first read does not. The .gmeta contradicts
    # the checksummed index, so it is reported and the index is believed
    # (tests/reliability/test_meta_vs_index.py has the rest, and a chunk replaced after open).
    meta = two_chunks / "meta_1.gmeta"
    text = meta.read_text()
    swapped = text.replace('"id": "b"', '"id": "c"')
    assert len(swapped) == len(text) and swapped != text
    meta.write_text(swapped)
    gd = GulpDirectory(two_chunks)
    with pytest.warns(BrokenChunkWarning, match="meta_1.gmeta.*checksummed index"):
        assert gd["b"][1] == {"id": "b"}
    assert gd.chunk_objs_lookup[1].indexed
    with pytest.warns(BrokenChunkWarning):
        chunk = GulpChunk(two_chunks / "data_1.gulp", meta)
        assert chunk.indexed
    assert chunk["b"][1] == {"id": "b"}


@pytest.mark.parametrize("offset", [0, 9, 20, 100, 130])
def test_damaged_index_falls_back_to_gmeta_with_a_warning(two_chunks, offset):
    index = two_chunks / "data_0.gidx"
    raw = bytearray(index.read_bytes())
    raw[offset] ^= 0x01
    index.write_bytes(bytes(raw))
    with pytest.warns(BrokenChunkWarning, match="data_0.gidx"):
        gd = GulpDirectory(two_chunks)
    if gd.problems[0]["chunk_skipped"]:
        pytest.fail("a damaged index must not make the chunk unreadable")
    assert len(gd["a"][0]) == 3


def test_damaged_frame_table_is_reported_at_first_read(two_chunks):
    index = two_chunks / "data_0.gidx"
    raw = bytearray(index.read_bytes())
    raw[-30] ^= 0x01  # inside the frame table or meta blob: checked before the first read
    index.write_bytes(bytes(raw))
    gd = GulpDirectory(two_chunks)
    with pytest.warns(BrokenChunkWarning, match="data_0.gidx.*CRC mismatch"):
        assert len(gd["a"][0]) == 3
    assert not gd.chunk_objs_lookup[0].indexed
    assert len(gd["b"][0]) == 1


def test_unknown_id_and_out_of_range_frame(two_chunks):
    gd = GulpDirectory(two_chunks)
    with pytest.raises(KeyError):
        gd["zzz"]
    with pytest.raises(IndexError, match='"a" has 3 frames.*7'):
        gd["a", [7]]


def test_missing_directory_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        GulpDirectory(tmp_path / "nope")


def test_duplicate_ids_across_chunks(tmp_path, make_frame):
    _write(tmp_path, 0, [("a", [make_frame(8, 8)])])
    _write(tmp_path, 1, [("a", [make_frame(8, 8)])])
    with pytest.raises(gulpio_rs.DuplicateIdError, match='"a"') as e:
        GulpDirectory(tmp_path)
    assert isinstance(e.value, AssertionError)


def test_corrupt_jpeg_with_valid_crc_is_a_decode_error(tmp_path, make_frame):
    # Stored truncated (its CRC matches what was stored): the decoder must refuse it rather
    # than return a partly grey image.
    jpeg = gulpio_rs.utils.img_to_jpeg_bytes(make_frame(64, 64))
    _write(tmp_path, 0, [("a", [jpeg[: len(jpeg) // 2]])])
    with pytest.raises(gulpio_rs.DecodeError) as e:
        GulpDirectory(tmp_path)["a"]
    assert e.value.video_id == "a" and e.value.frame == 0


def test_writer_killed_mid_chunk_leaves_a_readable_directory(tmp_path, make_frame):
    _write(tmp_path, 0, [("done", [make_frame(16, 16)])])
    script = textwrap.dedent(
        f"""
        import os, signal, numpy as np
        from gulpio_rs import GulpChunk
        c = GulpChunk({str(tmp_path / "data_1.gulp")!r}, {str(tmp_path / "meta_1.gmeta")!r})
        with c.open("wb"):
            for i in range(50):
                c.append(f"v{{i}}", {{}}, [np.full((32, 32, 3), i, np.uint8)] * 4)
            os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script])
    assert proc.returncode == -signal.SIGKILL
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gd = GulpDirectory(tmp_path)
    assert gd.keys() == ["done"]
    leftovers = [n for n in os.listdir(tmp_path) if n.startswith(".gulpio-tmp.")]
    assert len(leftovers) == 1  # the unpublished data file, for `gulpio repair`


def test_stale_index_error_class_is_a_format_error():
    assert issubclass(StaleIndexError, FormatError)
    assert issubclass(FormatError, gulpio_rs.GulpError) and issubclass(FormatError, ValueError)
