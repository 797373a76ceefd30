"""Map-style PyTorch datasets over a gulp directory, with batched decoding."""

from __future__ import annotations

import json
import logging
import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, default_collate, get_worker_info

from .._choices import Colorspace, Io
from .._read_spec import out_size
from .._storage_options import storage_options_list
from .._threads import thread_count
from .._times import DEFAULT_FPS, VideoTimes
from ..directory import GulpDirectory
from ..errors import BrokenChunkWarning, FormatError, GulpError, NoTimestampsWarning
from ._geometry import (
    CROP_MODES,
    NeedsPaddingError,
    plan_fused,
    sample_crop,
    sample_flip,
    split_fusable,
)
from ._readahead import ReadAhead
from ._sampling import (
    NAMED_OFFSETS,
    OFFSETS,
    clip_frame_count,
    positive_number,
    sample_frame_indices,
    sample_time_indices,
)
from ._shared import handover, shared_batch

# Permutations from the decoder's (T, H, W, C) to each layout; all are views.
_VIDEO_LAYOUTS = {
    "THWC": (0, 1, 2, 3),
    "TCHW": (0, 3, 1, 2),
    "CTHW": (3, 0, 1, 2),
}
_IMAGE_LAYOUTS = {"HWC": (0, 1, 2), "CHW": (2, 0, 1)}
_LABELS_FILE = "label2idx.json"
# The random-offset generator's key with a draw number appended (a fifth element, never equal
# to a crop generator's key).
_OFFSET_STREAM = 2
_ON_ERROR = ("raise", "skip")
# What on_error="skip" skips: damaged or unreadable data (not usage errors).
_READ_ERRORS = (GulpError, OSError)
_SKIP_SLOTS = 256
_log = logging.getLogger("gulpio_rs.torch")


class MixedShapesError(ValueError):
    """The clips of one batch have different shapes (frame sizes, frame counts or channels),
    so they cannot be stacked into one batch tensor; the message names the videos and what to
    pass instead (``size=``, ``crop=``, ``frames=``, a :class:`GulpBucketBatchSampler`, or
    ``ragged=True`` for a list)."""


class _Batch(list):
    """The samples ``__getitems__`` returns, plus the stacked tensor they are views of (when
    there is one), so that :func:`gulp_collate` can return it without copying."""

    stacked: torch.Tensor | None = None
    # The decoder's (N, T, H, W, C) tensor that `stacked` is a permutation of.
    decoded: torch.Tensor | None = None
    # Fields of each sample after the clip: 1 for (clip, target), 0 for a clip alone, 2 for
    # a mixture's (clip, target, source).
    extras: int = 1
    # ragged=True on the dataset: the clips are collated as a list whatever their shapes.
    ragged: bool = False
    # Positions of the requested indices that are in the batch (None: all), when samples
    # that failed to read were skipped (on_error="skip").
    kept: list[int] | None = None


def gulp_collate(samples):
    """``collate_fn`` for the DataLoader that returns the batch the dataset decoded in one
    call as it is, instead of stacking the samples again (:func:`default_collate` copies every
    clip once more). Returns ``(clips, targets)`` (or ``clips`` when ``target=None``) like
    ``default_collate`` does; ``clips`` is a view in the dataset's layout, not necessarily
    contiguous (call ``.contiguous()`` if a model needs it). For a dataset made with
    ``ragged=True``, ``clips`` is always a list of clip tensors (their shapes may differ).
    Anything else (samples changed by a transform, other datasets) goes to
    ``default_collate``.
    """
    clips: list[Any] | torch.Tensor | None
    if getattr(samples, "ragged", False):
        clips = [s[0] for s in samples] if samples.extras else list(samples)
    else:
        clips = getattr(samples, "stacked", None)
        if clips is None or clips.shape[0] != len(samples):
            return default_collate(samples)
    if not samples.extras:
        return clips
    return (
        clips,
        *(default_collate([s[k] for s in samples]) for k in range(1, 1 + samples.extras)),
    )


