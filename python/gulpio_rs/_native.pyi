"""Type stubs of the Rust extension ``gulpio_rs._native`` (private: the public API is the
``gulpio_rs`` package, which wraps it)."""

from collections.abc import Sequence
from typing import Any, Literal, Protocol, Self, TypedDict, final

import numpy as np
import numpy.typing as npt

from gulpio_rs._choices import Colorspace, ManifestMode, Subsampling

#: A frame selection in gulpio2's forms, resolved by the core against the video's frame count.
_Selection = int | slice | Sequence[int] | npt.NDArray[np.integer[Any]] | None

class _ReadSpec(Protocol):
    """What the core reads of ``gulpio_rs._read_spec.ReadSpec`` (one object per read)."""

    @property
    def crops(self) -> list[tuple[float, float, float, float] | None] | None: ...
    @property
    def sizes(self) -> list[tuple[int, int] | None] | None: ...
    @property
    def flips(self) -> list[bool] | None: ...
    @property
    def colorspace(self) -> str | None: ...
    @property
    def threads(self) -> int: ...
    @property
    def dct_scaling(self) -> bool: ...
    @property
    def fast(self) -> bool: ...
    @property
    def check(self) -> bool: ...

__all__ = [
    "FrameView",
    "Chunk",
    "NativeDirectory",
    "NativeWriter",
    "JpegInfo",
    "write_index",
    "restore_meta",
    "rebuild_failures",
    "cut_tail",
    "open_for_reading",
    "open_for_writing",
    "read_batch",
    "decode_jpeg",
    "jpeg_info",
    "is_remote_url",
    "redact_url",
    "is_secret_option",
    "resize_frames",
    "reframe_frames",
    "encode_frames",
    "available_threads",
    "probe_segment",
    "decode_segment",
    "segment_stage_times",
    "pooled_bytes",
    "release_pooled_buffers",
    "feistel",
    "chunk_file_names",
    "parse_chunk_file_name",
    "gulpio_chunk_number",
    "parse_temp_name",
    "TEMP_PREFIX",
    "MANIFEST_DIR",
    "manifest_index",
    "manifest_create",
    "manifest_compact",
    "manifest_status",
    "manifest_prune",
    "__version__",
    "JPEG_BACKEND",
    "AV1_BACKEND",
    "MAX_THREADS",
    "MAX_READ_BYTES",
]

__version__: str

@final
class FrameView:
    """Zero-copy read-only view of one frame's JPEG bytes (buffer protocol)."""

    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...

@final
class Chunk:
    @staticmethod
    def open(data_path: str, meta_path: str) -> tuple[Chunk, str | None]: ...
    @property
    def indexed(self) -> bool: ...
    @property
    def index_problem(self) -> str | None: ...
    @property
    def meta_problem(self) -> str | None: ...
    @property
    def data_path(self) -> str: ...
    @property
    def published_len(self) -> int: ...
    def __len__(self) -> int: ...
    def ids(self) -> list[str]: ...
    def lookup(self, id: str) -> int | None: ...
    def id(self, video: int) -> str: ...
    def frame_count(self, video: int) -> int: ...
    def meta_data(self, video: int) -> str: ...
    def frame_info(self, video: int) -> list[tuple[int, int, int]]: ...
    def frame_shapes(self, video: int) -> list[tuple[int, int, int]]: ...
    def segments(self, video: int) -> tuple[str, int, list[tuple[int, int, int]]] | None:
        """``(codec, gop, [(first frame, frame count, stream bytes), ...])`` of a video
        stored as segments; None for one of JPEG frames."""
    def segment_streams(self, video: int) -> dict[str, Any] | None:
        """A video stored as segments, as stored (CRC-checked): ``codec``, ``width``,
        ``height``, ``gop``, ``matrix``, ``full_range`` and ``segments``, a list of
        ``(stream bytes, frame count)``: what ``NativeWriter.append_segments`` takes. None for
        a video of JPEG frames. In a chunk read without its index, the video's segments are
        rebuilt first (each decoded whole; ``FormatError`` when one fails)."""
    def frame_views(
        self, video: int, frames: _Selection = None, check: bool = True
    ) -> list[memoryview]: ...
    def select(self, video: int, frames: _Selection = None) -> list[int]:
        """The frame indices ``frames`` selects (every frame for None), negative ones as
        given."""
    def verify(
        self, decode: bool = False, threads: int = 0
    ) -> tuple[int, int, int, int, list[tuple[str, str | None, int | None, str]]]:
        """``(videos, frames, data bytes covered, frames' JPEG bytes, [(kind, video_id, frame,
        message), ...])``: every frame's CRC (and with ``decode`` a full decode) and the data
        CRC."""
    def decode(
        self, video: int, frames: _Selection, spec: _ReadSpec
    ) -> npt.NDArray[np.uint8] | list[npt.NDArray[np.uint8]]:
        """Each frame at its own size and channels (gulpio2's list); ``spec`` may not crop,
        resize or flip."""
    def read(
        self,
        video: int,
        frames: _Selection,
        spec: _ReadSpec,
        out: npt.NDArray[np.uint8] | None = None,
    ) -> npt.NDArray[np.uint8]: ...

