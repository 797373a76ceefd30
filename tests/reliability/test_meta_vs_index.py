"""When the ``.gmeta`` and the checksummed index disagree, the checksum wins: a damaged
``.gmeta`` next to an intact index is reported (warning, ``gulpio check``) and never believed
(ids, frames and metadata come from the index, frame CRCs stay on); ``gulpio repair`` rewrites
it from the index. A ``.gmeta`` that another tool extended (gulpio2 appending to the chunk)
still wins over the older index. Index fields that pass their CRCs but contradict the frames
themselves are errors, and a frame no reader could decode is refused when it is appended."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys
import warnings
import zlib

import numpy as np
import pytest
from video_data import SEGMENTS_DAMAGE, copy_dataset, damage_segments

from gulpio_rs import (
    BrokenChunkWarning,
    DecodeError,
    GulpChunk,
    GulpDirectory,
    StaleIndexError,
)
from gulpio_rs.utils import img_to_jpeg_bytes


def _write(folder, chunk, videos):
    c = GulpChunk(folder / f"data_{chunk}.gulp", folder / f"meta_{chunk}.gmeta")
    with c.open("wb"):
        for id_, meta, frames in videos:
            c.append(id_, meta, frames)


@pytest.fixture
def folder(tmp_path, make_frame):
    _write(
        tmp_path,
        0,
        [
            ("a", {"label": "cat", "n": 7}, [make_frame(16, 24, seed=k) for k in range(3)]),
            ("b", {"label": "dog", "n": 8}, [make_frame(16, 24, seed=9)]),
        ],
    )
    _write(tmp_path, 1, [("c", {"label": "eel"}, [make_frame(16, 24, seed=5)])])
    return tmp_path


def _check(folder, *args):
    return subprocess.run(
        [sys.executable, "-m", "gulpio_rs", "check", str(folder), "--json", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _repair(folder):
    return subprocess.run(
        [sys.executable, "-m", "gulpio_rs", "repair", str(folder), "--apply"],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _everything(gd):
    return {i: (gd.read(i), gd[i][1], gd.num_frames(i)) for i in gd.keys()}


def _assert_same(got, want):
    assert got.keys() == want.keys()
    for i in want:
        np.testing.assert_array_equal(got[i][0], want[i][0])
        assert got[i][1:] == want[i][1:]


def _damage_label(meta_path):
    """One flipped bit in a label value: same size, still valid JSON, another value."""
    raw = bytearray(meta_path.read_bytes())
    at = raw.index(b'"cat"') + 1
    raw[at] ^= 0x01  # "cat" -> "bat"
    meta_path.write_bytes(bytes(raw))


def test_a_flipped_bit_in_the_gmeta_is_reported_and_never_believed(folder):
    """The probe's finding: the label read back was the altered one, with only a warning."""
    want = _everything(GulpDirectory(folder))
    original = (folder / "meta_0.gmeta").read_bytes()
    _damage_label(folder / "meta_0.gmeta")
    gd = GulpDirectory(folder)
    with pytest.warns(BrokenChunkWarning, match=r"meta_0\.gmeta.*checksummed index"):
        got = _everything(gd)
    _assert_same(got, want)
    assert got["a"][1]["label"] == "cat"
    assert gd.native_chunk(0).indexed and gd.native_chunk(0).meta_problem
    # Frame checks stay on: a damaged frame is still caught.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BrokenChunkWarning)
        chunk = GulpChunk(folder / "data_0.gulp", folder / "meta_0.gmeta")
        assert chunk.indexed and chunk["a"][1]["label"] == "cat"
    result = _check(folder)
    assert result.returncode == 1
    problems = json.loads(result.stdout)["problems"]
    assert [(p["kind"], p["path"]) for p in problems] == [("meta", str(folder / "meta_0.gmeta"))]
    repaired = _repair(folder)
    assert repaired.returncode == 0, repaired.stderr
    assert "rewrite the .gmeta" in repaired.stdout
    assert (folder / "meta_0.gmeta").read_bytes() == original
    assert _check(folder).returncode == 0


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[: len(b) // 2],
        lambda b: b"",
        lambda b: b.replace(b'"frame_info"', b'"frame_inf0"'),
        lambda b: b.replace(b"[[0, ", b"[[0, 3", 1),  # a frame moved: size changes too
        lambda b: b.replace(b'{"a": ', b'{"z": ', 1),
    ],
    ids=["truncated", "empty", "no-frame-info", "moved-frame", "renamed-id"],
)
def test_a_damaged_gmeta_of_any_kind_reads_through_the_index(folder, damage):
    want = _everything(GulpDirectory(folder))
    meta = folder / "meta_0.gmeta"
    meta.write_bytes(damage(meta.read_bytes()))
    with pytest.warns(BrokenChunkWarning, match=r"meta_0\.gmeta"):
        gd = GulpDirectory(folder)
        got = _everything(gd)
    _assert_same(got, want)
    assert gd.native_chunk(0).indexed
    assert _check(folder).returncode == 1
    assert _repair(folder).returncode == 0
    assert _check(folder).returncode == 0


