"""``GulpChunk``: one chunk (``data_{k}.gulp`` + ``meta_{k}.gmeta`` + ``data_{k}.gidx``), read
through the Rust core and written with its crash-safe writer (gulpio2's API)."""

from __future__ import annotations

import json
import os
import warnings
from collections import OrderedDict
from contextlib import contextmanager

import numpy as np

from . import _native
from ._reading import _first_meta, _id_str, _read, _selection, extract_input_for_getitem
from .errors import BrokenChunkWarning
from .serializers import JSONSerializer, json_serializer


def _no_encoder():
    raise RuntimeError("gulpio_rs.fileio was not imported, so no frame encoder is installed")


#: Returns the function :meth:`GulpChunk.append` encodes arrays with. ``gulpio_rs.fileio``
#: installs one that reads its own ``img_to_jpeg_bytes`` at call time, so monkeypatching
#: ``fileio.img_to_jpeg_bytes`` (as gulpio2 users do) takes effect without this module
#: importing the facade back.
encoder_lookup = _no_encoder


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
        encode = encoder_lookup()
        jpegs = [f if isinstance(f, (bytes, bytearray, memoryview)) else encode(f) for f in frames]
        self._writer.append(_id_str(id_), json.dumps(meta_data), jpegs)

    def __repr__(self):
        return f"GulpChunk({self.data_file_path!r}, {self.meta_file_path!r})"
