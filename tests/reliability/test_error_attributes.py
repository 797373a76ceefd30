"""Every error whose message names a video (and frame) also carries them as attributes:
``path``, ``video_id`` and ``frame``, on the gulpio_rs.errors classes and on the builtin
``KeyError`` / ``IndexError`` / ``ValueError`` raised for an unknown id, a frame out of range
and an argument that does not fit a stored video. Code that handles errors reads the
attributes; it should never have to parse the text."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gulpio_rs import GulpChunk, GulpDirectory
from gulpio_rs.errors import CorruptDataError, FormatError


@pytest.fixture
def root(tmp_path, make_frame):
    chunk = GulpChunk(tmp_path / "data_0.gulp", tmp_path / "meta_0.gmeta")
    with chunk.open("wb"):
        chunk.append("a", {}, [make_frame(32, 48, seed=k) for k in range(3)])
        chunk.append("b", {}, [make_frame(32, 48, seed=9)])
    return tmp_path


def _frame_info(root, video):
    with open(root / "meta_0.gmeta") as f:
        return json.load(f)[video]["frame_info"]


def _located(err, path, video_id, frame):
    assert (err.path, err.video_id, err.frame) == (str(path), video_id, frame), str(err)
    assert repr(video_id)[1:-1] in str(err) or f'"{video_id}"' in str(err)
    if frame is not None:
        assert f"frame {frame}" in str(err) or f"frame index {frame}" in str(err)


def test_a_truncated_data_file(root):
    data = root / "data_0.gulp"
    data.write_bytes(data.read_bytes()[: _frame_info(root, "a")[2][0] + 10])
    with pytest.raises(FormatError, match="truncated") as e:
        GulpDirectory(root)["a"]
    _located(e.value, data, "a", 2)


def test_a_damaged_frame(root):
    data = root / "data_0.gulp"
    raw = bytearray(data.read_bytes())
    raw[_frame_info(root, "a")[1][0] + 40] ^= 0xFF
    data.write_bytes(bytes(raw))
    with pytest.raises(CorruptDataError) as e:
        GulpDirectory(root).read("a")
    _located(e.value, data, "a", 1)


def test_a_frame_out_of_range(root):
    with pytest.raises(IndexError) as e:
        GulpDirectory(root)["a", [7]]
    _located(e.value, root / "data_0.gulp", "a", 7)


def test_an_unknown_id(root):
    with pytest.raises(KeyError) as e:
        GulpDirectory(root).read("nope")
    assert e.value.args == ("nope",) and e.value.video_id == "nope"


def test_a_crop_that_does_not_fit_a_frame(root):
    with pytest.raises(ValueError) as e:
        GulpDirectory(root).read("b", crop=(0, 0, 500, 500))
    _located(e.value, root / "data_0.gulp", "b", 0)


def test_a_frame_to_store_that_is_not_a_jpeg(tmp_path, make_frame):
    chunk = GulpChunk(tmp_path / "data_0.gulp", tmp_path / "meta_0.gmeta")
    with pytest.raises(ValueError) as e, chunk.open("wb"):
        chunk.append("v", {}, [make_frame(8, 8), b"\xff\xd8 not a jpeg"])
    _located(e.value, tmp_path / "data_0.gulp", "v", 1)


def test_frames_of_different_sizes_stacked(tmp_path, make_frame):
    chunk = GulpChunk(tmp_path / "data_0.gulp", tmp_path / "meta_0.gmeta")
    with chunk.open("wb"):
        chunk.append("v", {}, [make_frame(8, 8), make_frame(16, 8), np.zeros((8, 8, 3), np.uint8)])
    with pytest.raises(ValueError, match="different sizes") as e:
        GulpDirectory(tmp_path).read("v")
    _located(e.value, tmp_path / "data_0.gulp", "v", 1)


@pytest.mark.parametrize(
    "damage, video_id, frame",
    [
        (lambda m: m["b"].pop("frame_info"), "b", None),
        (lambda m: m["b"].__setitem__("meta_data", {}), "b", None),
        (lambda m: m["a"]["frame_info"][1].__setitem__(2, 2**40), "a", 1),
    ],
    ids=["no-frame-info", "meta-not-a-list", "length-too-large"],
)
def test_a_meta_file_wrong_about_one_video(root, damage, video_id, frame):
    meta = json.loads((root / "meta_0.gmeta").read_text())
    damage(meta)
    (root / "meta_0.gmeta").write_text(json.dumps(meta))
    (root / "data_0.gidx").unlink()  # read as gulpio2 wrote it: from the .gmeta alone
    with pytest.raises(FormatError) as e:
        GulpDirectory(root, strict=True)
    _located(e.value, root / "meta_0.gmeta", video_id, frame)
