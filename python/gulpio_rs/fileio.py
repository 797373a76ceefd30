"""gulpio2's ``fileio`` API over the Rust core: ``GulpDirectory``, ``GulpChunk``,
``ChunkWriter``, ``GulpIngestor`` and the module-level helpers, with gulpio2's names, arguments
and return shapes. What differs is documented on each class (see also docs/COMPATIBILITY.md).
"""

from __future__ import annotations

import json
import os
import pickle
import re
import sys
import warnings
from abc import ABC, abstractmethod
from collections import OrderedDict, namedtuple
from collections.abc import Iterator, Mapping
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from glob import glob
from typing import Any

import numpy as np

from . import _native, utils
from .errors import BrokenChunkWarning, UnsupportedJpegError

# Looked up at call time through this module, so monkeypatching `fileio.img_to_jpeg_bytes`
# (as gulpio2 users do) still takes effect.
img_to_jpeg_bytes = utils.img_to_jpeg_bytes
jpeg_bytes_to_img = utils.jpeg_bytes_to_img

ImgInfo = namedtuple("ImgInfo", ["loc", "pad", "length"])


class AbstractSerializer(ABC):  # pragma: no cover - interface only
    @abstractmethod
    def load(self, file_name):
        pass

    @abstractmethod
    def dump(self, thing, file_name):
        pass


class PickleSerializer(AbstractSerializer):
    """Kept for import compatibility only: gulpio-rs never loads pickles from a dataset."""

    def load(self, file_name):
        raise NotImplementedError(
            "gulpio-rs does not load pickled metadata (unsafe on untrusted data); "
            "datasets use JSON .gmeta files"
        )

    def dump(self, thing, file_name):
        with open(file_name, "wb") as file_pointer:
            pickle.dump(thing, file_pointer)


class JSONSerializer(AbstractSerializer):
    def load(self, file_name):
        with open(file_name) as file_pointer:
            return json.load(file_pointer, object_pairs_hook=OrderedDict)

    def dump(self, thing, file_name):
        with open(file_name, "w") as file_pointer:
            json.dump(thing, file_pointer)


pickle_serializer = PickleSerializer()
json_serializer = JSONSerializer()


def extract_input_for_getitem(element) -> tuple[str, Any]:
    """Split ``id`` or ``(id, frames)`` into ``(str(id), frames_or_None)``.

    Accepts numpy integer ids, which gulpio2 rejected.
    """
    if isinstance(element, tuple) and len(element) == 2:
        id_, slice_ = element
    elif isinstance(element, (int, str, np.integer, np.str_)):
        id_, slice_ = element, None
    else:
        raise TypeError("Undefined input type! id or (id, slice) expected")
    return _id_str(id_), slice_


def _id_str(id_) -> str:
    if isinstance(id_, np.integer):
        return str(int(id_))
    return str(id_)


def calculate_chunk_slices(items_per_chunk: int, num_items: int) -> list[slice]:
    """Slices of ``items_per_chunk`` items covering ``range(num_items)``."""
    assert items_per_chunk > 0
    assert num_items > 0
    return [
        slice(i, min(i + items_per_chunk, num_items)) for i in range(0, num_items, items_per_chunk)
    ]


def _selection(selection, native_chunk, video: int) -> list[int] | None:
    """gulpio2's frame selection forms as a list of frame indices for the core (``None`` =
    all frames). Negative indices count from the end; the core raises IndexError for indices
    out of range."""
    if selection is None:
        return None
    if isinstance(selection, slice):
        return list(range(*selection.indices(native_chunk.frame_count(video))))
    if isinstance(selection, (int, np.integer)) and not isinstance(selection, bool):
        return [int(selection)]
    if isinstance(selection, list):
        return selection
    return np.asarray(selection).reshape(-1).tolist()


def _first_meta(meta_data_json: str) -> dict:
    items = json.loads(meta_data_json)
    return dict(items[0]) if items else {}


