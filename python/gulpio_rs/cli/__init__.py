"""The ``gulpio`` command: one module per subcommand, each with ``add_parser(subparsers)``
and ``run(args) -> int``.

Expected problems (missing directory, not a gulp directory, damaged data) are one line on
stderr and exit code 1, never a traceback; Ctrl-C is one line and exit code 130. Data in human
output (ids, labels, paths, messages) is escaped (``_terminal.printable``); when the reader of
the output goes away (``| head``) the command stops quietly (``_common.entry_point``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from .. import __version__
from ..errors import GulpError
from . import check, demo, index, info, ingest, ls, repair, show, transcode
from ._common import entry_point, error_line

COMMANDS = [demo, ingest, check, info, ls, index, repair, show, transcode]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gulpio", description="Store and read video datasets in gulp chunks."
    )
    parser.add_argument("--version", action="version", version=f"gulpio-rs {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return parser


@entry_point
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:
        # The whole help, not argparse's one-line "the following arguments are required".
        build_parser().print_help(sys.stderr)
        return 2
    if argv[:1] == ["ingest"]:
        # Its arguments depend on the adapter named in them; it parses them itself.
        return ingest.run_argv(argv[1:])
    args = build_parser().parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run  # each subcommand's run()
    try:
        return run(args)
    except KeyboardInterrupt:
        print(f"gulpio {args.command}: interrupted", file=sys.stderr)
        return ingest.EXIT_INTERRUPTED
    except demo.DemoOutputError as e:
        return error_line(f"gulpio {args.command}", e, status=2)
    except (GulpError, OSError, KeyError) as e:
        return error_line(f"gulpio {args.command}", e)


if __name__ == "__main__":
    sys.exit(main())
