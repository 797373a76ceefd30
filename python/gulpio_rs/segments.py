"""Video segments (``encoding="video"``, docs/FORMAT.md §6), the public module: building them
(re-exported from ``ingest.av1``, where the ingest's AV1 encoding lives: :func:`encode_segments`,
:func:`encode_video`, :class:`SegmentVideo`, :class:`Segment`) and, on the read side,
:func:`stage_times`, where reads of videos stored as segments spent their time.
"""

from __future__ import annotations

from typing import NamedTuple

from . import _native
from .errors import VideoEncodeError
from .ingest.av1 import (
    DEFAULT_CRF,
    DEFAULT_GOP,
    DEFAULT_PRESET,
    MAX_GOP,
    Segment,
    SegmentVideo,
    encode_segments,
    encode_video,
)

__all__ = [
    "DEFAULT_CRF",
    "DEFAULT_GOP",
    "DEFAULT_PRESET",
    "MAX_GOP",
    "Segment",
    "SegmentVideo",
    "StageTimes",
    "VideoEncodeError",
    "encode_segments",
    "encode_video",
    "stage_times",
]


class StageTimes(NamedTuple):
    """Where reads of videos stored as segments spent their time in this process (summed
    over its threads) since the last reset: see :func:`stage_times`."""

    #: Seconds starting and closing decoders (their frame threads and buffers).
    setup: float
    #: Seconds in the AV1 decoder until pictures were out: entropy decoding and
    #: reconstruction together (the decoder runs both inside its own tasks and does not time
    #: them apart).
    decode: float
    #: Seconds converting decoded YUV 4:2:0 pictures to RGB.
    convert: float
    #: Seconds cropping, resizing, flipping and converting to gray (``crop=``, ``size=``...),
    #: and copying frames a batch asks for more than once (overlapping clips).
    reframe: float
    #: Segments decoded.
    segments: int
    #: Pictures decoded (from each segment's key frame to the last frame asked for in it).
    pictures: int
    #: Frames returned: ``pictures - returned`` were decoded only to reach them.
    returned: int


def stage_times(reset: bool = False) -> StageTimes:
    """Per-stage totals of segment reads (decoder setup, AV1 decoding, colour conversion,
    crop/resize) and the pictures decoded against the frames returned, in this process since
    it started or since the last call with ``reset=True`` (which starts them again). Always
    counted (a clock read per stage and picture); for benchmarks and profiling."""
    t = _native.segment_stage_times(reset)
    return StageTimes(
        setup=float(t["setup"]),
        decode=float(t["decode"]),
        convert=float(t["convert"]),
        reframe=float(t["reframe"]),
        segments=int(t["segments"]),
        pictures=int(t["pictures"]),
        returned=int(t["returned"]),
    )
