"""Writing one adapter slice into one chunk (gulpio2's ``ChunkWriter``)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Protocol

from .. import _encode_options
from .._encode_options import GULPIO2, EncodeOptions
from .._reading import id_str
from .._times import time_element
from ..chunk import GulpChunk
from ..errors import GulpError
from .encoder import FrameEncoder
from .report import ChunkResult, IngestError

if TYPE_CHECKING:
    from .av1 import SegmentVideo


def _fail(result: ChunkResult, id_: str, reason: str, strict: bool) -> None:
    if strict:
        raise IngestError(f"video {id_!r}: {reason}")
    result.failures.append((id_, reason))


def _done(encoder: Encoder, video: dict[str, Any]) -> Future[Any]:
    """The encode of ``video`` run here and now, as a finished future (errors kept in it)."""
    job: Future[Any] = Future()
    try:
        job.set_result(_encode(encoder, video["frames"], video.get("size")))
    except BaseException as e:  # handed to settle(), which reports or re-raises it
        job.set_exception(e)
    return job


def _encode(encoder: Encoder, frames: Any, size: int | None) -> Any:
    """What the chunk stores for a video: the encoder's ``encode_stored`` when it has one (a
    ``FrameEncoder``: JPEG frames or, with ``encoding="video"``, a ``SegmentVideo``), else its
    ``encode`` (a stand-in)."""
    stored = getattr(encoder, "encode_stored", None)
    return stored(frames, size) if stored is not None else encoder.encode(frames, size)


def _stored_bytes(stored: Any) -> int:
    nbytes = getattr(stored, "nbytes", None)
    return int(nbytes) if nbytes is not None else sum(len(j) for j in stored)


class _Discard(Exception):
    """Leaves ``open('wb')`` without publishing (its abort path)."""


class Adapter(Protocol):
    """What writing a chunk needs of an adapter (gulpio2's contract, or a stand-in)."""

    def iter_data(self, slice_element: Any = None, /) -> Iterable[dict[str, Any]]: ...


class Encoder(Protocol):
    """What writing a chunk needs of a ``FrameEncoder`` (or a stand-in for stored frames:
    what the chunk stores, JPEG bytes or a ``SegmentVideo``)."""

    def encode(self, frames: Any, size: int | None = None, /) -> list[bytes] | SegmentVideo: ...


def write_chunk(
    adapter: Adapter,
    output_chunk: GulpChunk,
    input_slice: slice | list[slice],
    *,
    encoder: Encoder,
    number: int = -1,
    strict: bool = False,
    existing_ids: Callable[[str], str | None] | None = None,
    refused_ids: Callable[[str], str | None] | None = None,
    progress: Callable[[int, int], None] | None = None,
    before_publish: Callable[[ChunkResult, set[str]], None] | None = None,
    publish_empty: bool = True,
    already_stored: int = 0,
    skip_truncated: bool = False,
) -> ChunkResult:
    """Writes the videos of ``adapter.iter_data(input_slice)`` (of each slice in turn, for a
    list) into ``output_chunk`` and publishes it atomically. A video that cannot be written (an
    adapter ``'error'``, no frames, a frame that does not decode, a duplicate id) is skipped
    and reported, or raises :class:`IngestError` under ``strict``, in which case nothing of the
    chunk is published. A video whose id ``existing_ids`` knows is already stored: skipped and
    counted (``already_stored``), not a failure; one ``refused_ids`` gives a reason for is
    skipped as a failure with that reason.
    ``before_publish(result, ids)`` runs after the last append, before publication; if it
    raises, nothing is published. With ``publish_empty=False`` a chunk whose videos were all
    skipped is not published at all (``result.published`` is False); gulpio2's
    ``ChunkWriter`` keeps its behaviour and publishes it. ``already_stored``: items of the
    slice the caller left out because the dataset holds them (counted in the result).

    An item with ``'truncated'`` (why its file looks cut short: the built-in video adapters
    compare the frames decoded with what the container declares) is stored and listed in
    ``result.truncated``, or with ``skip_truncated`` skipped as a failure. One with
    ``'audio_streams'`` (how many its file had) is counted in ``result.audio_ignored``.
    """
    result = ChunkResult(chunk=number, already_stored=already_stored)
    seen: set[str] = set()
    # Any object with gulpio2's `open`/`append` will do (gulpio2's own tests pass a MagicMock):
    # its class need not define `append`.
    own_append = getattr(type(output_chunk), "append", None) is GulpChunk.append
    # With more than one encoder thread, one video is encoded (on those threads, without the
    # GIL) while the adapter produces the next: for adapters that do real work per frame
    # (decoding, reading, augmenting) this overlaps the two instead of alternating them. With
    # one thread (a worker per core) the encode runs inline: a second Python thread there
    # only fought the adapter for the GIL (more CPU per frame: docs/DECISIONS.md, "Writing").
    opts = getattr(encoder, "opts", None)  # (a stand-in encoder may have none)
    pipelined = own_append and opts is not None and opts.threads > 1
    pending: tuple[dict[str, Any], str, Future[Any] | None] | None = None

    def settle() -> None:
        nonlocal pending
        if pending is None:
            return
        video, id_, job = pending
        pending = None
        try:
            stored = job.result() if job is not None else video["frames"]
            elements = video.get("meta_data")
            if own_append and elements:
                # A whole meta_data list, verbatim (a video copied from another dataset:
                # `transcode`), frame times included.
                output_chunk.append(video.get("id"), elements[0], stored)
                for element in elements[1:]:
                    output_chunk.append(video.get("id"), element, [])
            else:
                times = _times_of(video, len(stored)) if own_append else None
                # Through append, as gulpio2's ChunkWriter: a GulpChunk subclass that overrides
                # it sees every video (and gets what gulpio2's got: the adapter's frames).
                output_chunk.append(video.get("id"), video.get("meta", {}), stored)
                if times is not None:
                    # The reserved meta_data element after the adapter's (docs/FORMAT.md §2.1).
                    output_chunk.append(video.get("id"), times, [])
        except (GulpError, ValueError, OSError) as e:
            _fail(result, id_, str(e), strict)
            if progress is not None:
                progress(1, 0)
            return
        seen.add(id_)
        if video.get("truncated"):
            result.truncated.append((id_, str(video["truncated"])))
        if video.get("audio_streams"):
            result.audio_ignored += 1
        result.videos += 1
        result.frames += len(stored)
        if own_append:
            result.bytes += _stored_bytes(stored)
        if progress is not None:
            progress(1, len(stored))

    try:
        with output_chunk.open("wb"), ThreadPoolExecutor(1, "gulpio-ingest") as ahead:
            # (The executor starts no thread until the first submit.)
            for video in _videos(adapter, input_slice):
                id_ = id_str(video.get("id"))
                if pending is not None and pending[1] == id_:
                    settle()  # whether this id is a duplicate depends on how that one ends
                failure = None
                if existing_ids is not None and existing_ids(id_) is not None:
                    result.already_stored += 1
                    if progress is not None:
                        progress(1, 0)
                    continue
                if video.get("error"):
                    failure = str(video["error"])
                elif refused_ids is not None and (reason := refused_ids(id_)) is not None:
                    failure = reason
                elif id_ in seen:
                    failure = "duplicate id in this chunk"
                elif video.get("frames") is None or len(video["frames"]) == 0:
                    failure = "no frames"
                elif skip_truncated and video.get("truncated"):
                    failure = f"{video['truncated']} (skipped: skip_truncated)"
                if failure is not None:
                    settle()  # failures are reported in the adapter's order
                    _fail(result, id_, failure, strict)
                    if progress is not None:
                        progress(1, 0)
                    continue
                if pipelined:
                    job = ahead.submit(_encode, encoder, video["frames"], video.get("size"))
                elif own_append:
                    job = _done(encoder, video)
                else:
                    job = None
                settle()
                pending = (video, id_, job)
            settle()
            if not seen and not publish_empty:
                result.published = False
                raise _Discard
            if before_publish is not None:
                before_publish(result, seen)
    except _Discard:
        pass
    return result


def _times_of(video: dict[str, Any], frame_count: int) -> dict[str, Any] | None:
    """The timestamps element of an item with ``'timestamps'`` (and optional ``'fps'`` and
    ``'end'``), or None; ValueError (the video is skipped and reported) when they do not fit
    its frames."""
    timestamps = video.get("timestamps")
    if timestamps is None:
        return None
    if len(timestamps) != frame_count:
        raise ValueError(
            f"{len(timestamps)} timestamps for {frame_count} frames: the item's 'timestamps' "
            "must give one time per frame"
        )
    return time_element(timestamps, fps=video.get("fps"), end=video.get("end"))


def _videos(adapter: Adapter, input_slice: slice | list[slice]) -> Iterator[dict[str, Any]]:
    if isinstance(input_slice, list):
        for part in input_slice:
            yield from adapter.iter_data(part)
    else:
        yield from adapter.iter_data(input_slice)


class ChunkWriter:
    """Writes the videos of one adapter slice into one chunk (gulpio2's ``ChunkWriter``).

    Frames are stored as gulpio2 stores them (arrays at q90 4:4:4, ``GULPIO2``; with gulpio2's
    quality knob ``utils._JPEG_WRITE_QUALITY`` changed, at that quality: the rule gulpio2's
    layer installs as ``_encode_options.unset_settings``, applied when a chunk is written)
    unless ``options`` says otherwise. Returns the ids that were skipped.
    """

    def __init__(self, adapter: Adapter, options: EncodeOptions | None = None) -> None:
        self.adapter = adapter
        self.options = options
        self.skipped: list[str] = []

    def write_chunk(self, output_chunk: GulpChunk, input_slice: slice | list[slice]) -> list[str]:
        options = self.options or _encode_options.unset_settings(GULPIO2)
        with FrameEncoder(options) as encoder:
            r = write_chunk(self.adapter, output_chunk, input_slice, encoder=encoder)
        for id_, reason in r.failures:
            warnings.warn(f"Failed to write video with id: {id_}; {reason}", stacklevel=2)
        self.skipped.extend(id_ for id_, _ in r.failures)
        return self.skipped
