"""Building one item (``{'id', 'meta', 'frames'}``) from a video file, image files or a folder
of frames; anything unreadable becomes an error item naming the file.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from .._pixels import pil_to_array
from ..video import read_video
from .base import _error_item, _reason
from .files import _frame_files


def _video_item(id_, meta, path: str, frame_rate, frame_size, max_frames) -> dict:
    """The item of one video, decoded now; an unreadable video becomes an error item."""
    try:
        frames = read_video(
            path, frame_rate=frame_rate, frame_size=frame_size, max_frames=max_frames
        )
    except Exception as e:  # one bad video must not end the run: the ingestor reports it
        return _error_item(id_, meta, _reason(e, path))
    return {"id": id_, "meta": meta, "frames": frames}


# JPEG frames stored unchanged must decode as gulpio2 decodes them (baseline or progressive
# Huffman, 8-bit, gray or YCbCr); CMYK, 12-bit, arithmetic-coded and lossless JPEGs are decoded
# with Pillow and re-encoded instead.
_SOF_PASSTHROUGH = (0xC0, 0xC1, 0xC2)


_SOF_ALL = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _is_plain_jpeg(path: str) -> bool:
    """True if ``path`` is a JPEG whose frame header allows storing its bytes unchanged.

    Reads only the marker segments up to the frame header. Damage further in is found by the
    ingestor's strict decode, which then reports the frame.
    """
    with open(path, "rb") as f:
        if f.read(2) != b"\xff\xd8":
            return False
        while True:
            byte = f.read(1)
            if byte != b"\xff":
                return False
            marker = f.read(1)
            while marker == b"\xff":  # fill bytes
                marker = f.read(1)
            if not marker:
                return False
            code = marker[0]
            if code == 0x01 or 0xD0 <= code <= 0xD8:  # segments without a length
                continue
            if code in (0xD9, 0xDA):  # end of image or scan data before a frame header
                return False
            head = f.read(2)
            if len(head) != 2:
                return False
            length = int.from_bytes(head, "big")
            if code in _SOF_ALL:
                sof = f.read(6)
                return (
                    len(sof) == 6 and code in _SOF_PASSTHROUGH and sof[0] == 8 and sof[5] in (1, 3)
                )
            if length < 2:
                return False
            f.seek(length - 2, os.SEEK_CUR)


def _image_frame(path: str, size: int):
    """One image file as a frame: its path if it can be stored as it is (a plain JPEG and no
    resize asked), else the decoded uint8 array (resized by :func:`_image_item`)."""
    if size < 1 and _is_plain_jpeg(path):
        return path
    from PIL import Image

    with Image.open(path) as img:
        img.load()
        return pil_to_array(img)


def _frames_folder_item(id_, meta, folder: str, exts: tuple[str, ...], size: int) -> dict:
    """The item of one folder of frame files; an unreadable folder makes it an error item."""
    try:
        paths = _frame_files(folder, exts)
    except OSError as e:
        return _error_item(id_, meta, _reason(e, folder))
    return _image_item(id_, meta, paths, size, f"no frames in {folder}")


def _image_item(id_, meta, paths: Sequence[str], size: int, empty_reason: str) -> dict:
    """The item of one image or frame folder; any unreadable file makes it an error item."""
    if not paths:
        return _error_item(id_, meta, empty_reason)
    frames = []
    for path in paths:
        try:
            frames.append(_image_frame(path, size))
        except Exception as e:  # one bad file must not end the run: the ingestor reports it
            return _error_item(id_, meta, _reason(e, path))
    if size >= 1:
        from .. import utils

        # One call for the whole video; looked up at call time (the Rust resize).
        frames = [np.ascontiguousarray(f) for f in utils.resize_frames(frames, size)]
    return {"id": id_, "meta": meta, "frames": frames}