@final
class NativeDirectory:
    def __new__(
        cls,
        path: str,
        storage_options: list[tuple[str, str]] | None = None,
        io: str | None = None,
        manifest: ManifestMode | None = None,
        pin: bytes | None = None,
    ) -> Self: ...
    def pin(self) -> bytes | None:
        """The state this open saw, as bytes a copy opens again (``pin=``); None when it was
        opened by listing."""
    def is_remote(self) -> bool: ...
    def opened(self) -> _Opened:
        """How the directory was opened: through the manifest (its version, base, tail,
        pending operations, changed chunks) or by listing (why)."""
    def chunk_sizes(self) -> list[tuple[int, int]]: ...
    def num_frames(self, id: str) -> int:
        """The frame count of the video ``id`` (``KeyError`` when unknown): through a manifest
        from its video row, without opening the chunk."""
    def is_indexed(self, pos: int) -> bool:
        """Whether chunk position ``pos`` reads through its binary index (a chunk not read
        yet is opened for the answer and closed again)."""
    def listed_numbers(self) -> list[int]: ...
    def next_chunk_number(self) -> int:
        """The number a new chunk claims first: after the largest the manifest's state knows
        (no request), else after every data or meta file listed now."""
    def file_names(self) -> list[str]:
        """The names of the files directly in the dataset (its folder or prefix), listed now."""
    def upload_chunk(
        self, data_path: str, meta_path: str, number: int, first_free: bool = False
    ) -> int:
        """Publishes a staged chunk (index first: the claim of the number; the ``.gmeta``
        last: the commit) as ``number``, or with ``first_free`` as the first number from
        ``number`` on that no object uses; returns the number taken."""
    def upload_file(self, local_path: str, name: str) -> None: ...
    def read_file(self, name: str) -> bytes | None: ...
    def __len__(self) -> int: ...
    def ids(self, start: int = 0, end: int | None = None) -> list[str]: ...
    def lookup(self, id: str) -> int | None: ...
    def location(self, g: int) -> tuple[int, int]: ...
    def chunk_count(self) -> int: ...
    def chunk_table(
        self, start: int = 0, end: int | None = None
    ) -> list[tuple[int, str, str, str, int, int]]: ...
    def chunk(self, pos: int) -> Chunk: ...
    def resolve(self, id: str) -> tuple[Chunk, int]: ...
    def read_batch(
        self,
        ids: list[str],
        frames: Sequence[_Selection],
        spec: _ReadSpec,
        out: npt.NDArray[np.uint8] | None = None,
    ) -> npt.NDArray[np.uint8] | list[npt.NDArray[np.uint8]]:
        """The videos ``ids`` (``frames``: one selection per id) decoded in one crossing."""
    def prefetch(self, ids: list[str], frames: Sequence[_Selection]) -> None: ...
    def select(
        self, ids: list[str], frames: Sequence[_Selection]
    ) -> list[tuple[Chunk, int, list[int] | None]]: ...
    def frame_shape(self, id: str, frame: int) -> tuple[int, int, int]: ...
    def problems(self) -> list[tuple[str, str, bool, str | None, int | None]]: ...
    def video_shapes(
        self, ids: list[str] | None = None, headers: bool = False
    ) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint16]]: ...

