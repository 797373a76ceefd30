"""Compatibility of gulpio-rs with gulpio2 0.0.4, tested against the real gulpio2 package.

1. gulpio2 writes, gulpio_rs reads: same JPEG bytes, same decoded frames, same metadata, same
   ``merged_meta_dict``, same frame selection; legacy chunks can be indexed in place.
2. An index made stale by gulpio2 (``'ab'`` appends, rewrites) is detected and not trusted.
3. gulpio_rs writes, gulpio2 reads; both libraries write byte-identical ``.gulp``/``.gmeta``.
4. The import surface of ``import gulpio_rs as gulpio2``.
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import json
import math
import pickle
import warnings
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import gulpio_rs
import gulpio_rs.adapters
import gulpio_rs.fileio
import gulpio_rs.sanity_utils
import gulpio_rs.utils

gulpio2 = pytest.importorskip(
    "gulpio2",
    reason="gulpio2==0.0.4 is installed by .ci/run; the compatibility promise is tested against it",
)
for _submodule in ("adapters", "fileio", "sanity_utils", "utils"):
    importlib.import_module(f"gulpio2.{_submodule}")

G2_DECODER = gulpio2.utils.jpeg_bytes_to_img
MIN_PSNR_DB = 40.0
MAX_ABS_DIFF = 16  # the Rust decoder vs simplejpeg's fast DCT path: a few levels at most


# ------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------


class G2ListAdapter(gulpio2.adapters.AbstractDatasetAdapter):
    """The smallest gulpio2 adapter: a list of ``{'id', 'meta', 'frames'}`` dicts."""

    def __init__(self, videos):
        self.videos = videos

    def __len__(self):
        return len(self.videos)

    def iter_data(self, slice_element=None):
        slice_element = slice_element or slice(0, len(self))
        yield from self.videos[slice_element]


class RsListAdapter(gulpio_rs.adapters.AbstractDatasetAdapter):
    """The same adapter written against gulpio_rs's base class."""

    def __init__(self, videos):
        self.videos = videos

    def __len__(self):
        return len(self.videos)

    def iter_data(self, slice_element=None):
        slice_element = slice_element or slice(0, len(self))
        yield from self.videos[slice_element]


def json_text(value) -> str:
    """Order-sensitive, NaN-aware equality key for metadata (``nan != nan`` as floats)."""
    return json.dumps(value, allow_nan=True)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def gulp_files(root: Path) -> dict[str, bytes]:
    """``{name: content}`` of the ``.gulp`` and ``.gmeta`` files (not the ``.gidx``)."""
    return {
        p.name: p.read_bytes() for p in sorted(root.iterdir()) if p.suffix in (".gulp", ".gmeta")
    }


def stored_jpegs(data_path: str, frame_info) -> list[bytes]:
    """The JPEG bytes of each ``[loc, pad, length]`` record, read straight from the .gulp."""
    out = []
    with open(data_path, "rb") as f:
        for loc, pad, length in frame_info:
            f.seek(loc)
            record = f.read(length)
            assert len(record) == length
            out.append(record[: length - pad])
    return out


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse)


def assert_frames_equal(actual, expected):
    assert isinstance(actual, list)
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
        assert a.dtype == np.uint8, i
        assert a.shape == e.shape, i
        np.testing.assert_array_equal(a, e, err_msg=f"frame {i}")


def assert_frames_close(actual, expected):
    """Same shapes (HxW for gray) and visually identical pixels (different IDCTs)."""
    assert isinstance(actual, list)
    assert len(actual) == len(expected)
    for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
        assert a.dtype == np.uint8, i
        assert a.shape == e.shape, i
        diff = np.abs(a.astype(np.int16) - e.astype(np.int16)).max()
        assert diff <= MAX_ABS_DIFF, f"frame {i}: max abs diff {diff}"
        assert psnr(a, e) >= MIN_PSNR_DB, f"frame {i}: PSNR {psnr(a, e):.1f} dB"


def g2_roundtrip(frame: np.ndarray) -> np.ndarray:
    """What gulpio2 returns for a frame it stored itself."""
    return G2_DECODER(gulpio2.utils.img_to_jpeg_bytes(frame))


def g2_chunk(root: Path, number: int):
    return gulpio2.fileio.GulpChunk(
        str(root / f"data_{number}.gulp"), str(root / f"meta_{number}.gmeta")
    )


def rs_chunk(root: Path, number: int):
    return gulpio_rs.GulpChunk(root / f"data_{number}.gulp", root / f"meta_{number}.gmeta")


def g2_next_chunk(root: Path):
    return next(gulpio2.GulpDirectory(str(root)).new_chunks(1))


def write_videos(chunk, videos, mode="wb"):
    """``chunk.append(id, meta, frames)`` for each video inside ``chunk.open(mode)``."""
    with chunk.open(mode):
        for id_, meta, frames in videos:
            chunk.append(id_, meta, frames)


def record(expected: dict, videos) -> None:
    """Remember what was appended: ``expected[str(id)]`` is a list of ``(meta, frames)``."""
    for id_, meta, frames in videos:
        expected.setdefault(str(id_), []).append((meta, frames))


def assert_same_as_gulpio2(root: Path) -> gulpio_rs.GulpDirectory:
    """Read ``root`` with gulpio2 and gulpio_rs and compare every id, frame and metadata."""
    g2 = gulpio2.GulpDirectory(str(root))
    rs = gulpio_rs.GulpDirectory(root)
    rs_g2_decoder = gulpio_rs.GulpDirectory(root, jpeg_decoder=G2_DECODER)
    ids = list(g2.merged_meta_dict)

    assert len(rs) == len(ids)
    assert sorted(rs.keys()) == sorted(ids)
    assert rs.num_chunks == g2.num_chunks
    assert sorted(rs.chunk_objs_lookup) == sorted(g2.chunk_objs_lookup)
    for id_ in ids:
        entry = g2.merged_meta_dict[id_]
        g2_chunk_obj = g2.chunk_objs_lookup[g2.chunk_lookup[id_]]
        assert id_ in rs
        assert rs.chunk_lookup[id_] == g2.chunk_lookup[id_]
        assert rs.num_frames(id_) == len(entry["frame_info"])

        rs_entry = rs.merged_meta_dict[id_]
        assert list(rs_entry) == ["frame_info", "meta_data"]
        assert rs_entry["frame_info"] == entry["frame_info"]
        assert json_text(rs_entry["meta_data"]) == json_text(entry["meta_data"])

        want_bytes = stored_jpegs(g2_chunk_obj.data_file_path, entry["frame_info"])
        views = rs.frame_bytes(id_)
        assert all(isinstance(v, memoryview) for v in views)
        assert [bytes(v) for v in views] == want_bytes

        g2_frames, g2_meta = g2[id_]
        frames, meta = rs_g2_decoder[id_]
        assert type(meta) is dict
        assert json_text(meta) == json_text(g2_meta)
        assert_frames_equal(frames, g2_frames)

        frames, meta = rs[id_]
        assert json_text(meta) == json_text(g2_meta)
        assert_frames_close(frames, g2_frames)
    return rs


# ------------------------------------------------------------------------------------------------
# datasets written by gulpio2 (each builder uses its own ids, so they can share a directory)
# ------------------------------------------------------------------------------------------------

ODD_IDS = ["é/../x y", "🎥 clip", "日本語", " spaced ", 'quote"back\\slash', "tab\tnew\nline", ""]

RICH_META = {
    "nested": {"a": {"b": [1, {"c": None}]}, "empty": {}},
    "floats": [0.1, 1e300, 1e-7, -0.0, 2.5, 123456789.125],
    "nan": float("nan"),
    "inf": float("inf"),
    "ninf": float("-inf"),
    "list": [1, "two", 3.0, True, False, None, []],
    "big": 2**64,
    "neg": -(2**63),
    "unicode": "é🎥日本\u0000\x7f",
    "start_frame": 12,
    "verb_class": 3,
}

# (h, w[, 3]) as in gulpio2's own tests (4x1 .. 1x1), plus larger and odd sizes and gray ones.
FRAME_SHAPES = [(4, 1, 3), (3, 1, 3), (2, 1, 3), (1, 1, 3), (120, 160, 3), (37, 53, 3),
                (9, 301, 3), (1, 1), (5, 7), (64, 48)]  # fmt: skip


def shaped_frame(make_frame, shape, seed):
    return make_frame(shape[0], shape[1], gray=len(shape) == 2, seed=seed)


def build_colour(root, make_frame):
    write_videos(
        g2_next_chunk(root),
        [
            ("colour-a", {"label": "a"}, [make_frame(48, 64, seed=s) for s in range(4)]),
            ("colour-b", {"label": "b"}, [make_frame(120, 160, seed=10 + s) for s in range(6)]),
        ],
    )


def build_gray(root, make_frame):
    write_videos(
        g2_next_chunk(root),
        [
            ("gray-a", {"label": "g"}, [make_frame(48, 64, gray=True, seed=s) for s in range(5)]),
            ("gray-b", {"label": "h"}, [make_frame(37, 53, gray=True, seed=7)]),
        ],
    )


def build_mixed(root, make_frame):
    """EPIC-Kitchens flow style: interleaved gray u/v frames, with colour frames mixed in."""
    kinds = [True, True, False, True, True, False]  # gray?
    frames = [make_frame(30, 40, gray=g, seed=20 + i) for i, g in enumerate(kinds)]
    write_videos(g2_next_chunk(root), [("P01_01_flow", {"uid": 1, "verb": "open"}, frames)])


