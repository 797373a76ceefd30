"""`gulpio check` names exactly the damaged places: a seeded sweep of 60 damage cases over a
directory of 3 chunks x 3 videos x 3 frames (bit flips and overwrites inside frames, two
damaged frames at once, truncated data files, damaged padding, unpublished tails, damaged
indexes and meta files). Each report must list the damaged chunk file, video and frame and
nothing else, with exit code 1; the undamaged directory reports nothing, with exit code 0.

Reports are compared as sets of (kind, file name, video id, frame) taken from `--json`. One
damaged place is one problem: a damaged frame also changes the CRC of the chunk's published
data, which the frame's problem says (no separate `data_crc` problem); `data_crc` stands alone
only for damage no frame explains (padding)."""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gulpio_rs import GulpChunk
from gulpio_rs.cli import main
from gulpio_rs.utils import img_to_jpeg_bytes

CHUNKS, VIDEOS, FRAMES = 3, 3, 3


@dataclass
class Expect:
    """The report must hold every `required` finding and may hold `allowed` ones besides;
    `one_of`: exactly one finding, among `allowed`."""

    required: set[tuple] = field(default_factory=set)
    allowed: set[tuple] = field(default_factory=set)
    one_of: bool = False


def _id(k: int, v: int) -> str:
    return f"c{k}v{v}"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """The directory and, per chunk, `{video id: frame_info}` from its .gmeta."""
    from helpers import synthetic_frame

    root = tmp_path_factory.mktemp("pristine")
    layout = {}
    for k in range(CHUNKS):
        chunk = GulpChunk(root / f"data_{k}.gulp", root / f"meta_{k}.gmeta")
        with chunk.open("wb"):
            for v in range(VIDEOS):
                frames = [synthetic_frame(16, 24, seed=100 * k + 10 * v + j) for j in range(FRAMES)]
                chunk.append(_id(k, v), {"k": k, "v": v}, frames)
        meta = json.loads((root / f"meta_{k}.gmeta").read_text())
        layout[k] = {id_: entry["frame_info"] for id_, entry in meta.items()}
    return root, layout


def _check(capsys, root: Path) -> tuple[int, set[tuple]]:
    code = main(["check", str(root), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] == (code == 0)
    found = {
        (p["kind"], Path(p["path"]).name, p["video_id"], p["frame"]) for p in report["problems"]
    }
    # Each finding is reported once: the set loses nothing.
    assert len(found) == len(report["problems"]), report["problems"]
    return code, found


def _records(layout, k):
    """(video id, frame, loc, pad, length) of every record of chunk k."""
    return [
        (id_, f, loc, pad, length)
        for id_, infos in layout[k].items()
        for f, (loc, pad, length) in enumerate(infos)
    ]


def _damage_frames(work, layout, rng, places, overwrite):
    """Changes bytes inside the JPEG of each (k, video, frame); returns the expected report."""
    expected = set()
    for k, v, f in places:
        loc, pad, length = layout[k][_id(k, v)][f]
        path = work / f"data_{k}.gulp"
        raw = bytearray(path.read_bytes())
        if overwrite:
            at = rng.randrange(loc, loc + length - pad)
            for i in range(at, min(at + rng.randint(1, 16), loc + length - pad)):
                raw[i] ^= rng.randrange(1, 256)  # xor with non-zero: every byte changes
        else:
            for at in rng.sample(range(loc, loc + length - pad), rng.randint(1, 3)):
                raw[at] ^= 1 << rng.randrange(8)
        path.write_bytes(bytes(raw))
        expected |= {("crc", path.name, _id(k, v), f)}
    return expected


def _place(rng):
    return rng.randrange(CHUNKS), rng.randrange(VIDEOS), rng.randrange(FRAMES)


def frame_flip(work, layout, rng):
    return Expect(_damage_frames(work, layout, rng, [_place(rng)], overwrite=False))


def frame_overwrite(work, layout, rng):
    return Expect(_damage_frames(work, layout, rng, [_place(rng)], overwrite=True))


def two_frames(work, layout, rng):
    first = _place(rng)
    second = _place(rng)
    while second == first:
        second = _place(rng)
    return Expect(_damage_frames(work, layout, rng, [first, second], overwrite=False))


def truncate_data(work, layout, rng):
    """Cut anywhere before the end of the last JPEG: every frame whose JPEG bytes reach past
    the cut is reported; a frame whose padding alone was cut still reads intact."""
    k = rng.randrange(CHUNKS)
    records = _records(layout, k)
    last_jpeg_end = max(loc + length - pad for _, _, loc, pad, length in records)
    cut = rng.randrange(last_jpeg_end)
    path = work / f"data_{k}.gulp"
    path.write_bytes(path.read_bytes()[:cut])
    expected = {
        ("truncated", path.name, id_, f)
        for id_, f, loc, pad, length in records
        if loc + length - pad > cut
    }
    # A chunk-level note that the file is shorter than published is welcome too (see
    # test_truncation_inside_the_last_padding_is_reported).
    return Expect(expected, {("truncated", path.name, None, None)})


def damage_padding(work, layout, rng):
    """Padding is outside every JPEG: only the CRC of the published data can notice."""
    padded = [(k, r) for k in range(CHUNKS) for r in _records(layout, k) if r[3] > 0]
    k, (_, _, loc, pad, length) = rng.choice(padded)
    path = work / f"data_{k}.gulp"
    raw = bytearray(path.read_bytes())
    raw[loc + length - 1 - rng.randrange(pad)] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(raw))
    return Expect({("data_crc", path.name, None, None)})


