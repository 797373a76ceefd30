"""A distributed, seeded, resumable sampler: which dataset indices each rank reads, in what
order, for every epoch."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sized
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from torch.utils.data import Sampler

from .. import _native
from ._readahead import coming_batch

MASK64 = (1 << 64) - 1
_STATE_KEY = "gulpio_rs.GulpDistributedSampler"
# 2 added "global_consumed" (elastic resume); states of version 1 still load.
_STATE_VERSION = 2
_STATE_VERSIONS = (1, 2)
_BLOCK = 4096


def mix64(x: int) -> int:
    """splitmix64's output function on a Python int (round keys)."""
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def mix64_array(x: np.ndarray) -> np.ndarray:
    """The same function on a uint64 array (multiplication wraps modulo 2**64)."""
    x = x ^ (x >> np.uint64(30))
    x = x * np.uint64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> np.uint64(27))
    x = x * np.uint64(0x94D049BB133111EB)
    out: np.ndarray = x ^ (x >> np.uint64(31))
    return out


def shuffled_positions(positions: np.ndarray, n: int, seed: int, epoch: int) -> np.ndarray:
    """Element ``positions`` of the epoch's permutation of ``range(n)``: a pure function of
    ``(n, seed, epoch)``, specified here and not by a library's random generator, so the order
    is the same on every machine and every version.

    The permutation is a 6-round Feistel network on ``2b`` bits (``4**b >= n``, ``b >= 1``)
    keyed by splitmix64 of ``(seed, epoch)``, restricted to ``range(n)`` by cycle walking
    (values ``>= n`` are encrypted again). With ``split(x) = splitmix64's step (add
    0x9E3779B97F4A7C15, then mix)``, the round keys are ``split(base + r)`` for ``r = 0..5``,
    ``base = split(seed ^ split(epoch))``, and a round maps ``(left, right)`` to ``(right, left
    ^ (mix(right ^ key) & mask))`` on ``b``-bit halves (``mix``: splitmix64's output function
    without the add). Any element is computed in O(1) without building the whole
    permutation, which is what makes a resume O(1) and memory per rank constant. Computed in
    the core (``src/permute.rs``); ``positions`` must be below ``n`` (``ValueError``).
    """
    return _walk(positions, n, seed, epoch, inverse=False)


def unshuffled_positions(indices: np.ndarray, n: int, seed: int, epoch: int) -> np.ndarray:
    """The inverse of :func:`shuffled_positions`: where each of ``indices`` sits in the
    epoch's permutation, also in O(1) per element (the Feistel rounds run backwards, and the
    cycle walk with them)."""
    return _walk(indices, n, seed, epoch, inverse=True)


def _walk(values: npt.ArrayLike, n: int, seed: int, epoch: int, inverse: bool) -> np.ndarray:
    x = np.asarray(values, dtype=np.uint64)
    if n <= 1:
        return np.zeros_like(x)
    # In the core (src/permute.rs, bit for bit the network described above): numpy's
    # per-call cost made a 16-element batch take about as long as 4,096 elements.
    flat = np.ascontiguousarray(x.reshape(-1))
    out = _native.feistel(flat, int(n), int(seed) & MASK64, int(epoch) & MASK64, inverse)
    return out.reshape(x.shape)


def _world(num_replicas: int | None, rank: int | None) -> tuple[int, int]:
    if num_replicas is None or rank is None:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            world, me = dist.get_world_size(), dist.get_rank()
        else:
            # torchrun sets these before the process group exists.
            world = int(os.environ.get("WORLD_SIZE", "1"))
            me = int(os.environ.get("RANK", "0"))
        num_replicas = world if num_replicas is None else num_replicas
        rank = me if rank is None else rank
    if num_replicas < 1:
        raise ValueError(f"num_replicas must be >= 1, not {num_replicas}")
    if not 0 <= rank < num_replicas:
        raise ValueError(f"rank must be in [0, {num_replicas - 1}], not {rank}")
    return int(num_replicas), int(rank)


