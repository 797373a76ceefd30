"""The parallel decode engine: read / read_batch shapes, out=, colour handling, threads, the
GIL being released, fork safety, and the fallback decoder."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time

import numpy as np
import pytest
from helpers import JPEG_CORPUS, NO_CORPUS
from PIL import Image

import gulpio_rs
from gulpio_rs import GulpChunk, GulpDirectory
from gulpio_rs.utils import img_to_jpeg_bytes

CORPUS = JPEG_CORPUS


def _write(root, videos, chunk=0):
    c = GulpChunk(root / f"data_{chunk}.gulp", root / f"meta_{chunk}.gmeta")
    with c.open("wb"):
        for id_, frames in videos:
            c.append(id_, {"id": id_}, frames)


@pytest.fixture
def ds(tmp_path, make_frame):
    _write(
        tmp_path,
        [
            ("rgb", [make_frame(24, 40, seed=k) for k in range(6)]),
            ("rgb2", [make_frame(24, 40, seed=10 + k) for k in range(6)]),
            ("gray", [make_frame(24, 40, gray=True, seed=k) for k in range(4)]),
            ("mixed", [make_frame(24, 40, seed=1), make_frame(24, 40, gray=True, seed=2)]),
            ("sizes", [make_frame(24, 40, seed=1), make_frame(12, 20, seed=2)]),
            ("empty", []),
        ],
    )
    return GulpDirectory(tmp_path)


def test_read_stacks_the_same_frames_as_getitem(ds):
    arr = ds.read("rgb")
    assert arr.shape == (6, 24, 40, 3) and arr.dtype == np.uint8 and arr.flags.c_contiguous
    # gd[id] decodes with gulpio2's fast settings (read's fast_decode=True).
    fast = ds.read("rgb", fast_decode=True)
    for a, f in zip(fast, ds["rgb"][0], strict=True):
        np.testing.assert_array_equal(a, f)
    assert np.abs(fast.astype(int) - arr).max() <= 8
    np.testing.assert_array_equal(ds.read("rgb", [4, 1]), arr[[4, 1]])
    np.testing.assert_array_equal(ds.read("rgb", slice(None, None, 2)), arr[::2])
    np.testing.assert_array_equal(ds.read("rgb", -1), arr[-1:])
    np.testing.assert_array_equal(ds.read("rgb", np.array([0, 5])), arr[[0, 5]])
    with pytest.raises(IndexError):
        ds.read("rgb", [6])
    with pytest.raises(KeyError):
        ds.read("nope")


def test_read_channels_and_colorspace(ds):
    assert ds.read("gray").shape == (4, 24, 40, 1)
    assert ds.read("gray", colorspace="RGB").shape == (4, 24, 40, 3)
    assert ds.read("rgb", colorspace="GRAY").shape == (6, 24, 40, 1)
    mixed = ds.read("mixed", fast_decode=True)
    assert mixed.shape == (2, 24, 40, 3)
    gray_frame = ds["mixed"][0][1]
    np.testing.assert_array_equal(mixed[1, :, :, 0], gray_frame)
    np.testing.assert_array_equal(mixed[1, :, :, 2], gray_frame)


def test_read_refuses_frames_of_different_sizes(ds):
    with pytest.raises(ValueError, match=r"different sizes.*frame 1 is 20x12.*gd\[id\]"):
        ds.read("sizes")
    frames, _ = ds["sizes"]
    assert [f.shape for f in frames] == [(24, 40, 3), (12, 20, 3)]


def test_read_into_out_without_copy(ds):
    out = np.zeros((6, 24, 40, 3), np.uint8)
    got = ds.read("rgb", out=out)
    assert got is out
    np.testing.assert_array_equal(out, ds.read("rgb"))
    with pytest.raises(ValueError, match="shape"):
        ds.read("rgb", out=np.zeros((5, 24, 40, 3), np.uint8))
    with pytest.raises(ValueError, match="C-contiguous"):
        ds.read("rgb", out=np.zeros((6, 24, 80, 3), np.uint8)[:, :, ::2])


def test_empty_video(ds):
    assert ds.read("empty").shape[0] == 0
    assert ds["empty"] == ([], {"id": "empty"})


def test_getitem_frames_are_views_of_one_array(ds):
    frames, _ = ds["rgb"]
    bases = {id(f.base) for f in frames}
    assert len(bases) == 1 and frames[0].base is not None


def test_read_batch_stacks_or_lists(ds):
    batch = ds.read_batch(["rgb", "rgb2"])
    assert batch.shape == (2, 6, 24, 40, 3)
    np.testing.assert_array_equal(batch[1], ds.read("rgb2"))
    batch = ds.read_batch(["rgb", "rgb2"], frames=slice(0, 4))
    assert batch.shape == (2, 4, 24, 40, 3)
    per_video = ds.read_batch(["rgb", "gray"], frames=[[0, 1], [3]])
    assert isinstance(per_video, list)
    assert [a.shape for a in per_video] == [(2, 24, 40, 3), (1, 24, 40, 1)]
    np.testing.assert_array_equal(per_video[1][0], ds.read("gray", [3])[0])
    with pytest.raises(ValueError, match="different sizes"):
        ds.read_batch(["rgb", "sizes"])


def test_read_batch_into_a_reused_buffer(ds):
    out = np.zeros((2, 6, 24, 40, 3), np.uint8)
    got = ds.read_batch(["rgb", "rgb2"], out=out)
    assert got is out
    np.testing.assert_array_equal(out, ds.read_batch(["rgb", "rgb2"]))
    with pytest.raises(ValueError, match="shape"):
        ds.read_batch(["rgb", "rgb2"], out=np.zeros((2, 5, 24, 40, 3), np.uint8))
    with pytest.raises(ValueError, match="same number of frames"):
        ds.read_batch(["rgb", "gray"], out=out)


def test_thread_counts_give_identical_results(ds, monkeypatch):
    one = ds.read_batch(["rgb", "rgb2"], threads=1)
    two = ds.read_batch(["rgb", "rgb2"], threads=2)
    np.testing.assert_array_equal(one, two)
    monkeypatch.setenv("GULPIO_NUM_THREADS", "1")
    np.testing.assert_array_equal(ds.read("rgb"), one[0])
    monkeypatch.setenv("GULPIO_NUM_THREADS", "many")
    with pytest.raises(ValueError, match="GULPIO_NUM_THREADS"):
        ds.read("rgb")
    with pytest.raises(ValueError, match="threads"):
        ds.read("rgb", threads=-1)


@pytest.fixture
def big(tmp_path, make_frame):
    # Enough decoding (about 100 ms) for another thread to get scheduled during one call.
    frames = [img_to_jpeg_bytes(make_frame(360, 640, seed=k)) for k in range(4)] * 30
    _write(tmp_path, [("big", frames)])
    return GulpDirectory(tmp_path)


def test_decoding_releases_the_gil(big):
    big.read("big", threads=1)  # warm up: open the chunk, start the pool
    ticks: list[float] = []
    stop = threading.Event()

    def ticker():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    t = threading.Thread(target=ticker)
    t.start()
    try:
        start = time.perf_counter()
        big.read("big", threads=1)
        end = time.perf_counter()
    finally:
        stop.set()
        t.join()
    inside = [x for x in ticks if start < x < end]
    # With the GIL held for the whole call the other thread could not tick at all.
    assert len(inside) >= 5, (len(inside), end - start)


def test_two_threads_reading_both_progress(big):
    results = {}

    def reader(name):
        results[name] = big.read("big", threads=1)

    threads = [threading.Thread(target=reader, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert set(results) == {"a", "b"}
    np.testing.assert_array_equal(results["a"], results["b"])


def _read_in_child(path, queue):
    gd = GulpDirectory(path)
    queue.put(gd.read("rgb").shape)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork() is POSIX-only")
def test_pool_is_rebuilt_after_fork(ds):
    ds.read("rgb", threads=2)  # the parent's pool exists and has run
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_read_in_child, args=(ds.output_dir, queue))
    child.start()
    child.join(timeout=60)
    if child.is_alive():
        child.kill()
        pytest.fail("decoding in a forked child deadlocked")
    assert child.exitcode == 0
    assert queue.get(timeout=5) == (6, 24, 40, 3)


@pytest.mark.skipif(not CORPUS.is_dir(), reason=NO_CORPUS)
def test_unsupported_jpeg_uses_the_fallback_decoder(tmp_path):
    ari = (CORPUS / "ljt_testimgari.jpg").read_bytes()  # arithmetic-coded
    _write(tmp_path, [("ari", [ari, ari])])
    gd = GulpDirectory(tmp_path)

    def pillow(data: bytes) -> np.ndarray:
        import io

        return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))

    if gulpio_rs._native.JPEG_BACKEND == "libjpeg-turbo":  # decodes arithmetic coding itself
        np.testing.assert_array_equal(gd.read("ari")[0], pillow(ari))
    else:
        with pytest.raises(gulpio_rs.UnsupportedJpegError) as e:
            gd.read("ari")
        assert e.value.video_id == "ari" and e.value.frame == 0

    gd = GulpDirectory(tmp_path, fallback_decoder=pillow)
    arr = gd.read("ari")
    assert arr.shape == (2, 149, 227, 3)
    np.testing.assert_array_equal(arr[0], pillow(ari))
    assert gd["ari"][0][0].shape == (149, 227, 3)
    assert gd.read_batch(["ari"]).shape == (1, 2, 149, 227, 3)
    np.testing.assert_array_equal(GulpDirectory(tmp_path, jpeg_decoder=pillow).read("ari"), arr)


def test_default_threads_share_the_cores_among_ranks_and_dataloader_workers(monkeypatch):
    import sys
    import types

    from gulpio_rs import _threads
    from gulpio_rs._threads import decode_threads

    monkeypatch.delenv("GULPIO_NUM_THREADS", raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    monkeypatch.setattr(_threads, "usable_cores", lambda: 16)
    assert decode_threads() == 0  # a lone process: every usable core
    # A stand-in for torch inside a DataLoader worker (gulpio_rs never imports torch itself).
    worker = types.SimpleNamespace(num_workers=4)
    fake = types.ModuleType("torch")
    fake.utils = types.SimpleNamespace(data=types.SimpleNamespace(get_worker_info=lambda: worker))
    monkeypatch.setitem(sys.modules, "torch", fake)
    assert decode_threads() == 4  # 16 cores, 4 workers
    # Reading from object storage, a worker also waits on round trips: the others may use
    # its cores meanwhile, so its share is not divided among the workers.
    assert decode_threads(remote=True) == 0
    worker.num_workers = 1
    assert decode_threads() == 0  # the only worker: every core
    worker.num_workers = 32
    assert decode_threads() == 1  # never fewer than one
    assert decode_threads(4) == 4  # an explicit count wins
    monkeypatch.setenv("GULPIO_NUM_THREADS", "3")
    assert decode_threads() == 3 and decode_threads(5) == 5
    monkeypatch.delenv("GULPIO_NUM_THREADS")
    # torchrun: 2 ranks on this machine, each with 4 workers
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    worker.num_workers = 4
    assert decode_threads() == 2
    assert decode_threads(remote=True) == 8  # divided among the ranks only
    fake.utils.data.get_worker_info = lambda: None  # a rank's main process
    assert decode_threads() == 8
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "not a number")
    assert decode_threads() == 0