def build_sizes(root, make_frame):
    varied = [shaped_frame(make_frame, s, 30 + i) for i, s in enumerate(FRAME_SHAPES)]
    ones = [np.ones((h, 1, 3), dtype=np.uint8) for h in (4, 3, 2, 1)]  # gulpio2's test frames
    write_videos(
        g2_next_chunk(root),
        [("sizes-varied", {"n": len(varied)}, varied), ("sizes-ones", {}, ones)],
    )


def build_empty(root, make_frame):
    write_videos(
        g2_next_chunk(root),
        [
            ("empty", {"note": "no frames"}, []),
            ("after-empty", {"note": "one frame"}, [make_frame(20, 20, seed=40)]),
        ],
    )


GAP_CHUNKS = (0, 3, 12)


def build_gaps(root, make_frame):
    """Chunks data_0, data_3 and data_12, written with explicit paths (must run first)."""
    for k in GAP_CHUNKS:
        videos = []
        for j in range(2):
            frames = [make_frame(24, 32, seed=100 * k + 10 * j + i) for i in range(j + 1)]
            videos.append((f"gap-{k}-{j}", {"chunk": k, "j": j}, frames))
        write_videos(g2_chunk(root, k), videos)


def build_append_mode(root, make_frame):
    """'ab' adds a new id and more frames (and a second meta_data element) to an existing id."""
    chunk = g2_next_chunk(root)
    write_videos(
        chunk,
        [
            ("ab-a", {"part": 1}, [make_frame(40, 60, seed=50 + i) for i in range(2)]),
            ("ab-b", {"part": 1}, [make_frame(40, 60, seed=55)]),
        ],
    )
    again = gulpio2.fileio.GulpChunk(chunk.data_file_path, chunk.meta_file_path)
    more = [
        make_frame(40, 60, seed=60),
        make_frame(40, 60, gray=True, seed=61),
        make_frame(10, 6, seed=62),
    ]
    write_videos(
        again,
        [("ab-c", {"part": 2}, [make_frame(40, 60, seed=65)] * 2), ("ab-a", {"part": 2}, more)],
        mode="ab",
    )


def build_odd_ids(root, make_frame):
    videos = [
        (id_, {"id": id_}, [make_frame(16, 16, seed=70 + i)]) for i, id_ in enumerate(ODD_IDS)
    ]
    videos.append((7, {"id": 7}, [make_frame(16, 16, seed=79)] * 2))  # stored as "7"
    write_videos(g2_next_chunk(root), videos)


def build_metadata(root, make_frame):
    frame = [make_frame(16, 24, seed=80)]
    write_videos(
        g2_next_chunk(root),
        [
            ("meta-rich", RICH_META, frame),
            ("meta-empty", {}, frame),
            ("meta-tuple", {"t": (1, 2), "s": "x"}, frame),  # tuples are stored as lists
        ],
    )


def ingest_videos(make_frame, prefix="ing", count=6, seed=200):
    """Adapter items; every third one has no frames (gulpio2's ChunkWriter skips those)."""
    videos = []
    for i in range(count):
        frames = [make_frame(32, 48, gray=i % 2 == 1, seed=seed + 10 * i + j) for j in range(i % 3)]
        videos.append(
            {"id": f"{prefix}-{i}", "meta": {"i": i, "label": "xy"[i % 2]}, "frames": frames}
        )
    return videos


def build_ingestor(root, make_frame):
    adapter = G2ListAdapter(ingest_videos(make_frame))
    gulpio2.fileio.GulpIngestor(adapter, str(root), videos_per_chunk=2, num_workers=1)()


GULPIO2_BUILDERS = {
    "gaps": build_gaps,  # first: it picks its own chunk numbers
    "colour": build_colour,
    "gray": build_gray,
    "mixed_gray_colour": build_mixed,
    "frame_sizes": build_sizes,
    "zero_frames": build_empty,
    "append_mode": build_append_mode,
    "odd_ids": build_odd_ids,
    "metadata": build_metadata,
    "ingestor": build_ingestor,
}


def build_everything(root, make_frame):
    for build in GULPIO2_BUILDERS.values():
        build(root, make_frame)


@pytest.fixture
def g2_everything(tmp_path, make_frame):
    """A directory written by gulpio2 with every case above (chunks 0, 3, 12, 13, ...)."""
    build_everything(tmp_path, make_frame)
    return tmp_path


@pytest.fixture
def g2_clip(tmp_path, make_frame):
    """gulpio2 wrote one 6-frame video 'clip' of mixed sizes and gray/colour, for selections."""
    shapes = [(48, 64, 3), (48, 64), (30, 40, 3), (4, 1, 3), (17, 23), (48, 64, 3)]
    frames = [shaped_frame(make_frame, s, 300 + i) for i, s in enumerate(shapes)]
    write_videos(g2_chunk(tmp_path, 0), [("clip", {"label": "clip"}, frames)])
    return tmp_path


# ------------------------------------------------------------------------------------------------
# 1. gulpio2 writes, gulpio_rs reads
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", list(GULPIO2_BUILDERS))
def test_gulpio2_written_dataset_reads_the_same(tmp_path, make_frame, case):
    GULPIO2_BUILDERS[case](tmp_path, make_frame)
    assert_same_as_gulpio2(tmp_path)


def test_gulpio2_written_everything_in_one_directory(g2_everything):
    rs = assert_same_as_gulpio2(g2_everything)
    assert list(rs.chunk_objs_lookup)[:3] == list(GAP_CHUNKS)


def test_gray_frames_are_hxw(tmp_path, make_frame):
    build_gray(tmp_path, make_frame)
    for decoder in (None, G2_DECODER):
        gd = gulpio_rs.GulpDirectory(tmp_path, jpeg_decoder=decoder)
        frames, _ = gd["gray-a"]
        assert [f.shape for f in frames] == [(48, 64)] * 5


def test_mixed_gray_and_colour_frames_keep_their_shapes(tmp_path, make_frame):
    build_mixed(tmp_path, make_frame)
    frames, meta = gulpio_rs.GulpDirectory(tmp_path)["P01_01_flow"]
    gray, rgb = (30, 40), (30, 40, 3)
    assert [f.shape for f in frames] == [gray, gray, rgb, gray, gray, rgb]
    assert meta == {"uid": 1, "verb": "open"}


def test_frames_of_different_sizes_in_one_video(tmp_path, make_frame):
    build_sizes(tmp_path, make_frame)
    gd = gulpio_rs.GulpDirectory(tmp_path, jpeg_decoder=G2_DECODER)
    frames, _ = gd["sizes-varied"]
    assert [f.shape for f in frames] == FRAME_SHAPES
    ones, _ = gd["sizes-ones"]
    assert [f.shape for f in ones] == [(4, 1, 3), (3, 1, 3), (2, 1, 3), (1, 1, 3)]
    assert gd.merged_meta_dict["sizes-ones"]["frame_info"][0][2] % 4 == 0


def test_zero_frame_video(tmp_path, make_frame):
    build_empty(tmp_path, make_frame)
    gd = gulpio_rs.GulpDirectory(tmp_path)
    assert "empty" in gd
    assert gd.num_frames("empty") == 0
    assert gd["empty"] == ([], {"note": "no frames"})
    assert gd["empty", 0:5] == ([], {"note": "no frames"})
    assert gd.frame_bytes("empty") == []
    assert gd.merged_meta_dict["empty"]["frame_info"] == []


def test_chunk_numbers_with_gaps(tmp_path, make_frame):
    build_gaps(tmp_path, make_frame)
    gd = gulpio_rs.GulpDirectory(tmp_path)
    assert list(gd.chunk_objs_lookup) == list(GAP_CHUNKS)
    assert gd.num_chunks == 3
    assert {id_: gd.chunk_lookup[id_] for id_ in gd.keys()} == gulpio2.GulpDirectory(
        str(tmp_path)
    ).chunk_lookup
    (new,) = gd.new_chunks(1)
    assert Path(new.data_file_path).name == "data_13.gulp"
    assert Path(new.meta_file_path).name == "meta_13.gmeta"


def test_ab_mode_appends_frames_and_a_second_meta_data_element(tmp_path, make_frame):
    build_append_mode(tmp_path, make_frame)
    gd = gulpio_rs.GulpDirectory(tmp_path)
    entry = gd.merged_meta_dict["ab-a"]
    assert entry["meta_data"] == [{"part": 1}, {"part": 2}]
    assert gd.num_frames("ab-a") == 5
    frames, meta = gd["ab-a"]
    assert meta == {"part": 1}  # readers return meta_data[0]
    assert [f.shape for f in frames] == [(40, 60, 3)] * 3 + [(40, 60), (10, 6, 3)]
    (loc_1, _, length_1), (loc_2, _, _) = entry["frame_info"][1:3]
    assert loc_2 > loc_1 + length_1  # the 'ab' frames come after other videos' frames
    assert gd.keys() == ["ab-a", "ab-b", "ab-c"]


