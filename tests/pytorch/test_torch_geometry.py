"""Per-clip spatial geometry: our own crop modes (numpy RNG) and fusing a leading prefix of a
torchvision v2 transform into one crop box + output size + flip, checked against torchvision
itself (same parameter draws, same RNG state afterwards, near-identical pixels)."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

from torchvision.transforms import InterpolationMode, v2  # noqa: E402
from torchvision.transforms.v2 import functional as F  # noqa: E402

from gulpio_rs.torch._geometry import (  # noqa: E402
    NeedsPaddingError,
    _random_resized_box,
    plan_fused,
    sample_crop,
    sample_flip,
    split_fusable,
)

H, W = 180, 320


def _video(frames: int = 3, height: int = H, width: int = W) -> torch.Tensor:
    """A smooth uint8 ``T x C x H x W`` video (sums of sinusoids): resampling twice or once
    differ little on it, so PSNR measures geometry, not aliasing."""
    y = torch.arange(height, dtype=torch.float64)[:, None] / height
    x = torch.arange(width, dtype=torch.float64)[None, :] / width
    out = torch.empty((frames, 3, height, width), dtype=torch.float64)
    for t in range(frames):
        for c in range(3):
            k = 1 + t + 2 * c
            out[t, c] = (
                127.5
                + 60 * torch.sin(2 * math.pi * (1.3 * k * x + 0.7 * y) + t)
                + 50 * torch.cos(2 * math.pi * (0.9 * y * (c + 1) - 0.4 * x) + c)
                + 15 * x
            )
    return out.round().clamp(0, 255).to(torch.uint8)


def _aa_weights(start: float, length: float, out: int, limit: int) -> torch.Tensor:
    """``out x limit`` weights resampling ``[start, start + length)`` of an axis of ``limit``
    pixels to ``out`` pixels: antialiased bilinear as torch computes it (triangle filter
    widened by the downscale factor, pixel centres, weights normalised), but with a float
    start/length; only the pixels the box touches contribute."""
    scale = length / out
    support = max(scale, 1.0)
    lo, hi = math.floor(start), min(math.ceil(start + length), limit)
    centres = start + (torch.arange(out, dtype=torch.float64) + 0.5) * scale
    pixels = torch.arange(lo, hi, dtype=torch.float64) + 0.5
    weights = (1 - (pixels[None, :] - centres[:, None]).abs() / support).clamp(min=0)
    weights /= weights.sum(dim=1, keepdim=True)
    full = torch.zeros((out, limit), dtype=torch.float64)
    full[:, lo:hi] = weights
    return full


def _fused_reference(
    video: torch.Tensor, box: tuple[float, float, float, float], size: tuple[int, int], flip: bool
) -> torch.Tensor:
    """What the core is to compute: crop to a float box, resize (antialiased bilinear), flip."""
    top, left, height, width = box
    wy = _aa_weights(top, height, size[0], video.shape[-2])
    wx = _aa_weights(left, width, size[1], video.shape[-1])
    out = wy @ video.to(torch.float64) @ wx.T
    out = out.round().clamp(0, 255).to(torch.uint8)
    return out.flip(-1) if flip else out


def _psnr(a: torch.Tensor, b: torch.Tensor) -> float:
    mse = (a.to(torch.float64) - b.to(torch.float64)).pow(2).mean().item()
    return math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse)


class _TorchDraws:
    """numpy's Generator interface on torch's RNG, drawing as RandomResizedCrop.make_params
    does (float32 uniforms, randint), to compare our algorithm with torchvision's."""

    def uniform(self, low: float, high: float) -> float:
        return torch.empty(1).uniform_(low, high).item()

    def integers(self, low: int, high: int) -> int:
        return int(torch.randint(low, high, size=(1,)).item())


# -- sample_crop ------------------------------------------------------------------------------


def _inside(box, height, width):
    top, left, h, w = box
    return 0 <= top and 0 <= left and h > 0 and w > 0 and top + h <= height and left + w <= width


