"""Ingesting into S3 as a new user does it (issue 27), against the real S3 test server: where
the staging copy is, said and removed after the upload; a rerun that knows what the bucket
holds without it; a missing bucket and missing credentials said in words with what to do;
a mistyped URL that would silently become a local folder."""

from __future__ import annotations

import http.server
import threading
import warnings

import pytest
from helpers import image_folder

from gulpio_rs import GulpDirectory, GulpIngestor
from gulpio_rs.cli import main
from gulpio_rs.errors import GulpWarning, RemoteNotFoundError, RemotePermissionError


def test_staging_is_said_removed_after_upload_and_a_rerun_needs_it_not(
    tmp_path, s3_env, capsys, monkeypatch
):
    src = image_folder(tmp_path / "imgs")
    url = f"s3://{s3_env.make_bucket()}/imgs"
    args = ["ingest", "image-folder", str(src), url, "--img-size", "16",
            "--videos-per-chunk", "2", "--num-workers", "1"]  # fmt: skip
    assert main(args) == 0
    err = capsys.readouterr().err
    staging = tmp_path / "staging"
    assert f"staging chunks in {staging}" in err and "removed once the upload" in err
    assert not any(staging.iterdir()), "the staging copy outlived a complete upload"
    assert len(GulpDirectory(url)) == 6
    # A rerun over more videos: the stored ones are not decoded again (the bucket says
    # which), the new ones get new chunk numbers, label indices stay.
    from gulpio_rs.adapters import items

    decoded = []
    real = items._image_frame
    monkeypatch.setattr(items, "_image_frame", lambda p, s: decoded.append(p) or real(p, s))
    image_folder(src, classes=("emu",))
    assert main(args) == 0
    assert "6 videos were already in the dataset" in capsys.readouterr().out
    assert len(decoded) == 3
    gd = GulpDirectory(url)
    assert len(gd) == 9 and {gd.meta(i)["label"]: gd.meta(i)["idx"] for i in gd.keys()} == {
        "cat": 0,
        "dog": 1,
        "emu": 2,
    }
    assert not any(staging.iterdir())


def test_a_given_staging_dir_keeps_what_was_there(tmp_path, s3_server):
    from gulpio_rs.adapters import ImageFolderAdapter

    src = image_folder(tmp_path / "imgs")
    stage = tmp_path / "mine"
    stage.mkdir()
    (stage / "notes.txt").write_text("keep me")
    url = f"s3://{s3_server.make_bucket()}/imgs"
    GulpIngestor(
        ImageFolderAdapter(src, None, img_size=16), url, 2, 1,
        storage_options=s3_server.storage_options(), staging_dir=stage,
    )()  # fmt: skip
    assert sorted(p.name for p in stage.iterdir()) == ["notes.txt"]


def test_a_missing_bucket_says_bucket_not_found(s3_env, capsys):
    url = "s3://no-such-bucket-here/gulps"
    with pytest.raises(RemoteNotFoundError, match="bucket not found: no-such-bucket-here"):
        GulpDirectory(url)
    assert main(["info", url]) == 1
    assert "bucket not found: no-such-bucket-here" in capsys.readouterr().err


def test_ingest_into_a_missing_bucket_stops_before_decoding(s3_env, tmp_path, capsys, monkeypatch):
    # docs/REMOTE.md, "Writing": the bucket must exist; gulpio-rs never creates one.
    from gulpio_rs.adapters import items

    decoded = []
    monkeypatch.setattr(items, "_image_frame", lambda p, s: decoded.append(p))
    src = image_folder(tmp_path / "imgs")
    args = ["ingest", "image-folder", str(src), "s3://no-such-bucket-here/imgs"]
    assert main(args + ["--num-workers", "1"]) == 1
    assert "bucket not found: no-such-bucket-here" in capsys.readouterr().err
    buckets = [b["Name"] for b in s3_env.client().list_buckets()["Buckets"]]
    assert decoded == [] and "no-such-bucket-here" not in buckets


class _Refuse(http.server.BaseHTTPRequestHandler):
    """An instance-metadata service that refuses everything, as on a machine outside AWS."""

    def _refuse(self):
        self.send_response(403)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_PUT = _refuse

    def log_message(self, *args):
        pass


def test_missing_credentials_say_what_to_set(s3_server, monkeypatch, tmp_path):
    import os

    metadata = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refuse)
    threading.Thread(target=metadata.serve_forever, daemon=True).start()
    try:
        for key in [k for k in os.environ if k.startswith("AWS_")]:
            monkeypatch.delenv(key)
        monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.aws profile either
        monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint)
        monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
        monkeypatch.setenv("AWS_REGION", s3_server.region)
        # Where the client asks for instance credentials when it has none (never the real
        # link-local address from a test).
        monkeypatch.setenv("AWS_METADATA_ENDPOINT", f"http://127.0.0.1:{metadata.server_port}")
        url = f"s3://{s3_server.make_bucket()}/gulps"
        with pytest.raises((RemotePermissionError, OSError)) as info:
            GulpDirectory(url, storage_options={"max_retries": "0"})
        text = str(info.value)
        assert "no credentials were found" in text
        assert "AWS_ACCESS_KEY_ID" in text and "AWS_SECRET_ACCESS_KEY" in text
        assert "AWS_PROFILE" in text and "storage_options" in text
    finally:
        metadata.shutdown()


def test_a_mistyped_url_warns_before_writing_a_local_folder(tmp_path, monkeypatch, capsys):
    from gulpio_rs.adapters import ImageFolderAdapter

    src = image_folder(tmp_path / "imgs", classes=("cat",), per_class=1)
    monkeypatch.chdir(tmp_path)
    assert main(["ingest", "image-folder", str(src), "s3//bucket/x", "--num-workers", "1"]) == 0
    err = capsys.readouterr().err
    assert "looks like a dataset URL" in err and "did you mean s3://bucket/x?" in err
    assert (tmp_path / "s3" / "bucket" / "x").is_dir()  # written as asked, but said
    with pytest.warns(GulpWarning, match=r"did you mean s3://bucket/y\?"):
        GulpIngestor(ImageFolderAdapter(src, None), "s3:/bucket/y", 1, 1)()
    with warnings.catch_warnings():
        warnings.simplefilter("error", GulpWarning)
        GulpIngestor(ImageFolderAdapter(src, None), "plain/folder", 1, 1)()