def test_odd_and_unicode_ids(tmp_path, make_frame):
    build_odd_ids(tmp_path, make_frame)
    gd = gulpio_rs.GulpDirectory(tmp_path)
    for id_ in ODD_IDS:
        assert id_ in gd
        assert gd[id_][1] == {"id": id_}
        assert gd.num_frames(id_) == 1
    assert 7 in gd and "7" in gd
    assert gd[7][1] == {"id": 7}
    assert len(gd[7][0]) == 2
    assert "missing" not in gd
    assert sorted(gd.keys()) == sorted([*ODD_IDS, "7"])


def test_metadata_values(tmp_path, make_frame):
    build_metadata(tmp_path, make_frame)
    gd = gulpio_rs.GulpDirectory(tmp_path)
    meta = gd["meta-rich"][1]
    assert json_text(meta) == json_text(RICH_META)
    assert math.isnan(meta["nan"]) and meta["inf"] == math.inf and meta["ninf"] == -math.inf
    assert math.copysign(1.0, meta["floats"][3]) == -1.0
    assert meta["big"] == 2**64 and isinstance(meta["big"], int)
    assert gd["meta-empty"][1] == {}
    assert gd["meta-tuple"][1] == {"t": [1, 2], "s": "x"}
    g2 = gulpio2.GulpDirectory(str(tmp_path))
    for id_ in ("meta-rich", "meta-empty", "meta-tuple"):
        assert json_text(gd[id_][1]) == json_text(g2[id_][1])


def test_len_contains_num_frames_and_unknown_id(g2_everything):
    gd = gulpio_rs.GulpDirectory(g2_everything)
    g2 = gulpio2.GulpDirectory(str(g2_everything))
    assert len(gd) == len(g2.merged_meta_dict)
    for id_, entry in g2.merged_meta_dict.items():
        assert id_ in gd
        assert gd.num_frames(id_) == len(entry["frame_info"])
    assert "no-such-id" not in gd
    with pytest.raises(KeyError):
        gd["no-such-id"]
    with pytest.raises(KeyError):
        g2["no-such-id"]


SELECTIONS = {
    "slice_1_3": slice(1, 3),
    "reversed": slice(None, None, -1),
    "step_2": slice(None, None, 2),
    "negative_start": slice(-2, None),
    "backwards_step": slice(4, 1, -1),
    "past_the_end": slice(3, 100),
    "empty_slice": slice(3, 3),
    "list_first_last": [0, -1],
    "list_repeats": [2, 2, 0],
    "ndarray": np.array([1, 0]),
    "ndarray_int32": np.array([5, -6, 3], dtype=np.int32),
    "empty_ndarray": np.array([], dtype=np.int64),
}


@pytest.mark.parametrize("selection", list(SELECTIONS.values()), ids=list(SELECTIONS))
def test_frame_selection_matches_gulpio2(g2_clip, selection):
    g2_frames, g2_meta = gulpio2.GulpDirectory(str(g2_clip))["clip", selection]
    frames, meta = gulpio_rs.GulpDirectory(g2_clip, jpeg_decoder=G2_DECODER)["clip", selection]
    assert meta == g2_meta
    assert_frames_equal(frames, g2_frames)
    frames, _ = gulpio_rs.GulpDirectory(g2_clip)["clip", selection]
    assert_frames_close(frames, g2_frames)
    views = gulpio_rs.GulpDirectory(g2_clip).frame_bytes("clip", selection)
    assert len(views) == len(g2_frames)


@pytest.mark.parametrize("index", [3, -1, 0, np.int64(2)])
def test_single_int_index_returns_a_one_frame_list(g2_clip, index):
    g2_frames, _ = gulpio2.GulpDirectory(str(g2_clip))["clip", [int(index)]]
    frames, meta = gulpio_rs.GulpDirectory(g2_clip, jpeg_decoder=G2_DECODER)["clip", index]
    assert meta == {"label": "clip"}
    assert_frames_equal(frames, g2_frames)


@pytest.mark.parametrize("selection", [[6], [-7], np.array([0, 6])], ids=repr)
def test_out_of_range_frame_raises_index_error_like_gulpio2(g2_clip, selection):
    with pytest.raises(IndexError):
        gulpio2.GulpDirectory(str(g2_clip))["clip", selection]
    with pytest.raises(IndexError):
        gulpio_rs.GulpDirectory(g2_clip)["clip", selection]


def test_chunk_level_api_matches_gulpio2(g2_everything):
    g2 = gulpio2.GulpDirectory(str(g2_everything))
    rs = gulpio_rs.GulpDirectory(g2_everything, jpeg_decoder=G2_DECODER)
    assert list(rs.chunk_objs_lookup) == sorted(g2.chunk_objs_lookup)
    per_chunk_ids = {k: list(c.meta_dict) for k, c in g2.chunk_objs_lookup.items()}
    assert [list(m) for m in rs.all_meta_dicts] == [per_chunk_ids[k] for k in rs.chunk_objs_lookup]
    for number, chunk in rs.chunk_objs_lookup.items():
        g2_chunk_obj = g2.chunk_objs_lookup[number]
        assert Path(chunk.data_file_path) == Path(g2_chunk_obj.data_file_path)
        assert Path(chunk.meta_file_path) == Path(g2_chunk_obj.meta_file_path)
        assert json_text(chunk.meta_dict) == json_text(g2_chunk_obj.meta_dict)
        for id_ in g2_chunk_obj.meta_dict:
            assert id_ in chunk
        with chunk.open("rb"):  # gulpio2's nested pattern: open, then iterate (opens again)
            ours = list(chunk)
        theirs = list(g2_chunk_obj)
        assert len(ours) == len(theirs)
        for (frames, meta), (g2_frames, g2_meta) in zip(ours, theirs, strict=True):
            assert json_text(meta) == json_text(g2_meta)
            assert_frames_equal(frames, g2_frames)


def test_standalone_gulpchunk_reads_gulpio2_chunk(g2_clip):
    chunk = gulpio_rs.GulpChunk(
        str(g2_clip / "data_0.gulp"), str(g2_clip / "meta_0.gmeta"), jpeg_decoder=G2_DECODER
    )
    g2 = g2_chunk(g2_clip, 0)
    with chunk.open("rb"), g2.open("rb"):
        assert_frames_equal(chunk["clip"][0], g2["clip"][0])
        assert_frames_equal(chunk.read_frames("clip", [1, 2])[0], g2.read_frames("clip", [1, 2])[0])
        assert chunk["clip", 1:3][1] == g2["clip", 1:3][1]


def test_gulpio2_chunks_have_no_index_and_are_read_through_the_gmeta(g2_everything):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gd = gulpio_rs.GulpDirectory(g2_everything)
    assert gd.problems == []
    assert not any(c.indexed for c in gd.chunk_objs_lookup.values())
    assert not list(g2_everything.glob("*.gidx"))


def snapshot(gd) -> dict:
    return {
        id_: ([bytes(v) for v in gd.frame_bytes(id_)], json_text(gd.merged_meta_dict[id_]))
        for id_ in gd.keys()
    }


@pytest.mark.parametrize("how", ["write_index", "write_indexes"])
def test_indexing_gulpio2_chunks_in_place(g2_everything, how):
    root = g2_everything
    hashes = {p.name: sha256(p) for p in root.iterdir()}
    before = gulpio_rs.GulpDirectory(root)
    baseline = snapshot(before)
    numbers = list(before.chunk_objs_lookup)

    if how == "write_index":
        for number in numbers:
            meta_path = root / f"meta_{number}.gmeta"
            written = gulpio_rs.write_index(root / f"data_{number}.gulp", meta_path)
            assert written == len(json.loads(meta_path.read_text()))
    else:
        assert before.write_indexes() == len(numbers)

    assert {p.name: sha256(p) for p in root.iterdir() if p.suffix != ".gidx"} == hashes
    assert sorted(p.name for p in root.glob("*.gidx")) == sorted(f"data_{k}.gidx" for k in numbers)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        after = gulpio_rs.GulpDirectory(root)
    assert after.problems == []
    assert all(after.chunk_objs_lookup[k].indexed for k in numbers)
    assert snapshot(after) == baseline
    assert after.write_indexes() == 0  # nothing left to index
    assert_same_as_gulpio2(root)  # gulpio2 still reads it too (its globs ignore .gidx)


# ------------------------------------------------------------------------------------------------
# 2. an index made stale by gulpio2 is detected and not trusted
# ------------------------------------------------------------------------------------------------


def stale_new_id(root, make_frame):
    write_videos(g2_chunk(root, 0), [("new", {"n": 1}, [make_frame(24, 24, seed=401)])], "ab")


def stale_more_frames(root, make_frame):
    more = [make_frame(24, 24, seed=402), make_frame(24, 24, gray=True, seed=403)]
    write_videos(g2_chunk(root, 0), [("old-a", {"part": 2}, more)], "ab")


def stale_both(root, make_frame):
    stale_new_id(root, make_frame)
    stale_more_frames(root, make_frame)


def stale_same_size_gmeta(root, make_frame):
    """gulpio2 re-gulps the chunk with the same frames but relabelled: the .gmeta keeps its
    size and only its content changes."""
    for p in (root / "data_0.gulp", root / "meta_0.gmeta"):
        p.unlink()
    write_videos(g2_chunk(root, 0), stale_base_videos(make_frame, label="dog"))


