"""In-process video decoding with PyAV (FFmpeg's libraries): no ``ffmpeg`` binary, no frames
bursted to ``/dev/shm``.

:func:`read_video` replaces gulpio2's ``burst_video_into_frames`` + ``resize_images`` pair. It
returns RGB ``uint8`` arrays and raises :class:`VideoDecodeError` (or an :class:`OSError` for a
missing or unreadable file) instead of printing ffmpeg's complaint and returning no frames.

PyAV is imported on first use, so the rest of gulpio-rs works without it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from fractions import Fraction
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from .errors import GulpError

if TYPE_CHECKING:
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


class VideoDecodeError(GulpError, ValueError):
    """A video could not be decoded: not a video, no video stream, corrupt data, no frames.

    ``path`` names the file; ``frame`` is the number of frames decoded before the failure
    (``None`` when the file could not be opened at all).
    """

    def __init__(self, message: str, *, path: str | None = None, frame: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.frame = frame

    def __reduce__(
        self,
    ) -> tuple[Callable[..., VideoDecodeError], tuple[str, str | None, int | None]]:
        # Keeps ``path``/``frame`` when the error crosses a process boundary (ingest workers).
        return _rebuild_video_decode_error, (str(self), self.path, self.frame)


def _rebuild_video_decode_error(
    message: str, path: str | None, frame: int | None
) -> VideoDecodeError:
    return VideoDecodeError(message, path=path, frame=frame)


def _import_av() -> ModuleType:
    try:
        import av
        import av.video.reformatter  # noqa: F401  (not imported by `import av` in every version)
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "decoding videos needs PyAV: pip install av (wheels bundle FFmpeg)"
        ) from e
    return av


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
) -> Iterator[tuple[VideoFrame, int]]:
    """Yield ``(frame, n)``: how many output instants ``t_k = t_0 + k / frame_rate`` fall while
    ``frame`` is on screen, i.e. in ``[its timestamp, the next frame's)``; the last frame lasts
    its own duration, else as long as the frame before it."""
    step = 1 / frame_rate.limit_denominator(1_000_000)
    period = 1 / native_rate
    t0 = Fraction(0)  # the first frame's time
    held: tuple[VideoFrame, Fraction] | None = None  # the frame on screen and its time
    k = 0  # the next output instant
    for frame in frames:
        if frame.pts is not None and frame.time_base is not None:
            t = frame.pts * Fraction(frame.time_base)
        else:
            t = held[1] + period if held is not None else Fraction(0)
        if held is None:
            t0 = t
        else:
            held_frame, held_time = held
            if t > held_time:
                period = t - held_time
            n = 0
            while t0 + k * step < t:
                n += 1
                k += 1
            yield held_frame, n
        held = (frame, t)
    if held is not None:
        held_frame, held_time = held
        duration = getattr(held_frame, "duration", None)  # PyAV >= 13
        if duration and held_frame.time_base is not None:
            period = duration * Fraction(held_frame.time_base)
        n = 0
        while t0 + k * step < held_time + period:
            n += 1
            k += 1
        yield held_frame, n


def read_video(
    path: str | os.PathLike[str],
    *,
    frame_rate: float | None = None,
    frame_size: int = -1,
    max_frames: int | None = None,
) -> list[np.ndarray]:
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

    Raises:
        VideoDecodeError: the file is not a readable video, has no video stream, fails while
            decoding, or yields no frames. The message names the file.
        FileNotFoundError, PermissionError: the file cannot be opened (an :class:`OSError`).
    """
    if frame_rate is not None and not frame_rate > 0:
        raise ValueError(f"frame_rate must be positive or None, got {frame_rate!r}")
    if max_frames is not None and max_frames < 1:
        raise ValueError(f"max_frames must be >= 1 or None, got {max_frames!r}")
    av = _import_av()
    path = os.fspath(path)
    frame_size = -1 if frame_size is None else int(frame_size)
    limit = max_frames if max_frames is not None else float("inf")
    out: list[np.ndarray] = []
    # One reformatter for the whole video: `frame.to_ndarray(width=...)` makes a new swscale
    # context for every frame, and building it cost more than the scaling, for the same pixels
    # (docs/INGEST.md, "Where the video time goes").
    reformatter = av.video.reformatter.VideoReformatter()

    def convert(frame: VideoFrame) -> np.ndarray:
        if frame_size > 0:
            w, h = _target_size(frame.width, frame.height, frame_size)
            rgb = reformatter.reformat(
                frame, width=w, height=h, format="rgb24", interpolation="BILINEAR"
            )
        else:
            rgb = reformatter.reformat(frame, format="rgb24")
        arr = rgb.to_ndarray()
        quarter_turns = round((getattr(frame, "rotation", 0) or 0) / 90) % 4  # PyAV >= 14
        if quarter_turns:
            arr = np.rot90(arr, quarter_turns)
        # Rows of odd widths come back padded (strided); JPEG encoders want contiguous rows.
        return np.ascontiguousarray(arr)

    try:
        container = av.open(path, metadata_errors="ignore")
    except (FileNotFoundError, PermissionError, IsADirectoryError):
        raise
    except Exception as e:
        raise VideoDecodeError(f"cannot open video {path}: {_detail(e)}", path=path) from e

    decoded = 0

    def decode(stream: VideoStream) -> Iterator[VideoFrame]:
        nonlocal decoded
        for frame in container.decode(stream):
            decoded += 1
            yield frame

    with container:
        try:
            stream = container.streams.best("video")
        except Exception:  # PyAV versions differ in what they raise for no stream
            stream = None
        if stream is None:
            raise VideoDecodeError(f"{path} has no video stream", path=path)
        # Frame threading: faster decoding alone, neutral with the RGB conversion in the loop on
        # a busy machine (docs/INGEST.md, "Where the video time goes").
        stream.thread_type = "AUTO"
        frames = decode(stream)
        shown: Iterator[tuple[VideoFrame, int]]
        if frame_rate is None:
            shown = ((frame, 1) for frame in frames)
        else:
            native = stream.average_rate or stream.guessed_rate or 25
            shown = _resample(frames, Fraction(frame_rate), Fraction(native))
        try:
            for frame, repeats in shown:
                if repeats:
                    arr = convert(frame)
                    # A repeated frame is the same array object, not a copy.
                    out.extend([arr] * int(min(repeats, limit - len(out))))
                if len(out) >= limit:
                    break
        except (av.error.FFmpegError, ValueError) as e:
            raise VideoDecodeError(
                f"decoding {path} failed after {decoded} frames: {_detail(e)}",
                path=path,
                frame=decoded,
            ) from e
    if not out:
        raise VideoDecodeError(f"{path}: no video frames could be decoded", path=path, frame=0)
    return out


__all__ = ["VIDEO_EXTENSIONS", "VideoDecodeError", "read_video"]