class GulpDistributedSampler(Sampler[int]):
    """Splits a dataset's indices among ``num_replicas`` ranks, in a seeded order per epoch,
    with O(1) mid-epoch resume.

    * Every rank gets the same number of samples, ``ceil(len / num_replicas)``: the epoch's
      order is padded by repeating its first samples (as ``DistributedSampler`` does), so
      ranks' samples are disjoint except for those ``num_replicas * ceil(len / num_replicas)
      - len`` repeats; with ``drop_last=True`` the last ``len % num_replicas`` samples of the
      order are dropped instead (``floor(len / num_replicas)`` each, all disjoint).
    * Rank ``r`` reads positions ``r, r + num_replicas, ...`` of the order. The order (a
      permutation when ``shuffle``, else ``0, 1, ...``) is a pure function of ``(seed,
      epoch)`` and the dataset length, specified in :func:`shuffled_positions`: it does not
      depend on the number of chunk files, DataLoader workers, torch's or numpy's version.
      Call :meth:`set_epoch` before each epoch.
    * :meth:`state_dict` / :meth:`load_state_dict` store the epoch, how far into the epoch's
      order all ranks together are (``global_consumed``), and what the order depends on;
      after loading, the next iteration yields exactly the samples of that epoch not consumed
      yet, without replaying anything. **Elastic**: a state saved with ``N`` ranks loads into
      samplers of any ``M >= 1`` ranks; together they yield every sample not consumed yet,
      each once (padding aside, see below), and none already consumed. Every rank loads the
      same state (any rank's: ranks consume in lockstep), e.g. rank 0's.

    After a resume at ``global_consumed = G`` with ``M`` ranks, rank ``r`` reads positions
    ``G + r, G + r + M, ...`` of the epoch's order, ``ceil((len - G) / M)`` of them (the last
    wrap around to the order's first samples: the padding), or ``floor((len - G) / M)`` with
    ``drop_last=True``. With ``M == N`` that is exactly where the ranks stopped. The samples of
    a global step (all ranks' batches together) are positions ``G + t*B ... G + (t+1)*B - 1``
    with ``B = M * batch_size``: with the same global batch size, the same samples at every
    step whatever the number of ranks.

    ``dataset_or_len`` is a sized dataset or its length. ``num_replicas`` and ``rank`` default
    to the initialised process group's, else to the ``WORLD_SIZE``/``RANK`` environment
    variables (set by torchrun), else to a single process.

    With torchdata's ``StatefulDataLoader``, ``loader.state_dict()`` includes this sampler's
    state at the last batch the loader *returned* and restores it by itself. With a plain
    ``DataLoader``, the sampler runs ahead of the training loop (workers prefetch), so pass
    the number of samples this rank really consumed in the epoch:
    ``sampler.state_dict(consumed=batches_done * batch_size)``.
    """

    def __init__(
        self,
        dataset_or_len: Sized | int,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ):
        if isinstance(dataset_or_len, (int, np.integer)) and not isinstance(dataset_or_len, bool):
            length = int(dataset_or_len)
        else:
            length = len(cast(Sized, dataset_or_len))  # a bool: len's own TypeError
        if length < 0:
            raise ValueError(f"dataset length must be >= 0, not {length}")
        self.dataset_len = length
        self.num_replicas, self.rank = _world(num_replicas, rank)
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.drop_last = bool(drop_last)
        self.epoch = 0
        self._consumed = 0
        self._resume: tuple[int, int] | None = None
        # After an elastic resume, the loaded epoch's layout starts at position `_shift` of the
        # order (rank r reads _shift + r, _shift + r + world, ...): `(epoch, shift)`.
        self._shifted: tuple[int, int] | None = None
        # A dataset that reads ahead follows this sampler's order (it gets a copy in each
        # DataLoader worker); lengths and plain datasets do not.
        follow = getattr(dataset_or_len, "_follow_sampler", None)
        if callable(follow):
            follow(self)

    @property
    def num_samples(self) -> int:
        """Samples per rank in a whole epoch (after an elastic resume: in the resumed epoch's
        layout, counted from its start as :meth:`state_dict`'s ``consumed`` is)."""
        return self._count(self.epoch)

    def _shift(self, epoch: int) -> int:
        return self._shifted[1] if self._shifted and self._shifted[0] == epoch else 0

    def _count(self, epoch: int) -> int:
        """Samples per rank in ``epoch``'s layout: positions ``shift + rank + k * world``."""
        left = self.dataset_len - self._shift(epoch)
        if left <= 0:
            return 0
        if self.drop_last:
            return left // self.num_replicas
        return -(-left // self.num_replicas)

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose order the next iteration yields. A loaded state applies while the
        epoch stays the one it was saved in."""
        epoch = int(epoch)
        if epoch != self.epoch:
            self._consumed = 0
            self._resume = None
            self._shifted = None
        self.epoch = epoch

    def indices(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """This rank's samples ``start:stop`` of the current epoch, as an array."""
        return self.epoch_indices(self.epoch, start, stop)

    def epoch_indices(self, epoch: int, start: int, stop: int | None) -> np.ndarray:
        """This rank's samples ``start:stop`` of ``epoch``'s order (the read-ahead's and the
        bucket sampler's seam: they ask about epochs other than the current one)."""
        count = self._count(epoch)
        stop = count if stop is None else min(stop, count)
        if start >= stop:
            return np.zeros(0, dtype=np.int64)
        k = np.arange(start, stop, dtype=np.int64)
        # Positions past the end wrap around: the padding repeats the order's first samples.
        first = self._shift(epoch) + self.rank
        positions = (first + k * self.num_replicas) % self.dataset_len
        if not self.shuffle:
            return positions
        return shuffled_positions(positions, self.dataset_len, self.seed, epoch).astype(np.int64)

    def locate(self, batch: npt.ArrayLike, epochs: Iterable[int]) -> tuple[int, int] | None:
        """``(epoch, k)`` such that ``batch`` is this rank's samples ``k, k + 1, ...`` of that
        epoch, trying ``epochs`` in turn; None if it is none of them. In O(len(batch)): this is
        how a DataLoader worker, which only sees the indices of its own batches, finds where it
        is in the order and so which batch comes to it next (read-ahead)."""
        batch = np.asarray(batch, dtype=np.int64).reshape(-1)
        n, world = self.dataset_len, self.num_replicas
        if batch.size == 0 or n == 0 or not (0 <= int(batch[0]) < n):
            return None
        for epoch in epochs:
            q = int(batch[0])
            if self.shuffle:
                q = int(unshuffled_positions(np.array([q]), n, self.seed, epoch)[0])
            # q = (shift + rank + k * world) % n, with k past n / world only for the padding.
            first, count = self._shift(epoch) + self.rank, self._count(epoch)
            for wrapped in (q, q + n):
                k, r = divmod(wrapped - first, world)
                if r or not 0 <= k < count:
                    continue
                if np.array_equal(self.epoch_indices(epoch, k, k + batch.size), batch):
                    return epoch, k
        return None

    def read_ahead_batch(
        self,
        indices: list[int],
        epochs: list[int],
        workers: int,
        worker_id: int,
        batch_size: int,
    ) -> tuple[int, list[int]] | None:
        """``(epoch, indices)`` of the batch the DataLoader process that got ``indices`` gets
        next, or None (the read-ahead's question; see :func:`coming_batch`)."""
        return coming_batch(self, indices, epochs, workers, worker_id, batch_size)

    def __iter__(self) -> Iterator[int]:
        start = 0
        if self._resume is not None:
            epoch, consumed = self._resume
            self._resume = None
            if epoch == self.epoch:
                start = consumed
        self._consumed = start
        for block in range(start, self.num_samples, _BLOCK):
            for index in self.indices(block, block + _BLOCK).tolist():
                # Counted before the yield: after next() returned sample k, k + 1 are out.
                self._consumed += 1
                yield index

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        """The state to resume this epoch from: by default after every sample the sampler has
        yielded; ``consumed=`` overrides that with the number of samples this rank consumed
        in the current epoch, counted from the epoch's start (resumed parts included: right
        after :meth:`load_state_dict`, ``state_dict()["consumed"]`` is where that count
        starts; with the same world size it is the saved ``consumed``).

        ``global_consumed`` is how far into the epoch's order all ranks together are
        (``consumed * num_replicas`` without an elastic resume): what a resume with another
        number of ranks needs."""
        if consumed is None:
            consumed = self._resume[1] if self._resume is not None else self._consumed
        consumed = int(consumed)
        if not 0 <= consumed <= self.num_samples:
            raise ValueError(f"consumed must be in [0, {self.num_samples}], not {consumed}")
        return {
            _STATE_KEY: _STATE_VERSION,
            "epoch": self.epoch,
            "consumed": consumed,
            "global_consumed": self._shift(self.epoch) + consumed * self.num_replicas,
            "seed": self.seed,
            "shuffle": self.shuffle,
            "drop_last": self.drop_last,
            "num_replicas": self.num_replicas,
            "dataset_len": self.dataset_len,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume: the next iteration yields the rest of ``state``'s epoch, split among this
        sampler's ranks. The dataset length, seed and shuffle must be those the state was
        saved with (they define the order); the world size may differ (elastic resume), and
        ``drop_last`` applies to what is left. Every rank loads the same state."""
        if not isinstance(state, dict) or state.get(_STATE_KEY) not in _STATE_VERSIONS:
            raise ValueError("not a GulpDistributedSampler state_dict")
        mine = self.state_dict(consumed=0)
        for key in ("dataset_len", "seed", "shuffle"):
            if state[key] != mine[key]:
                raise ValueError(
                    f"cannot resume: the state has {key}={state[key]!r}, this sampler {mine[key]!r}"
                )
        saved_world = int(state["num_replicas"])
        if saved_world < 1:
            raise ValueError(f"cannot resume: the state has num_replicas={saved_world}")
        if "global_consumed" in state:
            done = int(state["global_consumed"])
            # global_consumed = shift + consumed * world with 0 <= shift < world: a state
            # edited by hand in one of the two would otherwise resume somewhere unmeant.
            if done // saved_world != int(state["consumed"]):
                raise ValueError(
                    f"cannot resume: the state says consumed={state['consumed']} but "
                    f"global_consumed={done} with num_replicas={saved_world}; make states with "
                    "state_dict(consumed=...)"
                )
        else:  # version 1: no elastic resume yet, so the ranks' layout was never shifted
            done = int(state["consumed"]) * saved_world
        # The most a world of saved_world ranks can consume: the padded order.
        most = saved_world * -(-self.dataset_len // saved_world)
        if not 0 <= done <= most:
            raise ValueError(f"cannot resume: global_consumed must be in [0, {most}], not {done}")
        epoch = int(state["epoch"])
        # G = shift + q * world: rank r goes on at position G + r, i.e. index q of the layout
        # starting at position `shift` (the unshifted layout when G is a multiple of world).
        q, shift = divmod(done, self.num_replicas)
        self.epoch = epoch
        self._shifted = (epoch, shift) if shift else None
        consumed = min(q, self.num_samples)
        self._consumed = consumed
        self._resume = (epoch, consumed)

    @staticmethod
    def find_state(loader_state: Any) -> dict[str, Any] | None:
        """This sampler's state inside a ``StatefulDataLoader.state_dict()`` (at the last batch
        returned), or None: to resume with a different number of workers, which
        ``StatefulDataLoader.load_state_dict`` refuses, load it into the sampler instead."""
        if isinstance(loader_state, dict):
            if loader_state.get(_STATE_KEY) in _STATE_VERSIONS:
                return loader_state
            values: Iterable[Any] = loader_state.values()
        elif isinstance(loader_state, (list, tuple)):
            values = loader_state
        else:
            return None
        for value in values:
            found = GulpDistributedSampler.find_state(value)
            if found is not None:
                return found
        return None
