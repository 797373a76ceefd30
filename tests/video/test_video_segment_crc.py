"""CRCs of videos stored as segments (docs/FORMAT.md §6.3) through reads and ``gulpio
check`` (issue 39, items 5 and 6): ``check`` CRCs every segment without decoding, and a
segment that fails its CRC is named, by reads and by ``check`` alike, by the frames it holds
and its byte range, whichever frame was asked for and wherever its damaged bytes are."""

from __future__ import annotations

import json
import re
import struct
import zlib

import pytest
from video_data import copy_dataset

from gulpio_rs import GulpDirectory
from gulpio_rs.cli import main
from gulpio_rs.cli.check import verify
from gulpio_rs.errors import CorruptDataError


def _segment_1_of_bikes(ds) -> tuple[int, int]:
    """Bytes ``start..end`` of the stream of bikes' segment 1 (frames 16..32) in data_0.gulp:
    from its first tile to the end of its last one, padding excluded."""
    info = json.loads((ds / "meta_0.gmeta").read_text())["bikes"]["frame_info"]
    loc, pad, length = info[31]
    return info[16][0], loc + length - pad


def _reads_of_frame_16(ds):
    gd = GulpDirectory(str(ds))
    unchecked = GulpDirectory(str(ds), check_data=False)  # segments are CRC-checked anyway
    return {
        "getitem": lambda: gd["bikes", 16:17],
        "read": lambda: gd.read("bikes", frames=[16]),
        "read unchecked": lambda: unchecked.read("bikes", frames=[16]),
        "read_batch": lambda: gd.read_batch(["bikes"], [[16, 17]]),
        "read_batch cropped": lambda: gd.read_batch(
            ["bikes"], [[16]], crop=[(0, 0, 64, 64)], size=[(32, 32)]
        ),
    }


def _check_problems(ds, capsys):
    """The problems `gulpio check` finds in the chunks (a forged index also no longer matches
    the dataset manifest's record of its chunk: that finding is the manifest's, left out)."""
    assert main(["check", str(ds)]) == 1
    capsys.readouterr()
    return [p for p in verify(str(ds))["problems"] if p["kind"] != "manifest"]


def test_a_damaged_segment_is_named_by_its_frames_on_every_read_and_in_check(
    stored, tmp_path, capsys
):
    """A byte flipped in the last tile of segment 1 (frame 31's, which holds most of the
    stream): reads of frame 16 named "frame 31" and that tile's bytes."""
    ds = copy_dataset(stored, tmp_path)
    start, end = _segment_1_of_bikes(ds)
    raw = bytearray((ds / "data_0.gulp").read_bytes())
    raw[end - 100] ^= 0x10
    (ds / "data_0.gulp").write_bytes(bytes(raw))
    named = f"frames 16..32 (segment 1, bytes {start}..{end})"
    for how, read in _reads_of_frame_16(ds).items():
        with pytest.raises(CorruptDataError) as e:
            read()
        assert named in str(e.value) and "frame 31" not in str(e.value), how
        assert (e.value.video_id, e.value.frame) == ("bikes", 16), how
        assert e.value.path == str(ds / "data_0.gulp"), how
    [problem] = _check_problems(ds, capsys)
    assert (problem["kind"], problem["video_id"], problem["frame"]) == ("crc", "bikes", 16)
    assert named in problem["message"]


def _forge_segment_crc(path, segment: int) -> None:
    """Changes the CRC recorded for segment entry ``segment`` and makes every CRC of the
    index valid again (the segment table ends a version 3 index), as a forger would."""
    gidx = bytearray(path.read_bytes())
    count = struct.unpack_from("<Q", gidx, 108)[0]
    table = len(gidx) - 24 * count
    at = table + 24 * segment + 12
    struct.pack_into("<I", gidx, at, struct.unpack_from("<I", gidx, at)[0] ^ 1)
    struct.pack_into("<I", gidx, 116, zlib.crc32(bytes(gidx[table:])))
    struct.pack_into("<I", gidx, 124, zlib.crc32(bytes(gidx[:124])))
    path.write_bytes(bytes(gidx))


def test_check_crcs_every_segment_without_decoding(stored, tmp_path, capsys):
    """Bytes that no longer match their segment's CRC while every tile matches its own (the
    old check CRCed the tiles only, so it said "all intact" while every read of the segment
    raised CorruptDataError)."""
    ds = copy_dataset(stored, tmp_path)
    _forge_segment_crc(ds / "data_0.gidx", 1)  # bikes is video 0: its segment 1
    start, end = _segment_1_of_bikes(ds)
    named = f"frames 16..32 (segment 1, bytes {start}..{end})"
    gd = GulpDirectory(str(ds))
    with pytest.raises(CorruptDataError, match=f"bikes.*{re.escape(named)}"):
        gd["bikes", 20:24]
    assert len(gd["bikes", 0:16][0]) == 16 and len(gd["bbb"][0]) == 35
    [problem] = _check_problems(ds, capsys)
    assert (problem["kind"], problem["video_id"], problem["frame"]) == ("crc", "bikes", 16)
    assert named in problem["message"] and problem["path"] == str(ds / "data_0.gulp")
