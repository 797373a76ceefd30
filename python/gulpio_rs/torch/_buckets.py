"""Shape buckets: batches of videos of one shape (frame size, frame count or aspect ratio),
from the index alone, shuffled, distributed and resumed like the distributed sampler."""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, get_args

import numpy as np
from torch.utils.data import Sampler

from .._choices import BucketKey
from ._base import _GulpDataset
from ._readahead import BatchOrder
from ._sampler import (
    MASK64,
    GulpDistributedSampler,
    mix64,
    shuffled_positions,
    unshuffled_positions,
)

_STATE_KEY = "gulpio_rs.GulpBucketBatchSampler"
_STATE_VERSION = 1
_BUCKET_KEY = 0x6275636B65747301  # domain separation from the batch order's key
_BY: tuple[BucketKey, ...] = get_args(BucketKey)

#: A batch size for every bucket, per bucket key, or a function of the key (keys are typed
#: ``Any`` here: their type depends on ``by=``, and a mapping's key type is invariant).
BatchSize = int | Mapping[Any, int] | Callable[[Any], int]


def bucket_keys(
    frame_counts: np.ndarray,
    shapes: np.ndarray,
    by: BucketKey | Callable[[int, int, int], object] = "size",
    buckets: Sequence[Any] | None = None,
) -> list[object]:
    """The bucket key of each video from its frame count and first frame's ``(height, width,
    channels)`` (what :meth:`GulpDirectory.video_shapes` gives), or None for a video left out.

    * ``by="size"``: ``(height, width)``; ``buckets``, if given, the keys to keep.
    * ``by="frames"``: the frame count; with ``buckets`` (frame counts), the largest that is
      ``<=`` the video's count (videos shorter than all of them are left out): a clip of that
      many frames can be read from every video of the bucket.
    * ``by="aspect"``: ``width / height`` rounded to 2 decimals; with ``buckets`` (ratios),
      the nearest of them (by the ratio of the two ratios).
    * ``by=callable(num_frames, height, width)``: its result (None leaves the video out);
      ``buckets``, if given, the keys to keep.
    """
    counts = np.asarray(frame_counts).reshape(-1)
    shapes = np.asarray(shapes).reshape(-1, 3)
    h = shapes[:, 0].astype(np.int64)
    w = shapes[:, 1].astype(np.int64)
    keep = None if buckets is None else list(buckets)
    keys: list[object]
    if callable(by):
        keys = [by(int(n), int(a), int(b)) for n, a, b in zip(counts, h, w, strict=True)]
    elif by == "size":
        keys = list(zip(h.tolist(), w.tolist(), strict=True))
    elif by == "frames":
        if keep is None:
            # list(): to mypy, the list[int] that tolist() gives is not a list[object].
            keys = list(counts.astype(np.int64).tolist())
        else:
            edges = np.asarray(sorted({int(b) for b in keep}), dtype=np.int64)
            if edges.size == 0 or edges[0] < 1:
                raise ValueError(f"frame-count buckets must be positive, not {buckets!r}")
            at = np.searchsorted(edges, counts, side="right") - 1
            keys = [int(edges[a]) if a >= 0 else None for a in at.tolist()]
            keep = None
    elif by == "aspect":
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(h > 0, w / np.maximum(h, 1), np.nan)
        if keep is None:
            keys = [None if math.isnan(r) else round(r, 2) for r in ratio.tolist()]
        else:
            centres = np.asarray(sorted({float(b) for b in keep}))
            if centres.size == 0 or centres[0] <= 0:
                raise ValueError(f"aspect-ratio buckets must be positive, not {buckets!r}")
            with np.errstate(divide="ignore", invalid="ignore"):
                distance = np.abs(np.log(ratio[:, None]) - np.log(centres[None, :]))
            nearest = np.argmin(np.nan_to_num(distance, nan=np.inf), axis=1)
            keys = [
                None if math.isnan(r) else float(centres[a])
                for r, a in zip(ratio.tolist(), nearest.tolist(), strict=True)
            ]
            keep = None
    else:
        raise ValueError(f"by must be one of {_BY} or a callable, not {by!r}")
    if keep is not None:
        allowed = set(_hashable(k) for k in keep)
        keys = [k if _hashable(k) in allowed else None for k in keys]
    return keys


def _hashable(key: object) -> object:
    return tuple(key) if isinstance(key, list) else key


