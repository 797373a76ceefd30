"""Decoding source videos (the files an ingest reads) in-process with PyAV (FFmpeg's libraries):
no ``ffmpeg`` binary, no frames bursted to ``/dev/shm``.

The public name of this module is :mod:`gulpio_rs.video`, which re-exports it; this one is
named for its job, apart from the AV1 segments a chunk stores (``gulpio_rs.segments``).

:func:`read_video` replaces gulpio2's ``burst_video_into_frames`` + ``resize_images`` pair. It
returns RGB ``uint8`` arrays and raises :class:`VideoDecodeError` (or an :class:`OSError` for a
missing or unreadable file) instead of printing ffmpeg's complaint and returning no frames.

PyAV is imported on first use, so the rest of gulpio-rs works without it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import numpy.typing as npt

from .errors import VideoDecodeError

if TYPE_CHECKING:
    from av.container import InputContainer
    from av.video.frame import VideoFrame
    from av.video.stream import VideoStream

#: File extensions the video adapters collect by default (compared case-insensitively). FFmpeg
#: reads all of these containers; whether a given file decodes depends on its codec.
VIDEO_EXTENSIONS: tuple[str, ...] = (
    ".mp4",
    ".webm",
    ".mkv",
    ".avi",
    ".mov",
    ".m4v",
    ".mpg",
    ".mpeg",
    ".flv",
    ".wmv",
    ".3gp",
    ".3g2",
    ".ts",
    ".mts",
    ".m2ts",
    ".ogv",
    ".asf",
    ".vob",
)


def _import_av() -> None:
    """Imports PyAV, or raises an ImportError that says how to install it."""
    try:
        import av  # noqa: F401
        import av.video.reformatter  # noqa: F401  (not imported by `import av` in every version)
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "decoding videos needs PyAV: pip install av (wheels bundle FFmpeg)"
        ) from e


def _target_size(width: int, height: int, size: int) -> tuple[int, int]:
    """``(width, height)`` with the shorter side ``size`` and the longer floored, as gulpio2."""
    if height < width:
        return max(1, int(size * width / height)), size
    return size, max(1, int(size * height / width))


def _detail(e: BaseException) -> str:
    # FFmpeg errors repeat the file name after the reason; the message names it already.
    return getattr(e, "strerror", None) or str(e)


def _resample(
    frames: Iterable[VideoFrame], frame_rate: Fraction, native_rate: Fraction
) -> Iterator[tuple[VideoFrame, list[Fraction]]]:
    """Yield ``(frame, instants)``: the output instants ``t_k = t_0 + k / frame_rate`` that
    fall while ``frame`` is on screen, i.e. in ``[its timestamp, the next frame's)``; the last
    frame lasts its own duration, else as long as the frame before it."""
    step = 1 / frame_rate.limit_denominator(1_000_000)
    period = 1 / native_rate
    held: VideoFrame | None = None  # the frame on screen, shown from held_time
    t0 = held_time = Fraction(0)
    k = 0  # the next output instant
    for frame in frames:
        t = _frame_time(frame, None if held is None else held_time, period)
        if held is None:
            t0 = t
        else:
            if t > held_time:
                period = t - held_time
            instants = []
            while t0 + k * step < t:
                instants.append(t0 + k * step)
                k += 1
            yield held, instants
        held, held_time = frame, t
    if held is not None:
        period = _shown_for(held, period)
        instants = []
        while t0 + k * step < held_time + period:
            instants.append(t0 + k * step)
            k += 1
        yield held, instants


def _frame_time(frame: VideoFrame, previous: Fraction | None, period: Fraction) -> Fraction:
    """A frame's presentation time in seconds: its ``pts`` in its time base, else one period
    after the previous frame (the first: 0)."""
    if frame.pts is not None and frame.time_base is not None:
        return frame.pts * Fraction(frame.time_base)
    return previous + period if previous is not None else Fraction(0)


def _shown_for(frame: VideoFrame, period: Fraction) -> Fraction:
    """How long ``frame`` is on screen: its own duration (PyAV >= 13) if known, else
    ``period``."""
    duration: int | None = getattr(frame, "duration", None)
    if duration and frame.time_base is not None:
        return duration * Fraction(frame.time_base)
    return period


class TimedVideo(NamedTuple):
    """What :func:`read_video_times` returns: the decoded ``frames``, the ``times`` each
    stands for (exact :class:`~fractions.Fraction` seconds), the ``end`` of the last one's
    display time, and the source's average frame rate ``fps`` (``None`` if the stream has
    none)."""

    frames: list[npt.NDArray[np.uint8]]
    times: list[Fraction]
    end: Fraction
    fps: Fraction | None


#: Frames a decode may come short of what the container declares before the file counts as
#: cut short: decoders may drop a frame or two at the edges (edit lists, a last frame without
#: its references), which is no truncation.
SHORTFALL_FRAMES = 2


@dataclass(frozen=True)
class SourceInfo:
    """What a video file held beside the frames :func:`read_video_info` returns: how many
    frames were decoded, what the container declares, and its audio streams."""

    #: Frames decoded from the file (before any resampling to ``frame_rate``).
    decoded_frames: int
    #: Seconds from the first decoded frame until the last one stops being shown.
    decoded_seconds: Fraction
    #: The frame count the container declares for the video stream (``None``: it has none).
    declared_frames: int | None
    #: The video stream's duration the container declares, in seconds (``None``: none).
    declared_seconds: Fraction | None
    #: The stream's average frame rate (``None`` if it has none).
    fps: Fraction | None
    #: Audio streams in the file (never decoded or stored).
    audio_streams: int
    #: False when decoding stopped early on purpose (``max_frames``): no shortfall is judged.
    complete: bool

    def shortfall(self) -> str | None:
        """Why the file looks cut short (a sentence naming what was decoded and what the
        container declares), or ``None``. By frame count where the container declares one,
        else by duration, with :data:`SHORTFALL_FRAMES` frames of slack (of the average
        rate, or of the decoded frames' own spacing: variable rates are judged by time, not
        by counting)."""
        if not self.complete:
            return None
        got, declared = self.decoded_frames, self.declared_frames
        decoded_s = f"{float(self.decoded_seconds):.2f} s"
        if declared is not None:
            if declared - got <= SHORTFALL_FRAMES:
                return None
            what = f"decoded {got} of the {declared} frames its container declares"
            if self.declared_seconds is not None:
                what += f" ({decoded_s} of {float(self.declared_seconds):.2f} s)"
        elif self.declared_seconds is not None:
            period = 1 / self.fps if self.fps else self.decoded_seconds / got
            if self.declared_seconds - self.decoded_seconds <= SHORTFALL_FRAMES * period:
                return None
            what = (
                f"decoded {decoded_s} ({got} frames) of the "
                f"{float(self.declared_seconds):.2f} s its container declares"
            )
        else:
            return None
        return f"cut short: {what}; the file may be truncated"


def read_video(
    path: str | os.PathLike[str],
    *,
    frame_rate: float | None = None,
    frame_size: int | None = -1,
    max_frames: int | None = None,
) -> list[npt.NDArray[np.uint8]]:
    """Decode a video file into a list of RGB ``uint8`` ``HxWx3`` arrays, in display order.

    Args:
        path: any file FFmpeg can read (mp4, webm, mkv, avi, mov, ...).
        frame_rate: resample to this many frames per second, like ``ffmpeg -r``: output frame
            ``k`` is the frame on screen at ``t_k = t_0 + k / frame_rate``, where ``t_0`` is the
            first frame's timestamp, i.e. the last frame whose presentation timestamp is
            ``<= t_k``. Frames are repeated when ``frame_rate`` exceeds the video's rate and
            dropped when it is lower (a repeated frame is the same array object); output stops at
            the end of the last frame's display time. ``None`` (default) returns every decoded
            frame once (the native rate).
        frame_size: resize so the shorter side is this many pixels (the longer side is floored,
            as gulpio2's ``resize_by_short_edge``); ``< 1`` or ``None`` keeps the size. Scaling
            is FFmpeg's bilinear swscale fused with the YUV to RGB conversion: at least as fast
            as converting to full-size RGB and then :func:`gulpio_rs.utils.resize_frames`
            (docs/INGEST.md, "Where the video time goes"), and no full-size RGB frame is ever
            held.
        max_frames: stop after this many output frames (decoding stops too).

    Colours follow the stream's colour-matrix and range tags (BT.601 when untagged), and a
    display-rotation tag is applied (as the ``ffmpeg`` command does by default).

    :func:`read_video_times` gives each frame's timestamp too.

    Raises:
        VideoDecodeError: the file is not a readable video, has no video stream, fails while
            decoding, or yields no frames. The message names the file.
        FileNotFoundError, PermissionError: the file cannot be opened (an :class:`OSError`).
    """
    return read_video_times(
        path, frame_rate=frame_rate, frame_size=frame_size, max_frames=max_frames
    ).frames


def read_video_times(
    path: str | os.PathLike[str],
    *,
    frame_rate: float | None = None,
    frame_size: int | None = -1,
    max_frames: int | None = None,
) -> TimedVideo:
    """:func:`read_video`'s frames (same arguments, same errors) with the time each stands
    for: ``(frames, times, end, fps)``.

    ``times`` are exact :class:`~fractions.Fraction` seconds, one per frame: at the native
    rate each frame's presentation timestamp (``pts * time_base``; variable frame rates kept
    as they are; a frame without a ``pts`` one period after the previous), at a resampled
    ``frame_rate`` the output instant ``t_k = t_0 + k / frame_rate`` (the frame is the one on
    screen then). ``end``: when the last frame stops being shown (its own duration, else the
    last step; ``t_0 + K / frame_rate`` when resampled). ``fps``: the stream's average frame
    rate (``None`` if it has none). What ingest stores (docs/INGEST.md, "Frame timestamps").
    """
    return read_video_info(
        path, frame_rate=frame_rate, frame_size=frame_size, max_frames=max_frames
    )[0]


def read_video_info(
    path: str | os.PathLike[str],
    *,
    frame_rate: float | None = None,
    frame_size: int | None = -1,
    max_frames: int | None = None,
) -> tuple[TimedVideo, SourceInfo]:
    """:func:`read_video_times`'s result (same arguments, same errors) and what else the file
    told: a :class:`SourceInfo` with the frames decoded against those its container declares
    (``shortfall()`` says whether the file looks cut short) and its audio streams. What the
    built-in video adapters decode with (docs/INGEST.md, "Failures").
    """
    if frame_rate is not None and not frame_rate > 0:
        raise ValueError(f"frame_rate must be positive or None, got {frame_rate!r}")
    if max_frames is not None and max_frames < 1:
        raise ValueError(f"max_frames must be >= 1 or None, got {max_frames!r}")
    _import_av()
    import av.video.reformatter  # binds `av`: imported by _import_av already
    import av.video.stream

    path = os.fspath(path)
    size = -1 if frame_size is None else int(frame_size)
    limit = max_frames if max_frames is not None else float("inf")
    out: list[npt.NDArray[np.uint8]] = []
    times: list[Fraction] = []
    end: Fraction | None = None
    # One reformatter for the whole video: `frame.to_ndarray(width=...)` makes a new swscale
    # context for every frame, and building it cost more than the scaling, for the same pixels
    # (docs/INGEST.md, "Where the video time goes").
    reformatter = av.video.reformatter.VideoReformatter()

    def convert(frame: VideoFrame) -> npt.NDArray[np.uint8]:
        if size > 0:
            w, h = _target_size(frame.width, frame.height, size)
            rgb = reformatter.reformat(
                frame, width=w, height=h, format="rgb24", interpolation="BILINEAR"
            )
        else:
            rgb = reformatter.reformat(frame, format="rgb24")
        arr = rgb.to_ndarray()
        rotation: int = getattr(frame, "rotation", 0) or 0  # PyAV >= 14
        quarter_turns = round(rotation / 90) % 4
        if quarter_turns:
            arr = np.rot90(arr, quarter_turns)
        # Rows of odd widths come back padded (strided); JPEG encoders want contiguous rows.
        # rgb24 is uint8 already (PyAV types to_ndarray for every format): dtype= copies nothing.
        return np.ascontiguousarray(arr, dtype=np.uint8)

    try:
        container = av.open(path, metadata_errors="ignore")
    except (FileNotFoundError, PermissionError, IsADirectoryError):
        raise
    except Exception as e:
        raise VideoDecodeError(f"cannot open video {path}: {_detail(e)}", path=path) from e

    tally = _Tally()

    def decode(stream: VideoStream) -> Iterator[VideoFrame]:
        for frame in container.decode(stream):
            tally.add(frame)
            yield frame

    complete = True
    with container:
        try:
            stream = container.streams.best("video")
        except Exception:  # PyAV versions differ in what they raise for no stream
            stream = None
        # best("video") returns a video stream or None; isinstance tells mypy which.
        if not isinstance(stream, av.video.stream.VideoStream):
            raise VideoDecodeError(f"{path} has no video stream", path=path)
        # Frame threading: faster decoding alone, neutral with the RGB conversion in the loop on
        # a busy machine (docs/INGEST.md, "Where the video time goes").
        stream.thread_type = "AUTO"
        frames = decode(stream)
        fps = Fraction(stream.average_rate) if stream.average_rate else None
        native = Fraction(stream.average_rate or stream.guessed_rate or 25)
        tally.period = 1 / native
        declared_frames = stream.frames or None
        declared_seconds = _declared_seconds(container, stream)
        audio_streams = len(container.streams.audio)
        if frame_rate is None:
            shown = _native_times(frames, native)
        else:
            step = 1 / Fraction(frame_rate).limit_denominator(1_000_000)
            shown = _resample(frames, Fraction(frame_rate), native)
        try:
            for frame, instants in shown:
                if instants:
                    arr = convert(frame)
                    kept = instants[: int(min(len(instants), limit - len(out)))]
                    # A repeated frame is the same array object, not a copy.
                    out.extend([arr] * len(kept))
                    times.extend(kept)
                    if frame_rate is None:
                        end = kept[-1] + _shown_for(frame, _native_period(times, native))
                    else:
                        end = kept[-1] + step
                if len(out) >= limit:
                    complete = False
                    break
        except (av.error.FFmpegError, ValueError) as e:
            raise VideoDecodeError(
                f"decoding {path} failed after {tally.frames} frames: {_detail(e)}",
                path=path,
                frame=tally.frames,
            ) from e
    if not out or end is None:
        raise VideoDecodeError(f"{path}: no video frames could be decoded", path=path, frame=0)
    info = SourceInfo(
        decoded_frames=tally.frames,
        decoded_seconds=tally.seconds(),
        declared_frames=declared_frames,
        declared_seconds=declared_seconds,
        fps=fps,
        audio_streams=audio_streams,
        complete=complete,
    )
    return TimedVideo(out, times, end, fps), info


class _Tally:
    """Counts the frames decoded from a file and the time they span, by the source's own
    timestamps (whatever rate the output is resampled to)."""

    def __init__(self) -> None:
        self.frames = 0
        self.period = Fraction(1, 25)  # until the stream's rate is known
        self.first: Fraction | None = None
        self.last = Fraction(0)
        self.last_frame: VideoFrame | None = None

    def add(self, frame: VideoFrame) -> None:
        t = _frame_time(frame, None if self.first is None else self.last, self.period)
        if self.first is None:
            self.first = t
        elif t > self.last:
            self.period = t - self.last
        self.last, self.last_frame = t, frame
        self.frames += 1

    def seconds(self) -> Fraction:
        """From the first frame's time until the last one stops being shown."""
        if self.first is None or self.last_frame is None:  # set together, by add()
            return Fraction(0)
        return self.last + _shown_for(self.last_frame, self.period) - self.first


