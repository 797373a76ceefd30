"""The DataLoader path of issue 28: batches decoded into shared memory that a worker reuses only
once no process holds them, and the decode precision of the datasets and of gulpio2's API.

Correctness only (same pixels, same order, a batch never overwritten while referenced); the
speed is benches/bench_peers.py's."""

from __future__ import annotations

import gc

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from test_torch_dataset import write_videos  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402

import gulpio_rs  # noqa: E402
from gulpio_rs.torch import GulpVideoDataset, _shared, gulp_collate  # noqa: E402

TURBO = gulpio_rs.JPEG_BACKEND == "libjpeg-turbo"
needs_refcounts = pytest.mark.skipif(
    not _shared._refcounts_readable(), reason="this torch's shared-memory layout is not known"
)


def _segment(t: torch.Tensor) -> bytes:
    """The name of the shared-memory segment holding ``t`` (received from a worker)."""
    return t.untyped_storage()._share_filename_cpu_()[1]


# -- the pool in one process ------------------------------------------------------------------


@needs_refcounts
def test_a_segment_is_handed_out_again_only_when_nothing_uses_it():
    pool = _shared.SharedBatches(keep=2)
    a = pool.take((3, 5))
    ptr = a.data_ptr()
    view = a[1:]
    del a
    b = pool.take((3, 5))
    assert b.data_ptr() != ptr  # a view of the first one is still alive
    del view
    gc.collect()
    c = pool.take((3, 5))
    assert c.data_ptr() == ptr
    assert pool.take((2, 2)).shape == (2, 2)  # another size: its own segment


@needs_refcounts
def test_a_segment_mapped_by_another_holder_is_not_handed_out():
    pool = _shared.SharedBatches(keep=2)
    a = pool.take((4,))
    ptr = a.data_ptr()
    storage = a.untyped_storage()
    storage._shared_incref()  # what a batch in flight, or mapped by the main process, adds
    del a
    assert pool.take((4,)).data_ptr() != ptr
    storage._shared_decref()
    assert pool.take((4,)).data_ptr() == ptr


@needs_refcounts
def test_the_pool_keeps_at_most_keep_segments():
    pool = _shared.SharedBatches(keep=2)
    held = [pool.take((8,)) for _ in range(4)]
    assert len({t.data_ptr() for t in held}) == 4
    assert len(pool._kept) == 2


def test_without_readable_refcounts_every_batch_is_fresh_shared_memory(monkeypatch):
    monkeypatch.setattr(_shared, "_readable", False)
    pool = _shared.SharedBatches()
    a = pool.take((2, 3))
    assert a.is_shared() and not pool._kept
    del a
    assert pool.take((2, 3)).shape == (2, 3)
    assert _shared.handover(torch.zeros(2)).__class__ is torch.Tensor


# -- across processes -------------------------------------------------------------------------


class Marked(Dataset):
    """Batch ``n`` is ``shared_batch`` memory filled with each sample's index (mod 251)."""

    def __len__(self):
        return 48

    def __getitems__(self, indices):
        batch = _shared.shared_batch((len(indices), 4096))
        for row, i in zip(batch, indices, strict=True):
            row.fill_(i % 251)
        return _shared.handover(batch)


def _as_is(batch):
    return batch


def _intact(n: int, batch: torch.Tensor) -> bool:
    expected = (torch.arange(n * 4, n * 4 + 4) % 251).to(torch.uint8)
    return bool((batch[:, 0] == expected).all() and (batch == batch[:, :1]).all())


@needs_refcounts
@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_batches_held_by_the_main_process_are_never_overwritten(context):
    loader = DataLoader(
        Marked(),
        batch_size=4,
        num_workers=2,
        collate_fn=_as_is,
        multiprocessing_context=context,
    )
    held = list(loader)
    assert all(type(b) is torch.Tensor for b in held)  # a plain tensor again on arrival
    assert all(_intact(n, b) for n, b in enumerate(held))
    assert len({_segment(b) for b in held}) == len(held)  # all alive: none reused


@needs_refcounts
def test_batches_let_go_are_reused():
    loader = DataLoader(
        Marked(),
        batch_size=4,
        num_workers=2,
        collate_fn=_as_is,
        multiprocessing_context="fork",
    )
    segments = set()
    for n, batch in enumerate(loader):
        assert _intact(n, batch)
        segments.add(_segment(batch))
        del batch
    # 12 batches from 2 workers, each keeping at most KEEP segments.
    assert len(segments) <= 2 * _shared.KEEP


# -- the datasets -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    return write_videos(tmp_path_factory.mktemp("videos"), [6] * 12, per_chunk=5)


def _reference(ds, indices):
    clips, targets = gulp_collate(ds.__getitems__(indices))
    return clips.clone(), targets.clone()


