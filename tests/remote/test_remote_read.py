"""Reading datasets from object storage: a real S3-compatible server process on 127.0.0.1
(started by the ``s3_server`` fixture, installed by ``.ci/install-test-servers``), datasets
uploaded with boto3, read with gulpio-rs and compared with local reads byte for byte and pixel
for pixel; the same through a fault-injecting proxy (every read returns the right pixels or
raises a typed error); and a plain HTTP server with Range support."""

from __future__ import annotations

import json
import pickle
import warnings

import numpy as np
import pytest

import gulpio_rs
from gulpio_rs import GulpDirectory
from gulpio_rs.errors import (
    BrokenChunkWarning,
    CorruptDataError,
    RemoteConfigError,
    RemoteError,
    RemoteNotFoundError,
    RemotePermissionError,
)


def _write_dataset(root, make_frame, *, legacy_chunk: int | None = None) -> list[str]:
    """Three chunks: mixed frame sizes, a gray video, an empty video; optionally one chunk
    without its index (as gulpio2 writes them)."""
    gd = GulpDirectory(str(root))
    ids = []
    for k, chunk in enumerate(gd.new_chunks(3)):
        with chunk.open("wb"):
            for v in range(4):
                vid = f"c{k}-v{v}"
                if k == 1 and v == 3:
                    frames = []
                elif k == 2 and v == 0:
                    frames = [make_frame(40, 56, gray=True, seed=s) for s in range(5)]
                else:
                    h, w = (48, 64) if v % 2 == 0 else (36, 60)
                    frames = [make_frame(h, w, seed=100 * k + 10 * v + s) for s in range(7)]
                chunk.append(vid, {"label": f"l{v}", "k": k}, frames)
                ids.append(vid)
    if legacy_chunk is not None:
        (root / f"data_{legacy_chunk}.gidx").unlink()
    return ids


@pytest.fixture
def dataset(tmp_path, make_frame, s3_server):
    """``(local_dir, url, ids)``: a dataset on disk and the same files in a fresh bucket."""
    local = tmp_path / "ds"
    local.mkdir()
    ids = _write_dataset(local, make_frame, legacy_chunk=2)
    bucket = s3_server.make_bucket()
    s3_server.upload_dir(local, bucket, "gulps/train")
    return local, f"s3://{bucket}/gulps/train", ids


def _open(url, server, **kw):
    return GulpDirectory(url, storage_options=server.storage_options(), **kw)


def _same_everything(local: GulpDirectory, remote: GulpDirectory, ids: list[str]):
    assert len(remote) == len(local) == len(ids)
    assert remote.keys() == local.keys()
    assert all(i in remote for i in ids) and "nope" not in remote
    for i in ids:
        fl, ml = local[i]
        fr, mr = remote[i]
        assert ml == mr == remote.meta(i)
        assert len(fl) == len(fr)
        for a, b in zip(fl, fr, strict=True):
            np.testing.assert_array_equal(a, b)
        if len(fl) > 2:
            sub_l, _ = local[i, 1:6:2]
            sub_r, _ = remote[i, 1:6:2]
            for a, b in zip(sub_l, sub_r, strict=True):
                np.testing.assert_array_equal(a, b)
        assert [bytes(b) for b in local.frame_bytes(i)] == [bytes(b) for b in remote.frame_bytes(i)]
        assert remote.num_frames(i) == local.num_frames(i)
        if fl and len({f.shape for f in fl}) == 1:
            np.testing.assert_array_equal(local.read(i), remote.read(i))
    assert json.dumps(remote.merged_meta_dict[ids[0]]) == json.dumps(local.merged_meta_dict[ids[0]])


