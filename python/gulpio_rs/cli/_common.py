"""What every subcommand needs: open a dataset directory or say in one line why not, print
data safely, and stop quietly when the reader of its output goes away."""

from __future__ import annotations

import argparse
import functools
import os
import select
import signal
import sys
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, ParamSpec, TextIO

from .._choices import ManifestMode
from .._terminal import printable
from ..errors import BrokenChunkWarning, EmptyDirectoryWarning, GulpError

if TYPE_CHECKING:
    from ..directory import GulpDirectory

_P = ParamSpec("_P")

#: What each subcommand module's ``add_parser`` adds its parser to (argparse has no public
#: name for it; generic only in its type stubs).
if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:
    Subparsers = argparse._SubParsersAction

#: Exit status after the reader of stdout went away (``gulpio ls DIR | head -1``): what a
#: shell reports for ``ls`` or ``cat`` killed by SIGPIPE in the same place.
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE


def say(*parts: object, file: TextIO | None = None) -> None:
    """``print`` for human output: the line with data escaped by :func:`printable`."""
    print(printable(" ".join(str(p) for p in parts)), file=file)


def error_line(prog: str, e: BaseException, status: int = 1) -> int:
    """Print the one-line error of an expected failure on stderr; returns ``status``.

    A ``BrokenPipeError`` from our own stdout (the reader went away) is re-raised for
    :func:`entry_point`: that is no error, and saying so would only add a line to stderr."""
    if output_closed(e):
        raise e
    message = e.args[0] if isinstance(e, KeyError) and e.args else e
    say(f"{prog}: error: {message}", file=sys.stderr)
    return status


def output_closed(e: BaseException) -> bool:
    """True if ``e`` is the EPIPE of writing to stdout after its reader went away."""
    return isinstance(e, BrokenPipeError) and _reader_gone(sys.stdout)


def _reader_gone(stream: TextIO) -> bool:
    # A pipe (or socket) whose reading end is closed polls as POLLERR for its writer.
    try:
        fd = stream.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(ev & (select.POLLERR | select.POLLHUP) for _, ev in poller.poll(0))
    except (AttributeError, OSError, ValueError):
        return False


def entry_point(main: Callable[_P, int]) -> Callable[_P, int]:
    """Wraps a console script's ``main`` (returning an exit status) so that it behaves like
    a Unix tool when the reader of its output goes away (``| head -1``): it stops quietly,
    without a traceback or an error line, with :data:`EXIT_BROKEN_PIPE`."""

    @functools.wraps(main)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> int:
        try:
            try:
                return main(*args, **kwargs)
            finally:
                # Piped output is block-buffered: a reader that went away usually shows up
                # here (or at interpreter exit, as "Exception ignored ... BrokenPipeError").
                sys.stdout.flush()
        except BrokenPipeError:
            if not _reader_gone(sys.stdout):
                raise
            # What is still buffered (and any later output) goes nowhere, so the flush at
            # interpreter exit cannot fail again.
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                for stream in (sys.stdout, sys.stderr):
                    if _reader_gone(stream):
                        os.dup2(devnull, stream.fileno())
            finally:
                os.close(devnull)
            return EXIT_BROKEN_PIPE

    return run


def count_arg(name: str, *, zero_means_all: bool = True) -> Callable[[str], int]:
    """An argparse ``type=`` for a thread or worker count given as ``name``: an integer in
    the accepted range, else argparse's usage error (not a traceback)."""
    import argparse

    from .._threads import thread_count

    def parse(text: str) -> int:
        value: int | str
        try:
            value = int(text)
        except ValueError:
            value = text
        try:
            return thread_count(value, name, zero_means_all=zero_means_all)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return parse


def is_url(directory: str) -> bool:
    """True for dataset URLs (``s3://``, ``gs://``, ``az://``, ``http(s)://``)."""
    from .. import _native

    return _native.is_remote_url(directory)


def refuse_remote(directory: str, command: str, why: str) -> None:
    """GulpError for subcommands that only change local datasets."""
    if is_url(directory):
        from .. import _native

        shown = _native.redact_url(directory)
        raise GulpError(f"{shown}: `gulpio {command}` works on local directories only: {why}")


def open_directory(
    directory: str, *, quiet: bool = False, manifest: ManifestMode = "auto"
) -> GulpDirectory:
    """A ``GulpDirectory`` for ``directory`` (a local path or a dataset URL, with credentials
    from the environment); GulpError if it is missing or holds no chunks.

    With ``quiet``, broken-chunk warnings are suppressed (the caller reports
    ``gd.problems`` itself). Tools that must see every chunk on disk (check, index) open with
    ``manifest="off"``.
    """
    from ..directory import GulpDirectory

    if not is_url(directory) and not os.path.isdir(directory):
        if os.path.isfile(directory):
            raise GulpError(
                f"{directory}: is a file; give the dataset's folder (the one holding the "
                f"data_*.gulp and meta_*.gmeta files): {os.path.dirname(directory) or '.'}"
            )
        raise GulpError(f"{directory}: no such directory")
    with warnings.catch_warnings():
        if quiet:
            warnings.simplefilter("ignore", BrokenChunkWarning)
        warnings.simplefilter("ignore", EmptyDirectoryWarning)  # said below, as an error
        gd = GulpDirectory(directory, manifest=manifest)
    if gd.num_chunks == 0 and not gd.problems:
        raise GulpError(f"{directory}: not a gulp directory (no data*.gulp / meta*.gmeta)")
    return gd
