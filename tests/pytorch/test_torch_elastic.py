"""Elastic resume: a GulpDistributedSampler state saved with N ranks loads into M ranks (any
M >= 1); together they yield every sample of the epoch not consumed yet, each once (padding
aside), and none already consumed. Checked against hand-computed layouts, over a grid of
(N, M, consumed, length) with and without drop_last, and through torchdata's
StatefulDataLoader."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gulpio_rs.torch import GulpDistributedSampler, shuffled_positions  # noqa: E402


def _run(n, world, consumed, **kw):
    """Each of ``world`` ranks consumes ``consumed`` samples; rank 0's state, and what the
    ranks consumed."""
    ranks = [GulpDistributedSampler(n, world, r, **kw) for r in range(world)]
    taken = []
    for s in ranks:
        it = iter(s)
        taken += [next(it) for _ in range(consumed)]
    return ranks[0].state_dict(), taken


def _resume(state, n, world, **kw):
    parts = []
    for r in range(world):
        s = GulpDistributedSampler(n, world, r, **kw)
        s.load_state_dict(state)
        s.set_epoch(state["epoch"])  # what the usual loop does: keeps the resume point
        parts.append(list(s))
    return parts


# Hand-computed: shuffle=False, so the order is 0, 1, 2, ... and samples are positions.
@pytest.mark.parametrize(
    "n, old, consumed, new, drop_last, expected",
    [
        # 10 samples on 3 ranks, 2 each consumed (positions 0-5): 2 ranks split 6-9.
        (10, 3, 2, 2, False, [[6, 8], [7, 9]]),
        # Same world: exactly where the ranks stopped, padding as before (0, 1 repeated).
        (10, 4, 1, 4, False, [[4, 8], [5, 9], [6, 0], [7, 1]]),
        # 7 on 2 ranks, 2 each (0-3): 3 ranks get 4, 5, 6.
        (7, 2, 2, 3, False, [[4], [5], [6]]),
        # 7 on 2, 2 each: 4 ranks share 4-6 and the 4th repeats the order's first sample.
        (7, 2, 2, 4, False, [[4], [5], [6], [0]]),
        # drop_last: 11 on 2, 3 each (0-5): 4 ranks get 6-9, 10 is dropped (4 ranks, 5 left).
        (11, 2, 3, 4, True, [[6], [7], [8], [9]]),
        # Shrinking: 12 on 4 ranks, 1 each (0-3): 1 rank gets 4-11.
        (12, 4, 1, 1, False, [list(range(4, 12))]),
        # Growing from 1 rank: 9 consumed 5 (0-4), 2 ranks: 5, 7 | 6, 8.
        (9, 1, 5, 2, False, [[5, 7], [6, 8]]),
        # 10 on 4 ranks (3 each, 2 of them padding): all consumed, nothing left anywhere.
        (10, 4, 3, 3, False, [[], [], []]),
        (10, 4, 3, 7, False, [[]] * 7),
        # Nothing consumed: the new world's own layout.
        (5, 2, 0, 3, False, [[0, 3], [1, 4], [2, 0]]),
    ],
)
def test_hand_computed_layouts(n, old, consumed, new, drop_last, expected):
    state, taken = _run(n, old, consumed, shuffle=False, drop_last=drop_last)
    assert state["global_consumed"] == old * consumed
    assert _resume(state, n, new, shuffle=False, drop_last=drop_last) == expected


def _check_elastic(n, old, consumed, new, drop_last, shuffle, seed=3, epoch=2):
    kw = dict(shuffle=shuffle, seed=seed, drop_last=drop_last)
    first = GulpDistributedSampler(n, old, 0, **kw)
    first.set_epoch(epoch)
    consumed = min(consumed, len(first))
    ranks = [GulpDistributedSampler(n, old, r, **kw) for r in range(old)]
    taken = []
    for s in ranks:
        s.set_epoch(epoch)
        taken += s.indices(0, consumed).tolist()
        it = iter(s)
        for _ in range(consumed):
            next(it)
    state = ranks[old - 1].state_dict()  # any rank's state: they consumed in lockstep
    assert state == ranks[0].state_dict()
    parts = _resume(state, n, new, **kw)

    order = shuffled_positions(np.arange(n), n, seed, epoch) if shuffle else np.arange(n)
    done = min(old * consumed, n)
    rest = order[done:].tolist()  # the samples not consumed yet, in the epoch's order
    counts = {len(p) for p in parts}
    assert len(counts) == 1, "every rank gets the same number of samples"
    per_rank = counts.pop()
    flat = [i for p in parts for i in p]
    if drop_last:
        assert per_rank == len(rest) // new
        padding = 0
    else:
        assert per_rank == -(-len(rest) // new)
        padding = per_rank * new - len(rest)
        assert padding < new
    # Rank r reads the rest of the order at r, r + new, ... (so a global step takes a
    # contiguous run of it); past its end the padding repeats the order's first samples, and
    # drop_last drops fewer than `new` samples at the end.
    cycle = order.tolist() * (new + 1)  # fewer samples than ranks: the padding goes round
    wrapped = (rest + cycle)[: per_rank * new]
    for r, p in enumerate(parts):
        assert p == wrapped[r::new]
    assert sorted(flat) == sorted(rest[: per_rank * new] + cycle[:padding])
    # Nothing consumed comes back, except as padding.
    assert not (set(flat) & set(taken)) - set(cycle[:padding])


@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("n", [1, 7, 12, 23])
def test_any_old_and_new_world(n, drop_last):
    for old, new in itertools.product([1, 2, 3, 4, 5], [1, 2, 3, 4, 6]):
        for consumed in range(0, -(-n // old) + 1):
            _check_elastic(n, old, consumed, new, drop_last, shuffle=True)
    _check_elastic(n, 3, 1, 2, drop_last, shuffle=False)


def test_resume_twice_in_one_epoch():
    # 4 ranks -> 3 -> 5 -> 1: each resume goes on from what all ranks consumed so far.
    n, kw = 50, dict(seed=11)
    order = shuffled_positions(np.arange(n), n, 11, 0).tolist()
    seen = []
    state = None
    for world, steps in [(4, 3), (3, 4), (5, 2), (1, 100)]:
        ranks = [GulpDistributedSampler(n, world, r, **kw) for r in range(world)]
        got = []
        for s in ranks:
            if state is not None:
                s.load_state_dict(state)
            it = iter(s)
            got.append([x for _, x in zip(range(steps), it, strict=False)])
        seen += [x for step in zip(*got, strict=False) for x in step]
        state = ranks[0].state_dict()
    assert seen == order  # every sample once, in the epoch's order, step by step


def test_states_of_the_first_format_still_load():
    # What version 1 saved (no global_consumed): 2 ranks, 3 samples each.
    old = {
        "gulpio_rs.GulpDistributedSampler": 1,
        "epoch": 1,
        "consumed": 3,
        "seed": 0,
        "shuffle": False,
        "drop_last": False,
        "num_replicas": 2,
        "dataset_len": 9,
    }
    same = GulpDistributedSampler(9, 2, 1, shuffle=False)
    same.load_state_dict(old)
    assert same.state_dict()["global_consumed"] == 6
    assert list(same) == [7, 0]
    other = [GulpDistributedSampler(9, 3, r, shuffle=False) for r in range(3)]
    for s in other:
        s.load_state_dict(old)
    assert [list(s) for s in other] == [[6], [7], [8]]
    assert GulpDistributedSampler.find_state({"x": [old]}) == old


def test_resume_refuses_another_order_or_a_bad_state():
    state = GulpDistributedSampler(20, 2, 0, seed=1).state_dict()
    for other in (
        GulpDistributedSampler(21, 2, 0, seed=1),
        GulpDistributedSampler(20, 2, 0, seed=2),
        GulpDistributedSampler(20, 2, 0, seed=1, shuffle=False),
    ):
        with pytest.raises(ValueError, match="cannot resume"):
            other.load_state_dict(state)
    s = GulpDistributedSampler(20, 3, 0, seed=1)
    with pytest.raises(ValueError, match="global_consumed must be in \\[0, 20\\]"):
        s.load_state_dict({**state, "consumed": 10, "global_consumed": 21})
    with pytest.raises(ValueError, match="global_consumed must be in"):
        s.load_state_dict({**state, "consumed": -1, "global_consumed": -1})
    with pytest.raises(ValueError, match="not a GulpDistributedSampler"):
        s.load_state_dict({**state, "gulpio_rs.GulpDistributedSampler": 99})
    # A state edited in one count but not the other says two things: refused.
    with pytest.raises(ValueError, match="consumed=5 but global_consumed=0"):
        s.load_state_dict({**state, "consumed": 5})


def test_consumed_after_an_elastic_resume():
    # 10 on 3 ranks, 1 each (G = 3); on 2 ranks the layout starts at position 1: rank 0 reads
    # 1, 3, 5, 7, 9 and has "consumed" the first of them.
    s = GulpDistributedSampler(10, 3, 0, shuffle=False)
    s.load_state_dict(s.state_dict(consumed=1))
    r0 = GulpDistributedSampler(10, 2, 0, shuffle=False)
    r0.load_state_dict(s.state_dict())
    assert len(r0) == 5 and r0.state_dict()["consumed"] == 1
    assert r0.indices().tolist() == [1, 3, 5, 7, 9]
    assert list(r0) == [3, 5, 7, 9]
    # A plain DataLoader's count goes on from the loaded "consumed": 2 more samples consumed.
    assert r0.state_dict(consumed=3)["global_consumed"] == 7
    # The next epoch is the usual layout again.
    r0.set_epoch(1)
    assert len(r0) == 5 and r0.indices().tolist() == [0, 2, 4, 6, 8]
    # The read-ahead finds batches in the shifted layout too.
    r0.set_epoch(0)
    r0.load_state_dict(s.state_dict())
    assert r0.locate([5, 7], [0]) == (0, 2)
