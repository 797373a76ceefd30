"""Read-ahead from object storage (``GulpDirectory.prefetch`` and the PyTorch datasets' use of
it), against the real S3 server through the fault-injecting proxy: prefetched bytes give the
same pixels as local reads, are fetched once, are CRC-checked like any others, and a
read-ahead that fails or is never used costs nothing but its requests."""

from __future__ import annotations

import time

import numpy as np
import pytest

from gulpio_rs import GulpDirectory
from gulpio_rs.errors import RemoteConfigError


def _write(root, make_frame, videos=12, frames=6) -> list[str]:
    gd = GulpDirectory(str(root))
    ids = []
    for k, chunk in enumerate(gd.new_chunks(3)):
        with chunk.open("wb"):
            for v in range(videos // 3):
                vid = f"c{k}-v{v}"
                chunk.append(
                    vid,
                    {"label": v},
                    [make_frame(32, 48, seed=97 * k + 7 * v + s) for s in range(frames)],
                )
                ids.append(vid)
    return ids


@pytest.fixture
def remote(tmp_path, make_frame, s3_server, fault_proxy):
    """``(local GulpDirectory, url, options through the proxy, ids, proxy)``."""
    local = tmp_path / "ds"
    local.mkdir()
    ids = _write(local, make_frame)
    bucket = s3_server.make_bucket()
    s3_server.upload_dir(local, bucket, "ds")
    proxy = fault_proxy(s3_server.endpoint)
    options = dict(s3_server.storage_options(), aws_endpoint=proxy.url, retry_timeout="20")
    return GulpDirectory(str(local)), f"s3://{bucket}/ds", options, ids, proxy


def _settled(proxy, at_least: int = 0) -> int:
    """The proxy's request count once it stops changing (a prefetch returns before its
    requests are made); a wait, not a timing check."""
    deadline = time.monotonic() + 20
    last, since = proxy.requests, time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = proxy.requests
        if now != last:
            last, since = now, time.monotonic()
        elif now >= at_least and time.monotonic() - since > 0.3:
            break
    return last


def _made(proxy, run, expected: int) -> int:
    """The requests ``run()`` makes, counted once the count has reached ``expected`` and
    stopped changing (or the wait ended): on a loaded machine a prefetch can start well after
    ``run`` returns, later than ``_settled``'s quiet spell."""
    before = _settled(proxy)
    run()
    return _settled(proxy, at_least=before + expected) - before


def test_a_prefetched_batch_is_read_from_the_read_ahead(remote):
    local, url, options, ids, proxy = remote
    gd = GulpDirectory(url, storage_options=options)
    batch = ids[1:10:2]
    gd.read_batch(ids, frames=slice(0, 1))  # chunks opened
    proxy.reset_counters()
    gd.prefetch(batch, frames=slice(1, 5))
    fetched = _settled(proxy, at_least=len(batch))
    assert fetched == len(batch)  # one request per clip, made by the prefetch
    got = gd.read_batch(batch, frames=slice(1, 5))
    assert proxy.requests == fetched  # the read asked the store for nothing
    np.testing.assert_array_equal(got, local.read_batch(batch, frames=slice(1, 5)))
    # A part of a prefetched range (one frame of a clip) is served from it too.
    gd.prefetch([ids[0]], frames=slice(0, 6))
    fetched = _settled(proxy, at_least=fetched + 1)
    np.testing.assert_array_equal(gd.read(ids[0], [3]), local.read(ids[0], [3]))
    assert proxy.requests == fetched


def test_a_read_ahead_nobody_reads_changes_nothing(remote):
    local, url, options, ids, proxy = remote
    gd = GulpDirectory(url, storage_options=options)
    gd.read_batch(ids, frames=slice(0, 1))
    gd.prefetch(ids[:4], frames=[0, 2])
    np.testing.assert_array_equal(
        gd.read_batch(ids[4:8], frames=[1, 3]), local.read_batch(ids[4:8], frames=[1, 3])
    )


def test_a_flipped_byte_in_a_prefetched_body_is_caught_and_refetched(remote):
    local, url, options, ids, proxy = remote
    gd = GulpDirectory(url, storage_options=options)
    gd.read_batch(ids, frames=slice(0, 1))
    proxy.set_faults(flip_byte=1)
    gd.prefetch(ids[:3])
    _settled(proxy, at_least=3)
    proxy.set_faults()
    np.testing.assert_array_equal(gd.read_batch(ids[:3]), local.read_batch(ids[:3]))
    assert proxy.faults_injected() == 1


def test_a_failed_prefetch_is_fetched_again_by_the_read(remote):
    local, url, options, ids, proxy = remote
    gd = GulpDirectory(url, storage_options=dict(options, max_retries="0"))
    gd.read_batch(ids, frames=slice(0, 1))
    proxy.set_faults(status=503, count=1000)
    gd.prefetch(ids[:2])
    _settled(proxy, at_least=2)
    proxy.set_faults()
    np.testing.assert_array_equal(gd.read_batch(ids[:2]), local.read_batch(ids[:2]))


def test_readahead_zero_turns_it_off(remote):
    _, url, options, ids, proxy = remote
    gd = GulpDirectory(url, storage_options=dict(options, readahead="0"))
    gd.read_batch(ids, frames=slice(0, 1))
    proxy.reset_counters()
    gd.prefetch(ids[:4])
    assert _settled(proxy) == 0
    with pytest.raises(RemoteConfigError, match="readahead"):
        GulpDirectory(url, storage_options=dict(options, readahead="lots"))


def test_prefetch_fills_the_local_cache(remote, tmp_path):
    local, url, options, ids, proxy = remote
    cache = tmp_path / "cache"
    gd = GulpDirectory(url, storage_options=options, cache_dir=cache)
    gd.read_batch(ids, frames=slice(0, 1))  # every block is cached already
    fresh = GulpDirectory(url, storage_options=options, cache_dir=tmp_path / "cold")
    fresh.read(ids[0], [0])
    proxy.reset_counters()
    fresh.prefetch(ids)
    fetched = _settled(proxy, at_least=1)
    np.testing.assert_array_equal(fresh.read_batch(ids), local.read_batch(ids))
    assert proxy.requests == fetched
    assert any((tmp_path / "cold").iterdir())


def test_prefetch_of_a_local_directory_does_nothing(remote):
    local, _, _, ids, _ = remote
    assert local.prefetch(ids) is None
    with pytest.raises(KeyError):
        local.prefetch(["no such id"])


# -- the PyTorch datasets read ahead along GulpDistributedSampler's order ------------------------


def test_the_dataset_fetches_the_next_batch_while_decoding_this_one(remote):
    pytest.importorskip("torch")
    from torch.utils.data import BatchSampler

    from gulpio_rs.torch import GulpDistributedSampler, GulpVideoDataset

    local, url, options, ids, proxy = remote
    ds = GulpVideoDataset(url, frames=3, offset="random", storage_options=options, target=None)
    sampler = GulpDistributedSampler(ds, num_replicas=1, rank=0, seed=11)
    sampler.set_epoch(2)
    batches = [list(b) for b in BatchSampler(sampler, batch_size=4, drop_last=False)]
    control = GulpDirectory(url, storage_options=dict(options, readahead="0"))
    control.read_batch(ids, frames=slice(0, 1))

    def requests_for(batch) -> int:
        """What reading ``batch`` with the frames drawn for its read-ahead costs."""
        before = _settled(proxy)
        control.read_batch(
            [ds._id(i) for i in batch], frames=[ds._planned[(ds.epoch, i)] for i in batch]
        )
        return _settled(proxy) - before

    ds.__getitems__(batches[0])  # chunks opened, batch 1 prefetched
    for this, coming in zip(batches[1:], batches[2:], strict=False):
        before = _settled(proxy)
        got = ds.__getitems__(this)
        after = _settled(proxy)
        # The read of this batch asked the store for nothing: the only requests made were
        # the read-ahead of the coming batch.
        assert after - before == requests_for(coming)
        frames = {i: local.frame_shapes(ds._id(i)) for i in this}
        assert all(clip.shape[0] == 3 for clip in got) and frames


def _dataset_costs(remote):
    """``(dataset, cost)``: a remote dataset (seeded frame offsets) and ``cost(indices, run)``,
    the requests ``run()`` makes beyond those of reading ``indices`` with the frames the
    dataset draws for them (0: the run read what it needed and fetched nothing more)."""
    pytest.importorskip("torch")
    from gulpio_rs.torch import GulpVideoDataset

    _, url, options, ids, proxy = remote
    ds = GulpVideoDataset(
        url, frames=3, offset="random", seed=4, storage_options=options, target=None
    )
    control = GulpDirectory(url, storage_options=dict(options, readahead="0"))
    # Both directories read everything once, so that what is counted below is frame bytes
    # only (an index part fetched on first use is not).
    control.read_batch(ids)
    ds._directory().read_batch(ids)

    def requests_for(indices) -> int:
        before = _settled(proxy)
        control.read_batch(
            [ds._id(i) for i in indices], frames=[ds._frames(i, ds._id(i)) for i in indices]
        )
        return _settled(proxy) - before

    return ds, requests_for, proxy


def test_a_dataset_in_sequential_order_reads_ahead_without_a_sampler(remote):
    # The DataLoader's default order (shuffle=False): batches are runs of consecutive indices.
    ds, requests_for, proxy = _dataset_costs(remote)
    batches = [list(range(k, min(len(ds), k + 4))) for k in range(0, len(ds), 4)]
    # Every expectation first, while no prefetch of the dataset is in flight.
    cost = [requests_for(b) for b in batches]
    _made(proxy, lambda: ds.__getitems__(batches[0]), cost[0] + cost[1])  # batch 1 ahead
    for k in range(1, len(batches)):
        # This batch comes from the read-ahead; the requests made are the next batch's
        # (after the last batch, the next epoch's first).
        coming = cost[(k + 1) % len(batches)]
        assert _made(proxy, lambda k=k: ds.__getitems__(batches[k]), coming) == coming


def test_a_shuffled_order_fetches_nothing_ahead(remote):
    ds, requests_for, proxy = _dataset_costs(remote)
    rng = np.random.default_rng(3)
    order = [int(i) for i in rng.permutation(len(ds))]
    # Never a consecutive run.
    batches = [sorted(order[k : k + 2], reverse=True) for k in range(4, len(order) - 1, 2)]
    cost = [requests_for(b) for b in batches]
    _made(proxy, lambda: ds.__getitems__(order[:4]), requests_for(order[:4]))
    for batch, expected in zip(batches, cost, strict=True):
        assert _made(proxy, lambda batch=batch: ds.__getitems__(batch), expected) == expected


def test_single_samples_in_order_are_prefetched_once_the_order_is_seen(remote):
    ds, requests_for, proxy = _dataset_costs(remote)
    cost = [requests_for([i]) for i in range(4)]
    _made(proxy, lambda: ds.__getitems__([0]), cost[0])
    # [1] confirms the order: sample 2 is fetched ahead.
    assert _made(proxy, lambda: ds.__getitems__([1]), cost[1] + cost[2]) == cost[1] + cost[2]
    assert _made(proxy, lambda: ds.__getitems__([2]), cost[3]) == cost[3]


def test_consecutive_runs_in_another_order_stop_the_guessing(remote):
    # A sampler shuffling blocks of consecutive samples: two wrong guesses, then no more.
    ds, requests_for, proxy = _dataset_costs(remote)
    pair = {k: requests_for([k, k + 1]) for k in (0, 2, 4, 6, 8, 10)}
    _made(proxy, lambda: ds.__getitems__([0, 1]), pair[0] + pair[2])  # guesses [2, 3]
    # Wrong once; guesses [10, 11].
    _made(proxy, lambda: ds.__getitems__([8, 9]), pair[8] + pair[10])
    # Wrong twice: [6, 7] is not fetched.
    assert _made(proxy, lambda: ds.__getitems__([4, 5]), pair[4]) == pair[4]
    # That guess came true: guessing resumes with [8, 9].
    assert _made(proxy, lambda: ds.__getitems__([6, 7]), pair[6] + pair[8]) == pair[6] + pair[8]


def test_a_guess_made_before_set_epoch_is_not_read_in_the_new_epoch(remote):
    # num_workers=0: one dataset object across epochs; the last batch's guess is the next
    # epoch's first batch, drawn before set_epoch changes the frames it gets.
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from gulpio_rs.torch import GulpVideoDataset, gulp_collate

    local, url, options, ids, proxy = remote

    def epochs(path, **kw):
        ds = GulpVideoDataset(path, frames=3, offset="random", seed=8, target=None, **kw)
        loader = DataLoader(ds, batch_size=4, collate_fn=gulp_collate)
        out = []
        for epoch in range(3):
            ds.set_epoch(epoch)
            out.append(torch.cat(list(loader)))
        return out

    got = epochs(url, storage_options=options)
    want = epochs(str(local.output_dir))
    assert not torch.equal(want[0], want[1])  # the epochs do draw different frames
    for a, b in zip(got, want, strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("persistent", [False, True])
@pytest.mark.parametrize("order", ["sampler", "default"])
def test_dataloader_workers_read_ahead_across_epochs(remote, persistent, order):
    # "default": a plain DataLoader (no sampler, shuffle=False), read ahead by guessing.
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from gulpio_rs.torch import GulpDistributedSampler, GulpVideoDataset, gulp_collate

    local, url, options, ids, proxy = remote

    def epochs(path, **kw):
        ds = GulpVideoDataset(path, frames=4, offset="random", seed=5, target=None, **kw)
        sampler = None
        if order == "sampler":
            sampler = GulpDistributedSampler(ds, num_replicas=1, rank=0, seed=3)
        loader = DataLoader(
            ds,
            batch_size=3,
            sampler=sampler,
            num_workers=2,
            persistent_workers=persistent,
            multiprocessing_context="fork",
            collate_fn=gulp_collate,
        )
        out = []
        for epoch in range(3):
            if sampler is not None:
                sampler.set_epoch(epoch)
            ds.set_epoch(epoch)
            out.append(torch.cat(list(loader)))
        return out

    got = epochs(url, storage_options=options)
    want = epochs(str(local.output_dir))
    for a, b in zip(got, want, strict=True):
        assert torch.equal(a, b)
