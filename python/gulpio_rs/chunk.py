"""``GulpChunk``: one chunk (``data_{k}.gulp`` + ``meta_{k}.gmeta`` + ``data_{k}.gidx``), read
through the Rust core and written with its crash-safe writer (gulpio2's API).

With the built-in JSON serializer (the default) metadata and frames go through the Rust core.
Any other serializer (gulpio2's ``load(path)`` / ``dump(obj, path)`` interface) switches the
chunk to gulpio2's own way of working: ``meta_dict`` is loaded through it at construction and
dumped through it on ``flush``, frames are written to and read from the data file in Python.
"""

from __future__ import annotations

import builtins
import json
import os
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, nullcontext
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from . import _native
from ._choices import Colorspace
from ._files import open_for_reading, open_for_writing
from ._metadict import LazyMetaDict, native_entry
from ._reading import (
    Decoder,
    ImgInfo,
    extract_input_for_getitem,
    first_meta,
    id_str,
    read_frames_of,
)
from ._times import find_times
from .errors import BrokenChunkWarning, PickleMetadataWarning
from .serializers import AbstractSerializer, JSONSerializer, PickleSerializer, json_serializer

if TYPE_CHECKING:
    from ._native import Chunk as NativeChunk
    from ._times import VideoTimes

#: gulpio2's meta dict: ``{id: {"frame_info": [...], "meta_data": [...]}}``.
MetaDict = OrderedDict[str, Any]

_BUILTIN_OPEN = builtins.open


def _open_replaced() -> bool:
    """Whether ``builtins.open`` was replaced (``mock.patch('builtins.open')``, as gulpio2's
    own unit tests do to see which files ``GulpChunk.open`` opens): the data file is then
    opened with it, as gulpio2 did. Otherwise by the core's rules (``_files``: never through a
    symlink, only regular files)."""
    return builtins.open is not _BUILTIN_OPEN


def _no_encoder() -> Callable[[np.ndarray], bytes]:
    raise RuntimeError("gulpio_rs.fileio was not imported, so no frame encoder is installed")


#: Returns the function :meth:`GulpChunk.append` encodes arrays with. ``gulpio_rs.fileio``
#: installs one that reads its own ``img_to_jpeg_bytes`` at call time, so monkeypatching
#: ``fileio.img_to_jpeg_bytes`` (as gulpio2 users do) takes effect without this module
#: importing the facade back.
encoder_lookup: Callable[[], Callable[[np.ndarray], bytes]] = _no_encoder

_BYTES = (bytes, bytearray, memoryview)


def _default_decode(jpeg: bytes) -> np.ndarray:
    arr = _native.decode_jpeg(jpeg)
    return arr[:, :, 0] if arr.shape[2] == 1 else arr


def _select(infos: list[Any], selection: Any) -> list[Any]:
    """gulpio2's frame selection over a list of ``ImgInfo`` (plus a single int index)."""
    if selection is None:
        return list(infos)
    if isinstance(selection, (list, np.ndarray)):
        return [infos[i] for i in selection]
    if isinstance(selection, (int, np.integer)) and not isinstance(selection, bool):
        return [infos[selection]]
    return list(infos[selection])