@pytest.mark.parametrize("damage", list(SEGMENTS_DAMAGE))
def test_a_damaged_segments_object_beside_an_intact_index_is_reported_and_restored(
    stored, tmp_path, damage
):
    """FORMAT §3.4 rule 2 for the `segments` object (issue 39, item 3): the old code compared
    ids, frames and metadata only, so damage there was never reported, and once the index was
    lost too neither video of the chunk could be rebuilt."""
    ds = copy_dataset(stored, tmp_path)
    want = {i: np.stack(GulpDirectory(stored)[i][0]) for i in ("bikes", "bbb")}
    original = (ds / "meta_0.gmeta").read_bytes()
    damage_segments(ds / "meta_0.gmeta", damage)
    with pytest.warns(BrokenChunkWarning, match=r'meta_0\.gmeta.*video "bikes" has (a|no) segm'):
        gd = GulpDirectory(ds)
        got = {i: np.stack(gd[i][0]) for i in ("bikes", "bbb")}
    for i in want:
        np.testing.assert_array_equal(got[i], want[i])
    result = _check(ds)
    assert result.returncode == 1
    problems = json.loads(result.stdout)["problems"]
    # The ingest gave the dataset a manifest: damage that changes the .gmeta's length also
    # breaks the manifest's record of the chunk (its index, intact, matches either way).
    meta = str(ds / "meta_0.gmeta")
    resized = len((ds / "meta_0.gmeta").read_bytes()) != len(original)
    assert [(p["kind"], p["path"]) for p in problems] == [("meta", meta)] + (
        [("manifest", meta)] if resized else []
    )
    assert "bikes" in problems[0]["message"]
    repaired = _repair(ds)
    assert repaired.returncode == 0, repaired.stderr
    assert "rewrite the .gmeta" in repaired.stdout
    assert (ds / "meta_0.gmeta").read_bytes() == original
    # What the issue saw next: the index lost as well. Rebuilt now, from the restored .gmeta.
    (ds / "data_0.gidx").unlink()
    assert _repair(ds).returncode == 0
    assert _check(ds, "--decode").returncode == 0
    gd = GulpDirectory(ds)
    for i in want:
        np.testing.assert_array_equal(np.stack(gd[i][0]), want[i])


def test_a_zero_length_frame_in_the_gmeta_never_gives_an_empty_frame(folder):
    """``frame_info`` of length 0 next to an intact index: the index's frame is read."""
    want = GulpDirectory(folder).read("a")
    meta = folder / "meta_0.gmeta"
    text = json.loads(meta.read_text())
    loc, pad, length = text["a"]["frame_info"][1]
    raw = meta.read_bytes().replace(
        f"[{loc}, {pad}, {length}]".encode(), f"[{loc}, {pad}, 0]".encode(), 1
    )
    meta.write_bytes(raw)
    with pytest.warns(BrokenChunkWarning, match=r"meta_0\.gmeta"):
        got = GulpDirectory(folder).read("a")
    np.testing.assert_array_equal(got, want)


def test_a_zero_length_frame_without_an_index_is_a_decode_error(folder):
    """A legacy chunk (no index to prefer) whose frame_info says length 0: an error naming
    the frame, not an empty array."""
    (folder / "data_0.gidx").unlink()
    meta = folder / "meta_0.gmeta"
    text = json.loads(meta.read_text())
    loc, pad, length = text["a"]["frame_info"][1]
    meta.write_bytes(
        meta.read_bytes().replace(
            f"[{loc}, {pad}, {length}]".encode(), f"[{loc}, 0, 0]".encode(), 1
        )
    )
    gd = GulpDirectory(folder)
    for read in (lambda: gd["a"], lambda: gd.read("a")):
        with pytest.raises(DecodeError) as info:
            read()
        assert info.value.video_id == "a" and info.value.frame == 1


