"""``gulpio ingest``: gulp a dataset with a built-in adapter, or any adapter class by import
path. The adapter's constructor signature becomes the command's arguments: parameters without
a default are positionals, the others are ``--options`` typed after their default, so a user
adapter gets a proper command line without generating a script (gulpio2's
``gulp2_register_adapter`` did that, and no longer runs on Python 3.11).
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import json
import os
import sys
import textwrap
import warnings
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from .._encode_options import DEFAULT, ENCODINGS, GULPIO2, SUBSAMPLINGS
from .._plural import plural
from ..errors import GulpError
from ._common import Subparsers, count_arg, error_line, say

if TYPE_CHECKING:
    from argparse import _ArgumentGroup

    from ..ingest.report import IngestReport

#: command name -> (class name in gulpio_rs.adapters, example arguments)
BUILTIN = {
    "20bn-json-videos": ("Custom20BNJsonVideoAdapter", "labels.json videos/ out/ --frame-rate 12"),
    "20bn-csv-webm": ("Custom20BNCsvWebmAdapter", "train.csv videos/ out/"),
    "20bn-csv-jpeg": ("Custom20BNCsvJpegAdapter", "train.csv frames/ out/"),
    "video-folder": ("VideoFolderAdapter", "kinetics/train/ out/ --frame-size 256"),
    "video-files": ("VideoFilesAdapter", "videos/ out/ --frame-size 256"),
    "image-folder": ("ImageFolderAdapter", "imagenet/train/ out/ --img-size 256"),
    "image-list": ("ImageListAdapter", "list.txt out/ --root-folder images/"),
    "frames-folder": ("FramesFolderAdapter", "extracted/ out/"),
    "kinetics": ("KineticsAdapter", "kinetics.json videos/ out/"),
    "activitynet": ("ActivitynetAdapter", "activity_net.json videos/ out/ --phase training"),
    "jpeg-clips": ("JpegFolderClipsAdapter", "clips.json clips/ out/"),
}

#: Finished, but some videos were skipped or stored cut short (listed), by this run or by
#: the earlier one it resumed; not when a rerun finds nothing to do (the summary says what
#: was skipped before).
EXIT_SKIPPED = 3
#: 128 + SIGINT, what a shell reports for a command stopped by Ctrl-C.
EXIT_INTERRUPTED = 130

#: Help of the built-in adapters' parameters (a user adapter's show their default only).
PARAM_HELP = {
    "folder": "the input folder (its layout: see the description above)",
    "json_file": "the JSON file that lists the videos and their labels",
    "csv_file": "the ';'-separated CSV file that lists the ids (and labels)",
    "input_file": "the text file that lists the images, one 'path,label' per line",
    "clips_json": "the JSON file that lists the clips",
    "root_folder": "folder the listed paths are relative to (default: as listed)",
    "frame_size": "resize frames so their shorter side is this many pixels (-1: keep the size)",
    "img_size": "resize images so their shorter side is this many pixels (-1: keep the size)",
    "frame_rate": "frames per second to keep (default: every frame of the video)",
    "max_frames": "keep at most this many frames per video (default: all)",
    "shuffle": "shuffle the items (reproducibly, with --seed) before cutting them into chunks",
    "seed": "seed of --shuffle",
    "file_extensions": "file extensions to collect, case-insensitive",
    "labels": "whether there is a class level of folders (default: detected)",
    "phase": "the subset of the JSON to take (training, validation, testing; None: all)",
    "label_name": "the JSON field that holds the label",
    "remove_duplicate_ids": "drop repeated ids in the list (else they are reported as skipped)",
}
#: Accepted for gulpio2's command lines and ignored (videos are decoded in-process).
HIDDEN = {"shm_dir_path"}

EPILOG = """exit status: 0 all videos written (or already in the dataset), 3 finished but some
videos were skipped or stored cut short (listed), 1 stopped by an error (or by the first bad
video with --strict), 2 bad arguments, 130 interrupted (Ctrl-C). A rerun that finds nothing
left to do exits 0 and says so with what earlier runs skipped ("nothing to do: ...; N files
were skipped before").

Videos are checked against what their file declares: one that decodes to fewer frames (a file
cut short that still opens) is stored and listed (--skip-truncated leaves it out instead).
Audio streams are not stored; the summary says in how many files they were ignored.

Run the same command again after an interruption (Ctrl-C, kill, machine loss): finished chunks
are kept and the rest is written. Videos the output already holds (same id) are not decoded
again, so a rerun over a folder with more videos adds only the new ones. With --num-shards N,
start N copies with --shard-index 0..N-1 (a job array) on one shared output directory. With
--ray, the chunks run as tasks of a Ray cluster instead of local processes (same output, byte
for byte): the cluster at ADDRESS, else the running one (RAY_ADDRESS, `ray start --head`),
else a local one started for this run.
"""


def add_parser(sub: Subparsers) -> None:
    # Only for `gulpio --help`; `main` hands `gulpio ingest ...` straight to `run_argv`, because
    # the arguments depend on the adapter, which is known only once its name has been read.
    p = sub.add_parser(
        "ingest",
        help="gulp a dataset (built-in adapters, or --adapter package.module:Class)",
        add_help=False,
    )
    p.set_defaults(run=lambda args: run_argv([]))


def _adapter_class(spec: str) -> type:
    if spec in BUILTIN:
        from .. import adapters

        name = BUILTIN[spec][0]
        cls: type | None = getattr(adapters, name, None)
        if cls is None:
            raise GulpError(f"built-in adapter {name} is not available in this version")
        return cls
    module, sep, qualname = spec.partition(":")
    if not sep or not module or not qualname:
        raise GulpError(
            f"unknown adapter {spec!r}: use one of {', '.join(BUILTIN)} or "
            "--adapter package.module:ClassName"
        )
    obj: object
    try:
        obj = importlib.import_module(module)
    except ImportError as e:
        raise GulpError(f"cannot import {module!r} for --adapter {spec}: {e}") from e
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise GulpError(f"{module!r} has no {qualname!r} (from --adapter {spec})")
    if not inspect.isclass(obj):
        raise GulpError(f"--adapter {spec} is not a class")
    return obj


#: Parameters that are a frame size (pixels of the shorter side, or -1 to keep it).
SIZES = ("frame_size", "img_size")


def _size(text: str) -> int:
    """An argparse type: a frame size, 1 or more pixels, or -1 (keep the size)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value != -1 and value < 1:
        raise argparse.ArgumentTypeError(
            f"expected a number of pixels for the shorter side (1 or more), or -1 to keep the "
            f"frames' size; not {text!r}"
        )
    return value


def _literal(text: str) -> Any:
    """Python/JSON literals become values (``3``, ``[1, 2]``, ``None``); anything else stays a
    string, so paths need no quoting."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _aliases(group: _ArgumentGroup, dest: str, aliases: list[str], **kwargs: Any) -> None:
    """Hidden spellings of an option (gulpio2's scripts used underscores): same destination,
    no default of their own, not listed in --help."""
    for alias in aliases:
        group.add_argument(alias, dest=dest, default=argparse.SUPPRESS, help=argparse.SUPPRESS,
                           **kwargs)  # fmt: skip


def _add_param(group: _ArgumentGroup, param: inspect.Parameter) -> None:
    names = [f"--{param.name.replace('_', '-')}"]
    if "_" in param.name:
        kind: dict[str, object]
        kind = {"action": argparse.BooleanOptionalAction} if isinstance(param.default, bool) else {}
        if not kind:
            kind = {"type": type(param.default)} if isinstance(param.default, (int, float)) else {}
        _aliases(group, param.name, [f"--{param.name}"], **kind)
    default = param.default
    shown = ", ".join(default) if isinstance(default, (list, tuple)) else repr(default)
    help_ = PARAM_HELP.get(param.name, "")
    if default is not None and not isinstance(default, bool):
        help_ = f"{help_} (default: {shown})".strip()
    if param.name in HIDDEN:
        help_ = argparse.SUPPRESS
    if isinstance(default, bool):
        group.add_argument(
            *names,
            dest=param.name,
            action=argparse.BooleanOptionalAction,
            default=default,
            help=help_ or None,
        )
    elif param.name in SIZES:
        group.add_argument(*names, dest=param.name, type=_size, default=default, help=help_)
    elif isinstance(default, int):
        group.add_argument(*names, dest=param.name, type=int, default=default, help=help_)
    elif isinstance(default, float):
        group.add_argument(*names, dest=param.name, type=float, default=default, help=help_)
    elif isinstance(default, (list, tuple)):
        group.add_argument(*names, dest=param.name, nargs="+", default=default, help=help_)
    elif isinstance(default, str):
        group.add_argument(*names, dest=param.name, default=default, help=help_)
    else:
        group.add_argument(*names, dest=param.name, type=_literal, default=default, help=help_)


def _parameters(cls: type[Any]) -> list[inspect.Parameter]:
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    return [p for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def build_parser(cls: type, spec: str) -> argparse.ArgumentParser:
    params = _parameters(cls)
    doc = inspect.getdoc(cls) or ""
    example = BUILTIN[spec][1] if spec in BUILTIN else "INPUT... out/"
    shown = spec if spec in BUILTIN else f"--adapter {spec}"
    parser = argparse.ArgumentParser(
        prog=f"gulpio ingest {shown}",
        description=_plain(doc.split("\n\n")[0]),
        epilog=f"example:\n  gulpio ingest {shown} {example}\n\n{EPILOG}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for p in params:
        if p.default is p.empty and p.name != "output_folder":
            parser.add_argument(
                p.name,
                type=int if p.annotation in (int, "int") else str,
                help=PARAM_HELP.get(p.name),
            )
    parser.add_argument("output_folder", help="the gulp directory to write (or extend)")
    adapter = parser.add_argument_group(f"{cls.__name__} options")
    for p in params:
        if p.default is not p.empty and p.name != "output_folder":
            _add_param(adapter, p)
    g = parser.add_argument_group("ingest options")
    g.add_argument("--videos-per-chunk", dest="videos_per_chunk", type=int, default=100,
                   help="videos per chunk file (default: 100)")  # fmt: skip
    per_chunk = ["--videos_per_chunk", "--images-per-chunk", "--images_per_chunk"]
    _aliases(g, "videos_per_chunk", per_chunk, type=int)
    workers = count_arg("--num-workers", zero_means_all=False)
    g.add_argument("--num-workers", dest="num_workers", type=workers, default=None,
                   help="worker processes (default: the usable cores)")  # fmt: skip
    _aliases(g, "num_workers", ["--num_workers"], type=workers)
    g.add_argument("--quality", type=int, default=DEFAULT.quality,
                   help="JPEG quality (default: %(default)s)")  # fmt: skip
    g.add_argument("--subsampling", default=DEFAULT.subsampling, choices=SUBSAMPLINGS,
                   help="chroma subsampling (default: %(default)s; gulpio2 wrote "
                   f"{GULPIO2.subsampling})")  # fmt: skip
    g.add_argument("--restart-rows", dest="restart_rows", action="store_true",
                   help="a restart marker after every MCU row of the encoded frames, so "
                   "cropped reads decode only the rows they need (+0.1%% bytes)")  # fmt: skip
    g.add_argument("--encoding", default=DEFAULT.encoding, choices=ENCODINGS,
                   help="jpeg: a JPEG per frame (gulpio2's format); video: each video as AV1 "
                   "segments, 14-17x smaller and read the same way, but slower: ingest at "
                   "0.11-0.20x the JPEG rate (see --preset), reads of 256-px clips at "
                   "0.6-0.95x JPEG's frames/s (README, 'Video as video'); gulpio2 cannot "
                   "read them (default: %(default)s)")  # fmt: skip
    g.add_argument("--crf", type=int, default=DEFAULT.crf,
                   help="--encoding video: quality, 0-63, lower is better and larger "
                   "(default: %(default)s)")  # fmt: skip
    g.add_argument("--gop", type=int, default=DEFAULT.gop,
                   help="--encoding video: frames per segment (default: %(default)s)")  # fmt: skip
    g.add_argument("--preset", type=int, default=DEFAULT.preset,
                   help="--encoding video: SVT-AV1's speed, 0-13; 12 encodes ~2.5x faster "
                   "for ~1.3x the bytes at equal quality (default: %(default)s)")  # fmt: skip
    g.add_argument("--strict", action="store_true", help="stop at the first bad video")
    g.add_argument("--skip-truncated", dest="skip_truncated", action="store_true",
                   help="skip videos that decode to fewer frames than their file declares "
                   "(default: store them and list them)")  # fmt: skip
    g.add_argument("--shard-index", type=int, default=0, help="this shard (default: 0)")
    g.add_argument("--num-shards", type=int, default=1, help="shards in the job (default: 1)")
    g.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                   help="run the chunks as Ray tasks on the cluster at ADDRESS (default: the "
                   "running one, else a local one started for this run; needs "
                   "gulpio-rs[ray])")  # fmt: skip
    g.add_argument("--no-manifest", dest="manifest", action="store_false",
                   help="do not give a new dataset a manifest (docs/FORMAT.md §7; default: "
                   "a new dataset gets one, and opens with a few reads at any size)")  # fmt: skip
    g.add_argument("--report", metavar="PATH", help="also write the report as JSON to PATH")
    g.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar (default: when stderr is a terminal)")  # fmt: skip
    return parser


def _plain(text: str) -> str:
    """A docstring paragraph as one line of plain text (no reST ``literal`` markup)."""
    return " ".join(text.replace("``", "").split())


def _overview() -> str:
    from .. import adapters

    lines = [
        "usage: gulpio ingest ADAPTER [args...] OUTPUT [options]",
        "       gulpio ingest --adapter package.module:ClassName [args...] OUTPUT [options]",
        "",
        "Gulp a dataset into OUTPUT. Built-in adapters (gulpio ingest ADAPTER --help for "
        "their arguments):",
    ]
    for name, (cls_name, _) in BUILTIN.items():
        cls = getattr(adapters, cls_name, None)
        if cls is not None:
            summary = _plain((inspect.getdoc(cls) or "").split("\n\n")[0])
            lines += textwrap.wrap(
                summary,
                100,
                initial_indent=f"  {name:18s} ",
                subsequent_indent=" " * 21,
                break_on_hyphens=False,
            )
    lines += [
        "",
        "Any adapter class (gulpio_rs.adapters.AbstractDatasetAdapter) can be run by import path;",
        "its constructor's parameters become the arguments.",
        "",
        "examples:",
        "  gulpio ingest video-folder ucf101/ gulps/ --frame-size 128 --num-workers 8",
        "  gulpio ingest --adapter mypkg.adapters:EpicAdapter annotations.csv frames/ gulps/",
    ]
    return "\n".join(lines)


def run_argv(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(_overview())
        return 0 if argv else 2
    if argv[0] == "--adapter" or argv[0].startswith("--adapter="):
        if "=" in argv[0]:
            spec, rest = argv[0].split("=", 1)[1], argv[1:]
        elif len(argv) > 1:
            spec, rest = argv[1], argv[2:]
        else:
            print("gulpio ingest: error: --adapter needs package.module:ClassName", file=sys.stderr)
            return 2
    else:
        spec, rest = argv[0], argv[1:]
    try:
        cls = _adapter_class(spec)
    except GulpError as e:
        return error_line("gulpio ingest", e, status=2)
    args = build_parser(cls, spec).parse_args(rest)
    from ..ingest.report import NothingToIngestError, SettingsChangedError

    try:
        return _run(cls, args)
    except KeyboardInterrupt as e:
        report = getattr(e, "report", None)
        done = (
            "before any chunk was written"
            if report is None
            else (
                f"after {plural(report.chunks_written, 'chunk')}"
                + (f" ({report.chunks_resumed} done earlier)" if report.chunks_resumed else "")
            )
        )
        print(
            f"gulpio ingest: interrupted {done}; rerun the same command to resume",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    except (NothingToIngestError, SettingsChangedError) as e:
        return error_line("gulpio ingest", e, status=2)
    except (GulpError, OSError, KeyError, ValueError) as e:
        return error_line("gulpio ingest", e)


def _run(cls: type, args: argparse.Namespace) -> int:
    params = _parameters(cls)
    kwargs = {p.name: getattr(args, p.name) for p in params if hasattr(args, p.name)}
    return ingest_with(
        cls,
        kwargs,
        args.output_folder,
        videos_per_chunk=args.videos_per_chunk,
        num_workers=args.num_workers,
        quality=args.quality,
        subsampling=args.subsampling,
        restart_rows=args.restart_rows,
        encoding=args.encoding,
        crf=args.crf,
        gop=args.gop,
        preset=args.preset,
        strict=args.strict,
        skip_truncated=args.skip_truncated,
        manifest=args.manifest,
        shard_index=args.shard_index,
        num_shards=args.num_shards,
        report=args.report,
        progress=args.progress,
        ray=args.ray,
    )


def ingest_with(
    cls: type,
    kwargs: dict[str, Any],
    output_folder: str,
    *,
    videos_per_chunk: int = 100,
    num_workers: int | None = None,
    report: str | None = None,
    ray: str | None = None,
    **options: Any,
) -> int:
    """Builds the adapter (passing ``output_folder`` if its constructor takes one), gulps it,
    prints the report and returns the exit status. ``options``: the other keyword arguments
    of :class:`~gulpio_rs.GulpIngestor` (``quality``, ``strict``, ``progress``, ...), with its
    defaults."""
    from .. import _native
    from .._threads import usable_cores
    from ..ingest import GulpIngestor, IngestWarning
    from ..ingest.remote import fetch_sidecars, staging_folder, url_like

    kwargs = dict(kwargs)
    remote = _native.is_remote_url(output_folder)
    if remote:
        staging = staging_folder(output_folder)
        print(
            f"staging chunks in {staging} before they are uploaded (removed once the upload "
            "is complete; kept after a failure, for a rerun to resume)",
            file=sys.stderr,
        )
    elif (url := url_like(output_folder)) is not None:
        print(
            f"gulpio ingest: warning: {output_folder!r} looks like a dataset URL with a typo "
            f"(did you mean {url}?); writing to the local folder {os.path.abspath(output_folder)}",
            file=sys.stderr,
        )
    if any(p.name == "output_folder" for p in _parameters(cls)):
        # Adapters write label2idx.json into their output folder: for a dataset URL that is
        # the local staging folder, uploaded with the chunks (and seeded from the dataset's
        # own, so that an extension keeps the label indices).
        if remote:
            fetch_sidecars(output_folder, staging)
        kwargs["output_folder"] = staging if remote else output_folder
    from ..ingest.report import NothingToIngestError

    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        try:
            adapter = cls(**kwargs)
        except FileNotFoundError as e:  # the input folder or list: a bad argument
            raise NothingToIngestError(str(e)) from e
    if len(adapter) > 0:
        # Only then: for an empty input the one-line error says it all.
        for w in said:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    with warnings.catch_warnings():
        # The summary printed below lists every skipped video; no need to warn as well.
        warnings.simplefilter("ignore", IngestWarning)
        warnings.filterwarnings("ignore", message=".*looks like a dataset URL")  # said above
        result = GulpIngestor(
            adapter,
            output_folder,
            videos_per_chunk,
            num_workers or usable_cores(),
            executor="process" if ray is None else "ray",
            ray_address=ray or None,
            **options,
        )()
    for line in result.summary().splitlines():
        say(line)
    if report:
        with open(report, "w") as f:
            json.dump(asdict(result), f, indent=1)
    return exit_status(result)


def exit_status(report: IngestReport) -> int:
    """What ``gulpio ingest`` (and ``transcode``) exit with after a finished run: see
    :data:`EXIT_SKIPPED`."""
    return EXIT_SKIPPED if report.has_problems else 0
