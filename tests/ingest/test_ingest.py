"""GulpIngestor / ChunkWriter (python/gulpio_rs/ingest/, its encoder.py): frame kinds, stored
JPEG options, determinism, the report, strict mode, progress, restarts of a finished run,
extending a dataset, shards in concurrent processes and gulpio2-style use.

Crash restarts (SIGKILL, KeyboardInterrupt) are in test_ingest_crash.py.
"""

from __future__ import annotations

import inspect
import io
import json
import os
import pickle
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
from helpers import JPEG_CORPUS, ListAdapter, synthetic_frame
from PIL import Image

from gulpio_rs import GulpChunk, GulpDirectory, GulpIngestor, _native
from gulpio_rs.adapters import AbstractDatasetAdapter
from gulpio_rs.errors import BrokenChunkWarning, DecodeError
from gulpio_rs.ingest import IngestError, IngestReport, IngestWarning

H, W = 48, 64
REPO = Path(__file__).resolve().parents[2]
BBB = REPO / "python" / "gulpio_rs" / "data" / "bbb"
CONFORMANCE = JPEG_CORPUS
STATE = ".gulpio-ingest"


# ------------------------------------------------------------------------------------------
# adapters (module level, so that they pickle for num_workers > 1)
# ------------------------------------------------------------------------------------------
def synth_video(i: int, frames: int = 2, prefix: str = "v", gray: bool = False) -> dict:
    return {
        "id": f"{prefix}{i}",
        "meta": {"i": i, "label": "ab"[i % 2]},
        "frames": [synthetic_frame(H, W, gray=gray, seed=1000 * i + k) for k in range(frames)],
    }


class SynthAdapter(AbstractDatasetAdapter):
    """``n`` videos ``{prefix}{start + i}`` of ``frames`` synthetic frames (deterministic)."""

    def __init__(self, n, frames=2, prefix="v", start=0, gray_every=0):
        self.n, self.frames, self.prefix, self.start = n, frames, prefix, start
        self.gray_every = gray_every

    def __len__(self):
        return self.n

    def video(self, i):
        gray = bool(self.gray_every) and i % self.gray_every == 0
        return synth_video(i, self.frames, self.prefix, gray)

    def iter_data(self, slice_element=None):
        for i in range(self.start, self.start + self.n)[slice_element or slice(None)]:
            yield self.video(i)


class TransformAdapter(SynthAdapter):
    """A SynthAdapter holding a lambda (say a per-frame transform): it does not pickle."""

    def __init__(self, n, prefix):
        super().__init__(n, prefix=prefix)
        self.transform = lambda frame: frame

    def video(self, i):
        v = super().video(i)
        v["frames"] = [self.transform(f) for f in v["frames"]]
        return v


class Gulpio2StyleAdapter(AbstractDatasetAdapter):
    """The minimum a gulpio2 adapter defines."""

    def __init__(self, videos):
        self.videos = videos

    def iter_data(self, slice_element=None):
        slice_element = slice_element or slice(0, len(self))
        for v in self.videos[slice_element]:
            yield {"id": v["id"], "meta": v["meta"], "frames": v["frames"]}

    def __len__(self):
        return len(self.videos)


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------
def run(adapter, out, videos_per_chunk=3, num_workers=1, **kw) -> IngestReport:
    kw.setdefault("progress", False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IngestWarning)
        return GulpIngestor(adapter, out, videos_per_chunk, num_workers, **kw)()


def chunk_files(folder) -> dict[str, bytes]:
    """Every published file of a dataset (state dir and temporaries excluded)."""
    return {
        n: (Path(folder) / n).read_bytes()
        for n in sorted(os.listdir(folder))
        if not n.startswith(".") and (Path(folder) / n).is_file()
    }


def stats(folder) -> dict[str, tuple[int, int]]:
    return {
        n: (os.stat(Path(folder) / n).st_ino, os.stat(Path(folder) / n).st_mtime_ns)
        for n in chunk_files(folder)
    }


CHUNK_FILES = (("data", "gulp"), ("data", "gidx"), ("meta", "gmeta"))


def chunk_number(name: str) -> int:
    return int(name.split("_")[1].split(".")[0])


def temporaries(folder) -> list[str]:
    return [n for n in os.listdir(folder) if n.startswith(".gulpio-tmp")]


