"""Frame sampling (a pure function of the video length) and the distributed sampler's order,
split and resume, without a DataLoader."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")

from gulpio_rs.torch import (  # noqa: E402
    GulpDistributedSampler,
    sample_frame_indices,
    sample_time_indices,
    shuffled_positions,
)
from gulpio_rs.torch._sampler import unshuffled_positions  # noqa: E402

# -- sample_frame_indices -------------------------------------------------------------------


def test_all_frames():
    assert sample_frame_indices(5) == [0, 1, 2, 3, 4]
    assert sample_frame_indices(7, stride=3) == [0, 3, 6]
    assert sample_frame_indices(0) == []


def test_fixed_count_with_stride_places_the_window_by_offset():
    # 4 frames 2 apart span 7 frames; a 10-frame video has 4 possible starts.
    assert sample_frame_indices(10, 4, stride=2, offset=0.0) == [0, 2, 4, 6]
    assert sample_frame_indices(10, 4, stride=2, offset=1.0) == [3, 5, 7, 9]
    assert sample_frame_indices(10, 4, stride=2) == [2, 4, 6, 8]  # centred
    assert sample_frame_indices(11, 3) == [4, 5, 6]  # centre frame 5 of 0..10
    assert sample_frame_indices(8, 8) == list(range(8))


def test_uniform_offsets_pick_every_start_equally():
    slots = 10 - 7 + 1
    starts = [sample_frame_indices(10, 4, stride=2, offset=u)[0] for u in np.arange(400) / 400]
    assert np.bincount(starts).tolist() == [400 // slots] * slots


def test_short_videos_loop():
    assert sample_frame_indices(3, 8) == [0, 1, 2, 0, 1, 2, 0, 1]
    assert sample_frame_indices(5, 4, stride=2, offset=0.9) == [0, 2, 4, 1]
    assert sample_frame_indices(1, 4, stride=3) == [0, 0, 0, 0]


def test_segments_tsn():
    assert sample_frame_indices(16, num_segments=4) == [2, 6, 10, 14]
    assert sample_frame_indices(16, num_segments=4, offset=0.0) == [0, 4, 8, 12]
    assert sample_frame_indices(16, num_segments=4, offset=[0, 0.3, 0.6, 0.99]) == [0, 5, 10, 15]
    assert sample_frame_indices(10, num_segments=3, offset=0.0) == [0, 3, 6]
    # Shorter than the number of segments: frames repeat, in order.
    assert sample_frame_indices(3, num_segments=8) == [0, 0, 0, 1, 1, 2, 2, 2]


@pytest.mark.parametrize("n", [1, 2, 5, 16, 17, 100, 1001])
@pytest.mark.parametrize("k", [1, 3, 8])
def test_segments_stay_in_their_segment(n, k):
    for u in (0.0, 0.25, 0.5, 0.999, 1.0):
        got = sample_frame_indices(n, num_segments=k, offset=u)
        assert len(got) == k and got == sorted(got)
        assert all(0 <= f < n for f in got)
        if n >= k:
            for i, f in enumerate(got):
                # Segment i covers [i n / k, (i + 1) n / k): the frames overlapping it.
                assert i * n // k <= f <= min(n - 1, (i + 1) * n // k)


def test_offset_names_are_the_datasets():
    # docs/TORCH.md gives the datasets' names; the pure functions take them too.
    assert sample_frame_indices(10, 4, stride=2, offset="start") == [0, 2, 4, 6]
    assert sample_frame_indices(10, 4, stride=2, offset="center") == [2, 4, 6, 8]
    assert sample_frame_indices(16, num_segments=4, offset="start") == [0, 4, 8, 12]
    assert sample_frame_indices(16, num_segments=4, offset="center") == [2, 6, 10, 14]
    ts = np.arange(10) / 10
    for name, number in (("start", 0.0), ("center", 0.5)):
        by_name = sample_time_indices(ts, 1.0, fps=10, clip_seconds=0.4, offset=name)
        by_number = sample_time_indices(ts, 1.0, fps=10, clip_seconds=0.4, offset=number)
        assert by_name[0] == by_number[0] and np.array_equal(by_name[1], by_number[1])
    assert sample_time_indices(ts, 1.0, fps=10, clip_seconds=0.4, offset="start")[0] == [0, 1, 2, 3]


def test_offset_random_draws_from_the_generator_given():
    # The same seed (or generator state) gives the same clip; draws cover every start.
    one = sample_frame_indices(100, 4, offset="random", rng=7)
    assert one == sample_frame_indices(100, 4, offset="random", rng=np.random.default_rng(7))
    rng = np.random.default_rng(0)
    starts = {sample_frame_indices(10, 4, offset="random", rng=rng)[0] for _ in range(200)}
    assert starts == set(range(7))
    # One independent draw per segment, each inside its segment.
    picks = sample_frame_indices(100, num_segments=4, offset="random", rng=1)
    assert [p // 25 for p in picks] == [0, 1, 2, 3]
    expected = [int((i + u) * 25) for i, u in enumerate(np.random.default_rng(1).random(4))]
    assert picks == expected
    ts = np.arange(100) / 10
    picked, times = sample_time_indices(ts, 10.0, fps=5, clip_seconds=2, offset="random", rng=3)
    u = np.random.default_rng(3).random()
    assert times[0] == pytest.approx(u * 8.0) and len(picked) == 10


@pytest.mark.parametrize("offset", ["end", "Start", "0.5", ""])
def test_unknown_offset_names_are_refused_by_name(offset):
    with pytest.raises(ValueError, match=r"one of \('center', 'random', 'start'\)"):
        sample_frame_indices(10, 4, offset=offset)
    with pytest.raises(ValueError, match=repr(offset)):
        sample_time_indices([0.0, 0.1], 0.2, fps=10, offset=offset)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(num_frames=-1),
        dict(num_frames=5, frames=0),
        dict(num_frames=5, frames=2, stride=0),
        dict(num_frames=5, frames=2, num_segments=2),
        dict(num_frames=5, num_segments=2, stride=2),
        dict(num_frames=5, frames=2, offset=1.5),
        dict(num_frames=5, num_segments=2, offset=[0.5]),
        dict(num_frames=0, frames=2),
        dict(num_frames=0, num_segments=2),
    ],
)
def test_invalid_arguments(kwargs):
    with pytest.raises(ValueError):
        sample_frame_indices(**kwargs)


# -- the epoch order --------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 31, 64, 65, 1000, 4099])
def test_shuffled_positions_is_a_permutation(n):
    p = shuffled_positions(np.arange(n), n, seed=3, epoch=1)
    assert sorted(p.tolist()) == list(range(n))
    # Element by element (how the sampler reads it) gives the same.
    assert shuffled_positions(np.arange(n)[::-1], n, 3, 1).tolist() == p[::-1].tolist()


@pytest.mark.parametrize("n", [1, 2, 3, 5, 64, 65, 1000, 4099])
def test_unshuffled_positions_inverts_the_order(n):
    p = shuffled_positions(np.arange(n), n, seed=9, epoch=4)
    assert unshuffled_positions(p, n, 9, 4).tolist() == list(range(n))


@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize(
    ("n", "world", "drop_last"), [(10, 1, False), (10, 3, False), (10, 3, True), (97, 4, False)]
)
def test_locate_finds_where_a_batch_is_in_the_order(n, world, drop_last, shuffle):
    for rank in range(world):
        s = GulpDistributedSampler(n, world, rank, shuffle=shuffle, seed=4, drop_last=drop_last)
        for epoch in (0, 3):
            s.set_epoch(epoch)
            order = s.indices().tolist()
            for k in range(len(order)):
                for size in (1, 3):
                    batch = order[k : k + size]
                    found = s.locate(batch, [epoch + 1, epoch])
                    # Padding repeats the order's first samples, so a batch may also be found
                    # at an earlier place with the same samples.
                    assert found is not None
                    e, at = found
                    assert s.epoch_indices(e, at, at + len(batch)).tolist() == batch
    s = GulpDistributedSampler(10, 1, 0, seed=4)
    assert s.locate([3, 3], [0, 1]) is None  # not in any order
    assert s.locate([], [0]) is None
    assert s.locate([42], [0]) is None


def _reference_walk(values, n, seed, epoch, inverse=False):
    """The permutation as shuffled_positions' docstring specifies it, in numpy: what the core
    (src/permute.rs) must compute bit for bit."""
    from gulpio_rs.torch._sampler import MASK64, mix64, mix64_array

    x = np.asarray(values, dtype=np.uint64)
    if n <= 1:
        return np.zeros_like(x)
    half = max(1, ((n - 1).bit_length() + 1) // 2)
    mask, shift = np.uint64((1 << half) - 1), np.uint64(half)
    base = mix64((seed & MASK64) ^ mix64(epoch & MASK64))
    keys = [np.uint64(mix64(base + r)) for r in range(6)]

    def encrypt(v):
        left, right = v >> shift, v & mask
        for key in keys:
            left, right = right, left ^ (mix64_array(right ^ key) & mask)
        return (left << shift) | right

    def decrypt(v):
        left, right = v >> shift, v & mask
        for key in reversed(keys):
            left, right = right ^ (mix64_array(left ^ key) & mask), left
        return (left << shift) | right

    step = decrypt if inverse else encrypt
    out = step(x)
    outside = out >= np.uint64(n)
    while outside.any():
        out[outside] = step(out[outside])
        outside = out >= np.uint64(n)
    return out


@pytest.mark.parametrize("n", [1, 2, 3, 7, 64, 65, 1000, 4099, 1 << 33])
@pytest.mark.parametrize("seed, epoch", [(0, 0), (12345, 7), (-3, 2**40), (2**64 - 1, 5)])
def test_the_core_computes_the_specified_permutation(n, seed, epoch):
    positions = np.unique(np.linspace(0, n - 1, num=min(n, 500)).astype(np.uint64))
    for inverse, ours in ((False, shuffled_positions), (True, unshuffled_positions)):
        want = _reference_walk(positions, n, seed, epoch, inverse)
        assert ours(positions, n, seed, epoch).tolist() == want.tolist()
    with pytest.raises(ValueError, match="outside the permutation"):
        shuffled_positions(np.array([max(n, 2)]), max(n, 2), seed, epoch)


def test_shuffled_positions_is_a_pure_function_of_seed_and_epoch():
    n = 1000
    base = shuffled_positions(np.arange(n), n, 0, 0)
    assert shuffled_positions(np.arange(n), n, 0, 0).tolist() == base.tolist()
    # The exact order is part of the contract: the same on every machine and version.
    assert shuffled_positions(np.arange(8), 8, 0, 0).tolist() == [4, 6, 1, 0, 7, 2, 5, 3]
    assert shuffled_positions(np.arange(10), 10, 12345, 7).tolist() == [
        9,
        7,
        0,
        1,
        6,
        5,
        4,
        3,
        2,
        8,
    ]
    others = [
        shuffled_positions(np.arange(n), n, s, e) for s, e in [(0, 1), (1, 0), (1, 1), (2, 0)]
    ]
    for other in others:
        assert (other == base).mean() < 0.05  # about 1/n agree by chance
        assert abs(np.corrcoef(other, base)[0, 1]) < 0.15
    assert abs(np.corrcoef(np.arange(n), base)[0, 1]) < 0.15


# -- GulpDistributedSampler -------------------------------------------------------------------


def _ranks(n, world, **kw):
    return [list(GulpDistributedSampler(n, world, r, **kw)) for r in range(world)]


@pytest.mark.parametrize("n", [1, 5, 10, 11, 37])
@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_split_is_even_disjoint_and_covers(n, world):
    parts = _ranks(n, world, seed=5)
    per_rank = -(-n // world)
    assert [len(p) for p in parts] == [per_rank] * world
    flat = [i for p in parts for i in p]
    assert set(flat) == set(range(n))
    # Only the padding repeats, and it repeats the epoch order's first samples.
    padding = per_rank * world - n
    counts = np.bincount(flat, minlength=n)
    assert counts.sum() - n == padding and counts.max() <= 1 + -(-padding // n)
    order = [parts[j % world][j // world] for j in range(per_rank * world)]
    assert order[n:] == (order[:n] * (1 + padding // n))[:padding]


@pytest.mark.parametrize("n, world", [(10, 3), (11, 4), (3, 4), (8, 2)])
def test_drop_last_drops_the_remainder(n, world):
    parts = _ranks(n, world, drop_last=True)
    assert [len(p) for p in parts] == [n // world] * world
    flat = [i for p in parts for i in p]
    assert len(set(flat)) == len(flat) == world * (n // world)


def test_order_depends_on_seed_and_epoch_only():
    a = GulpDistributedSampler(100, 2, 0, seed=1)
    b = GulpDistributedSampler(list(range(100)), 2, 0, seed=1)  # a sized dataset
    assert list(a) == list(b) == list(a)
    a.set_epoch(1)
    first = list(a)
    assert first != list(b)
    b.set_epoch(1)
    assert list(b) == first
    assert list(GulpDistributedSampler(100, 2, 0, seed=2)) != list(b)


def test_no_shuffle_is_interleaved_in_order():
    assert _ranks(7, 3, shuffle=False) == [[0, 3, 6], [1, 4, 0], [2, 5, 1]]


def test_world_from_environment(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setenv("RANK", "2")
    s = GulpDistributedSampler(9)
    assert (s.num_replicas, s.rank) == (3, 2)
    monkeypatch.delenv("WORLD_SIZE")
    monkeypatch.delenv("RANK")
    s = GulpDistributedSampler(9)
    assert (s.num_replicas, s.rank) == (1, 0)
    with pytest.raises(ValueError):
        GulpDistributedSampler(9, num_replicas=2, rank=2)


# -- resume -----------------------------------------------------------------------------------


@pytest.mark.parametrize("stop", [0, 1, 7, 13, 14])
def test_resume_yields_exactly_the_rest(stop):
    full = GulpDistributedSampler(27, 2, 1, seed=9)
    full.set_epoch(4)
    expected = list(full)
    s = GulpDistributedSampler(27, 2, 1, seed=9)
    s.set_epoch(4)
    it = iter(s)
    got = [next(it) for _ in range(stop)]
    state = s.state_dict()
    assert state["consumed"] == stop and state["epoch"] == 4
    fresh = GulpDistributedSampler(27, 2, 1, seed=9)
    fresh.load_state_dict(state)
    assert fresh.state_dict() == state  # before iterating, the loaded state is the state
    fresh.set_epoch(4)  # the usual loop calls it again: the resume point stays
    rest = list(fresh)
    assert got + rest == expected
    assert fresh.state_dict()["consumed"] == len(expected)
    # The next epoch is whole again.
    fresh.set_epoch(5)
    full.set_epoch(5)
    assert list(fresh) == list(full)


def test_resume_is_dropped_for_another_epoch():
    s = GulpDistributedSampler(20, 1, 0)
    s.load_state_dict({**s.state_dict(consumed=5), "epoch": 2})
    s.set_epoch(3)
    assert len(list(s)) == 20
    assert s.state_dict()["consumed"] == 20


def test_consumed_overrides_the_samplers_own_count():
    s = GulpDistributedSampler(20, 2, 0, seed=1)
    expected = list(s)
    it = iter(s)
    for _ in range(8):  # a DataLoader prefetching ahead of the training loop
        next(it)
    state = s.state_dict(consumed=3)
    resumed = GulpDistributedSampler(20, 2, 0, seed=1)
    resumed.load_state_dict(state)
    assert list(resumed) == expected[3:]
    with pytest.raises(ValueError):
        s.state_dict(consumed=11)


def test_resume_refuses_a_different_order():
    state = GulpDistributedSampler(20, 2, 0, seed=1).state_dict()
    for other in (
        GulpDistributedSampler(21, 2, 0, seed=1),
        GulpDistributedSampler(20, 2, 0, seed=2),
    ):
        with pytest.raises(ValueError, match="cannot resume"):
            other.load_state_dict(state)
    # The world size and drop_last may change (elastic resume: test_torch_elastic.py).
    GulpDistributedSampler(20, 4, 0, seed=1).load_state_dict(state)
    GulpDistributedSampler(20, 2, 0, seed=1, drop_last=True).load_state_dict(state)
    with pytest.raises(ValueError):
        GulpDistributedSampler(20, 2, 0).load_state_dict({"epoch": 0})


def test_resume_does_not_replay_the_epoch(monkeypatch):
    # O(1): only the remaining positions are ever computed.
    s = GulpDistributedSampler(10_000, 2, 0)
    s.load_state_dict(s.state_dict(consumed=4_990))
    computed = []
    real = shuffled_positions

    def counting(positions, *args):
        computed.append(len(positions))
        return real(positions, *args)

    monkeypatch.setattr("gulpio_rs.torch._sampler.shuffled_positions", counting)
    assert len(list(s)) == 10
    assert sum(computed) == 10


def test_find_state_in_a_nested_loader_state():
    s = GulpDistributedSampler(20, 1, 0)
    state = s.state_dict(consumed=4)
    nested = {"a": 1, "_snapshot": {"main": [{"x": None}, {"sampler_state": state}]}}
    assert GulpDistributedSampler.find_state(nested) == state
    assert GulpDistributedSampler.find_state({"a": [1, 2]}) is None


def testread_ahead_batch_follows_the_dataloaders_dealing_order():
    from torch.utils.data import BatchSampler

    from gulpio_rs.torch._readahead import coming_batch

    s = GulpDistributedSampler(50, 1, 0, seed=2)
    for workers in (1, 2, 3):
        for epoch in (4, 5):
            s.set_epoch(epoch)
            batches = [list(b) for b in BatchSampler(s, 4, drop_last=False)]
            nxt = {}
            for w in range(workers):
                dealt = batches[w::workers]  # what worker w gets, in order
                for a, b in zip(dealt, dealt[1:], strict=False):
                    nxt[tuple(a)] = b
            for i, batch in enumerate(batches):
                w = i % workers
                got = coming_batch(s, batch, [epoch, epoch + 1], workers, w, batch_size=4)
                assert got is not None and got[0] == epoch
                if tuple(batch) in nxt:
                    assert got[1] == nxt[tuple(batch)]
                else:  # its last batch of the epoch: the next epoch's first for this worker
                    s.set_epoch(epoch + 1)
                    first = [list(b) for b in BatchSampler(s, 4, drop_last=False)][w]
                    s.set_epoch(epoch)
                    assert got[1] == first
    assert coming_batch(s, [49, 49, 49], [0], 1, 0) is None


def test_sequential_batch_follows_the_dataloaders_dealing_order():
    from torch.utils.data import BatchSampler, SequentialSampler

    from gulpio_rs.torch._readahead import sequential_batch

    for n in (50, 48, 3):
        order = SequentialSampler(range(n))
        for workers in (1, 2, 3):
            batches = [list(b) for b in BatchSampler(order, 4, drop_last=False)]
            for i, batch in enumerate(batches):
                w = i % workers
                got = sequential_batch(batch, n, workers, w, batch_size=4)
                dealt = batches[w::workers]
                k = dealt.index(batch)
                # The next batch this worker gets: later in the epoch, else its first of the
                # next epoch (same order).
                want = (
                    dealt[k + 1] if k + 1 < len(dealt) else batches[w] if w < len(batches) else None
                )
                assert got == want, (n, workers, i)
    # Not a run of consecutive indices: the order is not sequential.
    assert sequential_batch([3, 5, 4], 50, 1, 0) is None
    assert sequential_batch([5, 4], 50, 1, 0) is None
    assert sequential_batch([], 50, 1, 0) is None
