"""gulpio2's ``utils`` helpers, kept under the same names for drop-in use.

Differences from gulpio2, all deliberate: ``jpeg_bytes_to_img`` uses the built-in Rust decoder
(strict: damaged data raises :class:`~gulpio_rs.errors.DecodeError`); ``img_to_jpeg_bytes``
accepts ``HxWx1`` and RGBA/LA arrays and PIL images (converted by the one pixel rule of
``_pixels``) instead of rejecting them; the ffmpeg helpers
raise instead of printing and returning no frames.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from glob import glob
from typing import IO, TYPE_CHECKING, Any

import numpy as np
import simplejpeg
from PIL import Image

from . import _encode_options, _native
from ._encode_options import GULPIO2, EncodeOptions
from ._pixels import pil_to_array, to_frame
from ._threads import thread_count
from .errors import EmptyDirectoryWarning

if TYPE_CHECKING:
    from _typeshed import StrPath

#: gulpio2's JPEG quality: the default of the knob below.
_GULPIO2_QUALITY = GULPIO2.quality
#: JPEG quality used by :func:`img_to_jpeg_bytes`; read on every call (gulpio2's knob: its
#: tests set it to 100). ``ChunkWriter`` encodes at it too, and ``GulpIngestor`` without
#: ``quality``/``subsampling`` writes gulpio2's bytes at it when it was changed.
_JPEG_WRITE_QUALITY = _GULPIO2_QUALITY


def gulpio2_encoding(threads: int = 1) -> EncodeOptions:
    """``EncodeOptions`` that write what :func:`img_to_jpeg_bytes` writes now (quality
    ``_JPEG_WRITE_QUALITY``, gulpio2's 4:4:4): the same bytes, from the built-in encoder."""
    return EncodeOptions(int(_JPEG_WRITE_QUALITY), GULPIO2.subsampling, threads)


def gulpio2_quality_changed() -> bool:
    """Whether gulpio2's knob ``_JPEG_WRITE_QUALITY`` was set away from gulpio2's default."""
    return _JPEG_WRITE_QUALITY != _GULPIO2_QUALITY


def gulpio2_settings(defaults: EncodeOptions) -> EncodeOptions:
    """gulpio2's quality rule for a writer whose caller chose no JPEG settings
    (``_encode_options.unset_settings``, installed below): with ``_JPEG_WRITE_QUALITY`` set
    away from gulpio2's default (as gulpio2's tests do), what gulpio2 wrote with it, its
    encoder's 4:4:4 at that quality; otherwise the writer's own ``defaults``. Read when a
    writer settles its settings: ``GulpIngestor`` when made, ``ChunkWriter`` per chunk."""
    if not gulpio2_quality_changed():
        return defaults
    return replace(defaults, quality=int(_JPEG_WRITE_QUALITY), subsampling=GULPIO2.subsampling)


_encode_options.unset_settings = gulpio2_settings


class FFMPEGNotFound(Exception):
    """No ``ffmpeg`` binary on PATH."""


class ImageNotFound(Exception):
    """An image file could not be read."""


class DuplicateIdException(Exception):
    """Every entry was a duplicate of one already present."""


def check_ffmpeg_exists() -> bool:
    """True if the shell can run ``ffmpeg -version`` (gulpio2 asks the shell the same way, so
    aliases, wrappers and a patched ``os.system`` answer as they do for gulpio2)."""
    return os.system("ffmpeg -version > /dev/null") == 0


@contextmanager
def temp_dir_for_bursting(shm_dir_path: str = "/dev/shm") -> Iterator[str]:
    """A fresh temporary directory under ``shm_dir_path``, removed afterwards (also on error)."""
    path = os.path.join(shm_dir_path, uuid.uuid4().hex)
    os.makedirs(path)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def burst_frames_to_shm(
    vid_path: str, temp_burst_dir: str, frame_rate: float | None = None
) -> None:
    """Extract a video's frames as JPEG files with the ``ffmpeg`` binary (gulpio2's way).

    Unlike gulpio2, a failing ffmpeg raises :class:`RuntimeError` with its stderr instead of
    silently yielding no frames.
    """
    if not check_ffmpeg_exists():
        raise FFMPEGNotFound("ffmpeg was not found on PATH")
    cmd = ["ffmpeg", "-nostdin", "-loglevel", "error", "-i", vid_path]
    if frame_rate is not None:
        cmd += ["-r", str(frame_rate)]
    cmd += ["-q:v", "1", "-f", "image2", os.path.join(temp_burst_dir, "%010d.jpg")]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"ffmpeg failed on {vid_path}: {proc.stderr.strip()}")


def burst_video_into_frames(
    vid_path: str, temp_burst_dir: str, frame_rate: float | None = None
) -> list[str]:
    """Burst a video with ffmpeg and return the sorted frame paths."""
    burst_frames_to_shm(vid_path, temp_burst_dir, frame_rate=frame_rate)
    return find_images_in_folder(temp_burst_dir, formats=["jpg"])


