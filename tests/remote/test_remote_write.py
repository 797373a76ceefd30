"""Writing datasets to object storage (a real S3 server process, see tests/servers): chunks of a
remote directory, ``GulpIngestor`` into ``s3://``, crashes (SIGKILL) at random moments and
reruns, and a reader polling while chunks are published."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from helpers import image_folder

from gulpio_rs import GulpChunk, GulpDirectory, GulpIngestor
from gulpio_rs.errors import CorruptDataError

ADAPTER = '''
import time
import numpy as np
from gulpio_rs.adapters import AbstractDatasetAdapter


class Synthetic(AbstractDatasetAdapter):
    """Deterministic videos; ``delay`` seconds per video so a crash can land mid-run."""

    def __init__(self, videos=24, delay=0.0):
        self.videos, self.delay = videos, delay

    def __len__(self):
        return self.videos

    def iter_data(self, slice_element=None):
        for i in range(self.videos)[slice_element or slice(None)]:
            if self.delay:
                time.sleep(self.delay)
            rng = np.random.default_rng(i)
            base = rng.integers(0, 256, (24, 32, 3), dtype=np.uint8)
            frames = [np.roll(base, k, axis=1) for k in range(4 + i % 3)]
            yield {"id": f"video-{i:03d}", "meta": {"label": i % 5}, "frames": frames}
'''


@pytest.fixture
def adapter_module(tmp_path, monkeypatch):
    folder = tmp_path / "adapter_pkg"
    folder.mkdir()
    (folder / "synthetic_adapter.py").write_text(ADAPTER)
    monkeypatch.syspath_prepend(str(folder))
    import synthetic_adapter

    return folder, synthetic_adapter


def _objects(s3_server, bucket, prefix):
    client = s3_server.client()
    out = {}
    for key in s3_server.keys(bucket, prefix):
        if "/_gulpio/" in key:
            continue  # the manifest: random ids and times (docs/FORMAT.md §7)
        name = key.rsplit("/", 1)[-1]
        out[name] = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    return out


def _local_files(folder):
    return {
        p.name: p.read_bytes()
        for p in sorted(folder.iterdir())
        if p.is_file() and p.name.endswith((".gulp", ".gmeta", ".gidx"))
    }


def test_new_chunks_of_a_remote_directory_upload_on_close(tmp_path, s3_server, real_frames):
    bucket = s3_server.make_bucket()
    url = f"s3://{bucket}/written"
    options = s3_server.storage_options()
    remote = GulpDirectory(url, storage_options=options)
    assert len(remote) == 0
    local = GulpDirectory(str(tmp_path))
    for gd in (remote, local):
        for k, chunk in enumerate(gd.new_chunks(2)):
            with chunk.open("wb"):
                for v in range(3):
                    chunk.append(f"k{k}v{v}", {"v": v}, real_frames[v:])
    # Same bytes as a local write, and readable by a fresh reader, through the manifest both
    # got when their first chunk was written.
    assert _objects(s3_server, bucket, "written") == _local_files(tmp_path)
    local = GulpDirectory(str(tmp_path))
    again = GulpDirectory(url, storage_options=options)
    assert local.opened["how"] == again.opened["how"] == "manifest"
    assert again.keys() == local.keys()
    for i in local.keys():
        np.testing.assert_array_equal(again.read(i), local.read(i))
    # Numbers continue after the remote ones; appending to a remote chunk is refused.
    chunk = next(again.new_chunks(1))
    assert chunk.url.endswith("/data_2.gulp")
    with pytest.raises(NotImplementedError, match="appended"):
        with chunk.open("ab"):
            pass
    # A failed write uploads nothing.
    with pytest.raises(RuntimeError):
        with chunk.open("wb"):
            chunk.append("x", {}, real_frames)
            raise RuntimeError("boom")
    assert not any("_2." in k for k in s3_server.keys(bucket, "written"))


def test_ingest_to_s3_equals_local_ingest(tmp_path, s3_server, adapter_module):
    _, mod = adapter_module
    bucket = s3_server.make_bucket()
    url = f"s3://{bucket}/ingested"
    local = tmp_path / "local"
    GulpIngestor(mod.Synthetic(), str(local), 5, 2)()
    report = GulpIngestor(
        mod.Synthetic(),
        url,
        5,
        2,
        storage_options=s3_server.storage_options(),
        staging_dir=str(tmp_path / "stage"),
    )()
    assert report.videos == 24 and not report.failures
    assert _objects(s3_server, bucket, "ingested") == _local_files(local)
    # A rerun finds everything done and uploads nothing new.
    GulpIngestor(
        mod.Synthetic(),
        url,
        5,
        2,
        storage_options=s3_server.storage_options(),
        staging_dir=str(tmp_path / "stage"),
    )()
    assert _objects(s3_server, bucket, "ingested") == _local_files(local)


RUN = """
import sys
sys.path.insert(0, {folder!r})
import synthetic_adapter
from gulpio_rs import GulpIngestor
GulpIngestor(synthetic_adapter.Synthetic(delay={delay}), {url!r}, 4, 1,
             staging_dir={stage!r})()
