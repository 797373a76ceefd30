"""gulpio-rs's own API on top of gulpio2's: lookups, zero-copy views, CRC checks, lifetime,
threads, writing semantics."""

from __future__ import annotations

import json
import os
import threading
import zlib

import numpy as np
import pytest

import gulpio_rs
from gulpio_rs import GulpChunk, GulpDirectory


def _write(directory, videos, chunk=0):
    c = GulpChunk(
        os.path.join(directory, f"data_{chunk}.gulp"),
        os.path.join(directory, f"meta_{chunk}.gmeta"),
    )
    with c.open("wb"):
        for id_, meta, frames in videos:
            c.append(id_, meta, frames)
    return c


@pytest.fixture
def dataset(tmp_path, make_frame):
    videos = [
        (
            f"v{i}",
            {"label": f"class_{i % 3}", "idx": i},
            [make_frame(24, 32, seed=i * 10 + k) for k in range(5)],
        )
        for i in range(6)
    ]
    _write(tmp_path, videos[:3], chunk=0)
    _write(tmp_path, videos[3:], chunk=1)
    return tmp_path, videos


def test_len_contains_keys_and_frame_counts(dataset):
    path, videos = dataset
    gd = GulpDirectory(path)
    assert len(gd) == 6
    assert gd.keys() == [v[0] for v in videos]
    assert "v4" in gd and "nope" not in gd
    assert gd.num_frames("v2") == 5
    assert gd.meta("v5") == {"label": "class_2", "idx": 5}
    assert gd.frame_shapes("v0") == [(24, 32, 3)] * 5
    assert [c.data_file_path for c in gd] == [
        os.path.join(str(path), "data_0.gulp"),
        os.path.join(str(path), "data_1.gulp"),
    ]


def test_numpy_integer_ids(tmp_path, make_frame):
    _write(tmp_path, [("7", {}, [make_frame(8, 8)])])
    gd = GulpDirectory(tmp_path)
    frames, _ = gd[np.int64(7)]
    assert len(frames) == 1
    assert np.int32(7) in gd


def test_frame_selection_forms(dataset):
    path, _ = dataset
    gd = GulpDirectory(path)
    all_frames, _ = gd["v1"]
    for sel, expect in [
        (slice(1, 3), [1, 2]),
        (slice(None, None, -1), [4, 3, 2, 1, 0]),
        ([0, -1], [0, 4]),
        (np.array([3, 1]), [3, 1]),
        (2, [2]),
        (np.int64(-2), [3]),
    ]:
        got, meta = gd["v1", sel]
        assert len(got) == len(expect)
        for g, k in zip(got, expect, strict=True):
            np.testing.assert_array_equal(g, all_frames[k])
        assert meta["idx"] == 1
    with pytest.raises(IndexError, match="v1"):
        gd["v1", 5]
    with pytest.raises(IndexError):
        gd["v1", [0, -6]]
    with pytest.raises(KeyError):
        gd["missing"]


def test_decoded_frames_are_close_to_the_originals(dataset):
    path, videos = dataset
    gd = GulpDirectory(path)
    for id_, _, originals in videos:
        frames, _ = gd[id_]
        for f, o in zip(frames, originals, strict=True):
            assert f.shape == o.shape and f.dtype == np.uint8
            mse = np.mean((f.astype(float) - o.astype(float)) ** 2)
            assert 10 * np.log10(255**2 / mse) > 30  # q90 JPEG of the original


def test_frame_bytes_are_zero_copy_read_only_and_checked(dataset):
    path, _ = dataset
    gd = GulpDirectory(path)
    views = gd.frame_bytes("v3")
    assert len(views) == 5
    meta = json.load(open(os.path.join(path, "meta_1.gmeta")))
    with open(os.path.join(path, "data_1.gulp"), "rb") as f:
        data = f.read()
    for view, (loc, pad, length) in zip(views, meta["v3"]["frame_info"], strict=True):
        assert isinstance(view, memoryview) and view.readonly
        assert bytes(view) == data[loc : loc + length - pad]
        arr = np.frombuffer(view, np.uint8)
        assert not arr.flags.writeable
        # The array does not own a copy: its base chain ends at the mapping's owner.
        assert arr.base is not None
        with pytest.raises(TypeError):
            view[0] = 0
    # A view outlives the directory object; the mapping stays alive while it is used.
    first = bytes(views[0])
    gd.close()
    del gd
    assert bytes(views[0]) == first
    assert zlib.crc32(views[0]) == zlib.crc32(first)


def test_close_and_context_manager(dataset):
    path, _ = dataset
    with GulpDirectory(path) as gd:
        assert len(gd) == 6
    with pytest.raises(ValueError, match="closed"):
        gd["v1"]


def test_many_threads_read_one_directory(dataset):
    path, videos = dataset
    gd = GulpDirectory(path)
    expected = {id_: gd[id_][0] for id_, _, _ in videos}
    errors = []

    def worker(seed):
        rng = np.random.default_rng(seed)
        try:
            for _ in range(60):
                id_ = f"v{rng.integers(0, 6)}"
                frames, _ = gd[id_]
                for a, b in zip(frames, expected[id_], strict=True):
                    np.testing.assert_array_equal(a, b)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_jpeg_bytes_are_stored_unchanged(tmp_path, make_frame):
    jpeg = gulpio_rs.utils.img_to_jpeg_bytes(make_frame(16, 16))
    _write(tmp_path, [("a", {}, [jpeg, bytearray(jpeg), memoryview(jpeg)])])
    gd = GulpDirectory(tmp_path)
    assert [bytes(v) for v in gd.frame_bytes("a")] == [jpeg] * 3


