"""What the video and image datasets share (``_GulpDataset``): the lazily (re)opened
directory, ids, targets, random offsets, fused geometry, read-ahead and batched decoding; and
:class:`MixtureSource`, the seam through which a mixture reads a dataset."""

from __future__ import annotations

import json
import logging
import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any, SupportsInt, get_args, overload

import numpy as np
import torch
from torch.utils.data import Dataset, get_worker_info

from .._choices import OffsetName, OnError
from .._read_spec import Size, out_size
from .._storage import storage_options_list
from .._threads import thread_count
from ..directory import GulpDirectory
from ..errors import BrokenChunkWarning, GulpError
from ._collate import _Batch, _check_one_shape, _Owner
from ._geometry import (
    CROP_MODES,
    Box,
    NeedsPaddingError,
    plan_fused,
    sample_crop,
    sample_flip,
    split_fusable,
)
from ._options import DatasetOptions, DatasetPath, exclusions
from ._readahead import BatchOrder, ReadAhead
from ._sampling import NAMED_OFFSETS, OFFSETS
from ._shared import handover, shared_batch, shared_zeros

_LABELS_FILE = "label2idx.json"
# The random-offset generator's key with a draw number appended (a fifth element, never equal
# to a crop generator's key).
_OFFSET_STREAM = 2
_ON_ERROR: tuple[OnError, ...] = get_args(OnError)
# What on_error="skip" skips: damaged or unreadable data (not usage errors).
_READ_ERRORS = (GulpError, OSError)
_SKIP_SLOTS = 256
_log = logging.getLogger("gulpio_rs.torch")

#: The geometry fused into one clip's decode: ``(box, size, flip)`` (``box`` in stored-frame
#: pixels; ``size`` None keeps the box's size).
Fused = tuple[Box, Size | None, bool]