def _read(
    native_chunk,
    video: int,
    selection,
    jpeg_decoder,
    check_data: bool,
    colorspace,
    fallback_decoder=None,
):
    """Frames of one video as gulpio2 returns them: a list of HxWx3 / HxW arrays."""
    frames = _selection(selection, native_chunk, video)
    if jpeg_decoder is not None:
        return _user_decoded(native_chunk, video, frames, check_data, jpeg_decoder)
    try:
        decoded = native_chunk.decode(video, frames, check_data, colorspace, _threads())
    except UnsupportedJpegError:
        if fallback_decoder is None:
            raise
        return _with_fallback(native_chunk, video, frames, check_data, colorspace, fallback_decoder)
    if isinstance(decoded, np.ndarray):
        # One (T, H, W, C) array: the frames are views into it, not separate allocations.
        return list(decoded[..., 0] if decoded.shape[3] == 1 else decoded)
    return [a[:, :, 0] if a.shape[2] == 1 else a for a in decoded]


def _user_decoded(native_chunk, video: int, frames, check_data: bool, decoder) -> list:
    """Frames decoded by a user's callable, which receives the JPEG ``bytes``."""
    return [decoder(bytes(v)) for v in native_chunk.frame_views(video, frames, check_data)]


def _with_fallback(native_chunk, video: int, frames, check_data, colorspace, fallback) -> list:
    """Frames decoded one at a time by the built-in decoder, and by ``fallback`` for those it
    does not support (gray frames as HxW, like gulpio2)."""
    if frames is None:
        frames = list(range(native_chunk.frame_count(video)))
    out = []
    for k in frames:
        try:
            frame = native_chunk.decode(video, [k], check_data, colorspace, 1)[0]
        except UnsupportedJpegError:
            view = native_chunk.frame_views(video, [k], check_data)[0]
            frame = np.asarray(fallback(bytes(view)))
        out.append(frame[:, :, 0] if frame.ndim == 3 and frame.shape[2] == 1 else frame)
    return out


def _stack(frames: list, video_id: str) -> np.ndarray:
    """Stack decoded frames as ``(T, H, W, C)``."""
    frames = [np.asarray(f) for f in frames]
    frames = [f[:, :, None] if f.ndim == 2 else f for f in frames]
    if not frames:
        return np.zeros((0, 0, 0, 3), np.uint8)
    if any(f.shape != frames[0].shape for f in frames):
        raise ValueError(
            f"video {video_id!r} has frames of different sizes; use gd[id] for a list of frames"
        )
    return np.ascontiguousarray(np.stack(frames), dtype=np.uint8)


def _threads(threads: int | None = None) -> int:
    """Decode threads: the argument, else ``GULPIO_NUM_THREADS``, else 1 inside a PyTorch
    DataLoader worker (workers already run in parallel), else 0 (= every usable core)."""
    if threads is not None:
        if threads < 0:
            raise ValueError(f"threads must be >= 0, not {threads}")
        return int(threads)
    env = os.environ.get("GULPIO_NUM_THREADS")
    if env:
        try:
            return max(0, int(env))
        except ValueError:
            raise ValueError(f"GULPIO_NUM_THREADS must be an integer, not {env!r}") from None
    torch = sys.modules.get("torch")  # never import torch ourselves
    if torch is not None:
        get_worker_info = getattr(getattr(torch.utils, "data", None), "get_worker_info", None)
        if get_worker_info is not None and get_worker_info() is not None:
            return 1
    return 0


class _MetaView(Mapping):
    """gulpio2's ``{id: {'frame_info': [...], 'meta_data': [...]}}``, built per id on access
    from the index instead of held as parsed JSON."""

    def __init__(self, ids, resolve):
        self._ids = ids
        self._resolve = resolve

    def __getitem__(self, id_):
        chunk, video = self._resolve(_id_str(id_))
        return OrderedDict(
            [
                ("frame_info", [list(fi) for fi in chunk.frame_info(video)]),
                ("meta_data", json.loads(chunk.meta_data(video))),
            ]
        )

    def __iter__(self):
        return iter(self._ids())

    def __len__(self):
        return len(self._ids())

    def __contains__(self, id_):
        try:
            self._resolve(_id_str(id_))
        except KeyError:
            return False
        return True


def _problem_text(problem: dict) -> str:
    message = problem["message"]
    return message if message.startswith(problem["path"]) else f"{problem['path']}: {message}"


