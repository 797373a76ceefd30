"""Nothing outside a dataset is ever written, truncated or deleted, whatever its directory
holds: a chunk file that is a symlink (to any writable file) or has another hard link is
refused by every writer (`GulpChunk.open('ab'/'wb')`, gulpio2's serializer path,
`gulpio repair --apply`), which says what it refused and why."""

from __future__ import annotations

import os
import pickle
import warnings
from collections import OrderedDict

import numpy as np
import pytest
from helpers import arrays_dataset

from gulpio_rs import GulpChunk, GulpDirectory, UnsafeFileError
from gulpio_rs.cli import main
from gulpio_rs.serializers import PickleSerializer


def _chunk(root, k=0, videos=2):
    chunk = GulpChunk(root / f"data_{k}.gulp", root / f"meta_{k}.gmeta")
    with chunk.open("wb"):
        for v in range(videos):
            chunk.append(f"k{k}v{v}", {"v": v}, [np.full((16, 24, 3), 40 + v, np.uint8)] * 2)
    return chunk


@pytest.fixture
def linked(tmp_path):
    """A dataset whose ``data_0.gulp`` is a symlink to a file outside it; that file holds the
    chunk's data plus 5000 bytes more (what repair would call an unpublished tail)."""
    root = tmp_path / "ds"
    root.mkdir()
    _chunk(root)
    outside = tmp_path / "outside.bin"
    outside.write_bytes((root / "data_0.gulp").read_bytes() + b"\x55" * 5000)
    os.remove(root / "data_0.gulp")
    os.symlink(outside, root / "data_0.gulp")
    return root, outside, outside.read_bytes()


def test_repair_refuses_to_cut_a_tail_through_a_symlink(linked, capsys):
    root, outside, before = linked
    assert main(["repair", str(root)]) == 1
    out = capsys.readouterr().out
    assert "refuse to change" in out and "symbolic link" in out and "data_0.gulp" in out
    assert main(["repair", str(root), "--apply"]) == 1
    out = capsys.readouterr().out
    assert "refuse to change" in out and "never writes, truncates or deletes" in out
    assert outside.read_bytes() == before
    assert os.path.islink(root / "data_0.gulp")


@pytest.mark.parametrize("mode", ["ab", "wb"])
def test_writers_refuse_a_symlinked_chunk(linked, mode):
    root, outside, before = linked
    chunk = GulpChunk(root / "data_0.gulp", root / "meta_0.gmeta")
    with pytest.raises(UnsafeFileError, match="symbolic link") as info:
        with chunk.open(mode):
            chunk.append("new", {}, [np.zeros((8, 8, 3), np.uint8)])
    assert info.value.path == str(root / "data_0.gulp")
    assert outside.read_bytes() == before
    assert os.path.islink(root / "data_0.gulp")


def test_appending_refuses_a_hard_linked_data_file(tmp_path):
    root = tmp_path / "ds"
    root.mkdir()
    _chunk(root)
    other = tmp_path / "other-name.gulp"
    os.link(root / "data_0.gulp", other)
    with open(other, "ab") as f:
        f.write(b"tail")
    before = other.read_bytes()
    chunk = GulpChunk(root / "data_0.gulp", root / "meta_0.gmeta")
    with pytest.raises(UnsafeFileError, match="2 hard links"):
        with chunk.open("ab"):
            pass
    assert other.read_bytes() == before


def test_serializer_writing_refuses_symlinks(tmp_path):
    """gulpio2's way of writing (a custom serializer: plain file writes) refuses them too."""
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"keep" * 100)
    os.symlink(outside, tmp_path / "data_0.gulp")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chunk = GulpChunk(
            tmp_path / "data_0.gulp", tmp_path / "meta_0.gmeta", serializer=PickleSerializer()
        )
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        with chunk.open("wb"):
            pass
    assert outside.read_bytes() == b"keep" * 100
    # The meta file too, written by the serializer itself.
    os.remove(tmp_path / "data_0.gulp")
    outside_meta = tmp_path / "outside.meta"
    outside_meta.write_bytes(pickle.dumps(OrderedDict()))
    os.symlink(outside_meta, tmp_path / "meta_0.gmeta")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chunk = GulpChunk(
            tmp_path / "data_0.gulp", tmp_path / "meta_0.gmeta", serializer=PickleSerializer()
        )
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        with chunk.open("wb"):
            chunk.append("v", {}, [b"\xff\xd8\xff\xd9"])
    assert outside_meta.read_bytes() == pickle.dumps(OrderedDict())


def test_repair_refuses_a_quarantine_folder_that_leads_outside(tmp_path, capsys):
    root = tmp_path / "ds"
    root.mkdir()
    _chunk(root)
    (root / "data_7.gulp").write_bytes(b"\xff\xd8orphan")  # to be moved to quarantine
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, root / "gulpio-quarantine")
    assert main(["repair", str(root), "--apply"]) == 1
    out = capsys.readouterr().out
    assert "refuse to change" in out and "gulpio-quarantine is a symbolic link" in out
    assert os.listdir(elsewhere) == []
    assert (root / "data_7.gulp").exists()


def test_repair_still_repairs_what_is_safe(linked, capsys):
    root, outside, before = linked
    _chunk(root, k=1)
    with open(root / "data_1.gulp", "ab") as f:
        f.write(b"torn append")
    assert main(["repair", str(root), "--apply"]) == 1
    out = capsys.readouterr().out
    assert "cut the unpublished tail of" in out and "data_1.gulp" in out
    assert outside.read_bytes() == before
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gd = GulpDirectory(root)
    assert os.path.getsize(root / "data_1.gulp") == gd.native_chunk(1).published_len


def test_ingest_refuses_a_state_folder_that_leads_outside(tmp_path):
    from gulpio_rs import GulpIngestor

    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    os.symlink(elsewhere, out / ".gulpio-ingest")
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        GulpIngestor(arrays_dataset(2, fill=50), str(out), videos_per_chunk=2, num_workers=1)()
    assert os.listdir(elsewhere) == []