@final
class NativeWriter:
    def __new__(
        cls, data_path: str, meta_path: str, append: bool = False, new: bool = False
    ) -> Self:
        """A crash-safe writer of one chunk: empty, or adding to it with ``append``; with
        ``new``, published under the first free chunk number from this one on. Holds the
        chunk's writer lock (``WriteConflictError`` if another writer has it)."""
    @property
    def paths(self) -> tuple[str, str]:
        """``(data, meta)`` where the chunk is published (final after the first
        publication of a new chunk), also after ``close``."""
    def append(
        self, id: str, meta_json: str, frames: Sequence[bytes | bytearray | memoryview]
    ) -> None: ...
    def append_segments(
        self,
        id: str,
        meta_json: str,
        segments: Sequence[tuple[bytes, int]],
        *,
        width: int,
        height: int,
        gop: int,
        codec: Literal["av1"] = "av1",
        matrix: int = 6,
        full_range: bool = False,
    ) -> None:
        """Appends a video stored as AV1 segments (docs/FORMAT.md §6): ``segments`` are
        ``(stream bytes, frame count)`` pairs in frame order, as
        :func:`gulpio_rs.segments.encode_segments` returns them."""
    def publish(self) -> None: ...
    def close(self) -> None: ...
    def abort(self) -> None: ...
    def meta_text(self) -> str: ...
    def __len__(self) -> int: ...

def write_index(data_path: str, meta_path: str) -> int: ...
def feistel(
    positions: npt.NDArray[np.uint64], n: int, seed: int, epoch: int, inverse: bool = False
) -> npt.NDArray[np.uint64]:
    """Elements ``positions`` of the samplers' permutation of ``range(n)`` keyed by ``(seed,
    epoch)`` (``inverse``: where each sits in it); see ``gulpio_rs.torch.shuffled_positions``."""

def restore_meta(data_path: str, meta_path: str) -> bool: ...
def rebuild_failures(data_path: str, meta_path: str) -> list[tuple[str, int | None, str]]:
    """``[(video_id, frame, message), ...]``: the chunk's videos stored as segments whose
    index entries cannot be rebuilt from its ``.gulp`` and ``.gmeta`` (each segment is
    decoded whole); ``frame`` is the first frame of the segment that failed."""

def cut_tail(data_path: str, meta_path: str) -> int:
    """Cuts a chunk's unpublished tail (never through a symlink); returns the bytes cut."""

def open_for_reading(path: str) -> int:
    """A descriptor of ``path`` for reading: a regular file within its kind's size limit
    (``FormatError`` otherwise, before anything is read; never blocks on a FIFO)."""

def open_for_writing(path: str, truncate: bool = False) -> int:
    """A descriptor of ``path`` for writing (created if missing): never through a symlink,
    only a regular file with one hard link (``UnsafeFileError`` otherwise)."""

def read_batch(
    items: Sequence[tuple[Chunk, int, _Selection]],
    spec: _ReadSpec,
    out: npt.NDArray[np.uint8] | None = None,
) -> npt.NDArray[np.uint8] | list[npt.NDArray[np.uint8]]: ...
def decode_jpeg(
    data: bytes | bytearray | memoryview, colorspace: Colorspace | None = None
) -> npt.NDArray[np.uint8]: ...
def is_remote_url(path: str) -> bool: ...
def redact_url(text: str) -> str:
    """``text`` with the user info and secret-looking query values of every URL in it
    replaced by ``***`` (the one redaction rule; ``abfs[s]://container@`` is kept)."""

def is_secret_option(key: str) -> bool:
    """True for ``storage_options`` keys whose values are secrets."""

@final
class JpegInfo:
    """What a JPEG's frame header (SOF) says, read without decoding."""

    @property
    def width(self) -> int: ...
    @property
    def height(self) -> int: ...
    @property
    def components(self) -> int: ...
    @property
    def precision(self) -> int: ...
    @property
    def sof(self) -> int:
        """The SOF marker byte, ``0xC0``..``0xCF``: the coding process."""
    @property
    def progressive(self) -> bool: ...
    @property
    def arithmetic(self) -> bool: ...
    @property
    def lossless(self) -> bool: ...