class GulpChunk:
    """One chunk: ``data_{k}.gulp`` + ``meta_{k}.gmeta`` (+ the ``data_{k}.gidx`` index).

    Reading does not need :meth:`open` (frames come from a shared read-only mapping, so any
    number of threads may read at once); ``open('rb')`` is accepted for gulpio2 code.
    Writing (``open('wb')`` / ``open('ab')``) publishes atomically on :meth:`flush` and on a
    normal exit; if the ``with`` body raises, nothing unpublished is kept.
    """

    def __init__(
        self,
        data_file_path,
        meta_file_path,
        serializer=json_serializer,
        jpeg_decoder=None,
        *,
        check_data: bool = True,
        colorspace: str | None = None,
        fallback_decoder=None,
        _native_chunk=None,
    ):
        if not isinstance(serializer, JSONSerializer):
            raise NotImplementedError("gulpio-rs reads and writes JSON .gmeta files only")
        self.data_file_path = str(data_file_path)
        self.meta_file_path = str(meta_file_path)
        self.serializer = serializer
        self.jpeg_decoder = jpeg_decoder
        self.check_data = check_data
        self.colorspace = colorspace
        self.fallback_decoder = fallback_decoder
        self.fp = None
        self._reader = _native_chunk
        self._writer = None
        self._meta_cache = None

    # -- reading -----------------------------------------------------------------------------
    def _native(self):
        if self._reader is None:
            reader, warning = _native.Chunk.open(self.data_file_path, self.meta_file_path)
            if warning:
                warnings.warn(warning, BrokenChunkWarning, stacklevel=3)
            self._reader = reader
        return self._reader

    def _video(self, id_) -> int:
        video = self._native().lookup(_id_str(id_))
        if video is None:
            raise KeyError(_id_str(id_))
        return video

    @property
    def indexed(self) -> bool:
        """True when reads go through the checksummed index (frame CRCs verified)."""
        return self._native().indexed

    @property
    def published_len(self) -> int:
        """Where the chunk's published records end in the data file."""
        return self._native().published_len

    @property
    def meta_dict(self) -> OrderedDict:
        """The parsed ``.gmeta`` (gulpio2's attribute), loaded on first access."""
        if self._writer is not None:
            return json.loads(self._writer.meta_text(), object_pairs_hook=OrderedDict)
        if self._meta_cache is None:
            if os.path.exists(self.meta_file_path):
                self._meta_cache = self.serializer.load(self.meta_file_path)
            else:
                self._meta_cache = OrderedDict()
        return self._meta_cache

    def keys(self) -> list[str]:
        """Video ids in file order."""
        return self._native().ids()

    def __len__(self) -> int:
        return len(self._native())

    def __contains__(self, id_) -> bool:
        return self._native().lookup(_id_str(id_)) is not None

    def num_frames(self, id_) -> int:
        return self._native().frame_count(self._video(id_))

    def read_frames(self, id_, slice_=None):
        """``(frames, meta)`` for one video; ``slice_`` may be a slice, list, array or int."""
        video = self._video(id_)
        chunk = self._native()
        frames = _read(
            chunk,
            video,
            slice_,
            self.jpeg_decoder,
            self.check_data,
            self.colorspace,
            self.fallback_decoder,
        )
        return frames, _first_meta(chunk.meta_data(video))

    def frame_bytes(self, id_, slice_=None) -> list:
        """Zero-copy read-only views (buffer protocol) of the stored JPEG bytes."""
        video = self._video(id_)
        chunk = self._native()
        return chunk.frame_views(video, _selection(slice_, chunk, video), self.check_data)

    def __getitem__(self, element):
        return self.read_frames(*extract_input_for_getitem(element))

    def iter_all(self, accepted_ids=None, shuffle=False):
        """Yield ``(frames, meta)`` for every video (optionally filtered / shuffled)."""
        ids = self.keys()
        if accepted_ids is not None:
            accepted = {str(a) for a in accepted_ids}
            ids = [i for i in ids if i in accepted]
        if shuffle:
            np.random.shuffle(ids)
        for id_ in ids:
            yield self.read_frames(id_)

    def __iter__(self):
        return self.iter_all()

    def write_index(self) -> int:
        """Write the checksummed index for this chunk (for data written by gulpio/gulpio2)."""
        n = _native.write_index(self.data_file_path, self.meta_file_path)
        self._reader = None
        return n

    # -- writing -----------------------------------------------------------------------------
    @contextmanager
    def open(self, flag: str = "rb"):
        if flag == "rb":
            yield None
            return
        if flag not in ("wb", "ab"):
            raise NotImplementedError(f"This file does not support the mode: '{flag}'")
        if self._writer is not None:
            raise ValueError(f"{self.data_file_path} is already open for writing")
        self._writer = _native.NativeWriter(self.data_file_path, self.meta_file_path, flag)
        try:
            yield None
        except BaseException:
            writer, self._writer = self._writer, None
            writer.abort()
            self._invalidate()
            raise
        writer, self._writer = self._writer, None
        try:
            writer.close()
        finally:
            self._invalidate()

    def _invalidate(self):
        self._reader = None
        self._meta_cache = None

    def flush(self):
        """Publish everything appended so far: fsynced and atomically visible to readers."""
        if self._writer is None:
            raise ValueError(f"{self.data_file_path} is not open for writing")
        self._writer.publish()
        self._invalidate()

    def append(self, id_, meta_data, frames):
        """Append one video: ``frames`` are uint8 arrays (encoded as JPEG) or JPEG bytes
        (stored as they are); ``meta_data`` must be JSON-serialisable."""
        if self._writer is None:
            raise ValueError(
                f"{self.data_file_path} is not open for writing; use `with chunk.open('wb'):`"
            )
        encode = img_to_jpeg_bytes  # module global, looked up now
        jpegs = [f if isinstance(f, (bytes, bytearray, memoryview)) else encode(f) for f in frames]
        self._writer.append(_id_str(id_), json.dumps(meta_data), jpegs)

    @staticmethod
    def _pad_image(number):
        return (4 - (number % 4)) % 4

    @staticmethod
    def _default_factory():
        return OrderedDict([("frame_info", []), ("meta_data", [])])

    def __repr__(self):
        return f"GulpChunk({self.data_file_path!r}, {self.meta_file_path!r})"


