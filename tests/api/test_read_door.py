"""One read door: a batch read crosses into the core a constant number of times whatever the
number of videos (ids, frame selections, options and the decode go over in one call), and
every way of asking for frames gets the same frames through it."""

from __future__ import annotations

import shutil
import sys
from collections import Counter

import numpy as np
import pytest
from helpers import synthetic_frame

from gulpio_rs import GulpChunk, GulpDirectory

VIDEOS, FRAMES = 12, 5


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("door")
    for c in range(2):  # two chunks: a batch crosses chunk boundaries
        chunk = GulpChunk(root / f"data_{c}.gulp", root / f"meta_{c}.gmeta")
        with chunk.open("wb"):
            for v in range(VIDEOS // 2):
                frames = [synthetic_frame(24, 32, seed=10 * v + k) for k in range(FRAMES)]
                chunk.append(f"v{c}-{v}", {"n": v}, frames)
    return root


@pytest.fixture(scope="module")
def gd(root):
    with GulpDirectory(root) as d:
        yield d


def _native_calls(call) -> Counter[str]:
    """The calls into ``gulpio_rs._native`` (functions and methods of its classes) that
    ``call()`` makes, by name, seen by the profiler's ``c_call`` events."""
    seen: Counter[str] = Counter()

    def owner_module(fn) -> str | None:
        cls = getattr(fn, "__objclass__", None)
        if cls is not None:
            return cls.__module__
        owner = getattr(fn, "__self__", None)
        if owner is None:
            return getattr(fn, "__module__", None)
        return owner.__name__ if isinstance(owner, type(sys)) else type(owner).__module__

    def profile(frame, event, arg):
        if event == "c_call" and owner_module(arg) == "gulpio_rs._native":
            seen[arg.__name__] += 1

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return seen


def test_the_counter_sees_crossings(gd):
    # The check below would pass vacuously if the profiler saw nothing.
    # (`meta` resolves the id, then asks the chunk: two crossings.)
    assert sum(_native_calls(lambda: gd.meta("v0-0")).values()) >= 2


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"frames": slice(1, 4)},
        {"frames": [0, -1]},
        {"crop": (2, 2, 16, 16), "size": 8, "flip": True},
        {"size": "one per video"},
    ],
    ids=["all", "slice", "indices", "fused", "sizes"],
)
def test_read_batch_crosses_a_constant_number_of_times(gd, options):
    ids = gd.keys()
    counts = {}
    for n in (1, 4, len(ids)):
        kwargs = dict(options)
        if kwargs.get("size") == "one per video":
            kwargs["size"] = [(8, 12), (12, 8)] * (n // 2) + [(8, 8)] * (n % 2)
        counts[n] = _native_calls(lambda n=n, kw=kwargs: gd.read_batch(ids[:n], **kw))
    totals = {n: sum(c.values()) for n, c in counts.items()}
    assert len(set(totals.values())) == 1, counts
    assert totals[1] <= 3, counts[1]
    assert counts[1]["read_batch"] == 1


def test_prefetch_and_per_video_selections_cross_once(gd):
    ids = gd.keys()
    per_video = [slice(0, 2), [1, 2], None, np.array([4, 3])] * (len(ids) // 4)
    small = _native_calls(lambda: gd.read_batch(ids[:4], per_video[:4], stack=False))
    large = _native_calls(lambda: gd.read_batch(ids, per_video, stack=False))
    assert sum(small.values()) == sum(large.values())
    assert sum(_native_calls(lambda: gd.prefetch(ids[:1])).values()) == sum(
        _native_calls(lambda: gd.prefetch(ids)).values()
    )


@pytest.mark.parametrize(
    "selection",
    [None, 2, -1, slice(None, None, 2), slice(4, 0, -2), slice(10, 20), [0, 4, 4], (1, 2),
     np.array([[0, 1], [2, 3]]), np.int64(3), np.array([1], dtype=np.uint8), range(1, 3), []],
    ids=repr,
)  # fmt: skip
def test_every_selection_form_names_the_frames_a_list_would(gd, selection):
    whole = gd.read("v1-2")
    got = gd.read_batch(["v1-2", "v0-1"], selection, stack=False)
    if selection is None:
        expected = list(range(FRAMES))
    elif isinstance(selection, slice):
        expected = list(range(FRAMES))[selection]
    else:
        expected = np.asarray(selection).reshape(-1).tolist()
    np.testing.assert_array_equal(got[0], whole[expected] if expected else got[0][:0])
    np.testing.assert_array_equal(gd.read("v1-2", selection), got[0])
    assert len(gd.frame_bytes("v1-2", selection)) == len(expected)
    assert len(gd["v1-2", selection][0]) == len(expected)


def test_a_selection_that_is_not_indices_is_a_type_error_naming_the_video(gd):
    for bad in (["a"], [0.5], [None]):
        with pytest.raises(TypeError, match="v0-0.*frame indices must be integers"):
            gd.read_batch(["v0-0"], [bad])


def test_frame_shape_comes_from_the_index_or_the_jpeg_header(gd, root, tmp_path):
    assert gd.frame_shape("v0-0") == (24, 32, 3)
    assert gd.frame_shape("v0-0", -1) == (24, 32, 3)
    with pytest.raises(IndexError, match="out of range"):
        gd.frame_shape("v0-0", FRAMES)
    # A chunk without its index (as gulpio2 writes them): the JPEG header says.
    shutil.copytree(root, tmp_path / "legacy")
    for index in (tmp_path / "legacy").glob("*.gidx"):
        index.unlink()
    with GulpDirectory(tmp_path / "legacy") as legacy:
        assert legacy.frame_shapes("v0-0")[0] == (0, 0, 0)
        assert legacy.frame_shape("v0-0", 1) == (24, 32, 3)