def test_s3_reads_equal_local_reads(dataset, s3_server):
    local_dir, url, ids = dataset
    local = GulpDirectory(str(local_dir))
    remote = _open(url, s3_server)
    _same_everything(local, remote, ids)
    # A batch of same-shaped clips, into a caller's buffer, and a mixed-shape batch (a list).
    same = [i for i in ids if i.endswith(("v0", "v2")) and not i.startswith("c2-v0")]
    out = np.empty((len(same), 4, 48, 64, 3), np.uint8)
    got = remote.read_batch(same, frames=slice(0, 4), out=out)
    assert got is out
    np.testing.assert_array_equal(out, local.read_batch(same, frames=slice(0, 4)))
    mixed = ["c0-v0", "c0-v1", "c2-v0"]
    for a, b in zip(
        local.read_batch(mixed, frames=[0, 2]), remote.read_batch(mixed, frames=[0, 2]), strict=True
    ):
        np.testing.assert_array_equal(a, b)


def test_environment_credentials(dataset, s3_server, monkeypatch):
    local_dir, url, ids = dataset
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    remote = GulpDirectory(url)
    assert remote.keys() == GulpDirectory(str(local_dir)).keys()
    np.testing.assert_array_equal(remote.read(ids[0]), GulpDirectory(str(local_dir)).read(ids[0]))


def _aws_files(tmp_path, monkeypatch, s3_server, profile="dev", secret=None):
    """An AWS CLI-style credentials + config pair with the server's keys under ``profile``."""
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(key, raising=False)
    for key in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(key, raising=False)
    creds, config = tmp_path / "credentials", tmp_path / "config"
    creds.write_text(
        "[default]\naws_access_key_id = NOT-THIS-ONE\naws_secret_access_key = nope-nope\n\n"
        f"[{profile}]\naws_access_key_id = {s3_server.access_key}\n"
        f"aws_secret_access_key = {secret or s3_server.secret_key}\n"
    )
    config.write_text(
        f"[profile {profile}]\nregion = {s3_server.region}\nendpoint_url = {s3_server.endpoint}\n"
        "[profile sso]\nsso_session = corp\nregion = us-east-1\n"
    )
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(creds))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")


def test_aws_profile_from_the_shared_files(dataset, s3_server, monkeypatch, tmp_path):
    # Keys, region and endpoint of a named profile, as the AWS CLI and boto3 read them.
    local_dir, url, ids = dataset
    _aws_files(tmp_path, monkeypatch, s3_server)
    monkeypatch.setenv("AWS_PROFILE", "dev")
    remote = GulpDirectory(url)
    assert remote.keys() == GulpDirectory(str(local_dir)).keys()
    monkeypatch.delenv("AWS_PROFILE")
    remote = GulpDirectory(url, storage_options={"aws_profile": "dev"})
    np.testing.assert_array_equal(remote.read(ids[0]), GulpDirectory(str(local_dir)).read(ids[0]))


def test_aws_profile_errors_name_the_profile_not_the_secret(
    dataset, s3_server, monkeypatch, tmp_path
):
    _, url, _ = dataset
    _aws_files(tmp_path, monkeypatch, s3_server, secret="wrong-secret-4567")
    with pytest.raises(RemotePermissionError) as info:
        GulpDirectory(url, storage_options={"aws_profile": "dev"})
    msg = str(info.value)
    assert 'profile "dev" in ' in msg and "wrong-secret-4567" not in msg
    with pytest.raises(RemoteConfigError, match='"missing"'):
        GulpDirectory(url, storage_options={"aws_profile": "missing"})
    with pytest.raises(RemoteConfigError, match="sso_session.*export-credentials"):
        GulpDirectory(url, storage_options={"aws_profile": "sso"})
    # Keys in the environment win over AWS_PROFILE, as in the AWS SDKs.
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_PROFILE", "dev")
    assert len(GulpDirectory(url)) > 0


def test_wrong_secret_is_a_permission_error_without_the_secret(dataset, s3_server):
    _, url, _ = dataset
    options = dict(s3_server.storage_options(), aws_secret_access_key="not-the-secret-0123")
    with pytest.raises(RemotePermissionError) as info:
        GulpDirectory(url, storage_options=options)
    msg = str(info.value)
    assert url.split("/")[2] in msg
    assert "aws_secret_access_key" not in msg or "not-the-secret-0123" not in msg
    assert "not-the-secret-0123" not in msg and s3_server.secret_key not in msg
    assert 'storage_options["aws_access_key_id"]' in msg  # which credentials were used
    assert isinstance(info.value, PermissionError) and isinstance(info.value, RemoteError)


