"""Known-bad samples: ``gulpio check --bad-list`` writes the ids that fail, the datasets'
``exclude=`` leaves them out the same way in every process (so resume, also elastic, stays
exact), and ``on_error="skip"`` skips reads that fail at training time, logged and counted."""

from __future__ import annotations

import json
import logging
import os
import pickle

import pytest

torch = pytest.importorskip("torch")

from test_torch_dataset import video_number, write_videos  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

from gulpio_rs.cli import main  # noqa: E402
from gulpio_rs.errors import CorruptDataError  # noqa: E402
from gulpio_rs.torch import (  # noqa: E402
    GulpDistributedSampler,
    GulpMixture,
    GulpVideoDataset,
    gulp_collate,
)

LENGTHS = [3] * 10
BAD = ["v2", "v7"]


def _damage(path, video: str, frame: int = 1) -> None:
    """Flips a bit inside one stored frame of ``video`` (its CRC no longer matches)."""
    number = int(video[1:]) // 4  # write_videos puts 4 videos in a chunk
    with open(os.path.join(path, f"meta_{number}.gmeta")) as f:
        where = json.load(f)[video]["frame_info"][frame][0]
    data = os.path.join(path, f"data_{number}.gulp")
    with open(data, "r+b") as f:
        f.seek(where + 30)
        byte = f.read(1)[0]
        f.seek(where + 30)
        f.write(bytes([byte ^ 0x20]))


@pytest.fixture
def damaged(tmp_path):
    path = write_videos(tmp_path / "ds", LENGTHS)
    for video in BAD:
        _damage(path, video)
    return path