def test_whole_frame_and_center_crop_match_torchvision():
    assert sample_crop(None, H, W, (112, 112)) == (0.0, 0.0, float(H), float(W))
    video = _video(1)
    for size in [(112, 112), (64, 256), (180, 320), (101, 33), (1, 1)]:
        box = sample_crop("center", H, W, size)
        top, left, h, w = (int(v) for v in box)
        assert (h, w) == size and all(float(v).is_integer() for v in box)
        assert torch.equal(
            F.center_crop(video, list(size)), video[..., top : top + h, left : left + w]
        )
    assert sample_crop("center", H, W, 112) == sample_crop("center", H, W, (112, 112))


def test_center_crop_of_a_small_frame_is_the_largest_centred_box_of_that_ratio():
    # Smaller than size along the height: the whole height, the width by size's ratio.
    assert sample_crop("center", 100, 200, (112, 112)) == (0.0, 50.0, 100.0, 100.0)
    assert sample_crop("center", H, W, (200, 100)) == (0.0, 115.0, 180.0, 90.0)
    # Along the width, and along both (the tighter one rules).
    assert sample_crop("center", 300, 100, (112, 224)) == (125.0, 0.0, 50.0, 100.0)
    assert sample_crop("center", 50, 60, (100, 100)) == (0.0, 5.0, 50.0, 50.0)


def test_random_crop_is_exact_size_uniform_and_reproducible():
    rng = np.random.default_rng(1)
    boxes = [sample_crop("random", 10, 12, (8, 8), rng=rng) for _ in range(500)]
    assert all(_inside(b, 10, 12) and b[2:] == (8.0, 8.0) for b in boxes)
    assert {b[0] for b in boxes} == {0.0, 1.0, 2.0}
    assert {b[1] for b in boxes} == {0.0, 1.0, 2.0, 3.0, 4.0}
    again = np.random.default_rng(1)
    assert boxes[:20] == [sample_crop("random", 10, 12, (8, 8), rng=again) for _ in range(20)]
    # Too small: the largest box of the ratio, at a random place along the free axis only.
    small = [sample_crop("random", 100, 200, (112, 112), rng=rng) for _ in range(200)]
    assert all(b[0] == 0.0 and b[2:] == (100.0, 100.0) and _inside(b, 100, 200) for b in small)
    assert len({b[1] for b in small}) > 50


def test_random_resized_boxes_are_inside_reproducible_and_follow_scale_and_ratio():
    rng = np.random.default_rng(7)
    boxes = [sample_crop("random-resized", H, W, 112, rng=rng) for _ in range(2000)]
    assert all(_inside(b, H, W) and all(float(v).is_integer() for v in b) for b in boxes)
    again = np.random.default_rng(7)
    assert boxes[:50] == [sample_crop("random-resized", H, W, 112, rng=again) for _ in range(50)]
    # Rounding the sides to whole pixels moves area and ratio a little off their bounds.
    areas = np.array([b[2] * b[3] / (H * W) for b in boxes])
    ratios = np.array([b[3] / b[2] for b in boxes])
    assert areas.min() >= 0.08 * 0.95 and areas.max() <= 1.0
    assert ratios.min() >= 0.75 * 0.97 and ratios.max() <= 4 / 3 * 1.03
    assert 0.3 < areas.mean() < 0.7 and len({b[:2] for b in boxes}) > 1000


def test_random_resized_deterministic_cases_and_fallback_match_torchvision():
    rng = np.random.default_rng(0)
    # A square frame: scale 1, ratio 1 is the whole frame at the first attempt.
    assert sample_crop("random-resized", 200, 200, scale=(1, 1), ratio=(1, 1), rng=rng) == (
        0.0,
        0.0,
        200.0,
        200.0,
    )
    # A 180x320 frame has no square of its whole area: all attempts fail, the fallback is the
    # centred crop with the ratio clamped (here the largest centred square).
    cases = [
        ((H, W), (1.0, 1.0), (1.0, 1.0), (0, 70, 180, 180)),
        ((50, 400), (0.9, 1.0), (3 / 4, 4 / 3), (0, 166, 50, 67)),
        ((400, 50), (0.9, 1.0), (3 / 4, 4 / 3), (166, 0, 67, 50)),
    ]
    for (height, width), scale, ratio, expected in cases:
        ours = sample_crop("random-resized", height, width, scale=scale, ratio=ratio, rng=rng)
        assert ours == tuple(float(v) for v in expected)
        params = v2.RandomResizedCrop(1, scale=scale, ratio=ratio).make_params(
            [torch.empty((1, height, width))]
        )
        assert (params["top"], params["left"], params["height"], params["width"]) == expected