def _declared_seconds(container: InputContainer, stream: VideoStream) -> Fraction | None:
    """The video stream's duration as the file declares it: the stream's own, else the
    container's when the video is its only stream (an audio track may outlast the video)."""
    if stream.duration and stream.time_base is not None:
        return stream.duration * Fraction(stream.time_base)
    if container.duration and len(container.streams) == 1:
        return Fraction(container.duration, 1_000_000)
    return None


def _native_times(
    frames: Iterable[VideoFrame], native: Fraction
) -> Iterator[tuple[VideoFrame, list[Fraction]]]:
    """Yield ``(frame, [its timestamp])`` for every frame, at the native rate."""
    previous: Fraction | None = None
    period = 1 / native
    for frame in frames:
        t = _frame_time(frame, previous, period)
        if previous is not None and t > previous:
            period = t - previous
        previous = t
        yield frame, [t]


def _native_period(times: list[Fraction], native: Fraction) -> Fraction:
    """The step between the last two timestamps, else one period of the native rate."""
    if len(times) > 1 and times[-1] > times[-2]:
        return times[-1] - times[-2]
    return 1 / native


__all__ = [
    "SHORTFALL_FRAMES",
    "VIDEO_EXTENSIONS",
    "SourceInfo",
    "TimedVideo",
    "VideoDecodeError",
    "read_video",
    "read_video_info",
    "read_video_times",
]