def unpublished_tail(work, layout, rng):
    k = rng.randrange(CHUNKS)
    path = work / f"data_{k}.gulp"
    path.write_bytes(path.read_bytes() + rng.randbytes(rng.randint(1, 64)))
    return Expect({("unpublished_tail", path.name, None, None)})


def _index_case(work, rng, truncate):
    k = rng.randrange(CHUNKS)
    path = work / f"data_{k}.gidx"
    raw = bytearray(path.read_bytes())
    if truncate:
        raw = raw[: rng.randrange(len(raw))]
    else:
        raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(raw))
    # The index is ignored and the chunk read through its .gmeta. Which file the report names
    # depends on when the damage is found (see test_index_problems_name_the_index_file).
    names = (f"data_{k}.gidx", f"data_{k}.gulp")
    return Expect(allowed={("index", name, None, None) for name in names}, one_of=True)


def index_flip(work, layout, rng):
    return _index_case(work, rng, truncate=False)


def index_truncate(work, layout, rng):
    return _index_case(work, rng, truncate=True)


def _meta_case(work, layout, rng, truncate):
    """A damaged .gmeta next to an intact index: exactly that .gmeta is reported (the chunk
    reads through its checksummed index, so no frame, tail or other file is)."""
    k = rng.randrange(CHUNKS)
    path = work / f"meta_{k}.gmeta"
    raw = bytearray(path.read_bytes())
    if truncate:
        raw = raw[: rng.randrange(len(raw))]
    else:
        raw[rng.randrange(len(raw))] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(raw))
    return Expect(required={("meta", path.name, None, None)}, one_of=True)


def meta_flip(work, layout, rng):
    return _meta_case(work, layout, rng, truncate=False)


def meta_truncate(work, layout, rng):
    return _meta_case(work, layout, rng, truncate=True)


CASES = {  # damage -> number of seeded cases
    frame_flip: 18,
    frame_overwrite: 8,
    two_frames: 6,
    truncate_data: 10,
    damage_padding: 3,
    unpublished_tail: 3,
    index_flip: 6,
    index_truncate: 2,
    meta_flip: 2,
    meta_truncate: 2,
}
PARAMS = [
    pytest.param(damage, i, id=f"{damage.__name__}-{i}")
    for damage, count in CASES.items()
    for i in range(count)
]


def test_the_sweep_has_60_cases():
    assert len(PARAMS) == 60


def test_undamaged_directory_reports_nothing(pristine, capsys):
    root, _ = pristine
    assert _check(capsys, root) == (0, set())
    assert main(["check", str(root)]) == 0
    assert "all intact" in capsys.readouterr().out


@pytest.mark.parametrize(("damage", "seed"), PARAMS)
def test_check_names_exactly_the_damaged_places(pristine, tmp_path, capsys, damage, seed):
    root, layout = pristine
    work = tmp_path / "d"
    shutil.copytree(root, work)
    expect = damage(work, layout, random.Random(f"{damage.__name__}-{seed}"))
    code, found = _check(capsys, work)
    assert code == 1 and found, "damage went unreported"
    assert expect.required <= found, f"missing: {expect.required - found}"
    unexpected = found - expect.required - expect.allowed
    assert not unexpected, f"reported places that are not damaged: {unexpected}"
    if expect.one_of:
        assert len(found) == 1, found
    # Frame findings never stand alone for damage outside the frames: the chunk is named too.
    if not expect.required:
        assert any(video is None for _, _, video, _ in found), found


def _padded_last_record_dir(root: Path) -> tuple[Path, int, int]:
    """A one-chunk directory whose last record has padding: (data file, jpeg end, pad)."""
    from helpers import synthetic_frame

    seed = 0
    while len(jpeg := img_to_jpeg_bytes(synthetic_frame(16, 24, seed=seed))) % 4 == 0:
        seed += 1
    chunk = GulpChunk(root / "data_0.gulp", root / "meta_0.gmeta")
    with chunk.open("wb"):
        chunk.append("v", {}, [jpeg])
    return root / "data_0.gulp", len(jpeg), (4 - len(jpeg) % 4) % 4


def test_truncation_inside_the_last_padding_is_reported(tmp_path, capsys):
    data, jpeg_end, pad = _padded_last_record_dir(tmp_path)
    assert pad > 0 and data.stat().st_size == jpeg_end + pad
    data.write_bytes(data.read_bytes()[: jpeg_end + pad - 1])
    code, found = _check(capsys, tmp_path)
    assert code == 1 and found == {("truncated", "data_0.gulp", None, None)}


def test_index_problems_name_the_index_file(pristine, tmp_path, capsys):
    root, _ = pristine
    work = tmp_path / "d"
    shutil.copytree(root, work)
    path = work / "data_1.gidx"
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 1  # the last byte of the meta blob: found by the full check, after open
    path.write_bytes(bytes(raw))
    code, found = _check(capsys, work)
    assert code == 1 and found == {("index", "data_1.gidx", None, None)}