class GulpChunk:
    """One chunk: ``data_{k}.gulp`` + ``meta_{k}.gmeta`` (+ the ``data_{k}.gidx`` index).

    ``data_file_path``, ``meta_file_path``, ``serializer`` and ``jpeg_decoder`` keep exactly
    what was passed (a ``Path`` stays a ``Path``), as in gulpio2.

    Reading does not need :meth:`open` (frames are read with positional reads, so any number
    of threads may read at once); ``open('rb')`` opens ``fp`` as gulpio2 does.
    Writing (``open('wb')`` / ``open('ab')``) publishes atomically on :meth:`flush` and on a
    normal exit; if the ``with`` body raises, nothing unpublished is kept.

    gulpio2's methods (``append``, ``_append_meta``, ``_write_frame(s)``, ``flush``,
    ``read_frames``, ``_get_frame_infos``, ``iter_all``, ...) exist and call each other as in
    gulpio2, so subclasses that override them keep working. A chunk with a serializer other
    than the built-in JSON one works like gulpio2's (no checksums, no index);
    ``pickle_serializer`` loads pickles only because the caller asked for it, with a
    :class:`~gulpio_rs.errors.PickleMetadataWarning`.
    """

    def __init__(
        self,
        data_file_path: Any,
        meta_file_path: Any,
        serializer: AbstractSerializer = json_serializer,
        jpeg_decoder: Decoder | None = None,
        *,
        check_data: bool = True,
        colorspace: Colorspace | None = None,
        fallback_decoder: Decoder | None = None,
        _native_chunk: NativeChunk | None = None,
    ) -> None:
        self.data_file_path = data_file_path
        self.meta_file_path = meta_file_path
        self.serializer = serializer
        self.jpeg_decoder = jpeg_decoder
        self.check_data = check_data
        self.colorspace = colorspace
        self.fallback_decoder = fallback_decoder
        self.fp: IO[bytes] | None = None
        self._img_info: dict[str, list[Any]] = {}
        self._reader = _native_chunk
        self._writer: _native.NativeWriter | None = None
        self._pending: OrderedDict[str, tuple[list[Any], list[bytes]]] = OrderedDict()
        self._meta: MetaDict | None = None
        # A chunk from GulpDirectory.new_chunks: its first publication takes the first free
        # chunk number of its folder (another writer may have taken this one meanwhile).
        self._new = False
        if isinstance(serializer, PickleSerializer):
            warnings.warn(
                f"{meta_file_path}: metadata is read and written with pickle, which runs code "
                "from the file; use it only for files you made yourself",
                PickleMetadataWarning,
                stacklevel=2,
            )
        if not self._native_meta:
            # gulpio2 loads the meta file when the chunk is built; a custom serializer (or a
            # test double counting calls) sees the same call at the same time.
            self._meta = self._get_or_create_dict()

    # -- paths and modes ---------------------------------------------------------------------
    @property
    def _data_path(self) -> str:
        return os.fsdecode(self.data_file_path)

    @property
    def _meta_path(self) -> str:
        return os.fsdecode(self.meta_file_path)

    @property
    def _native_meta(self) -> bool:
        """True when metadata goes through the Rust core (the built-in JSON serializer)."""
        return type(self.serializer) is JSONSerializer

    def _fast_reads(self) -> bool:
        """Whether reads may bypass ``meta_dict``: the built-in serializer, and no subclass
        override of where gulpio2 takes frame locations from."""
        cls = type(self)
        return (
            self._native_meta
            and cls._get_frame_infos is GulpChunk._get_frame_infos
            and cls._get_or_create_dict is GulpChunk._get_or_create_dict
            and cls.meta_dict is GulpChunk.meta_dict
        )

    # -- reading -----------------------------------------------------------------------------
    def _native(self) -> NativeChunk:
        if self._reader is None:
            reader, warning = _native.Chunk.open(self._data_path, self._meta_path)
            if warning:
                warnings.warn(warning, BrokenChunkWarning, stacklevel=3)
            self._reader = reader
        return self._reader

    def _native_or_none(self) -> NativeChunk | None:
        """The Rust reader, or ``None`` when there is no meta file yet (an empty chunk)."""
        if self._reader is None and not os.path.exists(self._meta_path):
            return None
        return self._native()

    def _video(self, id_: object) -> int:
        video = self._native().lookup(id_str(id_))
        if video is None:
            raise KeyError(id_str(id_))
        return video

    @property
    def indexed(self) -> bool:
        """True when reads go through the checksummed index (frame CRCs verified)."""
        return self._native_meta and self._native().indexed

    @property
    def published_len(self) -> int:
        """Where the chunk's published records end in the data file."""
        if not self._native_meta:
            return _records_end(self.meta_dict)
        return self._native().published_len

    def _sanity_records_end(self) -> int | None:
        """See :func:`index_records_end`."""
        if self._fast_reads() and self._writer is None and self._native_or_none() is not None:
            return self._native().published_len
        return None

    @property
    def meta_dict(self) -> MetaDict:
        """gulpio2's ``{id: {'frame_info': [...], 'meta_data': [...]}}`` of this chunk.

        With the built-in serializer, entries are built per video on first access (the
        mapping is an ``OrderedDict`` that compares, prints, pickles and serialises like the
        one gulpio2 loads); while writing it is a snapshot of what was appended so far.
        """
        if self._writer is not None:
            self._commit()
            snapshot: MetaDict = json.loads(self._writer.meta_text(), object_pairs_hook=OrderedDict)
            return snapshot
        if self._meta is None:
            self._meta = self._get_or_create_dict()
        return self._meta

    @meta_dict.setter
    def meta_dict(self, value: MetaDict) -> None:
        self._meta = value

    def _get_or_create_dict(self) -> MetaDict:
        """The chunk's metadata as stored (an empty ``OrderedDict`` if there is no file)."""
        if not self._native_meta:
            if os.path.exists(self._meta_path):
                loaded: MetaDict = self.serializer.load(self.meta_file_path)
                return loaded
            return OrderedDict()
        reader = self._native_or_none()
        if reader is None:
            return OrderedDict()

        def load(id_: str) -> MetaDict:
            video = reader.lookup(id_)
            if video is None:
                raise KeyError(id_)
            return native_entry(reader, video)

        ids = reader.ids()

        def load_many() -> Iterator[tuple[str, MetaDict]]:
            for video, id_ in enumerate(ids):
                yield id_, native_entry(reader, video)

        return LazyMetaDict.build(ids, load, load_many=load_many)

    @staticmethod
    def _default_factory() -> MetaDict:
        return OrderedDict([("frame_info", []), ("meta_data", [])])

    @staticmethod
    def _pad_image(number: int) -> int:
        return (4 - (number % 4)) % 4

    def _get_frame_infos(self, id_: object) -> tuple[list[Any], dict[str, Any]] | None:
        """``([ImgInfo, ...], dict(meta_data[0]))`` for a known id, else ``None`` (gulpio2)."""
        id_ = str(id_)
        if id_ in self.meta_dict:
            return self._get_or_create_img_info(id_), self._copy_meta_data(id_)
        return None

    def _copy_meta_data(self, id_: str) -> dict[str, Any]:
        meta_data = self.meta_dict[id_]["meta_data"]
        return dict(meta_data[0]) if meta_data else {}

    def _get_or_create_img_info(self, id_: str) -> list[Any]:
        if id_ not in self._img_info:
            self._img_info[id_] = [ImgInfo(*info) for info in self.meta_dict[id_]["frame_info"]]
        return self._img_info[id_]

    def keys(self) -> list[str]:
        """Video ids in file order."""
        if self._fast_reads() and self._writer is None:
            reader = self._native_or_none()
            return [] if reader is None else reader.ids()
        return list(self.meta_dict.keys())

    def __len__(self) -> int:
        return len(self.keys())

    def __contains__(self, id_: object) -> bool:
        if self._fast_reads() and self._writer is None:
            reader = self._native_or_none()
            return reader is not None and reader.lookup(id_str(id_)) is not None
        return id_str(id_) in self.meta_dict

    def num_frames(self, id_: object) -> int:
        if self._fast_reads():
            return self._native().frame_count(self._video(id_))
        return len(self._infos(id_)[0])

    def timestamps(self, id_: object) -> VideoTimes | None:
        """The video's frame times (a :class:`~gulpio_rs._times.VideoTimes`), or ``None``:
        as :meth:`gulpio_rs.GulpDirectory.timestamps`."""
        id_ = id_str(id_)
        if self._fast_reads():
            video = self._video(id_)
            chunk = self._native()
            meta_data = json.loads(chunk.meta_data(video) or "[]")
            count = chunk.frame_count(video)
        else:
            if id_ not in self.meta_dict:
                raise KeyError(id_)
            entry = self.meta_dict[id_]
            meta_data, count = entry.get("meta_data", []), len(entry["frame_info"])
        times: VideoTimes | None = find_times(meta_data, count, where=self._data_path, video_id=id_)
        return times

    def _infos(self, id_: object) -> tuple[list[Any], dict[str, Any]]:
        found = self._get_frame_infos(id_str(id_))
        if found is None:
            raise KeyError(id_str(id_))
        return found

    def read_frames(
        self, id_: object, slice_: Any = None
    ) -> tuple[list[np.ndarray], dict[str, Any]]:
        """``(frames, meta)`` for one video; ``slice_`` may be a slice, list, array or int."""
        if not self._fast_reads():
            infos, meta = self._infos(id_)
            decode = self.jpeg_decoder or _default_decode
            return [decode(jpeg) for jpeg in self._records(_select(infos, slice_))], meta
        video = self._video(id_)
        chunk = self._native()
        frames = read_frames_of(
            chunk,
            video,
            slice_,
            self.jpeg_decoder,
            self.check_data,
            self.colorspace,
            self.fallback_decoder,
        )
        return frames, first_meta(chunk.meta_data(video))

    def _records(self, infos: Iterable[Any]) -> list[bytes]:
        """The JPEG bytes of each ``ImgInfo``, read from ``fp`` when it is open for reading
        (gulpio2's way), else from a file opened for the call."""
        fp = self.fp
        usable = fp is not None and not fp.closed and fp.readable()
        with (
            nullcontext(fp) if fp is not None and usable else open_for_reading(self._data_path) as f
        ):
            out = []
            for info in infos:
                f.seek(info.loc)
                record = f.read(info.length)
                out.append(record[: len(record) - info.pad])
            return out

    def frame_bytes(self, id_: object, slice_: Any = None) -> list[memoryview]:
        """Read-only views of the stored JPEG bytes (zero-copy and CRC-checked when reading
        through the Rust core)."""
        if not self._fast_reads():
            infos, _meta = self._infos(id_)
            return [memoryview(b) for b in self._records(_select(infos, slice_))]
        video = self._video(id_)
        chunk = self._native()
        return chunk.frame_views(video, slice_, self.check_data)

    def __getitem__(self, element: object) -> tuple[list[np.ndarray], dict[str, Any]]:
        return self.read_frames(*extract_input_for_getitem(element))

    def iter_all(
        self, accepted_ids: Iterable[object] | None = None, shuffle: bool = False
    ) -> Iterator[tuple[list[np.ndarray], dict[str, Any]]]:
        """Yield ``(frames, meta)`` for every video (optionally filtered / shuffled)."""
        ids = self.keys()
        if accepted_ids is not None:
            accepted = {str(a) for a in accepted_ids}
            ids = [i for i in ids if i in accepted]
        if shuffle:
            np.random.shuffle(ids)
        with self.open("rb"):
            for id_ in ids:
                yield self.read_frames(id_)

    def __iter__(self) -> Iterator[tuple[list[np.ndarray], dict[str, Any]]]:
        return self.iter_all()

    def write_index(self) -> int:
        """Write the checksummed index for this chunk (for data written by gulpio/gulpio2)."""
        if not self._native_meta:
            raise ValueError(f"{self.meta_file_path}: only JSON chunks can be indexed")
        n = _native.write_index(self._data_path, self._meta_path)
        self._invalidate()
        return n

    # -- writing -----------------------------------------------------------------------------
    def _open_for_reading(self) -> IO[Any] | None:
        """``fp`` for ``open('rb')``: the data file, as in gulpio2."""
        if _open_replaced():
            return builtins.open(self._data_path, "rb")
        return open_for_reading(self._data_path)

    @contextmanager
    def open(self, flag: str = "rb") -> Iterator[None]:
        """gulpio2's context manager (yields ``None``): ``'rb'`` opens ``fp`` for reading,
        ``'wb'`` starts the chunk afresh, ``'ab'`` adds to it; writes are published by
        :meth:`flush` and on a normal exit."""
        if flag not in ("rb", "wb", "ab"):
            raise NotImplementedError(f"This file does not support the mode: '{flag}'")
        if flag == "rb":
            previous, self.fp = self.fp, self._open_for_reading()
            try:
                yield None
            finally:
                if self.fp is not None:
                    self.fp.close()
                self.fp = previous
            return
        if self._writer is not None or (self.fp is not None and self.fp.writable()):
            raise ValueError(f"{self.data_file_path} is already open for writing")
        if _native.is_remote_url(self._data_path) or _native.is_remote_url(self._meta_path):
            raise NotImplementedError(
                f"{self.data_file_path}: a chunk of a remote dataset cannot be opened with "
                f"{flag!r}: objects cannot be extended or rewritten in place under readers. "
                "Write new chunks with GulpDirectory(url).new_chunks(n) (each is staged on "
                "local disk and published when its open('wb') block ends) or with "
                "GulpIngestor(..., output_folder=url) (docs/REMOTE.md)"
            )
        if self._native_meta:
            with self._native_writing(flag):
                yield None
        else:
            with self._serializer_writing(flag):
                yield None

    @contextmanager
    def _native_writing(self, flag: str) -> Iterator[None]:
        writer = _native.NativeWriter(
            self._data_path, self._meta_path, append=flag == "ab", new=self._new
        )
        self._writer = writer
        self._pending.clear()
        try:
            yield
        except BaseException:
            self._writer = None
            self._pending.clear()
            writer.abort()
            self._invalidate()
            raise
        try:
            if type(self).flush is not GulpChunk.flush:
                self.flush()  # gulpio2 calls flush() on exit; an override must see it
            self._commit()
        except BaseException:
            self._writer = None
            writer.abort()
            self._invalidate()
            raise
        self._writer = None
        try:
            writer.close()
            self._adopt(*writer.paths)
        finally:
            self._invalidate()

    @contextmanager
    def _serializer_writing(self, flag: str) -> Iterator[None]:
        if flag == "wb":
            # gulpio2 kept the old entries, whose offsets no longer match the truncated file.
            self._meta = OrderedDict()
            self._img_info.clear()
        _remove_index(self._data_path)
        if _open_replaced():
            self.fp = fp = builtins.open(self._data_path, flag)
        else:
            self.fp = fp = open_for_writing(self._data_path, flag)
        try:
            yield
            self.flush()
        finally:
            fp.close()
            self.fp = None

    def _adopt(self, data: str, meta: str) -> None:
        """The writer published the chunk at ``data``/``meta`` (a new chunk may have taken
        another number): the paths follow it, keeping the type they were given as."""
        self._new = False
        if data != self._data_path:
            self.data_file_path = _path_like(self.data_file_path, data)
        if meta != self._meta_path:
            self.meta_file_path = _path_like(self.meta_file_path, meta)

    def _invalidate(self) -> None:
        self._reader = None
        self._meta = None
        self._img_info.clear()

    def flush(self) -> None:
        """Publish everything appended so far. Through the Rust core this is fsynced and
        atomically visible to readers; with another serializer it is gulpio2's
        ``fp.flush()`` plus ``serializer.dump(meta_dict, meta_file_path)``."""
        if self._writer is not None:
            self._commit()
            self._writer.publish()
            self._adopt(*self._writer.paths)
            self._reader = None
            self._img_info.clear()
            return
        if self.fp is None or not self.fp.writable():
            raise ValueError(f"{self.data_file_path} is not open for writing")
        self.fp.flush()
        self.serializer.dump(self.meta_dict, self.meta_file_path)

    def _check_writable(self) -> None:
        if self._writer is None and (self.fp is None or not self.fp.writable()):
            raise ValueError(
                f"{self.data_file_path} is not open for writing; use `with chunk.open('wb'):`"
            )

    def append(self, id_: object, meta_data: Any, frames: Iterable[Any]) -> None:
        """Append one video: ``frames`` are uint8 arrays (encoded as JPEG) or JPEG bytes
        (stored as they are); ``meta_data`` must be serialisable. As in gulpio2 this is
        ``_append_meta`` then ``_write_frames`` (which calls ``_write_frame`` per frame)."""
        self._check_writable()
        if _is_segment_video(frames):
            self._append_segments(id_, meta_data, frames)
            return
        if self._writer is None:
            self._append_meta(id_, meta_data)
            self._write_frames(id_, frames)
            return
        before = {k: (len(m), len(f)) for k, (m, f) in self._pending.items()}
        try:
            self._append_meta(id_, meta_data)
            self._write_frames(id_, frames)
        except BaseException:
            # A frame that does not encode: the video is not half-collected for the next commit.
            for key in list(self._pending):
                if key not in before:
                    del self._pending[key]
                else:
                    metas, jpegs = self._pending[key]
                    del metas[before[key][0] :], jpegs[before[key][1] :]
            raise
        self._commit()

    def _append_segments(self, id_: object, meta_data: Any, video: Any) -> None:
        """A video encoded as AV1 segments (``encoding="video"``, docs/FORMAT.md §6)."""
        if self._writer is None:
            raise ValueError(
                "videos stored as segments are written by gulpio-rs's own writer; this chunk "
                "was opened with a replaced writer or file object (gulpio2's code paths)"
            )
        self._commit()
        self._writer.append_segments(
            id_str(id_),
            json.dumps(meta_data),
            [(s.data, s.frames) for s in video.segments],
            width=video.width,
            height=video.height,
            gop=video.gop,
            matrix=video.matrix_code,
            full_range=video.full_range,
        )

    def _append_meta(self, id_: object, meta_data: Any) -> None:
        id_ = id_str(id_)
        if self._writer is not None:
            self._pending_entry(id_)[0].append(meta_data)
            return
        meta = self.meta_dict
        if id_ not in meta:
            meta[id_] = self._default_factory()
        meta[id_]["meta_data"].append(meta_data)

    def _write_frames(self, id_: object, frames: Iterable[Any]) -> None:
        for frame in frames:
            self._write_frame(id_, frame)

    def _write_frame(self, id_: object, image: Any) -> None:
        id_ = id_str(id_)
        self._check_writable()
        jpeg = bytes(image) if isinstance(image, _BYTES) else encoder_lookup()(image)
        if not jpeg:
            raise ValueError(f"video {id_!r}: an empty frame cannot be stored")
        if self._writer is not None:
            self._pending_entry(id_)[1].append(jpeg)
            return
        fp = self.fp
        assert fp is not None  # _check_writable: no native writer, so a writable fp
        pad = self._pad_image(len(jpeg))
        record = jpeg + b"\0" * pad
        info = ImgInfo(loc=fp.tell(), pad=pad, length=len(record))
        meta = self.meta_dict
        if id_ not in meta:
            meta[id_] = self._default_factory()
        meta[id_]["frame_info"].append(info)
        fp.write(record)

    def _pending_entry(self, id_: str) -> tuple[list[Any], list[bytes]]:
        entry = self._pending.get(id_)
        if entry is None:
            entry = self._pending[id_] = ([], [])
        return entry

    def _commit(self) -> None:
        """Hand what ``_append_meta`` / ``_write_frame`` collected to the Rust writer, which
        takes a video's frames together with one metadata element."""
        if not self._pending or self._writer is None:
            return
        pending, self._pending = self._pending, OrderedDict()
        for id_, (metas, jpegs) in pending.items():
            if not metas:
                raise ValueError(
                    f"video {id_!r}: frames were written without _append_meta(); with the "
                    "JSON serializer frames are stored together with a metadata element"
                )
            self._writer.append(id_, json.dumps(metas[0]), jpegs)
            for meta in metas[1:]:
                self._writer.append(id_, json.dumps(meta), [])

    # -- pickling ----------------------------------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        if self._writer is not None or (self.fp is not None and not self.fp.closed):
            raise TypeError(f"{self.data_file_path} is open; a chunk pickles only when closed")
        state["fp"] = None
        state["_reader"] = None
        state["_img_info"] = {}
        if self._native_meta:
            state["_meta"] = None  # rebuilt from the files on first access
        return state

    def __repr__(self) -> str:
        def shown(path: Any) -> Any:  # a URL with credentials is never printed (docs/REMOTE.md)
            return _native.redact_url(path) if isinstance(path, str) else path

        return f"GulpChunk({shown(self.data_file_path)!r}, {shown(self.meta_file_path)!r})"


