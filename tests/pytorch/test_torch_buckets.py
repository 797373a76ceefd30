"""GulpBucketBatchSampler and bucket_keys: buckets from the index alone, batches that never mix
shapes, per-bucket batch sizes, hand-computed layouts, distribution, (elastic) resume, the
read-ahead's next batch, and a DataLoader with 2 workers."""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from test_torch_dataset import frame_numbers, video_number, write_videos  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

from gulpio_rs import GulpDirectory  # noqa: E402
from gulpio_rs.cli import main  # noqa: E402
from gulpio_rs.torch import (  # noqa: E402
    GulpBucketBatchSampler,
    GulpImageDataset,
    GulpVideoDataset,
    bucket_keys,
    gulp_collate,
)

# 20 videos: widths 24 (most), 30 and 20, as --frame-size 16 makes of mixed aspect ratios.
SIZES = {v: (16, 30) for v in (1, 4, 7, 10, 13)} | {v: (16, 20) for v in (2, 9, 17)}
LENGTHS = [3 + v % 4 for v in range(20)]
BATCH = {(16, 24): 3, (16, 30): 2, (16, 20): 4}


@pytest.fixture(scope="module")
def mixed_dir(tmp_path_factory):
    return write_videos(tmp_path_factory.mktemp("buckets"), LENGTHS, sizes=SIZES)


def _size(v):
    return SIZES.get(v, (16, 24))


def test_bucket_keys_by_hand():
    counts = np.array([5, 16, 40, 3, 0])
    shapes = np.array([(16, 24, 3), (16, 30, 3), (16, 24, 3), (8, 8, 1), (0, 0, 0)])
    assert bucket_keys(counts, shapes) == [(16, 24), (16, 30), (16, 24), (8, 8), (0, 0)]
    assert (
        bucket_keys(counts, shapes, buckets=[(16, 24)]) == [(16, 24), None, (16, 24)] + [None] * 2
    )
    assert bucket_keys(counts, shapes, "frames") == [5, 16, 40, 3, 0]
    assert bucket_keys(counts, shapes, "frames", [4, 16, 32]) == [4, 16, 32, None, None]
    assert bucket_keys(counts, shapes, "aspect") == [1.5, 1.88, 1.5, 1.0, None]
    assert bucket_keys(counts, shapes, "aspect", [1.0, 1.5, 1.78]) == [
        1.5,
        1.78,
        1.5,
        1.0,
        None,
    ]
    by_length = bucket_keys(counts, shapes, lambda n, h, w: "long" if n >= 16 else None)
    assert by_length == [None, "long", "long", None, None]
    with pytest.raises(ValueError, match="by must be"):
        bucket_keys(counts, shapes, "colour")
    with pytest.raises(ValueError, match="positive"):
        bucket_keys(counts, shapes, "frames", [0, 4])


def test_buckets_come_from_the_index_alone(mixed_dir, monkeypatch):
    ds = GulpVideoDataset(mixed_dir, frames=2, target="v")

    def refuse(*args, **kwargs):
        raise AssertionError("bucketing read frames or metadata")

    for name in ("read", "read_batch", "frame_bytes", "meta", "__getitem__", "frame_shapes"):
        monkeypatch.setattr(GulpDirectory, name, refuse)
    sampler = GulpBucketBatchSampler(ds, BATCH, shuffle=False)
    assert sampler.buckets == [((16, 20), 3, 4), ((16, 24), 12, 3), ((16, 30), 5, 2)]
    assert sampler.left_out == 0


def test_chunks_without_an_index_use_the_jpeg_headers(mixed_dir, tmp_path):
    copy = tmp_path / "legacy"
    shutil.copytree(mixed_dir, copy)
    for name in os.listdir(copy):
        if not name.endswith((".gulp", ".gmeta")):
            os.remove(copy / name)  # the binary indexes: the chunks are read as gulpio2's
    gd = GulpDirectory(str(copy))
    assert not gd.native_chunk(0).indexed
    assert (gd.video_shapes()[1] == 0).all()  # the index is what knows, and there is none
    sampler = GulpBucketBatchSampler(GulpVideoDataset(str(copy), target="v"), BATCH)
    assert [b[:2] for b in sampler.buckets] == [((16, 20), 3), ((16, 24), 12), ((16, 30), 5)]


