"""New datasets get a manifest by themselves, and writers keep it short (docs/FORMAT.md §7.6):
an ingest, ``new_chunks`` into an empty folder and Ray's ``write_gulp`` create the genesis
before their first chunk; an ingest run ends by compacting; a writer whose commit reaches the
policy's multiple compacts. Datasets that have chunks and no manifest are left as they are,
and ``manifest=False`` opts out."""

from __future__ import annotations

import os
import threading
import warnings

import numpy as np
import pytest
from helpers import ListAdapter

from gulpio_rs import GulpDirectory, GulpIngestor, _native
from gulpio_rs.errors import EmptyDirectoryWarning, ManifestWarning

GENESIS = os.path.join("_gulpio", "log", "0" * 20 + ".glog")


def _items(n, prefix="v", seed=0):
    rng = np.random.default_rng(seed)
    return ListAdapter(
        [
            {
                "id": f"{prefix}{i}",
                "meta": {"i": i},
                "frames": [rng.integers(0, 255, (16, 24, 3), np.uint8) for _ in range(2)],
            }
            for i in range(n)
        ]
    )


def _open(path, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ManifestWarning)
        return GulpDirectory(str(path), **kw)


def _same_as_listing(gd, path, **kw):
    listed = GulpDirectory(str(path), manifest="off", **kw)
    assert gd.keys() == listed.keys()
    for i in listed.keys():
        np.testing.assert_array_equal(np.stack(gd[i][0]), np.stack(listed[i][0]))
        assert gd.meta(i) == listed.meta(i)


def test_an_ingest_into_a_new_folder_opens_through_its_compacted_manifest(tmp_path):
    out = tmp_path / "out"
    report = GulpIngestor(_items(7), out, 2, 1, progress=False)()
    assert report.videos == 7
    assert (out / GENESIS).is_file()
    gd = _open(out, manifest="require")
    assert gd.opened["how"] == "manifest"
    # The run ended by compacting: no commit after the base.
    assert gd.opened["tail"] == 0 and gd.opened["base_version"] == gd.opened["version"] == 4
    assert len(gd) == 7
    _same_as_listing(gd, out)


def test_a_second_run_extends_the_manifest_and_compacts_again(tmp_path):
    out = tmp_path / "out"
    GulpIngestor(_items(4), out, 2, 1, progress=False)()
    GulpIngestor(_items(3, prefix="w", seed=1), out, 2, 1, progress=False)()
    gd = _open(out, manifest="require")
    assert gd.opened["tail"] == 0 and gd.opened["version"] == 4
    assert sorted(gd.keys()) == sorted([f"v{i}" for i in range(4)] + [f"w{i}" for i in range(3)])
    _same_as_listing(gd, out)


def test_manifest_false_writes_the_same_chunks_without_a_manifest(tmp_path):
    GulpIngestor(_items(5), tmp_path / "a", 2, 1, progress=False)()
    GulpIngestor(_items(5), tmp_path / "b", 2, 1, progress=False, manifest=False)()
    assert not (tmp_path / "b" / "_gulpio").exists()
    gd = GulpDirectory(str(tmp_path / "b"))
    assert gd.opened["how"] == "listing"
    for name in sorted(os.listdir(tmp_path / "b")):
        if name.endswith((".gulp", ".gmeta", ".gidx")):
            assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_a_dataset_with_chunks_and_no_manifest_is_left_without_one(tmp_path):
    """Its chunks would be unrecorded: `gulpio index` is what records them."""
    out = tmp_path / "out"
    GulpIngestor(_items(3), out, 2, 1, progress=False, manifest=False)()
    GulpIngestor(_items(3, prefix="w", seed=1), out, 2, 1, progress=False)()
    assert not (out / "_gulpio").exists()
    assert GulpDirectory(str(out)).opened["how"] == "listing"
    assert len(GulpDirectory(str(out))) == 6


def test_new_chunks_into_an_empty_folder_create_the_manifest(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyDirectoryWarning)
        gd = GulpDirectory(str(tmp_path))
    for k, chunk in enumerate(gd.new_chunks(3)):
        with chunk.open("wb"):
            chunk.append(f"id{k}", {"k": k}, [np.full((8, 8, 3), k, np.uint8)])
    assert (tmp_path / GENESIS).is_file()
    again = _open(tmp_path, manifest="require")
    # Each chunk is a commit; nothing compacts before the policy's multiple.
    assert again.opened["tail"] == 3
    assert again.keys() == ["id0", "id1", "id2"]
    _same_as_listing(again, tmp_path)


