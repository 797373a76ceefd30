"""One image gives the same stored pixels on every ingest path (python/gulpio_rs/_pixels.py).

Each PIL mode is fed as an image file (ImageFolderAdapter, ImageListAdapter,
FramesFolderAdapter, GulpIngestor given paths), as a PIL image (GulpIngestor,
GulpChunk.append, utils) and as the expected array; every path must agree with the expected
8-bit pixels, which are computed here from the source values, not by the code under test.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from PIL import Image

from gulpio_rs import GulpChunk, GulpDirectory, GulpIngestor, utils
from gulpio_rs._pixels import pil_to_array, to_frame
from gulpio_rs.adapters import (
    AbstractDatasetAdapter,
    FramesFolderAdapter,
    ImageFolderAdapter,
    ImageListAdapter,
)

H, W = 12, 16
MODES = ["1", "L", "P", "LA", "RGBA", "CMYK", "I", "I;16", "F"]


def _source(mode: str):
    """(image of ``mode``, the 8-bit pixels it must become)."""
    rng = np.random.default_rng(MODES.index(mode))
    rgb = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
    if mode == "1":
        bits = rng.random((H, W)) < 0.5
        return Image.fromarray(bits), bits.astype(np.uint8) * 255
    if mode == "L":
        return Image.fromarray(rgb[:, :, 0]), rgb[:, :, 0]
    if mode == "LA":
        la = rgb[:, :, :2]
        return Image.fromarray(la, "LA"), la[:, :, 0]
    if mode == "RGBA":
        rgba = np.dstack([rgb, rng.integers(0, 256, (H, W), dtype=np.uint8)])
        return Image.fromarray(rgba), rgb
    if mode == "P":
        palette = rng.integers(0, 256, (256, 3), dtype=np.uint8)
        index = rng.integers(0, 256, (H, W), dtype=np.uint8)
        img = Image.fromarray(index, "L").convert("P")
        img.putpalette(palette.tobytes())
        return img, palette[index]
    if mode == "CMYK":
        # Pillow's CMYK->RGB is 255 - C - K etc. (clipped); keep K at 0 to make it exact.
        cmy = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
        cmyk = np.dstack([cmy, np.zeros((H, W), np.uint8)])
        return Image.fromarray(cmyk, "CMYK"), 255 - cmy
    if mode == "I":  # 8-bit levels in a 32-bit image (what some TIFF/PNG readers hand over)
        levels = rng.integers(0, 256, (H, W))
        return Image.fromarray(levels.astype(np.int32)), levels.astype(np.uint8)
    if mode == "I;16":
        levels = rng.integers(0, 65536, (H, W))
        img = Image.fromarray(levels.astype(np.uint16))
        return img, np.rint(levels / 257).astype(np.uint8)
    if mode == "F":
        fractions = rng.random((H, W)).astype(np.float32)
        return Image.fromarray(fractions), np.rint(fractions * 255.0).astype(np.uint8)
    raise AssertionError(mode)


@pytest.fixture(params=MODES)
def case(request, tmp_path):
    """The mode's image, its expected pixels, and the image saved as a TIFF file."""
    img, expected = _source(request.param)
    assert img.mode == request.param
    path = tmp_path / "src" / "cls" / "vid" / "frame1.tif"
    path.parent.mkdir(parents=True)
    img.save(path)
    with Image.open(path) as back:  # the file must hold the mode, or the test proves nothing
        assert back.mode == request.param
    return request.param, img, expected, path


class FramesAdapter(AbstractDatasetAdapter):
    """One video per given frame list (paths, PIL images or arrays)."""

    def __init__(self, frame_lists, tag):
        self.frame_lists, self.tag = frame_lists, tag

    def __len__(self):
        return len(self.frame_lists)

    def fingerprint(self):
        return self.tag

    def iter_data(self, slice_element=None):
        for i, frames in list(enumerate(self.frame_lists))[slice_element or slice(None)]:
            yield {"id": f"v{i}", "meta": {}, "frames": frames}


def _ingested(frames, out) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a skipped frame must fail the test, not warn
        report = GulpIngestor(FramesAdapter([frames], str(out)), out, 1, 1, progress=False)()
    assert report.failures == []
    stored, _ = GulpDirectory(out)["v0"]
    return np.asarray(stored[0])


def test_the_normaliser_gives_the_expected_pixels(case):
    mode, img, expected, path = case
    assert np.array_equal(pil_to_array(img), expected)
    assert np.array_equal(to_frame(img), expected)
    with Image.open(path) as back:
        assert np.array_equal(to_frame(back), expected)


