"""``gulpio show``: draw a contact sheet (a PNG grid of frames with their numbers) of one video,
to look at stored data instead of reading numbers."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from .._plural import plural
from ..errors import GulpError
from ._common import Subparsers, open_directory, say

DEFAULT_MAX_FRAMES = 24

EPILOG = """examples:
  gulpio show /data/gulps video_0042 -o sheet.png                up to 24 frames, evenly spaced
  gulpio show /data/gulps video_0042 -o sheet.png --frames 0:16  frames 0 to 15
  gulpio show /data/gulps video_0042 -o sheet.png --frames ::4   every fourth frame
  gulpio show /data/gulps video_0042 -o sheet.png --frames 0,5,9
  gulpio show /data/gulps video_0042 -o sheet.png --frames=-8:   the last 8 frames

--frames takes a Python slice START:STOP[:STEP] or a comma list of frame numbers; negative
numbers count from the end. Write --frames=-8: (with '=') when the spec starts with '-'.
"""


def frame_spec(text: str) -> slice | list[int]:
    """Parse ``--frames``: ``START:STOP[:STEP]`` as a slice, else ``0,5,9`` as a list."""
    try:
        if ":" in text:
            parts = text.split(":")
            if len(parts) > 3:
                raise ValueError
            spec = slice(*(int(p) if p.strip() else None for p in parts))
            if spec.step == 0:
                raise ValueError
            return spec
        return [int(p) for p in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid frame selection {text!r}: expected START:STOP[:STEP] or a list like 0,5,9"
        ) from None


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, not {text!r}")
    return value


def thumb_height(text: str) -> int:
    """An argparse type: a thumbnail height from 8 to 2048 pixels (a sheet stays drawable)."""
    value = positive_int(text)
    if not 8 <= value <= 2048:
        raise argparse.ArgumentTypeError(f"expected 8 to 2048 pixels, not {value}")
    return value


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "show",
        help="draw a contact sheet (PNG grid of frames with frame numbers) of one video",
        description="Draw a contact sheet of one video: a PNG grid of its frames, each with its "
        "frame number, under a caption with the id and label.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("directory", help="the gulp directory")
    p.add_argument("id", help="the video id")
    p.add_argument("--output", "-o", required=True, help="PNG file to write")
    p.add_argument(
        "--frames",
        type=frame_spec,
        metavar="SPEC",
        help=f"frames to draw (default: at most {DEFAULT_MAX_FRAMES}, evenly spaced)",
    )
    p.add_argument("--columns", type=positive_int, metavar="N", help="thumbnails per row")
    p.add_argument(
        "--thumb-height",
        type=thumb_height,
        default=96,
        metavar="PX",
        help="thumbnail height in pixels (default: 96)",
    )
    p.set_defaults(run=run)


def select_frames(spec: slice | list[int] | None, num_frames: int, video_id: str) -> list[int]:
    """Frame numbers to draw for ``spec`` in a video of ``num_frames`` frames."""
    if spec is None:
        if num_frames <= DEFAULT_MAX_FRAMES:
            return list(range(num_frames))
        last, steps = num_frames - 1, DEFAULT_MAX_FRAMES - 1
        return [(i * last + steps // 2) // steps for i in range(DEFAULT_MAX_FRAMES)]
    if isinstance(spec, slice):
        picks = list(range(*spec.indices(num_frames)))
    else:
        picks = [k + num_frames if k < 0 else k for k in spec]
        bad = [k for k, p in zip(spec, picks, strict=True) if not 0 <= p < num_frames]
        if bad:
            raise GulpError(
                f"frame {bad[0]} is out of range: video {video_id!r} has "
                f"{plural(num_frames, 'frame')}"
            )
    if not picks:
        raise GulpError(
            f"--frames selects no frames of video {video_id!r} ({plural(num_frames, 'frame')})"
        )
    return picks


def _suggestions(wanted: str, ids: Sequence[str]) -> str:
    """``"; did you mean 'a' or 'b'?"`` with the closest ids (difflib), or a count."""
    import difflib

    ids = [str(i) for i in ids]
    close = difflib.get_close_matches(wanted, ids, n=3, cutoff=0.6)
    if not close:
        # Ids that contain it (a file name without its class prefix, say).
        close = [i for i in ids if wanted in i][:3]
    if close:
        shown = ", ".join(repr(c) for c in close[:-1])
        shown = f"{shown} or {close[-1]!r}" if shown else repr(close[-1])
        return f"; did you mean {shown}?"
    return f" (the dataset has {plural(len(ids), 'video')}; `gulpio ls DIR` lists their ids)"


def run(args: argparse.Namespace) -> int:
    from ..contact_sheet import contact_sheet

    gd = open_directory(args.directory)
    if args.id not in gd:
        raise GulpError(f"unknown video id {args.id!r}{_suggestions(args.id, gd.keys())}")
    num_frames = gd.num_frames(args.id)
    if num_frames == 0:
        raise GulpError(f"video {args.id!r} has no frames")
    picks = select_frames(args.frames, num_frames, args.id)
    frames, meta = gd[args.id, picks]
    if "label" in meta:
        caption = f"{args.id}  label: {meta['label']}"
    else:
        caption = f"{args.id}  {plural(num_frames, 'frame')}"
    sheet = contact_sheet(
        frames, picks, caption, columns=args.columns, thumb_height=args.thumb_height
    )
    sheet.save(args.output, format="PNG")
    say(f"{args.output}: {len(picks)} of {plural(num_frames, 'frame')} of {args.id!r}")
    return 0