@needs_refcounts
@pytest.mark.parametrize("fused", [False, True])
def test_dataset_batches_from_workers_are_the_in_process_batches_even_when_held(videos, fused):
    kw = dict(crop="center", size=(8, 12), hflip=0.0) if fused else {}
    ds = GulpVideoDataset(videos, frames=4, offset="random", seed=3, target="v", **kw)
    order = [5, 0, 11, 2, 7, 3, 9, 1, 4, 10, 6, 8]
    loader = DataLoader(
        ds,
        batch_size=3,
        sampler=order,
        num_workers=2,
        collate_fn=gulp_collate,
        multiprocessing_context="fork",
    )
    for _ in range(2):  # the second epoch reuses the first one's segments
        held = list(loader)
        for n, (clips, targets) in enumerate(held):
            want_clips, want_targets = _reference(ds, order[3 * n : 3 * n + 3])
            assert torch.equal(targets, want_targets)
            assert torch.equal(clips, want_clips)
        del held
        gc.collect()


def test_samples_pickled_by_torch_itself_stay_correct(videos):
    # A collate that returns the per-sample views: torch moves their (pooled) memory to its
    # own segments on the way out, and the pool must drop it rather than hand it out again.
    ds = GulpVideoDataset(videos, frames=2, target="v")
    loader = DataLoader(
        ds, batch_size=4, num_workers=1, collate_fn=_as_is, multiprocessing_context="fork"
    )
    for _ in range(2):
        for samples in loader:
            for clip, v in samples:
                assert torch.equal(clip, ds[v][0])


# -- decode precision --------------------------------------------------------------------------


@pytest.mark.skipif(not TURBO, reason="the zune-jpeg build has one precision")
def test_gulpio2_api_gives_gulpio2s_own_pixels(tmp_path):
    gulpio2 = pytest.importorskip("gulpio2")
    simplejpeg = pytest.importorskip("simplejpeg")
    path = write_videos(tmp_path, [5, 3], per_chunk=2)
    theirs = gulpio2.GulpDirectory(path)
    ours = gulpio_rs.GulpDirectory(path)
    for id_ in ("v0", "v1"):
        a, _ = ours[id_, 1:3]
        b, _ = theirs[id_, 1:3]
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)
    jpeg = bytes(ours.frame_bytes("v0", [2])[0])
    fast = simplejpeg.decode_jpeg(jpeg, fastdct=True, fastupsample=True)
    np.testing.assert_array_equal(ours.read("v0", [2], fast_decode=True)[0], fast)
    np.testing.assert_array_equal(ours.read("v0", [2])[0], simplejpeg.decode_jpeg(jpeg))


@pytest.mark.skipif(not TURBO, reason="the zune-jpeg build has one precision")
@pytest.mark.parametrize("size", [None, (20, 30)])  # full DCT scale, and 1/2 scale
def test_fast_decode_in_fused_reads_and_batches(tmp_path, make_frame, size):
    chunk = gulpio_rs.GulpChunk(tmp_path / "data_0.gulp", tmp_path / "meta_0.gmeta")
    with chunk.open("wb"):
        for v in range(2):
            chunk.append(f"t{v}", {}, [make_frame(64, 96, seed=10 * v + k) for k in range(3)])
    gd = gulpio_rs.GulpDirectory(tmp_path)
    ids = ["t0", "t1"]
    kw = dict(crop=(8, 16, 40, 60), size=size)
    fast = gd.read_batch(ids, [0, 2], fast_decode=True, **kw)
    accurate = gd.read_batch(ids, [0, 2], **kw)
    assert fast.shape == accurate.shape == (2, 2, *(size or (40, 60)), 3)
    diff = np.abs(fast.astype(int) - accurate.astype(int))
    assert diff.max() < 64 and diff.mean() < 4
    if size is None:  # full scale: the fast IDCT and upsampling show (scaled: little or none)
        assert diff.max() > 0
    for n, id_ in enumerate(ids):
        np.testing.assert_array_equal(gd.read(id_, [0, 2], fast_decode=True, **kw), fast[n])


def test_datasets_decode_fast_unless_told_not_to(videos):
    gd = gulpio_rs.GulpDirectory(videos)
    fast = GulpVideoDataset(videos, frames=3, target=None, layout="THWC")
    accurate = GulpVideoDataset(videos, frames=3, target=None, layout="THWC", fast_decode=False)
    frames = [2, 3, 4]  # the centred window of 6 frames
    assert np.array_equal(fast[4].numpy(), gd.read("v4", frames, fast_decode=True))
    assert np.array_equal(accurate[4].numpy(), gd.read("v4", frames))
    batch = gulp_collate(fast.__getitems__([4, 5]))
    assert np.array_equal(batch[0].numpy(), gd.read("v4", frames, fast_decode=True))