def test_adapters_reading_files_give_the_same_pixels(case, tmp_path):
    mode, _, expected, path = case
    src = tmp_path / "src"
    folder = ImageFolderAdapter(src, tmp_path / "o1", file_extensions=[".tif"])
    (item,) = folder.iter_data()
    assert np.array_equal(item["frames"][0], expected), "ImageFolderAdapter"

    listing = tmp_path / "list.txt"
    listing.write_text(f"{path},cls\n")
    (item,) = ImageListAdapter(listing, tmp_path / "o2").iter_data()
    assert np.array_equal(item["frames"][0], expected), "ImageListAdapter"

    frames = FramesFolderAdapter(src, file_extensions=[".tif"], labels=True)
    (item,) = frames.iter_data()
    assert np.array_equal(item["frames"][0], expected), "FramesFolderAdapter"


def test_ingest_paths_store_the_same_pixels(case, tmp_path):
    mode, img, expected, path = case
    reference = _ingested([expected], tmp_path / "array")
    assert np.array_equal(_ingested([str(path)], tmp_path / "path"), reference), "file path"
    assert np.array_equal(_ingested([img], tmp_path / "pil"), reference), "PIL image"
    (item,) = ImageFolderAdapter(tmp_path / "src", tmp_path / "o", [".tif"]).iter_data()
    assert np.array_equal(_ingested(item["frames"], tmp_path / "adapter"), reference), "adapter"


def test_gulpchunk_append_and_utils_give_the_same_pixels(case, tmp_path):
    mode, img, expected, path = case
    assert utils.img_to_jpeg_bytes(img) == utils.img_to_jpeg_bytes(expected)
    chunk = GulpChunk(str(tmp_path / "data_0.gulp"), str(tmp_path / "meta_0.gmeta"))
    with chunk.open("wb"):
        chunk.append("pil", {}, [img])
        chunk.append("array", {}, [expected])
    gd = GulpDirectory(tmp_path)
    assert np.array_equal(np.asarray(gd["pil"][0][0]), np.asarray(gd["array"][0][0]))

    assert np.array_equal(utils.resize_frames([img], -1)[0], expected)
    assert np.array_equal(next(utils.resize_images([str(path)])), expected)
    assert np.array_equal(next(utils.resize_images([img])), expected)
    size = 6
    resized = utils.resize_frames([expected], size)[0]
    assert np.array_equal(utils.resize_frames([img], size)[0], resized)
    assert np.array_equal(utils.resize_frames([Image.open(path)], size)[0], resized)


def test_a_mode_i_image_of_8_bit_levels_is_not_stored_black(tmp_path):
    levels = np.tile(np.arange(0, 256, 16, dtype=np.int32), (H, 1))  # 0..240 across
    img = Image.fromarray(levels)
    assert img.mode == "I"
    stored = _ingested([img], tmp_path / "out").astype(int)
    assert stored.max() > 200
    assert np.abs(stored - levels).max() <= 8  # JPEG error, not a change of scale


@pytest.mark.parametrize(
    ("values", "dtype", "expected"),
    [
        ([0, 128, 255], np.int32, [0, 128, 255]),  # 8-bit levels kept
        ([0, 257, 65535], np.int32, [0, 1, 255]),  # above 255: 16-bit levels
        ([-5, 0, 255], np.int32, [0, 0, 255]),  # negatives are black
        ([0, 2**31 - 1, 2**30], np.int32, [0, 255, 128]),  # above 65535: the 32-bit range
        ([0.0, 0.5, 1.0], np.float32, [0, 128, 255]),  # F in [0, 1]: fractions
        ([0.0, 2.0, 255.0], np.float32, [0, 2, 255]),  # F above 1: 8-bit levels
        ([np.nan, 0.0, 1.0], np.float32, [0, 0, 255]),  # NaN is black
    ],
)
def test_unranged_modes_take_their_range_from_the_data(values, dtype, expected):
    img = Image.fromarray(np.array([values], dtype=dtype))
    assert np.array_equal(to_frame(img), np.array([expected], dtype=np.uint8))


def test_sixteen_bit_images_use_the_full_range():
    img = Image.fromarray(np.array([[0, 255, 257, 32768, 65535]], dtype=np.uint16))
    assert img.mode == "I;16"
    assert to_frame(img).tolist() == [[0, 1, 1, 128, 255]]
