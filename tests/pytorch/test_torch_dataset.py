"""GulpVideoDataset / GulpImageDataset / gulp_collate: which frames, layouts, targets,
batched decoding, pickling. DataLoader runs are in test_torch_loader.py."""

from __future__ import annotations

import json
import os
import pickle
from importlib import resources

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch.utils.data import default_collate  # noqa: E402

from gulpio_rs import GulpChunk, GulpDirectory  # noqa: E402
from gulpio_rs.torch import (  # noqa: E402
    GulpImageDataset,
    GulpVideoDataset,
    gulp_collate,
    sample_frame_indices,
)

# Every frame says which video and frame it is: green = 8 * frame, blue = 8 * (video % 32)
# (flat colours survive JPEG within a level or two).
LENGTHS = [1, 3, 5, 8, 12, 16, 20, 7, 9, 30]


def frame_of(video: int, k: int, height: int = 16, width: int = 24, gray: bool = False):
    if gray:
        return np.full((height, width), 8 * k, np.uint8)
    f = np.empty((height, width, 3), np.uint8)
    f[..., 0], f[..., 1], f[..., 2] = 128, 8 * k, 8 * (video % 32)
    return f


def write_videos(path, lengths=LENGTHS, per_chunk=4, gray=(), sizes=None, labels=True):
    """Videos ``v0, v1, ...`` with ``lengths[v]`` frames, ``per_chunk`` videos per chunk."""
    os.makedirs(path, exist_ok=True)
    sizes = sizes or {}
    for c, first in enumerate(range(0, len(lengths), per_chunk)):
        chunk = GulpChunk(
            os.path.join(path, f"data_{c}.gulp"), os.path.join(path, f"meta_{c}.gmeta")
        )
        with chunk.open("wb"):
            for v in range(first, min(first + per_chunk, len(lengths))):
                h, w = sizes.get(v, (16, 24))
                frames = [frame_of(v, k, h, w, gray=v in gray) for k in range(lengths[v])]
                meta = {"label": f"class_{v % 3}", "idx": v % 3, "v": v} if labels else {}
                chunk.append(f"v{v}", meta, frames)
    return str(path)


def frame_numbers(clip, layout="TCHW"):
    """The frame indices a clip holds, read back from the green channel."""
    thwc = {"TCHW": clip.permute(0, 2, 3, 1), "THWC": clip, "CTHW": clip.permute(1, 2, 3, 0)}
    green = thwc[layout][..., 1].float().mean(dim=(1, 2))
    return [round(g / 8) for g in green.tolist()]


def video_number(clip, layout="TCHW"):
    thwc = {"TCHW": clip.permute(0, 2, 3, 1), "THWC": clip}[layout]
    return round(thwc[..., 2].float().mean().item() / 8)


@pytest.fixture(scope="module")
def gulp_dir(tmp_path_factory):
    return write_videos(tmp_path_factory.mktemp("videos"))


# -- frames and layouts -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        dict(frames=None),
        dict(frames=None, stride=3),
        dict(frames=4),
        dict(frames=4, stride=2),
        dict(frames=8, stride=4),
        dict(num_segments=5),
    ],
)
def test_clips_hold_the_sampled_frames(gulp_dir, options):
    ds = GulpVideoDataset(gulp_dir, **options, target="v")
    assert len(ds) == len(LENGTHS)
    for i in range(len(ds)):
        clip, v = ds[i]
        assert v == i
        expected = sample_frame_indices(LENGTHS[v], **options)
        assert clip.dtype == torch.uint8
        assert clip.shape == (len(expected), 3, 16, 24)
        assert frame_numbers(clip) == expected
        assert video_number(clip) == v


def test_short_videos_loop(gulp_dir):
    ds = GulpVideoDataset(gulp_dir, frames=8, target=None)
    assert frame_numbers(ds[1]) == [0, 1, 2, 0, 1, 2, 0, 1]  # 3 frames
    assert frame_numbers(ds[0]) == [0] * 8  # 1 frame