class _Owner:
    """What :func:`_check_one_shape` says about the dataset a batch comes from."""

    def __init__(self, name: str, layout: str, transformed: bool):
        self.name, self.layout, self.transformed = name, layout, transformed


def _check_one_shape(owner: _Owner, ids: list[str], samples: list) -> None:
    """Raises :class:`MixedShapesError` when the clips of a batch cannot be stacked: what
    ``default_collate`` would otherwise fail on with an error that names neither the videos
    nor the way out (and, in a worker, as "Trying to resize storage that is not resizable")."""
    clips = [s[0] if isinstance(s, tuple) else s for s in samples]
    if not all(isinstance(c, torch.Tensor) for c in clips):
        return  # a transform made something else: collating it is the transform's business
    shapes = [tuple(c.shape) for c in clips]
    if len(set(shapes)) <= 1:
        return
    first: dict[tuple[int, ...], str] = {}
    for id_, shape in zip(ids, shapes, strict=True):
        first.setdefault(shape, id_)
    listed = ", ".join(f"{id_!r} {shape}" for shape, id_ in list(first.items())[:4])
    more = f" and {len(first) - 4} more shapes" if len(first) > 4 else ""
    layout = owner.layout if len(owner.layout) == len(shapes[0]) else None
    differ = set()
    if layout is not None and len({len(s) for s in shapes}) == 1:
        differ = {layout[d] for d in range(len(layout)) if len({s[d] for s in shapes}) > 1}
    ways = []
    if differ & {"H", "W"} or not differ:
        ways.append(
            "size=(h, w) (with crop='center', 'random' or 'random-resized' to choose the box "
            "that is resized) to decode every clip at one size"
        )
        ways.append(
            "GulpBucketBatchSampler(dataset, batch_size=...) as the DataLoader's batch_sampler, "
            "so that each batch holds videos of one frame size"
        )
    if "T" in differ:
        ways.append("frames=T for clips of T frames")
    if "C" in differ:
        ways.append("colorspace='RGB' for 3 channels in every clip (grayscale videos give 1)")
    ways.append("ragged=True to get each batch's clips as a list (gulp_collate returns it)")
    after = " after the transform" if owner.transformed else ""
    raise MixedShapesError(
        f"{owner.name}: the clips of this batch have different shapes{after} "
        f"({owner.layout}): {listed}{more}; they cannot be stacked into one batch tensor. "
        "Pass " + "; or ".join(ways) + "."
    )