def stale_base_videos(make_frame, label="cat"):
    return [
        ("old-a", {"label": label}, [make_frame(24, 24, seed=410 + i) for i in range(3)]),
        ("old-b", {"label": label}, [make_frame(24, 24, gray=True, seed=420)]),
    ]


STALE_CHANGES = {
    "ab_new_id": stale_new_id,
    "ab_more_frames_for_existing_id": stale_more_frames,
    "ab_new_id_and_more_frames": stale_both,
    "rewritten_same_size_gmeta": stale_same_size_gmeta,
}


@pytest.fixture
def rs_indexed_chunk(tmp_path, make_frame):
    """Chunk 0 written by gulpio_rs (so it has an index)."""
    write_videos(rs_chunk(tmp_path, 0), stale_base_videos(make_frame))
    assert (tmp_path / "data_0.gidx").exists()
    assert gulpio_rs.GulpDirectory(tmp_path).chunk_objs_lookup[0].indexed
    return tmp_path


@pytest.mark.parametrize("change", list(STALE_CHANGES))
def test_stale_index_is_detected_by_gulpdirectory(rs_indexed_chunk, make_frame, change):
    root = rs_indexed_chunk
    STALE_CHANGES[change](root, make_frame)
    with pytest.warns(gulpio_rs.BrokenChunkWarning):
        # the warning may come at open or at the first read; either way the data is right
        gd = assert_same_as_gulpio2(root)
    assert not gd.chunk_objs_lookup[0].indexed


@pytest.mark.parametrize("change", list(STALE_CHANGES))
def test_stale_index_is_detected_by_gulpchunk(rs_indexed_chunk, make_frame, change):
    root = rs_indexed_chunk
    STALE_CHANGES[change](root, make_frame)
    g2 = g2_chunk(root, 0)
    chunk = gulpio_rs.GulpChunk(
        root / "data_0.gulp", root / "meta_0.gmeta", jpeg_decoder=G2_DECODER
    )
    with pytest.warns(gulpio_rs.BrokenChunkWarning):
        ids = chunk.keys()
    assert ids == list(g2.meta_dict)
    assert not chunk.indexed
    with g2.open("rb"):
        for id_ in ids:
            frames, meta = chunk[id_]
            g2_frames, g2_meta = g2[id_]
            assert meta == g2_meta
            assert_frames_equal(frames, g2_frames)


def test_stale_index_data_matches_what_was_appended(rs_indexed_chunk, make_frame):
    root = rs_indexed_chunk
    stale_both(root, make_frame)
    with pytest.warns(gulpio_rs.BrokenChunkWarning):
        gd = gulpio_rs.GulpDirectory(root, jpeg_decoder=G2_DECODER)
        old_a, meta = gd["old-a"]
    assert meta == {"label": "cat"}
    assert gd.merged_meta_dict["old-a"]["meta_data"] == [{"label": "cat"}, {"part": 2}]
    expected = [make_frame(24, 24, seed=410 + i) for i in range(3)]
    expected += [make_frame(24, 24, seed=402), make_frame(24, 24, gray=True, seed=403)]
    assert_frames_equal(old_a, [g2_roundtrip(f) for f in expected])
    assert_frames_equal(gd["new"][0], [g2_roundtrip(make_frame(24, 24, seed=401))])


# ------------------------------------------------------------------------------------------------
# 3. gulpio_rs writes, gulpio2 reads
# ------------------------------------------------------------------------------------------------


def assert_gulpio2_reads(root: Path, expected: dict) -> None:
    """gulpio2 reads exactly what was appended (``expected`` from :func:`record`)."""
    g2 = gulpio2.GulpDirectory(str(root))
    assert sorted(g2.merged_meta_dict) == sorted(expected)
    for id_, appends in expected.items():
        entry = g2.merged_meta_dict[id_]
        assert json_text(entry["meta_data"]) == json_text([meta for meta, _ in appends])
        frames, meta = g2[id_]
        assert json_text(meta) == json_text(appends[0][0])
        assert_frames_equal(frames, [g2_roundtrip(f) for _, fs in appends for f in fs])


def mixed_videos(make_frame, prefix, seed):
    """Colour, gray, interleaved gray/colour, varied sizes, no frames, a unicode id."""
    colour = [make_frame(36, 52, seed=seed + i) for i in range(3)]
    flow = [make_frame(20, 30, gray=i % 3 != 2, seed=seed + 10 + i) for i in range(6)]
    sizes = [shaped_frame(make_frame, s, seed + 20 + i) for i, s in enumerate(FRAME_SHAPES)]
    return [
        (f"{prefix}colour", {"label": "c", "x": [1.5, None]}, colour),
        (f"{prefix}gray", {"label": "g"}, [make_frame(36, 52, gray=True, seed=seed + 5)]),
        (f"{prefix}flow", {"label": "f"}, flow),
        (f"{prefix}sizes", {}, sizes),
        (f"{prefix}empty", {"label": None}, []),
        (f"{prefix}é/../x y", {"ü": "ß🎥"}, [make_frame(8, 8, seed=seed + 40)]),
    ]


def test_gulpio_rs_gulpchunk_wb_and_ab_read_by_gulpio2(tmp_path, make_frame):
    expected = {}
    first = mixed_videos(make_frame, "", 500)
    write_videos(rs_chunk(tmp_path, 0), first)
    record(expected, first)
    colour_more = [make_frame(36, 52, seed=560), make_frame(7, 9, gray=True, seed=561)]
    more = [
        ("colour", {"part": 2}, colour_more),  # an existing id: more frames, 2nd meta_data
        ("🎥", {"new": True}, [make_frame(12, 12, seed=562)]),
        (5, {"int_id": 5}, [make_frame(12, 12, seed=563)]),
    ]
    write_videos(rs_chunk(tmp_path, 0), more, mode="ab")
    record(expected, more)
    assert_gulpio2_reads(tmp_path, expected)
    assert_same_as_gulpio2(tmp_path)


def test_gulpio_rs_new_chunks_read_by_gulpio2(tmp_path, make_frame):
    expected = {}
    chunks = list(gulpio_rs.GulpDirectory(tmp_path).new_chunks(2))
    assert [Path(c.data_file_path).name for c in chunks] == ["data_0.gulp", "data_1.gulp"]
    for k, chunk in enumerate(chunks):
        videos = mixed_videos(make_frame, f"c{k}-", 600 + 100 * k)
        write_videos(chunk, videos)
        record(expected, videos)
    (third,) = gulpio_rs.GulpDirectory(tmp_path).new_chunks(1)
    assert Path(third.data_file_path).name == "data_2.gulp"
    videos = mixed_videos(make_frame, "c2-", 800)
    write_videos(third, videos)
    record(expected, videos)
    assert_gulpio2_reads(tmp_path, expected)
    assert_same_as_gulpio2(tmp_path)


def test_gulpio_rs_new_chunks_after_gulpio2_gaps(tmp_path, make_frame):
    build_gaps(tmp_path, make_frame)
    (chunk,) = gulpio_rs.GulpDirectory(tmp_path).new_chunks(1)
    assert Path(chunk.data_file_path).name == "data_13.gulp"
    write_videos(chunk, [("after-gaps", {"k": 13}, [make_frame(20, 20, seed=900)])])
    g2 = gulpio2.GulpDirectory(str(tmp_path))
    assert g2.chunk_lookup["after-gaps"] == 13
    assert_same_as_gulpio2(tmp_path)


def test_gulpio_rs_chunkwriter_read_by_gulpio2(tmp_path, make_frame):
    videos = ingest_videos(make_frame, prefix="cw", count=6, seed=1000)
    chunk = rs_chunk(tmp_path, 0)
    with pytest.warns(UserWarning, match="no frames"):
        gulpio_rs.ChunkWriter(RsListAdapter(videos)).write_chunk(chunk, slice(1, 5))
    expected = {}
    record(expected, [(v["id"], v["meta"], v["frames"]) for v in videos[1:5] if v["frames"]])
    assert "cw-3" not in expected  # cw-3 had no frames and was skipped
    assert_gulpio2_reads(tmp_path, expected)


