"""Reading source videos with PyAV: :func:`read_video`, :func:`read_video_times`,
:func:`read_video_info`, :data:`VIDEO_EXTENSIONS` and :class:`VideoDecodeError`.

This is the stable public name (README.md and docs/INGEST.md cite ``gulpio_rs.video``): it
only re-exports :mod:`gulpio_rs.source_video`, where the decoding lives under a name that says
its job (source files read by an ingest, apart from the AV1 segments a chunk may store:
``gulpio_rs.segments``). Import from here.
"""

from __future__ import annotations

from .source_video import (
    SHORTFALL_FRAMES,
    VIDEO_EXTENSIONS,
    SourceInfo,
    TimedVideo,
    VideoDecodeError,
    read_video,
    read_video_info,
    read_video_times,
)

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
