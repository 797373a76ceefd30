"""``GulpDirectory``: a dataset directory read through the Rust core, with gulpio2's API
(lazy ``merged_meta_dict``, ``chunk_lookup``, ...) and the stacked, parallel ``read`` /
``read_batch`` paths."""

from __future__ import annotations

import errno
import json
import operator
import os
import warnings
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from glob import glob
from itertools import repeat
from typing import Any, Literal, Self, TypedDict, overload

import numpy as np
import numpy.typing as npt

from . import _manifest, _native
from ._choices import Colorspace, Io, ManifestMode
from ._directory_chunks import DirectoryChunk, RemoteNewChunk
from ._metadict import LazyMetaDict
from ._names import chunk_paths
from ._read_spec import ReadSpec, crop_box, out_size, per_video_frames, read_spec
from ._reading import (
    Decoder,
    extract_input_for_getitem,
    first_meta,
    id_str,
    read_frames_of,
    stack_frames,
    user_decoded,
    with_fallback,
)
from ._storage import StorageOptions, storage_options_list
from ._times import VideoTimes, find_times
from .chunk import GulpChunk, new_chunk
from .errors import (
    BrokenChunkWarning,
    EmptyDirectoryWarning,
    ManifestWarning,
    UnsupportedJpegError,
)


class Problem(TypedDict):
    """One entry of ``GulpDirectory.problems``."""

    path: str
    message: str
    chunk_skipped: bool
    video_id: str | None
    frame: int | None


def problem_text(problem: Problem) -> str:
    """One line for a ``GulpDirectory.problems`` entry, starting with the file it is about."""
    message = problem["message"]
    return message if message.startswith(problem["path"]) else f"{problem['path']}: {message}"