def test_missing_bucket_is_not_found(s3_server):
    with pytest.raises(RemoteNotFoundError) as info:
        _open("s3://no-such-bucket-gulpio/x", s3_server)
    assert "no-such-bucket-gulpio" in str(info.value)
    assert isinstance(info.value, FileNotFoundError)


def test_bad_storage_option_is_a_config_error(s3_server):
    options = dict(s3_server.storage_options(), not_an_option="1")
    with pytest.raises(RemoteConfigError, match="not_an_option"):
        GulpDirectory("s3://whatever/x", storage_options=options)
    with pytest.raises(RemoteConfigError, match="concurrency"):
        GulpDirectory("s3://whatever/x", storage_options={"concurrency": "zero"})


def test_secrets_never_in_repr_or_pickle_errors(dataset, s3_server):
    _, url, _ = dataset
    remote = _open(url, s3_server)
    assert s3_server.secret_key not in repr(remote)
    assert s3_server.secret_key not in str(vars(remote))


def test_stored_damage_is_reported_with_url_video_and_frame(tmp_path, make_frame, s3_server):
    local = tmp_path / "ds"
    local.mkdir()
    _write_dataset(local, make_frame)
    gd = GulpDirectory(str(local))
    chunk, video = gd._resolve("c0-v1")
    loc = chunk.frame_info(video)[2][0]
    data = bytearray((local / "data_0.gulp").read_bytes())
    data[loc + 40] ^= 0x04
    (local / "data_0.gulp").write_bytes(bytes(data))
    bucket = s3_server.make_bucket()
    s3_server.upload_dir(local, bucket, "d")
    remote = _open(f"s3://{bucket}/d", s3_server)
    with pytest.raises(CorruptDataError) as info:
        remote.read("c0-v1")
    e = info.value
    assert e.path == f"s3://{bucket}/d/data_0.gulp"
    assert (e.video_id, e.frame) == ("c0-v1", 2)
    np.testing.assert_array_equal(remote.read("c0-v0"), gd.read("c0-v0"))


def test_pread_io_equals_mmap(tmp_path, make_frame):
    local = tmp_path / "ds"
    local.mkdir()
    ids = _write_dataset(local, make_frame, legacy_chunk=1)
    _same_everything(GulpDirectory(str(local)), GulpDirectory(str(local), io="pread"), ids)
    with pytest.raises(ValueError, match="mmap"):
        GulpDirectory(str(local), io="posix")


# -- faults between client and server ------------------------------------------------------------


@pytest.fixture
def proxied(dataset, s3_server, fault_proxy):
    """``(local GulpDirectory, remote GulpDirectory through the proxy, ids, proxy)``."""
    local_dir, url, ids = dataset
    proxy = fault_proxy(s3_server.endpoint)
    options = dict(
        s3_server.storage_options(), aws_endpoint=proxy.url, retry_timeout="20", max_retries="6"
    )
    remote = GulpDirectory(url, storage_options=options)
    return GulpDirectory(str(local_dir)), remote, ids, proxy


def _read_all(gd, ids):
    return {i: gd[i][0] for i in ids}


def _assert_same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        for x, y in zip(a[k], b[k], strict=True):
            np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize(
    "fault",
    [
        {"status": 503, "count": 3},
        {"status": 429, "count": 3},
        {"reset_mid_body": 2},
        {"truncate_body": 2},
        {"flip_byte": 1},
    ],
    ids=["503", "429", "reset", "truncated", "flipped"],
)
def test_transient_faults_still_give_the_right_pixels(proxied, fault):
    local, remote, ids, proxy = proxied
    want = _read_all(local, ids)
    proxy.set_faults(**fault)
    with warnings.catch_warnings():
        # A fault in transit must not make a chunk fall back to its .gmeta (no frame CRCs).
        warnings.simplefilter("error", BrokenChunkWarning)
        got = _read_all(remote, ids)
    _assert_same(got, want)
    assert proxy.faults_injected() >= 1


