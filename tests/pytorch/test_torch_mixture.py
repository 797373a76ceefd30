"""GulpMixture: weighted mixtures of datasets. Counts against hand-computed apportionments,
proportions over an epoch, draws without and with replacement, determinism across worker
counts, resume (also elastic) inside a mixture, and a DataLoader with 2 workers."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from test_torch_dataset import frame_numbers, video_number, write_videos  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

from gulpio_rs.torch import (  # noqa: E402
    GulpDistributedSampler,
    GulpImageDataset,
    GulpMixture,
    GulpVideoDataset,
    MixedShapesError,
    gulp_collate,
)
from gulpio_rs.torch._mixture import apportion  # noqa: E402

SIZES = (10, 7, 40)


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("sources")
    lengths = {0: [2 + v % 5 for v in range(10)], 1: [30] * 7, 2: [1] * 40}
    return [write_videos(root / f"s{s}", lengths[s]) for s in range(3)]


def _sources(dirs, **kw):
    kw = {"frames": 2, "target": "v", **kw}
    return [GulpVideoDataset(d, **kw) for d in dirs]


@pytest.mark.parametrize(
    "total, weights, expected",
    [
        (10, [1, 1, 1], [4, 3, 3]),  # 3.33 each: the one unit left goes to the first
        (7, [0.5, 0.3, 0.2], [4, 2, 1]),  # 3.5, 2.1, 1.4: the largest remainder is 0.5
        (1000, [5, 3, 2], [500, 300, 200]),
        (5, [0, 1, 3], [0, 1, 4]),  # 0, 1.25, 3.75
        (0, [1, 2], [0, 0]),
        (3, [1, 1, 1, 1], [1, 1, 1, 0]),
    ],
)
def test_apportion(total, weights, expected):
    assert apportion(total, weights) == expected


def test_defaults_are_a_concatenation(dirs):
    mix = GulpMixture(_sources(dirs))
    assert len(mix) == sum(SIZES) and mix.counts == list(SIZES)
    sources, samples, _ = mix.locate(range(len(mix)))
    for s, size in enumerate(SIZES):
        assert sorted(samples[sources == s].tolist()) == list(range(size))  # each once


@pytest.mark.parametrize("replacement", [False, True])
def test_proportions_follow_the_weights(dirs, replacement):
    mix = GulpMixture(_sources(dirs), [5, 3, 2], length=1000, replacement=replacement, seed=4)
    for epoch in (0, 1, 7):
        mix.set_epoch(epoch)
        sources, samples, _ = mix.locate(range(len(mix)))
        got = np.bincount(sources, minlength=3) / len(mix)
        assert np.abs(got - [0.5, 0.3, 0.2]).max() <= 0.01
        for s, size in enumerate(SIZES):
            assert samples[sources == s].min() >= 0 and samples[sources == s].max() < size


def test_without_replacement_every_sample_before_any_again(dirs):
    # Source 1 (7 samples) gets 300 draws an epoch: 42 or 43 each. Source 2 (40 samples) gets
    # 10 an epoch: four epochs show each of its samples once.
    mix = GulpMixture(_sources(dirs), [0, 300, 10], length=310, seed=2)
    assert mix.counts == [0, 300, 10]
    big_source = []
    for epoch in range(4):
        mix.set_epoch(epoch)
        sources, samples, draws = mix.locate(range(len(mix)))
        counts = Counter(samples[sources == 1].tolist())
        assert sorted(counts) == list(range(7)) and set(counts.values()) <= {42, 43}
        big_source += samples[sources == 2].tolist()
    assert sorted(big_source) == list(range(40))


def test_with_replacement_draws_independently(dirs):
    mix = GulpMixture(_sources(dirs), [0, 0, 1], length=40, replacement=True, seed=1)
    _, samples, draws = mix.locate(range(40))
    assert len(set(samples.tolist())) < 40  # a permutation would be a 1 in 40! chance
    assert draws.tolist() == list(range(1, 41))
    again = GulpMixture(_sources(dirs), [0, 0, 1], length=40, replacement=True, seed=1)
    assert again.locate(range(40))[1].tolist() == samples.tolist()
    mix.set_epoch(1)
    assert mix.locate(range(40))[1].tolist() != samples.tolist()
    mixed = GulpMixture(_sources(dirs), [1, 0, 1], length=20, replacement=[False, True, True])
    assert mixed.replacement == [False, True, True]
    _, samples, draws = mixed.locate(range(10))  # source 0, without: a permutation
    assert sorted(samples.tolist()) == list(range(10)) and set(draws.tolist()) == {0}
    with pytest.raises(ValueError, match="2 replacement flags for 3"):
        GulpMixture(_sources(dirs), replacement=[False, True])


def test_items_say_their_source_and_match_the_sources(dirs):
    sources = _sources(dirs)
    mix = GulpMixture(sources, [1, 1, 1], length=30, seed=3)
    for i in range(len(mix)):
        clip, v, s = mix[i]
        (src,), (j,), _ = mix.locate([i])
        assert s == src and v == j
        assert torch.equal(clip, sources[s][j][0])
    batch = mix.__getitems__(list(range(0, 30, 3)))
    clips, targets, which = gulp_collate(batch)
    assert clips.shape == (10, 2, 3, 16, 24)
    for clip, v, s, i in zip(clips, targets.tolist(), which.tolist(), range(0, 30, 3), strict=True):
        assert (v, s) == mix[i][1:]
        assert torch.equal(clip, mix[i][0])
    alone = GulpMixture(_sources(dirs, target=None), length=6)
    assert alone.counts == [1, 1, 4]  # 6 in proportion to 10, 7, 40: 1.05, 0.74, 4.21
    clips, which = gulp_collate(alone.__getitems__([0, 5]))
    assert which.tolist() == [0, 2] and clips.shape == (2, 2, 3, 16, 24)


def test_a_clip_that_the_transform_makes_a_tuple_stays_the_first_field(dirs):
    # Without targets, a transform returning two views once made the item (view, view,
    # source), and a ragged batch's sources the second views.
    def two_views(clip):
        return clip, clip.flip(0)

    mix = GulpMixture(_sources(dirs, target=None, transform=two_views), length=6)
    (first, second), s = mix[5]
    assert s == 2 and torch.equal(second, first.flip(0))
    ragged = GulpMixture(_sources(dirs, target=None, transform=two_views), length=6, ragged=True)
    clips, which = gulp_collate(ragged.__getitems__([0, 5]))
    assert which.tolist() == [0, 2]
    assert all(isinstance(c, tuple) and torch.equal(c[1], c[0].flip(0)) for c in clips)
    (firsts, seconds), which = gulp_collate(mix.__getitems__([0, 5]))
    assert which.tolist() == [0, 2] and torch.equal(seconds, firsts.flip(1))
    with_targets = GulpMixture(_sources(dirs, transform=two_views), length=6)
    (first, second), v, s = with_targets[5]
    assert s == 2 and torch.equal(second, first.flip(0))


def test_a_sample_drawn_twice_gets_its_own_random_clip(dirs):
    # Two 30-frame videos drawn 6 times each in an epoch: the draws start at different frames.
    two = [GulpVideoDataset(dirs[1], frames=2, offset="random", seed=5, target="v", ids=["v0"])]
    mix = GulpMixture(two, length=6)
    starts = [frame_numbers(mix[i][0])[0] for i in range(6)]
    assert len(set(starts)) > 1
    # The first pass of an epoch is the source's own clip for that epoch.
    _, _, draws = mix.locate([0])
    assert draws.tolist() == [0] and frame_numbers(mix[0][0]) == frame_numbers(two[0][0][0])


def _epoch(mix, sampler, workers, context="fork"):
    loader = DataLoader(
        mix,
        batch_size=4,
        sampler=sampler,
        num_workers=workers,
        collate_fn=gulp_collate,
        multiprocessing_context=context if workers else None,
    )
    out = []
    for clips, vs, sources in loader:
        assert clips.shape[1:] == (2, 3, 16, 24)
        for clip, v, s in zip(clips, vs.tolist(), sources.tolist(), strict=True):
            assert video_number(clip) == v % 32
            out.append((s, v, tuple(frame_numbers(clip))))
    return out


def test_the_same_samples_whatever_the_number_of_workers(dirs):
    runs = []
    for workers in (0, 1, 2):
        mix = GulpMixture(_sources(dirs, offset="random", seed=9), [2, 1, 1], length=24, seed=6)
        sampler = GulpDistributedSampler(mix, 1, 0, seed=3)
        mix.set_epoch(1)
        sampler.set_epoch(1)
        runs.append(_epoch(mix, sampler, workers))
    assert runs[0] == runs[1] == runs[2]
    assert Counter(s for s, _, _ in runs[0]) == {0: 12, 1: 6, 2: 6}


def _reporting_shared(samples):
    clips, targets, sources = gulp_collate(samples)
    return clips, sources, torch.tensor(clips.is_shared())


def test_batches_of_two_workers_are_gathered_into_shared_memory(dirs):
    mix = GulpMixture(_sources(dirs), [1, 1, 1], length=12, seed=1)
    loader = DataLoader(
        mix,
        batch_size=6,
        sampler=GulpDistributedSampler(mix, 1, 0),
        num_workers=2,
        multiprocessing_context="fork",
        collate_fn=_reporting_shared,
    )
    for clips, sources, shared in loader:
        assert shared.item() and len(set(sources.tolist())) > 1
        assert clips.shape == (6, 2, 3, 16, 24)


@pytest.mark.parametrize("old, new", [(1, 1), (2, 3), (3, 1)])
def test_resume_inside_a_mixture(dirs, old, new):
    def run(world, rank, state=None, batches=None):
        # Everything made afresh, as in a new process, then the state loaded.
        mix = GulpMixture(_sources(dirs, offset="random", seed=2), [3, 1, 2], length=30, seed=8)
        mix.set_epoch(5)
        sampler = GulpDistributedSampler(mix, world, rank, seed=1)
        sampler.set_epoch(5)
        if state is not None:
            sampler.load_state_dict(state)
        got = []
        loader = DataLoader(mix, batch_size=2, sampler=sampler, collate_fn=gulp_collate)
        for n, (clips, vs, srcs) in enumerate(loader):
            if n == batches:
                break
            got += [
                (s, v, tuple(frame_numbers(c)))
                for c, v, s in zip(clips, vs.tolist(), srcs.tolist(), strict=True)
            ]
        return got, sampler.state_dict(consumed=2 * batches) if batches else None, mix

    taken, state = [], None
    for r in range(old):
        got, saved, mix = run(old, r, batches=2)
        taken += got
        state = state or saved
    rest = []
    for r in range(new):
        rest += run(new, r, state=state)[0]
    if old == new == 1:
        assert taken + rest == run(1, 0)[0]  # exactly the uninterrupted epoch, in order
    # Every draw of the epoch once, with its own clip (the mixture draws some samples more
    # than once: compare multisets), padding aside.
    everything = Counter(
        (s, v, tuple(frame_numbers(clip))) for clip, v, s in (mix[i] for i in range(len(mix)))
    )
    got = Counter(taken + rest)
    assert not everything - got
    assert sum((got - everything).values()) < new


def test_a_mixture_of_images_and_sizes(dirs, tmp_path):
    wide = write_videos(tmp_path / "wide", [1] * 4, sizes={v: (16, 30) for v in range(4)})
    images = [GulpImageDataset(dirs[2], target="v"), GulpImageDataset(wide, target="v")]
    mix = GulpMixture(images, [1, 1], length=8, seed=2)
    with pytest.raises(MixedShapesError, match="GulpMixture of 2 sources"):
        mix.__getitems__(list(range(8)))
    ragged = GulpMixture(images, [1, 1], length=8, seed=2, ragged=True)
    clips, _, sources = gulp_collate(ragged.__getitems__(list(range(8))))
    assert [c.shape[-1] for c in clips] == [24 if s == 0 else 30 for s in sources.tolist()]
    resized = [GulpImageDataset(d, target="v", size=12) for d in (dirs[2], wide)]
    clips, _, _ = gulp_collate(GulpMixture(resized, length=8).__getitems__(list(range(8))))
    assert clips.shape == (8, 3, 12, 12)


def test_bad_arguments(dirs):
    sources = _sources(dirs)
    with pytest.raises(ValueError, match="at least one"):
        GulpMixture([])
    with pytest.raises(TypeError, match="GulpVideoDataset"):
        GulpMixture([list(range(3))])
    with pytest.raises(ValueError, match="2 weights for 3"):
        GulpMixture(sources, [1, 2])
    with pytest.raises(ValueError, match="weights"):
        GulpMixture(sources, [1, -1, 1])
    with pytest.raises(ValueError, match="weights"):
        GulpMixture(sources, [0, 0, 0])
    with pytest.raises(ValueError, match="target"):
        GulpMixture([sources[0], GulpVideoDataset(dirs[1], target=None)])
    with pytest.raises(ValueError, match="length"):
        GulpMixture(sources, length=-1)
    with pytest.raises(IndexError):
        GulpMixture(sources, length=5)[5]


def test_a_remote_source_reads_ahead_and_gives_the_same_samples(dirs, s3_server, monkeypatch):
    from torch.utils.data import BatchSampler

    from gulpio_rs import GulpDirectory

    bucket = s3_server.make_bucket()
    s3_server.upload_dir(dirs[1], bucket, "s1")
    options = s3_server.storage_options()

    def mixture(remote):
        local = GulpVideoDataset(dirs[0], frames=2, offset="random", seed=3, target="v")
        other = GulpVideoDataset(
            f"s3://{bucket}/s1" if remote else dirs[1],
            frames=2,
            offset="random",
            seed=3,
            target="v",
            storage_options=options if remote else None,
        )
        mix = GulpMixture([local, other], [1, 1], length=16, seed=5)
        return mix, GulpDistributedSampler(mix, 1, 0, seed=2)

    # Through a DataLoader with 2 workers: the same samples as from local files.
    assert _epoch(*mixture(True), workers=2) == _epoch(*mixture(False), workers=2)

    # Each batch prefetches the remote samples of the batch that comes next.
    calls = []
    real = GulpDirectory.prefetch

    def recording(self, ids, frames=None):
        calls.append(list(ids))
        return real(self, ids, frames)

    monkeypatch.setattr(GulpDirectory, "prefetch", recording)
    mix, sampler = mixture(True)
    batches = [list(b) for b in BatchSampler(sampler, 4, drop_last=False)]
    for this, coming in zip(batches, batches[1:], strict=False):
        calls.clear()
        mix.__getitems__(this)
        sources, samples, _ = mix.locate(coming)
        remote = [mix.datasets[1]._id(int(j)) for s, j in zip(sources, samples, strict=True) if s]
        assert calls == ([remote] if remote else [])