class GulpDirectory:
    """A directory of gulp chunks, read through the Rust core.

    Opening reads only the chunks' binary indexes (no JSON), so it takes milliseconds for
    100,000 videos; chunks without an index (written by gulpio/gulpio2) are parsed once.

    ``gd[id]``, ``gd[id, slice]``, ``gd[id, [0, 2]]``, ``gd[id, ndarray]`` and ``gd[id, 3]``
    return ``(frames, meta)`` as gulpio2 does. Every frame's CRC32 is verified on read unless
    ``check_data=False``. Chunks that cannot be read (a data file without meta, a damaged
    ``.gmeta``) are reported as :class:`BrokenChunkWarning` and in :attr:`problems`; the rest
    stays readable, unless ``strict=True``, which raises instead.

    ``iter(gd)`` yields chunks (gulpio2's meaning); ``gd.keys()`` iterates video ids.

    Decoding: the built-in decoder runs frames in parallel with the GIL released.
    ``jpeg_decoder=callable`` (gulpio2's option) replaces it for every frame;
    ``fallback_decoder=callable`` is used only for frames the built-in decoder does not support
    (arithmetic coding, 12-bit). Both are called with the JPEG ``bytes``.
    """

    def __init__(
        self,
        output_dir,
        jpeg_decoder=None,
        *,
        check_data: bool = True,
        colorspace: str | None = None,
        fallback_decoder=None,
        strict: bool = False,
    ):
        self.output_dir = str(output_dir)
        self.jpeg_decoder = jpeg_decoder
        self.check_data = check_data
        self.colorspace = colorspace
        self.fallback_decoder = fallback_decoder
        self._dir = _native.NativeDirectory(self.output_dir)
        self._table = self._dir.chunk_table()
        self._chunk_objs = None
        self.problems = [
            {"path": p, "message": m, "chunk_skipped": skipped}
            for p, m, skipped in self._dir.problems()
        ]
        for problem in self.problems:
            if strict:
                from .errors import FormatError

                err = FormatError(_problem_text(problem))
                err.path = problem["path"]
                raise err
            warnings.warn(_problem_text(problem), BrokenChunkWarning, stacklevel=2)

    # -- lookups -----------------------------------------------------------------------------
    def _handle(self):
        if self._dir is None:
            raise ValueError(f"GulpDirectory {self.output_dir!r} is closed")
        return self._dir

    def _resolve(self, id_: str):
        # KeyError for unknown ids; warns once if the chunk's index had to be ignored.
        return self._handle().resolve(id_)

    def _chunk(self, pos: int):
        return self._handle().chunk(pos)

    def __len__(self) -> int:
        return len(self._handle())

    def __contains__(self, id_) -> bool:
        return self._handle().lookup(_id_str(id_)) is not None

    def keys(self) -> list[str]:
        """All video ids, chunk by chunk in chunk-number order."""
        return self._handle().ids()

    ids = property(keys, doc="All video ids (a list).")

    def num_frames(self, id_) -> int:
        """Number of frames of a video."""
        chunk, video = self._resolve(_id_str(id_))
        return chunk.frame_count(video)

    def frame_shapes(self, id_) -> list[tuple[int, int, int]]:
        """``(height, width, channels)`` per frame from the index (zeros for legacy chunks)."""
        chunk, video = self._resolve(_id_str(id_))
        return chunk.frame_shapes(video)

    def meta(self, id_) -> dict:
        """A video's metadata (``meta_data[0]``), without reading frames."""
        chunk, video = self._resolve(_id_str(id_))
        return _first_meta(chunk.meta_data(video))

    def __getitem__(self, element):
        id_, selection = extract_input_for_getitem(element)
        chunk, video = self._resolve(id_)
        frames = _read(
            chunk,
            video,
            selection,
            self.jpeg_decoder,
            self.check_data,
            self.colorspace,
            self.fallback_decoder,
        )
        return frames, _first_meta(chunk.meta_data(video))

    def read(
        self,
        id_,
        frames=None,
        *,
        out: np.ndarray | None = None,
        colorspace: str | None = None,
        threads: int | None = None,
    ) -> np.ndarray:
        """Decode frames of one video into one ``(T, H, W, C)`` uint8 array.

        ``frames`` is ``None`` (all), a slice, a list/array of indices or an int. ``C`` is 3
        (RGB) unless every frame is grayscale (1); ``colorspace="RGB"`` or ``"GRAY"`` forces
        it. ``out=`` decodes into a C-contiguous uint8 array of the right shape, without an
        extra copy. Decoding runs on ``threads`` threads (default: ``GULPIO_NUM_THREADS``, 1 in
        a DataLoader worker, else every usable core) with the GIL released. Frames of
        different sizes raise ``ValueError`` (``gd[id]`` returns them as a list).
        """
        chunk, video = self._resolve(_id_str(id_))
        selection = _selection(frames, chunk, video)
        colorspace = colorspace or self.colorspace
        if self.jpeg_decoder is None:
            try:
                return chunk.read(
                    video, selection, self.check_data, colorspace, out, _threads(threads)
                )
            except UnsupportedJpegError:
                if self.fallback_decoder is None:
                    raise
        stacked = _stack(self._decode_slowly(chunk, video, selection, colorspace), _id_str(id_))
        if out is not None:
            if out.shape != stacked.shape or out.dtype != np.uint8:
                raise ValueError(f"out has shape {out.shape}, the frames need {stacked.shape}")
            out[...] = stacked
            return out
        return stacked

    def _decode_slowly(self, chunk, video: int, selection, colorspace) -> list:
        """The frame-by-frame path: a user ``jpeg_decoder``, or the fallback decoder."""
        if self.jpeg_decoder is not None:
            return _user_decoded(chunk, video, selection, self.check_data, self.jpeg_decoder)
        return _with_fallback(
            chunk, video, selection, self.check_data, colorspace, self.fallback_decoder
        )

    def read_batch(
        self,
        ids,
        frames=None,
        *,
        out: np.ndarray | None = None,
        colorspace: str | None = None,
        threads: int | None = None,
    ):
        """Decode several videos in one parallel pass (the training-loop path).

        ``frames`` applies to every video, or is a list with one selection per video. Returns
        one ``(N, T, H, W, C)`` array when all videos give the same frame count and size, else
        a list of ``(T, H, W, C)`` arrays. ``out=`` reuses a ``(N, T, H, W, C)`` uint8 buffer
        across batches (a fresh array of tens of MB costs page faults on every call).
        """
        ids = [_id_str(i) for i in ids]
        per_video = (
            isinstance(frames, (list, tuple))
            and len(frames) == len(ids)
            and all(f is None or isinstance(f, (slice, list, tuple, np.ndarray)) for f in frames)
        )
        items = []
        for n, id_ in enumerate(ids):
            chunk, video = self._resolve(id_)
            sel = frames[n] if per_video else frames
            items.append((chunk, video, _selection(sel, chunk, video)))
        colorspace = colorspace or self.colorspace
        if self.jpeg_decoder is None:
            try:
                return _native.read_batch(
                    items, self.check_data, colorspace, _threads(threads), out
                )
            except UnsupportedJpegError:
                if self.fallback_decoder is None:
                    raise
        videos = [_stack(self._decode_slowly(c, v, s, colorspace), c.id(v)) for c, v, s in items]
        if videos and all(v.shape == videos[0].shape for v in videos):
            return np.stack(videos, out=out) if out is not None else np.stack(videos)
        if out is not None:
            raise ValueError("out= needs every video to give the same number of frames")
        return videos

    def frame_bytes(self, id_, selection=None) -> list:
        """Zero-copy read-only views (``memoryview``) of stored JPEG bytes, CRC-checked."""
        chunk, video = self._resolve(_id_str(id_))
        return chunk.frame_views(video, _selection(selection, chunk, video), self.check_data)

    # -- gulpio2 attributes ------------------------------------------------------------------
    @property
    def num_chunks(self) -> int:
        return len(self._table)

    @property
    def merged_meta_dict(self) -> Mapping:
        """``{id: {'frame_info': [[loc, pad, length], ...], 'meta_data': [...]}}``, lazily."""
        return _MetaView(self.keys, self._resolve)

    @property
    def all_meta_dicts(self) -> list[Mapping]:
        """One lazy meta mapping per chunk, in chunk order."""
        return [
            _MetaView(
                lambda pos=pos: self._chunk(pos).ids(),
                lambda id_, pos=pos: self._chunk_resolve(pos, id_),
            )
            for pos in range(len(self._table))
        ]

    def _chunk_resolve(self, pos: int, id_: str):
        chunk = self._chunk(pos)
        video = chunk.lookup(id_)
        if video is None:
            raise KeyError(id_)
        return chunk, video

    @property
    def chunk_lookup(self) -> Mapping:
        """``{id: chunk number}``, lazily."""
        gd = self

        class _ChunkLookup(Mapping):
            def __getitem__(self, id_):
                d = gd._handle()
                g = d.lookup(_id_str(id_))
                if g is None:
                    raise KeyError(id_)
                return gd._table[d.location(g)[0]][0]

            def __iter__(self):
                return iter(gd.keys())

            def __len__(self):
                return len(gd)

        return _ChunkLookup()

    @property
    def chunk_objs_lookup(self) -> OrderedDict:
        """``OrderedDict(chunk number -> GulpChunk)`` in chunk order."""
        if self._chunk_objs is None:
            objs = OrderedDict()
            for pos, (number, data, meta, _index, _first, _count) in enumerate(self._table):
                objs[number] = _DirectoryChunk(self, pos, data, meta)
            self._chunk_objs = objs
        return self._chunk_objs

    def chunks(self) -> Iterator[GulpChunk]:
        """The existing chunks in chunk-number order (gulpio2 used file-name order)."""
        return iter(self.chunk_objs_lookup.values())

    def __iter__(self) -> Iterator[GulpChunk]:
        return self.chunks()

    def _existing_numbers(self) -> list[int]:
        numbers = []
        for pattern in ("data*.gulp", "meta*.gmeta"):
            for path in glob(os.path.join(self.output_dir, pattern)):
                found = re.findall(r"\d+", os.path.basename(path))
                if found:
                    numbers.append(int(found[0]))
        return numbers

    def _next_chunk_id(self) -> int:
        numbers = self._existing_numbers()
        return max(numbers) + 1 if numbers else 0

    def _initialize_filenames(self, chunk_id):
        return (
            os.path.join(self.output_dir, f"data_{chunk_id}.gulp"),
            os.path.join(self.output_dir, f"meta_{chunk_id}.gmeta"),
        )

    def _allocate_new_file_paths(self, total_new_chunks):
        first = self._next_chunk_id()
        return [self._initialize_filenames(i) for i in range(first, first + total_new_chunks)]

    def new_chunks(self, total_new_chunks: int) -> Iterator[GulpChunk]:
        """``total_new_chunks`` new chunks numbered after every existing one."""
        for data, meta in self._allocate_new_file_paths(total_new_chunks):
            yield GulpChunk(data, meta, jpeg_decoder=self.jpeg_decoder)

    def _load_label_dict(self):
        with open(os.path.join(self.output_dir, "label2idx.json")) as f:
            return json.load(f)

    def write_indexes(self) -> int:
        """Write the checksummed index of every chunk that lacks a valid one (legacy data).

        ``.gulp`` and ``.gmeta`` files are not modified. Returns how many chunks were indexed;
        reopen the directory to read through the new indexes.
        """
        written = 0
        for pos, (_number, data, meta, _index, _first, _count) in enumerate(self._table):
            if not self._chunk(pos).indexed:
                _native.write_index(data, meta)
                written += 1
        return written

    # -- lifetime ----------------------------------------------------------------------------
    def __getstate__(self):
        # Pickles as its path and options (small, e.g. for DataLoader workers under spawn);
        # the unpickled copy reopens the directory and maps the files itself.
        return {
            "output_dir": self.output_dir,
            "jpeg_decoder": self.jpeg_decoder,
            "check_data": self.check_data,
            "colorspace": self.colorspace,
            "fallback_decoder": self.fallback_decoder,
        }

    def __setstate__(self, state):
        with warnings.catch_warnings():
            # Problems were reported when the original was opened.
            warnings.simplefilter("ignore", BrokenChunkWarning)
            self.__init__(
                state["output_dir"],
                state["jpeg_decoder"],
                check_data=state["check_data"],
                colorspace=state["colorspace"],
                fallback_decoder=state["fallback_decoder"],
            )

    def close(self) -> None:
        """Release the directory (mappings stay alive while frame views still use them)."""
        self._dir = None
        self._chunk_objs = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"GulpDirectory({self.output_dir!r})"