def jpeg_info(data: bytes) -> JpegInfo:
    """The frame header of a JPEG; :class:`~gulpio_rs.errors.DecodeError` if there is none."""

def reframe_frames(
    frames: list[npt.NDArray[np.uint8]],
    crop: tuple[float, float, float, float] | None = None,
    size: tuple[int, int] | None = None,
    flip: bool = False,
) -> list[npt.NDArray[np.uint8]]: ...
def resize_frames(
    frames: list[npt.NDArray[np.uint8]], size: int, threads: int = 1
) -> list[npt.NDArray[np.uint8]]:
    """Shorter side of every C-contiguous ``(H, W)``/``(H, W, 1|3)`` frame to ``size``."""

def encode_frames(
    frames: list[npt.NDArray[np.uint8]],
    quality: int | None = None,
    subsampling: Subsampling | None = None,
    size: int | None = None,
    threads: int = 1,
    restart_rows: bool = False,
) -> list[bytes]:
    """JPEG bytes of every C-contiguous ``(H, W)``/``(H, W, 1|3)`` frame, resized first when
    ``size`` (shorter side) is given; ``quality``/``subsampling`` left out: those of
    ``gulpio_rs._encode_options.DEFAULT``. libjpeg-turbo builds only (else ``RuntimeError``)."""

def available_threads() -> int:
    """The CPUs this process may run on (its affinity mask and cgroup CPU quota): the threads
    of a pool started with ``threads=0``."""

def pooled_bytes() -> int:
    """Bytes kept for reuse by freed output arrays of 16 MiB or more (at most two buffers,
    each freed after 30 s unused)."""

def release_pooled_buffers() -> None:
    """Frees the buffers kept for reuse now."""

#: ``"libjpeg-turbo"`` (built with the ``turbo`` feature, which ``pip install`` turns on when
#: nasm is there) or ``"zune-jpeg"``.
JPEG_BACKEND: str
#: The AV1 decoder of video segments: ``"libdav1d"`` (built with the ``dav1d`` feature, which
#: ``pip install`` turns on with ``turbo``) or ``"rav1d"`` (its Rust port, everywhere else).
AV1_BACKEND: Literal["libdav1d", "rav1d"]
#: The most threads (or worker processes) any ``threads=`` / ``num_workers=`` accepts.
MAX_THREADS: int
#: The most bytes one read may decode into (``read``, ``read_batch``, ``gd[id]``).
MAX_READ_BYTES: int

# File naming (Rust ``format::paths``): the one definition of chunk and temporary-file names.

#: Prefix of every temporary file a chunk writer creates (``.gulpio-tmp.``).
TEMP_PREFIX: str

def chunk_file_names(number: int) -> tuple[str, str, str]:
    """``(data, meta, index)`` file names of chunk ``number``: ``data_{k}.gulp``,
    ``meta_{k}.gmeta``, ``data_{k}.gidx``."""

def parse_chunk_file_name(name: str) -> tuple[str, int] | None:
    """``(kind, number)`` of a file named as this package names chunk files (kind ``"data"``,
    ``"meta"`` or ``"index"``), else ``None``."""

def gulpio_chunk_number(name: str) -> int | None:
    """The chunk number a reader gives a file gulpio's globs list (``data*.gulp``,
    ``meta*.gmeta``): the first run of digits in the name; ``None`` for other names."""

def parse_temp_name(name: str) -> tuple[str, int] | None:
    """``(target file name, pid of the writer)`` if ``name`` is a chunk writer's temporary
    file, else ``None``."""

# The dataset manifest (Rust ``manifest``, docs/FORMAT.md §7), local datasets.

#: The manifest's folder inside a dataset (``_gulpio``).
MANIFEST_DIR: str

class _Opened(TypedDict, total=False):
    how: Literal["manifest", "listing"]
    version: int
    base_version: int
    tail: int
    pending: int
    changed: int
    reason: str
    warned: bool

class _IndexReport(TypedDict):
    created: bool
    added: int
    replaced: int
    removed: int
    aborted: int
    version: int
    chunks: int
    videos: int

class _ManifestStatus(TypedDict):
    version: int
    base_version: int
    base: Literal["snapshot", "genesis"]
    tail: int
    chunks: int
    videos: int
    pending: list[tuple[int, int]]
    unrecorded: list[int]
    mismatched: list[int]

