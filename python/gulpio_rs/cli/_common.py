"""What every subcommand needs: open a dataset directory, or say in one line why not."""

from __future__ import annotations

import os
import warnings

from ..errors import BrokenChunkWarning, EmptyDirectoryWarning, GulpError


def count_arg(name: str, *, zero_means_all: bool = True):
    """An argparse ``type=`` for a thread or worker count given as ``name``: an integer in
    the accepted range, else argparse's usage error (not a traceback)."""
    import argparse

    from .._reading import thread_count

    def parse(text: str) -> int:
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


def open_directory(directory: str, *, quiet: bool = False):
    """A ``GulpDirectory`` for ``directory`` (a local path or a dataset URL, with credentials
    from the environment); GulpError if it is missing or holds no chunks.

    With ``quiet``, broken-chunk warnings are suppressed (the caller reports
    ``gd.problems`` itself).
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
        gd = GulpDirectory(directory)
    if gd.num_chunks == 0 and not gd.problems:
        raise GulpError(f"{directory}: not a gulp directory (no data*.gulp / meta*.gmeta)")
    return gd