def test_persistent_corruption_in_transit_is_a_crc_error(proxied):
    _, remote, ids, proxy = proxied
    remote.read(ids[0])  # chunk opened before the faults start
    proxy.set_faults(flip_byte=1000)
    with pytest.raises(CorruptDataError) as info:
        remote.read(ids[0])
    assert info.value.video_id == ids[0]


def test_a_server_that_keeps_failing_gives_a_remote_error_naming_the_url(
    dataset, s3_server, fault_proxy
):
    _, url, ids = dataset
    proxy = fault_proxy(s3_server.endpoint)
    options = dict(
        s3_server.storage_options(), aws_endpoint=proxy.url, retry_timeout="2", max_retries="3"
    )
    remote = GulpDirectory(url, storage_options=options)
    remote.read(ids[0])
    proxy.set_faults(status=503, count=10_000)
    with pytest.raises(RemoteError) as info:
        remote.read(ids[1])
    assert url in str(info.value) and "503" in str(info.value)
    assert not isinstance(info.value, (CorruptDataError, RemotePermissionError))


def test_bytes_fetched_are_the_frames_needed(proxied):
    local, remote, ids, proxy = proxied
    clip = [i for i in ids if local.num_frames(i) >= 7][:4]
    remote.read_batch(clip, frames=slice(0, 4))  # chunks opened
    proxy.reset_counters()
    remote.read_batch(clip, frames=slice(0, 4))
    needed = sum(len(b) for i in clip for b in local.frame_bytes(i, slice(0, 4)))
    assert proxy.requests == len(clip)  # one request per clip
    assert needed <= proxy.body_bytes <= 1.1 * needed + 3 * 4 * len(clip)


# -- DataLoader workers ----------------------------------------------------------------------------


@pytest.mark.parametrize("context", ["fork", "spawn", "forkserver"])
def test_dataloader_workers_read_from_the_server(dataset, s3_server, context):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from gulpio_rs.torch import GulpVideoDataset, gulp_collate

    local_dir, url, _ = dataset
    same_shape = ["c0-v0", "c0-v2", "c1-v0", "c1-v2", "c2-v2"]
    remote = GulpVideoDataset(
        url, frames=3, ids=same_shape, storage_options=s3_server.storage_options()
    )
    local = GulpVideoDataset(str(local_dir), frames=3, ids=same_shape)
    # Open (and use) the runtime in the parent first: children must not reuse it.
    remote[0]
    loader = DataLoader(
        remote,
        batch_size=2,
        num_workers=2,
        multiprocessing_context=context,
        collate_fn=gulp_collate,
    )
    got = [x for batch in loader for x in batch[0]]
    want = [local[i][0] for i in range(len(local))]
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert torch.equal(torch.as_tensor(a), torch.as_tensor(b))