class GulpDirectory:
    """A directory of gulp chunks, read through the Rust core.

    A dataset with a manifest (``gulpio index`` makes one; docs/FORMAT.md §7) opens through it:
    a mapped, paged table of every chunk and video, so opening costs the same for 100 videos or
    10 million and holds nothing per video; each chunk's files are checked against the manifest
    before its first read. ``manifest="off"`` lists the chunks instead, ``"require"`` raises
    ``FormatError`` when the manifest cannot be used (``"auto"``, the default, then lists with a
    :class:`ManifestWarning`), ``"verify"`` also lists and compares. :attr:`opened` says how the
    directory was opened. Without a manifest, opening reads only the chunks' binary indexes (no
    JSON), so it takes milliseconds for 100,000 videos; chunks without an index (written by
    gulpio/gulpio2) are parsed once.

    ``gd[id]``, ``gd[id, slice]``, ``gd[id, [0, 2]]``, ``gd[id, ndarray]`` and ``gd[id, 3]``
    return ``(frames, meta)`` as gulpio2 does. Every frame's CRC32 is verified on read unless
    ``check_data=False``. Chunks that cannot be read (a data file without meta, a damaged
    ``.gmeta``) are reported as :class:`BrokenChunkWarning` and in :attr:`problems` (dicts of
    ``path``, ``message``, ``chunk_skipped`` and the ``video_id`` / ``frame`` the message
    names, else ``None``); the rest stays readable, unless ``strict=True``, which raises a
    :class:`FormatError` with the same attributes instead.

    ``iter(gd)`` yields chunks (gulpio2's meaning); ``gd.keys()`` iterates video ids.

    Decoding: the built-in decoder runs frames in parallel with the GIL released.
    ``jpeg_decoder=callable`` (gulpio2's option) replaces it for every frame;
    ``fallback_decoder=callable`` is used only for frames the built-in decoder does not support
    (arithmetic coding, 12-bit). Both are called with the JPEG ``bytes``.

    Local ``.gulp`` files are read with positional reads (``io="pread"``, the default: a file
    cut short under a running reader raises ``FormatError`` naming the frame); ``io="mmap"``
    maps them instead (zero-copy ``frame_bytes``, but a file cut under the mapping is a
    SIGBUS). See docs/REMOTE.md.

    Dataset URLs (``s3://``, ``gs://``, ``az://``, ``http(s)://``) are read with
    ``storage_options`` (docs/REMOTE.md). ``cache_dir=`` (or ``$GULPIO_CACHE_DIR``) keeps the
    fetched bytes in 4 MiB blocks on local disk, bounded by ``cache_size`` (bytes or
    ``"20GB"``; default 20 GB, or ``$GULPIO_CACHE_SIZE``), least recently used first out;
    every frame read from it is CRC-checked, and processes may share one cache folder.

    ``manifest_state=`` (bytes from :attr:`manifest_state` of an earlier open, in any process)
    opens the state that open saw: the same videos at the same positions, whatever writers
    committed since, or :class:`~gulpio_rs.errors.StaleIndexError` when it can no longer be
    read (e.g. torchrun ranks that must agree on one length: broadcast rank 0's). Pickling and
    :meth:`reopen` carry it by themselves (DataLoader workers, docs/FORMAT.md §7.5).
    """

    def __init__(
        self,
        output_dir: str | os.PathLike[str],
        jpeg_decoder: Decoder | None = None,
        *,
        check_data: bool = True,
        colorspace: Colorspace | None = None,
        fallback_decoder: Decoder | None = None,
        strict: bool = False,
        storage_options: Mapping[str, Any] | None = None,
        io: Io | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        cache_size: int | str | None = None,
        manifest: ManifestMode = "auto",
        manifest_state: bytes | None = None,
    ) -> None:
        self.output_dir = output_dir  # as given (gulpio2 code compares it with its own Path)
        self._path = os.fsdecode(output_dir)
        self.jpeg_decoder = jpeg_decoder
        self.check_data = check_data
        self.colorspace = colorspace
        self.fallback_decoder = fallback_decoder
        self._storage_options = storage_options_list(storage_options)
        if cache_dir is not None or cache_size is not None:
            if not _native.is_remote_url(self._path):
                raise ValueError(
                    f"cache_dir/cache_size apply to dataset URLs (s3://, gs://, ...), not to the "
                    f"local directory {self._path!r}"
                )
            # Kept with the other options, so pickled copies (DataLoader workers) share it.
            extra = {"cache_dir": os.fspath(cache_dir)} if cache_dir is not None else {}
            if cache_size is not None:
                extra["cache_size"] = str(cache_size)
            self._storage_options = StorageOptions({**(self._storage_options or {}), **extra})
        self._io = io
        self._manifest: ManifestMode = manifest
        try:
            self._dir: _native.NativeDirectory | None = _native.NativeDirectory(
                self._path,
                None if self._storage_options is None else self._storage_options.pairs(),
                io,
                manifest,
                None if manifest_state is None else bytes(manifest_state),
            )
        except FileNotFoundError:
            if _native.is_remote_url(self._path) or os.path.isdir(self._path):
                raise
            raise FileNotFoundError(
                errno.ENOENT,
                "no gulp directory here: the folder does not exist (a gulp directory holds "
                "data_*.gulp + meta_*.gmeta chunk files)",
                self._path,
            ) from None
        # Built on first use (the properties below): through a manifest, a dataset of 100k
        # chunks holds nothing per chunk until asked.
        self._table_rows: list[tuple[int, str, str, str, int, int]] | None = None
        self._chunk_objs: OrderedDict[int, GulpChunk] | None = None
        self._merged: LazyMetaDict | None = None
        self._all_meta: list[dict[str, Any]] | None = None
        self._chunk_lookup: dict[str, int] | None = None
        self.problems: list[Problem] = [
            {"path": p, "message": m, "chunk_skipped": skipped, "video_id": v, "frame": k}
            for p, m, skipped, v, k in self._dir.problems()
        ]
        for problem in self.problems:
            if strict:
                from .errors import FormatError

                err = FormatError(problem_text(problem))
                err.path, err.video_id = problem["path"], problem["video_id"]
                err.frame = problem["frame"]
                raise err
            warnings.warn(problem_text(problem), BrokenChunkWarning, stacklevel=2)
        how = self._dir.opened()
        if how["how"] == "listing" and how["warned"]:
            warnings.warn(
                f"{_native.redact_url(self._path)}: {how['reason']}; opened by listing every "
                "chunk instead",
                ManifestWarning,
                stacklevel=2,
            )
        if self._dir.chunk_count() == 0 and not self.problems:
            warnings.warn(
                f"{self._path}: no gulp chunks here (data_*.gulp + meta_*.gmeta), so the "
                "directory is empty (len 0); fine before writing into it, else check the path",
                EmptyDirectoryWarning,
                stacklevel=2,
            )

    # -- lookups -----------------------------------------------------------------------------
    def _handle(self) -> _native.NativeDirectory:
        if self._dir is None:
            raise ValueError(f"GulpDirectory {self._path!r} is closed")
        return self._dir

    def _resolve(self, id_: str) -> tuple[_native.Chunk, int]:
        # KeyError for unknown ids; warns once if the chunk's index had to be ignored.
        return self._handle().resolve(id_)

    def _chunk(self, pos: int) -> _native.Chunk:
        return self._handle().chunk(pos)

    # -- low-level access for tools (the gulpio command line, ingest, gulpio_rs.ray) ----------
    @property
    def path(self) -> str:
        """The dataset's folder or URL as a string (:attr:`output_dir` is as given)."""
        return self._path

    @property
    def native(self) -> _native.NativeDirectory:
        """The Rust directory this one reads through (``_native.NativeDirectory``: listing,
        ids, chunk readers, and for a dataset URL ``upload_chunk`` / ``upload_file``). For
        gulpio_rs's own packages (ingest uploads chunks through it); like :meth:`native_chunk`,
        its methods follow the extension's stub (``_native.pyi``), not the gulpio2 API.
        Raises ``ValueError`` once the directory is closed."""
        return self._handle()

    def chunk_table(self) -> list[tuple[int, str, str, str, int, int]]:
        """``(number, data file, meta file, index file, first position, videos)`` for each
        readable chunk, in position order: chunk-number order when opened by listing; through
        a manifest, its state's order (docs/FORMAT.md §7.4), which is chunk-number order once
        ``gulpio index`` has compacted it."""
        return list(self._table)

    @property
    def _table(self) -> list[tuple[int, str, str, str, int, int]]:
        if self._table_rows is None:
            self._table_rows = self._handle().chunk_table()
        return self._table_rows

    @property
    def opened(self) -> dict[str, Any]:
        """How the directory was opened: ``{"how": "manifest", "version", "base_version",
        "tail", "pending", "changed"}`` (through the manifest's state at ``version``: commits
        after its base, operations not yet in effect, chunks another tool changed) or
        ``{"how": "listing", "reason", "warned"}`` (why not through a manifest; ``warned`` when
        one exists but could not be used)."""
        return dict(self._handle().opened())

    @property
    def manifest(self) -> ManifestMode:
        """The ``manifest=`` given (:attr:`opened` says what it led to)."""
        return self._manifest

    def chunk_sizes(self) -> list[tuple[int, int]]:
        """``(data bytes, meta bytes)`` of each row of :meth:`chunk_table` (from the listing for
        remote datasets)."""
        return self._handle().chunk_sizes()

    def native_chunk(self, pos: int) -> _native.Chunk:
        """The Rust reader (``_native.Chunk``) of the ``pos``-th row of :meth:`chunk_table`:
        frame shapes, raw metadata, verification."""
        return self._chunk(pos)

    def __len__(self) -> int:
        return len(self._handle())

    def __contains__(self, id_: object) -> bool:
        return self._handle().lookup(id_str(id_)) is not None

    def keys(self) -> list[str]:
        """All video ids, in position order: chunk by chunk, in chunk-number order when opened
        by listing, in the manifest's state order through one (docs/FORMAT.md §7.4). Builds
        the whole list: at millions of videos prefer ``len``, ``in`` and lookups by id."""
        return self._handle().ids()

    ids = property(keys, doc="All video ids (a list).")

    def id_at(self, position: int) -> str:
        """The id of the video at ``position`` in :meth:`keys` order (negative counts from the
        end, as for a list), without building the list: what samplers and datasets index by.
        ``IndexError`` out of range."""
        n = len(self)
        index = operator.index(position)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(f"video position {position} out of range ({n:,} videos)")
        return self._handle().ids(index, index + 1)[0]

    def num_frames(self, id_: object) -> int:
        """Number of frames of a video, without reading frames (through a manifest, from its
        record, without opening the video's chunk). ``KeyError`` for an unknown id."""
        return self._handle().num_frames(id_str(id_))

    def frame_shape(self, id_: object, frame: int = 0) -> tuple[int, int, int]:
        """``(height, width, channels)`` of one frame as a read decodes it (channels 1 for a
        gray frame, else 3): from the index, or the frame's JPEG header for chunks without
        one. ``IndexError`` for a frame out of range."""
        return self._handle().frame_shape(id_str(id_), frame)

    def segment_starts(self, id_: object) -> list[int] | None:
        """The first frame of each AV1 segment of a video stored as segments (``encoding=
        "video"``; ascending, from 0): a read decodes from the start of the segment holding
        its first frame, so a clip starting at one of these decodes no frame it does not
        return. ``None`` for a video of JPEG frames (each decodes on its own). From the index,
        without reading frames."""
        chunk, video = self._resolve(id_str(id_))
        layout = chunk.segments(video)
        return None if layout is None else [first for first, _count, _bytes in layout[2]]

    def frame_shapes(self, id_: object) -> list[tuple[int, int, int]]:
        """``(height, width, channels)`` per frame from the index (zeros for legacy chunks)."""
        chunk, video = self._resolve(id_str(id_))
        return chunk.frame_shapes(video)

    def video_shapes(
        self, ids: Iterable[object] | None = None, *, headers: bool = False
    ) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint16]]:
        """``(frame_counts, shapes)`` of many videos at once, from the binary indexes alone (no
        frame read, no ``.gmeta`` parsed): per video of ``ids`` (in that order; default every
        video, in :meth:`keys` order) its frame count (``(N,)`` uint32) and its first frame's
        ``(height, width, channels)`` (``(N, 3)`` uint16). Zeros where the index does not say:
        videos without frames, and chunks without an index (written by gulpio/gulpio2; their
        frame sizes are in the JPEG headers): ``headers=True`` reads those videos' first
        JPEG header instead (channels 1 for gray, else 3, as a read decodes them). Opens each
        chunk's index once (one request per chunk of a remote dataset). ``KeyError`` for an
        unknown id."""
        listed = None if ids is None else [id_str(i) for i in ids]
        return self._handle().video_shapes(listed, headers)

    def meta(self, id_: object) -> dict[str, Any]:
        """A video's metadata (``meta_data[0]``), without reading frames."""
        chunk, video = self._resolve(id_str(id_))
        return first_meta(chunk.meta_data(video))

    def timestamps(self, id_: object) -> VideoTimes | None:
        """A video's frame times, without reading frames: a :class:`VideoTimes`
        ``(timestamps, fps, end)`` with ``timestamps`` a float64 array of seconds, one per
        frame (the source's presentation times, variable frame rates as they were; at a rate
        resampled by ``frame_rate=`` at ingest, the instant each stored frame stands for),
        ``fps`` the source video's average frame rate (``None`` if unknown) and ``end`` when
        the last frame stops being shown.

        ``None`` when the video has none: it was not ingested from a video file by gulpio-rs
        (frame folders, images, gulpio/gulpio2 datasets, an older gulpio-rs), or frames were
        appended to it afterwards. Stored in the ``.gmeta`` (docs/FORMAT.md §2.1); what
        ``gd[id][1]`` and :meth:`meta` return does not change. ``KeyError`` for an unknown
        id; :class:`~gulpio_rs.errors.FormatError` when the stored times are malformed.
        """
        id_ = id_str(id_)
        chunk, video = self._resolve(id_)
        return find_times(
            json.loads(chunk.meta_data(video) or "[]"),
            chunk.frame_count(video),
            where=chunk.data_path,
            video_id=id_,
        )

    def __getitem__(self, element: object) -> tuple[list[np.ndarray], dict[str, Any]]:
        id_, selection = extract_input_for_getitem(element)
        chunk, video = self._resolve(id_)
        frames = read_frames_of(
            chunk,
            video,
            selection,
            self.jpeg_decoder,
            self.check_data,
            self.colorspace,
            self.fallback_decoder,
        )
        return frames, first_meta(chunk.meta_data(video))

    def read(
        self,
        id_: object,
        frames: Any = None,
        *,
        crop: Sequence[float] | None = None,
        size: int | Sequence[int] | None = None,
        flip: bool = False,
        out: np.ndarray | None = None,
        colorspace: Colorspace | None = None,
        threads: int | None = None,
        dct_scaling: bool = True,
        fast_decode: bool = False,
    ) -> np.ndarray:
        """Decode frames of one video into one ``(T, H, W, C)`` uint8 array.

        ``frames`` is ``None`` (all), a slice, a list/array of indices or an int. ``C`` is 3
        (RGB) unless every frame is grayscale (1); ``colorspace="RGB"`` or ``"GRAY"`` forces
        it. ``out=`` decodes into a C-contiguous uint8 array of the right shape, without an
        extra copy. Decoding runs on ``threads`` threads (default: ``GULPIO_NUM_THREADS``, else
        the usable cores shared among DataLoader workers and torchrun's local ranks) with the
        GIL released. Frames of different sizes raise ``ValueError`` (``gd[id]`` returns them
        as a list).

        ``crop=(top, left, height, width)`` (stored-frame pixels, fractions allowed) and
        ``size=(height, width)`` (or an int for a square) decode only that box of every frame
        and resize it (antialiased bilinear) in the same pass: the result is ``(T, height,
        width, C)``; ``size`` alone resizes whole frames, ``crop`` alone keeps the box's size.
        ``flip=True`` mirrors the result left to right. Frames are decoded at the smallest DCT
        scale (1/8 steps) that leaves at least ``size`` pixels, then resized; ``dct_scaling=
        False`` decodes at full scale (slower, closest to "decode, crop, resize").
        See docs/FUSED.md. ``fast_decode=True`` uses libjpeg-turbo's fast IDCT and chroma
        upsampling (gulpio2's settings, about 10% less work per frame; 43 dB PSNR against the
        default accurate decode on q90 frames); the zune-jpeg build always decodes accurately.
        """
        chunk, video = self._resolve(id_str(id_))
        spec = read_spec(
            1,
            # One video: one box and one size, never a list of them.
            crop=None if crop is None else [crop_box(crop)],
            size=None if size is None else [out_size(size)],
            flip=bool(flip),
            colorspace=colorspace or self.colorspace,
            threads=threads,
            dct_scaling=dct_scaling,
            fast_decode=fast_decode,
            check=self.check_data,
            remote=self.is_remote,
        )
        if self.jpeg_decoder is None:
            try:
                return chunk.read(video, frames, spec, out)
            except UnsupportedJpegError:
                if self.fallback_decoder is None:
                    raise
        selection = chunk.select(video, frames)
        stacked = stack_frames(self._decode_slowly(chunk, video, selection, spec), id_str(id_))
        stacked = _reframed(stacked, spec, 0, chunk, video)
        if out is not None:
            if out.shape != stacked.shape or out.dtype != np.uint8:
                raise ValueError(f"out has shape {out.shape}, the frames need {stacked.shape}")
            out[...] = stacked
            return out
        return stacked

    def _decode_slowly(
        self, chunk: _native.Chunk, video: int, selection: list[int] | None, spec: ReadSpec
    ) -> list[np.ndarray]:
        """The frame-by-frame path: a user ``jpeg_decoder``, or the fallback decoder."""
        if self.jpeg_decoder is not None:
            return user_decoded(chunk, video, selection, self.check_data, self.jpeg_decoder)
        fallback = self.fallback_decoder
        assert fallback is not None  # the reads re-raise without one instead of coming here
        return with_fallback(chunk, video, selection, self.check_data, spec.colorspace, fallback)

    def prefetch(self, ids: Iterable[object], frames: Any = None) -> None:
        """Start fetching the bytes of a coming :meth:`read_batch` (same arguments) and return
        at once: when the read comes, its bytes are there or on their way, so the round trip
        to the object store overlaps whatever runs in between (decoding the batch before).

        For remote datasets (a no-op for local ones, which the page cache serves). What is
        prefetched but never read is dropped after 30 s; at most ``readahead`` bytes
        (``storage_options``, default 256 MiB; ``"0"`` turns it off) wait at once. Bytes
        taken from a read-ahead are CRC-checked like any others. The PyTorch datasets call
        this for the next batch when the sampler's order is known (docs/REMOTE.md).
        """
        names = [id_str(i) for i in ids]
        selections = per_video_frames(frames, len(names))
        if self.is_remote:
            self._handle().prefetch(names, selections)
        else:
            # Nothing to fetch (the page cache serves local reads); unknown ids and frames out
            # of range are errors all the same, as in the read.
            self._handle().select(names, selections)

    @overload
    def read_batch(
        self,
        ids: Iterable[object],
        frames: Any = None,
        *,
        crop: Sequence[float] | Sequence[Sequence[float] | None] | None = None,
        size: int | Sequence[int] | Sequence[Sequence[int] | None] | None = None,
        flip: bool | Sequence[bool] = False,
        out: np.ndarray | None = None,
        colorspace: Colorspace | None = None,
        threads: int | None = None,
        dct_scaling: bool = True,
        stack: Literal[True],
        fast_decode: bool = False,
    ) -> np.ndarray: ...
    @overload
    def read_batch(
        self,
        ids: Iterable[object],
        frames: Any = None,
        *,
        crop: Sequence[float] | Sequence[Sequence[float] | None] | None = None,
        size: int | Sequence[int] | Sequence[Sequence[int] | None] | None = None,
        flip: bool | Sequence[bool] = False,
        out: np.ndarray | None = None,
        colorspace: Colorspace | None = None,
        threads: int | None = None,
        dct_scaling: bool = True,
        stack: Literal[False],
        fast_decode: bool = False,
    ) -> list[np.ndarray]: ...
    @overload
    def read_batch(
        self,
        ids: Iterable[object],
        frames: Any = None,
        *,
        crop: Sequence[float] | Sequence[Sequence[float] | None] | None = None,
        size: int | Sequence[int] | Sequence[Sequence[int] | None] | None = None,
        flip: bool | Sequence[bool] = False,
        out: np.ndarray | None = None,
        colorspace: Colorspace | None = None,
        threads: int | None = None,
        dct_scaling: bool = True,
        stack: bool | None = None,
        fast_decode: bool = False,
    ) -> np.ndarray | list[np.ndarray]: ...
    def read_batch(
        self,
        ids: Iterable[object],
        frames: Any = None,
        *,
        crop: Sequence[float] | Sequence[Sequence[float] | None] | None = None,
        size: int | Sequence[int] | Sequence[Sequence[int] | None] | None = None,
        flip: bool | Sequence[bool] = False,
        out: np.ndarray | None = None,
        colorspace: Colorspace | None = None,
        threads: int | None = None,
        dct_scaling: bool = True,
        stack: bool | None = None,
        fast_decode: bool = False,
    ) -> np.ndarray | list[np.ndarray]:
        """Decode several videos in one parallel pass (the training-loop path).

        ``frames`` applies to every video, or is a list with one selection per video.

        **The return type depends on the data** unless ``stack`` says: by default
        (``stack=None``) one ``(N, T, H, W, C)`` array when all videos give the same frame
        count, size and channels, else a *list* of ``(T, H, W, C)`` arrays (videos stored with
        ``--frame-size``, which fixes the short side only, have different widths).
        ``stack=True`` always returns one array and raises ``ValueError`` naming the videos
        when they differ (pass ``size=`` to make them one size); ``stack=False`` always
        returns a list (views of one array when they could be stacked).

        ``out=`` decodes into a ``(N, T, H, W, C)`` uint8 array of the caller's (shared
        memory, say). Without it, arrays of 16 MiB or more reuse the memory of freed ones (at
        most two kept, for 30 s), so a loop does not pay for fresh pages on every batch.

        ``crop``, ``size``, ``flip``, ``dct_scaling`` and ``fast_decode`` are as in
        :meth:`read`; ``crop`` is one box for every video or a list with one box (or None) per
        video, ``size`` one size or a list, ``flip`` one bool or a list. With one ``size``,
        videos of any frame sizes give one ``(N, T, height, width, C)`` array.
        """
        if stack not in (None, True, False):
            raise ValueError(f"stack must be None, True or False, not {stack!r}")
        stack = None if stack is None else bool(stack)
        names = [id_str(i) for i in ids]
        got = self._read_batch(
            names, frames, out, read_spec(
                len(names),
                crop=crop,
                size=size,
                flip=flip,
                colorspace=colorspace or self.colorspace,
                threads=threads,
                dct_scaling=dct_scaling,
                fast_decode=fast_decode,
                check=self.check_data,
                remote=self.is_remote,
            )
        )  # fmt: skip
        if stack is False:
            return list(got)
        if stack and isinstance(got, list):
            shapes: dict[tuple[int, ...], str] = {}
            for id_, array in zip(names, got, strict=True):
                shapes.setdefault(array.shape, id_)
            listed = ", ".join(f"{i!r} {shape}" for shape, i in list(shapes.items())[:4])
            raise ValueError(
                f"{self._path}: stack=True, but the videos decode to different shapes "
                f"(T, H, W, C): {listed}; pass size=(h, w) to decode them at one size, the same "
                "number of frames for each, or colorspace='RGB' for grayscale and colour videos"
            )
        return got

    def _read_batch(
        self, ids: list[str], frames: Any, out: npt.NDArray[np.uint8] | None, spec: ReadSpec
    ) -> np.ndarray | list[np.ndarray]:
        """One crossing into the core for the whole batch (ids, selections and the decode),
        unless a user's decoder takes part."""
        frames = per_video_frames(frames, len(ids))
        if self.jpeg_decoder is None:
            try:
                return self._handle().read_batch(ids, frames, spec, out)
            except UnsupportedJpegError:
                if self.fallback_decoder is None:
                    raise
        items = self._handle().select(ids, frames)
        videos = [
            _reframed(stack_frames(self._decode_slowly(c, v, s, spec), c.id(v)), spec, n, c, v)
            for n, (c, v, s) in enumerate(items)
        ]
        if videos and all(v.shape == videos[0].shape for v in videos):
            return np.stack(videos, out=out) if out is not None else np.stack(videos)
        if out is not None:
            raise ValueError("out= needs every video to give the same number of frames")
        return videos

    def frame_bytes(self, id_: object, selection: Any = None) -> list[memoryview]:
        """Zero-copy read-only views (``memoryview``) of stored JPEG bytes, CRC-checked."""
        chunk, video = self._resolve(id_str(id_))
        return chunk.frame_views(video, selection, self.check_data)

    # -- gulpio2 attributes ------------------------------------------------------------------
    @property
    def num_chunks(self) -> int:
        return self._handle().chunk_count()

    @property
    def merged_meta_dict(self) -> LazyMetaDict:
        """``{id: {'frame_info': [[loc, pad, length], ...], 'meta_data': [...]}}``.

        A real dict of every id, whose entries are built on first access (the same objects
        as in :attr:`all_meta_dicts`); it compares, prints, pickles and serialises like the
        dict gulpio2 built at open.
        """
        if self._merged is None:
            handle = self._handle()
            chunks = list(self.chunk_objs_lookup.values())

            def load(id_: str) -> Any:
                g = handle.lookup(id_)
                if g is None:
                    raise KeyError(id_)
                return chunks[handle.location(g)[0]].meta_dict[id_]

            def load_many() -> Iterator[tuple[str, Any]]:
                for chunk in chunks:
                    yield from chunk.meta_dict.items()

            self._merged = LazyMetaDict.build(self.keys(), load, load_many=load_many, plain=True)
        return self._merged

    @property
    def all_meta_dicts(self) -> list[dict[str, Any]]:
        """Each chunk's ``meta_dict`` (lazy ``OrderedDict`` objects), in chunk order."""
        if self._all_meta is None:
            self._all_meta = [chunk.meta_dict for chunk in self.chunk_objs_lookup.values()]
        return self._all_meta

    @property
    def chunk_lookup(self) -> dict[str, int]:
        """``{id: chunk number}`` (a dict, built on first access)."""
        if self._chunk_lookup is None:
            ids = self.keys()
            lookup: dict[str, int] = {}
            for number, _data, _meta, _index, first, count in self._table:
                lookup.update(zip(ids[first : first + count], repeat(number)))
            self._chunk_lookup = lookup
        return self._chunk_lookup

    @property
    def chunk_objs_lookup(self) -> OrderedDict[int, GulpChunk]:
        """``OrderedDict(chunk number -> GulpChunk)`` in chunk order."""
        if self._chunk_objs is None:
            objs: OrderedDict[int, GulpChunk] = OrderedDict()
            for pos, (number, data, meta, _index, _first, _count) in enumerate(self._table):
                objs[number] = DirectoryChunk(self, pos, data, meta)
            self._chunk_objs = objs
        return self._chunk_objs

    def chunks(self) -> Iterator[GulpChunk]:
        """The existing chunks in chunk-number order (gulpio2 used file-name order)."""
        return iter(self.chunk_objs_lookup.values())

    def __iter__(self) -> Iterator[GulpChunk]:
        return self.chunks()

    def _existing_numbers(self) -> list[int]:
        if self.is_remote:
            return self._handle().listed_numbers()
        numbers = []
        for pattern in ("data*.gulp", "meta*.gmeta"):
            for path in glob(os.path.join(self._path, pattern)):
                number = _native.gulpio_chunk_number(os.path.basename(path))
                if number is not None:
                    numbers.append(number)
        return numbers

    def _next_chunk_id(self) -> int:
        numbers = self._existing_numbers()
        return max(numbers) + 1 if numbers else 0

    def _initialize_filenames(self, chunk_id: int) -> tuple[str, str]:
        return chunk_paths(self._path, chunk_id)

    def _allocate_new_file_paths(self, total_new_chunks: int) -> list[tuple[str, str]]:
        first = self._next_chunk_id()
        return [self._initialize_filenames(i) for i in range(first, first + total_new_chunks)]

    def new_chunks(self, total_new_chunks: int) -> Iterator[GulpChunk]:
        """``total_new_chunks`` new chunks numbered after every existing one.

        Several writers (threads, processes, machines) may add chunks to one directory at
        once: a chunk's number is final only when it is first published, and if another
        writer published that number first, the chunk takes the next free one (its
        ``data_file_path`` and ``meta_file_path`` then change). Publication never replaces
        another writer's chunk (docs/FORMAT.md §4).

        In a remote directory each chunk is written to a local staging file and uploaded when
        its ``open('wb')`` block ends (index, data, then the ``.gmeta`` that makes it visible:
        docs/FORMAT.md §4a); reopen the directory to read it.
        """
        if self.num_chunks == 0:
            # A dataset being created gets its manifest before its first chunk
            # (docs/FORMAT.md §7.6); one with chunks and no manifest is left as it is.
            _manifest.create_if_new(self._path, self._storage_options)
        if self.is_remote:
            # From the manifest's state when there is one: a listing of a large prefix is
            # a request per 1,000 objects, and a number taken meanwhile is skipped anyway.
            first = self._handle().next_chunk_number()
            for number in range(first, first + total_new_chunks):
                yield RemoteNewChunk(self, number)
            return
        for data, meta in self._allocate_new_file_paths(total_new_chunks):
            yield new_chunk(data, meta, jpeg_decoder=self.jpeg_decoder)

    def _load_label_dict(self) -> dict[str, Any]:
        raw = self.read_file("label2idx.json")  # local or remote, by the core's file rules
        if raw is None:
            raise FileNotFoundError(
                errno.ENOENT, os.strerror(errno.ENOENT), f"{self._path.rstrip('/')}/label2idx.json"
            )
        labels: dict[str, Any] = json.loads(raw)
        return labels

    def write_indexes(self) -> int:
        """Write the checksummed index of every chunk that lacks a valid one (legacy data).

        ``.gulp`` and ``.gmeta`` files are not modified. Returns how many chunks were indexed;
        reopen the directory to read through the new indexes.
        """
        if self.is_remote:
            raise NotImplementedError(
                f"{self._path}: indexes of a remote dataset cannot be written in place; run "
                "`gulpio index` on a local copy and upload the .gidx files"
            )
        written = 0
        handle = self._handle()
        for pos, (_number, data, meta, _index, _first, _count) in enumerate(self._table):
            # Not through _chunk(pos): a reader kept per chunk would hold a mapping each.
            if not handle.is_indexed(pos):
                _native.write_index(data, meta)
                written += 1
        return written

    # -- lifetime ----------------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        # Pickles as its path, options and (opened through the manifest) the state it opened,
        # a few hundred bytes: the unpickled copy (a DataLoader worker under spawn) opens
        # that same state and maps the files itself.
        return {
            "manifest_state": self.manifest_state,
            "output_dir": self.output_dir,
            "jpeg_decoder": self.jpeg_decoder,
            "check_data": self.check_data,
            "colorspace": self.colorspace,
            "fallback_decoder": self.fallback_decoder,
            "storage_options": self._storage_options,
            "io": self._io,
            "manifest": self._manifest,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        with warnings.catch_warnings():
            # Problems were reported when the original was opened.
            warnings.simplefilter("ignore", BrokenChunkWarning)
            # type(self)'s own __init__, as unpickling a subclass expects.
            self.__init__(  # type: ignore[misc]
                state["output_dir"],
                state["jpeg_decoder"],
                check_data=state["check_data"],
                colorspace=state["colorspace"],
                fallback_decoder=state["fallback_decoder"],
                storage_options=state.get("storage_options"),
                io=state.get("io"),
                manifest=state.get("manifest", "auto"),
                manifest_state=state.get("manifest_state"),
            )

    @property
    def manifest_state(self) -> bytes | None:
        """The state this directory opened, as a few hundred bytes that ``manifest_state=``
        opens again in any process; ``None`` when it was opened by listing (or is closed)."""
        return None if self._dir is None else self._dir.pin()

    def reopen(self) -> Self:
        """A new handle on the dataset as this one opened it, for another process or thread
        (a forked DataLoader worker; pickling does the same).

        Opened through the dataset manifest, it holds the same videos at the same positions
        as this one, whatever writers committed since (their chunks are not in it; open the
        dataset again to see them); if that state can no longer be read (a chunk of it was
        replaced or removed since), :class:`~gulpio_rs.errors.StaleIndexError`. Opened by
        listing, it lists again. Problems already reported are not warned about again.
        """
        copy = type(self).__new__(type(self))
        copy.__setstate__(self.__getstate__())
        return copy

    @property
    def storage_options(self) -> StorageOptions | None:
        """The ``storage_options`` given (printed with secret values hidden)."""
        return self._storage_options

    @property
    def io(self) -> Io | None:
        """The ``io=`` given: ``"mmap"``, ``"pread"`` (docs/REMOTE.md, "Network file
        systems") or ``None`` (the default: mmap for local files)."""
        return self._io

    @property
    def is_remote(self) -> bool:
        """True for datasets read from an object store or HTTP server."""
        return self._handle().is_remote()

    def read_file(self, name: str) -> bytes | None:
        """The bytes of a small file beside the chunks (e.g. ``label2idx.json``), wherever the
        dataset lives; ``None`` if there is no such file."""
        return self._handle().read_file(name)

    def file_names(self) -> list[str]:
        """The names of the files directly in the dataset (its folder, or its prefix in an
        object store), listed now: the chunks' files and everything beside them."""
        return self._handle().file_names()

    def close(self) -> None:
        """Release the directory (mappings stay alive while frame views still use them)."""
        self._dir = None
        self._chunk_objs = None
        self._merged = self._all_meta = self._chunk_lookup = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"GulpDirectory({_native.redact_url(self._path)!r})"


def _reframed(
    stacked: np.ndarray, spec: ReadSpec, n: int, chunk: _native.Chunk, video: int
) -> np.ndarray:
    """The fused read's crop, resize and flip (of the ``n``-th video of ``spec``) applied to
    frames decoded by another decoder; a crop that does not fit is a ValueError naming the
    file, video and frame, as from the built-in decoder."""
    crop, size, flip = spec.of(n)
    if crop is None and size is None and not flip:
        return stacked
    try:
        frames = _native.reframe_frames(list(stacked), crop, size, flip)
    except ValueError as e:
        raise ValueError(f"{chunk.data_path}: video {chunk.id(video)!r} {e}") from None
    return np.ascontiguousarray(np.stack(frames)) if frames else stacked
