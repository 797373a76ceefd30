"""`gulpio repair` and `write_index` on chunks of video segments: a lost index is rebuilt
from the .gulp and .gmeta (byte for byte the one the writer wrote), a segment the decoder
refuses stops the rebuild with the video and frames named, and a chunk rewritten without a
damaged video keeps its other videos' segments as stored."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from video_data import SEGMENTS_DAMAGE, copy_dataset, damage_segments

from gulpio_rs import GulpChunk, GulpDirectory, _native, write_index
from gulpio_rs.cli import main
from gulpio_rs.errors import FormatError


def _segments(ds, chunk=0):
    c, _ = _native.Chunk.open(str(ds / f"data_{chunk}.gulp"), str(ds / f"meta_{chunk}.gmeta"))
    return {id_: c.segment_streams(v) for v, id_ in enumerate(c.ids())}


def test_repair_rebuilds_a_lost_index_byte_for_byte(stored, tmp_path, capsys):
    ds = copy_dataset(stored, tmp_path)
    original = (ds / "data_0.gidx").read_bytes()
    os.remove(ds / "data_0.gidx")
    os.remove(ds / "data_1.gidx")
    assert main(["repair", str(ds), "--apply"]) == 0
    out = capsys.readouterr().out
    # One rewrite per chunk, though every video of it reported the missing index.
    assert out.count("rewrite the index of") == 2, out
    # bikes (40 frames) and bbb (35) fill 16-frame segments: the nominal gop is recovered.
    assert (ds / "data_0.gidx").read_bytes() == original
    gd, truth = GulpDirectory(str(ds)), GulpDirectory(str(stored))
    for id_ in ("bikes", "bbb", "bikes-short"):
        assert np.array_equal(np.stack(gd[id_][0]), np.stack(truth[id_][0])), id_
    assert main(["check", str(ds), "--decode"]) == 0
    assert _segments(ds, 1) == _segments(stored, 1) | {
        "bikes-short": _segments(stored, 1)["bikes-short"] | {"gop": 7}
    }


def test_an_append_waits_for_the_rebuild(stored, tmp_path, videos):
    from gulpio_rs.segments import encode_video

    ds = copy_dataset(stored, tmp_path)
    os.remove(ds / "data_1.gidx")
    chunk = GulpChunk(str(ds / "data_1.gulp"), str(ds / "meta_1.gmeta"))
    with pytest.raises(FormatError, match="gulpio repair"):
        with chunk.open("ab"):
            chunk.append("more", {}, encode_video(videos["bikes-short"][:3]))
    assert write_index(str(ds / "data_1.gulp"), str(ds / "meta_1.gmeta")) == 1
    with chunk.open("ab"):
        chunk.append("more", {}, encode_video(videos["bikes-short"][:3]))
    assert len(GulpDirectory(str(ds))["more"][0]) == 3


def _segment_loc(ds, id_, segment):
    """Byte offset in data_0.gulp of a segment's stream (its first tile)."""
    entry = json.loads((ds / "meta_0.gmeta").read_text())[id_]
    first = sum(entry["segments"]["frames"][:segment])
    return entry["frame_info"][first][0]


@pytest.mark.parametrize(
    "damage",
    ["forbidden bit", "cut short"],
)
def test_a_segment_that_does_not_decode_stops_the_rebuild(stored, tmp_path, damage):
    ds = copy_dataset(stored, tmp_path)
    os.remove(ds / "data_0.gidx")
    loc = _segment_loc(ds, "bbb", 1)
    raw = bytearray((ds / "data_0.gulp").read_bytes())
    if damage == "forbidden bit":
        raw[loc] |= 0x80  # the first OBU header
    else:
        raw[loc + 4 : loc + 8] = b"\xff\xff\xff\x7f"  # the sequence header's size overruns
    (ds / "data_0.gulp").write_bytes(bytes(raw))
    with pytest.raises(FormatError, match="segment 1 \\(frames 16..32\\)") as e:
        write_index(str(ds / "data_0.gulp"), str(ds / "meta_0.gmeta"))
    assert e.value.video_id == "bbb" and e.value.frame == 16
    assert "cannot be rebuilt" in str(e.value) and "data_0.gulp" in str(e.value)
    assert not (ds / "data_0.gidx").exists()