class _GulpDataset(Dataset[Any]):
    """What the video and image datasets share: the lazily (re)opened directory, ids,
    targets, random offsets and batched decoding."""

    layout: str  # set by each dataset class: the order of its tensors' dimensions

    def __init__(self, path: DatasetPath, options: DatasetOptions, *, offset: OffsetName):
        """Checks ``options`` (once, here rather than in a worker) and opens the directory."""
        transform, target, crop, hflip = (
            options.transform,
            options.target,
            options.crop,
            options.hflip,
        )
        storage_options, io = options.storage_options, options.io
        if isinstance(path, GulpDirectory):
            storage_options = storage_options or path.storage_options
            io = io or path.io
            where = path.output_dir
        else:
            where = path
        if offset not in OFFSETS:
            raise ValueError(f"offset must be one of {OFFSETS}, not {offset!r}")
        if not (target is None or isinstance(target, str) or callable(target)):
            raise TypeError(f"target must be a meta key, a callable or None, not {target!r}")
        self.path = os.fspath(where)
        self.transform = transform
        # The geometry fused into the decode: our own crop/size/hflip, else a leading run of
        # torchvision geometric transforms (whose parameters torchvision draws, per clip).
        self.size = out_size(options.size)
        if crop not in CROP_MODES:
            raise ValueError(f"crop must be one of {CROP_MODES}, not {crop!r}")
        if crop is not None and self.size is None:
            raise ValueError(f"crop={crop!r} needs size= (the output (height, width))")
        if not 0.0 <= float(hflip) <= 1.0:
            raise ValueError(f"hflip must be a probability in [0, 1], not {hflip!r}")
        self.crop, self.scale, self.ratio, self.hflip = (
            crop,
            tuple(options.scale),
            tuple(options.ratio),
            hflip,
        )
        # Checks scale and ratio once, here rather than in a worker.
        sample_crop(None, 1, 1, scale=self.scale, ratio=self.ratio)
        own = self.size is not None or float(hflip) > 0.0
        self._fused: list[Callable[..., Any]]
        self._rest: Callable[..., Any] | None
        self._fused, self._rest = ([], transform) if own else split_fusable(transform)
        self.target = target
        self.ragged = bool(options.ragged)
        on_error = options.on_error
        if on_error not in _ON_ERROR:
            raise ValueError(f"on_error must be one of {_ON_ERROR}, not {on_error!r}")
        self.on_error = on_error
        # Samples skipped by on_error="skip", per process (slot 0: the main process, slot
        # 1 + k: DataLoader worker k), in shared memory so the main process sees the workers'.
        self._skip_counts: torch.Tensor | None = None
        if on_error == "skip":
            self._skip_counts = shared_zeros(_SKIP_SLOTS, torch.int64)
        self.skipped: list[tuple[str, str]] = []
        self.exclude = exclusions(options.exclude)
        self.offset = offset
        self.seed = options.seed
        self.colorspace = options.colorspace
        self.check_data = options.check_data
        threads = options.threads
        self.threads = None if threads is None else thread_count(threads, "threads")
        self.fast_decode = bool(options.fast_decode)
        self.storage_options = storage_options_list(storage_options)
        self.io = io
        self.epoch = 0
        # The GulpDistributedSampler that draws this dataset's batches, if one was made with
        # it: its order tells a worker which batch comes next (read-ahead, remote datasets).
        self._order: BatchOrder | None = None
        self._origin_pid = os.getpid()
        ids = options.ids
        self._given_ids = None if ids is None else [str(i) for i in ids]
        self._reset()
        # Opens the directory now, so that a wrong path fails here and not in a worker.
        for id_ in self._given_ids or ():
            if id_ not in self._directory():
                raise KeyError(f"{id_!r} is not in {self.path}")
        # The length with exclusions, counted once here (each process filters the ids again
        # when it first needs them: the dataset pickles as the excluded ids, not the kept).
        self._length = None if not self.exclude else len(self._id_list())
        len(self)

    def _reset(self) -> None:
        self._pid: int | None = None
        self._gd: GulpDirectory | None = None
        self._ids: list[str] | None = None
        self._labels: dict[str, Any] | None = None
        self._rng: np.random.Generator | None = None
        # Read-ahead: which batch comes next, and the frames already drawn for prefetched
        # samples, by (epoch, index[, draw]) (so the read asks for exactly what was fetched,
        # and a guess made before set_epoch is not read in the new epoch).
        self._ahead = ReadAhead()
        self._planned: dict[tuple[int, ...], list[int]] = {}

    # -- per-process state -------------------------------------------------------------------
    def _directory(self) -> GulpDirectory:
        # Reopened in every process (forked DataLoader workers too): each maps the files
        # itself, and nothing opened by the parent is shared across a fork. A worker opens
        # the state the parent opened (GulpDirectory.reopen), so that the sampler's indices,
        # drawn from the parent's length, are the same videos in every worker.
        if self._pid != os.getpid():
            inherited = self._gd
            self._reset()
            with warnings.catch_warnings():
                if os.getpid() != self._origin_pid:
                    # Broken chunks were reported when the dataset was made, not per worker.
                    warnings.simplefilter("ignore", BrokenChunkWarning)
                self._gd = (
                    inherited.reopen()
                    if inherited is not None
                    else GulpDirectory(
                        self.path,
                        check_data=self.check_data,
                        storage_options=self.storage_options,
                        io=self.io,
                    )
                )
            self._pid = os.getpid()
        assert self._gd is not None  # opened above in this process
        return self._gd

    def _id(self, index: int) -> str:
        gd = self._directory()  # resets the ids in a new process
        if self._given_ids is None and not self.exclude:
            # Every video in position order: one lookup, no list of every id (a dataset of
            # 10M videos opened through its manifest holds no per-video memory).
            return gd.id_at(index)
        if self._ids is None:
            self._ids = self._id_list()
        return self._ids[index]

    def _id_list(self) -> list[str]:
        """The dataset's ids in index order: ``ids=`` or every video, less ``exclude``."""
        ids = self._given_ids if self._given_ids is not None else self._directory().keys()
        if self.exclude:
            ids = [i for i in ids if i not in self.exclude]
        return ids

    def __getstate__(self) -> dict[str, Any]:
        # Pickles as path and options, and the directory as a few hundred bytes naming the
        # state it opened: unpickling (a spawned worker) opens that state in the new process.
        state = self.__dict__.copy()
        for key in ("_pid", "_labels", "_rng"):
            state[key] = None
        state["_ids"] = None
        state["skipped"] = []
        state["_ahead"] = ReadAhead()
        state["_planned"] = {}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self._gd is not None:
            # Opened as it was unpickled, in this process.
            self._pid = os.getpid()

    def __len__(self) -> int:
        if self._length is not None:
            return self._length
        if self._given_ids is not None:
            return len(self._given_ids)
        return len(self._directory())

    @property
    def skipped_count(self) -> int:
        """Samples skipped so far by ``on_error="skip"``, in this process and its DataLoader
        workers together (their own lists of ids are in their logs, :attr:`skipped` holds
        this process's)."""
        return 0 if self._skip_counts is None else int(self._skip_counts.sum())

    def set_epoch(self, epoch: int) -> None:
        """Epoch for ``offset="random"`` with an integer ``seed``; call it in the main process
        before iterating (workers get a copy of the dataset when an epoch's iterator starts,
        so ``persistent_workers=True`` keeps the first epoch's value)."""
        self.epoch = int(epoch)

    # -- targets and offsets -----------------------------------------------------------------
    def _target(self, id_: str) -> Any:
        if self.target is None:
            return None
        meta = self._directory().meta(id_)
        if callable(self.target):
            return self.target(meta)
        try:
            value = meta[self.target]
        except KeyError:
            raise KeyError(f"video {id_!r} has no meta field {self.target!r}") from None
        if self.target == "label":
            labels = self._label_map()
            if labels is not None:
                try:
                    return labels[value]
                except (KeyError, TypeError):
                    raise KeyError(
                        f"label {value!r} of video {id_!r} is not in {_LABELS_FILE}"
                    ) from None
        return value

    def _label_map(self) -> dict[str, Any] | None:
        if self._labels is None:
            text = self._directory().read_file(_LABELS_FILE)
            self._labels = {} if text is None else json.loads(text)
        return self._labels or None

    @overload
    def _uniform(self, index: int, count: None, draw: int = 0) -> float: ...
    @overload
    def _uniform(self, index: int, count: int | None, draw: int = 0) -> float | list[float]: ...
    def _uniform(self, index: int, count: int | None, draw: int = 0) -> float | list[float]:
        """Where the clip sits: 0.5 (centred), 0 (start), or uniform draws in [0, 1).
        ``draw`` tells apart the draws of one sample that a mixture takes more than once in an
        epoch."""
        if self.offset in NAMED_OFFSETS:
            return NAMED_OFFSETS[self.offset]
        if self.seed is not None:
            # A pure function of (seed, epoch, index): the same clips whatever the number of
            # workers, and again after a resume.
            key = [int(self.seed), self.epoch, index] + ([_OFFSET_STREAM, draw] if draw else [])
            rng = np.random.default_rng(key)
        else:
            # torch seeds every worker differently (and reproducibly after torch.manual_seed),
            # and afresh for each epoch's workers.
            rng = self._generator(index, stream=0)
        return rng.random() if count is None else rng.random(count).tolist()

    # -- decoding ----------------------------------------------------------------------------
    def _frames(self, index: int, id_: str, draw: int = 0) -> list[int]:
        raise NotImplementedError

    def _shape(self, tensor: torch.Tensor) -> torch.Tensor:
        """A decoded (T, H, W, C) tensor in the dataset's layout."""
        raise NotImplementedError

    def _normalize(self, index: SupportsInt) -> int:
        n = len(self)
        i = int(index)
        if not -n <= i < n:
            raise IndexError(f"index {i} out of range for a dataset of {n} items")
        return i % n

    def _sample(self, clip: torch.Tensor, id_: str, rest: Callable[..., Any] | None) -> Any:
        """The item: ``rest`` (what the transform still has to do after the decode: all of it,
        the part after a fused prefix, or None) applied, with its target."""
        if rest is not None:
            clip = rest(clip)
        if self.target is None:
            return clip
        return clip, self._target(id_)

    def __getitem__(self, index: SupportsInt) -> Any:
        return self._item(self._normalize(index))

    def _item(self, index: int, draw: int = 0) -> Any:
        id_ = self._id(index)
        frames = self._frames(index, id_, draw)
        geometry, rest = self._geometry(index, id_, frames, draw)
        crop, size, flip = geometry or (None, None, False)
        array = self._directory().read(
            id_,
            frames,
            crop=crop,
            size=size,
            flip=flip,
            colorspace=self.colorspace,
            threads=self.threads,
            fast_decode=self.fast_decode,
        )
        return self._sample(self._shape(torch.from_numpy(array)), id_, rest)

    def __getitems__(self, indices: Sequence[SupportsInt]) -> _Batch:
        """Samples of a whole batch, decoded in one parallel call (the DataLoader calls this
        with each batch's indices). For a remote dataset drawn by a
        :class:`GulpDistributedSampler` or in sequential order, the bytes of the batch this
        process gets next are fetched while this one decodes (see
        :meth:`GulpDirectory.prefetch`)."""
        normalized = [self._normalize(i) for i in indices]
        self._read_ahead(normalized)
        return self._get_batch(normalized)

    def _get_batch(
        self,
        indices: list[int],
        draws: list[int] | None = None,
        check: bool = True,
        shared: bool = True,
    ) -> _Batch:
        """The batch of ``indices`` (normalised), with their ``draws`` (a mixture's; 0 by
        default); ``check``: raise :class:`MixedShapesError` unless the clips stack;
        ``shared``: in a worker, decode into shared memory (False: the caller copies the
        batch on). With ``on_error="skip"``, samples that fail to read are left out
        (``kept`` says which stayed)."""
        draws = draws or [0] * len(indices)
        if self.on_error == "raise":
            return self._read_batch(indices, draws, check, shared)
        try:
            return self._read_batch(indices, draws, check, shared)
        except _READ_ERRORS:
            pass
        # Find the bad ones one by one (the rare path), then read the rest as a batch.
        kept = []
        for n, (i, d) in enumerate(zip(indices, draws, strict=True)):
            try:
                self._read_batch([i], [d], False, False)
                kept.append(n)
            except _READ_ERRORS as e:
                self._skip(self._id(i), e)
        if not kept:
            raise ValueError(
                f"{self.path}: every sample of this batch failed to read "
                f"({len(indices)} skipped with on_error='skip'); see the log"
            )
        batch = self._read_batch(
            [indices[n] for n in kept], [draws[n] for n in kept], check, shared
        )
        if len(kept) < len(indices):
            batch.kept = kept
        return batch

    def _skip(self, id_: str, error: Exception) -> None:
        """Counts and logs a sample left out by ``on_error="skip"``."""
        info = get_worker_info()
        slot = 0 if info is None else (1 + int(info.id)) % _SKIP_SLOTS
        assert self._skip_counts is not None  # made for on_error="skip", the only caller
        self._skip_counts[slot] += 1
        self.skipped.append((id_, str(error)))
        where = "" if info is None else f" (DataLoader worker {info.id})"
        _log.warning(
            "%s: skipped video %r, it failed to read%s: %s [%d skipped so far in this process]",
            self.path,
            id_,
            where,
            error,
            len(self.skipped),
        )

    def _read_batch(
        self, indices: list[int], draws: list[int], check: bool, shared: bool
    ) -> _Batch:
        ids = [self._id(i) for i in indices]
        frames = [self._frames_of(i, id_, d) for i, id_, d in zip(indices, ids, draws, strict=True)]
        planned = [
            self._geometry(i, id_, f, d)
            for i, id_, f, d in zip(indices, ids, frames, draws, strict=True)
        ]
        decoded = self._decode(ids, frames, [g for g, _ in planned], shared)
        batch = _Batch()
        batch.extras = 0 if self.target is None else 1
        batch.ragged = self.ragged
        if isinstance(decoded, torch.Tensor) and all(rest is None for _, rest in planned):
            batch.decoded = decoded
            batch.stacked = handover(self._shape_batch(decoded))
        clips = [self._shape(c) for c in decoded]
        for clip, id_, (_, rest) in zip(clips, ids, planned, strict=True):
            batch.append(self._sample(clip, id_, rest))
        if check and batch.stacked is None and not self.ragged:
            _check_one_shape(self._owner(), ids, batch)
        return batch

    def _owner(self) -> _Owner:
        return _Owner(f"{type(self).__name__} {self.path}", self.layout, self._rest is not None)

    def _shape_batch(self, batch: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    # -- geometry fused into the decode -------------------------------------------------------
    def _geometry(
        self, index: int, id_: str, frames: list[int], draw: int = 0
    ) -> tuple[Fused | None, Callable[..., Any] | None]:
        """``((box, size, flip) or None, transform left to apply or None)`` for one clip.

        Our own ``crop``/``size``/``hflip`` are drawn from the clip's generator (a pure
        function of ``(seed, epoch, index)`` with an integer seed). A fused torchvision
        prefix has its parameters drawn by torchvision itself from torch's RNG, per clip in
        batch order; a clip it cannot fuse (a ``CenterCrop`` that would pad) is decoded whole
        and gets the whole transform, from the RNG state it would have started from.
        """
        if self.size is None and float(self.hflip) == 0.0 and not self._fused:
            return None, self._rest
        height, width = self._frame_size(id_, frames)
        if not self._fused:
            rng = self._generator(index, stream=1, draw=draw)
            box = sample_crop(
                self.crop,
                height,
                width,
                self.size,
                scale=self.scale,
                ratio=self.ratio,
                rng=rng,
            )
            flip = sample_flip(float(self.hflip), rng) if float(self.hflip) > 0.0 else False
            return (box, self.size, flip), self._rest
        state = torch.get_rng_state()
        try:
            box, size, flip = plan_fused(self._fused, height, width)
        except NeedsPaddingError:
            torch.set_rng_state(state)
            return None, self.transform
        return (box, size, flip), self._rest

    def _frame_size(self, id_: str, frames: list[int]) -> tuple[int, int]:
        """``(height, width)`` of the clip's first frame: from the index, or the JPEG header
        for chunks without one."""
        h, w, _ = self._directory().frame_shape(id_, frames[0] if frames else 0)
        return h, w

    def _index_shapes(self) -> tuple[np.ndarray, np.ndarray]:
        """``(frame_counts, shapes)`` of the dataset's videos in index order: frame count and
        first frame's ``(height, width, channels)``, from the binary index (for chunks
        without one, the first frame's JPEG header). What shape bucketing needs."""
        gd = self._directory()
        listed = self._given_ids is not None or self.exclude
        return gd.video_shapes(self._id_list() if listed else None, headers=True)

    def _generator(self, index: int, stream: int, draw: int = 0) -> np.random.Generator:
        """The clip's random generator: seeded by ``(seed, epoch, index, stream)`` (and the
        ``draw`` when it is not 0) with an integer seed (streams keep the frame offsets and
        the crop independent), else this process's generator."""
        if self.seed is not None:
            key = [int(self.seed), self.epoch, index, stream] + ([draw] if draw else [])
            return np.random.default_rng(key)
        self._directory()  # resets the generator in a new process
        if self._rng is None:
            self._rng = np.random.default_rng(torch.initial_seed())
        return self._rng

    # -- read-ahead --------------------------------------------------------------------------
    def _follow_sampler(self, sampler: BatchOrder) -> None:
        """Called by :class:`GulpDistributedSampler` when it is made for this dataset."""
        self._order = sampler

    def _frames_of(self, index: int, id_: str, draw: int = 0) -> list[int]:
        """The sample's frames: those drawn when it was prefetched, else drawn now."""
        planned = self._planned.pop(self._plan_key(index, draw), None)
        return planned if planned is not None else self._frames(index, id_, draw)

    def _plan_key(self, index: int, draw: int) -> tuple[int, ...]:
        return (self.epoch, index, draw) if draw else (self.epoch, index)

    def _is_remote(self) -> bool:
        return self._directory().is_remote

    def _read_ahead(self, indices: list[int]) -> None:
        """Prefetches the batch this process reads next when the order says which: a
        :class:`GulpDistributedSampler`'s or :class:`GulpBucketBatchSampler`'s made with the
        dataset, or, with any other sampler, the DataLoader's default sequential order when
        the batches are runs of consecutive indices (:class:`ReadAhead`)."""
        if indices and self._is_remote():
            coming = self._ahead.coming(indices, len(self), self._order)
            if coming:
                self._prefetch(coming)

    def _prefetch(self, indices: list[int], draws: list[int] | None = None) -> None:
        """Starts fetching the bytes of these samples. Their frames are drawn now, so that
        the read asks for exactly the bytes fetched."""
        draws = draws or [0] * len(indices)
        if len(self._planned) > 4 * len(indices):
            self._planned.clear()  # guesses that were never read
        ids, frames = [], []
        for i, d in zip(indices, draws, strict=True):
            id_ = self._id(i)
            key = self._plan_key(i, d)
            picked = self._planned.get(key)
            if picked is None:
                picked = self._planned[key] = self._frames(i, id_, d)
            ids.append(id_)
            frames.append(picked)
        self._directory().prefetch(ids, frames)

    def _decode(
        self,
        ids: list[str],
        frames: list[list[int]],
        geometry: Sequence[Fused | None] | None = None,
        shared: bool = True,
    ) -> torch.Tensor | list[torch.Tensor]:
        """One (N, T, H, W, C) tensor, or a list of (T, H, W, C) tensors when the videos'
        shapes differ. ``geometry``: per clip, ``(box, size, flip)`` fused into the decode,
        or None (the whole frames); ``shared``: into shared memory in a worker."""
        gd = self._directory()
        geometry = geometry or [None] * len(ids)
        fused: dict[str, Any] = {}
        if any(g is not None for g in geometry):
            fused = {
                "crop": [g[0] if g else None for g in geometry],
                "size": [g[1] if g else None for g in geometry],
                "flip": [bool(g and g[2]) for g in geometry],
            }
        out = None
        if shared and get_worker_info() is not None:
            # In a worker, decode straight into shared memory: the batch then travels to the
            # main process as a handle, where a private array would be copied into shared
            # memory first. The memory is reused once the main process has let go of it.
            shape = self._predicted_shape(gd, ids, frames, geometry)
            if shape is not None:
                out = shared_batch(shape)
        threads = self.threads
        try:
            decoded = gd.read_batch(
                ids,
                frames,
                out=None if out is None else out.numpy(),
                colorspace=self.colorspace,
                threads=threads,
                fast_decode=self.fast_decode,
                **fused,
            )
        except ValueError:
            if out is None:
                raise
            # The index could not predict the shape (e.g. legacy chunks): let the engine
            # allocate.
            out = None
            decoded = gd.read_batch(
                ids,
                frames,
                colorspace=self.colorspace,
                threads=threads,
                fast_decode=self.fast_decode,
                **fused,
            )
        if out is not None:
            return out
        if isinstance(decoded, np.ndarray):
            return torch.from_numpy(decoded)
        return [torch.from_numpy(a) for a in decoded]

    def _predicted_shape(
        self,
        gd: GulpDirectory,
        ids: list[str],
        frames: list[list[int]],
        geometry: Sequence[Fused | None],
    ) -> tuple[int, ...] | None:
        """The batch's (N, T, H, W, C) from the index, or None if it may not be uniform."""
        first = None
        for id_, sel, geo in zip(ids, frames, geometry, strict=True):
            shapes = gd.frame_shapes(id_)
            picked = {shapes[k] for k in sel}
            if len(picked) != 1:
                return None
            h, w, c = picked.pop()
            if h == 0 or w == 0:
                return None
            if geo is not None:
                h, w = geo[1] if geo[1] is not None else (round(geo[0][2]), round(geo[0][3]))
            forced = (self.colorspace or "AUTO").upper()
            if forced == "AUTO":
                c = 1 if c == 1 else 3
            else:
                c = 1 if forced in ("GRAY", "GREY", "L") else 3
            shape = (len(sel), h, w, c)
            if first is None:
                first = shape
            elif shape != first:
                return None
        return None if first is None else (len(ids), *first)


class MixtureSource:
    """The seam through which :class:`~gulpio_rs.torch.GulpMixture` (``torch/_mixture.py``)
    reads one of its datasets: the calls a mixture needs and nothing else, so that the
    datasets' internals can change without the mixture reaching into them.

    ``draw``/``draws``: which of a sample's draws this is (a mixture with replacement reads
    one video several times per epoch, each with its own random frames and crop)."""

    def __init__(self, dataset: _GulpDataset):
        self.dataset = dataset

    def item(self, index: int, draw: int = 0) -> Any:
        """Sample ``index`` (normalised) as ``dataset[index]`` gives it."""
        return self.dataset._item(index, draw=draw)

    def batch(self, indices: list[int], draws: list[int], *, shared: bool) -> _Batch:
        """The samples of ``indices`` decoded in one call, unchecked for one shape (the
        mixture checks the whole batch); ``shared``: into shared memory in a worker."""
        return self.dataset._get_batch(indices, draws, check=False, shared=shared)

    def video_id(self, index: int) -> str:
        """The id of sample ``index``."""
        return self.dataset._id(index)

    def shape_batch(self, batch: torch.Tensor) -> torch.Tensor:
        """A decoded ``uint8`` batch in the dataset's layout."""
        return self.dataset._shape_batch(batch)

    @property
    def has_unfused_transform(self) -> bool:
        """Whether a transform runs on each sample after decoding (batches then do not stack
        in the decoder's output)."""
        return self.dataset._rest is not None

    def is_remote(self) -> bool:
        return self.dataset._is_remote()

    def prefetch(self, indices: list[int], draws: list[int]) -> None:
        """Starts fetching these samples' bytes (remote datasets)."""
        self.dataset._prefetch(indices, draws)