def test_writers_creating_one_dataset_at_once_share_one_genesis(tmp_path):
    """Of two writers creating one dataset the second adopts the first's manifest, and every
    chunk of both is recorded."""
    barrier = threading.Barrier(4)
    errors = []

    def writer(w):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", EmptyDirectoryWarning)
                gd = GulpDirectory(str(tmp_path))
            barrier.wait()
            for k, chunk in enumerate(gd.new_chunks(3)):
                with chunk.open("wb"):
                    chunk.append(f"w{w}c{k}", {}, [np.full((8, 8, 3), w, np.uint8)])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    gd = _open(tmp_path, manifest="verify")
    assert sorted(gd.keys()) == sorted(f"w{w}c{k}" for w in range(4) for k in range(3))
    status = _native.manifest_status(str(tmp_path))
    assert status is not None and not status["unrecorded"] and not status["pending"]


def test_compacting_when_nothing_follows_the_base_writes_nothing(tmp_path):
    out = tmp_path / "out"
    GulpIngestor(_items(3), out, 2, 1, progress=False)()
    snaps = sorted(os.listdir(out / "_gulpio" / "snap"))
    assert _native.manifest_compact(str(out)) is None
    assert sorted(os.listdir(out / "_gulpio" / "snap")) == snaps
    assert _native.manifest_compact(str(tmp_path / "nothing-here")) is None


@pytest.mark.parametrize("how", ["ingest", "new_chunks"])
def test_a_new_remote_dataset_gets_its_manifest_and_opens_in_a_few_requests(
    tmp_path, s3_server, fault_proxy, how
):
    bucket = s3_server.make_bucket()
    proxy = fault_proxy(s3_server.endpoint)
    options = s3_server.storage_options(endpoint=proxy.url)
    url = f"s3://{bucket}/ds"
    if how == "ingest":
        GulpIngestor(
            _items(9),
            url,
            2,
            1,
            progress=False,
            storage_options=options,
            staging_dir=tmp_path / "staging",
        )()
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", EmptyDirectoryWarning)
            gd = GulpDirectory(url, storage_options=options)
        for k, chunk in enumerate(gd.new_chunks(5)):
            with chunk.open("wb"):
                chunk.append(f"v{k}", {"i": k}, [np.full((8, 8, 3), k, np.uint8)])
    proxy.reset_counters()
    gd = _open(url, storage_options=options, manifest="require")
    # A compacted manifest: the bound. A tail: a commit and a `HEAD` of its chunk's
    # `.gmeta` per commit, and the probes for the newest.
    tail = 0 if how == "ingest" else 5
    assert proxy.requests <= 5 + 3 * tail, proxy.log()
    assert gd.opened["how"] == "manifest"
    if how == "ingest":
        assert gd.opened["tail"] == 0  # compacted remotely at the run's end
        # A second compaction replaces LATEST conditionally on the one it read.
        assert _native.manifest_compact(url, list(options.items())) is None
    else:
        assert gd.opened["tail"] == 5
        assert _native.manifest_compact(url, list(options.items())) == 5
        again = _open(url, storage_options=options, manifest="require")
        assert again.opened["tail"] == 0 and again.opened["version"] == 5
    _same_as_listing(gd, url, storage_options=options)


def test_gulpio_index_gives_a_remote_dataset_without_one_its_manifest(tmp_path, s3_env, capsys):
    """A dataset uploaded without a manifest (an older writer, `aws s3 cp`) gets one from
    `gulpio index URL`, which only adds files under `_gulpio/`; then it opens through it, and
    a second run finds nothing to do."""
    from gulpio_rs.cli import main

    local = tmp_path / "ds"
    GulpIngestor(_items(9), local, 2, 1, progress=False, manifest=False)()
    bucket = s3_env.make_bucket()
    s3_env.upload_dir(local, bucket, "ds")
    url = f"s3://{bucket}/ds"
    before = sorted(k for k in s3_env.keys(bucket, "ds/") if "/_gulpio/" not in k)
    assert GulpDirectory(url).opened["how"] == "listing"
    assert main(["index", url]) == 0
    assert "manifest created at version 0: 5 chunks, 9 videos" in capsys.readouterr().out
    assert sorted(k for k in s3_env.keys(bucket, "ds/") if "/_gulpio/" not in k) == before
    gd = _open(url, manifest="verify")
    assert gd.opened["how"] == "manifest" and gd.opened["tail"] == 0
    _same_as_listing(gd, url)
    assert main(["index", url]) == 0
    assert "manifest updated at version 0" in capsys.readouterr().out
    # A chunk uploaded behind its back is recorded by the next run.
    extra = tmp_path / "extra"
    GulpIngestor(_items(2, prefix="x"), extra, 2, 1, progress=False, manifest=False)()
    for name in ("data_0.gulp", "data_0.gidx", "meta_0.gmeta"):
        s3_env.client().upload_file(str(extra / name), bucket, f"ds/{name.replace('_0', '_9')}")
    assert main(["index", url]) == 0
    assert "(1 chunk added)" in capsys.readouterr().out
    assert len(_open(url, manifest="verify")) == 11


def test_gulpio_index_refuses_an_empty_prefix(s3_env):
    from gulpio_rs.cli import main

    url = f"s3://{s3_env.make_bucket()}/nothing"
    assert main(["index", url]) != 0
    assert not list(s3_env.keys(url.split("/")[2], "nothing/"))