def img_to_jpeg_bytes(img: np.ndarray) -> bytes:
    """Encode an RGB (``HxWx3``) or gray (``HxW``) uint8 array as JPEG, like gulpio2.

    Uses libjpeg-turbo (simplejpeg) at quality ``_JPEG_WRITE_QUALITY`` with 4:4:4 sampling,
    so it writes the same bytes gulpio2 writes.
    """
    img = to_frame(img)
    jpeg: bytes  # simplejpeg has no type information
    if img.ndim == 2:
        jpeg = simplejpeg.encode_jpeg(
            img[:, :, None], quality=_JPEG_WRITE_QUALITY, colorspace="Gray"
        )
    else:
        jpeg = simplejpeg.encode_jpeg(img, quality=_JPEG_WRITE_QUALITY, colorspace="RGB")
    return jpeg


def jpeg_bytes_to_img(jpeg_bytes: bytes | bytearray | memoryview) -> np.ndarray:
    """Decode JPEG bytes to ``HxWx3`` RGB, or ``HxW`` for grayscale JPEGs."""
    arr = _native.decode_jpeg(jpeg_bytes)
    return arr[:, :, 0] if arr.shape[2] == 1 else arr


def _open_image(img: StrPath | IO[bytes]) -> Image.Image:
    # What PIL.Image.open takes (str, Path, file object), as gulpio2 passed it straight there;
    # and what it returns is used as gulpio2 used it, also when a caller (or a test) has
    # replaced PIL.Image.open with something returning another kind of object.
    pil = Image.open(img)
    if isinstance(pil, Image.Image):
        pil.load()
    return pil


def resize_by_short_edge(img: StrPath | Image.Image | np.ndarray, size: int) -> np.ndarray:
    """Resize so the shorter side is ``size`` (bilinear); ``size < 1`` returns the input.

    ``img`` may be a path (``str`` or ``os.PathLike``), a PIL image or an array.
    """
    if isinstance(img, (str, os.PathLike)):
        img = _open_image(img)
    if isinstance(img, np.ndarray):
        if size < 1:
            return img
        img = Image.fromarray(img)
    if size < 1:
        return np.asarray(img)
    w, h = img.size
    if h < w:
        new = (int(size * w / h), size)
    else:
        new = (size, int(size * h / w))
    return np.asarray(img.resize(new, Image.Resampling.BILINEAR))


def resize_frames(frames: Iterable[np.ndarray], size: int, threads: int = 1) -> list[np.ndarray]:
    """Resize many uint8 frames so each shorter side is ``size`` (long side floored, as in
    gulpio2); ``size < 1`` returns them unchanged. Gray (``HxW``) stays gray; RGBA and
    ``HxWx1`` arrays are converted first.

    Runs in the Rust core (SIMD bilinear convolution, antialiased like Pillow's ``BILINEAR``)
    on ``threads`` threads with the GIL released.
    """
    frames = [to_frame(f) for f in frames]
    if size < 1 or not frames:
        return frames
    return _native.resize_frames(frames, int(size), thread_count(threads, "threads"))


def resize_images(
    imgs: Iterable[StrPath | Image.Image | np.ndarray], img_size: int = -1
) -> Iterator[np.ndarray]:
    """Yield each image as an array, resized by its short edge when ``img_size > 0``.

    Accepts what gulpio2's accepts (anything ``PIL.Image.open`` takes: ``str`` or
    ``os.PathLike`` paths, binary file objects; a missing or unreadable file raises PIL's own
    error, as in gulpio2) and also PIL images and arrays. Palette and RGBA images are
    converted to RGB (gulpio2 stored palette indices as gray).
    """
    for img in imgs:
        if not isinstance(img, (np.ndarray, Image.Image)):
            img = _open_image(img)
        if isinstance(img, Image.Image):
            img = pil_to_array(img)
        yield resize_by_short_edge(img, img_size)


def remove_entries_with_duplicate_ids(
    output_directory: str | os.PathLike[str], meta_dict: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Drop entries whose id repeats, or that already exist in ``output_directory``."""
    from .directory import GulpDirectory

    meta_dict = _remove_duplicates_in_metadict(meta_dict)
    if os.path.isdir(output_directory):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EmptyDirectoryWarning)  # a new output: expected
            gd = GulpDirectory(output_directory)
        existing = set(gd.keys())
        meta_dict = [m for m in meta_dict if str(m["id"]) not in existing]
    if not meta_dict:
        raise DuplicateIdException("no entries are left after removing duplicate ids")
    return meta_dict


def _remove_duplicates_in_metadict(meta_dict: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: set[object] = set()
    out = []
    for entry in meta_dict:
        if entry["id"] not in seen:
            seen.add(entry["id"])
            out.append(entry)
    return out


def find_images_in_folder(folder: str, formats: list[str] | None = None) -> list[str]:
    """Sorted paths of the images with the given extensions in ``folder``."""
    formats = formats or ["jpg"]
    images: list[str] = []
    for fmt in formats:
        images.extend(glob(os.path.join(folder, "*." + fmt)))
    return sorted(images)


def get_single_video_path(folder_name: str, format_: str = "mp4") -> str:
    """The one video with extension ``format_`` in ``folder_name`` (AssertionError otherwise)."""
    video_filenames = glob(os.path.join(folder_name, "*." + format_))
    assert len(video_filenames) == 1, f"expected one .{format_} in {folder_name}"
    return video_filenames[0]
