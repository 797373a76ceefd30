"""Writing one adapter slice into one chunk (gulpio2's ``ChunkWriter``)."""

from __future__ import annotations

import warnings
from collections.abc import Callable

from .._frames import EncodeOptions, FrameEncoder
from .._reading import _id_str
from ..chunk import GulpChunk
from ..errors import GulpError
from .report import ChunkResult, IngestError


def _fail(result: ChunkResult, id_: str, reason: str, strict: bool) -> None:
    if strict:
        raise IngestError(f"video {id_!r}: {reason}")
    result.failures.append((id_, reason))


def write_chunk(
    adapter,
    output_chunk: GulpChunk,
    input_slice: slice,
    *,
    encoder: FrameEncoder,
    number: int = -1,
    strict: bool = False,
    existing_ids: Callable[[str], str | None] | None = None,
    progress: Callable[[int, int], None] | None = None,
    before_publish: Callable[[ChunkResult, set[str]], None] | None = None,
) -> ChunkResult:
    """Writes the videos of ``adapter.iter_data(input_slice)`` into ``output_chunk`` and
    publishes it atomically. A video that cannot be written (an adapter ``'error'``, no frames,
    a frame that does not decode, a duplicate id) is skipped and reported, or raises
    :class:`IngestError` under ``strict``, in which case nothing of the chunk is published.
    ``before_publish(result, ids)`` runs after the last append, before publication; if it
    raises, nothing is published.
    """
    result = ChunkResult(chunk=number)
    seen: set[str] = set()
    own_append = type(output_chunk).append is GulpChunk.append
    with output_chunk.open("wb"):
        for video in adapter.iter_data(input_slice):
            id_ = _id_str(video.get("id"))
            if video.get("error"):
                _fail(result, id_, str(video["error"]), strict)
            elif id_ in seen:
                _fail(result, id_, "duplicate id in this chunk", strict)
            elif existing_ids is not None and (where := existing_ids(id_)) is not None:
                _fail(result, id_, f"id already in the dataset ({where})", strict)
            else:
                frames = video.get("frames")
                if frames is None or len(frames) == 0:
                    _fail(result, id_, "no frames", strict)
                else:
                    meta = video.get("meta", {})
                    try:
                        if own_append:
                            stored = encoder.encode(frames, video.get("size"))
                        else:
                            # A subclass's append gets what gulpio2's got: the adapter's frames.
                            stored = frames
                        # Through append, as gulpio2's ChunkWriter: a GulpChunk subclass that
                        # overrides it sees every video.
                        output_chunk.append(video.get("id"), meta, stored)
                    except (GulpError, ValueError, OSError) as e:
                        _fail(result, id_, str(e), strict)
                    else:
                        seen.add(id_)
                        result.videos += 1
                        result.frames += len(stored)
                        if own_append:
                            result.bytes += sum(len(j) for j in stored)
                        if progress is not None:
                            progress(1, len(stored))
                        continue
            if progress is not None:
                progress(1, 0)
        if before_publish is not None:
            before_publish(result, seen)
    return result


class ChunkWriter:
    """Writes the videos of one adapter slice into one chunk (gulpio2's ``ChunkWriter``).

    Frames are stored as gulpio2 stores them (q90 4:4:4 for arrays) unless ``options`` says
    otherwise. Returns the ids that were skipped.
    """

    def __init__(self, adapter, options: EncodeOptions | None = None):
        self.adapter = adapter
        self.options = options or EncodeOptions(subsampling="4:4:4")
        self.skipped: list[str] = []

    def write_chunk(self, output_chunk: GulpChunk, input_slice):
        with FrameEncoder(self.options) as encoder:
            r = write_chunk(self.adapter, output_chunk, input_slice, encoder=encoder)
        for id_, reason in r.failures:
            warnings.warn(f"Failed to write video with id: {id_}; {reason}", stacklevel=2)
        self.skipped.extend(id_ for id_, _ in r.failures)
        return self.skipped
