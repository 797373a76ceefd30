"""gulpio2's ingest scripts (``gulp2_20bn_json_videos`` and friends) with their arguments, as
thin wrappers over ``gulpio ingest``, so existing pipelines keep running.

What differs from gulpio2 (see docs/COMPATIBILITY.md): videos are decoded in-process (no
``ffmpeg`` binary, ``--shm_dir`` is accepted and unused), arrays are stored at q90 4:2:0
unless ``--subsampling 4:4:4`` is given, skipped videos are listed at the end (exit status 3),
and ``--extend`` is accepted as before: a run always extends, and re-running an interrupted
run resumes it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .._encode_options import DEFAULT, SUBSAMPLINGS
from ..errors import GulpError
from ._common import count_arg, entry_point, error_line


@dataclass(frozen=True)
class Script:
    name: str
    adapter: str
    #: (positional name in gulpio2's usage, adapter parameter)
    positionals: list[tuple[str, str]]
    #: (option, adapter parameter, type, default)
    options: Sequence[tuple[str, str, type, object]] = field(default_factory=list)
    #: (flag, adapter parameter)
    flags: list[tuple[str, str]] = field(default_factory=list)
    per_chunk: str = "--videos_per_chunk"
    extend_flag: bool = False


_VIDEO_OPTS = [("--frame_size", "frame_size", int, -1), ("--shm_dir", "shm_dir_path", str, None)]
_SHUFFLE = [("--shuffle", "shuffle")]

SCRIPTS = {
    s.name: s
    for s in [
        Script(
            "gulp2_20bn_json_videos",
            "Custom20BNJsonVideoAdapter",
            [("input_json", "json_file"), ("videos_directory", "folder")],
            [
                *_VIDEO_OPTS,
                ("--frame_rate", "frame_rate", int, 8),
                ("--label_name", "label_name", str, "template"),
            ],  # fmt: skip
            [*_SHUFFLE, ("--remove_duplicates", "remove_duplicate_ids")],
            extend_flag=True,
        ),
        Script(
            "gulp2_20bn_csv_webm",
            "Custom20BNCsvWebmAdapter",
            [("input_csv", "csv_file"), ("videos_directory", "folder")],
            # gulpio2's script passed --frame_rate 8 by default, overriding the adapter's 12.
            [
                *_VIDEO_OPTS,
                ("--frame_rate", "frame_rate", int, 8),
                ("--label_name", "label_name", str, "label"),
            ],  # fmt: skip
            [*_SHUFFLE, ("--remove_duplicates", "remove_duplicate_ids")],
            extend_flag=True,
        ),
        Script(
            "gulp2_20bn_csv_jpeg",
            "Custom20BNCsvJpegAdapter",
            [("input_csv", "csv_file"), ("jpeg_directory", "folder")],
            [("--image_size", "frame_size", int, -1), ("--shm_dir", "shm_dir_path", str, None)],
            _SHUFFLE,
        ),
        Script(
            "gulp2_activitynet",
            "ActivitynetAdapter",
            [("input_json", "json_file"), ("videos_directory", "folder")],
            [
                ("--image_size", "frame_size", int, -1),
                ("--shm_dir", "shm_dir_path", str, None),
                ("--phase", "phase", str, "training"),
            ],  # fmt: skip
            _SHUFFLE,
        ),
        Script(
            "gulp2_kinetics",
            "KineticsAdapter",
            [("input_json", "json_file"), ("videos_directory", "folder")],
            [("--image_size", "frame_size", int, -1), ("--shm_dir", "shm_dir_path", str, None)],
            _SHUFFLE,
        ),
        Script(
            "gulp2_image_folder",
            "ImageFolderAdapter",
            [("images_directory", "folder")],
            [("--image_size", "img_size", int, -1)],
            _SHUFFLE,
            per_chunk="--images_per_chunk",
        ),
        Script(
            "gulp2_image_list",
            "ImageListAdapter",
            [("image_list_file", "input_file")],
            # gulpio2's default root_path was "100", a copy-paste bug; "" is what it meant.
            [("--image_size", "img_size", int, -1), ("--root_path", "root_folder", str, "")],
            _SHUFFLE,
            per_chunk="--images_per_chunk",
        ),
        Script(
            "gulp2_video_folder",
            "VideoFolderAdapter",
            [("video_directory", "folder")],
            _VIDEO_OPTS,
            _SHUFFLE,
        ),
    ]
}


def _parser(script: Script) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=script.name,
        description=f"gulpio2's {script.name}, running gulpio-rs (`gulpio ingest` underneath).",
    )
    for usage_name, _ in script.positionals:
        p.add_argument(usage_name)
    p.add_argument("output_directory")
    p.add_argument(script.per_chunk, dest="per_chunk", type=int, default=100)
    p.add_argument(
        "--num_workers", type=count_arg("--num_workers", zero_means_all=False), default=4
    )
    for option, dest, type_, default in script.options:
        p.add_argument(option, dest=dest, type=type_, default=default)
    for flag, dest in script.flags:
        p.add_argument(flag, dest=dest, action="store_true")
    if script.extend_flag:
        p.add_argument("--extend", action="store_true", help="accepted; every run extends")
    p.add_argument("--subsampling", default=DEFAULT.subsampling, choices=SUBSAMPLINGS)
    p.add_argument("--quality", type=int, default=DEFAULT.quality)
    p.add_argument("--version", action="version", version=f"{script.name} (gulpio-rs)")
    return p


def run(name: str, argv: list[str] | None = None) -> int:
    from .. import adapters
    from .ingest import ingest_with

    script = SCRIPTS[name]
    args = _parser(script).parse_args(argv)
    kwargs = {param: getattr(args, usage) for usage, param in script.positionals}
    for _, dest, _, _ in script.options:
        if getattr(args, dest) is not None:
            kwargs[dest] = getattr(args, dest)
    for _, dest in script.flags:
        kwargs[dest] = getattr(args, dest)
    try:
        cls = getattr(adapters, script.adapter)
        return ingest_with(
            cls,
            kwargs,
            args.output_directory,
            videos_per_chunk=args.per_chunk,
            num_workers=args.num_workers,
            quality=args.quality,
            subsampling=args.subsampling,
        )
    except (GulpError, OSError, KeyError, ValueError, AttributeError) as e:
        return error_line(name, e)


def _entry(name: str) -> Callable[[], None]:
    def main() -> None:
        sys.exit(entry_point(run)(name))

    main.__name__ = name
    main.__doc__ = f"Console script {name}."
    return main


json_videos = _entry("gulp2_20bn_json_videos")
csv_webm = _entry("gulp2_20bn_csv_webm")
csv_jpeg = _entry("gulp2_20bn_csv_jpeg")
activitynet = _entry("gulp2_activitynet")
kinetics = _entry("gulp2_kinetics")
image_folder = _entry("gulp2_image_folder")
image_list = _entry("gulp2_image_list")
video_folder = _entry("gulp2_video_folder")