@pytest.mark.parametrize(
    "layout, shape", [("TCHW", (4, 3, 16, 24)), ("THWC", (4, 16, 24, 3)), ("CTHW", (3, 4, 16, 24))]
)
def test_layouts_are_views_of_the_decoded_array(gulp_dir, layout, shape):
    ds = GulpVideoDataset(gulp_dir, frames=4, layout=layout, target=None)
    clip = ds[5]
    assert clip.shape == shape
    # A permutation of the decoder's contiguous (T, H, W, C) buffer, not a copy.
    to_thwc = {"TCHW": (0, 2, 3, 1), "THWC": (0, 1, 2, 3), "CTHW": (1, 2, 3, 0)}[layout]
    assert clip.permute(to_thwc).is_contiguous()
    batch = ds.__getitems__([5, 6])
    assert batch[0].shape == shape and batch[0].permute(to_thwc).is_contiguous()
    assert batch[0].untyped_storage().data_ptr() == batch[1].untyped_storage().data_ptr()


def test_grayscale_and_colorspace(tmp_path):
    path = write_videos(tmp_path, [4, 4], gray={0, 1})
    assert GulpVideoDataset(path, frames=2, target=None)[0].shape == (2, 1, 16, 24)
    rgb = GulpVideoDataset(path, frames=2, target=None, colorspace="RGB")
    assert rgb[0].shape == (2, 3, 16, 24)
    assert rgb.__getitems__([0, 1]).stacked.shape == (2, 2, 3, 16, 24)


# -- random offsets ---------------------------------------------------------------------------


def test_random_offsets_with_a_seed_are_a_pure_function_of_seed_epoch_index(gulp_dir):
    def clips(ds, indices):
        return [frame_numbers(ds[i]) for i in indices]

    a = GulpVideoDataset(gulp_dir, frames=4, offset="random", seed=3, target=None)
    b = GulpVideoDataset(gulp_dir, frames=4, offset="random", seed=3, target=None)
    everything = list(range(len(a)))
    first = clips(a, everything)
    assert clips(b, everything[::-1]) == first[::-1]  # order and process history don't matter
    assert [frame_numbers(c) for c in b.__getitems__(everything)] == first
    a.set_epoch(1)
    epochs = [first, clips(a, everything)]
    a.set_epoch(2)
    epochs.append(clips(a, everything))
    assert epochs[0] != epochs[1] != epochs[2]
    # Videos long enough to move (the 30-frame v9 has 27 starts) start at different frames.
    assert len({e[9][0] for e in epochs}) > 1
    for epoch in epochs:
        for v, got in enumerate(epoch):
            if LENGTHS[v] >= 4:
                assert got == list(range(got[0], got[0] + 4))


