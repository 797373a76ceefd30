"""The ingest encoder: libjpeg-turbo inside the Rust core (``_native.encode_frames``) gives
simplejpeg's bytes, and the pipelined chunk writer (one video encoded while the adapter makes
the next) reports and stores exactly what the one-at-a-time writer did."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import simplejpeg
from helpers import ListAdapter, synthetic_frame

from gulpio_rs import GulpDirectory, GulpIngestor, _native
from gulpio_rs._encode_options import RUST_ENCODER, EncodeOptions
from gulpio_rs.ingest import IngestError, IngestWarning
from gulpio_rs.ingest.encoder import FrameEncoder

turbo_only = pytest.mark.skipif(
    not RUST_ENCODER, reason="zune-jpeg build: frames are encoded by simplejpeg, not in Rust"
)


def frames(n=6, gray=False):
    # Different sizes, odd ones included: the encoder must not assume MCU-aligned frames.
    return [synthetic_frame(37 + 8 * i, 50 + 13 * i, gray=gray, seed=500 + i) for i in range(n)]


@turbo_only
@pytest.mark.parametrize("sub", ["4:4:4", "4:2:2", "4:2:0", "4:4:0"])
@pytest.mark.parametrize("quality", [1, 50, 75, 90, 95, 96, 99, 100])
def test_rust_encoder_gives_simplejpegs_bytes(sub, quality):
    fs = frames()
    ours = _native.encode_frames(fs, quality, sub, None, 2)
    theirs = [
        simplejpeg.encode_jpeg(
            f, quality=quality, colorspace="RGB", colorsubsampling=sub.replace(":", "")
        )
        for f in fs
    ]
    assert ours == theirs


@turbo_only
def test_rust_encoder_gray_and_resize():
    fs = frames(gray=True)
    ours = _native.encode_frames(fs, 90, "4:2:0")
    theirs = [simplejpeg.encode_jpeg(f[:, :, None], quality=90, colorspace="Gray") for f in fs]
    assert ours == theirs
    resized = _native.resize_frames(fs, 24)
    assert _native.encode_frames(fs, 90, size=24) == _native.encode_frames(resized, 90)
    for jpeg in _native.encode_frames(fs, 90, size=24, threads=2):
        info = _native.jpeg_info(jpeg)
        assert info.components == 1 and min(info.width, info.height) == 24


@turbo_only
def test_rust_encoder_rejects_bad_input_with_the_frame():
    good = synthetic_frame(16, 16, seed=1)
    with pytest.raises(ValueError, match="frame 1: .*channels"):
        _native.encode_frames([good, np.zeros((8, 8, 2), np.uint8)])
    with pytest.raises(ValueError, match="frame 0: .*C-contiguous"):
        _native.encode_frames([good[:, ::2]])
    with pytest.raises(ValueError, match="subsampling"):
        _native.encode_frames([good], 90, "4:1:1")
    with pytest.raises(ValueError, match="quality"):
        _native.encode_frames([good], 0)


def test_frame_encoder_threads_do_not_change_the_bytes():
    fs = frames()
    with (
        FrameEncoder(EncodeOptions(threads=1)) as one,
        FrameEncoder(EncodeOptions(threads=2)) as two,
    ):
        assert one.encode(fs) == two.encode(fs)
        assert one.encode(fs, 20) == two.encode(fs, 20)


def video(id_, seed, bad=False):
    f = np.zeros((2, 8, 8, 3), np.uint8) if bad else synthetic_frame(24, 32, seed=seed)
    return {"id": id_, "meta": {"seed": seed}, "frames": [f, f]}


def test_pipelined_writer_keeps_order_and_duplicate_rules(tmp_path):
    # A video that fails to encode does not claim its id: a later video with that id is
    # stored, exactly as when videos were written one after the other.
    items = [
        video("a", 1, bad=True),
        video("a", 2),
        video("b", 3),
        video("b", 4),  # a real duplicate of a stored video
        {"id": "c", "meta": {}, "frames": []},
        video("d", 5),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IngestWarning)
        report = GulpIngestor(ListAdapter(items), tmp_path, 10, 1, progress=False)()
    assert [i for i, _ in report.failures] == ["a", "b", "c"]
    assert "frame 0" in report.failures[0][1]
    assert "duplicate" in report.failures[1][1]
    gd = GulpDirectory(tmp_path)
    assert sorted(gd.keys()) == ["a", "b", "d"]
    assert gd["a"][1]["seed"] == 2 and gd["b"][1]["seed"] == 3


def test_pipelined_writer_strict_publishes_nothing(tmp_path):
    items = [video("a", 1), video("b", 2, bad=True), video("c", 3)]
    with pytest.raises(IngestError, match="'b'"):
        GulpIngestor(ListAdapter(items), tmp_path, 10, 1, progress=False, strict=True)()
    assert not list(tmp_path.glob("data_*.gulp"))
