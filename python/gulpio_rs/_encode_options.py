"""How an ingest stores frames: the one owner of the encode settings, their defaults and the
values they may take.

Every writer takes an :class:`EncodeOptions` (``GulpIngestor``, ``gulpio ingest``,
``gulpio_rs.ray.write_gulp``, the frame encoder); their ``quality=`` / ``subsampling=`` /
``restart_rows=`` defaults are read from :data:`DEFAULT`, the command line's choices from
:data:`SUBSAMPLINGS`, and ``_native.encode_frames`` called without them uses :data:`DEFAULT`
too. Adding a setting (a new ``encoding``) means adding it here and to the writers' signatures,
nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import get_args

from . import _native
from ._choices import ColonSubsampling, Encoding, Subsampling

#: Chroma subsampling of colour frames, as the command line lists them (gray frames have
#: none). simplejpeg spells them without colons, which is accepted too.
SUBSAMPLINGS: tuple[ColonSubsampling, ...] = get_args(ColonSubsampling)

#: How frames are stored in a chunk: one JPEG per frame (gulpio2's format), or each video as
#: short AV1 segments that decode on their own (docs/FORMAT.md §6; gulpio2 cannot read these).
ENCODINGS: tuple[Encoding, ...] = get_args(Encoding)

#: ``encoding="video"``: SVT-AV1's constant rate factor (0-63, lower is better and larger).
#: 29 gives 38 dB RGB PSNR against the input frames (the mean over the reference videos; what
#: users see) at 1.13x the bytes of CRF 32, 14-17x fewer than JPEG q90 4:2:0
#: (docs/DECISIONS.md, "Video segments", has the table).
DEFAULT_CRF = 29
#: ``encoding="video"``: frames per segment. A read decodes from its segment's key frame, so
#: one frame costs up to ``gop`` decodes; 8 costs 1.5-2x the bytes of 16, 32 saves 10-20% more.
DEFAULT_GOP = 16
#: ``encoding="video"``: SVT-AV1's speed preset, 0 (slowest, smallest) to 13 (fastest). 8 is the
#: fastest that keeps 38 dB RGB PSNR within 1.15x the bytes of the CRF-32 default it replaced;
#: 12 encodes about 2.5x faster for ~1.3x the bytes at the same quality (docs/DECISIONS.md,
#: "Video segments": the preset/CRF table and the ingest rates).
DEFAULT_PRESET = 8
#: The presets SVT-AV1 takes (its ``-1`` research preset is not offered).
MAX_PRESET = 13
#: The longest segment readers accept (``MAX_SEGMENT_FRAMES`` in ``src/video/mod.rs``).
MAX_GOP = 1024

#: Arrays are encoded by libjpeg-turbo inside the Rust core when this build has it (the release
#: wheels do): the same bytes as simplejpeg, without the GIL and without a Python call per
#: frame. zune-jpeg builds encode with simplejpeg and cannot write restart markers.
RUST_ENCODER = _native.JPEG_BACKEND == "libjpeg-turbo"


#: simplejpeg's name of each subsampling (what its encoder and ``_native.encode_frames`` take).
_SIMPLEJPEG: dict[str, str] = {s: s.replace(":", "") for s in SUBSAMPLINGS}


@dataclass(frozen=True)
class EncodeOptions:
    """How frames are stored: JPEG ``quality`` (1-100), chroma ``subsampling`` (one of
    :data:`SUBSAMPLINGS`, or simplejpeg's ``"420"`` spelling), ``threads`` for
    resize/encode/check, ``restart_rows``: a restart marker after every MCU row of the frames
    encoded here, so that cropped reads decode only the rows they need (docs/FUSED.md; needs
    the libjpeg-turbo build), and ``encoding``: ``"jpeg"`` (a JPEG per frame, gulpio2's format)
    or ``"video"`` (AV1 segments of ``gop`` frames at quality ``crf``, encoded by SVT-AV1 at
    speed ``preset``; ``quality``,
    ``subsampling`` and ``restart_rows`` are JPEG settings and do not apply).

    The defaults (q90 4:2:0, no restart markers) are the ingest's (:data:`DEFAULT`); gulpio2
    wrote 4:4:4 (:data:`GULPIO2`), which ``ChunkWriter`` keeps. Raises ``ValueError`` for a
    value outside these ranges.
    """

    quality: int = 90
    subsampling: Subsampling = "4:2:0"
    threads: int = 1
    restart_rows: bool = False
    encoding: Encoding = "jpeg"
    crf: int = DEFAULT_CRF
    gop: int = DEFAULT_GOP
    preset: int = DEFAULT_PRESET

    def __post_init__(self) -> None:
        if self.encoding not in ENCODINGS:
            raise ValueError(f"encoding must be one of {list(ENCODINGS)}, not {self.encoding!r}")
        if not 0 <= int(self.crf) <= 63:
            raise ValueError(f"crf must be in 0..63, not {self.crf}")
        if not 1 <= int(self.gop) <= MAX_GOP:
            raise ValueError(f"gop must be in 1..{MAX_GOP}, not {self.gop}")
        if not 0 <= int(self.preset) <= MAX_PRESET:
            raise ValueError(f"preset must be in 0..{MAX_PRESET}, not {self.preset}")
        if self.encoding == "video" and self.restart_rows:
            raise ValueError(
                "restart_rows is a JPEG setting; it does not apply to encoding='video'"
            )
        if self.restart_rows and not RUST_ENCODER:
            raise ValueError(
                "restart_rows needs the libjpeg-turbo build of gulpio-rs (this one decodes and "
                "encodes with zune-jpeg/simplejpeg, which cannot write restart markers; see "
                "README, 'Which decoders')"
            )
        if not 1 <= int(self.quality) <= 100:
            raise ValueError(f"quality must be in 1..100, not {self.quality}")
        if self.subsampling not in _SIMPLEJPEG and self.subsampling not in _SIMPLEJPEG.values():
            raise ValueError(
                f"subsampling must be one of {sorted(SUBSAMPLINGS)}, not {self.subsampling!r}"
            )
        from ._threads import thread_count

        thread_count(self.threads, "threads", zero_means_all=False)

    @property
    def simplejpeg_subsampling(self) -> str:
        """The subsampling as simplejpeg names it (``"420"``)."""
        return _SIMPLEJPEG.get(self.subsampling, self.subsampling)


#: The ingest's defaults: what every writer's ``quality=`` / ``subsampling=`` /
#: ``restart_rows=`` default to.
DEFAULT = EncodeOptions()

#: What gulpio2's ``ChunkWriter`` stores (q90 4:4:4), kept by ours for its callers.
GULPIO2 = EncodeOptions(subsampling="4:4:4")


def _as_given(options: EncodeOptions) -> EncodeOptions:
    return options


#: How a writer completes settings its caller left unset (``GulpIngestor`` given neither
#: ``quality`` nor ``subsampling``, ``ChunkWriter`` given no ``options``): this function of the
#: writer's own defaults, called when the writer settles them. The ingest keeps them as they
#: are; gulpio2's layer (``utils``, where its quality knob ``_JPEG_WRITE_QUALITY`` lives)
#: installs its rule here when imported, so the ingest knows no gulpio2 rule.
unset_settings: Callable[[EncodeOptions], EncodeOptions] = _as_given
