"""The datasets and the sampler under torch's DataLoader: 0, 1 and 2 workers under fork,
spawn and forkserver, the cores shared among workers for decoding, and mid-epoch resume
(torchdata's StatefulDataLoader, and a plain DataLoader), also with a different number of
workers."""

from __future__ import annotations

import os
from collections import Counter

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from test_torch_dataset import frame_numbers, frame_of, write_videos  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

from gulpio_rs import BrokenChunkWarning, GulpDirectory, _native  # noqa: E402
from gulpio_rs._reading import decode_threads  # noqa: E402
from gulpio_rs.torch import (  # noqa: E402
    GulpDistributedSampler,
    GulpVideoDataset,
    gulp_collate,
    shuffled_positions,
)

LENGTHS = [1, 3, 5, 8, 12, 16, 20, 7, 9, 30, 4]


@pytest.fixture(scope="module")
def gulp_dir(tmp_path_factory):
    return write_videos(tmp_path_factory.mktemp("videos"), LENGTHS)


def _dataset(path, **kw):
    # Random offsets from a seed: a pure function of (seed, epoch, index), so the clips a
    # worker decodes can be checked against the main process's.
    return GulpVideoDataset(path, frames=4, stride=2, offset="random", seed=1, target="v", **kw)


def _expected(ds, sampler, batch_size):
    order = list(sampler)
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def _check(batches, ds, expected_ids):
    assert [b[1].tolist() for b in batches] == expected_ids
    for clips, ids in batches:
        assert clips.shape[1:] == (4, 3, 16, 24)
        for clip, i in zip(clips, ids.tolist(), strict=True):
            assert frame_numbers(clip) == frame_numbers(ds[i][0])


@pytest.mark.parametrize(
    "context, workers",
    [(None, 0)] + [(c, w) for c in ("fork", "spawn", "forkserver") for w in (1, 2)],
)
def test_dataloader(gulp_dir, context, workers):
    ds = _dataset(gulp_dir)
    ds.set_epoch(2)
    sampler = GulpDistributedSampler(ds, 1, 0, seed=5)
    sampler.set_epoch(2)
    expected = _expected(ds, sampler, 3)
    # default_collate in fresh interpreters adds nothing but their start-up time.
    collates = (collate_reporting_shared, None) if context in (None, "fork") else (gulp_collate,)
    for collate in collates:
        loader = DataLoader(
            ds,
            batch_size=3,
            sampler=sampler,
            num_workers=workers,
            multiprocessing_context=context,
            collate_fn=collate,
        )
        batches = list(loader)
        _check([b[:2] for b in batches], ds, expected)
        if collate is collate_reporting_shared:
            # In a worker the batch is decoded straight into shared memory (and so passed to
            # this process as a handle, not copied); in this process into private memory.
            assert [bool(b[2]) for b in batches] == [workers > 0] * len(batches)


def collate_reporting_shared(samples):
    clips, targets = gulp_collate(samples)
    return clips, targets, torch.tensor(clips.is_shared())


