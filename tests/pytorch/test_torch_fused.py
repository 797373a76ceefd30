"""The PyTorch datasets with crop and resize fused into the decode: our own ``size`` /
``crop`` / ``hflip`` (one draw per clip, a pure function of (seed, epoch, index)), a leading
run of torchvision v2 geometric transforms fused with torchvision's own parameter draws, and
both through a DataLoader."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
v2 = pytest.importorskip("torchvision.transforms.v2")

from torch.utils.data import DataLoader  # noqa: E402

from gulpio_rs import GulpDirectory  # noqa: E402
from gulpio_rs.torch import GulpImageDataset, GulpVideoDataset, gulp_collate  # noqa: E402
from gulpio_rs.torch._geometry import sample_crop, sample_flip  # noqa: E402


def _smooth(h: int, w: int, seed: int) -> np.ndarray:
    """A smooth RGB frame (resampling differences stay small on it)."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    rng = np.random.default_rng(seed)
    a, b, c = rng.uniform(0.02, 0.08, 3)
    img = np.stack(
        [
            128 + 100 * np.sin(a * x + b * y),
            128 + 100 * np.cos(b * x - c * y),
            128 + 100 * np.sin(c * x + a * y + 1),
        ],
        axis=-1,
    )
    return img.clip(0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def gulps(tmp_path_factory):
    """Six 8-frame videos: four 96x160, two 120x90 (portrait-ish), in one directory."""
    root = tmp_path_factory.mktemp("fused")
    gd = GulpDirectory(str(root))
    chunk = next(gd.new_chunks(1))
    with chunk.open("wb"):
        for v in range(6):
            h, w = (96, 160) if v < 4 else (120, 90)
            chunk.append(f"v{v}", {"label": v % 2}, [_smooth(h, w, 10 * v + t) for t in range(8)])
    return str(root)


def _psnr(a, b) -> float:
    err = np.mean((np.asarray(a, np.float64) - np.asarray(b, np.float64)) ** 2)
    return float("inf") if err == 0 else 10 * np.log10(255.0**2 / err)


def test_our_crops_are_one_draw_per_clip_from_seed_epoch_and_index(gulps):
    ds = GulpVideoDataset(
        gulps, frames=4, size=(48, 64), crop="random-resized", hflip=0.5, seed=7, target=None
    )
    ds.set_epoch(3)
    gd = GulpDirectory(gulps)
    for index in range(len(ds)):
        clip = ds[index]
        assert tuple(clip.shape) == (4, 3, 48, 64)
        id_ = ds._id(index)
        h, w, _ = gd.frame_shapes(id_)[0]
        rng = np.random.default_rng([7, 3, index, 1])
        box = sample_crop("random-resized", h, w, (48, 64), rng=rng)
        flip = sample_flip(0.5, rng)
        frames = ds._frames(index, id_)
        # The datasets decode with gulpio2's fast settings by default (fast_decode=True).
        want = gd.read(id_, frames, crop=box, size=(48, 64), flip=flip, fast_decode=True)
        assert torch.equal(clip, torch.from_numpy(want).permute(0, 3, 1, 2))
    # The same again (a resume), another epoch differs.
    again = GulpVideoDataset(
        gulps, frames=4, size=(48, 64), crop="random-resized", hflip=0.5, seed=7, target=None
    )
    again.set_epoch(3)
    assert torch.equal(again[2], ds[2])
    again.set_epoch(4)
    assert not all(torch.equal(again[i], ds[i]) for i in range(len(ds)))


@pytest.mark.parametrize("crop", ["center", "random", None])
def test_fixed_size_crop_modes(gulps, crop):
    ds = GulpVideoDataset(gulps, frames=2, size=64, crop=crop, seed=1, target=None)
    gd = GulpDirectory(gulps)
    for index in (0, 5):
        clip = ds[index]
        assert tuple(clip.shape) == (2, 3, 64, 64)
        if crop == "center":
            # A plain centre crop of the stored frames (no resize): exact.
            id_ = ds._id(index)
            full = gd.read(id_, ds._frames(index, id_), fast_decode=True)
            h, w = full.shape[1:3]
            top, left = round((h - 64) / 2.0), round((w - 64) / 2.0)
            want = torch.from_numpy(full[:, top : top + 64, left : left + 64]).permute(0, 3, 1, 2)
            assert torch.equal(clip, want)


def test_hflip_mirrors_the_clip(gulps):
    kw = dict(frames=3, size=(40, 40), crop="center", seed=2, target=None)
    plain = GulpVideoDataset(gulps, hflip=0.0, **kw)
    always = GulpVideoDataset(gulps, hflip=1.0, **kw)
    assert torch.equal(always[1], plain[1].flip(-1))


def test_batches_stack_clips_of_videos_of_any_size(gulps):
    ds = GulpVideoDataset(gulps, frames=4, size=(32, 48), crop="random-resized", seed=0)
    loader = DataLoader(ds, batch_size=6, num_workers=2, collate_fn=gulp_collate)
    clips, labels = next(iter(loader))
    assert tuple(clips.shape) == (6, 4, 3, 32, 48)
    assert labels.tolist() == [0, 1, 0, 1, 0, 1]
    # Workers give what the main process gives.
    for i in range(6):
        assert torch.equal(clips[i], ds[i][0])


def test_a_torchvision_prefix_is_fused_with_torchvision_draws(gulps):
    transform = v2.Compose(
        [
            v2.RandomResizedCrop((40, 56), antialias=True),
            v2.RandomHorizontalFlip(),
            v2.ToDtype(torch.float32, scale=True),
        ]
    )
    fused = GulpVideoDataset(gulps, frames=4, transform=transform, target=None)
    assert len(fused._fused) == 2 and fused._rest is not None
    plain = GulpVideoDataset(gulps, frames=4, target=None)
    for index in range(len(fused)):
        torch.manual_seed(100 + index)
        got = fused[index]
        after_fused = torch.rand(1)
        torch.manual_seed(100 + index)
        want = transform(plain[index])
        after_plain = torch.rand(1)
        # The same parameters were drawn (the RNG ends in the same state), and the pixels are
        # those of crop + antialiased resize done apart.
        assert torch.equal(after_fused, after_plain)
        assert got.shape == want.shape and got.dtype == want.dtype
        assert _psnr(got * 255, want * 255) > 30


def test_a_clip_the_prefix_cannot_fuse_gets_the_whole_transform(gulps):
    # A CenterCrop larger than the 120x90 videos: torchvision pads them, which a crop box
    # cannot; those clips are decoded whole and transformed as torchvision does.
    transform = v2.Compose([v2.CenterCrop(100)])
    ds = GulpVideoDataset(gulps, frames=2, transform=transform, target=None)
    plain = GulpVideoDataset(gulps, frames=2, target=None)
    for index in range(len(ds)):
        got = ds[index]
        assert torch.equal(got, transform(plain[index]))
    batch = ds.__getitems__(list(range(len(ds))))
    assert all(tuple(c.shape) == (2, 3, 100, 100) for c in batch)


def test_images_too(gulps):
    ds = GulpImageDataset(gulps, size=(24, 24), crop="random-resized", seed=3, target=None)
    img = ds[4]
    assert tuple(img.shape) == (3, 24, 24)
    batch = gulp_collate(ds.__getitems__([0, 4]))
    assert tuple(batch.shape) == (2, 3, 24, 24)


def test_bad_geometry_arguments(gulps):
    with pytest.raises(ValueError, match="needs size"):
        GulpVideoDataset(gulps, frames=2, crop="random-resized")
    with pytest.raises(ValueError, match="crop must be"):
        GulpVideoDataset(gulps, frames=2, size=32, crop="middle")
    with pytest.raises(ValueError, match="hflip"):
        GulpVideoDataset(gulps, frames=2, size=32, hflip=1.5)
    with pytest.raises(ValueError, match="scale"):
        GulpVideoDataset(gulps, frames=2, size=32, crop="random-resized", scale=(0.5, 0.1))
    with pytest.raises(ValueError, match="size"):
        GulpVideoDataset(gulps, frames=2, size=(0, 32))