class _GulpDataset(Dataset):
    """What the video and image datasets share: the lazily (re)opened directory, ids,
    targets, random offsets and batched decoding."""

    layout: str  # set by each dataset class: the order of its tensors' dimensions

    def __init__(
        self,
        path,
        *,
        transform: Callable | None,
        target: str | Callable[[dict], Any] | None,
        ids: Sequence[str] | None,
        offset: str,
        seed: int | None,
        colorspace: Colorspace | None,
        check_data: bool,
        threads: int | None,
        storage_options: dict | None = None,
        io: Io | None = None,
        size=None,
        crop: str | None = None,
        scale=(0.08, 1.0),
        ratio=(3.0 / 4.0, 4.0 / 3.0),
        hflip: float = 0.0,
        ragged: bool = False,
        exclude=None,
        on_error: str = "raise",
        fast_decode: bool = True,
    ):
        if isinstance(path, GulpDirectory):
            storage_options = storage_options or path.storage_options
            io = io or path.io
            path = path.output_dir
        if offset not in OFFSETS:
            raise ValueError(f"offset must be one of {OFFSETS}, not {offset!r}")
        if not (target is None or isinstance(target, str) or callable(target)):
            raise TypeError(f"target must be a meta key, a callable or None, not {target!r}")
        self.path = os.fspath(path)
        self.transform = transform
        # The geometry fused into the decode: our own crop/size/hflip, else a leading run of
        # torchvision geometric transforms (whose parameters torchvision draws, per clip).
        self.size = out_size(size)
        if crop not in CROP_MODES:
            raise ValueError(f"crop must be one of {CROP_MODES}, not {crop!r}")
        if crop is not None and self.size is None:
            raise ValueError(f"crop={crop!r} needs size= (the output (height, width))")
        if not 0.0 <= float(hflip) <= 1.0:
            raise ValueError(f"hflip must be a probability in [0, 1], not {hflip!r}")
        self.crop, self.scale, self.ratio, self.hflip = crop, tuple(scale), tuple(ratio), hflip
        # Checks scale and ratio once, here rather than in a worker.
        sample_crop(None, 1, 1, scale=self.scale, ratio=self.ratio)
        own = self.size is not None or float(hflip) > 0.0
        self._fused, self._rest = ([], transform) if own else split_fusable(transform)
        self.target = target
        self.ragged = bool(ragged)
        if on_error not in _ON_ERROR:
            raise ValueError(f"on_error must be one of {_ON_ERROR}, not {on_error!r}")
        self.on_error = on_error
        # Samples skipped by on_error="skip", per process (slot 0: the main process, slot
        # 1 + k: DataLoader worker k), in shared memory so the main process sees the workers'.
        self._skip_counts: torch.Tensor | None = None
        if on_error == "skip":
            self._skip_counts = torch.zeros(_SKIP_SLOTS, dtype=torch.int64).share_memory_()
        self.skipped: list[tuple[str, str]] = []
        self.exclude = _exclusions(exclude)
        self.offset = offset
        self.seed = seed
        self.colorspace = colorspace
        self.check_data = check_data
        self.threads = None if threads is None else thread_count(threads, "threads")
        self.fast_decode = bool(fast_decode)
        self.storage_options = storage_options_list(storage_options)
        self.io = io
        self.epoch = 0
        # The GulpDistributedSampler that draws this dataset's batches, if one was made with
        # it: its order tells a worker which batch comes next (read-ahead, remote datasets).
        self._order = None
        self._origin_pid = os.getpid()
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
        self._planned: dict[tuple[int, ...], Any] = {}

    # -- per-process state -------------------------------------------------------------------
    def _directory(self) -> GulpDirectory:
        # Reopened in every process (forked DataLoader workers too): each maps the files
        # itself, and nothing opened by the parent is shared across a fork.
        if self._pid != os.getpid():
            self._reset()
            with warnings.catch_warnings():
                if os.getpid() != self._origin_pid:
                    # Broken chunks were reported when the dataset was made, not per worker.
                    warnings.simplefilter("ignore", BrokenChunkWarning)
                self._gd = GulpDirectory(
                    self.path,
                    check_data=self.check_data,
                    storage_options=self.storage_options,
                    io=self.io,
                )
            self._pid = os.getpid()
        assert self._gd is not None  # opened above in this process
        return self._gd

    def _id(self, index: int) -> str:
        self._directory()  # resets the ids in a new process
        if self._ids is None:
            self._ids = self._id_list()
        return self._ids[index]

    def _id_list(self) -> list[str]:
        """The dataset's ids in index order: ``ids=`` or every video, less ``exclude``."""
        ids = self._given_ids if self._given_ids is not None else self._directory().keys()
        if self.exclude:
            ids = [i for i in ids if i not in self.exclude]
        return ids

    def __getstate__(self):
        # Pickles as path and options (a spawned worker reopens the directory itself).
        state = self.__dict__.copy()
        for key in ("_pid", "_gd", "_labels", "_rng"):
            state[key] = None
        state["_ids"] = None
        state["skipped"] = []
        state["_ahead"] = ReadAhead()
        state["_planned"] = {}
        return state

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
    def _target(self, id_: str):
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

    def _label_map(self) -> dict | None:
        if self._labels is None:
            text = self._directory().read_file(_LABELS_FILE)
            self._labels = {} if text is None else json.loads(text)
        return self._labels or None

    def _uniform(self, index: int, count: int | None, draw: int = 0):
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

    def _normalize(self, index) -> int:
        n = len(self)
        index = int(index)
        if not -n <= index < n:
            raise IndexError(f"index {index} out of range for a dataset of {n} items")
        return index % n

    def _sample(self, clip: torch.Tensor, id_: str, rest):
        """The item: ``rest`` (what the transform still has to do after the decode: all of it,
        the part after a fused prefix, or None) applied, with its target."""
        if rest is not None:
            clip = rest(clip)
        if self.target is None:
            return clip
        return clip, self._target(id_)

    def __getitem__(self, index):
        return self._item(self._normalize(index))

    def _item(self, index: int, draw: int = 0):
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

    def __getitems__(self, indices: Sequence[int]) -> list:
        """Samples of a whole batch, decoded in one parallel call (the DataLoader calls this
        with each batch's indices). For a remote dataset drawn by a
        :class:`GulpDistributedSampler` or in sequential order, the bytes of the batch this
        process gets next are fetched while this one decodes (see
        :meth:`GulpDirectory.prefetch`)."""
        indices = [self._normalize(i) for i in indices]
        self._read_ahead(indices)
        return self._get_batch(indices)

    def _get_batch(
        self, indices: list[int], draws: list[int] | None = None, check=True, shared=True
    ):
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

    def _read_batch(self, indices: list[int], draws: list[int], check: bool, shared: bool):
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
    def _geometry(self, index: int, id_: str, frames: list[int], draw: int = 0):
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
    def _follow_sampler(self, sampler) -> None:
        """Called by :class:`GulpDistributedSampler` when it is made for this dataset."""
        self._order = sampler

    def _frames_of(self, index: int, id_: str, draw: int = 0) -> list[int]:
        """The sample's frames: those drawn when it was prefetched, else drawn now."""
        planned = self._planned.pop(self._plan_key(index, draw), None)
        return planned if planned is not None else self._frames(index, id_, draw)

    def _plan_key(self, index: int, draw: int) -> tuple:
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
        geometry: list | None = None,
        shared: bool = True,
    ):
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

    def _predicted_shape(self, gd, ids, frames, geometry) -> tuple[int, ...] | None:
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