@pytest.mark.parametrize(
    ("height", "width", "scale", "ratio"),
    [
        (H, W, (0.08, 1.0), (3 / 4, 4 / 3)),
        (57, 640, (0.3, 1.0), (0.5, 2.0)),
        (64, 64, (0.9, 1), (1, 1)),
    ],
)
def test_random_resized_algorithm_matches_torchvision_draw_for_draw(height, width, scale, ratio):
    rrc = v2.RandomResizedCrop(1, scale=scale, ratio=ratio)
    for seed in range(200):
        torch.manual_seed(seed)
        params = rrc.make_params([torch.empty((1, height, width))])
        expected = (params["top"], params["left"], params["height"], params["width"])
        state = torch.get_rng_state()
        torch.manual_seed(seed)
        assert _random_resized_box(height, width, scale, ratio, _TorchDraws()) == expected
        assert torch.equal(torch.get_rng_state(), state)


def test_sample_flip():
    rng = np.random.default_rng(3)
    assert not any(sample_flip(0.0, rng) for _ in range(200))
    assert all(sample_flip(1.0, rng) for _ in range(200))
    assert 400 < sum(sample_flip(0.5, rng) for _ in range(1000)) < 600
    a, b = np.random.default_rng(5), np.random.default_rng(5)
    assert [sample_flip(0.5, a) for _ in range(30)] == [sample_flip(0.5, b) for _ in range(30)]
    for p in (-0.1, 1.5, True):
        with pytest.raises(ValueError, match="flip probability"):
            sample_flip(p, rng)


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (("resized", H, W, 112), {}, "crop must be one of"),
        (("center", H, W, 0), {}, "size must be a positive integer"),
        (("center", H, W, (112, -1)), {}, r"size\[1\] must be"),
        (("center", H, W, (1, 2, 3)), {}, r"int or \(h, w\)"),
        (("center", H, W, None), {}, "needs a size"),
        (("center", 0, W, 112), {}, "height must be"),
        ((None, H, W, 112), {"scale": (0.0, 1.0)}, "scale must be"),
        ((None, H, W, 112), {"scale": (1.0, 0.5)}, "scale must be"),
        ((None, H, W, 112), {"ratio": (4 / 3, 3 / 4)}, "ratio must be"),
        ((None, H, W, 112), {"ratio": 1.0}, "ratio must be a pair"),
        (("random", H, W, 112), {}, "needs rng"),
        (("random-resized", H, W, 112), {}, "needs rng"),
    ],
)
def test_sample_crop_rejects_bad_arguments(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        sample_crop(*args, **kwargs)


# -- plan_fused: equivalence with torchvision -------------------------------------------------

COMPOSITIONS = {
    "rrc": [v2.RandomResizedCrop(112)],
    "resize-center": [v2.Resize(128), v2.CenterCrop(112)],
    "resize-random-flip": [v2.Resize(128), v2.RandomCrop(112), v2.RandomHorizontalFlip(0.5)],
    "flip-rrc": [v2.RandomHorizontalFlip(1.0), v2.RandomResizedCrop((96, 128))],
    "resize-hw": [v2.Resize((100, 150))],
    "resize-max-size": [v2.Resize(96, max_size=120)],
    "resize-none-max-size": [v2.Resize(None, max_size=200)],
    "long-chain": [
        v2.Resize(200),
        v2.RandomHorizontalFlip(0.5),
        v2.RandomResizedCrop(150, scale=(0.2, 1.0)),
        v2.RandomCrop((120, 140)),
        v2.RandomHorizontalFlip(0.5),
        v2.Resize((64, 80)),
    ],
    "upsample": [v2.CenterCrop((60, 90)), v2.Resize(150), v2.RandomHorizontalFlip(0.0)],
}


@pytest.mark.parametrize("name", sorted(COMPOSITIONS))
def test_fused_plan_matches_torchvision(name):
    ops = COMPOSITIONS[name]
    video = _video()
    flips = set()
    for seed in range(4):
        torch.manual_seed(seed)
        expected = v2.Compose(ops)(video)
        after_torchvision = torch.get_rng_state()

        torch.manual_seed(seed)
        box, size, flip = plan_fused(ops, H, W)
        assert torch.equal(torch.get_rng_state(), after_torchvision), "different draws"
        flips.add(flip)

        assert _inside(box, H, W)
        assert tuple(expected.shape[-2:]) == size
        fused = _fused_reference(video, box, size, flip)
        assert fused.shape == expected.shape
        assert _psnr(fused, expected) >= 30.0, (seed, box, size, flip)
    if name == "resize-random-flip":
        assert flips == {False, True}  # both branches of the mirror mapping were checked


def test_fused_crops_and_flips_without_resizing_are_pixel_exact():
    # No resampling at all: the fused box must pick exactly torchvision's pixels, which checks
    # the mirroring of crops drawn after a flip to the pixel.
    ops = [
        v2.RandomHorizontalFlip(1.0),
        v2.RandomCrop((100, 200)),
        v2.RandomHorizontalFlip(0.5),
        v2.CenterCrop((64, 99)),
        v2.RandomCrop((40, 50)),
    ]
    video = _video()
    for seed in range(8):
        torch.manual_seed(seed)
        expected = v2.Compose(ops)(video)
        torch.manual_seed(seed)
        box, size, flip = plan_fused(ops, H, W)
        assert all(float(v).is_integer() for v in box)
        assert torch.equal(_fused_reference(video, box, size, flip), expected), seed


def test_reference_resampler_matches_torchvision_resized_crop_on_integer_boxes():
    video = _video()
    for top, left, height, width, size in [(10, 20, 150, 200, (112, 112)), (0, 0, H, W, (97, 131))]:
        expected = F.resized_crop(video, top, left, height, width, list(size), antialias=True)
        ours = _fused_reference(video, (top, left, height, width), size, False)
        assert (ours.int() - expected.int()).abs().max() <= 1


def test_plan_fused_with_tv_tensor_video_and_no_ops():
    assert plan_fused([], H, W) == ((0.0, 0.0, float(H), float(W)), (H, W), False)
    ops = [v2.Resize(128), v2.RandomCrop(112)]
    video = v2.functional.to_image(_video()[0])  # a tv_tensors.Image: same draws
    torch.manual_seed(11)
    expected = v2.Compose(ops)(video)
    torch.manual_seed(11)
    box, size, flip = plan_fused(ops, H, W)
    assert _psnr(_fused_reference(video.as_subclass(torch.Tensor), box, size, flip), expected) >= 30


def test_flip_draws_once_even_when_certain():
    for p in (0.0, 1.0):
        torch.manual_seed(0)
        v2.RandomHorizontalFlip(p)(_video(1))
        expected = torch.rand(1)
        torch.manual_seed(0)
        _, _, flip = plan_fused([v2.RandomHorizontalFlip(p)], H, W)
        assert flip is (p == 1.0) and torch.equal(torch.rand(1), expected)


def test_center_crop_that_would_pad_raises_and_random_crop_too_large_raises_like_torchvision():
    with pytest.raises(NeedsPaddingError, match="would pad"):
        plan_fused([v2.Resize(100), v2.CenterCrop(112)], H, W)
    with pytest.raises(ValueError, match="larger than"):
        v2.RandomCrop(200)(_video(1))
    with pytest.raises(ValueError, match="larger than"):
        plan_fused([v2.RandomCrop(200)], H, W)


def test_plan_fused_rejects_unfusable_ops():
    with pytest.raises(ValueError, match="cannot fuse"):
        plan_fused([v2.Resize(128, antialias=False)], H, W)
    with pytest.raises(ValueError, match="cannot fuse"):
        plan_fused([v2.RandomVerticalFlip()], H, W)


# -- split_fusable ----------------------------------------------------------------------------


def test_split_takes_the_leading_geometric_run_and_keeps_the_rest():
    to_float = v2.ToDtype(torch.float32, scale=True)
    normalize = v2.Normalize([0.5] * 3, [0.25] * 3)
    ops, rest = split_fusable(
        v2.Compose([v2.RandomResizedCrop(112), v2.RandomHorizontalFlip(), to_float, normalize])
    )
    assert [type(op) for op in ops] == [v2.RandomResizedCrop, v2.RandomHorizontalFlip]
    assert type(rest) is v2.Compose and rest.transforms == [to_float, normalize]
    x = _video(1)
    assert torch.equal(rest(x), normalize(to_float(x)))


def test_split_flattens_nested_compose():
    inner = v2.Compose([v2.Resize(128), v2.CenterCrop(112)])
    jitter = v2.ColorJitter(0.2)
    ops, rest = split_fusable(
        v2.Compose([inner, v2.Compose([v2.RandomHorizontalFlip(), jitter]), v2.Resize(64)])
    )
    assert [type(op) for op in ops] == [v2.Resize, v2.CenterCrop, v2.RandomHorizontalFlip]
    # After the first non-fusable transform nothing more is fused, even a Resize.
    assert [type(t) for t in rest.transforms] == [v2.ColorJitter, v2.Resize]


def test_split_all_fusable_leaves_nothing():
    ops, rest = split_fusable(v2.Compose([v2.Resize(128), v2.RandomCrop(112)]))
    assert len(ops) == 2 and rest is None
    single = v2.Resize(128, interpolation="bilinear")
    assert split_fusable(single) == ([single], None)
    pil_constant = v2.Resize(128, interpolation=2)  # PIL.Image.BILINEAR
    assert split_fusable(pil_constant) == ([pil_constant], None)


@pytest.mark.parametrize(
    "stopper",
    [
        v2.Resize(128, interpolation=InterpolationMode.NEAREST),
        v2.Resize(128, interpolation="bicubic"),
        v2.Resize(128, antialias=False),
        v2.RandomResizedCrop(112, antialias=None),
        v2.RandomResizedCrop(112, interpolation=InterpolationMode.BICUBIC),
        v2.RandomCrop(112, padding=4),
        v2.RandomCrop(112, pad_if_needed=True),
        type("MyCrop", (v2.RandomResizedCrop,), {})(112),  # a subclass may draw differently
    ],
)
def test_split_stops_at_unfusable_geometry(stopper):
    head = v2.Resize(128)
    ops, rest = split_fusable(v2.Compose([head, stopper, v2.CenterCrop(100)]))
    assert ops == [head] and rest.transforms[0] is stopper and len(rest.transforms) == 2
    whole = v2.Compose([stopper, head])
    assert split_fusable(whole) == ([], whole)
    assert split_fusable(stopper) == ([], stopper)


def test_split_of_plain_callables_and_none():
    def fn(x):
        return x * 2

    assert split_fusable(fn) == ([], fn)
    assert split_fusable(None) == ([], None)


def test_split_then_plan_then_rest_equals_the_whole_transform():
    # The remainder draws from the RNG too: it must see the same state as unfused.
    transform = v2.Compose(
        [
            v2.RandomResizedCrop(112),
            v2.RandomHorizontalFlip(),
            v2.RandomGrayscale(p=0.5),
            v2.ToDtype(torch.float32, scale=True),
        ]
    )
    ops, rest = split_fusable(transform)
    assert len(ops) == 2
    video = _video()
    for seed in range(6):
        torch.manual_seed(seed)
        expected = transform(video)
        torch.manual_seed(seed)
        box, size, flip = plan_fused(ops, H, W)
        fused = rest(_fused_reference(video, box, size, flip))
        assert fused.shape == expected.shape and fused.dtype == torch.float32
        mse = (fused - expected).pow(2).mean().item()
        assert 10 * math.log10(1.0 / max(mse, 1e-12)) >= 30.0
