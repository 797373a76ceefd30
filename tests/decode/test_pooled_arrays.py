"""Large output arrays (16 MiB or more) are decoded into buffers that are reused once numpy has
freed them: a reused buffer holds exactly the new batch, memory still referenced (the array,
a view of it, a tensor made from it) is never handed out again, and the pool stays bounded."""

from __future__ import annotations

import gc
import json
import os
import shutil

import numpy as np
import pytest

from gulpio_rs import CorruptDataError, GulpChunk, GulpDirectory, _native
from gulpio_rs.utils import img_to_jpeg_bytes

H, W, T = 256, 320, 48  # one video: 11.8 MB decoded; a batch of two: 23.6 MB (pooled)


def address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


@pytest.fixture(scope="module")
def gd(tmp_path_factory):
    from helpers import synthetic_frame

    root = tmp_path_factory.mktemp("pooled")
    frames = [img_to_jpeg_bytes(synthetic_frame(H, W, seed=k)) for k in range(8)]
    chunk = GulpChunk(root / "data_0.gulp", root / "meta_0.gmeta")
    with chunk.open("wb"):
        chunk.append("a", {}, frames * (T // 8))
        chunk.append("b", {}, frames[::-1] * (T // 8))
        chunk.append("c", {}, frames[3:] + frames[:3] + frames * (T // 8 - 1))
    return GulpDirectory(root)


@pytest.fixture(autouse=True)
def empty_pool():
    _native.release_pooled_buffers()
    yield
    _native.release_pooled_buffers()


def expected(gd, ids):
    out = np.empty((len(ids), T, H, W, 3), np.uint8)  # a private array: never pooled
    return gd.read_batch(ids, out=out)


def test_a_freed_batch_buffer_is_reused_and_holds_the_new_batch(gd):
    ab, ba, ca = expected(gd, ["a", "b"]), expected(gd, ["b", "a"]), expected(gd, ["c", "a"])
    first = gd.read_batch(["a", "b"])
    np.testing.assert_array_equal(first, ab)
    where = address(first)
    del first
    assert _native.pooled_bytes() >= ab.nbytes
    second = gd.read_batch(["b", "a"])
    assert address(second) == where  # the same memory, now holding the other batch
    np.testing.assert_array_equal(second, ba)
    del second
    third = gd.read_batch(["c", "a"], threads=1)
    np.testing.assert_array_equal(third, ca)


def test_memory_still_referenced_is_not_handed_out_again(gd):
    ab = expected(gd, ["a", "b"])
    batch = gd.read_batch(["a", "b"])
    view = batch[1, 5]
    held = gd.read_batch(["a", "b"])
    del batch  # the view keeps the buffer alive
    others = [gd.read_batch(["b", "c"]) for _ in range(3)]
    np.testing.assert_array_equal(view, ab[1, 5])
    np.testing.assert_array_equal(held, ab)
    addresses = {address(o) for o in others} | {address(held)}
    assert len(addresses) == 4
    assert all(not (a <= address(view) < a + ab.nbytes) for a in addresses)


def test_a_torch_tensor_keeps_its_buffer(gd):
    torch = pytest.importorskip("torch")
    ab = expected(gd, ["a", "b"])
    tensor = torch.from_numpy(gd.read_batch(["a", "b"]))
    gc.collect()
    for _ in range(3):
        gd.read_batch(["c", "b"])
    np.testing.assert_array_equal(tensor.numpy(), ab)


def test_the_pool_is_bounded_and_can_be_emptied(gd):
    sizes = []
    for frames in (slice(0, T), slice(0, T // 2), slice(0, T), slice(0, 40), slice(0, T)):
        sizes.append(gd.read_batch(["a", "b"], frames=frames).nbytes)
    assert 0 < _native.pooled_bytes() <= 2 * max(sizes)
    _native.release_pooled_buffers()
    assert _native.pooled_bytes() == 0


def test_small_arrays_are_not_pooled(gd):
    small = gd.read("a", frames=slice(0, 4))
    del small
    assert _native.pooled_bytes() == 0


def test_a_failed_decode_returns_nothing_and_keeps_the_pool_usable(tmp_path, gd):
    for name in ("data_0.gulp", "meta_0.gmeta", "data_0.gidx"):
        shutil.copy(os.path.join(gd.output_dir, name), tmp_path / name)
    with open(tmp_path / "meta_0.gmeta") as f:
        loc = json.load(f)["b"]["frame_info"][40][0]
    with open(tmp_path / "data_0.gulp", "r+b") as f:
        f.seek(loc + 300)
        byte = f.read(1)[0]
        f.seek(loc + 300)
        f.write(bytes([byte ^ 0xFF]))
    bad = GulpDirectory(tmp_path)
    with pytest.raises(CorruptDataError) as e:
        bad.read_batch(["a", "b"])
    assert e.value.video_id == "b" and e.value.frame == 40
    np.testing.assert_array_equal(bad.read_batch(["a", "c"]), expected(gd, ["a", "c"]))


def test_a_list_of_videos_of_different_sizes_shares_one_reused_buffer(gd, tmp_path):
    from helpers import synthetic_frame

    # Two more videos of another frame size beside "a" and "b": read_batch gives a list.
    small = [img_to_jpeg_bytes(synthetic_frame(H // 2, W // 2, seed=k)) for k in range(8)]
    root = tmp_path / "mixed"
    shutil.copytree(gd.output_dir, root)
    chunk = GulpChunk(root / "data_1.gulp", root / "meta_1.gmeta")
    with chunk.open("wb"):
        chunk.append("s1", {}, small * (T // 8))
        chunk.append("s2", {}, small[::-1] * (T // 8))
    mixed = GulpDirectory(root)
    ids = ["a", "s1", "b", "s2"]
    want = [mixed.read(i) for i in ids]
    got = mixed.read_batch(ids)
    assert isinstance(got, list)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)
    # One buffer behind all four: the arrays tile it, in order.
    starts = [address(a) for a in got]
    assert starts == sorted(starts) and starts[1] - starts[0] == got[0].nbytes
    where = starts[0]
    keep = got[2]
    del got, a, b
    gc.collect()
    assert _native.pooled_bytes() == 0  # one array of the list is still in use
    np.testing.assert_array_equal(keep, want[2])
    del keep
    gc.collect()
    again = mixed.read_batch(ids[::-1])
    assert address(again[0]) == where  # the freed buffer, reused
    for a, b in zip(again, want[::-1], strict=True):
        np.testing.assert_array_equal(a, b)