def open_clean(folder) -> GulpDirectory:
    """Opens a dataset, failing on any BrokenChunkWarning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", BrokenChunkWarning)
        return GulpDirectory(folder)


def segments(jpeg: bytes):
    """``(marker, payload)`` of every header segment up to SOS."""
    i = 2
    while i + 4 <= len(jpeg):
        assert jpeg[i] == 0xFF, f"bad marker at {i}"
        marker = jpeg[i + 1]
        length = int.from_bytes(jpeg[i + 2 : i + 4], "big")
        yield marker, jpeg[i + 4 : i + 2 + length]
        if marker == 0xDA:
            return
        i += 2 + length


def sampling(jpeg: bytes) -> list[tuple[int, int, int]]:
    """``(component id, H, V)`` from the SOF0 (baseline) marker."""
    for marker, p in segments(jpeg):
        if marker == 0xC0:
            return [(p[6 + 3 * k], p[7 + 3 * k] >> 4, p[7 + 3 * k] & 15) for k in range(p[5])]
    raise AssertionError("no SOF0 marker: not a baseline JPEG")


def quant_tables(jpeg: bytes) -> dict[int, bytes]:
    tables = {}
    for marker, p in segments(jpeg):
        if marker == 0xDB:
            i = 0
            while i < len(p):
                precision, tq = p[i] >> 4, p[i] & 15
                size = 64 * (2 if precision else 1)
                tables[tq] = p[i + 1 : i + 1 + size]
                i += 1 + size
    return tables


def pil_jpeg(arr: np.ndarray, quality: int, subsampling: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "JPEG", quality=quality, subsampling=subsampling)
    return buf.getvalue()


def bbb_jpeg(n: int = 0) -> bytes:
    return (BBB / "clip_00" / f"frame_{n:04d}.jpg").read_bytes()


def decoded(gd: GulpDirectory, id_) -> list[np.ndarray]:
    frames, _ = gd[id_]
    return [f[:, :, 0] if f.ndim == 3 and f.shape[2] == 1 else f for f in frames]


def mean_abs_diff(a: np.ndarray, b: np.ndarray) -> float:
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.abs(a.astype(np.int32) - b.astype(np.int32)).mean())


# ------------------------------------------------------------------------------------------
# 1. frame kinds
# ------------------------------------------------------------------------------------------
def frame_kinds(tmp_path) -> dict[str, tuple[object, np.ndarray]]:
    """name -> (frame as the adapter gives it, the pixels it should store)."""
    rgb = synthetic_frame(H, W, seed=7)
    gray = synthetic_frame(H, W, gray=True, seed=8)
    palette = Image.fromarray(rgb).quantize(64)
    rgba = np.dstack([rgb, gray])
    sixteen = Image.fromarray(gray.astype(np.uint16) * 257)
    assert palette.mode == "P" and sixteen.mode == "I;16"
    palette.save(tmp_path / "palette.png")
    sixteen.save(tmp_path / "sixteen.png")
    Image.fromarray(rgba).save(tmp_path / "rgba.png")
    return {
        "rgb-array": (rgb, rgb),
        "gray-array": (gray, gray),
        "gray-hxwx1-array": (gray[:, :, None], gray),
        "rgba-array": (rgba, rgb),
        "pil-rgb": (Image.fromarray(rgb), rgb),
        "pil-l": (Image.fromarray(gray), gray),
        "pil-palette": (palette, np.asarray(palette.convert("RGB"))),
        "pil-rgba": (Image.fromarray(rgba), rgb),
        "pil-la": (Image.fromarray(gray).convert("LA"), gray),
        "pil-16bit": (sixteen, gray),
        "png-palette-path": (str(tmp_path / "palette.png"), np.asarray(palette.convert("RGB"))),
        "png-16bit-path": (tmp_path / "sixteen.png", gray),
        "png-rgba-path": (str(tmp_path / "rgba.png"), rgb),
    }


def test_array_and_image_frames_are_converted_not_rejected(tmp_path):
    kinds = frame_kinds(tmp_path)
    items = [{"id": name, "meta": {}, "frames": [frame]} for name, (frame, _) in kinds.items()]
    report = run(ListAdapter(items), tmp_path / "out", 4, subsampling="4:4:4")
    assert report.failures == []
    assert report.videos == len(kinds)
    gd = open_clean(tmp_path / "out")
    for name, (_, want) in kinds.items():
        (got,) = decoded(gd, name)
        assert got.shape == want.shape, name
        # grayscale sources are stored as one-channel JPEGs
        assert gd.frame_shapes(name)[0][2] == (1 if want.ndim == 2 else 3), name
        assert mean_abs_diff(got, want) < (3.0 if want.ndim == 2 else 6.0), name


def test_jpeg_bytes_and_files_are_stored_byte_identical(tmp_path):
    files = [BBB / "clip_00" / "frame_0000.jpg", BBB / "clip_01" / "frame_0003.jpg"]
    corpus = [
        CONFORMANCE / "ljt_testorig.jpg",
        CONFORMANCE / "pillow_hopper_gray.jpg",  # grayscale
        CONFORMANCE / "pillow_app13-multiple.jpg",  # progressive, APP13 segments
    ]
    # The shared corpus adds gray and progressive inputs when it sits beside the checkout.
    files += [f for f in corpus if f.exists()]
    raw = [f.read_bytes() for f in files]
    items = [
        {"id": "as-bytes", "meta": {}, "frames": raw},
        {"id": "as-str-paths", "meta": {}, "frames": [str(f) for f in files]},
        {"id": "as-pathlib", "meta": {}, "frames": files},
        {"id": "as-bytearray", "meta": {}, "frames": [bytearray(b) for b in raw]},
        {"id": "as-memoryview", "meta": {}, "frames": [memoryview(b) for b in raw]},
        # mixed with an array in the same video
        {"id": "mixed", "meta": {}, "frames": [raw[0], synthetic_frame(H, W, seed=3), files[1]]},
    ]
    report = run(ListAdapter(items), tmp_path / "out", 3)
    assert report.failures == [] and report.videos == len(items)
    gd = open_clean(tmp_path / "out")
    for item in items[:-1]:
        assert [bytes(b) for b in gd.frame_bytes(item["id"])] == raw, item["id"]
    stored = [bytes(b) for b in gd.frame_bytes("mixed")]
    assert stored[0] == raw[0] and stored[2] == raw[1]
    assert stored[1][:3] == b"\xff\xd8\xff"  # the array was encoded
    # the report counts the stored bytes
    assert report.bytes == sum(len(bytes(b)) for i in gd.keys() for b in gd.frame_bytes(i))


@pytest.mark.parametrize("as_path", [False, True], ids=["bytes", "path"])
def test_truncated_jpeg_skips_the_video_and_names_the_frame(tmp_path, as_path):
    good = bbb_jpeg(0)
    cut = bbb_jpeg(1)[: len(bbb_jpeg(1)) // 2]
    (tmp_path / "cut.jpg").write_bytes(cut)
    bad = str(tmp_path / "cut.jpg") if as_path else cut
    items = [synth_video(0), {"id": "bad", "meta": {}, "frames": [good, bad, good]}]
    items.append(synth_video(2))
    with pytest.warns(IngestWarning, match="bad"):
        report = GulpIngestor(ListAdapter(items), tmp_path / "out", 2, 1, progress=False)()
    assert [i for i, _ in report.failures] == ["bad"]
    assert "frame 1" in report.failures[0][1]
    gd = open_clean(tmp_path / "out")
    assert sorted(gd.keys()) == ["v0", "v2"]
    assert report.videos == 2 and report.frames == 4


def test_truncated_jpeg_with_strict_raises_and_publishes_nothing_of_the_chunk(tmp_path):
    cut = bbb_jpeg(1)[:3000]
    items = [synth_video(0), synth_video(1), {"id": "bad", "meta": {}, "frames": [cut]}]
    out = tmp_path / "out"
    with pytest.raises(IngestError, match=r"'bad'.*frame 0"):
        GulpIngestor(ListAdapter(items), out, 2, 1, strict=True, progress=False)()
    assert sorted(chunk_files(out)) == ["data_0.gidx", "data_0.gulp", "meta_0.gmeta"]
    assert temporaries(out) == []


@pytest.mark.parametrize("cut_bytes", [1, 2, 5, 12])
def test_jpeg_cut_by_a_few_bytes_is_not_stored(tmp_path, cut_bytes):
    whole = bbb_jpeg(0)
    cut = whole[:-cut_bytes]  # the EOI marker and maybe some scan data missing
    # PIL (libjpeg) sees the damage, and so must the strict decode
    with pytest.raises(OSError, match="truncated"):
        Image.open(io.BytesIO(cut)).load()
    with pytest.raises(DecodeError):
        _native.decode_jpeg(cut)
    report = run(ListAdapter([{"id": "cut", "meta": {}, "frames": [cut]}]), tmp_path / "out")
    assert [i for i, _ in report.failures] == ["cut"]


def test_unreadable_image_files_are_skipped_and_reported(tmp_path):
    png = io.BytesIO()
    Image.fromarray(synthetic_frame(H, W, seed=1)).save(png, "PNG")
    (tmp_path / "cut.png").write_bytes(png.getvalue()[:300])
    (tmp_path / "junk.jpg").write_bytes(b"not an image at all")
    items = [
        {"id": "cut-png", "meta": {}, "frames": [str(tmp_path / "cut.png")]},
        {"id": "junk", "meta": {}, "frames": [synthetic_frame(H, W), tmp_path / "junk.jpg"]},
        {"id": "missing", "meta": {}, "frames": [str(tmp_path / "missing.jpg")]},
        {"id": "not-jpeg-bytes", "meta": {}, "frames": [b"GIF89a...."]},
        synth_video(4),
    ]
    report = run(ListAdapter(items), tmp_path / "out", 5)
    reasons = dict(report.failures)
    assert list(reasons) == ["cut-png", "junk", "missing", "not-jpeg-bytes"]
    assert "frame 0" in reasons["cut-png"] and "cut.png" in reasons["cut-png"]
    assert "frame 1" in reasons["junk"]
    assert "missing.jpg" in reasons["missing"]
    assert "frame 0" in reasons["not-jpeg-bytes"]
    assert open_clean(tmp_path / "out").keys() == ["v4"]


def test_damaged_pil_image_frame_reason_names_the_frame(tmp_path):
    damaged = Image.open(io.BytesIO(bbb_jpeg(0)[:2000]))  # lazily loaded, fails on load
    items = [{"id": "pil", "meta": {}, "frames": [synthetic_frame(H, W), damaged]}]
    report = run(ListAdapter(items), tmp_path / "out")
    assert [i for i, _ in report.failures] == ["pil"]  # skipped, not fatal: this part works
    assert "frame 1" in report.failures[0][1]


# ------------------------------------------------------------------------------------------
# 4. quality, subsampling, determinism
# ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kwargs, quality, factors, pil_subsampling",
    [
        ({}, 90, (2, 2), 2),  # the defaults: q90 4:2:0
        ({"subsampling": "4:4:4"}, 90, (1, 1), 0),
        ({"quality": 50, "subsampling": "4:2:2"}, 50, (2, 1), 1),
        ({"quality": 75}, 75, (2, 2), 2),
    ],
    ids=["default", "444", "q50-422", "q75"],
)
def test_quality_and_subsampling(tmp_path, kwargs, quality, factors, pil_subsampling):
    report = run(SynthAdapter(1, frames=1), tmp_path / "out", **kwargs)
    assert report.videos == 1
    (jpeg,) = [bytes(b) for b in open_clean(tmp_path / "out").frame_bytes("v0")]
    assert sampling(jpeg) == [(1, *factors), (2, 1, 1), (3, 1, 1)]
    # libjpeg's quantisation tables for that quality (PIL uses libjpeg's quality scaling)
    reference = pil_jpeg(synthetic_frame(H, W, seed=0), quality, pil_subsampling)
    assert quant_tables(jpeg) == quant_tables(reference)
    assert sampling(reference) == sampling(jpeg)


def test_gray_frames_are_stored_as_one_component_jpegs(tmp_path):
    run(SynthAdapter(1, frames=1, gray_every=1), tmp_path / "out")
    (jpeg,) = [bytes(b) for b in open_clean(tmp_path / "out").frame_bytes("v0")]
    assert sampling(jpeg) == [(1, 1, 1)]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"quality": 0},
        {"quality": 101},
        {"subsampling": "4:1:1"},
        {"shard_index": 3, "num_shards": 3},
    ],
)
def test_bad_options_are_rejected(tmp_path, kwargs):
    with pytest.raises(ValueError):
        GulpIngestor(SynthAdapter(2), tmp_path, 2, 1, **kwargs)


def test_videos_per_chunk_must_be_positive(tmp_path):
    with pytest.raises(ValueError):
        GulpIngestor(SynthAdapter(2), tmp_path, 0, 1)


def test_output_is_byte_identical_whatever_num_workers(tmp_path):
    adapter = SynthAdapter(10, frames=2, gray_every=3)
    reports = {nw: run(adapter, tmp_path / f"w{nw}", 3, nw) for nw in (1, 2)}
    one, two = chunk_files(tmp_path / "w1"), chunk_files(tmp_path / "w2")
    expected = {f"{name}_{k}.{ext}" for k in range(4) for name, ext in CHUNK_FILES}
    assert set(one) == expected
    assert one == two
    for r in reports.values():
        assert (r.videos, r.frames, r.chunks_written, r.failures) == (10, 20, 4, [])
    assert reports[1].bytes == reports[2].bytes


# ------------------------------------------------------------------------------------------
# 5. the report, skipped videos, strict mode, progress
# ------------------------------------------------------------------------------------------
def bad_items() -> list[dict]:
    cut = bbb_jpeg(1)[:2500]
    return [
        synth_video(0),
        {"id": "v1", "error": "could not read the video"},
        {"id": "v2", "meta": {}, "frames": []},
        {"id": "v3", "meta": {}, "frames": [bbb_jpeg(0), cut]},
        synth_video(4),
        {"id": "v5", "meta": {}},  # no frames key at all
        {"id": "v6", "meta": {}, "frames": [synthetic_frame(H, W).astype(np.float32)]},
        synth_video(7),
    ]


def test_report_counts_and_skipped_videos(tmp_path):
    out = tmp_path / "out"
    with pytest.warns(IngestWarning, match="5 videos were skipped"):
        report = GulpIngestor(ListAdapter(bad_items()), out, 3, 1, progress=False)()
    assert isinstance(report, IngestReport)
    assert report.failed_ids == ["v1", "v2", "v3", "v5", "v6"]
    reasons = dict(report.failures)
    assert all(isinstance(f, tuple) and len(f) == 2 for f in report.failures)
    assert reasons["v1"] == "could not read the video"
    assert "no frames" in reasons["v2"] and "no frames" in reasons["v5"]
    assert "frame 1" in reasons["v3"]
    assert "frame 0" in reasons["v6"] and "uint8" in reasons["v6"]
    assert (report.videos, report.frames) == (3, 6)
    assert (report.chunks_written, report.chunks_resumed) == (3, 0)
    assert list(report) == report.failed_ids  # gulpio-rs 0.1: the skipped ids
    gd = open_clean(out)
    assert sorted(gd.keys()) == ["v0", "v4", "v7"]
    # nothing disappears silently: every adapter item is stored or reported
    assert sorted(gd.keys() + report.failed_ids) == sorted(i["id"] for i in bad_items())
    assert report.bytes == sum(len(bytes(b)) for i in gd.keys() for b in gd.frame_bytes(i))
    for i in gd.keys():  # whole videos only
        assert gd.num_frames(i) == 2
        assert gd.meta(i) == {"i": int(i[1:]), "label": "ab"[int(i[1:]) % 2]}
    assert temporaries(out) == []
    assert "5 videos skipped" in report.summary() and "v3: frame 1" in report.summary()


def test_no_warning_when_nothing_is_skipped(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = GulpIngestor(SynthAdapter(3), tmp_path, 2, 1, progress=False)()
    assert report.failures == [] and report.videos == 3


@pytest.mark.parametrize(
    "bad, num_workers",
    [("v1", 1), ("v2", 1), ("v3", 1), ("v5", 1), ("v6", 1), ("v3", 2)],
    ids=["error-key", "zero-frames", "truncated-jpeg", "no-frames-key", "float-array", "2w"],
)
def test_strict_stops_without_publishing_the_chunk_in_progress(tmp_path, bad, num_workers):
    items = [synth_video(i) for i in range(9)]
    items[4] = next(b for b in bad_items() if b["id"] == bad) | {"id": "v4"}
    out = tmp_path / "out"
    with pytest.raises(IngestError, match="'v4'"):
        GulpIngestor(ListAdapter(items), out, 3, num_workers, strict=True, progress=False)()
    names = chunk_files(out)
    assert not any(n.startswith(("data_1.", "meta_1.")) for n in names), names
    assert {"data_0.gulp", "meta_0.gmeta", "data_0.gidx"} <= set(names) or num_workers > 1
    assert temporaries(out) == []
    gd = open_clean(out)
    assert not {"v3", "v4", "v5"} & set(gd.keys())
    assert len(gd.keys()) == len(set(gd.keys()))
    # The same run without strict then finishes the job, keeping the chunks already done.
    before = stats(out)
    done = {chunk_number(n) for n in before}
    report = run(ListAdapter(items), out, 3, num_workers)
    assert report.failed_ids == ["v4"]
    assert report.chunks_resumed == len(done) and report.chunks_written == 3 - len(done)
    assert {n: s for n, s in stats(out).items() if n in before} == before
    assert sorted(open_clean(out).keys()) == sorted(f"v{i}" for i in range(9) if i != 4)


@pytest.mark.parametrize("num_workers", [1, 2])
def test_progress_bar_goes_to_stderr(tmp_path, capsys, num_workers):
    report = GulpIngestor(SynthAdapter(4), tmp_path, 2, num_workers, progress=True)()
    assert report.videos == 4
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "video" in captured.err and "frames/s" in captured.err
    assert "4/4" in captured.err


def test_no_progress_output_when_disabled(tmp_path, capsys):
    GulpIngestor(SynthAdapter(2), tmp_path, 2, 1, progress=False)()
    assert capsys.readouterr() == ("", "")


# ------------------------------------------------------------------------------------------
# 6. running again: a finished run, another adapter, ids already present
# ------------------------------------------------------------------------------------------
def test_running_a_finished_ingest_again_writes_nothing(tmp_path):
    adapter = SynthAdapter(7)
    first = run(adapter, tmp_path, 3)
    before, files = stats(tmp_path), chunk_files(tmp_path)
    second = run(SynthAdapter(7), tmp_path, 3)  # an equal adapter, not the same object
    assert (second.chunks_written, second.chunks_resumed) == (0, 3)
    assert (second.videos, second.frames, second.bytes) == (first.videos, first.frames, first.bytes)
    assert stats(tmp_path) == before and chunk_files(tmp_path) == files
    third = run(adapter, tmp_path, 3, 2)  # num_workers is not part of the job
    assert (third.chunks_written, third.chunks_resumed) == (0, 3)
    assert stats(tmp_path) == before


def test_another_adapter_of_the_same_length_extends_the_dataset(tmp_path):
    run(SynthAdapter(6, prefix="a"), tmp_path, 3)
    report = run(SynthAdapter(6, prefix="b"), tmp_path, 3)
    assert (report.chunks_written, report.chunks_resumed, report.videos) == (2, 0, 6)
    assert sorted(n for n in chunk_files(tmp_path) if n.endswith(".gulp")) == [
        f"data_{k}.gulp" for k in range(4)
    ]
    gd = open_clean(tmp_path)
    assert gd.keys() == [f"a{i}" for i in range(6)] + [f"b{i}" for i in range(6)]
    assert GulpChunk(tmp_path / "data_2.gulp", tmp_path / "meta_2.gmeta").keys() == [
        "b0",
        "b1",
        "b2",
    ]


def test_ids_already_in_the_dataset_are_skipped_and_counted_not_failed(tmp_path):
    run(SynthAdapter(6, prefix="v"), tmp_path, 3)
    stored = {i: [bytes(b) for b in open_clean(tmp_path).frame_bytes(i)] for i in ("v4", "v5")}
    overlapping = SynthAdapter(6, prefix="v", start=4, frames=3)  # v4..v9, other frames
    with warnings.catch_warnings():
        warnings.simplefilter("error", IngestWarning)  # not a failure: no warning
        report = GulpIngestor(overlapping, tmp_path, 3, 1, progress=False)()
    assert report.failures == [] and report.already_stored == 2
    assert report.videos == 4
    assert "2 videos were already in the dataset" in report.summary()
    gd = open_clean(tmp_path)
    assert sorted(gd.keys()) == sorted(f"v{i}" for i in range(10))
    for i, frames in stored.items():  # the first copy is kept
        assert [bytes(b) for b in gd.frame_bytes(i)] == frames
    # strict stops on failures, and an id already stored is none
    again = GulpIngestor(SynthAdapter(2, prefix="v"), tmp_path, 3, 1, strict=True, progress=False)
    assert again().already_stored == 2


def test_unpicklable_adapters_of_the_same_class_are_not_mistaken_for_a_restart(tmp_path):
    with pytest.raises(Exception):  # noqa: B017 - whatever pickle raises for a lambda
        pickle.dumps(TransformAdapter(1, "x"))
    run(TransformAdapter(4, "a"), tmp_path, 2)
    report = run(TransformAdapter(4, "b"), tmp_path, 2)
    assert sorted(open_clean(tmp_path).keys()) == sorted(
        [f"a{i}" for i in range(4)] + [f"b{i}" for i in range(4)]
    )
    assert report.chunks_written == 2


def test_a_duplicate_id_in_two_chunks_of_one_run_is_skipped(tmp_path):
    items = [synth_video(i) for i in range(4)]
    items[3] = synth_video(3) | {"id": "v0"}  # slice 1 repeats slice 0's v0
    report = run(ListAdapter(items), tmp_path, 2)
    assert report.failed_ids == ["v0"]
    assert sorted(GulpDirectory(tmp_path).keys()) == ["v0", "v1", "v2"]


def test_failures_of_resumed_chunks_are_tuples_as_in_the_first_run(tmp_path):
    items = [synth_video(0), {"id": "v1", "error": "boom"}, synth_video(2)]
    first = run(ListAdapter(items), tmp_path, 2)
    second = run(ListAdapter(items), tmp_path, 2)
    assert second.chunks_resumed == 2
    assert second.failed_ids == first.failed_ids == ["v1"]  # passes
    assert second.failures == first.failures == [("v1", "boom")]


def test_chunk_published_without_its_record_is_counted_from_the_chunk(tmp_path):
    # The record is written before publication, so a published chunk always has one; a
    # record lost some other way (deleted by hand) costs only the failure list.
    items = [synth_video(0), {"id": "v1", "error": "boom"}, synth_video(2)]
    first = run(ListAdapter(items), tmp_path, 2)
    assert first.failed_ids == ["v1"]
    os.unlink(tmp_path / STATE / "chunk-0.json")
    again = run(ListAdapter(items), tmp_path, 2)
    assert (again.chunks_written, again.chunks_resumed) == (0, 2)
    assert (again.videos, again.frames, again.bytes) == (first.videos, first.frames, first.bytes)


def test_record_written_before_a_crash_in_publication_does_not_fake_a_finished_chunk(tmp_path):
    items = [synth_video(0), {"id": "v1", "error": "boom"}, synth_video(2)]
    first = run(ListAdapter(items), tmp_path, 2)
    # What a kill after the record but inside the publication leaves: no index yet.
    os.unlink(tmp_path / "data_0.gidx")
    again = run(ListAdapter(items), tmp_path, 2)
    assert (again.chunks_written, again.chunks_resumed) == (1, 1)
    assert again.failed_ids == ["v1"]
    assert (again.videos, again.frames, again.bytes) == (first.videos, first.frames, first.bytes)


# ------------------------------------------------------------------------------------------
# 7. shards
# ------------------------------------------------------------------------------------------
ADAPTER_MODULE = "ingest_shard_adapters"
SHARD_SCRIPT = textwrap.dedent(
    """
    import json, sys, warnings
    sys.path.insert(0, sys.argv[1])
    from {module} import Synth
    from gulpio_rs import GulpIngestor
    warnings.simplefilter("ignore")
    r = GulpIngestor(
        Synth(int(sys.argv[3])), sys.argv[2], 2, 1,
        shard_index=int(sys.argv[4]), num_shards=int(sys.argv[5]), progress=False,
    )()
    print(json.dumps({{"videos": r.videos, "written": r.chunks_written,
                      "resumed": r.chunks_resumed, "failures": r.failures}}))
    """
)


def write_adapter_module(folder: Path) -> None:
    """A module the child processes can import: Synth frames come from synthetic_frame."""
    source = "import numpy as np\nfrom gulpio_rs.adapters import AbstractDatasetAdapter\n\n\n"
    source += inspect.getsource(synthetic_frame) + textwrap.dedent(
        """

        class Synth(AbstractDatasetAdapter):
            def __init__(self, n):
                self.n = n

            def __len__(self):
                return self.n

            def iter_data(self, slice_element=None):
                for i in range(self.n)[slice_element or slice(None)]:
                    frames = [synthetic_frame(48, 64, seed=1000 * i + k) for k in range(2)]
                    yield {"id": f"s{i}", "meta": {"i": i}, "frames": frames}
        """
    )
    (folder / f"{ADAPTER_MODULE}.py").write_text(source)


def import_adapter_module(folder: Path):
    sys.path.insert(0, str(folder))
    try:
        sys.modules.pop(ADAPTER_MODULE, None)
        return __import__(ADAPTER_MODULE)
    finally:
        sys.path.remove(str(folder))


def test_concurrent_shard_processes_equal_a_single_process_ingest(tmp_path):
    write_adapter_module(tmp_path)
    (tmp_path / "shard.py").write_text(SHARD_SCRIPT.format(module=ADAPTER_MODULE))
    shared, n, shards = tmp_path / "shared", 11, 3  # 6 chunks: 0,3 / 1,4 / 2,5
    procs = [
        subprocess.Popen(
            [sys.executable, str(tmp_path / "shard.py"), str(tmp_path), str(shared), str(n)]
            + [str(s), str(shards)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for s in range(shards)
    ]
    results = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        results.append(json.loads(out))
    assert [r["written"] for r in results] == [2, 2, 2]
    assert [r["videos"] for r in results] == [4, 4, 3]
    assert all(r["failures"] == [] and r["resumed"] == 0 for r in results)

    module = import_adapter_module(tmp_path)
    single = run(module.Synth(n), tmp_path / "single", 2)
    assert single.chunks_written == 6
    files = chunk_files(shared)
    assert len(files) == 18 and files == chunk_files(tmp_path / "single")
    gd = open_clean(shared)
    assert gd.keys() == [f"s{i}" for i in range(n)]  # every video once, in adapter order
    plans = [json.loads(p.read_text()) for p in (shared / STATE).glob("run-*.json")]
    assert [p["first_chunk"] for p in plans] == [0]  # one plan, shared by the shards

    # A shard run again finds its chunks done, and writes nothing.
    before = stats(shared)
    again = run(module.Synth(n), shared, 2, shard_index=1, num_shards=shards)
    assert (again.chunks_written, again.chunks_resumed, again.videos) == (0, 2, 4)
    assert stats(shared) == before


def test_shards_in_one_process_cover_the_adapter_once(tmp_path):
    adapter = SynthAdapter(7)
    reports = [run(adapter, tmp_path, 2, shard_index=s, num_shards=2) for s in (1, 0)]
    assert [(r.chunks_written, r.videos) for r in reports] == [(2, 3), (2, 4)]
    assert sorted(open_clean(tmp_path).keys()) == sorted(f"v{i}" for i in range(7))
    assert chunk_files(tmp_path) == chunk_files(run(adapter, tmp_path / "x", 2).output_folder)


# ------------------------------------------------------------------------------------------
# gulpio2-style use
# ------------------------------------------------------------------------------------------
def gulpio2_videos(n=5):
    videos = [synth_video(i) for i in range(n)]
    videos[2]["frames"] = []  # gulpio2's ChunkWriter skips (and reports) an empty video
    return videos


def test_gulpio2_style_ingestor_call(tmp_path):
    from gulpio_rs.fileio import GulpIngestor as FileioIngestor

    adapter = Gulpio2StyleAdapter(gulpio2_videos())
    with pytest.warns(IngestWarning):
        skipped = FileioIngestor(adapter, str(tmp_path), 2, 1)()
    assert list(skipped) == ["v2"]
    gd = GulpDirectory(str(tmp_path))
    assert gd.keys() == ["v0", "v1", "v3", "v4"]
    frames, meta = gd["v3"]
    assert meta == {"i": 3, "label": "b"} and len(frames) == 2
    for got, want in zip(frames, synth_video(3)["frames"], strict=True):
        assert mean_abs_diff(got, want) < 12.0  # q90 4:2:0 of a 48x64 frame


def test_gulpio2_style_chunkwriter_returns_skipped_ids(tmp_path):
    from gulpio_rs.fileio import ChunkWriter
    from gulpio_rs.fileio import GulpChunk as FileioChunk

    chunk = FileioChunk(str(tmp_path / "data_0.gulp"), str(tmp_path / "meta_0.gmeta"))
    writer = ChunkWriter(Gulpio2StyleAdapter(gulpio2_videos()))
    with pytest.warns(UserWarning, match="v2"):
        skipped = writer.write_chunk(chunk, slice(1, 4))
    assert skipped == ["v2"]
    gd = open_clean(tmp_path)
    assert gd.keys() == ["v1", "v3"]
    # ChunkWriter keeps gulpio2's 4:4:4
    assert sampling(bytes(gd.frame_bytes("v1")[0]))[0] == (1, 1, 1)


def test_jpegs_other_readers_cannot_read_alike_are_stored_as_baseline(tmp_path):
    """CMYK JPEGs decode to 4 channels in gulpio2 and to RGB here; arithmetic-coded ones do not
    decode everywhere. Both are stored re-encoded as baseline RGB instead of as they are."""
    # A real frame, not a synthetic one: noise and hard colour edges lose ~5 dB more in two
    # lossy passes (Pillow's q75 CMYK, then q90 4:2:0), which says nothing about the path.
    with Image.open(BBB / "clip_02" / "frame_0005.jpg") as img:
        buf = io.BytesIO()
        img.convert("CMYK").save(buf, "JPEG", quality=95)
    frames = [buf.getvalue()]
    ari = CONFORMANCE / "ljt_testimgari.jpg"
    if ari.exists():
        frames.append(ari.read_bytes())
    run(ListAdapter([{"id": "odd", "meta": {}, "frames": frames}]), tmp_path)
    gd = GulpDirectory(tmp_path)
    stored = [bytes(b) for b in gd.frame_bytes("odd")]
    assert [_native.jpeg_info(b).components for b in stored] == [3] * len(frames)
    assert all(b != f for b, f in zip(stored, frames, strict=True))
    for i, original in enumerate(frames):
        with Image.open(io.BytesIO(original)) as img:
            expected = np.asarray(img.convert("RGB"), dtype=np.float64)
        got = gd.read("odd", frames=[i])[0].astype(np.float64)
        assert 10 * np.log10(255**2 / np.mean((got - expected) ** 2)) > 30, i
