"""The chunks a :class:`~gulpio_rs.directory.GulpDirectory` hands out: those it reads
(sharing its open reader) and the new ones of a remote dataset (staged on local disk and
uploaded when written)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any, Protocol

from . import _native
from ._choices import Colorspace
from ._names import chunk_names, chunk_paths
from ._native import Chunk as NativeChunk
from ._native import NativeDirectory
from ._reading import Decoder
from .chunk import GulpChunk


class Owner(Protocol):
    """What these chunks use of the ``GulpDirectory`` that hands them out."""

    jpeg_decoder: Decoder | None
    check_data: bool
    colorspace: Colorspace | None
    fallback_decoder: Decoder | None

    @property
    def path(self) -> str: ...
    @property
    def is_remote(self) -> bool: ...
    @property
    def native(self) -> NativeDirectory: ...
    def native_chunk(self, pos: int) -> NativeChunk: ...


class RemoteNewChunk(GulpChunk):
    """A new chunk of a remote directory: written (crash-safe) to a local staging folder and
    uploaded when its ``open('wb')`` block ends without an error. ``url`` is where it goes."""

    def __init__(self, directory: Owner, number: int):
        self._stage = tempfile.mkdtemp(prefix="gulpio-stage-")
        super().__init__(
            *chunk_paths(self._stage, number),
            jpeg_decoder=directory.jpeg_decoder,
        )
        self._directory = directory
        self.number = number
        self.url = f"{directory.path.rstrip('/')}/{chunk_names(number)[0]}"

    @contextmanager
    def open(self, flag: str = "rb") -> Iterator[None]:
        if flag == "ab":
            raise NotImplementedError(
                f"{self.url}: published remote chunks cannot be appended to (objects cannot be "
                "extended); write a new chunk instead"
            )
        try:
            with super().open(flag) as fp:
                yield fp
            if flag == "wb":
                # Another writer may have published this number meanwhile: the chunk then
                # takes the next free one, never replacing theirs.
                self.number = self._directory.native.upload_chunk(
                    self.data_file_path, self.meta_file_path, self.number, first_free=True
                )
                self.url = f"{self._directory.path.rstrip('/')}/{chunk_names(self.number)[0]}"
        finally:
            if flag == "wb":
                shutil.rmtree(self._stage, ignore_errors=True)

    def __repr__(self) -> str:
        return f"GulpChunk({_native.redact_url(self.url)!r}, staged in {self._stage!r})"


class DirectoryChunk(GulpChunk):
    """A chunk handed out by a GulpDirectory: shares the directory's open reader."""

    def __init__(self, directory: Owner, pos: int, data: str, meta: str):
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

    def _native(self) -> NativeChunk:
        reader: NativeChunk | None = self._reader
        if reader is None:
            reader = self._reader = self._directory.native_chunk(self._pos)
        return reader

    def _native_or_none(self) -> NativeChunk:
        return self._native()

    def _open_for_reading(self) -> IO[Any] | None:
        # A remote chunk has no local file; its reads never use fp.
        return None if self._directory.is_remote else super()._open_for_reading()

    @contextmanager
    def open(self, flag: str = "rb") -> Iterator[None]:
        if flag in ("wb", "ab") and self._directory.is_remote:
            raise NotImplementedError(
                f"{self._directory.path}: chunk {self.data_file_path} of a remote dataset "
                f"cannot be opened with {flag!r}: published objects are never extended or "
                "rewritten under readers. Write new chunks with "
                "GulpDirectory(url).new_chunks(n) (each is staged on local disk and published "
                "when its open('wb') block ends) or GulpIngestor(..., output_folder=url) "
                "(docs/REMOTE.md)"
            )
        with super().open(flag) as fp:
            yield fp