def test_a_rewrite_keeps_segment_videos_as_stored(tmp_path, videos, make_frame):
    from gulpio_rs.segments import encode_video

    chunk = GulpChunk(str(tmp_path / "data_0.gulp"), str(tmp_path / "meta_0.gmeta"))
    with chunk.open("wb"):
        chunk.append("jpeg", {"k": 1}, [make_frame(32, 48, seed=s) for s in range(3)])
        chunk.append("video", {"k": 2}, encode_video(videos["bikes-short"], gop=4))
        chunk.append("video", {"k": 3}, [])
    before = _segments(tmp_path)["video"]
    pixels = np.stack(GulpDirectory(str(tmp_path))["video"][0])
    loc = json.loads((tmp_path / "meta_0.gmeta").read_text())["jpeg"]["frame_info"][1][0]
    raw = bytearray((tmp_path / "data_0.gulp").read_bytes())
    raw[loc + 30] ^= 0x01
    (tmp_path / "data_0.gulp").write_bytes(bytes(raw))
    assert main(["repair", str(tmp_path), "--apply"]) == 0
    gd = GulpDirectory(str(tmp_path))
    assert "jpeg" not in gd.merged_meta_dict
    assert gd.merged_meta_dict["video"]["meta_data"] == [{"k": 2}, {"k": 3}]
    assert _segments(tmp_path)["video"] == before
    assert np.array_equal(np.stack(gd["video"][0]), pixels)


def _quarantined(root):
    return json.loads((root / "gulpio-quarantine" / "quarantine.json").read_text())


def test_a_lost_index_with_an_undecodable_segment_keeps_every_other_video(
    tmp_path, videos, make_frame, capsys
):
    """Issue 39, item 4: the rebuild refused the whole chunk for one bad segment, so repair
    wrote no index and every intact video of the chunk stayed unreadable. Now the chunk is
    rewritten without the video that cannot be rebuilt, as for damaged frames."""
    from gulpio_rs.segments import encode_video

    chunk = GulpChunk(str(tmp_path / "data_0.gulp"), str(tmp_path / "meta_0.gmeta"))
    with chunk.open("wb"):
        chunk.append("jpeg", {"k": 0}, [make_frame(32, 48, seed=s) for s in range(3)])
        chunk.append("first", {"k": 1}, encode_video(videos["bikes-short"], gop=4))
        chunk.append("broken", {"k": 2}, encode_video(videos["bbb"][:8], gop=4))
        chunk.append("last", {"k": 3}, encode_video(videos["bikes"][20:27], gop=4))
    gd = GulpDirectory(str(tmp_path))
    truth = {i: np.stack(gd[i][0]) for i in ("jpeg", "first", "last")}
    stored = _segments(tmp_path)
    os.remove(tmp_path / "data_0.gidx")
    entry = json.loads((tmp_path / "meta_0.gmeta").read_text())["broken"]
    loc = entry["frame_info"][4][0]  # segment 1 of "broken": frames 4..8
    raw = bytearray((tmp_path / "data_0.gulp").read_bytes())
    raw[loc] |= 0x80  # the forbidden bit of its first OBU header
    (tmp_path / "data_0.gulp").write_bytes(bytes(raw))

    assert main(["repair", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "without its 1 damaged video 'broken'" in out and "rewrite the index" not in out
    assert main(["repair", str(tmp_path), "--apply"]) == 0
    gd = GulpDirectory(str(tmp_path))
    assert gd.keys() == ["jpeg", "first", "last"]
    for id_, pixels in truth.items():
        assert np.array_equal(np.stack(gd[id_][0]), pixels), id_
    assert gd.merged_meta_dict["last"]["meta_data"] == [{"k": 3}]
    after = _segments(tmp_path)
    assert after["first"] == stored["first"] and after["last"] == stored["last"]
    [entry] = _quarantined(tmp_path)
    assert (entry["id"], entry["chunk"]) == ("broken", "data_0.gulp")
    assert entry["reasons"][0].startswith("frame 4: ")
    assert "segment 1 (frames 4..8): it does not decode" in entry["reasons"][0]
    assert main(["check", str(tmp_path), "--decode"]) == 0


@pytest.mark.parametrize("damage", [d for d in SEGMENTS_DAMAGE if d != "segments-key-bit"])
def test_a_damaged_segments_object_beside_a_lost_index_loses_only_its_video(
    stored, tmp_path, damage
):
    """Issue 39, item 3 with the index gone too: nothing is left to restore the object from,
    so the video it describes cannot be rebuilt (its segments do not decode to what it says);
    the chunk keeps its other video, frame-exact. (A flipped `segments` key leaves an entry
    without the object: the video then reads as JPEG frames that fail to decode, as in a
    chunk gulpio2 wrote; nothing in the data tells them apart.)"""
    ds = copy_dataset(stored, tmp_path)
    want = np.stack(GulpDirectory(str(stored))["bbb"][0])
    damage_segments(ds / "meta_0.gmeta", damage)
    os.remove(ds / "data_0.gidx")
    assert main(["repair", str(ds), "--apply"]) == 0
    gd = GulpDirectory(str(ds))
    assert "bikes" not in gd.merged_meta_dict
    assert np.array_equal(np.stack(gd["bbb"][0]), want)
    assert [e["id"] for e in _quarantined(ds)] == ["bikes"]
    assert "cannot be rebuilt" in _quarantined(ds)[0]["reasons"][0]
    assert main(["check", str(ds), "--decode"]) == 0