class ThreadsProbe(GulpVideoDataset):
    """Reports the decode thread count each sample was decoded with."""

    def _target(self, id_):
        return decode_threads(self.threads)


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_workers_share_the_cores_for_decoding(gulp_dir, context, monkeypatch):
    monkeypatch.delenv("GULPIO_NUM_THREADS", raising=False)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    ds = ThreadsProbe(gulp_dir, frames=2)
    loader = DataLoader(ds, batch_size=4, num_workers=2, multiprocessing_context=context)
    share = max(1, len(os.sched_getaffinity(0)) // 2)
    assert {t for _, threads in loader for t in threads.tolist()} == {share}
    in_main = {t for _, threads in DataLoader(ds, batch_size=4) for t in threads.tolist()}
    assert in_main == {0}  # every usable core
    if context != "fork":
        return  # the rest is the same under every context
    explicit = ThreadsProbe(gulp_dir, frames=2, threads=2)
    loader = DataLoader(explicit, batch_size=4, num_workers=1, multiprocessing_context=context)
    assert {t for _, threads in loader for t in threads.tolist()} == {2}


# -- resume -----------------------------------------------------------------------------------


def _loader(cls, ds, sampler, workers):
    return cls(ds, batch_size=2, sampler=sampler, num_workers=workers, collate_fn=gulp_collate)


@pytest.mark.filterwarnings("ignore:'set_vital' is deprecated")
@pytest.mark.parametrize("workers, resumed_workers", [(0, 0), (2, 2), (2, 1), (0, 2)])
def test_stateful_dataloader_resumes_mid_epoch(gulp_dir, workers, resumed_workers):
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    ds = _dataset(gulp_dir)
    ds.set_epoch(3)
    sampler = GulpDistributedSampler(ds, 1, 0, seed=7)
    sampler.set_epoch(3)
    expected = _expected(ds, sampler, 2)

    loader = _loader(stateful.StatefulDataLoader, ds, sampler, workers)
    it = iter(loader)
    seen = [next(it) for _ in range(2)]  # interrupted after 2 of 6 batches
    state = loader.state_dict()
    del it, loader

    fresh = GulpDistributedSampler(ds, 1, 0, seed=7)  # a new process would start like this
    resumed = _loader(stateful.StatefulDataLoader, ds, fresh, resumed_workers)
    if resumed_workers == workers:
        resumed.load_state_dict(state)
    else:
        # StatefulDataLoader refuses another worker count; the sampler alone resumes.
        fresh.load_state_dict(GulpDistributedSampler.find_state(state))
    rest = list(resumed)
    _check(seen + rest, ds, expected)


@pytest.mark.parametrize("workers, resumed_workers", [(2, 2), (2, 1), (1, 0)])
def test_plain_dataloader_resumes_from_consumed(gulp_dir, workers, resumed_workers):
    ds = _dataset(gulp_dir)
    sampler = GulpDistributedSampler(ds, 1, 0, seed=8)
    expected = _expected(ds, sampler, 2)
    loader = _loader(DataLoader, ds, sampler, workers)
    it = iter(loader)
    seen = [next(it) for _ in range(3)]
    # The workers prefetch, so the sampler has yielded more than the loop consumed.
    assert sampler.state_dict()["consumed"] > 6
    state = sampler.state_dict(consumed=3 * 2)
    del it, loader

    fresh = GulpDistributedSampler(ds, 1, 0, seed=8)
    fresh.load_state_dict(state)
    rest = list(_loader(DataLoader, ds, fresh, resumed_workers))
    _check(seen + rest, ds, expected)


def test_broken_chunks_are_reported_once_not_per_worker(tmp_path, capfd):
    path = write_videos(tmp_path, [2] * 4, per_chunk=2)
    (tmp_path / "data_7.gulp").write_bytes(b"a data file without its meta file")
    with pytest.warns(BrokenChunkWarning, match="data_7"):
        ds = GulpVideoDataset(path, frames=1, target="v")
    capfd.readouterr()
    loader = DataLoader(ds, batch_size=2, num_workers=1, multiprocessing_context="spawn")
    assert sorted(v for _, targets in loader for v in targets.tolist()) == [0, 1, 2, 3]
    assert "BrokenChunkWarning" not in capfd.readouterr().err


@pytest.mark.filterwarnings("ignore:'set_vital' is deprecated")
@pytest.mark.parametrize("old, new, workers", [(2, 3, 0), (3, 2, 2), (4, 1, 0), (1, 4, 2)])
def test_stateful_dataloader_resumes_on_another_world_size(gulp_dir, old, new, workers):
    """Elastic resume through torchdata's StatefulDataLoader: rank 0's loader state of a run
    on `old` ranks, loaded by every rank of a run on `new` ranks."""
    stateful = pytest.importorskip("torchdata.stateful_dataloader")
    ds = _dataset(gulp_dir)
    n, steps, batch = len(ds), 2, 1

    def loader(world, rank):
        sampler = GulpDistributedSampler(ds, world, rank, seed=7)
        return stateful.StatefulDataLoader(
            ds, batch_size=batch, sampler=sampler, num_workers=workers, collate_fn=gulp_collate
        )

    seen, states = [], []
    for rank in range(old):
        first = loader(old, rank)
        it = iter(first)
        seen += [v for _ in range(steps) for v in next(it)[1].tolist()]
        states.append(first.state_dict())
        del it, first
    rest = []
    for rank in range(new):
        resumed = loader(new, rank)
        resumed.load_state_dict(states[0])
        for clips, vs in resumed:
            _check([(clips, vs)], ds, [vs.tolist()])  # the clips of those videos
            rest += vs.tolist()
    left = n - old * steps * batch
    padding = new * -(-left // new) - left
    order = shuffled_positions(np.arange(n), n, 7, 0).tolist()
    assert sorted(seen) == sorted(order[: old * steps * batch])  # consumed: the order's start
    assert Counter(seen + rest) == Counter(order + order[:padding])
    assert not set(rest) & set(seen) - set(order[:padding])


class LengthProbe(GulpVideoDataset):
    """Reports how many videos the directory each sample was read through holds."""

    def _target(self, id_):
        return len(self._directory())


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_workers_read_the_state_the_main_process_opened(tmp_path, context):
    """A chunk committed after the dataset was made is not in its workers' directories: the
    sampler's indices come from the main process's length, and a worker that saw a longer
    (or reordered) state would read other videos for them (docs/FORMAT.md §7.5)."""
    path = write_videos(tmp_path / "ds", LENGTHS[:6])
    _native.manifest_index(path, False, None)
    ds = LengthProbe(path, frames=1)
    n = len(ds)
    (chunk,) = GulpDirectory(path).new_chunks(1)
    with chunk.open("wb"):
        chunk.append("late", {"label": "class_0", "idx": 0, "v": 99}, [frame_of(99, 0)])
    assert len(GulpDirectory(path)) == n + 1
    loader = DataLoader(ds, batch_size=2, num_workers=2, multiprocessing_context=context)
    assert {t for _, lengths in loader for t in lengths.tolist()} == {n}