def manifest_index(
    path: str,
    abort_pending: bool = False,
    storage_options: list[tuple[str, str]] | None = None,
) -> _IndexReport:
    """Records every chunk of the dataset at ``path`` (a folder or a dataset URL) in its
    manifest (creating it when missing: the genesis commit and ``LATEST``), commits what it
    did not record, and writes a snapshot. Every local chunk needs its index; a chunk of a
    dataset URL without one (gulpio2's) is recorded from its ``.gmeta`` and read through it. With
    ``abort_pending``, operations of writers that died before their commit point, whose chunk
    has no ``.gmeta``, are aborted."""

def manifest_create(path: str, storage_options: list[tuple[str, str]] | None = None) -> bool:
    """Gives the dataset at ``path`` (a folder or a dataset URL) an empty manifest (the
    genesis commit and ``LATEST``) when it has neither a manifest nor any chunk file; True
    when this call created it."""

def manifest_prune(
    path: str,
    keep_seconds: float | None = None,
    storage_options: list[tuple[str, str]] | None = None,
) -> tuple[int, int, int]:
    """Deletes what no reader of the manifest needs any more (docs/FORMAT.md §7.6,
    "Clean-up"): snapshots replaced more than ``keep_seconds`` ago (default: a week, what every
    compaction keeps) and the commits only they needed; ``(snapshots, commits, bodies)``
    deleted."""

def manifest_compact(path: str, storage_options: list[tuple[str, str]] | None = None) -> int | None:
    """Writes a snapshot of the current state of the manifest of the dataset at ``path`` (a
    folder or a dataset URL) and points ``LATEST`` at it, when commits follow its base; the
    version compacted, or ``None``."""

def manifest_status(path: str) -> _ManifestStatus | None:
    """The manifest's state compared with a listing of the local dataset at ``path``, or
    ``None`` when it has no manifest. ``unrecorded``: chunks listed but not recorded;
    ``mismatched``: records whose chunk is gone or whose files differ; ``pending``:
    ``(chunk, version)`` of operations that have not taken effect."""

def probe_segment(data: bytes, frames: int) -> tuple[int, int, str, bool]:
    """Decodes a whole AV1 video segment that must hold ``frames`` frames, keeping no pixels:
    ``(width, height, matrix, full_range)`` (matrix ``"bt601"`` or ``"bt709"``).
    :class:`~gulpio_rs.errors.DecodeError` when it is not such a segment.

    For checking an encoder's fresh output (ingest), not for reading stored segments: no CRC
    is checked, so it carries the risks that :func:`decode_segment` lists for ``crc=None``."""

def decode_segment(
    data: bytes,
    width: int,
    height: int,
    frames: int,
    wanted: list[int] | None = None,
    *,
    crc: int | None,
) -> npt.NDArray[np.uint8]:
    """Decodes the frames ``wanted`` (increasing indices within the segment; all by default)
    of an AV1 segment declared ``width`` x ``height`` with ``frames`` frames: an
    ``(N, height, width, 3)`` RGB array, converted as FFmpeg converts the stream.
    :class:`~gulpio_rs.errors.DecodeError` on a segment that does not decode as declared.

    ``crc`` is required: the segment's recorded CRC-32 (``zlib.crc32`` of ``data``, as the
    index stores it; :attr:`gulpio_rs.segments.Segment.crc`), checked before anything is
    decoded, a mismatch raising :class:`~gulpio_rs.errors.CorruptDataError`. ``crc=None``
    decodes ``data`` unchecked, which risks: wrong pixels without an error (AV1 carries no
    checksum, so most damage decodes to garbage that looks like a picture), and, should the
    decoder (rav1d) still panic on some damaged input, the end of the process rather than an
    exception (the known case is worked around: docs/DECISIONS.md, "Video segments")."""

def segment_stage_times(reset: bool = False) -> dict[str, float | int]:
    """Where segment reads spent their time in this process since the last reset, summed
    over threads: seconds for ``setup``, ``decode``, ``convert`` and ``reframe``, and the
    counts ``segments``, ``pictures`` (decoded) and ``returned`` (asked for)."""