def _is_segment_video(frames: object) -> bool:
    # Without importing the encoder's module (PyAV) for every JPEG append.
    return type(frames).__name__ == "SegmentVideo" and hasattr(frames, "segments")


def _path_like(original: Any, path: str) -> Any:
    """``path`` in the form ``original`` was given in (``str``, ``bytes`` or a path class)."""
    if isinstance(original, str):
        return path
    if isinstance(original, bytes):
        return os.fsencode(path)
    kind: Any = type(original)  # a path class: constructed from a str
    return kind(path) if isinstance(original, os.PathLike) else path


def _records_end(meta_dict: MetaDict) -> int:
    """Where the last record ends according to ``frame_info`` (0 without frames)."""
    end = 0
    for entry in meta_dict.values():
        for info in entry["frame_info"]:
            end = max(end, int(info[0]) + int(info[2]))
    return end


def _remove_index(data_path: str) -> None:
    """Drop ``data_k.gidx``: data written around the Rust core would make it stale."""
    root, ext = os.path.splitext(data_path)
    if ext == ".gulp":
        try:
            os.remove(root + ".gidx")
        except FileNotFoundError:
            pass


def new_chunk(
    data_file_path: str, meta_file_path: str, jpeg_decoder: Decoder | None = None
) -> GulpChunk:
    """A chunk from ``GulpDirectory.new_chunks`` (``directory.py``): its first publication
    takes the first free chunk number of its folder, since another writer may have taken
    this one meanwhile."""
    chunk = GulpChunk(data_file_path, meta_file_path, jpeg_decoder=jpeg_decoder)
    chunk._new = True
    return chunk


def index_records_end(chunk: GulpChunk) -> int | None:
    """Where ``chunk``'s published records end, straight from its index, when its
    ``meta_dict`` is this class's own (``sanity_utils`` then need not build every entry);
    None otherwise."""
    return chunk._sanity_records_end()
