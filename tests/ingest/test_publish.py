"""The one write path of every ingest (``ingest.publish``): a chunk and its record, what a
rerun and a retried task learn from them, and the upload of a staged chunk."""

from __future__ import annotations

import json
import os

import pytest
from helpers import ListAdapter, synthetic_frame

from gulpio_rs import GulpDirectory
from gulpio_rs._encode_options import EncodeOptions
from gulpio_rs.ingest import IngestError
from gulpio_rs.ingest.encoder import FrameEncoder
from gulpio_rs.ingest.publish import (
    earlier_attempt,
    finished,
    publish_chunk,
    record_path,
    upload_chunk,
)


def _video(id_, n=2, seed=0):
    return {
        "id": id_,
        "meta": {"n": n},
        "frames": [synthetic_frame(16, 24, seed=seed + i) for i in range(n)],
    }


def _publish(folder, number, items, **kw):
    os.makedirs(os.path.join(folder, ".gulpio-ingest"), exist_ok=True)
    with FrameEncoder(EncodeOptions()) as encoder:
        return publish_chunk(ListAdapter(items), str(folder), number, encoder=encoder, **kw)


def test_a_published_chunk_has_its_record_and_is_finished(tmp_path):
    items = [
        _video("a"),
        {"id": "b", "meta": {}, "frames": [], "error": "unreadable"},
        _video("c", 3),
    ]
    result = _publish(tmp_path, 4, items)
    assert result.published and (result.videos, result.frames) == (2, 5)
    with open(record_path(str(tmp_path), 4)) as f:
        assert json.load(f)["failures"] == [["b", "unreadable"]]
    assert sorted(GulpDirectory(tmp_path).keys()) == ["a", "c"]
    done = finished(str(tmp_path), 4)
    assert done.resumed and (done.videos, done.frames, done.bytes) == (2, 5, result.bytes)
    assert done.failures == [("b", "unreadable")]
    # A retried task's view of it: written by this run, and only if it holds the same videos.
    again = earlier_attempt(str(tmp_path), 4, ["a", "b", "c"])
    assert not again.resumed and again.videos == 2
    with pytest.raises(IngestError, match="already published with other videos"):
        earlier_attempt(str(tmp_path), 4, ["a", "x"])
    assert earlier_attempt(str(tmp_path), 5) is None and finished(str(tmp_path), 5) is None


def test_a_chunk_whose_videos_all_failed_is_recorded_not_published(tmp_path):
    items = [{"id": "b", "meta": {}, "frames": [], "error": "unreadable"}]
    result = _publish(tmp_path, 0, items)
    assert not result.published
    assert not [n for n in os.listdir(tmp_path) if n.endswith((".gulp", ".gmeta"))]
    done = finished(str(tmp_path), 0)
    assert done is not None and done.resumed and not done.published
    assert done.failures == [("b", "unreadable")]


def test_a_refused_chunk_leaves_neither_chunk_nor_record(tmp_path):
    def refuse(result, ids):
        raise IngestError(f"refused {sorted(ids)}")

    with pytest.raises(IngestError, match=r"refused \['a'\]"):
        _publish(tmp_path, 0, [_video("a")], check=refuse)
    assert os.listdir(tmp_path / ".gulpio-ingest") == []
    assert not [n for n in os.listdir(tmp_path) if not n.startswith(".gulpio-ingest")]


class _Remote:
    """Stands in for the ``GulpDirectory`` of a dataset URL: what ``upload_chunk`` uses."""

    output_dir = "s3://bucket/gulps"

    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.native = self

    def read_file(self, name):
        return self.files.get(name)

    def upload_chunk(self, data, meta, number):
        for path in (data, meta):
            with open(path, "rb") as f:
                self.files[os.path.basename(path)] = f.read()


def test_a_chunk_published_with_a_remote_is_uploaded_once(tmp_path):
    remote = _Remote()
    result = _publish(tmp_path, 2, [_video("a")], record=False, remote=remote)
    assert result.published and set(remote.files) == {"data_2.gulp", "meta_2.gmeta"}
    assert not os.path.exists(record_path(str(tmp_path), 2))
    # Uploaded already with the same .gmeta: done, nothing sent again.
    remote.upload_chunk = lambda *a: pytest.fail("uploaded twice")
    assert upload_chunk(remote, str(tmp_path), 2)
    # Nothing published under a number: nothing to upload.
    assert not upload_chunk(remote, str(tmp_path), 3)
    # The number taken remotely by other content: refused, naming both places.
    remote.files["meta_2.gmeta"] = b"[]"
    with pytest.raises(IngestError, match="s3://bucket/gulps: chunk 2 already exists"):
        upload_chunk(remote, str(tmp_path), 2)
