"""Opening a dataset through its manifest (docs/FORMAT.md §7.5): what a reader sees is what a
listing sees, and every kind of damage or staleness (a flipped or truncated manifest file, a
chunk added or replaced by a tool that does not keep the manifest) is a fallback with a
warning or a typed error naming the file, never other frames."""

from __future__ import annotations

import json
import pickle
import shutil
import warnings

import numpy as np
import pytest

from gulpio_rs import GulpChunk, GulpDirectory, _native
from gulpio_rs.cli import main
from gulpio_rs.errors import FormatError, ManifestWarning, StaleIndexError


def _write(folder, k, ids, make_frame, frames=2):
    chunk = GulpChunk(folder / f"data_{k}.gulp", folder / f"meta_{k}.gmeta")
    with chunk.open("wb"):
        for i, id_ in enumerate(ids):
            chunk.append(
                id_,
                {"i": i, "k": k},
                [make_frame(16, 24, seed=k * 7 + i + j) for j in range(frames)],
            )


@pytest.fixture
def indexed(tmp_path, make_frame):
    """Three chunks and a manifest made by `gulpio index`."""
    for k in range(3):
        _write(tmp_path, k, [f"c{k}v{v}" for v in range(3)], make_frame, frames=k + 1)
    assert main(["index", str(tmp_path)]) == 0
    return tmp_path


def _open(folder, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ManifestWarning)
        return GulpDirectory(str(folder), **kw)


def _everything(gd):
    """What a user reads: ids, lookups, frames, metadata, shapes, batches."""
    ids = gd.keys()
    frames = {i: np.stack(gd[i][0]) for i in ids}
    metas = {i: gd.meta(i) for i in ids}
    counts, shapes = gd.video_shapes()
    batch = gd.read_batch(ids[::-1], frames=slice(0, 1))
    return {
        "ids": ids,
        "len": len(gd),
        "contains": [i in gd for i in ids] + ["nope" in gd],
        "frames": frames,
        "metas": metas,
        "counts": counts.tolist(),
        "shapes": shapes.tolist(),
        "batch": [np.asarray(b) for b in batch],
        "num_frames": [gd.num_frames(i) for i in ids],
    }


def _same(a, b):
    assert a.keys() == b.keys()
    for key in a:
        if key == "frames":
            assert a[key].keys() == b[key].keys()
            for i in a[key]:
                np.testing.assert_array_equal(a[key][i], b[key][i])
        elif key == "batch":
            for x, y in zip(a[key], b[key], strict=True):
                np.testing.assert_array_equal(x, y)
        else:
            assert a[key] == b[key], key


def test_a_dataset_with_a_manifest_opens_through_it_and_reads_as_listed(indexed, make_frame):
    # A chunk published after the manifest was made (committed by its writer) and an append.
    _write(indexed, 3, ["late0", "late1"], make_frame)
    gd = _open(indexed)
    assert gd.opened["how"] == "manifest"
    assert (gd.opened["version"], gd.opened["tail"]) == (1, 1)
    assert gd.num_chunks == 4
    listed = _open(indexed, manifest="off")
    assert listed.opened == {
        "how": "listing",
        "reason": 'manifest="off"',
        "warned": False,
    }
    _same(_everything(gd), _everything(listed))
    assert gd.chunk_table() == listed.chunk_table()
    assert gd.chunk_sizes() == listed.chunk_sizes()
    assert dict(gd.chunk_lookup) == dict(listed.chunk_lookup)
    assert gd.merged_meta_dict == listed.merged_meta_dict
    for mode in ("require", "verify"):
        _same(_everything(_open(indexed, manifest=mode)), _everything(listed))
    with pytest.raises(ValueError, match="manifest="):
        GulpDirectory(str(indexed), manifest="sometimes")  # type: ignore[arg-type]


def test_pickled_directories_open_the_same_way_in_another_process(indexed):
    gd = _open(indexed, manifest="require")
    again = pickle.loads(pickle.dumps(gd))
    assert again.manifest == "require"
    assert again.opened == gd.opened
    assert again.keys() == gd.keys()
    off = pickle.loads(pickle.dumps(_open(indexed, manifest="off")))
    assert off.opened["how"] == "listing"