def _check_time_args(fps, clip_seconds, stored_fps, frames, stride, num_segments) -> None:
    """ValueError naming the bad value when the time-based arguments do not fit together."""
    for name, value in (("fps", fps), ("clip_seconds", clip_seconds), ("stored_fps", stored_fps)):
        if value is not None:
            positive_number(value, name)
    if fps is None and clip_seconds is None:
        return
    given = [
        f"{name}={value!r}"
        for name, value, default in (
            ("frames", frames, None),
            ("stride", stride, 1),
            ("num_segments", num_segments, None),
        )
        if value != default
    ]
    if given:
        raise ValueError(
            f"fps=/clip_seconds= pick a clip's frames by time and {', '.join(given)} by "
            "index: give one or the other (the number of frames by time is "
            "round(clip_seconds * fps))"
        )
    if fps is not None and clip_seconds is not None:
        clip_frame_count(float(fps), float(clip_seconds))


def _exclusions(exclude) -> frozenset[str]:
    """The ids ``exclude=`` names: a file (path) with one id per line (``gulpio check
    --bad-list`` writes it; empty lines and lines starting with ``#`` are ignored), or a
    collection of ids."""
    if exclude is None:
        return frozenset()
    if isinstance(exclude, (str, bytes, os.PathLike)):
        with open(exclude, encoding="utf-8") as f:
            lines = [line.rstrip("\r\n") for line in f]
        return frozenset(line for line in lines if line and not line.startswith("#"))
    if isinstance(exclude, dict) or not hasattr(exclude, "__iter__"):
        raise TypeError(f"exclude must be a file path or a collection of ids, not {exclude!r}")
    return frozenset(str(i) for i in exclude)


