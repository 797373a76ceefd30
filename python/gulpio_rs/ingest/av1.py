"""Building video segments (``encoding="video"``): a video's frames encoded as short,
independently decodable AV1 streams (docs/FORMAT.md §6; why AV1 and these defaults:
docs/DECISIONS.md, "Video segments").

:func:`encode_segments` encodes with SVT-AV1 through PyAV (already a dependency for reading
videos). Each segment starts with a sequence header and a key frame, holds ``gop`` frames (the
last one fewer) and is closed: nothing in it refers to another segment, so the reader decodes
any of them alone. The chunk writer decodes every segment it is given before it stores it
(``ChunkWriter::append_segments`` in the Rust core): a segment that does not decode to exactly
its declared frames, size and colour is refused, so what any writer stores is what the reader
can decode, whoever encoded it.

:class:`~gulpio_rs.GulpIngestor` and the other writers use it with ``encoding="video"``:
:class:`SegmentVideo` is what the ingest's encoder (``ingest.encoder.FrameEncoder``) hands to
``GulpChunk.append``. The public names are re-exported by :mod:`gulpio_rs.segments`.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from .._choices import Matrix
from .._encode_options import DEFAULT_CRF, DEFAULT_GOP, DEFAULT_PRESET, MAX_GOP, MAX_PRESET
from ..errors import VideoEncodeError

__all__ = [
    "DEFAULT_CRF",
    "DEFAULT_GOP",
    "DEFAULT_PRESET",
    "MAX_GOP",
    "MAX_PRESET",
    "Segment",
    "SegmentVideo",
    "VideoEncodeError",
    "encode_segments",
    "encode_video",
]

# AVColorSpace / AVColorRange / primaries / transfer values (FFmpeg's pixfmt.h).
_MATRICES = {"bt601": (6, 6, 6), "bt709": (1, 1, 1)}  # (colorspace, primaries, trc)
_SWS_COLORSPACE = {"bt601": "itu601", "bt709": "itu709"}


class Segment(NamedTuple):
    """One stored segment: the AV1 stream (``data``), how many frames it holds, and whether it
    starts with a key frame (always, for what :func:`encode_segments` writes)."""

    data: bytes
    frames: int
    keyframe: bool

    @property
    def crc(self) -> int:
        """The CRC-32 of ``data`` (``zlib.crc32``), as the index records it and
        ``_native.decode_segment(..., crc=)`` checks it."""
        return zlib.crc32(self.data)


#: AV1's numbers of the colour matrices (what the index records).
_MATRIX_CODES = {"bt601": 6, "bt709": 1}


@dataclass(frozen=True)
class SegmentVideo:
    """One video encoded as segments, ready to be stored (``GulpChunk.append`` takes it in
    place of a list of JPEG frames): ``len()`` is its frame count."""

    segments: list[Segment]
    width: int
    height: int
    gop: int
    matrix: Matrix = "bt601"
    full_range: bool = False

    def __len__(self) -> int:
        return sum(s.frames for s in self.segments)

    @property
    def nbytes(self) -> int:
        """The stored bytes (segment streams, without padding)."""
        return sum(len(s.data) for s in self.segments)

    @property
    def matrix_code(self) -> int:
        """The colour matrix as AV1 numbers it (1 = BT.709, 6 = BT.601)."""
        return _MATRIX_CODES[self.matrix]


def encode_video(
    frames: Sequence[npt.ArrayLike],
    *,
    crf: int = DEFAULT_CRF,
    gop: int = DEFAULT_GOP,
    preset: int = DEFAULT_PRESET,
) -> SegmentVideo:
    """:func:`encode_segments` of one video's RGB frames, as a :class:`SegmentVideo`."""
    w, h = _check_frames(frames)
    segments = encode_segments(frames, crf=crf, gop=gop, preset=preset)
    return SegmentVideo(segments, w, h, gop)


def _check_frames(frames: Sequence[npt.ArrayLike]) -> tuple[int, int]:
    if len(frames) == 0:
        raise VideoEncodeError("no frames to encode")
    first = np.asarray(frames[0])
    if first.dtype != np.uint8 or first.ndim != 3 or first.shape[2] != 3:
        raise VideoEncodeError(
            f"frames must be HxWx3 uint8 arrays (RGB); the first is {first.dtype} {first.shape}"
        )
    h, w = first.shape[:2]
    if h < 16 or w < 16 or h > 8192 or w > 8192 or h * w > 1 << 26:
        raise VideoEncodeError(f"frames of {w}x{h} cannot be stored as video (16 to 8192 px)")
    for i, f in enumerate(frames):
        a = np.asarray(f)
        if a.shape != first.shape or a.dtype != np.uint8:
            raise VideoEncodeError(
                f"frame {i} is {a.dtype} {a.shape}, frame 0 {first.dtype} {first.shape}: "
                "all frames of a video segment stream must have one size"
            )
    return w, h


