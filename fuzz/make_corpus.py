"""Regenerates the seed corpora in fuzz/corpus/ (run with the package installed):
small real chunks written by gulpio_rs (indexed, legacy, appended to, with a tail, with
restart markers: a version 2 index), their .gidx and .gmeta files, hand-written .gmeta edge
cases, a dataset manifest's files (genesis, commit, snapshot, LATEST, a pinned state), small
JPEGs of every coding process the decoder meets (plus a few from shared/data/jpeg-conformance
when present), crops of JPEGs for the reframe target, and the AV1 segments of tests/segments/
for the video_segment target."""

from __future__ import annotations

import io
import struct
import sys
import tempfile
from pathlib import Path

import numpy as np
from PIL import Image

from gulpio_rs import GulpChunk

FUZZ = Path(__file__).resolve().parent
CORPUS = FUZZ / "corpus"
SHARED = FUZZ.parents[1] / "shared" / "data" / "jpeg-conformance"
CONFORMANCE = [
    "ljt_testorig.jpg",  # 4:2:0 baseline, restart markers
    "ljt_testimgint.jpg",  # progressive
    "ljt_testimgari.jpg",  # arithmetic coding (refused as unsupported)
    "ljt_monkey12.jpg",  # 12-bit (refused as unsupported)
    "pillow_hopper_gray.jpg",
    "pillow_icc-after-SOF.jpg",
    "pillow_app13.jpg",
    "pillow_truncated_app14.jpg",
]