class GulpVideoDataset(_GulpDataset):
    """A map-style dataset of clips from a gulp directory: item ``i`` is ``(clip, target)``.

    ``clip`` is a ``torch.uint8`` tensor in ``layout`` ``"TCHW"`` (default, what
    ``torchvision.transforms.v2`` expects), ``"THWC"`` (the decoder's order) or ``"CTHW"``
    (3D CNNs), a view of the decoded array (no copy). ``C`` is 3, or 1 for grayscale videos
    (``colorspace="RGB"`` forces 3).

    Frames (see :func:`sample_frame_indices` for the exact rule):

    * ``frames=None``: all frames (every ``stride``-th);
    * ``frames=T, stride=s``: ``T`` frames ``s`` apart; videos shorter than the window loop;
    * ``num_segments=K``: TSN, one frame from each of ``K`` equal segments.

    * ``fps=F, clip_seconds=C``: by time, ``round(C * F)`` frames ``1/F`` seconds apart from
      a window of ``C`` seconds, each the frame on screen at its time (the last stored at or
      before it), whatever rate the video was stored at; ``fps`` alone: the whole video at
      ``F`` fps; ``clip_seconds`` alone: the stored frames in the window. Clips longer than
      the video loop. See :func:`sample_time_indices` and docs/TORCH.md, "Time-based
      sampling". Not combinable with ``frames``/``stride``/``num_segments``. Videos stored
      without timestamps count as evenly spaced at ``stored_fps`` (default: their meta's
      ``fps``, else 30, with one :class:`~gulpio_rs.NoTimestampsWarning` per dataset).

    ``offset="center"`` (default, for evaluation) centres the window (or takes each segment's
    centre); ``offset="start"`` puts it at the video's start (each segment's first frame);
    ``offset="random"`` draws it for every sample (training). With ``seed=None`` the
    draws come from a generator seeded by ``torch.initial_seed()`` in each process (different
    per DataLoader worker and epoch, reproducible after ``torch.manual_seed``); with an
    integer ``seed`` they are a pure function of ``(seed, epoch, index)`` (see
    :meth:`set_epoch`), so a resumed epoch sees the same clips.

    ``target``: a meta field name (``"label"`` is mapped through ``label2idx.json`` in the
    directory when that file exists; ``"idx"`` is gulpio's class index), a callable
    ``meta -> target``, or ``None`` (items are the clip alone). ``transform`` is applied to
    each clip (e.g. ``torchvision.transforms.v2``). ``ids`` restricts the dataset to (and
    orders it by) those video ids; by default every video, in ``GulpDirectory.keys()`` order.

    The DataLoader fetches a batch through :meth:`__getitems__`: one parallel decode of every
    frame of the batch. Pass ``collate_fn=gulp_collate`` to get that batch without a copy.
    Decoding uses ``threads`` threads (default: the usable cores divided among the
    DataLoader's workers and torchrun's local ranks, at least 1; every core otherwise).
    The dataset pickles as its path and options; each process opens the directory itself.

    ``path`` may be a dataset URL (``s3://``, ``gs://``, ``az://``, ``http(s)://``) with
    ``storage_options`` (see :class:`~gulpio_rs.GulpDirectory`); every worker opens its own
    connections (nothing made before a fork is reused). A worker fetches the bytes of the
    batch it gets next while it decodes the current one when the order says which batch that
    is: a :class:`GulpDistributedSampler` made with the dataset, or the DataLoader's default
    sequential order (no sampler, ``shuffle=False``). Remote reads are not divided among the
    loader's workers by the default thread count (a worker waiting for its bytes leaves its
    cores to the others). ``io="mmap"`` memory-maps local files instead of the default
    positional reads (``io="pread"``; docs/REMOTE.md).

    Crop and resize fused into the decode (docs/FUSED.md): ``size=(h, w)`` (or an int for a
    square) makes every clip ``h`` x ``w``; ``crop`` picks, once per clip for all its frames,
    the box that is resized: ``"random-resized"`` (torchvision's ``RandomResizedCrop``, with
    ``scale`` and ``ratio``), ``"center"`` / ``"random"`` (a ``size`` box, as ``CenterCrop``
    / ``RandomCrop``; the largest box of that shape when the frame is smaller), ``None`` (the
    whole frame). ``hflip`` is the probability of mirroring a clip. The draws are a pure
    function of ``(seed, epoch, index)`` with an integer ``seed``, so a resumed epoch sees the
    same crops. Only the crop is decoded (at a reduced DCT scale when it is at least twice
    ``size``) and resized in the same pass. Alternatively, a ``transform`` (a torchvision v2
    ``Compose``) that starts with ``RandomResizedCrop``, ``Resize``, ``CenterCrop``,
    ``RandomCrop`` (no padding) or ``RandomHorizontalFlip`` has that leading run fused the
    same way, its parameters drawn by torchvision itself, and the rest applied per clip.

    Batches stack into one tensor, so the clips of a batch must have one shape. Videos of
    different frame sizes (``--frame-size`` fixes the short side only) or frame counts
    (``frames=None``) raise :class:`MixedShapesError` when they meet in a batch, naming them
    and what to pass: ``size=`` (and ``crop=``), ``frames=``, a
    :class:`GulpBucketBatchSampler` (batches of one frame size), or ``ragged=True``, with
    which :func:`gulp_collate` returns each batch's clips as a list.

    Known-bad samples: ``exclude`` (a file with one id per line, such as ``gulpio check
    --bad-list`` writes, or a collection of ids) leaves those videos out of the dataset, in
    the same places in every process, so its length and order (and so any sampler state) are
    the same in every run with the same list; ids that are not in the dataset are ignored.
    ``on_error="skip"`` leaves out, of each batch, the samples whose read fails (damaged or
    unreadable data: :class:`~gulpio_rs.errors.GulpError` or ``OSError``) instead of raising:
    each is logged (logger ``gulpio_rs.torch``) with its id and error, listed in
    :attr:`skipped` (this process's) and counted in :attr:`skipped_count` (all DataLoader
    workers together); the batch is then shorter. A batch in which every read fails raises.
    ``dataset[i]`` alone still raises.

    ``fast_decode=True`` (default) decodes with libjpeg-turbo's fast IDCT and chroma
    upsampling, as gulpio2 does (about 10% less work per frame, 43 dB PSNR against the
    accurate decode on q90 frames); ``False`` gives :meth:`GulpDirectory.read`'s default
    pixels.
    """

    def __init__(
        self,
        path,
        frames: int | None = None,
        *,
        stride: int = 1,
        num_segments: int | None = None,
        offset: str = "center",
        seed: int | None = None,
        size=None,
        crop: str | None = None,
        scale=(0.08, 1.0),
        ratio=(3.0 / 4.0, 4.0 / 3.0),
        hflip: float = 0.0,
        layout: str = "TCHW",
        transform: Callable | None = None,
        target: str | Callable[[dict], Any] | None = "label",
        ids: Sequence[str] | None = None,
        colorspace: Colorspace | None = None,
        check_data: bool = True,
        threads: int | None = None,
        storage_options: dict | None = None,
        io: Io | None = None,
        ragged: bool = False,
        exclude=None,
        on_error: str = "raise",
        fast_decode: bool = True,
        fps: float | None = None,
        clip_seconds: float | None = None,
        stored_fps: float | None = None,
    ):
        if layout not in _VIDEO_LAYOUTS:
            raise ValueError(f"layout must be one of {tuple(_VIDEO_LAYOUTS)}, not {layout!r}")
        # Validates frames/stride/num_segments once, here rather than in a worker.
        sample_frame_indices(1, frames, stride=stride, num_segments=num_segments)
        _check_time_args(fps, clip_seconds, stored_fps, frames, stride, num_segments)
        self.frames = frames
        self.stride = stride
        self.num_segments = num_segments
        self.fps = fps
        self.clip_seconds = clip_seconds
        self.stored_fps = stored_fps
        self.layout = layout
        # Whether the fallback of videos without timestamps was reported, shared by the
        # DataLoader's workers so that the dataset warns once, not once per process.
        self._warned_no_times: torch.Tensor | None = None
        if self._by_time:
            self._warned_no_times = torch.zeros(1, dtype=torch.uint8).share_memory_()
        super().__init__(
            path,
            transform=transform,
            target=target,
            ids=ids,
            offset=offset,
            seed=seed,
            colorspace=colorspace,
            check_data=check_data,
            threads=threads,
            storage_options=storage_options,
            io=io,
            size=size,
            crop=crop,
            scale=scale,
            ratio=ratio,
            hflip=hflip,
            ragged=ragged,
            exclude=exclude,
            on_error=on_error,
            fast_decode=fast_decode,
        )
        if self._by_time and len(self):
            # Datasets without timestamps say so here, in the main process, not first in a
            # worker.
            first = self._id(0)
            self._video_times(first, self._directory().num_frames(first))

    @property
    def _by_time(self) -> bool:
        return self.fps is not None or self.clip_seconds is not None

    def _frames(self, index: int, id_: str, draw: int = 0) -> list[int]:
        n = self._directory().num_frames(id_)
        if n == 0:
            error = FormatError(f"{self.path}: video {id_!r} has no frames")
            error.path, error.video_id = self.path, id_
            raise error
        if self._by_time:
            times = self._video_times(id_, n)
            picked, _ = sample_time_indices(
                times.timestamps,
                times.end,
                fps=self.fps,
                clip_seconds=self.clip_seconds,
                offset=self._uniform(index, None, draw),
            )
            return picked
        count = None
        if self.num_segments is not None:
            count = self.num_segments
        elif self.frames is None:
            return list(range(0, n, self.stride))
        offset = self._uniform(index, count, draw)
        return sample_frame_indices(
            n, self.frames, stride=self.stride, num_segments=self.num_segments, offset=offset
        )

    def _video_times(self, id_: str, n: int) -> VideoTimes:
        """The video's stored frame times, else (with one warning per dataset) its ``n``
        frames evenly spaced at the assumed rate: ``stored_fps=``, else its metadata's
        ``fps``, else :data:`~gulpio_rs._times.DEFAULT_FPS`."""
        gd = self._directory()
        times = gd.timestamps(id_)
        if times is not None:
            return times
        if self.stored_fps is not None:
            rate = float(self.stored_fps)
        else:
            fps = gd.meta(id_).get("fps")
            known = (
                isinstance(fps, (int, float))
                and not isinstance(fps, bool)
                and bool(np.isfinite(fps))
                and fps > 0
            )
            rate = float(fps) if known and fps is not None else DEFAULT_FPS
            warned = self._warned_no_times
            if warned is not None and not warned[0]:
                warned[0] = 1
                source = "its metadata's 'fps'" if known else "the default rate"
                warnings.warn(
                    f"{self.path}: video {id_!r} has no stored frame timestamps (not ingested "
                    "from a video file by this gulpio-rs, or frames were appended since); "
                    f"clips of such videos take their frames as evenly spaced at {rate:g} fps "
                    f"({source}; pass stored_fps= to say the rate, or re-ingest the videos "
                    "to sample by their real times). Shown once per dataset.",
                    NoTimestampsWarning,
                    stacklevel=3,  # the dataset's maker (when its first video warns)
                )
        return VideoTimes(np.arange(n, dtype=np.float64) / rate, None, n / rate)

    def _shape(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.permute(_VIDEO_LAYOUTS[self.layout])

    def _shape_batch(self, batch: torch.Tensor) -> torch.Tensor:
        return batch.permute(0, *(1 + p for p in _VIDEO_LAYOUTS[self.layout]))


class GulpImageDataset(_GulpDataset):
    """A map-style dataset of single images (one-frame items, or frame ``frame`` of each
    item): item ``i`` is ``(image, target)`` with ``image`` a ``torch.uint8`` tensor in
    ``layout`` ``"CHW"`` (default) or ``"HWC"``, a view of the decoded array.

    ``target``, ``transform``, ``ids``, ``colorspace``, ``threads`` and batching are as in
    :class:`GulpVideoDataset`; ``collate_fn=gulp_collate`` returns ``(N, C, H, W)`` batches
    without a copy when all images of a batch have the same size. ``size``, ``crop``,
    ``scale``, ``ratio``, ``hflip`` and ``seed`` fuse a crop and resize into the decode as in
    :class:`GulpVideoDataset` (as does a leading run of torchvision geometric transforms),
    and so does ``fast_decode``. Images of different sizes in one batch raise
    :class:`MixedShapesError` unless ``size=`` makes them one size or ``ragged=True`` asks for
    lists (see :class:`GulpVideoDataset`). ``exclude`` and ``on_error`` are as in
    :class:`GulpVideoDataset`.
    """

    def __init__(
        self,
        path,
        *,
        frame: int = 0,
        seed: int | None = None,
        size=None,
        crop: str | None = None,
        scale=(0.08, 1.0),
        ratio=(3.0 / 4.0, 4.0 / 3.0),
        hflip: float = 0.0,
        layout: str = "CHW",
        transform: Callable | None = None,
        target: str | Callable[[dict], Any] | None = "label",
        ids: Sequence[str] | None = None,
        colorspace: Colorspace | None = None,
        check_data: bool = True,
        threads: int | None = None,
        storage_options: dict | None = None,
        io: Io | None = None,
        ragged: bool = False,
        exclude=None,
        on_error: str = "raise",
        fast_decode: bool = True,
    ):
        if layout not in _IMAGE_LAYOUTS:
            raise ValueError(f"layout must be one of {tuple(_IMAGE_LAYOUTS)}, not {layout!r}")
        self.frame = int(frame)
        self.layout = layout
        super().__init__(
            path,
            transform=transform,
            target=target,
            ids=ids,
            offset="center",
            seed=seed,
            colorspace=colorspace,
            check_data=check_data,
            threads=threads,
            storage_options=storage_options,
            io=io,
            size=size,
            crop=crop,
            scale=scale,
            ratio=ratio,
            hflip=hflip,
            ragged=ragged,
            exclude=exclude,
            on_error=on_error,
            fast_decode=fast_decode,
        )

    def _frames(self, index: int, id_: str, draw: int = 0) -> list[int]:
        n = self._directory().num_frames(id_)
        if not -n <= self.frame < n:
            raise IndexError(f"item {id_!r} has {n} frames, there is no frame {self.frame}")
        return [self.frame % n]

    def _shape(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor[0].permute(_IMAGE_LAYOUTS[self.layout])

    def _shape_batch(self, batch: torch.Tensor) -> torch.Tensor:
        return batch[:, 0].permute(0, *(1 + p for p in _IMAGE_LAYOUTS[self.layout]))


class MixtureSource:
    """The seam through which :class:`~gulpio_rs.torch.GulpMixture` (``torch/_mixture.py``)
    reads one of its datasets: the calls a mixture needs and nothing else, so that the
    datasets' internals can change without the mixture reaching into them.

    ``draw``/``draws``: which of a sample's draws this is (a mixture with replacement reads
    one video several times per epoch, each with its own random frames and crop)."""

    def __init__(self, dataset: _GulpDataset):
        self.dataset = dataset

    def item(self, index: int, draw: int = 0):
        """Sample ``index`` (normalised) as ``dataset[index]`` gives it."""
        return self.dataset._item(index, draw=draw)

    def batch(self, indices: list[int], draws: list[int], *, shared: bool):
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
