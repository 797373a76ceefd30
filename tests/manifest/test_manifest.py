"""The dataset manifest (docs/FORMAT.md §7) as writers keep it: `gulpio index` creates it,
every writer of ours commits before its commit point, concurrent writers lose nothing, a
killed writer hides nothing and invents nothing, and `gulpio check` finds what other tools
changed."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import pytest
from helpers import ListAdapter, reopen_while_writing

from gulpio_rs import GulpChunk, GulpDirectory, GulpIngestor, _native
from gulpio_rs.cli import main
from gulpio_rs.errors import BrokenChunkWarning, ManifestWarning


def _write(folder, k, ids, make_frame, mode="wb"):
    chunk = GulpChunk(folder / f"data_{k}.gulp", folder / f"meta_{k}.gmeta")
    with chunk.open(mode):
        for i, id_ in enumerate(ids):
            chunk.append(id_, {"i": i}, [make_frame(16, 24, seed=i + j) for j in range(2)])


@pytest.fixture
def dataset(tmp_path, make_frame):
    for k in range(2):
        _write(tmp_path, k, [f"c{k}v{v}" for v in range(3)], make_frame)
    return tmp_path


def _status(folder):
    return _native.manifest_status(str(folder))


def _check(capsys, folder):
    code = main(["check", str(folder), "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_gulpio_index_creates_the_manifest_and_check_and_info_report_it(dataset, capsys):
    assert _status(dataset) is None
    assert main(["index", str(dataset)]) == 0
    assert "manifest created at version 0: 2 chunks, 6 videos" in capsys.readouterr().out
    st = _status(dataset)
    assert st is not None
    assert (st["version"], st["chunks"], st["videos"]) == (0, 2, 6)
    assert st["pending"] == st["unrecorded"] == st["mismatched"] == []
    assert os.path.isdir(dataset / "_gulpio" / "log")
    code, report = _check(capsys, dataset)
    assert code == 0, report["problems"]
    assert main(["info", str(dataset)]) == 0
    out = capsys.readouterr().out
    assert "manifest version 0 (genesis + 0 commits), 2 chunks, 6 videos" in out
    # The manifest is not a chunk: the dataset reads as before.
    gd = GulpDirectory(str(dataset))
    assert sorted(gd.keys()) == sorted(f"c{k}v{v}" for k in range(2) for v in range(3))


def test_every_writer_of_ours_commits_what_it_publishes(dataset, make_frame, capsys):
    main(["index", str(dataset)])
    capsys.readouterr()
    _write(dataset, 0, ["c0v3"], make_frame, mode="ab")  # an append
    _write(dataset, 1, ["new1"], make_frame)  # a rewrite
    gd = GulpDirectory(str(dataset))
    (chunk,) = gd.new_chunks(1)  # a new chunk
    with chunk.open("wb"):
        chunk.append("fresh", {}, [make_frame(16, 24)])
    items = [
        {"id": f"ing{i}", "meta": {}, "frames": [make_frame(16, 24, seed=i)]} for i in range(5)
    ]
    adapter = ListAdapter(items)
    GulpIngestor(adapter, str(dataset), videos_per_chunk=2, num_workers=1)()
    st = _status(dataset)
    assert st["pending"] == st["unrecorded"] == st["mismatched"] == []
    gd = GulpDirectory(str(dataset))
    assert st["videos"] == len(gd) and st["chunks"] == gd.num_chunks
    code, report = _check(capsys, dataset)
    assert code == 0, report["problems"]


def test_check_finds_chunks_other_tools_changed_and_index_records_them(dataset, capsys):
    main(["index", str(dataset)])
    capsys.readouterr()
    # A chunk copied in (as `cp` or gulpio2 would add one), and one removed by hand.
    for ext in ("gulp", "gmeta", "gidx"):
        src = "meta_1.gmeta" if ext == "gmeta" else f"data_1.{ext}"
        dst = "meta_7.gmeta" if ext == "gmeta" else f"data_7.{ext}"
        shutil.copy(dataset / src, dataset / dst)
    for name in ("meta_1.gmeta", "data_1.gulp", "data_1.gidx"):
        os.remove(dataset / name)
    code, report = _check(capsys, dataset)
    kinds = sorted((p["kind"], os.path.basename(p["path"])) for p in report["problems"])
    assert code == 1
    assert kinds == [("manifest", "meta_1.gmeta"), ("unrecorded", "meta_7.gmeta")]
    assert main(["index", str(dataset)]) == 0
    out = capsys.readouterr().out
    assert "1 chunk added, 1 record removed" in out
    code, report = _check(capsys, dataset)
    assert code == 0, report["problems"]


def test_a_damaged_manifest_is_a_finding_of_check_and_index_refuses_to_build_on_it(
    dataset, make_frame, capsys
):
    main(["index", str(dataset)])
    capsys.readouterr()
    _write(dataset, 0, ["c0v3"], make_frame, mode="ab")
    log = dataset / "_gulpio" / "log" / f"{1:020}.glog"
    raw = bytearray(log.read_bytes())
    raw[len(raw) // 2] ^= 0x10
    log.write_bytes(bytes(raw))
    code, report = _check(capsys, dataset)
    assert code == 1
    (problem,) = [p for p in report["problems"] if p["kind"] == "manifest"]
    assert "00000000000000000001.glog" in problem["message"]
    assert main(["index", str(dataset)]) == 1
    assert "00000000000000000001.glog" in capsys.readouterr().err
    with pytest.warns(ManifestWarning, match="gulpio repair --apply. rebuilds it"):
        assert GulpDirectory(str(dataset)).opened["how"] == "listing"
    # Repair rebuilds it from the chunks (the append included), and it is used again.
    assert main(["repair", str(dataset), "--apply"]) == 0
    assert "remove the damaged dataset manifest" in capsys.readouterr().out
    code, report = _check(capsys, dataset)
    assert code == 0, report["problems"]
    gd = GulpDirectory(str(dataset), manifest="verify")
    assert gd.opened["how"] == "manifest" and "c0v3" in gd


WRITER = textwrap.dedent(
    """
    import sys, threading
    import numpy as np
    from gulpio_rs import GulpDirectory

    folder, tag, threads, per = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    frame = np.zeros((16, 24, 3), np.uint8)
    said = threading.Lock()

    def work(t):
        for i in range(per):
            (chunk,) = GulpDirectory(folder).new_chunks(1)
            with chunk.open("wb"):
                chunk.append(f"{tag}-{t}-{i}", {}, [frame])
            with said:  # one whole line per acknowledged chunk
                sys.stdout.write(f"{tag}-{t}-{i}\\n")
                sys.stdout.flush()

    ts = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    """
)


def _writer(folder, tag, threads, per):
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(folder), tag, str(threads), str(per)],
        stdout=subprocess.PIPE,
        text=True,
    )


def test_two_processes_of_two_threads_lose_no_chunk(dataset, capsys):
    main(["index", str(dataset)])
    capsys.readouterr()
    procs = [_writer(dataset, tag, 2, 12) for tag in ("p", "q")]
    # Readers reopen while the writers publish: every open goes through the manifest (a
    # chunk published after the open's look at the log is not taken for an unrecorded one),
    # never shrinks, and every video it lists reads whole.
    acknowledged = reopen_while_writing(procs, lambda: GulpDirectory(str(dataset)))
    st = _status(dataset)
    assert st["pending"] == st["unrecorded"] == st["mismatched"] == []
    assert st["version"] == 48 and st["videos"] == 6 + 48
    gd = GulpDirectory(str(dataset))
    assert set(acknowledged) <= set(gd.keys())
    code, report = _check(capsys, dataset)
    assert code == 0, report["problems"]


def test_a_writer_killed_at_any_moment_hides_nothing_and_invents_nothing(dataset, capsys):
    main(["index", str(dataset)])
    capsys.readouterr()
    rng = random.Random(36)
    for trial in range(20):  # the count of trials
        proc = _writer(dataset, f"k{trial}", 2, 200)
        time.sleep(rng.uniform(0.3, 1.5))
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate()
        acknowledged = out.split()
        st = _status(dataset)
        # Nothing hidden: every published chunk is recorded. Nothing invented: every record
        # names a chunk whose files are the ones recorded.
        assert st["unrecorded"] == [] and st["mismatched"] == [], st
        with warnings.catch_warnings():
            # The chunk the kill interrupted: a data file without its `.gmeta`.
            warnings.simplefilter("ignore", BrokenChunkWarning)
            gd = GulpDirectory(str(dataset))
        assert st["videos"] == len(gd)
        assert set(acknowledged) <= set(gd.keys())
    # Killed between a commit and its commit point: pending until aborted.
    assert main(["index", str(dataset), "--abort-pending"]) == 0
    capsys.readouterr()
    st = _status(dataset)
    assert st["pending"] == [] and st["tail"] == 0
    # What remains are the killed writers' unpaired files, which `gulpio repair` handles.
    code, report = _check(capsys, dataset)
    manifest_kinds = {"unrecorded", "manifest", "pending"}
    assert [p for p in report["problems"] if p["kind"] in manifest_kinds] == []


def test_repair_records_what_it_changed_and_cleans_the_manifests_leftovers(
    dataset, make_frame, capsys
):
    main(["index", str(dataset)])
    capsys.readouterr()
    # A chunk removed by another tool, and a dead writer's temporary in the log's folder.
    for name in ("meta_1.gmeta", "data_1.gulp", "data_1.gidx"):
        os.remove(dataset / name)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    leftover = dataset / "_gulpio" / "log" / f".gulpio-tmp.{3:020}.glog.{dead.pid}-0"
    leftover.write_bytes(b"partial")
    code, report = _check(capsys, dataset)
    kinds = sorted(p["kind"] for p in report["problems"])
    assert code == 1 and kinds == ["leftover", "manifest"]
    assert main(["repair", str(dataset), "--apply"]) == 0
    out = capsys.readouterr().out
    assert "record every chunk in the dataset manifest" in out
    assert not leftover.exists()
    code, report = _check(capsys, dataset)
    assert code == 0, report["problems"]
    assert _status(dataset)["chunks"] == 1


def test_the_manifest_folder_is_ours_so_transcode_does_not_copy_it_as_a_sidecar(dataset):
    from gulpio_rs._names import is_ours

    assert is_ours("_gulpio") and is_ours(str(dataset / "_gulpio"))