def test_a_forked_child_drops_what_it_inherited_without_hanging(dataset, s3_server):
    """A child inherits the parent's clients, pooled connections and pending read-aheads but
    not the I/O threads they belong to: dropping them there must not touch the parent's
    runtime (a lock one of its threads held at the fork would hang the child forever). Forks
    are made right after a read returns, when the parent's I/O threads are going idle (as a
    DataLoader forks its workers after the dataset has been opened), many times, so that
    some land inside such a moment."""
    import os
    import threading
    import time

    local_dir, url, ids = dataset
    options = s3_server.storage_options()
    want = GulpDirectory(str(local_dir)).read(ids[0])
    busy = GulpDirectory(url, storage_options=options)
    stop = threading.Event()

    def churn():
        while not stop.is_set():
            busy.prefetch(ids)
            busy.read_batch(ids[:2], frames=slice(0, 2))
            time.sleep(0.001)  # let the fork in

    worker = threading.Thread(target=churn, daemon=True)
    worker.start()
    children = []
    try:
        for n in range(40):
            inherited = GulpDirectory(url, storage_options=options)
            inherited.prefetch(ids[n % 2 :: 2])
            inherited.read_batch(ids[:3], frames=slice(0, 1))
            pid = os.fork()
            if pid == 0:  # the child: drop everything inherited, then read afresh
                code = 1
                try:
                    del inherited
                    import gc

                    gc.collect()
                    fresh = GulpDirectory(url, storage_options=options)
                    code = 0 if np.array_equal(fresh.read(ids[0]), want) else 3
                finally:
                    os._exit(code)
            children.append(pid)
            del inherited
    finally:
        stop.set()
        worker.join()
    deadline = time.monotonic() + 120
    hung = []
    for pid in children:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                assert os.waitstatus_to_exitcode(status) == 0
                break
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                hung.append(pid)
                break
            time.sleep(0.05)
    assert not hung, f"{len(hung)} of {len(children)} forked children hung"


def test_pickled_directory_reopens_with_its_options(dataset, s3_server):
    _, url, ids = dataset
    remote = _open(url, s3_server)
    again = pickle.loads(pickle.dumps(remote))
    np.testing.assert_array_equal(again.read(ids[0]), remote.read(ids[0]))


# -- plain HTTP ------------------------------------------------------------------------------


def test_http_dataset_reads_equal_local_reads(tmp_path, make_frame, http_server):
    local = tmp_path / "ds"
    local.mkdir()
    ids = _write_dataset(local, make_frame)
    server = http_server(tmp_path)
    remote = GulpDirectory(f"{server.url}/ds")
    _same_everything(GulpDirectory(str(local)), remote, ids)


def test_https_dataset_reads_equal_local_reads(tmp_path, make_frame, http_server, monkeypatch):
    """TLS end to end (rustls with ring's cryptography, Cargo.toml says why): a certificate
    the system does not trust is refused with a typed error naming the URL; trusted through
    ``SSL_CERT_FILE``, as users add a private CA, every read equals the local one."""
    local = tmp_path / "ds"
    local.mkdir()
    ids = _write_dataset(local, make_frame)
    server = http_server(tmp_path, tls=True)
    url = f"{server.url}/ds"
    assert url.startswith("https://127.0.0.1:")
    with pytest.raises(RemoteError) as refused:
        GulpDirectory(url)
    assert url in str(refused.value)
    assert "certificate" in str(refused.value).lower()
    monkeypatch.setenv("SSL_CERT_FILE", str(server.certificate))
    _same_everything(GulpDirectory(str(local)), GulpDirectory(url), ids)


def test_jpeg_backend_is_reported():
    assert gulpio_rs.JPEG_BACKEND in ("libjpeg-turbo", "zune-jpeg")


# -- command line -----------------------------------------------------------------------------


def test_cli_reads_urls_and_refuses_remote_changes(dataset, s3_server, monkeypatch, capsys):
    from gulpio_rs.cli import main

    local_dir, url, ids = dataset
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    assert main(["info", url, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["videos"] == len(ids)
    assert main(["check", url, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["videos"] == len(ids)
    assert main(["repair", url, "--apply"]) == 1
    assert "local directories only" in capsys.readouterr().err
    # `gulpio index URL` writes no `.gidx` to the store: the chunk without one (as gulpio2
    # leaves them) is recorded from its `.gmeta` and read through it, as a listing reads it.
    assert main(["index", url]) == 0
    capsys.readouterr()
    remote = GulpDirectory(url)
    assert remote.opened["how"] == "manifest", remote.opened
    _same_everything(GulpDirectory(str(local_dir), manifest="off"), remote, ids)
    assert main(["index", url, "--no-manifest"]) == 1
    assert "local directories only" in capsys.readouterr().err
    assert main(["info", "s3://no-such-bucket-gulpio/x"]) == 1
    assert "no-such-bucket-gulpio" in capsys.readouterr().err
