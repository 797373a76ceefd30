"""Videos of different frame sizes (``--frame-size`` fixes the short side only, so widths
vary) through the datasets and a real DataLoader with 2 workers: one clear error that says
what to pass, a working ``size=``/``crop=``, and ``ragged=True`` for lists; and
``GulpDirectory.read_batch(stack=)``, whose default return type depends on the data."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from test_torch_dataset import frame_numbers, video_number, write_videos  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

from gulpio_rs import GulpDirectory  # noqa: E402
from gulpio_rs.torch import (  # noqa: E402
    GulpImageDataset,
    GulpVideoDataset,
    MixedShapesError,
    gulp_collate,
)

# Short side 16, widths 24, 30 and 20: what --frame-size 16 makes of 3:2, 15:8 and 5:4 videos.
WIDTHS = {1: (16, 30), 4: (16, 20), 6: (16, 30)}
LENGTHS = [6] * 8


@pytest.fixture(scope="module")
def mixed_dir(tmp_path_factory):
    return write_videos(tmp_path_factory.mktemp("mixed"), LENGTHS, sizes=WIDTHS)


def _loader(ds, collate=gulp_collate, workers=2):
    return DataLoader(
        ds,
        batch_size=4,
        num_workers=workers,
        collate_fn=collate,
        multiprocessing_context="fork" if workers else None,
    )


@pytest.mark.parametrize("collate", [gulp_collate, None])
@pytest.mark.parametrize("workers", [0, 2])
def test_the_training_loop_as_written_gets_one_clear_error(mixed_dir, collate, workers):
    # Before: torch's "stack expects each tensor to be equal size" (0 workers) or "Trying to
    # resize storage that is not resizable" (workers), naming neither videos nor a way out.
    ds = GulpVideoDataset(mixed_dir, frames=4, stride=1, offset="random", seed=0, target="v")
    with pytest.raises(MixedShapesError) as err:
        list(_loader(ds, collate, workers))
    text = str(err.value)
    assert "'v0' (4, 3, 16, 24)" in text and "'v1' (4, 3, 16, 30)" in text
    for way in ("size=(h, w)", "crop=", "GulpBucketBatchSampler", "ragged=True"):
        assert way in text
    assert "frames=T" not in text and "colorspace" not in text  # only what differs here


def test_the_error_names_what_differs(tmp_path):
    path = write_videos(tmp_path, [3, 9, 4], gray={2})
    whole = GulpVideoDataset(path, frames=None, target=None)  # every frame: 3 and 9 of them
    with pytest.raises(MixedShapesError, match="frames=T") as err:
        whole.__getitems__([0, 1])
    assert "size=" not in str(err.value)
    gray = GulpVideoDataset(path, frames=2, target=None)
    with pytest.raises(MixedShapesError, match="colorspace='RGB'"):
        gray.__getitems__([0, 2])
    assert GulpVideoDataset(path, frames=2, target=None, colorspace="RGB").__getitems__([0, 2])


def test_a_transform_that_keeps_sizes_different_is_named(mixed_dir):
    v2 = pytest.importorskip("torchvision.transforms.v2")
    ds = GulpVideoDataset(mixed_dir, frames=2, transform=v2.ToDtype(torch.float32), target=None)
    with pytest.raises(MixedShapesError, match="after the transform"):
        ds.__getitems__([0, 1])
    # One that makes them one size is fine (and collated by default_collate).
    same = GulpVideoDataset(
        mixed_dir,
        frames=2,
        transform=v2.Compose([v2.ToDtype(torch.float32), v2.Resize((8, 8), antialias=True)]),
        target=None,
    )
    assert gulp_collate(same.__getitems__([0, 1, 4])).shape == (3, 2, 3, 8, 8)


@pytest.mark.parametrize("crop", [None, "center", "random-resized"])
def test_size_makes_one_batch_tensor_under_two_workers(mixed_dir, crop):
    ds = GulpVideoDataset(
        mixed_dir, frames=3, offset="random", seed=1, size=(16, 24), crop=crop, target="v"
    )
    batches = list(_loader(ds))
    assert [v for _, vs in batches for v in vs.tolist()] == list(range(len(LENGTHS)))
    for clips, vs in batches:
        assert clips.shape == (len(vs), 3, 3, 16, 24)
        for clip, v in zip(clips, vs.tolist(), strict=True):
            assert video_number(clip) == v
            assert frame_numbers(clip) == frame_numbers(ds[v][0])


@pytest.mark.parametrize("workers", [0, 2])
def test_ragged_gives_lists_under_two_workers(mixed_dir, workers):
    ds = GulpVideoDataset(mixed_dir, frames=2, target="v", ragged=True)
    batches = list(_loader(ds, workers=workers))
    seen = []
    for clips, vs in batches:
        assert isinstance(clips, list) and isinstance(vs, torch.Tensor)
        for clip, v in zip(clips, vs.tolist(), strict=True):
            assert clip.shape == (2, 3, *WIDTHS.get(v, (16, 24)))
            assert video_number(clip) == v and frame_numbers(clip) == [2, 3]
            seen.append(v)
    assert seen == list(range(len(LENGTHS)))
    # Always a list, also for a batch whose clips happen to have one shape.
    same = ds.__getitems__([0, 2])
    assert same.stacked is not None and isinstance(gulp_collate(same)[0], list)
    alone = GulpVideoDataset(mixed_dir, frames=2, target=None, ragged=True)
    assert [c.shape[-1] for c in gulp_collate(alone.__getitems__([0, 1]))] == [24, 30]


def test_images_of_different_sizes(mixed_dir):
    ds = GulpImageDataset(mixed_dir, target=None)
    with pytest.raises(MixedShapesError, match="'v1' \\(3, 16, 30\\)"):
        ds.__getitems__([0, 1])
    assert gulp_collate(GulpImageDataset(mixed_dir, target=None, size=12).__getitems__([0, 1]))[
        0
    ].shape == (3, 12, 12)


def test_read_batch_stack_option(mixed_dir):
    gd = GulpDirectory(mixed_dir)
    ids = ["v0", "v1", "v2"]
    default = gd.read_batch(ids, frames=[0])
    assert isinstance(default, list)  # the documented default: a list when shapes differ
    with pytest.raises(ValueError, match="'v1' \\(1, 16, 30, 3\\)") as err:
        gd.read_batch(ids, frames=[0], stack=True)
    assert "size=" in str(err.value)
    stacked = gd.read_batch(ids, frames=[0], size=(16, 24), stack=True)
    assert isinstance(stacked, np.ndarray) and stacked.shape == (3, 1, 16, 24, 3)
    same = gd.read_batch(["v0", "v2"], frames=[0], stack=False)
    assert isinstance(same, list) and [a.shape for a in same] == [(1, 16, 24, 3)] * 2
    np.testing.assert_array_equal(same[1], gd.read("v2", [0]))
    with pytest.raises(ValueError, match="stack"):
        gd.read_batch(ids, stack="yes")