def test_video_shapes_from_the_index(mixed_dir):
    gd = GulpDirectory(mixed_dir)
    counts, shapes = gd.video_shapes()
    assert counts.dtype == np.uint32 and shapes.dtype == np.uint16 and shapes.shape == (20, 3)
    assert counts.tolist() == LENGTHS
    assert [tuple(s) for s in shapes.tolist()] == [(*_size(v), 3) for v in range(20)]
    counts, shapes = gd.video_shapes(["v4", "v0"])
    assert counts.tolist() == [LENGTHS[4], LENGTHS[0]]
    assert shapes[:, 1].tolist() == [30, 24]
    with pytest.raises(KeyError, match="nope"):
        gd.video_shapes(["v1", "nope"])


def test_hand_computed_batches(tmp_path):
    # Widths 24 24 30 24 30 24 24: bucket (16, 24) is videos 0 1 3 5 6, (16, 30) is 2 4.
    path = write_videos(tmp_path, [2] * 7, sizes={2: (16, 30), 4: (16, 30)})
    ds = GulpVideoDataset(path, frames=1, target="v")

    def batches(world=1, rank=0, drop_last=False):
        s = GulpBucketBatchSampler(
            ds, 2, num_replicas=world, rank=rank, shuffle=False, drop_last=drop_last
        )
        return list(s)

    assert batches() == [[0, 1], [3, 5], [6], [2, 4]]
    assert batches(2, 0) == [[0, 1], [6]] and batches(2, 1) == [[3, 5], [2, 4]]
    # 4 batches on 3 ranks: positions 0-5 of the order, the last two the first two again.
    assert batches(3, 2) == [[6], [3, 5]]
    assert batches(drop_last=True) == [[0, 1], [3, 5], [2, 4]]  # no short batch
    assert batches(2, 1, drop_last=True) == [[3, 5]]  # 3 batches on 2 ranks: 1 each


def test_batches_never_mix_shapes_and_cover_the_epoch(mixed_dir):
    ds = GulpVideoDataset(mixed_dir, frames=2, target="v")
    for epoch in (0, 1):
        for drop_last in (False, True):
            sampler = GulpBucketBatchSampler(ds, BATCH, seed=3, drop_last=drop_last)
            sampler.set_epoch(epoch)
            batches = list(sampler)
            assert len(batches) == len(sampler)
            for batch in batches:
                (size,) = {_size(v) for v in batch}  # one bucket per batch
                assert len(batch) <= BATCH[size]
                assert len(batch) == BATCH[size] or not drop_last
            seen = Counter(v for b in batches for v in b)
            if drop_last:
                assert set(seen.values()) == {1}
            else:
                assert seen == Counter(range(20))
    a = GulpBucketBatchSampler(ds, BATCH, seed=3)
    b = GulpBucketBatchSampler(ds, BATCH, seed=3)
    assert list(a) == list(b)
    b.set_epoch(1)
    assert list(a) != list(b)  # another epoch: other batches, in another order