def test_exception_inside_write_publishes_nothing(tmp_path, make_frame):
    chunk = GulpChunk(tmp_path / "data_0.gulp", tmp_path / "meta_0.gmeta")
    with pytest.raises(RuntimeError):
        with chunk.open("wb"):
            chunk.append("a", {}, [make_frame(8, 8)])
            raise RuntimeError("boom")
    assert os.listdir(tmp_path) == []
    assert len(GulpDirectory(tmp_path)) == 0


def test_flush_publishes_and_append_mode_extends(tmp_path, make_frame):
    chunk = GulpChunk(tmp_path / "data_0.gulp", tmp_path / "meta_0.gmeta")
    with chunk.open("wb"):
        chunk.append("a", {"n": 1}, [make_frame(8, 8)])
        chunk.flush()
        # Published and readable by a second reader while the writer is still open.
        assert GulpDirectory(tmp_path).keys() == ["a"]
        chunk.append("b", {"n": 2}, [make_frame(8, 8)])
        assert list(chunk.meta_dict) == ["a", "b"]
    with chunk.open("ab"):
        chunk.append("a", {"n": 3}, [make_frame(8, 8, seed=5)])
    gd = GulpDirectory(tmp_path)
    assert gd.num_frames("a") == 2
    assert gd.merged_meta_dict["a"]["meta_data"] == [{"n": 1}, {"n": 3}]
    assert gd.meta("a") == {"n": 1}
    assert gd.chunk_objs_lookup[0].indexed


def test_open_modes(tmp_path):
    chunk = GulpChunk(tmp_path / "data_0.gulp", tmp_path / "meta_0.gmeta")
    with pytest.raises(NotImplementedError, match="mode: 'xb'"):
        with chunk.open("xb"):
            pass
    with pytest.raises(ValueError, match="not open for writing"):
        chunk.append("a", {}, [])


def test_invalid_frames_and_meta_are_rejected_before_writing(tmp_path, make_frame):
    chunk = GulpChunk(tmp_path / "data_0.gulp", tmp_path / "meta_0.gmeta")
    with chunk.open("wb"):
        chunk.append("ok", {}, [make_frame(8, 8)])
        with pytest.raises(ValueError, match='video "bad" frame 1'):
            chunk.append("bad", {}, [make_frame(8, 8), b"not a jpeg"])
        with pytest.raises(TypeError):
            chunk.append("bad2", {"x": object()}, [make_frame(8, 8)])
        with pytest.raises(ValueError):
            chunk.append("float", {}, [np.zeros((4, 4, 3), np.float32)])
    gd = GulpDirectory(tmp_path)
    assert gd.keys() == ["ok"]


def test_rgba_and_single_channel_frames_are_converted(tmp_path, make_frame):
    rgb = make_frame(16, 16)
    rgba = np.dstack([rgb, np.full((16, 16), 255, np.uint8)])
    gray = make_frame(16, 16, gray=True)
    _write(tmp_path, [("a", {}, [rgba, gray[:, :, None]])])
    frames, _ = GulpDirectory(tmp_path)["a"]
    assert frames[0].shape == (16, 16, 3) and frames[1].shape == (16, 16)


def test_colorspace_option(tmp_path, make_frame):
    _write(tmp_path, [("a", {}, [make_frame(16, 16), make_frame(16, 16, gray=True)])])
    gray, _ = GulpDirectory(tmp_path, colorspace="GRAY")["a"]
    rgb, _ = GulpDirectory(tmp_path, colorspace="RGB")["a"]
    assert [f.shape for f in gray] == [(16, 16), (16, 16)]
    assert [f.shape for f in rgb] == [(16, 16, 3), (16, 16, 3)]
    with pytest.raises(ValueError, match="colorspace"):
        GulpDirectory(tmp_path, colorspace="HSV")["a"]


def test_custom_decoder_receives_bytes(dataset):
    path, _ = dataset
    seen = []
    gd = GulpDirectory(path, jpeg_decoder=lambda b: seen.append(type(b)) or len(b))
    frames, _ = gd["v0"]
    assert seen == [bytes] * 5 and all(isinstance(n, int) for n in frames)


def test_new_chunks_number_after_everything_present(tmp_path, make_frame):
    _write(tmp_path, [("a", {}, [make_frame(8, 8)])], chunk=4)
    (tmp_path / "data_9.gulp").write_bytes(b"")  # an orphan still reserves its number
    with pytest.warns(gulpio_rs.BrokenChunkWarning):
        gd = GulpDirectory(tmp_path)
    assert [os.path.basename(c.data_file_path) for c in gd.new_chunks(2)] == [
        "data_10.gulp",
        "data_11.gulp",
    ]


def test_directory_pickles_small_and_reopens(dataset):
    import pickle

    path, _ = dataset
    gd = GulpDirectory(path, check_data=False)
    blob = pickle.dumps(gd)
    assert len(blob) < 500
    clone = pickle.loads(blob)
    assert clone.keys() == gd.keys() and not clone.check_data
    for a, b in zip(clone["v2"][0], gd["v2"][0], strict=True):
        np.testing.assert_array_equal(a, b)


def test_monkeypatched_fileio_encoder_is_used(tmp_path, make_frame, monkeypatch):
    from gulpio_rs import fileio

    fixed = gulpio_rs.utils.img_to_jpeg_bytes(make_frame(8, 8, seed=3))
    monkeypatch.setattr(fileio, "img_to_jpeg_bytes", lambda img: fixed)
    _write(tmp_path, [("a", {}, [make_frame(16, 16)])])
    assert [bytes(v) for v in GulpDirectory(tmp_path).frame_bytes("a")] == [fixed]