"""


def test_sigkill_and_rerun_equal_a_clean_run_and_readers_never_see_partial_chunks(
    tmp_path, s3_server, adapter_module
):
    folder, mod = adapter_module
    clean = tmp_path / "clean"
    GulpIngestor(mod.Synthetic(), str(clean), 4, 1)()
    want = _local_files(clean)
    env = dict(os.environ, **s3_server.env())
    rng = random.Random(7)
    for trial in range(3):
        bucket = s3_server.make_bucket()
        url = f"s3://{bucket}/run"
        stage = str(tmp_path / f"stage{trial}")
        code = RUN.format(folder=str(folder), delay=0.05, url=url, stage=stage)
        proc = subprocess.Popen([sys.executable, "-c", code], env=env)
        deadline = time.monotonic() + rng.uniform(0.3, 1.6)
        reader_checks = 0
        while time.monotonic() < deadline and proc.poll() is None:
            # Every video a reader can see reads whole and CRC-checked.
            gd = GulpDirectory(url, storage_options=s3_server.storage_options())
            for i in gd.keys():
                try:
                    gd.read(i)
                except CorruptDataError as e:  # pragma: no cover - the failure we test for
                    pytest.fail(f"a reader saw a partial chunk: {e}")
                reader_checks += 1
            time.sleep(0.05)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(60)
        rerun = RUN.format(folder=str(folder), delay=0.05, url=url, stage=stage)
        subprocess.run([sys.executable, "-c", rerun], env=env, check=True, timeout=120)
        assert _objects(s3_server, bucket, "run") == want, f"trial {trial}"


def test_cli_ingest_to_a_url(tmp_path, s3_server, monkeypatch, capsys):
    """``gulpio ingest`` with an adapter that writes label2idx.json: uploaded beside the
    chunks (the adapter wrote it into the staging folder)."""
    from gulpio_rs.cli import main

    images = image_folder(tmp_path / "images")
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("GULPIO_STAGING_DIR", str(tmp_path / "staging"))
    bucket = s3_server.make_bucket()
    url = f"s3://{bucket}/imgs"
    assert main(["ingest", "image-folder", str(images), url, "--videos-per-chunk", "4"]) == 0
    capsys.readouterr()
    keys = {k.rsplit("/", 1)[-1] for k in s3_server.keys(bucket, "imgs")}
    assert {"label2idx.json", "meta_0.gmeta", "meta_1.gmeta", "data_0.gidx"} <= keys
    gd = GulpDirectory(url)
    assert len(gd) == 6


def test_chunks_upload_while_the_ingest_runs(tmp_path, s3_server, adapter_module):
    """Each chunk is uploaded as soon as it is published locally, not after the whole ingest:
    a chunk is readable remotely while the staging folder still lacks later chunks."""
    folder, _ = adapter_module
    bucket = s3_server.make_bucket()
    url = f"s3://{bucket}/streamed"
    stage = tmp_path / "stage"
    code = RUN.format(folder=str(folder), delay=0.08, url=url, stage=str(stage))
    proc = subprocess.Popen([sys.executable, "-c", code], env=dict(os.environ, **s3_server.env()))
    overlapped = False
    try:
        while proc.poll() is None and not overlapped:
            # Remote first: the staged count only grows, so "remote seen, then fewer than 6
            # staged" proves the upload came before the last chunk was encoded.
            remote = sum(k.endswith(".gmeta") for k in s3_server.keys(bucket, "streamed"))
            staged = len(list(stage.glob("meta_*.gmeta"))) if stage.exists() else 0
            overlapped = 0 < remote and staged < 6
            time.sleep(0.02)
        assert proc.wait(120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert overlapped, "no chunk was uploaded before the last one was encoded"
    assert sum(k.endswith(".gmeta") for k in s3_server.keys(bucket, "streamed")) == 6


def test_chunks_of_a_remote_directory_are_never_written_as_local_files(
    tmp_path, s3_server, real_frames, monkeypatch
):
    """``open('wb'/'ab')`` on a chunk of an ``s3://`` directory, and every other API given a
    URL where it writes, refuses clearly instead of writing ``./s3:/bucket/...`` here."""
    from gulpio_rs import _native, write_index

    bucket = s3_server.make_bucket()
    url = f"s3://{bucket}/ds"
    options = s3_server.storage_options()
    for chunk in GulpDirectory(url, storage_options=options).new_chunks(1):
        with chunk.open("wb"):
            chunk.append("v", {}, real_frames)
    keys = s3_server.keys(bucket, "ds")
    monkeypatch.chdir(tmp_path)
    gd = GulpDirectory(url, storage_options=options)
    (chunk,) = list(gd.chunks())
    for mode in ("wb", "ab"):
        with pytest.raises(NotImplementedError, match="new_chunks"):
            with chunk.open(mode):
                chunk.append("w", {}, real_frames)
    direct = GulpChunk(f"{url}/data_0.gulp", f"{url}/meta_0.gmeta")
    with pytest.raises(NotImplementedError, match="GulpIngestor"):
        with direct.open("wb"):
            pass
    with pytest.raises(ValueError, match="is a URL, not a local path"):
        _native.NativeWriter(f"{url}/data_0.gulp", f"{url}/meta_0.gmeta")
    with pytest.raises(ValueError, match="is a URL, not a local path"):
        write_index(f"{url}/data_0.gulp", f"{url}/meta_0.gmeta")
    with pytest.raises(NotImplementedError, match="local copy"):
        gd.write_indexes()
    assert os.listdir(tmp_path) == []
    assert s3_server.keys(bucket, "ds") == keys


def test_publishing_where_objects_cannot_be_created_only_if_absent_is_refused(
    tmp_path, real_frames, http_server
):
    """A plain HTTP (WebDAV) store has no conditional create, so a new chunk could replace
    another writer's there: publishing is refused with the reason, and nothing is uploaded."""
    from gulpio_rs import RemoteConfigError

    (tmp_path / "ds").mkdir()
    for chunk in GulpDirectory(tmp_path / "ds").new_chunks(1):
        with chunk.open("wb"):
            chunk.append("v", {}, real_frames)
    before = sorted(os.listdir(tmp_path / "ds"))
    server = http_server(tmp_path)
    gd = GulpDirectory(f"{server.url}/ds")
    chunk = next(gd.new_chunks(1))
    with pytest.raises(RemoteConfigError, match="only if none has its name"):
        with chunk.open("wb"):
            chunk.append("w", {}, real_frames)
    assert sorted(os.listdir(tmp_path / "ds")) == before