def image(h: int, w: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([x * 255 / max(w, 1), y * 255 / max(h, 1), (x ^ y) * 16 % 256], -1)
    return np.clip(img + rng.normal(0, 6, img.shape), 0, 255).astype(np.uint8)


def jpeg(img: np.ndarray, mode: str = "RGB", **options) -> bytes:
    out = io.BytesIO()
    Image.fromarray(img).convert(mode).save(out, "JPEG", **{"quality": 75, **options})
    return out.getvalue()


def generated_jpegs() -> dict[str, bytes]:
    small = image(16, 24, 1)
    return {
        "baseline-420.jpg": jpeg(small),
        "baseline-444.jpg": jpeg(small, subsampling=0),
        "baseline-422-optimized.jpg": jpeg(small, subsampling="4:2:2", optimize=True),
        "progressive.jpg": jpeg(small, progressive=True),
        "gray.jpg": jpeg(small, "L"),
        "gray-progressive.jpg": jpeg(small, "L", progressive=True),
        "cmyk.jpg": jpeg(image(8, 8, 2), "CMYK"),
        "restart-rows-1.jpg": jpeg(small, restart_marker_rows=1),
        "1x1.jpg": jpeg(image(1, 1, 3)),
        "odd-13x7.jpg": jpeg(image(7, 13, 4)),
        # An MJPEG frame: no DHT segment, the standard Huffman tables implied.
        "mjpeg-no-dht.jpg": without_dht(jpeg(small)),
    }


def without_dht(data: bytes) -> bytes:
    out, i = bytearray(data[:2]), 2
    while data[i + 1] != 0xDA:
        length = int.from_bytes(data[i + 2 : i + 4], "big")
        if data[i + 1] != 0xC4:
            out += data[i : i + 2 + length]
        i += 2 + length
    return bytes(out + data[i:])


def chunk_input(meta: bytes, index: bytes | None, data: bytes) -> bytes:
    """The framing of fuzz/src/lib.rs split_chunk_input (flags, two u32 LE lengths)."""
    idx = index or b""
    return struct.pack("<BII", index is not None, len(meta), len(idx)) + meta + idx + data


def write_chunks(root: Path) -> dict[str, tuple[bytes, bytes | None, bytes]]:
    frames = [jpeg(image(8, 8, s)) for s in range(3)] + [jpeg(image(8, 16, 9), "L")]
    chunks = {}

    def files(k: int, keep_index: bool = True):
        index = root / f"data_{k}.gidx"
        return (
            (root / f"meta_{k}.gmeta").read_bytes(),
            index.read_bytes() if keep_index else None,
            (root / f"data_{k}.gulp").read_bytes(),
        )

    c = GulpChunk(root / "data_0.gulp", root / "meta_0.gmeta")
    with c.open("wb"):
        c.append("v0", {"label": "cat", "n": [1, 2.5, None, True]}, frames[:2])
        c.append('é/../x "q"', {"nested": {"a": [[{"b": "\u263a"}]]}}, frames[2:])
        c.append("empty", {}, [])
    chunks["indexed"] = files(0)

    c = GulpChunk(root / "data_1.gulp", root / "meta_1.gmeta")
    with c.open("wb"):
        c.append("a", {"x": 1}, frames[:1])
    with c.open("ab"):
        c.append("a", {"x": 2}, frames[3:])  # same id again: two meta_data elements
        c.append("b", {"y": float("nan")}, frames[1:2])
    chunks["appended"] = files(1)
    chunks["legacy"] = files(1, keep_index=False)
    meta, index, data = files(0)
    chunks["tail"] = (meta, index, data + b"\xff\xd8half a frame")

    # Frames with a restart marker every MCU row: a version 2 index with a restart table.
    c = GulpChunk(root / "data_2.gulp", root / "meta_2.gmeta")
    with c.open("wb"):
        c.append("r", {}, [jpeg(image(40, 24, s), restart_marker_rows=1) for s in range(2)])
        c.append("plain", {}, frames[:1])
    chunks["restart-rows"] = files(2)
    return chunks


def manifest_files(root: Path) -> dict[str, bytes]:
    """Seeds of the manifest target: a dataset's genesis commit (two chunks, as `gulpio index`
    writes it), a commit adding a chunk, the snapshot a compaction writes, `LATEST`, and the
    pinned state a pickled directory carries (docs/FORMAT.md §7)."""
    from gulpio_rs import GulpDirectory, _native

    frames = [jpeg(image(8, 8, s)) for s in range(2)]
    for k, ids in enumerate((["a", "b"], ["c"])):
        c = GulpChunk(root / f"data_{k}.gulp", root / f"meta_{k}.gmeta")
        with c.open("wb"):
            for i in ids:
                c.append(i, {"label": i}, frames)
    _native.manifest_index(str(root), False, None)
    (chunk,) = GulpDirectory(str(root)).new_chunks(1)
    with chunk.open("wb"):
        chunk.append("d é", {}, frames[:1])
    log = root / "_gulpio" / "log"
    out = {"genesis.glog": (log / f"{0:020}.glog").read_bytes()}
    out["commit.glog"] = (log / f"{1:020}.glog").read_bytes()
    _native.manifest_compact(str(root), None)
    (snapshot,) = (root / "_gulpio" / "snap").iterdir()
    out["snapshot.gman"] = snapshot.read_bytes()
    out["LATEST"] = (root / "_gulpio" / "LATEST").read_bytes()
    state = GulpDirectory(str(root)).manifest_state
    assert state is not None
    out["pin.bin"] = state
    return out


def reframe_inputs() -> dict[str, bytes]:
    """Seeds of the reframe target: 8 parameter bytes (see fuzz_targets/reframe.rs), then a
    JPEG; crops with and without a size, flips, DCT scaling and each kind of marker list."""
    restart = jpeg(image(48, 40, 5), restart_marker_rows=1)
    restart_444 = jpeg(image(40, 48, 6), subsampling=0, restart_marker_rows=1)
    plain = jpeg(image(32, 40, 7))
    gray = jpeg(image(40, 24, 8), "L", restart_marker_rows=1)
    return {
        "restart-own-markers.bin": bytes([60, 30, 120, 200, 0b01101, 40, 40, 0]) + restart,
        "restart-crop-only.bin": bytes([100, 10, 90, 250, 0b01000, 0, 0, 1]) + restart_444,
        "restart-shifted.bin": bytes([50, 50, 128, 128, 0b10011, 3, 20, 0]) + restart,
        "restart-made-up.bin": bytes([10, 10, 200, 200, 0b11001, 9, 40, 2]) + gray,
        "plain-scaled.bin": bytes([0, 0, 255, 255, 0b00101, 8, 10, 0]) + plain,
        "plain-flip.bin": bytes([40, 90, 100, 100, 0b00011, 60, 30, 1]) + plain,
        # Fast precision (bit 5), a box on whole pixels (bit 6): compared with the whole frame.
        "fast-crop-whole-pixels.bin": bytes([60, 30, 120, 200, 0b1101000, 0, 0, 0]) + restart,
        "fast-crop-plain.bin": bytes([90, 20, 150, 180, 0b1100000, 0, 0, 1]) + plain,
        "fast-scaled.bin": bytes([0, 0, 255, 255, 0b0100101, 8, 10, 0]) + plain,
    }


GMETA_CASES = {
    "empty.gmeta": b"{}",
    "python-floats.gmeta": b'{"a": {"frame_info": [[0, 3, 632]], "meta_data": '
    b'[{"x": NaN, "y": -Infinity, "z": Infinity, "w": -1.5e-7}]}}',
    "escapes.gmeta": b'{"\\ud83d\\ude00\\n\\t\\u00e9\\\\\\"/": {"frame_info": [], '
    b'"meta_data": [{"\\u0000": "\\b\\f\\r"}]}}',
    "key-order.gmeta": b'{"b": {"meta_data": [], "frame_info": [[8, 0, 8]], "extra": {"k": [1]}},'
    b' "c": {"frame_info": [[0, 0, 4], [4, 2, 4]]}}',
    "whitespace.gmeta": b' \n{ "a" :\t{ "frame_info" : [ [ 0 , 1 , 4 ] ] ,'
    b' "meta_data" : [ ] } }\r\n',
    "deep.gmeta": b'{"a": {"frame_info": [], "meta_data": ' + b"[" * 120 + b"]" * 120 + b"}}",
}


def segment_inputs() -> dict[str, bytes]:
    """The real AV1 segments of tests/segments/ (tools/make_segment_fixtures.py), each behind
    the 4 bytes the video_segment target reads its declared shape from: width - 16, height -
    16, frames - 1, and a mask of the wanted frames (all)."""
    folder = FUZZ.parent / "tests" / "segments"
    out = {}
    for line in (folder / "manifest.tsv").read_text().splitlines():
        file, w, h, frames = line.split("\t")[:4]
        head = bytes([int(w) - 16, int(h) - 16, int(frames) - 1, 0xFF])
        out[file] = head + (folder / file).read_bytes()
    return out


def main() -> None:
    for target in ("index", "gmeta", "chunk", "jpeg", "reframe", "video_segment", "manifest"):
        (CORPUS / target).mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in manifest_files(Path(tmp)).items():
            (CORPUS / "manifest" / name).write_bytes(data)
    for name, data in reframe_inputs().items():
        (CORPUS / "reframe" / name).write_bytes(data)
    with tempfile.TemporaryDirectory() as tmp:
        chunks = write_chunks(Path(tmp))
    for name, (meta, index, data) in chunks.items():
        (CORPUS / "chunk" / f"{name}.bin").write_bytes(chunk_input(meta, index, data))
        (CORPUS / "gmeta" / f"{name}.gmeta").write_bytes(meta)
        if index is not None:
            (CORPUS / "index" / f"{name}.gidx").write_bytes(index)
    for name, text in GMETA_CASES.items():
        (CORPUS / "gmeta" / name).write_bytes(text)
    for name, data in segment_inputs().items():
        (CORPUS / "video_segment" / name).write_bytes(data)
    for name, data in generated_jpegs().items():
        (CORPUS / "jpeg" / name).write_bytes(data)
    bbb = FUZZ.parent / "python" / "gulpio_rs" / "data" / "bbb" / "clip_00" / "frame_0000.jpg"
    if bbb.is_file():
        (CORPUS / "jpeg" / "bbb-frame.jpg").write_bytes(bbb.read_bytes())
    for name in CONFORMANCE:
        if (SHARED / name).is_file():
            (CORPUS / "jpeg" / name).write_bytes((SHARED / name).read_bytes())
        else:
            print(f"skipped {name}: {SHARED} not found", file=sys.stderr)


if __name__ == "__main__":
    main()
