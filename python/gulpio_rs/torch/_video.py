"""``GulpVideoDataset``: clips of frames picked by index or by time."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any, get_args

import numpy as np
import torch

from .._choices import ClipAlign, Colorspace, CropMode, Io, OffsetName, OnError, VideoLayout
from .._times import DEFAULT_FPS, VideoTimes
from ..errors import FormatError, NoTimestampsWarning
from ._base import _GulpDataset
from ._options import (
    DatasetOptions,
    DatasetPath,
    Exclude,
    SizeArg,
    Target,
    Transform,
)
from ._sampling import (
    clip_frame_count,
    positive_number,
    sample_frame_indices,
    sample_time_indices,
    segment_aligned_clip,
)
from ._shared import shared_zeros

# Permutations from the decoder's (T, H, W, C) to each layout; all are views.
_VIDEO_LAYOUTS: dict[VideoLayout, tuple[int, int, int, int]] = {
    "THWC": (0, 1, 2, 3),
    "TCHW": (0, 3, 1, 2),
    "CTHW": (3, 0, 1, 2),
}
_LAYOUTS: tuple[VideoLayout, ...] = get_args(VideoLayout)


def _check_time_args(
    fps: float | None,
    clip_seconds: float | None,
    stored_fps: float | None,
    frames: int | None,
    stride: int,
    num_segments: int | None,
) -> None:
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


def _check_clip_align(
    clip_align: object,
    frames: int | None,
    num_segments: int | None,
    fps: float | None,
    clip_seconds: float | None,
) -> None:
    if clip_align not in get_args(ClipAlign):
        raise ValueError(f"clip_align must be one of {get_args(ClipAlign)}, not {clip_align!r}")
    if clip_align != "segment":
        return
    if fps is not None or clip_seconds is not None:
        raise ValueError(
            "clip_align='segment' places clips by frame, not by time (fps=/clip_seconds=)"
        )
    if num_segments is not None:
        raise ValueError(
            "clip_align='segment' places a clip of frames=T; num_segments= takes one frame "
            "per part of the video"
        )
    if frames is None:
        raise ValueError(
            "clip_align='segment' places a clip of frames=T; frames=None reads the whole "
            "video from its first frame"
        )


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

    ``clip_align="segment"`` (with ``frames=T``; default ``"frame"``): in a dataset written
    with ``encoding="video"``, clips start only where one of the video's AV1 segments starts
    (:meth:`GulpDirectory.segment_starts`), among those where the window fits; the offset
    picks among them (``"start"`` the first, ``"center"`` the middle one, ``"random"`` each
    with equal probability). A read then decodes no frame it does not return, and a clip of
    at most one segment's frames decodes one segment. What it changes: a video of ``n``
    frames has about ``n / gop`` possible clips instead of ``n - window + 1`` (docs/TORCH.md,
    "Clips aligned to segments"). Videos of JPEG frames, and videos shorter than the window
    from every segment start, are sampled as with ``"frame"``.

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

    layout: VideoLayout

    def __init__(
        self,
        path: DatasetPath,
        frames: int | None = None,
        *,
        stride: int = 1,
        num_segments: int | None = None,
        offset: OffsetName = "center",
        clip_align: ClipAlign = "frame",
        seed: int | None = None,
        size: SizeArg = None,
        crop: CropMode | None = None,
        scale: Sequence[float] = (0.08, 1.0),
        ratio: Sequence[float] = (3.0 / 4.0, 4.0 / 3.0),
        hflip: float = 0.0,
        layout: VideoLayout = "TCHW",
        transform: Transform | None = None,
        target: Target = "label",
        ids: Sequence[str] | None = None,
        colorspace: Colorspace | None = None,
        check_data: bool = True,
        threads: int | None = None,
        storage_options: Mapping[str, Any] | None = None,
        io: Io | None = None,
        ragged: bool = False,
        exclude: Exclude = None,
        on_error: OnError = "raise",
        fast_decode: bool = True,
        fps: float | None = None,
        clip_seconds: float | None = None,
        stored_fps: float | None = None,
    ) -> None:
        if layout not in _LAYOUTS:
            raise ValueError(f"layout must be one of {_LAYOUTS}, not {layout!r}")
        # Validates frames/stride/num_segments once, here rather than in a worker.
        sample_frame_indices(1, frames, stride=stride, num_segments=num_segments)
        _check_time_args(fps, clip_seconds, stored_fps, frames, stride, num_segments)
        _check_clip_align(clip_align, frames, num_segments, fps, clip_seconds)
        self.clip_align = clip_align
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
            self._warned_no_times = shared_zeros(1, torch.uint8)
        options = DatasetOptions(
            transform=transform,
            target=target,
            ids=ids,
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
        super().__init__(path, options, offset=offset)
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
        if self.clip_align == "segment" and self.frames is not None:
            starts = self._directory().segment_starts(id_)
            if starts is not None:
                u = self._uniform(index, None, draw)
                return segment_aligned_clip(n, starts, self.frames, self.stride, u)
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
