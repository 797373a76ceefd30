"""``gulpio demo``: gulp the built-in Big Buck Bunny sample, verify it, read it back and draw a
contact sheet. Needs no network and no external binary."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import time
from importlib import resources

from .. import AV1_BACKEND, JPEG_BACKEND, __version__
from .._decoder_notes import decoder_note, zune_fallback_reason
from .._plural import plural
from .._sizes import megabytes
from ..errors import GulpError
from ._common import Subparsers, say

EPILOG = """examples:
  gulpio demo                      gulp into ./gulpio-demo/ (replaced on the next run) and report
  gulpio demo --output /tmp/bbb    write the dataset and contact sheet into /tmp/bbb
"""

#: Where the demo writes by default, and the file that marks a folder as its output (so a
#: rerun may replace it, and nothing else is ever deleted).
DEFAULT_OUTPUT = "gulpio-demo"
MARKER = ".gulpio-demo"
#: The marker's line for a folder the demo created (and so may suggest removing whole).
CREATED = "folder created by gulpio demo"


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "demo",
        help="gulp a built-in sample clip, check it, read it back, draw a contact sheet",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--output", "-o", help=f"directory to write to (default: ./{DEFAULT_OUTPUT}/)")
    p.set_defaults(run=run)


def _sample_dir() -> str:
    return str(resources.files("gulpio_rs") / "data" / "bbb")


def run(args: argparse.Namespace) -> int:
    from ..adapters import JpegFolderClipsAdapter
    from ..contact_sheet import contact_sheet
    from ..directory import GulpDirectory
    from ..ingest import GulpIngestor

    sample = _sample_dir()
    clips_json = os.path.join(sample, "clips.json")
    if not os.path.exists(clips_json):
        raise GulpError(f"the built-in sample is missing from the installation: {clips_json}")
    out = args.output or DEFAULT_OUTPUT
    _prepare(out, given=args.output is not None)
    say(f"gulpio-rs {__version__} demo: Big Buck Bunny clips (CC BY 3.0, Blender Foundation)")
    say(f"  sample:  {sample}")
    say(f"  output:  {out}")

    adapter = JpegFolderClipsAdapter(clips_json, sample)
    t0 = time.perf_counter()
    GulpIngestor(adapter, out, videos_per_chunk=2, num_workers=1)()
    t_ingest = time.perf_counter() - t0

    gd = GulpDirectory(out)
    n_frames = sum(gd.num_frames(i) for i in gd.keys())
    size = sum(os.path.getsize(os.path.join(out, n)) for n in os.listdir(out))
    say(
        f"1. gulped {plural(len(gd), 'video')}, {plural(n_frames, 'frame')} into "
        f"{plural(gd.num_chunks, 'chunk')} "
        f"({megabytes(size)}) in {t_ingest * 1e3:.0f} ms ({n_frames / t_ingest:,.0f} frames/s)"
    )

    t0 = time.perf_counter()
    checked = sum(len(gd.frame_bytes(i)) for i in gd.keys())
    t_check = time.perf_counter() - t0
    say(f"2. verified the CRC32 of {checked} frames in {t_check * 1e3:.1f} ms: all intact")

    gd.read_batch(gd.keys()[:1])  # start the decode threads outside the timing
    t0 = time.perf_counter()
    batch = gd.read_batch(gd.keys(), stack=True)
    t_read = time.perf_counter() - t0
    h, w = batch.shape[2:4]
    say(
        f"3. read back and decoded {n_frames} frames ({w}x{h}) in one batch of shape "
        f"{batch.shape} in {t_read * 1e3:.1f} ms ({n_frames / t_read:,.0f} frames/s, "
        f"{JPEG_BACKEND})"
    )

    first = gd.keys()[0]
    frames, meta = gd[first]
    picks = list(range(0, len(frames), max(1, len(frames) // 12)))
    sheet = contact_sheet(
        [frames[k] for k in picks], picks, f"{first}  label: {meta.get('label', '?')}"
    )
    sheet_path = os.path.join(out, "contact_sheet.png")
    sheet.save(sheet_path)
    say(f"4. contact sheet of {first!r}: {sheet_path}")
    note = decoder_note(zune_fallback_reason())
    say(
        f"decoders: {JPEG_BACKEND} (JPEG), {AV1_BACKEND} (AV1 segments)"
        + (f"; note: {note}" if note else "")
    )
    shown = os.path.abspath(out)
    say(f"the dataset and contact sheet are in {shown}; remove them with: {_removal(out)}")
    return 0


def _prepare(out: str, given: bool) -> None:
    """Makes ``out`` ready for the demo: created, or an empty folder, or the output of an
    earlier demo (whose files are removed). Anything else is refused: the demo never writes
    beside, or deletes, files it did not make. The marker file records whether the demo
    created the folder (now or the earlier demo)."""
    where = out if given else f"./{out}"
    if os.path.isdir(out) and os.listdir(out):
        marker = os.path.join(out, MARKER)
        if not os.path.isfile(marker) or os.path.islink(marker):
            raise DemoOutputError(
                f"{where} is not empty and not a demo output (it has no {MARKER} file); give an "
                "empty or new folder with --output DIR" + ("" if given else ", or move it away")
            )
        with open(marker) as f:
            created = CREATED in f.read()
        for name in os.listdir(out):  # an earlier demo's files, as the marker says
            path = os.path.join(out, name)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.remove(path)
    else:
        created = not os.path.exists(out)
        os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, MARKER), "w") as f:
        f.write("written by `gulpio demo`; the next `gulpio demo` replaces its files\n")
        if created:
            f.write(CREATED + "\n")


def _removal(out: str) -> str:
    """The command that removes what the demo made in ``out``, and nothing else: the folder
    when the demo created it, else the files it wrote into the empty folder it was given."""
    shown = os.path.abspath(out)
    with open(os.path.join(out, MARKER)) as f:
        if CREATED in f.read():
            return f"rm -rf {shlex.quote(shown)}"
    names = sorted(os.listdir(out))
    return "rm -rf " + " ".join(shlex.quote(os.path.join(shown, n)) for n in names)


class DemoOutputError(GulpError):
    """The output folder holds files that are not the demo's (exit status 2)."""