@pytest.mark.parametrize("world", [2, 3])
def test_ranks_share_the_batches(mixed_dir, world):
    ds = GulpVideoDataset(mixed_dir, frames=2, target="v")
    ranks = [
        list(GulpBucketBatchSampler(ds, BATCH, num_replicas=world, rank=r, seed=5))
        for r in range(world)
    ]
    one = list(GulpBucketBatchSampler(ds, BATCH, seed=5))
    assert {len(r) for r in ranks} == {-(-len(one) // world)}
    dealt = [ranks[k % world][k // world] for k in range(len(one))]
    assert dealt == one  # rank r takes batches r, r + world, ... of the one epoch order


def test_a_dataloader_with_two_workers_stacks_every_batch(mixed_dir):
    ds = GulpVideoDataset(mixed_dir, frames=2, offset="random", seed=1, target="v")
    sampler = GulpBucketBatchSampler(ds, BATCH, seed=2)
    loader = DataLoader(
        ds,
        batch_sampler=sampler,
        num_workers=2,
        multiprocessing_context="fork",
        collate_fn=gulp_collate,
    )
    seen = []
    for clips, vs in loader:
        assert isinstance(clips, torch.Tensor)  # no resize, no list
        assert clips.shape[1:] == (2, 3, *_size(vs[0].item()))
        for clip, v in zip(clips, vs.tolist(), strict=True):
            assert video_number(clip) == v and frame_numbers(clip) == frame_numbers(ds[v][0])
            seen.append(v)
    assert sorted(seen) == list(range(20))


def test_per_bucket_batch_sizes_and_images(mixed_dir):
    images = GulpImageDataset(mixed_dir, target="v")
    sampler = GulpBucketBatchSampler(images, lambda key: 1 if key[1] == 30 else 8)
    lengths = {}
    for batch in sampler:
        lengths.setdefault(_size(batch[0]), []).append(len(batch))
    assert {k: sorted(v) for k, v in lengths.items()} == {
        (16, 30): [1] * 5,
        (16, 24): [4, 8],  # 12 videos
        (16, 20): [3],
    }
    for batch in sampler:
        assert gulp_collate(images.__getitems__(batch))[0].shape[0] == len(batch)
    by_frames = GulpBucketBatchSampler(images, 4, by="frames")
    assert [k for k, _, _ in by_frames.buckets] == [3, 4, 5, 6]
    with pytest.raises(ValueError, match="no entry for bucket"):
        GulpBucketBatchSampler(images, {(16, 24): 2})
    with pytest.raises(TypeError, match="GulpVideoDataset"):
        GulpBucketBatchSampler(list(range(5)), 2)


@pytest.mark.parametrize("old, new", [(1, 1), (2, 2), (2, 3), (3, 1)])
def test_resume_counts_batches_also_on_another_world_size(mixed_dir, old, new):
    ds = GulpVideoDataset(mixed_dir, frames=2, target="v")

    def sampler(world, rank):
        s = GulpBucketBatchSampler(ds, BATCH, num_replicas=world, rank=rank, seed=4)
        s.set_epoch(2)
        return s

    everything = [tuple(b) for b in sampler(1, 0)]
    taken, state = [], None
    for r in range(old):
        s = sampler(old, r)
        it = iter(s)
        taken += [tuple(next(it)) for _ in range(2)]
        state = state or s.state_dict()
    rest = []
    for r in range(new):
        s = GulpBucketBatchSampler(ds, BATCH, num_replicas=new, rank=r, seed=4)
        s.load_state_dict(state)
        rest += [tuple(b) for b in s]
    if old == new == 1:
        assert taken + rest == everything
    got = Counter(taken + rest)
    assert not Counter(everything) - got  # every batch of the epoch
    assert sum((got - Counter(everything)).values()) < new  # and padding only beyond it


def test_a_state_of_other_buckets_is_refused(mixed_dir):
    ds = GulpVideoDataset(mixed_dir, frames=2, target="v")
    state = GulpBucketBatchSampler(ds, BATCH).state_dict()
    with pytest.raises(ValueError, match="buckets differ"):
        GulpBucketBatchSampler(ds, {**BATCH, (16, 24): 4}).load_state_dict(state)
    other = GulpVideoDataset(mixed_dir, frames=2, target="v", ids=[f"v{v}" for v in range(19)])
    with pytest.raises(ValueError, match="buckets differ"):
        GulpBucketBatchSampler(other, BATCH).load_state_dict(state)
    with pytest.raises(ValueError, match="not a GulpBucketBatchSampler"):
        GulpBucketBatchSampler(ds, BATCH).load_state_dict(state["sampler"])


@pytest.mark.filterwarnings("ignore:'set_vital' is deprecated")
@pytest.mark.parametrize("workers", [0, 2])
def test_stateful_dataloader_resumes_a_bucketed_epoch(mixed_dir, workers):
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    ds = GulpVideoDataset(mixed_dir, frames=2, target="v")

    def loader():
        sampler = GulpBucketBatchSampler(ds, BATCH, seed=6)
        return stateful.StatefulDataLoader(
            ds, batch_sampler=sampler, num_workers=workers, collate_fn=gulp_collate
        )

    whole = [vs.tolist() for _, vs in loader()]
    first = loader()
    it = iter(first)
    seen = [next(it)[1].tolist() for _ in range(3)]
    state = first.state_dict()
    del it, first
    resumed = loader()
    resumed.load_state_dict(state)
    assert seen + [vs.tolist() for _, vs in resumed] == whole


def test_the_read_ahead_knows_the_next_batch(mixed_dir):
    ds = GulpVideoDataset(mixed_dir, frames=2, target="v")
    for world, rank in [(1, 0), (2, 1)]:
        s = GulpBucketBatchSampler(ds, BATCH, num_replicas=world, rank=rank, seed=7)
        for workers in (1, 2, 3):
            for epoch in (3, 4):
                s.set_epoch(epoch)
                batches = list(s)
                for i, batch in enumerate(batches):
                    w = i % workers
                    got = s.read_ahead_batch(batch, [epoch, epoch + 1], workers, w, 4)
                    assert got is not None and got[0] in (epoch, epoch + 1)
                    mine = batches[w::workers]
                    k = mine.index(batch)
                    if k + 1 < len(mine):
                        assert got == (epoch, mine[k + 1])
                    else:  # this worker's first batch of the next epoch
                        s.set_epoch(epoch + 1)
                        assert got == (epoch + 1, list(s)[w])
                        s.set_epoch(epoch)
    assert s.read_ahead_batch([0, 19, 3], [0], 1, 0, 3) is None  # not a batch of the order


def test_info_shapes_shows_the_buckets(mixed_dir, capsys):
    assert main(["info", mixed_dir, "--shapes", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["video_frame_sizes"]
    assert got == {"24x16": 12, "30x16": 5, "20x16": 3}
    assert main(["info", mixed_dir, "--shapes"]) == 0
    out = capsys.readouterr().out
    assert "videos per frame size (first frame), 3 sizes:" in out
    assert [line.split()[:2] for line in out.splitlines()[-3:]] == [
        ["24x16", "12"],
        ["30x16", "5"],
        ["20x16", "3"],
    ]
    assert main(["info", mixed_dir]) == 0
    assert "videos per frame size" not in capsys.readouterr().out


def test_a_remote_dataset_reads_the_next_bucket_batch_ahead(mixed_dir, s3_server, monkeypatch):
    bucket = s3_server.make_bucket()
    s3_server.upload_dir(mixed_dir, bucket, "ds")
    ds = GulpVideoDataset(
        f"s3://{bucket}/ds", frames=2, target="v", storage_options=s3_server.storage_options()
    )
    sampler = GulpBucketBatchSampler(ds, BATCH, seed=8)  # the dataset follows its order
    calls = []
    real = GulpDirectory.prefetch

    def recording(self, ids, frames=None):
        calls.append(list(ids))
        return real(self, ids, frames)

    monkeypatch.setattr(GulpDirectory, "prefetch", recording)
    batches = list(sampler)
    for this, coming in zip(batches, batches[1:], strict=False):
        calls.clear()
        clips, vs = gulp_collate(ds.__getitems__(this))
        assert vs.tolist() == this and clips.shape[-1] == _size(this[0])[1]
        assert calls == [[f"v{v}" for v in coming]]
