"""Exception hierarchy of gulpio-rs.

Every error about stored data derives from :class:`GulpError` and carries ``path`` (the file),
``video_id`` and ``frame`` (``None`` where they do not apply). Each class also derives from the
builtin exception that gulpio2 code would have caught for the same situation, so existing
``except ValueError`` / ``except AssertionError`` handlers keep working.

:data:`__all__` is the one list of these names: the package root exports exactly them (with
the ingest's errors, defined in ``ingest.report``).

Unknown ids raise :class:`KeyError`, out-of-range frames :class:`IndexError`, and operating
system failures :class:`OSError` (``FileNotFoundError``, ``PermissionError``, ...). Whenever a
message names a video or frame, the exception carries them as attributes too: also the
``KeyError`` of an unknown id (``video_id``), the ``IndexError`` of a frame out of range and
the ``ValueError`` of an argument that does not fit a stored video (``path``, ``video_id``,
``frame``).
"""

from __future__ import annotations

from typing import Any


class GulpError(Exception):
    """Base class of all gulpio-rs data errors."""

    path: str | None = None
    video_id: str | None = None
    frame: int | None = None


class FormatError(GulpError, ValueError):
    """A file is malformed: bad JSON, bad index, truncated data, a limit exceeded."""


class StaleIndexError(FormatError):
    """A checksummed index no longer matches its ``.gulp``/``.gmeta`` (never trusted)."""


class CorruptDataError(GulpError, ValueError):
    """Stored frame bytes do not match their CRC32: the data was damaged after writing."""


class DecodeError(GulpError, ValueError):
    """A frame's JPEG bytes could not be decoded."""


class UnsupportedJpegError(DecodeError):
    """A valid JPEG that the built-in decoder does not support (arithmetic coding, 12-bit).

    Pass ``jpeg_decoder=`` to read such data with another decoder.
    """


class DuplicateIdError(GulpError, AssertionError):
    """The same video id appears in two chunks (gulpio2 raised ``AssertionError`` here)."""


class RemoteError(GulpError, OSError):
    """A request to an object store or HTTP server failed for good: after retries with backoff
    for transient faults (timeouts, resets, 429, 5xx, short bodies), or at once for errors
    that retrying cannot fix. ``path`` is the URL; messages never contain secrets."""


class RemoteNotFoundError(RemoteError, FileNotFoundError):
    """The object, prefix or bucket does not exist (HTTP 404)."""


class RemotePermissionError(RemoteError, PermissionError):
    """The credentials in use were refused (HTTP 401/403); the message says which credential
    source was used, never the secret."""


class RemoteConfigError(RemoteError, ValueError):
    """The URL or ``storage_options`` cannot be used (unknown key, bad value, scheme)."""


class UnsafeFileError(GulpError, PermissionError):
    """A write, truncation or deletion was refused to protect files: the dataset file is a
    symbolic link (it could lead outside the dataset), not a regular file, or has other hard
    links. gulpio never changes a file through a symlink; replace the link with the file."""


class WriteConflictError(GulpError, FileExistsError):
    """Another writer got there first: the chunk is being written by another writer (one
    chunk has one writer at a time), or another writer published a chunk under the name this
    one was to create. Nothing of this writer's was published; chunks from
    ``GulpDirectory.new_chunks`` take the next free number instead of failing."""


class VideoDecodeError(GulpError, ValueError):
    """A video could not be decoded: not a video, no video stream, corrupt data, no frames.

    ``path`` names the file; ``frame`` is the number of frames decoded before the failure
    (``None`` when the file could not be opened at all). Raised by :mod:`gulpio_rs.video`.
    """

    def __init__(self, message: str, *, path: str | None = None, frame: int | None = None):
        super().__init__(message)
        self.path = path
        self.frame = frame

    def __reduce__(self) -> tuple[Any, tuple[str, str | None, int | None]]:
        # Keeps ``path``/``frame`` when the error crosses a process boundary (ingest workers).
        return _rebuild_video_decode_error, (str(self), self.path, self.frame)


def _rebuild_video_decode_error(
    message: str, path: str | None, frame: int | None
) -> VideoDecodeError:
    return VideoDecodeError(message, path=path, frame=frame)


class VideoEncodeError(GulpError, ValueError):
    """The frames cannot be encoded as video segments (bad shapes, an encoder missing from
    PyAV's FFmpeg, or a segment the built-in decoder does not read back as written)."""


class GulpWarning(UserWarning):
    """Base class of gulpio-rs warnings."""


class BrokenChunkWarning(GulpWarning):
    """A chunk of a directory could not be used (or its index was ignored) while opening."""


class EmptyDirectoryWarning(GulpWarning):
    """A ``GulpDirectory`` was opened on a folder (or prefix) with no chunks: ``len`` is 0.
    Right before writing into it (``new_chunks``); otherwise usually a wrong path. Filter it
    with ``warnings.filterwarnings("ignore", category=EmptyDirectoryWarning)``."""


class ManifestWarning(GulpWarning):
    """A dataset has a manifest (docs/FORMAT.md §7) that could not be used, so it was opened by
    listing every chunk (slower at scale, never wrong): the message says why, and ``gulpio
    index`` brings the manifest up to date."""


class PickleMetadataWarning(GulpWarning):
    """A chunk was given ``pickle_serializer``: its metadata is unpickled, which runs code
    from the file. gulpio-rs never does this unless the caller passes that serializer."""


class NoTimestampsWarning(GulpWarning):
    """A dataset asked to sample clips by time (``fps=`` / ``clip_seconds=``) holds videos
    stored without frame timestamps: their frames are taken as evenly spaced at an assumed
    rate, which the message names. Shown once per dataset."""


__all__ = [
    "GulpError",
    "FormatError",
    "StaleIndexError",
    "CorruptDataError",
    "DecodeError",
    "UnsupportedJpegError",
    "DuplicateIdError",
    "RemoteError",
    "RemoteNotFoundError",
    "RemotePermissionError",
    "RemoteConfigError",
    "UnsafeFileError",
    "WriteConflictError",
    "VideoDecodeError",
    "VideoEncodeError",
    "GulpWarning",
    "BrokenChunkWarning",
    "EmptyDirectoryWarning",
    "ManifestWarning",
    "PickleMetadataWarning",
    "NoTimestampsWarning",
]