def test_check_writes_the_failing_ids(damaged, tmp_path, capsys):
    bad_list = tmp_path / "bad.txt"
    assert main(["check", damaged, "--bad-list", str(bad_list)]) == 1
    assert bad_list.read_text() == "v2\nv7\n"
    assert "2 failing video ids written to" in capsys.readouterr().out
    # An intact dataset gives an empty list; the file is replaced, and a symlink in its place
    # is replaced rather than written through.
    clean = write_videos(tmp_path / "clean", [2, 2])
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep me\n")
    bad_list.unlink()
    bad_list.symlink_to(target)
    assert main(["check", clean, "--bad-list", str(bad_list), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["bad_ids"] == []
    assert bad_list.read_text() == "" and not bad_list.is_symlink()
    assert target.read_text() == "keep me\n"


def test_exclude_leaves_the_ids_out_in_order(damaged, tmp_path):
    bad_list = tmp_path / "bad.txt"
    bad_list.write_text("# from gulpio check\nv2\n\nv7\nnot-in-this-dataset\n")
    for exclude in (str(bad_list), bad_list, BAD, set(BAD)):
        ds = GulpVideoDataset(damaged, frames=None, target="v", exclude=exclude)
        assert len(ds) == 8
        assert [ds[i][1] for i in range(8)] == [0, 1, 3, 4, 5, 6, 8, 9]
    picked = GulpVideoDataset(damaged, target="v", ids=["v9", "v2", "v0"], exclude=BAD)
    assert len(picked) == 2 and [picked[i][1] for i in range(2)] == [9, 0]
    # It pickles as the excluded ids, not the kept ones, and filters again in each process.
    ds = GulpVideoDataset(damaged, target="v", exclude=BAD)
    again = pickle.loads(pickle.dumps(ds))
    assert len(again) == 8 and again[2][1] == 3
    with pytest.raises(FileNotFoundError):
        GulpVideoDataset(damaged, exclude=str(tmp_path / "missing.txt"))
    with pytest.raises(TypeError, match="exclude"):
        GulpVideoDataset(damaged, exclude=7)


def test_the_check_list_makes_a_dataset_that_reads_and_resumes_exactly(damaged, tmp_path):
    bad_list = tmp_path / "bad.txt"
    main(["check", damaged, "--bad-list", str(bad_list)])

    def run(world, rank, state=None, stop=None):
        ds = GulpVideoDataset(damaged, frames=None, target="v", exclude=str(bad_list))
        sampler = GulpDistributedSampler(ds, world, rank, seed=3)
        if state is not None:
            sampler.load_state_dict(state)
        loader = DataLoader(
            ds,
            batch_size=2,
            sampler=sampler,
            num_workers=2,
            multiprocessing_context="fork",
            collate_fn=gulp_collate,
        )
        got = []
        for n, (clips, vs) in enumerate(loader):
            if n == stop:
                break
            assert [video_number(c) for c in clips] == vs.tolist()
            got += vs.tolist()
        return got, sampler.state_dict(consumed=2 * stop) if stop else None

    whole = run(1, 0)[0]
    assert sorted(whole) == [0, 1, 3, 4, 5, 6, 8, 9]  # nothing fails
    first, state = run(2, 0, stop=1)
    second, _ = run(2, 1, stop=1)
    assert sorted(first + second) == sorted(whole[:4])  # the order's first 4 positions
    rest = [v for r in range(3) for v in run(3, r, state=state)[0]]
    assert sorted(first + second + rest) == sorted(whole + whole[:2])  # 4 left, 3 ranks: 2 pad


def test_reads_that_fail_are_raised_by_default(damaged):
    ds = GulpVideoDataset(damaged, frames=None, target="v")
    with pytest.raises(CorruptDataError, match="v2"):
        ds.__getitems__([1, 2, 3])


def test_skip_leaves_them_out_logs_and_counts(damaged, caplog):
    ds = GulpVideoDataset(damaged, frames=None, target="v", on_error="skip")
    with caplog.at_level(logging.WARNING, logger="gulpio_rs.torch"):
        batch = ds.__getitems__([1, 2, 3, 7])
    clips, vs = gulp_collate(batch)
    assert vs.tolist() == [1, 3] and clips.shape[0] == 2 and batch.kept == [0, 2]
    assert [video_number(c) for c in clips] == [1, 3]
    assert [i for i, _ in ds.skipped] == ["v2", "v7"] and ds.skipped_count == 2
    assert "skipped video 'v2'" in caplog.text and "CRC" in caplog.text
    with pytest.raises(ValueError, match="every sample of this batch failed"):
        ds.__getitems__([2, 7])
    with pytest.raises(CorruptDataError):
        ds[2]  # a single item has nothing to skip to
    with pytest.raises(ValueError, match="on_error"):
        GulpVideoDataset(damaged, on_error="ignore")


def test_skipped_samples_of_two_workers_are_counted_in_the_main_process(damaged):
    ds = GulpVideoDataset(damaged, frames=None, target="v", on_error="skip")
    sampler = GulpDistributedSampler(ds, 1, 0, seed=1)
    loader = DataLoader(
        ds,
        batch_size=3,
        sampler=sampler,
        num_workers=2,
        multiprocessing_context="fork",
        collate_fn=gulp_collate,
    )
    seen = [v for _, vs in loader for v in vs.tolist()]
    assert sorted(seen) == [0, 1, 3, 4, 5, 6, 8, 9]
    assert ds.skipped_count == 2
    assert sampler.state_dict()["consumed"] == 10  # the order is not changed by a skip
    # The next epoch counts on.
    list(loader)
    assert ds.skipped_count == 4


def test_a_mixture_skips_inside_one_source(damaged, tmp_path):
    good = write_videos(tmp_path / "good", [3] * 4)
    sources = [
        GulpVideoDataset(damaged, frames=2, target="v", on_error="skip"),
        GulpVideoDataset(good, frames=2, target="v"),
    ]
    mix = GulpMixture(sources, [1, 1], length=14, seed=0)
    everything = list(range(14))
    clips, vs, which = gulp_collate(mix.__getitems__(everything))
    src, samples, _ = mix.locate(everything)
    expected = [
        (int(s), int(j)) for s, j in zip(src, samples, strict=True) if not (s == 0 and j in (2, 7))
    ]
    assert list(zip(which.tolist(), vs.tolist(), strict=True)) == expected
    assert [video_number(c) for c in clips] == [v for _, v in expected]
