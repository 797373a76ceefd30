"""Robustness of the built-in JPEG decoder against damaged input.

Thousands of seeded mutations of real JPEGs (the corpus in shared/data/jpeg-conformance when
present, plus Pillow/OpenCV-generated ones): bit flips, byte overwrites, truncations,
duplicated and removed marker segments, and patched frame-header fields (huge and zero sizes,
wrong component counts, bad sampling factors and table ids). Each damaged JPEG must either
decode to a uint8 array of the shape its frame header declares or raise ``DecodeError``: never
another exception, a crash or a hang. Truncated scans must raise (never a partly grey image).

The decoding runs in a child process (this file run as a script) under an address-space limit,
with a per-case watchdog (faulthandler) that kills a hung decode; a crash or a hang is
reported naming the case, and the sweep resumes after it. In-process ``signal.alarm`` cannot
interrupt native code, and one bad case must not take the test session down.
"""

from __future__ import annotations

import functools
import io
import json
import os
import pickle
import random
import resource
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from helpers import JPEG_CORPUS
from PIL import Image

from gulpio_rs._native import JPEG_BACKEND

CORPUS = JPEG_CORPUS
CORPUS_SEEDS = [
    "ljt_testorig.jpg",
    "ljt_testimgint.jpg",
    "ljt_testimgari.jpg",  # arithmetic: UnsupportedJpegError is a DecodeError too
    "pillow_app13-multiple.jpg",  # progressive
    "pillow_hopper.jpg",
    "pillow_hopper_gray.jpg",
    "pillow_rgb.jpg",
    "pillow_flower2.jpg",
    "pillow_icc-after-SOF.jpg",
]
CASE_TIMEOUT_S = 10  # per decode; a normal one takes milliseconds
MEMORY_LIMIT = 4 << 30  # address space of the decoding child process

# ---------------------------------------------------------------------------------------------
# JPEG structure helpers
# ---------------------------------------------------------------------------------------------

SOF_MARKERS = {0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}


@dataclass(frozen=True)
class Segment:
    marker: int
    start: int  # offset of the 0xFF
    end: int  # offset after the segment (for SOS: where its entropy-coded data starts)


def header_segments(data: bytes) -> list[Segment]:
    """Marker segments from SOI up to and including the first SOS, by their lengths."""
    segments, i = [], 2
    while i + 4 <= len(data) and data[i] == 0xFF:
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        end = i + 2 + int.from_bytes(data[i + 2 : i + 4], "big")
        segments.append(Segment(marker, i, end))
        if marker == 0xDA:
            break
        i = end
    return segments


def sof_segment(data: bytes) -> Segment | None:
    return next((s for s in header_segments(data) if s.marker in SOF_MARKERS), None)


def declared_shape(data: bytes) -> tuple[int, int, int] | None:
    """(height, width, channels) the frame header declares, as decode_jpeg must return it.

    When the segment chain is damaged before the frame header, libjpeg (and our decoder)
    skip the stray bytes to the next marker; the header is then found the same way."""
    sof = sof_segment(data)
    if sof is None or sof.start + 10 > len(data):
        from gulpio_rs._native import jpeg_info

        try:
            info = jpeg_info(data)
        except ValueError:
            return None
        return info.height, info.width, 1 if info.components == 1 else 3
    d = data[sof.start :]
    return int.from_bytes(d[5:7], "big"), int.from_bytes(d[7:9], "big"), 1 if d[9] == 1 else 3