class GulpBucketBatchSampler(Sampler[list[int]]):
    """A batch sampler (``DataLoader(dataset, batch_sampler=...)``) whose every batch holds
    videos of one bucket, so ``read_batch`` stacks them as stored (no resize, no
    :class:`MixedShapesError`).

    ``dataset`` is a :class:`GulpVideoDataset` or :class:`GulpImageDataset`; the bucket of each
    of its videos comes from the index alone (frame counts and every frame's size are stored
    there: no frame decoded, no ``.gmeta`` parsed; chunks written without an index fall back
    to the first frame's JPEG header). ``by`` and ``buckets`` say what a bucket is (see
    :func:`bucket_keys`): ``"size"`` (default, the first frame's ``(height, width)``),
    ``"frames"``, ``"aspect"``, or a callable ``(num_frames, height, width) -> key``.
    Grayscale and colour videos of one size share a bucket: give the dataset
    ``colorspace="RGB"`` when both occur.

    ``batch_size``: one for every bucket, a mapping ``key -> batch size`` (every bucket's key
    must be in it), or a callable ``key -> batch size``.

    Each epoch, every bucket's videos are shuffled (a permutation keyed by ``(seed, bucket,
    epoch)``) and cut into batches of the bucket's size, the last one of a bucket possibly
    shorter; then the list of all batches is ordered and split among the ranks exactly as
    :class:`GulpDistributedSampler` splits samples (same ``num_replicas``, ``rank``,
    ``shuffle``, ``seed`` and padding rules: rank ``r`` gets batches ``r, r + world, ...`` of
    the epoch's batch order; with ``drop_last=True`` each bucket's short last batch and the
    order's last ``batches % world`` batches are dropped, otherwise the first batches are
    repeated so that every rank gets as many). Everything is a pure function of ``(seed,
    epoch)`` and the buckets. ``shuffle=False`` keeps the buckets' videos in dataset order
    and the batches bucket by bucket.

    :meth:`state_dict` / :meth:`load_state_dict` resume mid-epoch, also on another number of
    ranks (counted in batches: see :class:`GulpDistributedSampler`); the buckets (videos,
    keys and batch sizes) must be the same. :attr:`buckets` lists ``(key, videos, batch
    size)``; :attr:`left_out` counts the videos no bucket took.
    """

    def __init__(
        self,
        dataset: _GulpDataset,
        batch_size: BatchSize,
        *,
        by: BucketKey | Callable[[int, int, int], object] = "size",
        buckets: Sequence[Any] | None = None,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        # Looked up by name: the datasets' private members are no seam (tests/package/
        # test_seams.py), and anything else passed fails with a TypeError that names it.
        index_shapes: Callable[[], tuple[np.ndarray, np.ndarray]] | None
        index_shapes = getattr(dataset, "_index_shapes", None)
        if not callable(index_shapes):
            raise TypeError(
                f"GulpBucketBatchSampler buckets a GulpVideoDataset or GulpImageDataset, "
                f"not a {type(dataset).__name__}"
            )
        counts, shapes = index_shapes()
        self._setup(bucket_keys(counts, shapes, by, buckets), batch_size, drop_last)
        self.shuffle = bool(shuffle)
        self.seed = int(seed)
        self.drop_last = bool(drop_last)
        self._order = GulpDistributedSampler(
            self.num_batches, num_replicas, rank, shuffle=shuffle, seed=seed, drop_last=drop_last
        )
        self.num_replicas, self.rank = self._order.num_replicas, self._order.rank
        follow: Callable[[BatchOrder], None] | None = getattr(dataset, "_follow_sampler", None)
        if callable(follow):
            follow(self)

    def _setup(self, keys: list[object], batch_size: BatchSize, drop_last: bool) -> None:
        """Buckets from the keys: members (dataset indices, ascending), batch sizes, and the
        numbering of every batch of an epoch."""
        n = len(keys)
        kept = [i for i in range(n) if keys[i] is not None]
        self.left_out = n - len(kept)
        distinct = sorted({_hashable(keys[i]) for i in kept}, key=_sort_key)
        number = {k: b for b, k in enumerate(distinct)}
        bucket_of = np.full(n, -1, dtype=np.int64)
        for i in kept:
            bucket_of[i] = number[_hashable(keys[i])]
        order = np.argsort(bucket_of, kind="stable")
        starts = np.searchsorted(bucket_of[order], np.arange(len(distinct) + 1), side="left")
        self._members = [order[starts[b] : starts[b + 1]] for b in range(len(distinct))]
        # Where each video sits in its bucket (the read-ahead's way back from an index).
        self._bucket_of = bucket_of
        self._slot = np.zeros(n, dtype=np.int64)
        for members in self._members:
            self._slot[members] = np.arange(members.size)
        sizes = [self._batch_size(batch_size, k) for k in distinct]
        self.buckets = [
            (k, int(m.size), s) for k, m, s in zip(distinct, self._members, sizes, strict=True)
        ]
        per_bucket = [
            (m.size // s) if drop_last else -(-m.size // s)
            for m, s in zip(self._members, sizes, strict=True)
        ]
        self._sizes = np.asarray(sizes, dtype=np.int64)
        self._first_batch = np.concatenate([[0], np.cumsum(per_bucket)]).astype(np.int64)
        self.num_batches = int(self._first_batch[-1])
        layout = json.dumps(
            [[repr(k), videos, size] for k, videos, size in self.buckets], separators=(",", ":")
        )
        crc = zlib.crc32(layout.encode())
        self._fingerprint = zlib.crc32(self._bucket_of.tobytes(), crc)

    @staticmethod
    def _batch_size(batch_size: BatchSize, key: object) -> int:
        if isinstance(batch_size, Mapping):
            if key not in batch_size:
                raise ValueError(f"batch_size has no entry for bucket {key!r}")
            size = batch_size[key]
        elif callable(batch_size):
            size = batch_size(key)
        else:
            size = batch_size
        if isinstance(size, bool) or int(size) != size or size < 1:
            raise ValueError(f"the batch size of bucket {key!r} must be >= 1, not {size!r}")
        return int(size)

    # -- the epoch's batches -----------------------------------------------------------------
    @property
    def epoch(self) -> int:
        return self._order.epoch

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose batches the next iteration yields (before each epoch)."""
        self._order.set_epoch(epoch)

    def __len__(self) -> int:
        """Batches this rank yields in a whole epoch."""
        return len(self._order)

    def _bucket_seed(self, bucket: int) -> int:
        return mix64((self.seed & MASK64) ^ mix64(_BUCKET_KEY + bucket))

    def batch(self, number: int, epoch: int | None = None) -> list[int]:
        """Dataset indices of batch ``number`` (``0 <= number < num_batches``, in bucket
        order, not the epoch's batch order) of ``epoch`` (default: the current one)."""
        epoch = self.epoch if epoch is None else int(epoch)
        if not 0 <= number < self.num_batches:
            raise IndexError(f"batch {number} out of range ({self.num_batches} batches)")
        b = int(np.searchsorted(self._first_batch, number, side="right") - 1)
        members, size = self._members[b], int(self._sizes[b])
        j = number - int(self._first_batch[b])
        positions = np.arange(j * size, min((j + 1) * size, members.size), dtype=np.int64)
        if self.shuffle:
            positions = shuffled_positions(positions, members.size, self._bucket_seed(b), epoch)
            positions = positions.astype(np.int64)
        indices: list[int] = members[positions].tolist()
        return indices

    def __iter__(self) -> Iterator[list[int]]:
        epoch = self.epoch
        for number in self._order:
            yield self.batch(number, epoch)

    def _number_of(self, indices: list[int], epoch: int) -> int | None:
        """Which batch ``indices`` are in ``epoch``, or None."""
        first = int(indices[0])
        if not 0 <= first < self._bucket_of.size or self._bucket_of[first] < 0:
            return None
        b = int(self._bucket_of[first])
        slot = int(self._slot[first])
        if self.shuffle:
            size = self._members[b].size
            slot = int(unshuffled_positions(np.array([slot]), size, self._bucket_seed(b), epoch)[0])
        number = int(self._first_batch[b]) + slot // int(self._sizes[b])
        if number >= int(self._first_batch[b + 1]):
            return None  # a short last batch that drop_last dropped
        return number if self.batch(number, epoch) == list(indices) else None

    def read_ahead_batch(
        self,
        indices: list[int],
        epochs: list[int],
        workers: int,
        worker_id: int,
        batch_size: int,
    ) -> tuple[int, list[int]] | None:
        """``(epoch, indices)`` of the batch the DataLoader process that got the batch
        ``indices`` gets next (the read-ahead's question): batches are dealt to the workers in
        turn, so its next is this rank's batch ``k + workers``, or its first of the next
        epoch."""
        if not indices:
            return None
        for epoch in epochs:
            number = self._number_of(list(indices), epoch)
            if number is None:
                continue
            found = self._order.locate([number], [epoch])
            if found is None:
                continue
            k = found[1] + workers
            nxt = self._order.epoch_indices(epoch, k, k + 1).tolist()
            if not nxt:
                epoch += 1
                nxt = self._order.epoch_indices(epoch, worker_id, worker_id + 1).tolist()
            return (epoch, self.batch(nxt[0], epoch)) if nxt else None
        return None

    # -- resume ------------------------------------------------------------------------------
    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        """The state to resume this epoch from (``consumed`` in batches of this rank, as for
        :meth:`GulpDistributedSampler.state_dict`), with a fingerprint of the buckets."""
        return {
            _STATE_KEY: _STATE_VERSION,
            "buckets": self._fingerprint,
            "sampler": self._order.state_dict(consumed),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume mid-epoch (elastic: the world size may differ). The buckets must be those
        the state was saved with."""
        if not isinstance(state, dict) or state.get(_STATE_KEY) != _STATE_VERSION:
            raise ValueError("not a GulpBucketBatchSampler state_dict")
        if state["buckets"] != self._fingerprint:
            raise ValueError(
                "cannot resume: the buckets differ from the saved run's (other videos, "
                "bucket rule or batch sizes)"
            )
        self._order.load_state_dict(state["sampler"])


def _sort_key(key: object) -> tuple[str, int | float | tuple[object, ...] | str]:
    """Buckets in a stable order whatever the key types: by type name, then value."""
    return (type(key).__name__, key if isinstance(key, (int, float, tuple)) else repr(key))
