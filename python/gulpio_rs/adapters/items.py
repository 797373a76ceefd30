"""Building one item (``{'id', 'meta', 'frames'}``) from a video file, image files or a folder
of frames; anything unreadable becomes an error item naming the file.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from .._pixels import pil_to_array
from ..ingest.encoder import is_plain_jpeg
from ..source_video import read_video_info
from .base import _error_item, _reason
from .files import _frame_files


def _video_item(
    id_: object,
    meta: object,
    path: str,
    frame_rate: float | None,
    frame_size: int,
    max_frames: int | None,
) -> dict[str, Any]:
    """The item of one video, decoded now, with its frames' timestamps (stored by the ingest:
    docs/INGEST.md, "Frame timestamps"), ``'truncated'`` when the file decodes to fewer
    frames than it declares and ``'audio_streams'`` when it has audio (both reported by the
    ingest); an unreadable video becomes an error item."""
    try:
        video, source = read_video_info(
            path, frame_rate=frame_rate, frame_size=frame_size, max_frames=max_frames
        )
    except Exception as e:  # one bad video must not end the run: the ingestor reports it
        return _error_item(id_, meta, _reason(e, path))
    item = {
        "id": id_,
        "meta": meta,
        "frames": video.frames,
        "timestamps": video.times,
        "fps": video.fps,
        "end": video.end,
    }
    shortfall = source.shortfall()
    if shortfall is not None:
        item["truncated"] = f"{path}: {shortfall}"
    if source.audio_streams:
        item["audio_streams"] = source.audio_streams
    return item


def _image_frame(path: str, size: int) -> str | np.ndarray:
    """One image file as a frame: its path if it can be stored as it is (a plain JPEG and no
    resize asked), else the decoded uint8 array (resized by :func:`_image_item`)."""
    if size < 1:
        # JPEG frames stored unchanged must decode as gulpio2 decodes them; CMYK, 12-bit,
        # arithmetic-coded and lossless JPEGs are decoded with Pillow and re-encoded instead.
        # Damage further in is found by the ingestor's strict decode, which reports the frame.
        with open(path, "rb") as f:
            if is_plain_jpeg(f.read()):
                return path
    from PIL import Image

    with Image.open(path) as img:
        img.load()
        return pil_to_array(img)


def _frames_folder_item(
    id_: object, meta: object, folder: str, exts: tuple[str, ...], size: int
) -> dict[str, Any]:
    """The item of one folder of frame files; an unreadable folder makes it an error item."""
    try:
        paths = _frame_files(folder, exts)
    except OSError as e:
        return _error_item(id_, meta, _reason(e, folder))
    return _image_item(id_, meta, paths, size, f"no frames in {folder}")


def _image_item(
    id_: object, meta: object, paths: Sequence[str], size: int, empty_reason: str
) -> dict[str, Any]:
    """The item of one image or frame folder; any unreadable file makes it an error item."""
    if not paths:
        return _error_item(id_, meta, empty_reason)
    frames: list[str | np.ndarray] = []
    for path in paths:
        try:
            frames.append(_image_frame(path, size))
        except Exception as e:  # one bad file must not end the run: the ingestor reports it
            return _error_item(id_, meta, _reason(e, path))
    if size >= 1:
        from .. import utils

        # One call for the whole video; looked up at call time (the Rust resize).
        arrays = cast("list[np.ndarray]", frames)  # _image_frame decodes all for a resize
        frames = [np.ascontiguousarray(f) for f in utils.resize_frames(arrays, size)]
    return {"id": id_, "meta": meta, "frames": frames}