def test_random_offsets_without_a_seed_vary_between_epochs(gulp_dir):
    torch.manual_seed(0)
    ds = GulpVideoDataset(gulp_dir, num_segments=4, offset="random", target=None)
    draws = [frame_numbers(ds[9]) for _ in range(20)]
    assert len({tuple(d) for d in draws}) > 10
    for d in draws:  # one frame from each quarter of the 30 frames
        assert all(i * 30 // 4 <= f <= (i + 1) * 30 // 4 for i, f in enumerate(d))
    torch.manual_seed(0)
    again = GulpVideoDataset(gulp_dir, num_segments=4, offset="random", target=None)
    assert [frame_numbers(again[9]) for _ in range(20)] == draws


# -- targets ----------------------------------------------------------------------------------


def test_targets(gulp_dir, tmp_path):
    assert GulpVideoDataset(gulp_dir, frames=1)[4][1] == "class_1"  # no label2idx.json
    assert GulpVideoDataset(gulp_dir, frames=1, target="idx")[4][1] == 1
    assert GulpVideoDataset(gulp_dir, frames=1, target=lambda m: m["v"] * 10)[4][1] == 40
    clip = GulpVideoDataset(gulp_dir, frames=1, target=None)[4]
    assert isinstance(clip, torch.Tensor)
    with pytest.raises(KeyError, match="nope"):
        GulpVideoDataset(gulp_dir, frames=1, target="nope")[0]

    labelled = write_videos(tmp_path / "labelled", [2, 2, 2, 2])
    with open(os.path.join(labelled, "label2idx.json"), "w") as f:
        json.dump({"class_0": 7, "class_1": 8, "class_2": 9}, f)
    ds = GulpVideoDataset(labelled, frames=1)
    assert [ds[i][1] for i in range(4)] == [7, 8, 9, 7]
    clips, targets = gulp_collate(ds.__getitems__([0, 1, 2]))
    assert targets.tolist() == [7, 8, 9] and targets.dtype == torch.int64


def test_ids_select_and_order_videos(gulp_dir):
    ds = GulpVideoDataset(gulp_dir, frames=2, target="v", ids=["v7", "v2", "v9"])
    assert len(ds) == 3
    assert [ds[i][1] for i in range(3)] == [7, 2, 9]
    assert ds[-1][1] == 9
    with pytest.raises(IndexError):
        ds[3]
    with pytest.raises(KeyError, match="v99"):
        GulpVideoDataset(gulp_dir, ids=["v1", "v99"])


# -- batches ----------------------------------------------------------------------------------


def test_getitems_matches_getitem_in_one_decode_call(gulp_dir, monkeypatch):
    ds = GulpVideoDataset(gulp_dir, frames=4, stride=2, target="idx")
    indices = [9, 0, 3, 3, 5]
    one_by_one = [ds[i] for i in indices]
    calls = []
    real = GulpDirectory.read_batch

    def counting(self, ids, frames=None, **kw):
        calls.append(list(ids))
        return real(self, ids, frames, **kw)

    monkeypatch.setattr(GulpDirectory, "read_batch", counting)
    batch = ds.__getitems__(indices)
    assert calls == [["v9", "v0", "v3", "v3", "v5"]]
    assert len(batch) == len(indices)
    for (clip, target), (clip1, target1) in zip(batch, one_by_one, strict=True):
        assert torch.equal(clip, clip1) and target == target1


def test_gulp_collate_returns_the_decoded_batch_without_copying(gulp_dir):
    ds = GulpVideoDataset(gulp_dir, frames=4, target="idx")
    samples = ds.__getitems__([1, 2, 3])
    clips, targets = gulp_collate(samples)
    assert clips.data_ptr() == samples[0][0].data_ptr()
    reference_clips, reference_targets = default_collate(list(samples))
    assert torch.equal(clips, reference_clips) and torch.equal(targets, reference_targets)
    assert clips.shape == (3, 4, 3, 16, 24)
    # Without targets, the batch is the clips alone, as default_collate gives.
    alone = GulpVideoDataset(gulp_dir, frames=4, target=None).__getitems__([1, 2])
    assert torch.equal(gulp_collate(alone), default_collate(list(alone)))
    # Anything else goes to default_collate.
    assert gulp_collate([(torch.zeros(2), 1), (torch.ones(2), 2)])[1].tolist() == [1, 2]


def test_videos_of_different_sizes_come_as_separate_clips_when_ragged(tmp_path):
    path = write_videos(tmp_path, [4, 4, 4], sizes={1: (8, 8)})
    ds = GulpVideoDataset(path, frames=2, target="v", ragged=True)
    batch = ds.__getitems__([0, 1, 2])
    assert batch.stacked is None
    assert [c.shape for c, _ in batch] == [(2, 3, 16, 24), (2, 3, 8, 8), (2, 3, 16, 24)]
    assert [frame_numbers(c) for c, _ in batch] == [[1, 2]] * 3


def test_transform_applies_to_each_clip(gulp_dir):
    v2 = pytest.importorskip("torchvision.transforms.v2")
    transform = v2.Compose([v2.CenterCrop(8), v2.ToDtype(torch.float32, scale=True)])
    ds = GulpVideoDataset(gulp_dir, frames=4, transform=transform, target="idx")
    clip, _ = ds[6]
    assert clip.shape == (4, 3, 8, 8) and clip.dtype == torch.float32
    assert clip[:, 0].mean().item() == pytest.approx(128 / 255, abs=0.02)
    samples = ds.__getitems__([6, 7])
    assert samples.stacked is None
    clips, targets = gulp_collate(samples)
    assert clips.shape == (2, 4, 3, 8, 8) and targets.tolist() == [0, 1]


def test_real_jpegs(tmp_path):
    """The Big Buck Bunny clips shipped with the package (libjpeg 4:2:0 frames)."""
    sample = resources.files("gulpio_rs") / "data" / "bbb"
    chunk = GulpChunk(tmp_path / "data_0.gulp", tmp_path / "meta_0.gmeta")
    with chunk.open("wb"):
        for n in range(2):
            folder = sample / f"clip_{n:02d}"
            jpegs = [(folder / name).read_bytes() for name in sorted(os.listdir(folder))]
            chunk.append(f"clip_{n}", {"label": n}, jpegs)
    gd = GulpDirectory(tmp_path)
    ds = GulpVideoDataset(tmp_path, frames=8, stride=3)
    clips, labels = gulp_collate(ds.__getitems__([0, 1]))
    assert labels.tolist() == [0, 1]
    for n in range(2):
        frames = sample_frame_indices(gd.num_frames(f"clip_{n}"), 8, stride=3)
        # The datasets decode with gulpio2's fast settings by default (fast_decode=True).
        expected = gd.read(f"clip_{n}", frames, fast_decode=True)
        assert torch.equal(clips[n], torch.from_numpy(expected).permute(0, 3, 1, 2))


# -- images -----------------------------------------------------------------------------------


def test_image_dataset(tmp_path):
    path = write_videos(tmp_path, [1, 1, 1, 3])
    ds = GulpImageDataset(path, target="v")
    image, v = ds[2]
    assert image.shape == (3, 16, 24) and v == 2
    assert round(image[2].float().mean().item() / 8) == 2
    hwc = GulpImageDataset(path, layout="HWC", frame=-1, target=None)
    assert hwc[3].shape == (16, 24, 3)
    assert round(hwc[3][..., 1].float().mean().item() / 8) == 2  # the last of 3 frames
    images, targets = gulp_collate(ds.__getitems__([0, 1, 2, 3]))
    assert images.shape == (4, 3, 16, 24) and targets.tolist() == [0, 1, 2, 3]
    reference = default_collate([ds[i] for i in range(4)])
    assert torch.equal(images, reference[0])
    with pytest.raises(IndexError):
        GulpImageDataset(path, frame=1)[0]


# -- pickling and errors ----------------------------------------------------------------------


def test_pickles_as_path_and_options(gulp_dir, tmp_path):
    big = write_videos(tmp_path / "big", [2] * 60, per_chunk=20)
    for path in (gulp_dir, big):
        ds = GulpVideoDataset(path, frames=2, offset="random", seed=1, target="idx")
        ds[0]
        data = pickle.dumps(ds)
        assert len(data) < 1000, len(data)  # no ids, no index, no open directory
        copy = pickle.loads(data)
        assert len(copy) == len(ds)
        assert torch.equal(copy[1][0], ds[1][0])
    subset = GulpVideoDataset(big, frames=2, ids=["v3", "v1"])
    assert len(pickle.loads(pickle.dumps(subset))) == 2


def test_pickles_name_the_public_module(gulp_dir):
    # Whichever file of gulpio_rs/torch defines them, pickles (spawned DataLoader workers,
    # saved datasets) refer to the public names.
    data = pickle.dumps((GulpVideoDataset(gulp_dir, frames=2), GulpImageDataset(gulp_dir)))
    assert b"gulpio_rs.torch\x94" in data
    assert b"gulpio_rs.torch._video" not in data and b"gulpio_rs.torch._image" not in data
    assert pickle.loads(pickle.dumps(gulp_collate)) is gulp_collate


def test_the_closed_options_are_the_choices_literals():
    from typing import get_args

    from gulpio_rs import _choices
    from gulpio_rs.torch import _geometry, _image, _sampling, _video

    assert _sampling.OFFSETS == get_args(_choices.OffsetName)
    assert _geometry.CROP_MODES == (*get_args(_choices.CropMode), None)
    # Every layout has its permutation (mypy checks that there are no others).
    assert set(_video._VIDEO_LAYOUTS) == set(get_args(_choices.VideoLayout))
    assert set(_image._IMAGE_LAYOUTS) == set(get_args(_choices.ImageLayout))


def test_invalid_options(gulp_dir, tmp_path):
    with pytest.raises(ValueError, match="layout"):
        GulpVideoDataset(gulp_dir, layout="NCHW")
    with pytest.raises(ValueError, match="offset"):
        GulpVideoDataset(gulp_dir, offset="middle")
    with pytest.raises(ValueError):
        GulpVideoDataset(gulp_dir, frames=4, num_segments=2)
    with pytest.raises(ValueError):
        GulpVideoDataset(gulp_dir, frames=0)
    with pytest.raises(TypeError):
        GulpVideoDataset(gulp_dir, target=3)
    empty = write_videos(tmp_path / "empty", [2, 0])
    with pytest.raises(ValueError, match="'v1' has no frames"):
        GulpVideoDataset(empty, frames=2)[1]