def test_gulpio_info_says_how_the_dataset_opened(indexed, tmp_path_factory, make_frame, capsys):
    capsys.readouterr()
    assert main(["info", str(indexed)]) == 0
    assert "opened   through the manifest (version 0)" in capsys.readouterr().out
    plain = tmp_path_factory.mktemp("plain")
    _write(plain, 0, ["a"], make_frame)
    assert main(["info", str(plain), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["opened_by"] == "listing"
    assert "no manifest" in info["opened"]["reason"]


def test_without_a_manifest_nothing_changes_and_require_says_why(tmp_path, make_frame):
    _write(tmp_path, 0, ["a", "b"], make_frame)
    gd = _open(tmp_path)
    assert gd.opened["how"] == "listing" and not gd.opened["warned"]
    assert gd.keys() == ["a", "b"]
    with pytest.raises(FormatError, match="no manifest"):
        GulpDirectory(str(tmp_path), manifest="require")


def _foreign_chunk(folder, number, ids, make_frame, tmp_path_factory):
    """Chunk `number` written elsewhere and copied in, as a tool that does not keep the
    manifest (cp, gulpio2) would add it."""
    other = tmp_path_factory.mktemp("other")
    _write(other, number, ids, make_frame)
    for name in (f"data_{number}.gulp", f"data_{number}.gidx", f"meta_{number}.gmeta"):
        shutil.copy(other / name, folder / name)


def test_a_chunk_added_behind_the_manifest_is_found_by_the_canary(
    indexed, make_frame, tmp_path_factory
):
    _foreign_chunk(indexed, 3, ["x0", "x1"], make_frame, tmp_path_factory)
    with pytest.warns(ManifestWarning, match="meta_3.gmeta.*gulpio index"):
        gd = GulpDirectory(str(indexed))
    assert gd.opened["how"] == "listing" and gd.opened["warned"]
    assert "x1" in gd and len(gd) == 11
    with pytest.raises(FormatError, match="meta_3.gmeta"):
        GulpDirectory(str(indexed), manifest="require")
    with pytest.raises(FormatError, match="does not record"):
        GulpDirectory(str(indexed), manifest="verify")
    # `gulpio index` records it: the manifest is used again.
    assert main(["index", str(indexed)]) == 0
    gd = _open(indexed)
    assert gd.opened["how"] == "manifest" and "x1" in gd


def _base(folder):
    """The file the manifest's state starts from (LATEST names it)."""
    snaps = sorted((folder / "_gulpio" / "snap").glob("*.gman"))
    return snaps[-1] if snaps else folder / "_gulpio" / "log" / ("0" * 20 + ".glog")


@pytest.mark.parametrize(
    "damage", ["header", "front", "truncated", "latest", "commit", "missing-commit"]
)
def test_a_damaged_manifest_falls_back_to_listing_with_a_warning(indexed, make_frame, damage):
    _write(indexed, 3, ["late"], make_frame)  # commit 1
    expected = _everything(_open(indexed, manifest="off"))
    base = _base(indexed)
    data = bytearray(base.read_bytes())
    commit = indexed / "_gulpio" / "log" / ("0" * 19 + "1.glog")
    if damage == "header":
        data[70] ^= 0x01  # video_count, under the header CRC
        base.write_bytes(bytes(data))
    elif damage == "front":
        data[260] ^= 0x10
        base.write_bytes(bytes(data))
    elif damage == "truncated":
        base.write_bytes(bytes(data[: len(data) - 5]))
    elif damage == "latest":
        latest = indexed / "_gulpio" / "LATEST"
        raw = bytearray(latest.read_bytes())
        raw[8] ^= 0x01  # the base's version, under the CRC: ignored, the genesis is found
        latest.write_bytes(bytes(raw))
    elif damage == "commit":
        raw = bytearray(commit.read_bytes())
        raw[-3] ^= 0x04
        commit.write_bytes(bytes(raw))
    else:
        # The newest commit lost: its chunk is on disk, unrecorded; the canary finds it.
        commit.unlink()
    if damage == "latest":
        # A LATEST that fails its CRC is only a hint: the base is found without it.
        gd = _open(indexed)
        assert gd.opened["how"] == "manifest"
    else:
        with pytest.warns(ManifestWarning, match="gulpio index"):
            gd = GulpDirectory(str(indexed))
        assert gd.opened["how"] == "listing" and gd.opened["warned"]
        with pytest.raises(FormatError):
            GulpDirectory(str(indexed), manifest="require")
    _same(_everything(gd), expected)


def test_a_damaged_page_fails_the_reads_that_need_it_and_no_other(tmp_path, make_frame):
    # Enough ids for several pages of 4 KiB would need thousands; one id page and one video
    # page are enough to show the rule: damage under the page CRC is a FormatError naming the
    # manifest file, reads of other chunks still work through their own pages.
    for k in range(2):
        _write(tmp_path, k, [f"c{k}v{v}" for v in range(2)], make_frame)
    assert main(["index", str(tmp_path)]) == 0
    base = _base(tmp_path)
    data = bytearray(base.read_bytes())
    data[-2] ^= 0x01  # inside the video table, the file's last section
    base.write_bytes(bytes(data))
    gd = _open(tmp_path)
    assert gd.opened["how"] == "manifest"
    with pytest.raises(FormatError, match=r"\.glog.*CRC"):
        gd.video_shapes()
    with pytest.raises(FormatError, match=r"\.glog"):
        gd.keys()
    # Lookups by id need only the id and chunk pages: frames still come from their chunks,
    # each checked against its record before its first read.
    np.testing.assert_array_equal(
        np.stack(gd["c1v1"][0]), np.stack(_open(tmp_path, manifest="off")["c1v1"][0])
    )


def test_a_chunk_replaced_behind_the_manifest_is_refused_by_name(
    indexed, make_frame, tmp_path_factory
):
    _foreign_chunk(indexed, 1, ["q0", "q1", "q2"], make_frame, tmp_path_factory)
    gd = _open(indexed)
    assert gd.opened["how"] == "manifest"
    with pytest.raises(StaleIndexError, match=r"meta_1\.gmeta.*gulpio index.*manifest=") as e:
        gd["c1v0"]
    assert e.value.path.endswith("meta_1.gmeta")
    with pytest.raises(StaleIndexError):
        gd.read_batch(["c0v0", "c1v2"])
    assert "q0" not in gd
    # The other chunks read; `verify` finds it at open, `off` reads what is on disk.
    np.testing.assert_array_equal(
        np.stack(gd["c2v1"][0]), np.stack(_open(indexed, manifest="off")["c2v1"][0])
    )
    with pytest.raises(FormatError, match="differ"):
        GulpDirectory(str(indexed), manifest="verify")
    assert "q0" in _open(indexed, manifest="off")


def test_a_chunk_appended_to_behind_the_manifest_reads_its_recorded_videos_with_a_warning(
    indexed, make_frame, tmp_path_factory
):
    other = tmp_path_factory.mktemp("other")
    _write(other, 2, ["c2v0", "c2v1", "c2v2", "extra"], make_frame, frames=3)
    for name in ("data_2.gulp", "data_2.gidx", "meta_2.gmeta"):
        shutil.copy(other / name, indexed / name)
    gd = _open(indexed)
    with pytest.warns(Warning, match="manifest.*behind.*gulpio index"):
        frames, meta = gd["c2v2"]
    assert (len(frames), meta) == (3, {"i": 2, "k": 2})
    assert "extra" not in gd and len(gd) == 9


def test_the_manifest_state_is_the_listing_through_a_history_of_writes(tmp_path, make_frame):
    """Appends, rewrites, new chunks and removals after the manifest was made, then a
    compaction: at every step the manifest opens and answers as the listing does."""
    for k in range(2):
        _write(tmp_path, k, [f"c{k}v0"], make_frame)
    assert main(["index", str(tmp_path)]) == 0
    steps = [
        lambda: _write(tmp_path, 2, ["n0", "n1"], make_frame),
        lambda: _write(tmp_path, 0, ["r0"], make_frame),  # a rewrite of chunk 0
        lambda: _write(tmp_path, 5, ["far"], make_frame),
        lambda: main(["index", str(tmp_path)]),  # compacts
        lambda: _write(tmp_path, 6, ["after"], make_frame),
    ]
    for step in steps:
        step()
        gd = _open(tmp_path)
        assert gd.opened["how"] == "manifest", gd.opened
        listed = _open(tmp_path, manifest="off")
        assert sorted(gd.keys()) == sorted(listed.keys())
        for id_ in listed.keys():
            np.testing.assert_array_equal(np.stack(gd[id_][0]), np.stack(listed[id_][0]))
    assert _native.manifest_status(str(tmp_path))["mismatched"] == []