@pytest.mark.parametrize("num_workers", [1, 2])
def test_gulpio_rs_ingestor_read_by_gulpio2(tmp_path, make_frame, num_workers):
    expected = {}
    for prefix, seed in (("first", 1100), ("extend", 1200)):  # the second run extends
        videos = ingest_videos(make_frame, prefix=prefix, count=7, seed=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "no frames" warnings (maybe in workers)
            # 4:4:4 is gulpio2's subsampling; gulpio-rs defaults to 4:2:0 (docs/COMPATIBILITY.md)
            gulpio_rs.GulpIngestor(
                RsListAdapter(videos), tmp_path, 3, num_workers, subsampling="4:4:4"
            )()
        record(expected, [(v["id"], v["meta"], v["frames"]) for v in videos if v["frames"]])
    # Each run's last chunk holds one video without frames: nothing is published under its
    # number (gulpio2 would write an empty chunk), so the numbers have gaps gulpio2 reads.
    assert sorted(p.name for p in tmp_path.glob("*.gulp")) == sorted(
        f"data_{k}.gulp" for k in (0, 1, 3, 4)
    )
    assert_gulpio2_reads(tmp_path, expected)
    assert_same_as_gulpio2(tmp_path)


def write_same_content(lib, root: Path, make_frame) -> None:
    """With ``lib`` (gulpio2 or gulpio_rs): a 'wb' chunk, an 'ab' append to it (new ids and
    more frames for existing ids) and a second chunk from ``new_chunks``."""
    first = lib.GulpChunk(str(root / "data_0.gulp"), str(root / "meta_0.gmeta"))
    write_videos(first, mixed_videos(make_frame, "", 1300))
    write_videos(
        lib.GulpChunk(str(root / "data_0.gulp"), str(root / "meta_0.gmeta")),
        [
            ("colour", {"part": 2}, [make_frame(36, 52, seed=1350)]),
            ("empty", {"part": 2}, [make_frame(3, 5, gray=True, seed=1351)]),
            ("日本語", RICH_META, [make_frame(12, 16, seed=1352)]),
            (42, {"id": 42}, [make_frame(12, 16, gray=True, seed=1353)]),
        ],
        mode="ab",
    )
    (second,) = lib.GulpDirectory(str(root)).new_chunks(1)
    write_videos(second, mixed_videos(make_frame, "second-", 1400))


@pytest.mark.parametrize("quality", [None, 100])
def test_gulpio2_and_gulpio_rs_write_identical_files(tmp_path, make_frame, monkeypatch, quality):
    if quality is not None:
        monkeypatch.setattr(gulpio2.utils, "_JPEG_WRITE_QUALITY", quality)
        monkeypatch.setattr(gulpio_rs.utils, "_JPEG_WRITE_QUALITY", quality)
    (tmp_path / "g2").mkdir()
    (tmp_path / "rs").mkdir()
    write_same_content(gulpio2, tmp_path / "g2", make_frame)
    write_same_content(gulpio_rs, tmp_path / "rs", make_frame)
    theirs = gulp_files(tmp_path / "g2")
    ours = gulp_files(tmp_path / "rs")
    assert (
        sorted(ours)
        == sorted(theirs)
        == [
            "data_0.gulp",
            "data_1.gulp",
            "meta_0.gmeta",
            "meta_1.gmeta",
        ]
    )
    for name in theirs:
        assert ours[name] == theirs[name], name


@pytest.mark.parametrize("num_workers", [1, 2])
def test_gulpio2_and_gulpio_rs_ingestors_write_identical_files(tmp_path, make_frame, num_workers):
    videos = ingest_videos(make_frame, prefix="same", count=8, seed=1500)
    gulpio2.fileio.GulpIngestor(G2ListAdapter(videos), str(tmp_path / "g2"), 3, 1)()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gulpio_rs.GulpIngestor(
            RsListAdapter(videos), tmp_path / "rs", 3, num_workers, subsampling="4:4:4"
        )()
    theirs = gulp_files(tmp_path / "g2")
    ours = gulp_files(tmp_path / "rs")
    assert sorted(ours) == sorted(theirs)
    for name in theirs:
        assert ours[name] == theirs[name], name


def test_gulpio_rs_written_chunk_passes_gulpio2_sanity_checks(tmp_path, make_frame):
    videos = mixed_videos(make_frame, "", 1600)
    videos.append(("last", {}, [make_frame(10, 10, seed=1650)]))  # gulpio2's check needs frames
    write_videos(rs_chunk(tmp_path, 0), videos)
    g2 = gulpio2.GulpDirectory(str(tmp_path))
    for check in (
        gulpio2.sanity_utils.check_meta_file_size_larger_zero,
        gulpio2.sanity_utils.check_data_file_size_larger_zero,
        gulpio2.sanity_utils.check_data_file_size,
        gulpio2.sanity_utils.check_for_duplicate_ids,
    ):
        assert check(g2) == [], check.__name__


# ------------------------------------------------------------------------------------------------
# 4. import surface: `import gulpio_rs as gulpio2`
# ------------------------------------------------------------------------------------------------


def public_names(module) -> list[str]:
    """Public classes, functions and values that a gulpio2 module defines itself."""
    return sorted(
        name
        for name, obj in vars(module).items()
        if not name.startswith("_")
        and not isinstance(obj, type(json))
        and (getattr(obj, "__module__", None) == module.__name__ or not callable(obj))
    )


@pytest.mark.parametrize("module", ["fileio", "utils", "sanity_utils"])
def test_gulpio2_module_names_exist(module):
    theirs = importlib.import_module(f"gulpio2.{module}")
    ours = importlib.import_module(f"gulpio_rs.{module}")
    missing = [name for name in public_names(theirs) if not hasattr(ours, name)]
    assert missing == []


def test_import_gulpio_rs_as_gulpio2():
    import gulpio_rs as g2_alias

    for name in ("GulpDirectory", "GulpChunk", "ChunkWriter", "GulpIngestor"):
        assert getattr(g2_alias, name) is getattr(g2_alias.fileio, name)
    assert g2_alias.utils._JPEG_WRITE_QUALITY == gulpio2.utils._JPEG_WRITE_QUALITY == 90
    # gulpio2 adapters subclass ours unchanged: the same abstract methods to implement
    ours = g2_alias.adapters.AbstractDatasetAdapter.__abstractmethods__
    assert ours == gulpio2.adapters.AbstractDatasetAdapter.__abstractmethods__
    assert ours == {"iter_data", "__len__"}


def test_imginfo_field_order():
    assert gulpio_rs.fileio.ImgInfo._fields == gulpio2.fileio.ImgInfo._fields
    assert gulpio_rs.fileio.ImgInfo._fields == ("loc", "pad", "length")
    info = gulpio_rs.fileio.ImgInfo(0, 3, 632)
    assert (info.loc, info.pad, info.length) == (0, 3, 632)
    assert json.dumps(info) == "[0, 3, 632]"


def test_json_serializer_round_trip_and_bytes(tmp_path):
    thing = {"b": {"frame_info": [[0, 1, 4]], "meta_data": [RICH_META]}, "a": {"é": [1, 2]}}
    gulpio_rs.fileio.json_serializer.dump(thing, tmp_path / "rs.gmeta")
    gulpio2.fileio.json_serializer.dump(thing, tmp_path / "g2.gmeta")
    assert (tmp_path / "rs.gmeta").read_bytes() == (tmp_path / "g2.gmeta").read_bytes()
    ours = gulpio_rs.fileio.json_serializer.load(tmp_path / "g2.gmeta")
    theirs = gulpio2.fileio.json_serializer.load(tmp_path / "g2.gmeta")
    assert json_text(ours) == json_text(theirs)
    assert type(ours) is type(theirs)  # OrderedDict


@pytest.mark.parametrize(
    ("per_chunk", "total"), [(1, 1), (2, 5), (3, 3), (100, 7), (4, 100), (7, 50)]
)
def test_calculate_chunk_slices_matches_gulpio2(per_chunk, total):
    assert gulpio_rs.fileio.calculate_chunk_slices(
        per_chunk, total
    ) == gulpio2.fileio.calculate_chunk_slices(per_chunk, total)


@pytest.mark.parametrize(("per_chunk", "total"), [(0, 5), (2, 0)])
def test_calculate_chunk_slices_asserts_like_gulpio2(per_chunk, total):
    with pytest.raises(AssertionError):
        gulpio2.fileio.calculate_chunk_slices(per_chunk, total)
    with pytest.raises(AssertionError):
        gulpio_rs.fileio.calculate_chunk_slices(per_chunk, total)


@pytest.mark.parametrize(
    "element",
    [5, "5", "é/../x y", ("5", slice(1, 2)), (5, [0, 1]), ("a", None), (np.int32(5), slice(None))],
    ids=repr,
)
def test_extract_input_for_getitem_matches_gulpio2(element):
    ours = gulpio_rs.fileio.extract_input_for_getitem(element)
    assert ours == gulpio2.fileio.extract_input_for_getitem(element)
    assert type(ours[0]) is str


@pytest.mark.parametrize("id_", [np.int64(5), np.int32(5), np.uint8(5)], ids=repr)
def test_extract_input_for_getitem_accepts_numpy_int_ids(id_):
    assert gulpio_rs.fileio.extract_input_for_getitem(id_) == ("5", None)
    assert gulpio_rs.fileio.extract_input_for_getitem((id_, [1])) == ("5", [1])


@pytest.mark.parametrize("element", [("a", 1, 2), 5.0, ["a"], None], ids=repr)
def test_extract_input_for_getitem_rejects_like_gulpio2(element):
    with pytest.raises(TypeError):
        gulpio2.fileio.extract_input_for_getitem(element)
    with pytest.raises(TypeError, match="Undefined input type"):
        gulpio_rs.fileio.extract_input_for_getitem(element)


def test_numpy_int_id_reads_the_video(tmp_path, make_frame):
    write_videos(rs_chunk(tmp_path, 0), [(7, {"id": 7}, [make_frame(8, 8, seed=1700)])])
    gd = gulpio_rs.GulpDirectory(tmp_path)
    assert np.int64(7) in gd
    assert gd[np.int64(7)][1] == {"id": 7}
    assert len(gd[np.int64(7), [0]][0]) == 1


def test_img_to_jpeg_bytes_matches_gulpio2(make_frame):
    for frame in (make_frame(48, 64, seed=1), make_frame(48, 64, gray=True, seed=2)):
        assert gulpio_rs.utils.img_to_jpeg_bytes(frame) == gulpio2.utils.img_to_jpeg_bytes(frame)
    assert gulpio_rs.fileio.img_to_jpeg_bytes(frame) == gulpio2.fileio.img_to_jpeg_bytes(frame)


def test_jpeg_bytes_to_img_matches_gulpio2(make_frame):
    for frame in (make_frame(48, 64, seed=3), make_frame(37, 53, gray=True, seed=4)):
        jpeg = gulpio2.utils.img_to_jpeg_bytes(frame)
        ours = gulpio_rs.utils.jpeg_bytes_to_img(jpeg)
        assert ours.shape == frame.shape
        assert_frames_close([ours], [gulpio2.utils.jpeg_bytes_to_img(jpeg)])


def test_jpeg_write_quality_is_read_on_every_call(tmp_path, make_frame, monkeypatch):
    frame = make_frame(48, 64, seed=5)
    default = gulpio_rs.utils.img_to_jpeg_bytes(frame)
    monkeypatch.setattr(gulpio_rs.utils, "_JPEG_WRITE_QUALITY", 100)
    monkeypatch.setattr(gulpio2.utils, "_JPEG_WRITE_QUALITY", 100)
    best = gulpio_rs.utils.img_to_jpeg_bytes(frame)
    assert best != default
    assert len(best) > len(default)
    assert best == gulpio2.utils.img_to_jpeg_bytes(frame)

    # through GulpChunk.append too; gulpio2's test image is 629 bytes at quality 100
    write_videos(rs_chunk(tmp_path, 0), [("a", {}, [np.ones((4, 1, 3), dtype=np.uint8), frame])])
    gd = gulpio_rs.GulpDirectory(tmp_path)
    assert gd.merged_meta_dict["a"]["frame_info"][0] == [0, 3, 632]
    assert bytes(gd.frame_bytes("a", [1])[0]) == best


def write_image_files(root: Path, make_frame) -> list[str]:
    paths = []
    for name, array in (
        ("rgb.png", make_frame(50, 80, seed=6)),
        ("tall.jpg", make_frame(90, 40, seed=7)),
        ("gray.png", make_frame(30, 45, gray=True, seed=8)),
    ):
        Image.fromarray(array).save(root / name)
        paths.append(str(root / name))
    return paths


@pytest.mark.parametrize("img_size", [-1, 32, 64])
def test_resize_images_matches_gulpio2(tmp_path, make_frame, img_size):
    paths = write_image_files(tmp_path, make_frame)
    ours = list(gulpio_rs.utils.resize_images(paths, img_size))
    theirs = list(gulpio2.utils.resize_images(paths, img_size))
    assert_frames_equal(ours, theirs)


@pytest.mark.parametrize("size", [-1, 0, 24, 100])
def test_resize_by_short_edge_matches_gulpio2(make_frame, size):
    for frame in (make_frame(50, 80, seed=9), make_frame(80, 50, gray=True, seed=10)):
        ours = gulpio_rs.utils.resize_by_short_edge(frame, size)
        theirs = gulpio2.utils.resize_by_short_edge(frame, size)
        assert_frames_equal([np.asarray(ours)], [np.asarray(theirs)])


SANITY_CHECKS = [
    "check_meta_file_size_larger_zero",
    "check_data_file_size_larger_zero",
    "check_data_file_size",
    "check_for_duplicate_ids",
]


@pytest.fixture(params=["gulpio2_written", "gulpio_rs_written"])
def good_dataset(request, tmp_path, make_frame):
    if request.param == "gulpio2_written":
        build_everything(tmp_path, make_frame)
    else:
        for k in range(3):
            write_videos(rs_chunk(tmp_path, k), mixed_videos(make_frame, f"{k}-", 1800 + 50 * k))
    return tmp_path


@pytest.mark.parametrize("check", SANITY_CHECKS)
def test_sanity_checks_pass_on_a_good_dataset(good_dataset, check):
    gd = gulpio_rs.GulpDirectory(good_dataset)
    assert getattr(gulpio_rs.sanity_utils, check)(gd) == []


def test_sanity_utils_helpers_match_gulpio2(good_dataset):
    gd = gulpio_rs.GulpDirectory(good_dataset)
    g2 = gulpio2.GulpDirectory(str(good_dataset))
    assert sorted(gulpio_rs.sanity_utils.extract_all_ids(gd)) == sorted(
        gulpio2.sanity_utils.extract_all_ids(g2)
    )
    assert gulpio_rs.sanity_utils.get_duplicate_entries(["a", "b", "a", "c", "b"]) == ["a", "b"]


def test_sanity_check_for_failures_prints_like_gulpio2(capsys):
    """gulp2_sanity_check stores each check's output under 'failures' and prints it."""
    for failures in ([], ["data_0.gulp"]):
        gulpio2.sanity_utils.check_for_failures({"message": "Check X", "failures": failures})
        theirs = capsys.readouterr().out
        gulpio_rs.sanity_utils.check_for_failures({"message": "Check X", "failures": failures})
        assert capsys.readouterr().out == theirs


def test_abstract_dataset_adapter_contract(tmp_path, make_frame):
    adapter_cls = gulpio_rs.adapters.AbstractDatasetAdapter
    with pytest.raises(TypeError):
        adapter_cls()  # abstract: iter_data and __len__

    class Incomplete(adapter_cls):
        def __len__(self):
            return 0

    with pytest.raises(TypeError):
        Incomplete()

    videos = ingest_videos(make_frame, prefix="ad", count=3, seed=1900)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gulpio_rs.GulpIngestor(RsListAdapter(videos), tmp_path, 2, 1)()
    assert sorted(gulpio_rs.GulpDirectory(tmp_path).keys()) == ["ad-1", "ad-2"]


# ------------------------------------------------------------------------------------------------
# 5. Drop-in parity (issue 12): gulpio2-shaped client code, run against both libraries
# ------------------------------------------------------------------------------------------------

LIBS = {"gulpio2": gulpio2, "gulpio_rs": gulpio_rs}


@pytest.fixture(params=list(LIBS))
def lib(request):
    """The library under test, imported the way client code imports gulpio2."""
    return LIBS[request.param]


def small_videos(make_frame, prefix="v", count=3, seed=2000):
    return [
        (
            f"{prefix}{i}",
            {"label": f"l{i % 2}", "n": i},
            [
                make_frame(24, 32, gray=(i + k) % 3 == 0, seed=seed + 10 * i + k)
                for k in range(i + 1)
            ],
        )
        for i in range(count)
    ]


class PathDataset:
    """The shape of a dataset wrapper that keeps its own ``Path`` and checks the library's."""

    def __init__(self, lib, root: Path):
        self.root = root
        self.gulp_dir = lib.GulpDirectory(root)
        assert self.gulp_dir.output_dir == root, "the wrapper compares paths with =="

    def label_file(self) -> Path:
        return self.gulp_dir.output_dir / "label2idx.json"


def test_attributes_keep_what_the_caller_passed(lib, tmp_path, make_frame):
    data, meta = tmp_path / "data_0.gulp", tmp_path / "meta_0.gmeta"
    chunk = lib.fileio.GulpChunk(data, meta, jpeg_decoder=G2_DECODER)
    assert chunk.data_file_path is data and chunk.meta_file_path is meta
    assert chunk.serializer is lib.fileio.json_serializer
    assert chunk.jpeg_decoder is G2_DECODER
    write_videos(chunk, small_videos(make_frame))
    assert chunk.data_file_path is data

    dataset = PathDataset(lib, tmp_path)
    assert isinstance(dataset.gulp_dir.output_dir, Path)
    assert dataset.label_file() == tmp_path / "label2idx.json"
    gd = lib.GulpDirectory(str(tmp_path), jpeg_decoder=G2_DECODER)
    assert gd.output_dir == str(tmp_path) and isinstance(gd.output_dir, str)
    assert gd.jpeg_decoder is G2_DECODER
    (existing,) = gd.chunks()
    assert existing.data_file_path == str(data)  # built by the directory: str, as in gulpio2
    new = next(lib.GulpDirectory(tmp_path).new_chunks(1))
    assert new.data_file_path == str(tmp_path / "data_1.gulp")
    frames, _meta = lib.GulpDirectory(tmp_path, jpeg_decoder=G2_DECODER)["v1"]
    assert len(frames) == 2


def test_gulp_directory_pickles_with_a_path_output_dir(tmp_path, make_frame):
    write_videos(rs_chunk(tmp_path, 0), small_videos(make_frame))
    gd = gulpio_rs.GulpDirectory(tmp_path)
    again = pickle.loads(pickle.dumps(gd))
    assert again.output_dir == tmp_path and again.keys() == gd.keys()


class RecordingSerializer:
    """A custom serializer (gulpio2's load/dump interface) that records its calls and stores
    metadata in its own, non-JSON-parsable format."""

    HEADER = "recorded-meta v1\n"

    def __init__(self):
        self.calls = []

    def load(self, file_name):
        self.calls.append(("load", Path(file_name).name))
        with open(file_name) as f:
            text = f.read()
        assert text.startswith(self.HEADER)
        return json.loads(text[len(self.HEADER) :], object_pairs_hook=OrderedDict)

    def dump(self, thing, file_name):
        self.calls.append(("dump", Path(file_name).name, list(thing)))
        with open(file_name, "w") as f:
            f.write(self.HEADER + json.dumps(thing, indent=1))


def serializer_session(lib, root: Path, make_frame):
    """Client code: write, read and append through a chunk with a custom serializer."""
    serializer = RecordingSerializer()
    data, meta = root / "data_0.gulp", root / "meta_0.gmeta"
    chunk = lib.fileio.GulpChunk(data, meta, serializer, jpeg_decoder=G2_DECODER)
    assert serializer.calls == []  # nothing to load yet
    write_videos(chunk, small_videos(make_frame, "a"))
    reread = lib.fileio.GulpChunk(data, meta, serializer, jpeg_decoder=G2_DECODER)
    with reread.open("rb"):
        first = [reread.read_frames(i) for i in ("a0", "a2")]
    assert "a1" in reread and "zz" not in reread
    write_videos(reread, small_videos(make_frame, "b", count=2, seed=2100), mode="ab")
    third = lib.fileio.GulpChunk(data, meta, serializer, jpeg_decoder=G2_DECODER)
    everything = list(third.iter_all())
    return serializer.calls, first, everything, meta.read_text()


def test_any_serializer_object_works(tmp_path, make_frame):
    results = {}
    for name, lib_ in LIBS.items():
        root = tmp_path / name
        root.mkdir()
        results[name] = serializer_session(lib_, root, make_frame)
    g2_calls, g2_first, g2_all, g2_text = results["gulpio2"]
    rs_calls, rs_first, rs_all, rs_text = results["gulpio_rs"]
    assert rs_calls == g2_calls
    assert rs_calls[0] == ("dump", "meta_0.gmeta", ["a0", "a1", "a2"])
    assert rs_calls[-2:] == [
        ("dump", "meta_0.gmeta", ["a0", "a1", "a2", "b0", "b1"]),
        ("load", "meta_0.gmeta"),
    ]
    assert rs_text == g2_text
    for (frames, meta), (g2_frames, g2_meta) in zip(
        rs_first + rs_all, g2_first + g2_all, strict=True
    ):
        assert meta == g2_meta
        assert_frames_equal(frames, g2_frames)
    assert len(rs_all) == 5
    assert not (tmp_path / "gulpio_rs" / "data_0.gidx").exists()


def test_custom_serializer_chunk_gulpio2_methods(lib, tmp_path, make_frame):
    """gulpio2's chunk methods called directly, on a chunk with a custom serializer."""
    chunk = lib.fileio.GulpChunk(
        tmp_path / "data_0.gulp", tmp_path / "meta_0.gmeta", RecordingSerializer(), G2_DECODER
    )
    frames = [make_frame(20, 30, seed=2200 + k) for k in range(3)]
    with chunk.open("wb"):
        chunk._append_meta("x", {"k": 1})
        for frame in frames:
            chunk._write_frame("x", frame)
    with chunk.open("rb"):
        infos, meta = chunk._get_frame_infos("x")
        got, _ = chunk.read_frames("x", [2, 0])
    assert meta == {"k": 1}
    assert [type(i).__name__ for i in infos] == ["ImgInfo"] * 3
    assert infos[1].loc == infos[0].length and all(i.length % 4 == 0 for i in infos)
    assert_frames_equal(got, [g2_roundtrip(frames[2]), g2_roundtrip(frames[0])])
    with pytest.raises(NotImplementedError):
        with chunk.open("xb"):
            pass


_UNPICKLED = []


def _unpickle_marker():
    _UNPICKLED.append(True)
    return OrderedDict()


class _Marker:
    def __reduce__(self):
        return (_unpickle_marker, ())


def test_pickle_serializer_when_the_caller_chooses_it(lib, tmp_path, make_frame):
    data, meta = tmp_path / "data_0.gulp", tmp_path / "meta_0.gmeta"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        chunk = lib.fileio.GulpChunk(data, meta, lib.fileio.pickle_serializer, G2_DECODER)
        videos = small_videos(make_frame)
        write_videos(chunk, videos)
        again = lib.fileio.GulpChunk(data, meta, lib.fileio.pickle_serializer, G2_DECODER)
        with again.open("rb"):
            frames, got_meta = again.read_frames("v2")
    assert got_meta == videos[2][1]
    assert_frames_equal(frames, [g2_roundtrip(f) for f in videos[2][2]])
    assert meta.read_bytes()[:1] == b"\x80"  # a pickle
    if lib is gulpio_rs:
        assert any(issubclass(w.category, gulpio_rs.errors.PickleMetadataWarning) for w in caught)


def test_gulp_directory_never_unpickles(tmp_path, make_frame):
    write_videos(rs_chunk(tmp_path, 0), small_videos(make_frame))
    (tmp_path / "data_1.gulp").write_bytes(b"")
    (tmp_path / "meta_1.gmeta").write_bytes(pickle.dumps(_Marker()))
    with pytest.warns(gulpio_rs.BrokenChunkWarning):
        gd = gulpio_rs.GulpDirectory(tmp_path)
    assert sorted(gd.keys()) == ["v0", "v1", "v2"]
    assert _UNPICKLED == []


def assert_same_dict(ours, theirs):
    """Equal both ways, as JSON, as copies, pickled, as a dict, and printed."""
    assert ours == theirs and theirs == ours
    assert not (ours != theirs) and not (theirs != ours)
    assert json.dumps(ours) == json.dumps(theirs)
    assert json.dumps(ours, indent=2, sort_keys=True) == json.dumps(
        theirs, indent=2, sort_keys=True
    )
    assert copy.deepcopy(ours) == theirs and copy.copy(ours) == theirs
    assert type(copy.deepcopy(ours)) is type(theirs)
    unpickled = pickle.loads(pickle.dumps(ours))  # new float objects: nan != nan, so as JSON
    assert type(unpickled) is type(theirs) and json_text(unpickled) == json_text(theirs)
    assert dict(ours) == dict(theirs) and {**ours} == {**theirs}
    assert list(ours.items()) == list(theirs.items())
    assert repr(ours) == repr(theirs) and str(ours) == str(theirs)
    assert isinstance(ours, dict)


def test_metadata_behaves_like_gulpio2s_dicts(tmp_path, make_frame):
    for build in (build_colour, build_gray, build_empty, build_append_mode, build_metadata):
        build(tmp_path, make_frame)
    g2 = gulpio2.GulpDirectory(str(tmp_path))
    rs = gulpio_rs.GulpDirectory(tmp_path)
    assert_same_dict(rs.merged_meta_dict, g2.merged_meta_dict)
    assert rs.merged_meta_dict is rs.merged_meta_dict
    assert len(rs.all_meta_dicts) == len(g2.all_meta_dicts)
    for ours, theirs in zip(rs.all_meta_dicts, g2.all_meta_dicts, strict=True):
        assert_same_dict(ours, theirs)
        for id_ in theirs:
            assert_same_dict(ours[id_], theirs[id_])
            assert ours[id_] is rs.merged_meta_dict[id_]
    for ours, theirs in zip(rs.chunks(), g2.chunks(), strict=True):
        assert_same_dict(ours.meta_dict, theirs.meta_dict)
        assert next(reversed(ours.meta_dict)) == next(reversed(theirs.meta_dict))
    assert rs.chunk_lookup == g2.chunk_lookup and json.dumps(rs.chunk_lookup) == json.dumps(
        g2.chunk_lookup
    )


def test_metadata_user_code(tmp_path, make_frame):
    """What torchvideo / epic-kitchens style code does with the metadata."""
    for build in (build_colour, build_gray, build_metadata):
        build(tmp_path, make_frame)
    outputs = {}
    for name, lib_ in LIBS.items():
        gd = lib_.GulpDirectory(tmp_path if lib_ is gulpio_rs else str(tmp_path))
        merged = gd.merged_meta_dict
        labels = {
            id_: entry["meta_data"][0].get("label")
            for id_, entry in merged.items()
            if entry["meta_data"]
        }
        frame_counts = {id_: len(merged[id_]["frame_info"]) for id_ in list(merged.keys())}
        merged["colour-a"]["meta_data"][0]["label"] = "changed"  # mutations stick
        outputs[name] = (
            json.dumps(merged),
            labels,
            frame_counts,
            merged["colour-a"]["meta_data"][0]["label"],
            sorted(merged),
            len(merged),
            "gray-a" in merged,
        )
    assert outputs["gulpio_rs"] == outputs["gulpio2"]


def test_gulpio2_chunk_methods_on_a_json_chunk(lib, tmp_path, make_frame):
    """gulpio2's reading and writing methods called directly on a (JSON) GulpChunk."""
    chunk = lib.fileio.GulpChunk(
        str(tmp_path / "data_0.gulp"), str(tmp_path / "meta_0.gmeta"), jpeg_decoder=G2_DECODER
    )
    assert chunk._get_or_create_dict() == OrderedDict()
    assert [chunk._pad_image(n) for n in range(5)] == [0, 3, 2, 1, 0]
    frames = [make_frame(20, 30, seed=2300 + k) for k in range(4)]
    with chunk.open("wb"):
        chunk._append_meta("direct", {"how": "direct"})
        chunk._write_frames("direct", frames[:2])
        chunk._write_frame("direct", frames[2])
        chunk.append("api", {"how": "append"}, frames[3:])
        chunk.flush()
        chunk.append("after-flush", {"how": "append"}, frames[:1])
    fresh = lib.fileio.GulpChunk(
        chunk.data_file_path, chunk.meta_file_path, jpeg_decoder=G2_DECODER
    )
    assert fresh._get_or_create_dict() == fresh.meta_dict
    assert list(fresh.meta_dict) == ["direct", "api", "after-flush"]
    assert "api" in fresh and "nope" not in fresh
    with fresh.open("rb"):
        infos, meta = fresh._get_frame_infos("direct")
        got, got_meta = fresh.read_frames("direct", slice(1, None))
    assert meta == got_meta == {"how": "direct"}
    assert [tuple(i) for i in infos] == [
        tuple(fi) for fi in fresh.meta_dict["direct"]["frame_info"]
    ]
    assert_frames_equal(got, [g2_roundtrip(f) for f in frames[1:3]])
    all_items = list(fresh.iter_all())
    assert [m for _f, m in all_items] == [{"how": "direct"}, {"how": "append"}, {"how": "append"}]
    assert [len(f) for f, _m in fresh] == [3, 1, 1]
    with fresh.open("ab"):
        fresh.append("api", {"how": "again"}, frames[:2])
    again = lib.fileio.GulpChunk(chunk.data_file_path, chunk.meta_file_path)
    assert again.meta_dict["api"]["meta_data"] == [{"how": "append"}, {"how": "again"}]
    assert len(again.meta_dict["api"]["frame_info"]) == 3
    assert gulp_files(tmp_path)  # gulpio2 reads what was written:
    g2 = gulpio2.GulpDirectory(str(tmp_path))
    assert sorted(g2.merged_meta_dict) == ["after-flush", "api", "direct"]


def sanity_answers(lib, gd) -> list:
    su = lib.sanity_utils
    return [
        su.check_meta_file_size_larger_zero(gd),
        su.check_data_file_size_larger_zero(gd),
        su.check_data_file_size(gd),
        su.check_for_duplicate_ids(gd),
        su.extract_all_ids(gd),
    ]


class LookalikeChunk:
    """An object shaped like gulpio2's GulpChunk, as far as sanity_utils looks."""

    def __init__(self, data_file_path, meta_file_path, meta_dict):
        self.data_file_path = data_file_path
        self.meta_file_path = meta_file_path
        self.meta_dict = meta_dict


class LookalikeDirectory:
    def __init__(self, chunks):
        self._chunks = chunks

    def chunks(self):
        return iter(self._chunks)


def test_sanity_utils_answer_from_gulpio2s_attributes(tmp_path, make_frame):
    for k in range(2):
        write_videos(rs_chunk(tmp_path, k), small_videos(make_frame, f"c{k}-", seed=2400 + k))
    good = [
        LookalikeChunk(c.data_file_path, c.meta_file_path, c.meta_dict)
        for c in gulpio2.GulpDirectory(str(tmp_path)).chunks()
    ]
    dup_meta = OrderedDict(good[1].meta_dict)
    dup_meta["c0-1"] = good[0].meta_dict["c0-1"]
    with open(good[1].data_file_path, "ab") as f:
        f.write(b"tail")  # a tail no frame_info accounts for
    lookalikes = {
        "gulpio2-shaped": LookalikeDirectory(
            [good[0], LookalikeChunk(good[1].data_file_path, good[1].meta_file_path, dup_meta)]
        ),
    }
    answers = {
        name: sanity_answers(lib_, lookalikes["gulpio2-shaped"]) for name, lib_ in LIBS.items()
    }
    assert answers["gulpio_rs"] == answers["gulpio2"]
    assert answers["gulpio_rs"][2] == [good[1].data_file_path]
    assert answers["gulpio_rs"][3] == ["c0-1"]
    # and each library's sanity_utils on the other's directory object
    g2_dir = gulpio2.GulpDirectory(str(tmp_path))
    rs_dir = gulpio_rs.GulpDirectory(str(tmp_path))
    assert sanity_answers(gulpio_rs, g2_dir) == sanity_answers(gulpio2, g2_dir)
    assert sanity_answers(gulpio2, rs_dir) == sanity_answers(gulpio_rs, rs_dir)
    assert sanity_answers(gulpio_rs, rs_dir)[2] == [good[1].data_file_path]


@pytest.mark.parametrize("status", [0, 256, 32512])
def test_check_ffmpeg_exists_asks_the_shell(monkeypatch, status):
    commands = {}
    for name, lib_ in LIBS.items():
        seen = []
        monkeypatch.setattr(
            lib_.utils.os, "system", lambda cmd, seen=seen: seen.append(cmd) or status
        )
        commands[name] = (lib_.utils.check_ffmpeg_exists(), seen)
    assert commands["gulpio_rs"] == commands["gulpio2"]
    assert commands["gulpio_rs"][0] is (status == 0)


@pytest.mark.parametrize("img_size", [-1, 20])
def test_resize_images_accepts_what_gulpio2_accepts(tmp_path, make_frame, img_size):
    paths = [Path(p) for p in write_image_files(tmp_path, make_frame)]
    kinds = [paths, [str(p) for p in paths], [open(p, "rb") for p in paths]]
    try:
        for inputs in kinds:
            ours = list(gulpio_rs.utils.resize_images(inputs, img_size))
            for f in inputs:
                if hasattr(f, "seek"):
                    f.seek(0)
            theirs = list(gulpio2.utils.resize_images(inputs, img_size))
            assert_frames_equal([np.asarray(o) for o in ours], [np.asarray(t) for t in theirs])
    finally:
        for f in kinds[2]:
            f.close()
    with pytest.raises(FileNotFoundError):
        next(gulpio_rs.utils.resize_images([tmp_path / "missing.jpg"]))


def chunkwriter_session(lib, root: Path, make_frame):
    """A GulpChunk subclass that overrides append, written by ChunkWriter.write_chunk."""

    class TaggingChunk(lib.fileio.GulpChunk):
        def append(self, id_, meta_data, frames):
            self.seen.append((id_, len(frames), [np.asarray(f).shape for f in frames]))
            super().append(id_, dict(meta_data, tagged=True), frames)

    videos = [
        {"id": id_, "meta": meta, "frames": frames}
        for id_, meta, frames in small_videos(make_frame, "w", count=4, seed=2500)
    ]
    videos.insert(2, {"id": "no-frames", "meta": {}, "frames": []})
    adapter_cls = G2ListAdapter if lib is gulpio2 else RsListAdapter
    adapter = adapter_cls(videos)
    writer = lib.fileio.ChunkWriter(adapter)
    assert writer.adapter is adapter
    chunk = TaggingChunk(root / "data_0.gulp", root / "meta_0.gmeta")
    chunk.seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # gulpio-rs warns where gulpio2 printed
        writer.write_chunk(chunk, slice(0, len(videos)))
    return chunk.seen, gulp_files(root)


def test_chunkwriter_writes_through_the_chunks_append(tmp_path, make_frame, capsys):
    results = {}
    for name, lib_ in LIBS.items():
        (tmp_path / name).mkdir()
        results[name] = chunkwriter_session(lib_, tmp_path / name, make_frame)
    assert results["gulpio_rs"][0] == results["gulpio2"][0]
    assert [s[0] for s in results["gulpio_rs"][0]] == ["w0", "w1", "w2", "w3"]
    assert results["gulpio_rs"][1] == results["gulpio2"][1]  # byte-identical files
    merged = gulpio_rs.GulpDirectory(tmp_path / "gulpio_rs").merged_meta_dict
    assert all(entry["meta_data"][0]["tagged"] for entry in merged.values())


def test_ingestor_and_adapters_keep_what_the_caller_passed(lib, tmp_path, make_frame):
    adapter = (G2ListAdapter if lib is gulpio2 else RsListAdapter)([])
    ingestor = lib.fileio.GulpIngestor(adapter, tmp_path / "out", "3", 1.0)
    assert ingestor.output_folder == tmp_path / "out"
    assert isinstance(ingestor.output_folder, Path)
    assert (ingestor.adapter, ingestor.videos_per_chunk, ingestor.num_workers) == (adapter, 3, 1)
    assert type(ingestor.videos_per_chunk) is int and type(ingestor.num_workers) is int

    folder = tmp_path / "images"
    (folder / "cat").mkdir(parents=True)
    (tmp_path / "out").mkdir()
    Image.fromarray(make_frame(20, 30, seed=2600)).save(folder / "cat" / "a.jpg")
    extensions = (".jpg",)
    image_folder = lib.adapters.ImageFolderAdapter(
        str(folder) + "/", tmp_path / "out", extensions, shuffle=0, img_size=np.int64(16)
    )
    assert image_folder.output_folder == tmp_path / "out"
    assert image_folder.file_extensions is extensions
    assert image_folder.shuffle == 0 and type(image_folder.shuffle) is int
    assert type(image_folder.img_size) is np.int64
    ((_, _, frames),) = [(v["id"], v["meta"], v["frames"]) for v in image_folder.iter_data()]
    assert min(np.asarray(frames[0]).shape[:2]) == 16


def test_ingestor_writes_into_a_path_output_folder(tmp_path, make_frame):
    videos = ingest_videos(make_frame, prefix="p", count=3, seed=2700)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gulpio_rs.GulpIngestor(RsListAdapter(videos), tmp_path / "out", 2, 1)()
    gd = PathDataset(gulpio_rs, tmp_path / "out").gulp_dir
    assert sorted(gd.keys()) == sorted(str(v["id"]) for v in videos if len(v["frames"]))
