"""Ids and frame indices no dataset can hold get the answer any unknown id or out-of-range
frame gets: an id with a lone surrogate (no stored id can have one: stored ids are UTF-8) is
unknown (``KeyError``, ``False`` for ``in``), not a ``UnicodeEncodeError``; an index beyond the
64-bit range is out of range (``IndexError`` naming the file, video and frame, with the same
attributes), not an ``OverflowError``. Every id- and frame-taking call is covered."""

from __future__ import annotations

import numpy as np
import pytest

from gulpio_rs import GulpChunk, GulpDirectory

LONE = "a\udc80"
FRAMES = 3


@pytest.fixture
def gd(tmp_path, make_frame):
    chunk = GulpChunk(tmp_path / "data_0.gulp", tmp_path / "meta_0.gmeta")
    with chunk.open("wb"):
        chunk.append("a", {"label": "x"}, [make_frame(16, 16, seed=k) for k in range(FRAMES)])
    return GulpDirectory(tmp_path)


def _id_calls(gd):
    chunk = next(gd.chunks())
    return {
        "gd[id]": lambda i: gd[i],
        "gd[id, frames]": lambda i: gd[i, 0:1],
        "read": lambda i: gd.read(i),
        "read_batch": lambda i: gd.read_batch([i]),
        "prefetch": lambda i: gd.prefetch([i]),
        "frame_bytes": lambda i: gd.frame_bytes(i),
        "num_frames": lambda i: gd.num_frames(i),
        "frame_shapes": lambda i: gd.frame_shapes(i),
        "meta": lambda i: gd.meta(i),
        "merged_meta_dict": lambda i: gd.merged_meta_dict[i],
        "chunk[id]": lambda i: chunk[i],
        "chunk.read_frames": lambda i: chunk.read_frames(i),
        "chunk.frame_bytes": lambda i: chunk.frame_bytes(i),
        "chunk.num_frames": lambda i: chunk.num_frames(i),
    }


def test_an_id_with_a_lone_surrogate_is_unknown(gd):
    assert LONE not in gd
    assert LONE not in next(gd.chunks())
    for name, call in _id_calls(gd).items():
        with pytest.raises(KeyError) as e:
            call(LONE)
        assert e.value.args == (LONE,), name


@pytest.mark.parametrize(
    "frames",
    [
        [2**64],
        [0, 2**63],
        [-(2**63) - 1],
        2**64,
        np.array([2**64 - 1], dtype=np.uint64),
    ],
    ids=["2**64", "2**63", "-2**63-1", "int", "uint64"],
)
def test_indices_beyond_64_bits_are_out_of_range(gd, frames):
    chunk = next(gd.chunks())
    calls = {
        "gd[id, frames]": lambda: gd["a", frames],
        "read": lambda: gd.read("a", frames=frames),
        "read crop": lambda: gd.read("a", frames=frames, crop=(0, 0, 8, 8), size=4),
        "read_batch": lambda: gd.read_batch(["a"], frames=frames),
        "prefetch": lambda: gd.prefetch(["a"], frames=frames),
        "frame_bytes": lambda: gd.frame_bytes("a", frames),
        "chunk.read_frames": lambda: chunk.read_frames("a", frames),
        "chunk.frame_bytes": lambda: chunk.frame_bytes("a", frames),
    }
    for name, call in calls.items():
        with pytest.raises(IndexError, match="out of range") as e:
            call()
        err = e.value
        assert (err.video_id, err.path) == ("a", chunk.data_file_path), name
        assert err.frame is not None and not 0 <= err.frame < FRAMES, name


def test_ordinary_out_of_range_indices_carry_the_same_attributes(gd):
    with pytest.raises(IndexError) as e:
        gd.read("a", frames=[0, 5])
    assert (e.value.video_id, e.value.frame) == ("a", 5)
    assert e.value.path.endswith("data_0.gulp") and "frame index 5" in str(e.value)