class _DirectoryChunk(GulpChunk):
    """A chunk handed out by a GulpDirectory: shares the directory's open reader."""

    def __init__(self, directory: GulpDirectory, pos: int, data: str, meta: str):
        super().__init__(
            data,
            meta,
            jpeg_decoder=directory.jpeg_decoder,
            check_data=directory.check_data,
            colorspace=directory.colorspace,
            fallback_decoder=directory.fallback_decoder,
        )
        self._directory = directory
        self._pos = pos

    def _native(self):
        if self._reader is None:
            self._reader = self._directory._chunk(self._pos)
        return self._reader


class ChunkWriter:
    """Writes the videos of one adapter slice into one chunk (gulpio2's ``ChunkWriter``)."""

    def __init__(self, adapter):
        self.adapter = adapter
        self.skipped: list[str] = []

    def write_chunk(self, output_chunk: GulpChunk, input_slice):
        with output_chunk.open("wb"):
            for video in self.adapter.iter_data(input_slice):
                id_ = video["id"]
                meta_data = video["meta"]
                frames = video["frames"]
                if len(frames) > 0:
                    output_chunk.append(id_, meta_data, frames)
                else:
                    self.skipped.append(str(id_))
                    warnings.warn(f"Failed to write video with id: {id_}; no frames", stacklevel=2)
        return self.skipped


