"""Type stubs of the Rust extension. The public API is in ``gulpio_rs.fileio``."""

import numpy as np
import numpy.typing as npt

__version__: str

class FrameView:
    """Zero-copy read-only view of one frame's JPEG bytes (buffer protocol)."""

    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...

class Chunk:
    @staticmethod
    def open(data_path: str, meta_path: str) -> tuple[Chunk, str | None]: ...
    @property
    def indexed(self) -> bool: ...
    @property
    def index_problem(self) -> str | None: ...
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
    def frame_views(
        self, video: int, frames: list[int] | None = None, check: bool = True
    ) -> list[memoryview]: ...
    def verify(
        self, decode: bool = False, threads: int = 0
    ) -> tuple[int, int, int, int, list[tuple[str, str | None, int | None, str]]]:
        """``(videos, frames, data bytes covered, frames' JPEG bytes, [(kind, video_id, frame,
        message), ...])``: every frame's CRC (and with ``decode`` a full decode) and the data
        CRC."""
    def decode(
        self,
        video: int,
        frames: list[int] | None = None,
        check: bool = True,
        colorspace: str | None = None,
        threads: int = 0,
    ) -> npt.NDArray[np.uint8] | list[npt.NDArray[np.uint8]]: ...
    def read(
        self,
        video: int,
        frames: list[int] | None = None,
        check: bool = True,
        colorspace: str | None = None,
        out: npt.NDArray[np.uint8] | None = None,
        threads: int = 0,
        crop: tuple[float, float, float, float] | None = None,
        size: tuple[int, int] | None = None,
        flip: bool = False,
        dct_scaling: bool = True,
    ) -> npt.NDArray[np.uint8]: ...

class NativeDirectory:
    def __init__(
        self,
        path: str,
        storage_options: list[tuple[str, str]] | None = None,
        io: str | None = None,
    ) -> None: ...
    def is_remote(self) -> bool: ...
    def chunk_sizes(self) -> list[tuple[int, int]]: ...
    def listed_numbers(self) -> list[int]: ...
    def upload_chunk(self, data_path: str, meta_path: str, number: int) -> None: ...
    def upload_file(self, local_path: str, name: str) -> None: ...
    def read_file(self, name: str) -> bytes | None: ...
    def __len__(self) -> int: ...
    def ids(self) -> list[str]: ...
    def lookup(self, id: str) -> int | None: ...
    def location(self, g: int) -> tuple[int, int]: ...
    def chunk_table(self) -> list[tuple[int, str, str, str, int, int]]: ...
    def chunk(self, pos: int) -> Chunk: ...
    def resolve(self, id: str) -> tuple[Chunk, int]: ...
    def problems(self) -> list[tuple[str, str, bool]]: ...

class NativeWriter:
    def __init__(self, data_path: str, meta_path: str, append: bool = False) -> None:
        """A crash-safe writer of one chunk: empty, or adding to it with ``append``."""
    def append(
        self, id: str, meta_json: str, frames: list[bytes | bytearray | memoryview]
    ) -> None: ...
    def publish(self) -> None: ...
    def close(self) -> None: ...
    def abort(self) -> None: ...
    def meta_text(self) -> str: ...
    def __len__(self) -> int: ...

def write_index(data_path: str, meta_path: str) -> int: ...
def read_batch(
    items: list[tuple[Chunk, int, list[int] | None]],
    check: bool = True,
    colorspace: str | None = None,
    threads: int = 0,
    out: npt.NDArray[np.uint8] | None = None,
    crops: list[tuple[float, float, float, float] | None] | None = None,
    size: tuple[int, int] | None = None,
    flips: list[bool] | None = None,
    dct_scaling: bool = True,
    sizes: list[tuple[int, int] | None] | None = None,
) -> npt.NDArray[np.uint8] | list[npt.NDArray[np.uint8]]: ...
def prefetch(items: list[tuple[Chunk, int, list[int] | None]]) -> None: ...
def decode_jpeg(
    data: bytes | bytearray | memoryview, colorspace: str | None = None
) -> npt.NDArray[np.uint8]: ...
def is_remote_url(path: str) -> bool: ...

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
    quality: int = 90,
    subsampling: str = "4:2:0",
    size: int | None = None,
    threads: int = 1,
    restart_rows: bool = False,
) -> list[bytes]:
    """JPEG bytes of every C-contiguous ``(H, W)``/``(H, W, 1|3)`` frame, resized first when
    ``size`` (shorter side) is given; libjpeg-turbo builds only (else ``RuntimeError``)."""

def pooled_bytes() -> int:
    """Bytes kept for reuse by freed output arrays of 16 MiB or more (at most two buffers,
    each freed after 30 s unused)."""

def release_pooled_buffers() -> None:
    """Frees the buffers kept for reuse now."""

#: ``"libjpeg-turbo"`` (built with the ``turbo`` feature, which ``pip install`` turns on when
#: nasm is there) or ``"zune-jpeg"``.
JPEG_BACKEND: str

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
