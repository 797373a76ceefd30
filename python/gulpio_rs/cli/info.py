"""``gulpio info``: what a dataset holds: chunks, videos, frames, bytes, frame sizes and
channels (from the indexes), and label counts when the metadata has labels."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from typing import Any

from .. import _manifest
from .._plural import plural
from .._sizes import megabytes
from ._common import Subparsers, is_url, open_directory, say

EPILOG = """examples:
  gulpio info /data/gulps
  gulpio info /data/gulps --json
  gulpio info /data/gulps --shapes     + videos per frame size (the shape buckets)
"""


def add_parser(sub: Subparsers) -> None:
    p = sub.add_parser(
        "info",
        help="chunks, videos, frames, bytes, frame sizes, channels and label counts",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("directory")
    p.add_argument("--json", action="store_true", help="print a JSON report on stdout")
    p.add_argument("--label-field", default="label", help="metadata field to count (label)")
    p.add_argument(
        "--shapes",
        action="store_true",
        help="also a histogram of videos per frame size (first frame, from the indexes): the "
        "buckets of gulpio_rs.torch.GulpBucketBatchSampler",
    )
    p.set_defaults(run=run)


def describe(directory: str, label_field: str = "label") -> dict[str, Any]:
    """The summary as data (see ``--json``)."""
    gd = open_directory(directory, quiet=True)
    sizes: Counter[str] = Counter()
    channels: Counter[str] = Counter()
    labels: Counter[str] = Counter()
    frames = frame_bytes = disk_bytes = indexed = 0
    # Per encoding: frames, stored bytes, and segments (video encoding).
    encodings: dict[str, dict[str, int]] = {}
    frame_counts = []
    for pos, (data_len, meta_len) in enumerate(gd.chunk_sizes()):
        disk_bytes += data_len + meta_len
        chunk = gd.native_chunk(pos)
        indexed += bool(chunk.indexed)
        for video in range(len(chunk)):
            shapes = chunk.frame_shapes(video)
            stored = sum(length - pad for _, pad, length in chunk.frame_info(video))
            frame_bytes += stored
            segments = chunk.segments(video)
            name = "jpeg" if segments is None else f"video ({segments[0]})"
            enc = encodings.setdefault(name, {"frames": 0, "bytes": 0, "segments": 0})
            enc["frames"] += len(shapes)
            enc["bytes"] += stored
            enc["segments"] += 0 if segments is None else len(segments[2])
            frame_counts.append(len(shapes))
            frames += len(shapes)
            for h, w, c in shapes:
                sizes[f"{w}x{h}" if w else "unknown"] += 1
                channels[str(c) if c else "unknown"] += 1
            if label_field:
                value = json.loads(chunk.meta_data(video) or "[]")
                if value and isinstance(value[0], dict) and label_field in value[0]:
                    labels[str(value[0][label_field])] += 1
    return {
        "directory": directory,
        "chunks": gd.num_chunks,
        "indexed_chunks": indexed,
        "broken_chunks": sum(p["chunk_skipped"] for p in gd.problems),
        "videos": len(gd),
        "frames": frames,
        # The frames' stored bytes (JPEGs, or video segments), as `gulpio ingest` and
        # `gulpio check` count them.
        "bytes": frame_bytes,
        "encodings": encodings,
        # The .gulp and .gmeta files (padding and metadata included; indexes not).
        "disk_bytes": disk_bytes,
        "frames_per_video": {
            "min": min(frame_counts, default=0),
            "max": max(frame_counts, default=0),
            "mean": round(frames / len(frame_counts), 2) if frame_counts else 0,
        },
        "frame_sizes": dict(sizes.most_common()),
        "channels": dict(channels.most_common()),
        "labels": dict(labels.most_common()),
        # How the dataset opened: through its manifest, or by listing and why.
        "opened_by": gd.opened["how"],
        "opened": gd.opened,
        "manifest": None if is_url(directory) else _manifest.status(directory),
    }


def video_shapes(directory: str) -> dict[str, int]:
    """Videos per first-frame size, ``"WxH"`` (``"unknown"`` for chunks without an index and
    videos without frames), most common first: what ``GulpBucketBatchSampler`` buckets by."""
    _, shapes = open_directory(directory, quiet=True).video_shapes()
    sizes: Counter[str] = Counter(f"{w}x{h}" if w else "unknown" for h, w, _ in shapes.tolist())
    return dict(sizes.most_common())


def _print_shapes(shapes: dict[str, int]) -> None:
    total = sum(shapes.values())
    most = max(shapes.values(), default=0)
    print(f"  videos per frame size (first frame), {plural(len(shapes), 'size')}:")
    width = max((len(k) for k in shapes), default=0)
    for size, n in shapes.items():
        bar = "#" * max(1, round(40 * n / most))
        print(f"    {size:>{width}}  {n:>9,}  {100 * n / total:5.1f}%  {bar}")


def run(args: argparse.Namespace) -> int:
    info = describe(args.directory, args.label_field)
    if args.shapes:
        info["video_frame_sizes"] = video_shapes(args.directory)
    if args.json:
        print(json.dumps(info, indent=1))
        return 0
    fpv = info["frames_per_video"]
    say(f"{info['directory']}")
    say(
        f"  chunks   {info['chunks']} ({info['indexed_chunks']} with a checksummed index"
        + (f", {info['broken_chunks']} unreadable" if info["broken_chunks"] else "")
        + ")"
    )
    say(f"  videos   {info['videos']:,}")
    say(f"  frames   {info['frames']:,} ({fpv['min']}-{fpv['max']} per video, mean {fpv['mean']})")
    say(
        f"  bytes    {megabytes(info['bytes'])} of frames "
        f"({megabytes(info['disk_bytes'])} in .gulp and .gmeta files)"
    )
    for name, enc in info["encodings"].items():
        per_frame = enc["bytes"] / enc["frames"] / 1000 if enc["frames"] else 0.0
        line = f"  encoding {name}: {enc['frames']:,} frames, {per_frame:.1f} kB per frame"
        if enc["segments"]:
            line += f", {enc['frames'] / enc['segments']:.1f} frames per segment"
        say(line)
    top = list(info["frame_sizes"].items())[:5]
    say("  sizes    " + ", ".join(f"{s} ({n:,})" for s, n in top))
    say("  channels " + ", ".join(f"{c} ({n:,})" for c, n in info["channels"].items()))
    if info["labels"]:
        shown = list(info["labels"].items())[:10]
        more = len(info["labels"]) - len(shown)
        say(
            f"  labels   {len(info['labels'])}: "
            + ", ".join(f"{k} ({n:,})" for k, n in shown)
            + (f", ... {more} more" if more > 0 else "")
        )
    if not is_url(info["directory"]):
        say(f"  manifest {_manifest.summary(info['manifest'])}")
    say(f"  opened   {_manifest.opened_line(info['opened'])}")
    if args.shapes:
        _print_shapes(info["video_frame_sizes"])
    return 0