class GulpIngestor:
    """Gulps an adapter into ``output_folder`` with ``num_workers`` processes, one chunk of
    ``videos_per_chunk`` videos per task (gulpio2's ``GulpIngestor``). New chunks are numbered
    after the existing ones, so running it again on a new adapter extends the dataset."""

    def __init__(self, adapter, output_folder, videos_per_chunk, num_workers):
        assert int(num_workers) > 0
        self.adapter = adapter
        self.output_folder = str(output_folder)
        self.videos_per_chunk = int(videos_per_chunk)
        self.num_workers = int(num_workers)

    def __call__(self):
        os.makedirs(self.output_folder, exist_ok=True)
        chunk_slices = calculate_chunk_slices(self.videos_per_chunk, len(self.adapter))
        gulp_directory = GulpDirectory(self.output_folder)
        new_chunks = list(gulp_directory.new_chunks(len(chunk_slices)))
        chunk_writer = ChunkWriter(self.adapter)
        if self.num_workers == 1:
            results = [
                chunk_writer.write_chunk(c, s)
                for c, s in zip(new_chunks, chunk_slices, strict=True)
            ]
        else:
            with ProcessPoolExecutor(max_workers=self.num_workers) as executor:
                results = list(executor.map(chunk_writer.write_chunk, new_chunks, chunk_slices))
        return [id_ for skipped in results for id_ in skipped]