def test_a_gmeta_extended_by_gulpio2_still_wins_over_the_older_index(folder, make_frame):
    """gulpio2 appends to our chunk (its own writer: new frames in the .gulp, a longer
    .gmeta): the index no longer describes the chunk, the .gmeta does."""
    gulpio2 = pytest.importorskip("gulpio2", reason="gulpio2 0.0.4 is the reference (CI has it)")
    chunk = gulpio2.fileio.GulpChunk(
        str(folder / "data_1.gulp"), str(folder / "meta_1.gmeta"), gulpio2.fileio.JSONSerializer()
    )
    with chunk.open("ab"):
        chunk.append("d", {"label": "fox"}, [make_frame(16, 24, seed=11)])
    with pytest.warns(BrokenChunkWarning, match=r"data_1\.gidx.*appended"):
        gd = GulpDirectory(folder)
        assert gd["d"][1] == {"label": "fox"}
        assert gd["c"][1] == {"label": "eel"}
    assert not gd.native_chunk(1).indexed


def test_a_chunk_replaced_after_open_asks_for_a_reopen(folder, tmp_path_factory, make_frame):
    gd = GulpDirectory(folder)
    other = tmp_path_factory.mktemp("other")
    _write(other, 1, [("x", {}, [make_frame(16, 24, seed=1)])])
    for name in ("data_1.gulp", "meta_1.gmeta", "data_1.gidx"):
        shutil.copy(other / name, folder / name)
    with pytest.raises(StaleIndexError, match="reopen"):
        gd["c"]


def _frame_entry_at(gidx: bytes, frame: int) -> int:
    video_count, _frames, ids_len = struct.unpack_from("<QQQ", gidx, 16)
    ids_end = 128 + 40 * video_count + ids_len
    return ids_end + (-ids_end % 8) + 24 * frame


def _forge(path, frame, **fields):
    """Changes frame entry fields (width, height, channels) and makes every CRC valid again."""
    gidx = bytearray(path.read_bytes())
    at = _frame_entry_at(bytes(gidx), frame)
    offsets = {"width": (16, "<H"), "height": (18, "<H"), "channels": (20, "<B")}
    for name, value in fields.items():
        off, fmt = offsets[name]
        struct.pack_into(fmt, gidx, at + off, value)
    video_count, frame_count = struct.unpack_from("<QQ", gidx, 16)
    start = _frame_entry_at(bytes(gidx), 0)
    table = bytes(gidx[start : start + 24 * frame_count])
    struct.pack_into("<I", gidx, 80, zlib.crc32(table))
    struct.pack_into("<I", gidx, 124, zlib.crc32(bytes(gidx[:124])))
    path.write_bytes(bytes(gidx))


@pytest.mark.parametrize(
    "fields",
    [{"channels": 1}, {"width": 12}, {"height": 20, "width": 30}],
    ids=["colour-declared-gray", "width", "size"],
)
def test_index_fields_that_contradict_the_frame_are_errors_on_every_path(folder, fields):
    """A CRC-valid index whose frame entry does not describe the frame (the probe's forged
    1-channel colour frame): ``gd[id]`` and ``gd.read`` agree, both refusing it."""
    _forge(folder / "data_0.gidx", 1, **fields)
    gd = GulpDirectory(folder)
    with warnings.catch_warnings():
        warnings.simplefilter("error", BrokenChunkWarning)  # the index passes its own checks
        for read in (
            lambda: gd["a"],
            lambda: gd.read("a", frames=[1]),
            lambda: gd.read_batch(["a", "a"], frames=[1]),
            lambda: gd.read("a", frames=[1], size=8),
        ):
            with pytest.raises(DecodeError, match="index") as info:
                read()
            assert (info.value.video_id, info.value.frame) == ("a", 1)
            assert info.value.path == str(folder / "data_0.gulp")
        assert len(gd["b"][0]) == 1


def _huge_jpeg(make_frame) -> bytes:
    """A real JPEG whose SOF header declares 65535x65535."""
    jpeg = bytearray(img_to_jpeg_bytes(make_frame(16, 16, seed=3)))
    at = jpeg.index(b"\xff\xc0")
    struct.pack_into(">HH", jpeg, at + 5, 65535, 65535)
    return bytes(jpeg)


def test_append_refuses_a_frame_no_reader_would_decode(tmp_path, make_frame):
    chunk = GulpChunk(tmp_path / "data_0.gulp", tmp_path / "meta_0.gmeta")
    with chunk.open("wb"):
        chunk.append("ok", {}, [make_frame(16, 16, seed=1)])
        with pytest.raises(ValueError, match="65535x65535.*not stored"):
            chunk.append("huge", {}, [make_frame(16, 16, seed=2), _huge_jpeg(make_frame)])
    gd = GulpDirectory(tmp_path)
    assert gd.keys() == ["ok"]
    assert _check(tmp_path).returncode == 0