def scan_ranges(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of every scan's entropy-coded data (restart markers included), in order."""
    ranges, i = [], 2
    while i + 4 <= len(data):
        if data[i] != 0xFF or data[i + 1] in (0x00, 0xFF) or 0xD0 <= data[i + 1] <= 0xD7:
            i += 1
            continue
        marker = data[i + 1]
        if marker == 0xD9:
            break
        end = i + 2 + int.from_bytes(data[i + 2 : i + 4], "big")
        if marker == 0xDA:  # entropy data runs to the next marker other than RSTn
            j = end
            while j + 1 < len(data) and not (
                data[j] == 0xFF
                and data[j + 1] not in (0x00, 0xFF)
                and not 0xD0 <= data[j + 1] <= 0xD7
            ):
                j += 1
            ranges.append((end, j))
            end = j
        i = end
    return ranges


def patch_u16(data: bytes, offset: int, value: int) -> bytes:
    return data[:offset] + value.to_bytes(2, "big") + data[offset + 2 :]


def set_byte(data: bytes, offset: int, value: int) -> bytes:
    return data[:offset] + bytes([value]) + data[offset + 1 :]


# ---------------------------------------------------------------------------------------------
# Seed JPEGs
# ---------------------------------------------------------------------------------------------


def frame(height: int, width: int, seed: int) -> np.ndarray:
    """Gradients, a disc and noise: compresses like a photo, unlike flat or random data."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    img = np.stack([x * 255 / width, y * 255 / height, (x + y) * 128 / (width + height)], -1)
    img[(y - height / 2) ** 2 + (x - width / 3) ** 2 < (height / 4) ** 2] = rng.uniform(0, 255, 3)
    return np.clip(img + rng.normal(0, 8, img.shape), 0, 255).astype(np.uint8)


def pil_jpeg(img: np.ndarray, mode: str = "RGB", **options) -> bytes:
    out = io.BytesIO()
    Image.fromarray(img).convert(mode).save(out, "JPEG", **{"quality": 90, **options})
    return out.getvalue()


def cv2_jpeg(img: np.ndarray, *params: int) -> bytes | None:
    try:
        import cv2
    except ImportError:
        return None
    ok, encoded = cv2.imencode(".jpg", np.ascontiguousarray(img[..., ::-1]), list(params))
    return encoded.tobytes() if ok else None


def generated_seeds() -> dict[str, bytes]:
    rgb, small = frame(48, 64, 1), frame(20, 36, 2)
    seeds = {
        "pil-baseline-420": pil_jpeg(rgb),
        "pil-progressive-444": pil_jpeg(rgb, subsampling=0, progressive=True),
        "pil-gray-progressive": pil_jpeg(rgb, "L", progressive=True),
        "pil-cmyk": pil_jpeg(small, "CMYK"),
        "pil-restart-rows-1": pil_jpeg(rgb, restart_marker_rows=1),
        "pil-optimized-422": pil_jpeg(small, subsampling="4:2:2", optimize=True),
    }
    try:
        import cv2
    except ImportError:
        return seeds
    seeds["cv2-progressive-440-rst2"] = cv2_jpeg(
        rgb,
        cv2.IMWRITE_JPEG_PROGRESSIVE, 1,
        cv2.IMWRITE_JPEG_RST_INTERVAL, 2,
        cv2.IMWRITE_JPEG_SAMPLING_FACTOR, cv2.IMWRITE_JPEG_SAMPLING_FACTOR_440,
    )  # fmt: skip
    return seeds


@functools.cache
def seeds(small: bool = False) -> dict[str, bytes]:
    """Corpus seeds (if present) and generated ones; ``small``: at most 64x64, so that a
    65535-row or -column version still decodes in a fraction of a second."""
    found = {
        name: (CORPUS / name).read_bytes() for name in CORPUS_SEEDS if (CORPUS / name).is_file()
    }
    found |= generated_seeds()
    if small:
        found = {k: v for k, v in found.items() if max(declared_shape(v)[:2]) <= 64}
    return found


# ---------------------------------------------------------------------------------------------
# Mutations: each returns (description, damaged bytes)
# ---------------------------------------------------------------------------------------------


def flip_bits(data: bytes, rng: random.Random):
    out = bytearray(data)
    spots = [rng.randrange(2, len(out)) for _ in range(rng.randint(1, 4))]
    for spot in spots:
        out[spot] ^= 1 << rng.randrange(8)
    return f"bit flips at {spots}", bytes(out)


def overwrite_bytes(data: bytes, rng: random.Random):
    """A run of random bytes; half of the time inside the headers, where flips rarely land."""
    headers_end = header_segments(data)[-1].end
    limit = headers_end if rng.random() < 0.5 else len(data)
    at, n = rng.randrange(2, limit), rng.randint(1, 8)
    junk = bytes(rng.choice([0x00, 0xFF, rng.randrange(256)]) for _ in range(n))
    return f"overwrite {junk.hex()} at {at}", data[:at] + junk + data[at + n :]


def truncate_anywhere(data: bytes, rng: random.Random):
    cut = rng.randrange(0, len(data))
    return f"truncated to {cut} of {len(data)} bytes", data[:cut]


def duplicate_segment(data: bytes, rng: random.Random):
    segments = header_segments(data)
    seg, where = rng.choice(segments), rng.choice(segments)
    copy = data[seg.start : seg.end]
    return (
        f"FF{seg.marker:02X} segment copied before FF{where.marker:02X} at {where.start}",
        data[: where.start] + copy + data[where.start :],
    )


def remove_segment(data: bytes, rng: random.Random):
    seg = rng.choice(header_segments(data))
    return f"FF{seg.marker:02X} segment at {seg.start} removed", data[: seg.start] + data[seg.end :]


def patch_frame_header(data: bytes, rng: random.Random):
    """Zero sizes, component counts that disagree with the segment, bad sampling / table ids."""
    sof, sos = sof_segment(data), header_segments(data)[-1]
    n, ns = data[sof.start + 9], data[sos.start + 4]
    component = sof.start + 10 + 3 * rng.randrange(n)  # its id; then sampling, quant table
    choice = rng.randrange(6)
    if choice == 0:
        field = rng.choice(["height", "width"])
        return f"SOF {field} = 0", patch_u16(data, sof.start + (5 if field == "height" else 7), 0)
    if choice == 1:
        count = rng.choice([0, 2, 4, 5, 255] if n != 1 else [0, 2, 3, 4, 255])
        return f"SOF declares {count} components (has {n})", set_byte(data, sof.start + 9, count)
    if choice == 2:
        value = rng.choice([0x00, 0x05, 0x50, 0x44, 0xFF, 0x13, 0x31])
        return f"sampling factors 0x{value:02X}", set_byte(data, component + 1, value)
    if choice == 3:
        value = rng.choice([1, 2, 3, 4, 15, 255])
        return f"quant table id {value}", set_byte(data, component + 2, value)
    if choice == 4:
        count = rng.choice([0, ns + 1, 5, 255])
        return f"SOS declares {count} components (has {ns})", set_byte(data, sos.start + 4, count)
    spot = sos.start + 5 + 2 * rng.randrange(ns) + rng.randrange(2)  # component id / tables
    value = rng.choice([0x00, 0x44, 0x0F, 0xF0, 0xFF, 0x99])
    return f"SOS component byte 0x{value:02X} at {spot}", set_byte(data, spot, value)


def huge_dimension(data: bytes, rng: random.Random):
    sof = sof_segment(data)
    field = rng.choice([5, 7])
    name = "height" if field == 5 else "width"
    return f"SOF {name} = 65535", patch_u16(data, sof.start + field, 65535)


MUTATIONS = {  # name -> (mutation, number of cases, small seeds only)
    "bit-flips": (flip_bits, 1000, False),
    "byte-overwrites": (overwrite_bytes, 700, False),
    "truncation": (truncate_anywhere, 400, False),
    "duplicated-segment": (duplicate_segment, 200, False),
    "removed-segment": (remove_segment, 200, False),
    "frame-header-fields": (patch_frame_header, 400, False),
    "huge-dimension": (huge_dimension, 60, True),
}


@dataclass(frozen=True)
class Case:
    seed: str
    what: str
    data: bytes

    def __str__(self) -> str:
        return f"{self.seed}: {self.what}"


def make_cases(name: str) -> list[Case]:
    mutate, count, small = MUTATIONS[name]
    base = seeds(small)
    names = sorted(base)
    cases = []
    for k in range(count):
        rng = random.Random(f"{name}-{k}")
        seed = rng.choice(names)
        what, data = mutate(base[seed], rng)
        cases.append(Case(seed, what, data))
    return cases


def decodable_seeds() -> dict[str, bytes]:
    """Seeds the decoder supports (Huffman-coded, 8-bit): damage there reaches the scan."""
    arithmetic = {0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF}
    return {
        name: data
        for name, data in seeds().items()
        if data[sof_segment(data).start + 1] not in arithmetic
        and data[sof_segment(data).start + 4] == 8
    }


def cut_points(data: bytes) -> list[int]:
    """Offsets strictly inside a scan's entropy-coded data, keeping < 90% of all scan data and
    at least 4 bytes before that scan's end (so a real part of the scan is always missing)."""
    ranges = scan_ranges(data)
    first, last = ranges[0][0], ranges[-1][1]
    limit = first + int(0.9 * (last - first))
    return [p for a, b in ranges for p in range(a + 1, min(b - 4, limit))]


def truncated_scan_cases(append_eoi: bool, count: int = 200) -> list[Case]:
    candidates = {name: data for name, data in decodable_seeds().items() if cut_points(data)}
    cases = []
    for k in range(count):
        rng = random.Random(f"truncated-scan-{append_eoi}-{k}")
        name = rng.choice(sorted(candidates))
        data = candidates[name]
        cut = rng.choice(cut_points(data))
        first, last = scan_ranges(data)[0][0], scan_ranges(data)[-1][1]
        what = f"cut at {cut} ({100 * (cut - first) / (last - first):.0f}% of the scan data)"
        if append_eoi:
            cases.append(Case(name, what + " + EOI", data[:cut] + b"\xff\xd9"))
        else:
            cases.append(Case(name, what, data[:cut]))
    return cases


# ---------------------------------------------------------------------------------------------
# Decoding in a child process
# ---------------------------------------------------------------------------------------------


def limit_memory() -> None:
    """Called first thing in every decoding child process."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def decode_in_child(cases: list[Case], tmp_path: Path) -> list[dict]:
    """decode_jpeg on every case in child processes; one outcome dict per case:
    {"kind": "image", "shape", "dtype"} | {"kind": "error", "type", "decode_error", "message"}
    | {"kind": "crash" / "hang", "detail"}. A crashed or hung child is restarted after the
    case that killed it."""
    path = tmp_path / "cases.pkl"
    path.write_bytes(pickle.dumps([c.data for c in cases]))
    outcomes: list[dict | None] = [None] * len(cases)
    start = 0
    while start < len(cases):
        proc = subprocess.run(
            [sys.executable, __file__, str(path), str(start), str(CASE_TIMEOUT_S)],
            capture_output=True,
            text=True,
            timeout=60 + CASE_TIMEOUT_S,
            # The child runs this file as a script: it needs the shared helpers' folder too.
            env={**os.environ, "RUST_BACKTRACE": "0", "PYTHONPATH": str(Path(__file__).parents[1])},
        )
        started = None
        for line in proc.stdout.splitlines():
            tag, index, *rest = line.split(" ", 2)
            if tag == "start":
                started = int(index)
            elif tag == "done":
                outcomes[int(index)] = json.loads(rest[0])
        if proc.returncode == 0 and outcomes[-1] is not None:
            break
        if started is None:
            raise RuntimeError(f"the decoding child did not start: {proc.stderr[-2000:]}")
        hung = "Timeout (" in proc.stderr
        outcomes[started] = {
            "kind": "hang" if hung else "crash",
            "detail": f"exit status {proc.returncode}: {proc.stderr.strip()[-300:]}",
        }
        start = started + 1
    return outcomes


def child_main(cases_path: str, start: str, timeout: str) -> None:
    """Decodes cases[start:], printing "start i" before and "done i <json>" after each."""
    import faulthandler

    limit_memory()

    import gulpio_rs
    from gulpio_rs._native import decode_jpeg

    datas = pickle.loads(Path(cases_path).read_bytes())
    for i in range(int(start), len(datas)):
        print(f"start {i}", flush=True)
        faulthandler.dump_traceback_later(float(timeout), exit=True)
        try:
            arr = decode_jpeg(datas[i])
            outcome = {"kind": "image", "shape": list(arr.shape), "dtype": str(arr.dtype)}
        except Exception as e:  # noqa: BLE001 - classified by the parent
            outcome = {
                "kind": "error",
                "type": type(e).__name__,
                "decode_error": isinstance(e, gulpio_rs.DecodeError),
                "message": str(e)[:200],
            }
        faulthandler.cancel_dump_traceback_later()
        print(f"done {i} {json.dumps(outcome)}", flush=True)


# Decodes a JPEG from stdin with decode_jpeg or through a dataset, under an address-space
# limit; prints the outcome, seconds and peak RSS (MB).
HUGE_CHILD = """
import resource, sys, time, tempfile, pathlib
limit = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
import gulpio_rs
from gulpio_rs._native import decode_jpeg
data = sys.stdin.buffer.read()
t = time.perf_counter()
try:
    if sys.argv[1] == "decode_jpeg":
        decode_jpeg(data)
    else:
        # Writers refuse such a frame, so it is stored with its real size and the header
        # damaged in place afterwards, in a chunk without an index (as gulpio2 leaves them).
        root = pathlib.Path(tempfile.mkdtemp())
        at, height, width = (int(v) for v in sys.argv[3:6])
        real = bytearray(data)
        real[at : at + 4] = height.to_bytes(2, "big") + width.to_bytes(2, "big")
        chunk = gulpio_rs.GulpChunk(root / "data_0.gulp", root / "meta_0.gmeta")
        with chunk.open("wb"):
            chunk.append("v", {}, [bytes(real)])
        (root / "data_0.gidx").unlink()
        stored = bytearray((root / "data_0.gulp").read_bytes())
        stored[: len(data)] = data
        (root / "data_0.gulp").write_bytes(bytes(stored))
        gulpio_rs.GulpDirectory(root)["v"]
    outcome = "image"
except gulpio_rs.DecodeError as e:
    outcome = "DecodeError"
elapsed = time.perf_counter() - t
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec() from the (large) pytest parent.
rss_mb = next(
    int(line.split()[1]) // 1024
    for line in open("/proc/self/status")
    if line.startswith("VmHWM:")
)
print(outcome, f"{elapsed:.3f}", rss_mb)
"""


def problems(cases: list[Case], outcomes: list[dict], *, image_allowed: bool = True) -> list[str]:
    """Cases breaking the rule: an image of the declared shape (if allowed) or DecodeError."""
    bad = []
    for case, outcome in zip(cases, outcomes, strict=True):
        kind = outcome["kind"]
        if kind == "error" and outcome["decode_error"]:
            continue
        if kind == "image" and image_allowed:
            expected = declared_shape(case.data)
            if outcome["dtype"] == "uint8" and expected and tuple(outcome["shape"]) == expected:
                continue
            bad.append(
                f"{case}: returned {outcome['dtype']} {outcome['shape']}, header says {expected}"
            )
        elif kind == "image":
            bad.append(
                f"{case}: returned an image {outcome['shape']} instead of raising DecodeError"
            )
        elif kind == "error":
            bad.append(
                f"{case}: raised {outcome['type']} (not a DecodeError): {outcome['message']}"
            )
        else:
            bad.append(f"{case}: {kind.upper()} {outcome['detail']}")
    return bad


def report(bad: list[str], total: int) -> str:
    return f"{len(bad)} of {total} cases broke the rule:\n" + "\n".join(bad[:15])


# ---------------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------------


def test_seeds_are_valid_jpegs_the_decoder_reads(tmp_path):
    """Otherwise the sweeps below would mostly exercise "not a JPEG" paths."""
    assert len(seeds()) >= 6 and len(seeds(small=True)) >= 3
    cases = [Case(name, "unchanged", data) for name, data in seeds().items()]
    outcomes = decode_in_child(cases, tmp_path)
    for case, outcome in zip(cases, outcomes, strict=True):
        if case.seed == "ljt_testimgari.jpg" and JPEG_BACKEND == "zune-jpeg":
            assert outcome.get("type") == "UnsupportedJpegError", outcome
        else:
            assert outcome["kind"] == "image", (case.seed, outcome)
            assert tuple(outcome["shape"]) == declared_shape(case.data)


@pytest.mark.parametrize("mutation", list(MUTATIONS))
def test_damaged_jpeg_decodes_to_declared_shape_or_raises_decode_error(mutation, tmp_path):
    cases = make_cases(mutation)
    bad = problems(cases, decode_in_child(cases, tmp_path))
    assert not bad, report(bad, len(cases))


def test_truncated_scan_raises_decode_error(tmp_path):
    cases = truncated_scan_cases(append_eoi=False)
    bad = problems(cases, decode_in_child(cases, tmp_path), image_allowed=False)
    assert not bad, report(bad, len(cases))


def test_truncated_scan_followed_by_eoi_decodes_like_libjpeg_or_raises(tmp_path):
    """A cut scan closed with an EOI marker is a documented limitation (docs/JPEG-CONFORMANCE.md):
    zune-jpeg, like libjpeg, fills the missing blocks instead of reporting the early EOI, and
    does not say that it did. Such a file is never produced by a truncated write (the EOI is
    gone with the tail, and that case raises, see above); frame CRCs catch storage damage.
    What is still required: the declared shape or DecodeError, no crash, no other error."""
    cases = truncated_scan_cases(append_eoi=True)
    bad = problems(cases, decode_in_child(cases, tmp_path), image_allowed=True)
    assert not bad, report(bad, len(cases))


def test_frame_header_declaring_more_rows_than_the_scan_codes_decodes_or_raises(tmp_path):
    """Same limitation as above: the scan ends (EOI) before the declared rows are coded."""
    cases = []
    for name, data in decodable_seeds().items():
        height, _, _ = declared_shape(data)
        sof = sof_segment(data)
        for factor in (2, 3):
            cases.append(
                Case(
                    name,
                    f"SOF height {height} -> {height * factor}",
                    patch_u16(data, sof.start + 5, height * factor),
                )
            )
    bad = problems(cases, decode_in_child(cases, tmp_path), image_allowed=True)
    assert not bad, report(bad, len(cases))


@pytest.mark.parametrize("entry_point", ["decode_jpeg", "dataset"])
def test_65535x65535_frame_header_is_refused_without_allocating_gigabytes(entry_point):
    """A 2 KB file declaring 65535x65535 (12.9 GB of RGB) must raise DecodeError at once.
    The child runs under a 4 GiB address-space limit so a decoder that tries the allocation
    fails here (as an abort) instead of exhausting the machine."""
    real = seeds()["pil-baseline-420"]
    sof = sof_segment(real)
    height, width, _ = declared_shape(real)
    data = patch_u16(patch_u16(real, sof.start + 5, 65535), sof.start + 7, 65535)
    where = [str(sof.start + 5), str(height), str(width)]
    try:
        proc = subprocess.run(
            [sys.executable, "-c", HUGE_CHILD, entry_point, str(MEMORY_LIMIT), *where],
            input=data,
            capture_output=True,
            timeout=30,
            env={**os.environ, "RUST_BACKTRACE": "0"},
        )
    except subprocess.TimeoutExpired:
        pytest.fail("decoding a 65535x65535 header did not finish within 30 s")
    stderr = proc.stderr.decode(errors="replace").strip()
    assert proc.returncode == 0, f"child died (exit status {proc.returncode}): {stderr[-300:]}"
    # Refused before allocating: the peak memory says so (timing is left to benchmarks; the
    # 30 s timeout above only catches a decoder that tries to fill 12.9 GB).
    outcome, _elapsed, rss_mb = proc.stdout.decode().split()
    assert outcome == "DecodeError"
    assert int(rss_mb) < 512, f"peak RSS {rss_mb} MB"


if __name__ == "__main__":  # the decoding child of decode_in_child()
    child_main(*sys.argv[1:])