def encode_segments(
    frames: Sequence[npt.ArrayLike],
    *,
    crf: int = DEFAULT_CRF,
    gop: int = DEFAULT_GOP,
    preset: int = DEFAULT_PRESET,
    matrix: Matrix = "bt601",
    full_range: bool = False,
) -> list[Segment]:
    """Encodes one video's frames (a sequence of HxWx3 ``uint8`` RGB arrays, one size) as AV1
    segments of ``gop`` frames.

    ``crf`` is the quality (see :data:`DEFAULT_CRF`), ``gop`` the frames per segment,
    ``preset`` SVT-AV1's speed. ``matrix`` (``"bt601"`` or ``"bt709"``) and ``full_range``
    choose the RGB -> YUV conversion, which the stream signals so that decoders convert back
    the same way. Raises :class:`VideoEncodeError`.
    """
    if not 0 <= crf <= 63:
        raise VideoEncodeError(f"crf must be 0..63, not {crf}")
    if not 1 <= gop <= MAX_GOP:
        raise VideoEncodeError(f"gop must be 1..{MAX_GOP}, not {gop}")
    if not 0 <= preset <= MAX_PRESET:
        raise VideoEncodeError(f"preset must be 0..{MAX_PRESET}, not {preset}")
    if matrix not in _MATRICES:
        raise VideoEncodeError(f"matrix must be one of {sorted(_MATRICES)}, not {matrix!r}")
    w, h = _check_frames(frames)
    import av
    from av.video.reformatter import Colorspace, VideoReformatter

    if "libsvtav1" not in av.codecs_available:
        raise VideoEncodeError(
            "PyAV's FFmpeg has no SVT-AV1 encoder (libsvtav1); install a PyAV wheel that does "
            "(pip install -U av)"
        )
    # SVT-AV1 prints its whole configuration to stderr for every encoder it opens (a dozen
    # lines per video at ingest); errors only, unless the user chose a level.
    os.environ.setdefault("SVT_LOG", "1")
    colorspace, primaries, trc = _MATRICES[matrix]
    color_range = 2 if full_range else 1
    cc = av.CodecContext.create("libsvtav1", "w")
    cc.width, cc.height, cc.pix_fmt = w, h, "yuv420p"
    cc.time_base = Fraction(1, 25)
    cc.framerate = Fraction(25, 1)
    cc.gop_size = gop
    cc.colorspace, cc.color_primaries, cc.color_trc = colorspace, primaries, trc
    cc.color_range = color_range
    # Closed GOPs: every key frame refreshes all references (irefresh-type 2), so a segment
    # decodes without the one before it.
    cc.flags |= av.codec.context.Flags.closed_gop
    cc.options = {
        "crf": str(crf),
        "preset": str(preset),
        "svtav1-params": f"keyint={gop}:irefresh-type=2",
    }
    packets = []
    # One converter for the whole video: `VideoFrame.reformat` builds a new swscale context
    # per frame, most of the conversion's cost (same bytes; docs/DECISIONS.md).
    rgb_to_yuv = VideoReformatter()
    for i, f in enumerate(frames):
        vf = av.VideoFrame.from_ndarray(np.ascontiguousarray(f), format="rgb24")
        vf = rgb_to_yuv.reformat(
            vf,
            format="yuv420p",
            dst_colorspace=Colorspace[_SWS_COLORSPACE[matrix].upper()],
            dst_color_range=color_range,
        )
        vf.pts = i
        packets += cc.encode(vf)
    packets += cc.encode(None)
    if len(packets) != len(frames):
        raise VideoEncodeError(
            f"the encoder returned {len(packets)} packets for {len(frames)} frames"
        )
    # One packet per frame (an AV1 temporal unit shows exactly one frame); segments start at
    # key frames.
    runs: list[list[bytes]] = []
    for p in packets:
        if p.is_keyframe or not runs:
            runs.append([])
        runs[-1].append(bytes(p))
    # Not decoded here: the writer proves every segment before storing it, once.
    segments = [Segment(b"".join(run), len(run), True) for run in runs]
    if segments and max(s.frames for s in segments) > gop:
        raise VideoEncodeError(f"the encoder made a segment longer than gop={gop}")
    return segments
