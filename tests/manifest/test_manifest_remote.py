"""Writers of a dataset with a manifest on an object store commit before their `.gmeta`
(docs/FORMAT.md §7.6): create-only `PUT`s of `_gulpio/log/{v}.glog` give concurrent writers
distinct versions, and the manifest read back names every chunk they published."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
from helpers import reopen_while_writing, upload_tree

from gulpio_rs import GulpChunk, GulpDirectory, _native
from gulpio_rs.cli import main


def _download_tree(s3_server, bucket: str, prefix: str, folder: Path) -> list[str]:
    client = s3_server.client()
    keys = s3_server.keys(bucket, prefix + "/")
    for key in keys:
        target = folder / key[len(prefix) + 1 :]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(client.get_object(Bucket=bucket, Key=key)["Body"].read())
    return keys


def test_remote_writers_commit_every_chunk_they_publish(tmp_path, s3_server, fault_proxy, capsys):
    frame = np.full((16, 24, 3), 90, np.uint8)
    local = tmp_path / "local"
    local.mkdir()
    chunk = GulpChunk(local / "data_0.gulp", local / "meta_0.gmeta")
    with chunk.open("wb"):
        for v in range(3):
            chunk.append(f"base{v}", {}, [frame])
    assert main(["index", str(local)]) == 0
    capsys.readouterr()
    bucket = s3_server.make_bucket()
    upload_tree(s3_server, local, bucket, "ds")
    # s3s-fs checks If-None-Match and then writes; the proxy makes the two one step, as real
    # object stores do (tests/reliability/test_concurrent_writers.py).
    proxy = fault_proxy(s3_server.endpoint, atomic_conditional_puts=True)
    options = s3_server.storage_options(endpoint=proxy.url)
    url = f"s3://{bucket}/ds"
    errors: list[BaseException] = []

    def writer(t: int) -> None:
        try:
            for i in range(5):
                (new,) = GulpDirectory(url, storage_options=options).new_chunks(1)
                with new.open("wb"):
                    new.append(f"w{t}-{i}", {}, [frame])
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    mirror = tmp_path / "mirror"
    keys = _download_tree(s3_server, bucket, "ds", mirror)
    # Nested keys, not one escaped name.
    assert f"ds/_gulpio/log/{10:020}.glog" in keys
    st = _native.manifest_status(str(mirror))
    assert st is not None
    assert st["pending"] == st["unrecorded"] == st["mismatched"] == []
    assert (st["version"], st["chunks"], st["videos"]) == (10, 11, 13)
    gd = GulpDirectory(url, storage_options=s3_server.storage_options())
    assert len(gd) == 13  # the manifest's folder is a common prefix, not chunk files


REMOTE_WRITER = """
import json, sys
import numpy as np
from gulpio_rs import GulpDirectory

url, options, tag, per = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4])
frame = np.full((16, 24, 3), 40, np.uint8)
for i in range(per):
    (chunk,) = GulpDirectory(url, storage_options=options).new_chunks(1)
    with chunk.open("wb"):
        chunk.append(f"{tag}-{i}", {}, [frame])
    print(f"{tag}-{i}", flush=True)
"""


def test_two_processes_on_an_object_store_lose_no_chunk_while_readers_reopen(
    tmp_path, s3_server, fault_proxy
):
    """The issue's remote case: two writer processes create one dataset on the S3 server
    (the first chunk of each races to create the manifest) while a reader reopens it; every
    acknowledged video is in the final manifest, and no open falls back or shrinks."""
    import json
    import subprocess
    import sys

    bucket = s3_server.make_bucket()
    proxy = fault_proxy(s3_server.endpoint, atomic_conditional_puts=True)
    options = s3_server.storage_options(endpoint=proxy.url)
    url = f"s3://{bucket}/ds"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", REMOTE_WRITER, url, json.dumps(options), tag, "6"],
            stdout=subprocess.PIPE,
            text=True,
        )
        for tag in ("p", "q")
    ]
    acknowledged = reopen_while_writing(procs, lambda: GulpDirectory(url, storage_options=options))
    assert len(acknowledged) == 12
    gd = GulpDirectory(url, storage_options=options, manifest="verify")
    assert gd.opened["how"] == "manifest"
    assert sorted(gd.keys()) == sorted(acknowledged)
    # One genesis for both: version 12 is the twelfth chunk's commit.
    assert gd.opened["version"] == 12
