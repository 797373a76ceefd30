"""Map-style PyTorch datasets over a gulp directory, with batched decoding."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, default_collate, get_worker_info

from .. import _native
from ..directory import GulpDirectory, _out_size, _storage_options
from ..errors import BrokenChunkWarning
from ._geometry import (
    CROP_MODES,
    NeedsPaddingError,
    plan_fused,
    sample_crop,
    sample_flip,
    split_fusable,
)
from ._readahead import coming_batch, sequential_batch
from ._sampling import sample_frame_indices
from ._shared import handover, shared_batch

# Permutations from the decoder's (T, H, W, C) to each layout; all are views.
_VIDEO_LAYOUTS = {
    "THWC": (0, 1, 2, 3),
    "TCHW": (0, 3, 1, 2),
    "CTHW": (3, 0, 1, 2),
}
_IMAGE_LAYOUTS = {"HWC": (0, 1, 2), "CHW": (2, 0, 1)}
_OFFSETS = ("center", "random")
_LABELS_FILE = "label2idx.json"


class _Batch(list):
    """The samples ``__getitems__`` returns, plus the stacked tensor they are views of (when
    there is one), so that :func:`gulp_collate` can return it without copying."""

    stacked: torch.Tensor | None = None
    has_target: bool = True


def gulp_collate(samples):
    """``collate_fn`` for the DataLoader that returns the batch the dataset decoded in one
    call as it is, instead of stacking the samples again (:func:`default_collate` copies every
    clip once more). Returns ``(clips, targets)`` (or ``clips`` when ``target=None``) like
    ``default_collate`` does; ``clips`` is a view in the dataset's layout, not necessarily
    contiguous (call ``.contiguous()`` if a model needs it). Anything else (samples changed by
    a transform, videos of different shapes, other datasets) goes to ``default_collate``.
    """
    stacked = getattr(samples, "stacked", None)
    if stacked is None or stacked.shape[0] != len(samples):
        return default_collate(samples)
    if not samples.has_target:
        return stacked
    return stacked, default_collate([s[1] for s in samples])


class _GulpDataset(Dataset):
    """What the video and image datasets share: the lazily (re)opened directory, ids,
    targets, random offsets and batched decoding."""

    def __init__(
        self,
        path,
        *,
        transform: Callable | None,
        target: str | Callable[[dict], Any] | None,
        ids: Sequence[str] | None,
        offset: str,
        seed: int | None,
        colorspace: str | None,
        check_data: bool,
        threads: int | None,
        storage_options: dict | None = None,
        io: str | None = None,
        size=None,
        crop: str | None = None,
        scale=(0.08, 1.0),
        ratio=(3.0 / 4.0, 4.0 / 3.0),
        hflip: float = 0.0,
        fast_decode: bool = True,
    ):
        if isinstance(path, GulpDirectory):
            storage_options = storage_options or path._storage_options
            io = io or path._io
            path = path.output_dir
        if offset not in _OFFSETS:
            raise ValueError(f"offset must be one of {_OFFSETS}, not {offset!r}")
        if not (target is None or isinstance(target, str) or callable(target)):
            raise TypeError(f"target must be a meta key, a callable or None, not {target!r}")
        self.path = os.fspath(path)
        self.transform = transform
        # The geometry fused into the decode: our own crop/size/hflip, else a leading run of
        # torchvision geometric transforms (whose parameters torchvision draws, per clip).
        self.size = _out_size(size)
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
        self.offset = offset
        self.seed = seed
        self.colorspace = colorspace
        self.check_data = check_data
        self.threads = threads
        self.fast_decode = bool(fast_decode)
        self.storage_options = _storage_options(storage_options)
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
        len(self)

    def _reset(self) -> None:
        self._pid = None
        self._gd = None
        self._ids = self._given_ids
        self._labels = None
        self._rng = None
        # Read-ahead state: the epoch the last batch was found in, and the frames already
        # drawn for prefetched samples, by (epoch, index) (so the read asks for exactly what
        # was fetched, and a guess made before set_epoch is not read in the new epoch).
        self._ahead_epoch = None
        self._batch_size = 0
        self._planned = {}
        # Without a GulpDistributedSampler: the batch expected next if the order is
        # sequential, and how many such guesses in a row were wrong.
        self._expected = None
        self._misses = 0

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
        return self._gd

    def _id(self, index: int) -> str:
        gd = self._directory()
        if self._ids is None:
            self._ids = gd.keys()
        return self._ids[index]

    def __getstate__(self):
        # Pickles as path and options (a spawned worker reopens the directory itself).
        state = self.__dict__.copy()
        for key in ("_pid", "_gd", "_ids", "_labels", "_rng", "_ahead_epoch", "_expected"):
            state[key] = None
        state["_batch_size"] = 0
        state["_misses"] = 0
        state["_ids"] = self._given_ids
        state["_planned"] = {}
        return state

    def __len__(self) -> int:
        if self._given_ids is not None:
            return len(self._given_ids)
        return len(self._directory())

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

    def _uniform(self, index: int, count: int | None):
        """Where the clip sits: 0.5 (centred), or uniform draws in [0, 1)."""
        if self.offset == "center":
            return 0.5
        if self.seed is not None:
            # A pure function of (seed, epoch, index): the same clips whatever the number of
            # workers, and again after a resume.
            rng = np.random.default_rng([int(self.seed), self.epoch, index])
        else:
            # torch seeds every worker differently (and reproducibly after torch.manual_seed),
            # and afresh for each epoch's workers.
            rng = self._generator(index, stream=0)
        return rng.random() if count is None else rng.random(count).tolist()

    # -- decoding ----------------------------------------------------------------------------
    def _frames(self, index: int, id_: str) -> list[int]:
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
        index = self._normalize(index)
        id_ = self._id(index)
        frames = self._frames(index, id_)
        geometry, rest = self._geometry(index, id_, frames)
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
        ids = [self._id(i) for i in indices]
        frames = [self._frames_of(i, id_) for i, id_ in zip(indices, ids, strict=True)]
        planned = [
            self._geometry(i, id_, f) for i, id_, f in zip(indices, ids, frames, strict=True)
        ]
        self._read_ahead(indices)
        decoded = self._decode(ids, frames, [g for g, _ in planned])
        batch = _Batch()
        batch.has_target = self.target is not None
        if isinstance(decoded, torch.Tensor) and all(rest is None for _, rest in planned):
            batch.stacked = handover(self._shape_batch(decoded))
        clips = [self._shape(c) for c in decoded]
        for clip, id_, (_, rest) in zip(clips, ids, planned, strict=True):
            batch.append(self._sample(clip, id_, rest))
        return batch

    def _shape_batch(self, batch: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    # -- geometry fused into the decode -------------------------------------------------------
    def _geometry(self, index: int, id_: str, frames: list[int]):
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
            rng = self._generator(index, stream=1)
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
        gd = self._directory()
        first = frames[0] if frames else 0
        h, w, _ = gd.frame_shapes(id_)[first]
        if h == 0 or w == 0:
            info = _native.jpeg_info(bytes(gd.frame_bytes(id_, [first])[0]))
            h, w = info.height, info.width
        return int(h), int(w)

    def _generator(self, index: int, stream: int) -> np.random.Generator:
        """The clip's random generator: seeded by ``(seed, epoch, index, stream)`` with an
        integer seed (streams keep the frame offsets and the crop independent), else this
        process's generator."""
        if self.seed is not None:
            return np.random.default_rng([int(self.seed), self.epoch, index, stream])
        self._directory()  # resets the generator in a new process
        if self._rng is None:
            self._rng = np.random.default_rng(torch.initial_seed())
        return self._rng

    # -- read-ahead --------------------------------------------------------------------------
    def _follow_sampler(self, sampler) -> None:
        """Called by :class:`GulpDistributedSampler` when it is made for this dataset."""
        self._order = sampler

    def _frames_of(self, index: int, id_: str) -> list[int]:
        """The sample's frames: those drawn when it was prefetched, else drawn now."""
        planned = self._planned.pop((self.epoch, index), None)
        return planned if planned is not None else self._frames(index, id_)

    def _read_ahead(self, indices: list[int]) -> None:
        """Prefetches the batch this process reads next when the order says which: a
        :class:`GulpDistributedSampler`'s (:func:`coming_batch`), or, with any other sampler,
        the DataLoader's default sequential order when the batches are runs of consecutive
        indices (:func:`sequential_batch`). Its frames are drawn now so that the read asks
        for exactly the bytes fetched."""
        if not indices:
            return
        gd = self._directory()
        if not gd.is_remote:
            return
        info = get_worker_info()
        workers, me = (1, 0) if info is None else (max(1, int(info.num_workers)), int(info.id))
        self._batch_size = max(self._batch_size, len(indices))
        sampler = self._order
        if sampler is not None:
            epochs = []
            for e in (self._ahead_epoch, sampler.epoch):
                for x in () if e is None else (e, e + 1):
                    if x not in epochs:
                        epochs.append(x)
            found = coming_batch(sampler, indices, epochs, workers, me, self._batch_size)
            if found is None:
                return
            self._ahead_epoch, coming = found
        else:
            confirmed = self._expected == indices
            if self._expected is not None:
                self._misses = 0 if confirmed else self._misses + 1
            coming = sequential_batch(indices, len(self), workers, me, self._batch_size)
            self._expected = coming
            # A single index is a run of one whatever the order: wait until the guess it
            # gives has come true once (a shuffled order would waste every prefetch). Runs
            # in another order (a sampler shuffling blocks of consecutive samples) stop the
            # guessing after two wrong guesses in a row.
            if coming is None or self._misses >= 2 or (len(indices) < 2 and not confirmed):
                return
        if len(self._planned) > 4 * len(indices):
            self._planned.clear()  # guesses that were never read
        ids, frames = [], []
        for i in coming:
            id_ = self._id(i)
            picked = self._planned.get((self.epoch, i))
            if picked is None:
                picked = self._planned[(self.epoch, i)] = self._frames(i, id_)
            ids.append(id_)
            frames.append(picked)
        gd.prefetch(ids, frames)

    def _decode(self, ids: list[str], frames: list[list[int]], geometry: list | None = None):
        """One (N, T, H, W, C) tensor, or a list of (T, H, W, C) tensors when the videos'
        shapes differ. ``geometry``: per clip, ``(box, size, flip)`` fused into the decode,
        or None (the whole frames)."""
        gd = self._directory()
        geometry = geometry or [None] * len(ids)
        fused = {}
        if any(g is not None for g in geometry):
            fused = {
                "crop": [g[0] if g else None for g in geometry],
                "size": [g[1] if g else None for g in geometry],
                "flip": [bool(g and g[2]) for g in geometry],
            }
        out = None
        if get_worker_info() is not None:
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

    ``offset="center"`` (default, for evaluation) centres the window (or takes each segment's
    centre); ``offset="random"`` draws it for every sample (training). With ``seed=None`` the
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
    cores to the others). ``io="pread"`` reads local files with positional reads instead of
    mmap (network file systems).

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
        colorspace: str | None = None,
        check_data: bool = True,
        threads: int | None = None,
        storage_options: dict | None = None,
        io: str | None = None,
        fast_decode: bool = True,
    ):
        if layout not in _VIDEO_LAYOUTS:
            raise ValueError(f"layout must be one of {tuple(_VIDEO_LAYOUTS)}, not {layout!r}")
        # Validates frames/stride/num_segments once, here rather than in a worker.
        sample_frame_indices(1, frames, stride=stride, num_segments=num_segments)
        self.frames = frames
        self.stride = stride
        self.num_segments = num_segments
        self.layout = layout
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
            fast_decode=fast_decode,
        )

    def _frames(self, index: int, id_: str) -> list[int]:
        n = self._directory().num_frames(id_)
        if n == 0:
            raise ValueError(f"video {id_!r} has no frames")
        count = None
        if self.num_segments is not None:
            count = self.num_segments
        elif self.frames is None:
            return list(range(0, n, self.stride))
        offset = self._uniform(index, count)
        return sample_frame_indices(
            n, self.frames, stride=self.stride, num_segments=self.num_segments, offset=offset
        )

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
    and so does ``fast_decode``.
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
        colorspace: str | None = None,
        check_data: bool = True,
        threads: int | None = None,
        storage_options: dict | None = None,
        io: str | None = None,
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
            fast_decode=fast_decode,
        )

    def _frames(self, index: int, id_: str) -> list[int]:
        n = self._directory().num_frames(id_)
        if not -n <= self.frame < n:
            raise IndexError(f"item {id_!r} has {n} frames, there is no frame {self.frame}")
        return [self.frame % n]

    def _shape(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor[0].permute(_IMAGE_LAYOUTS[self.layout])

    def _shape_batch(self, batch: torch.Tensor) -> torch.Tensor:
        return batch[:, 0].permute(0, *(1 + p for p in _IMAGE_LAYOUTS[self.layout]))
