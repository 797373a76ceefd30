"""``gulp2_sanity_check``: gulpio2's sanity checks of a gulp directory, with gulpio2's output.

The checks, their order and what they print are gulpio2's. What differs: the exit code is 0
only if every check passed (gulpio2 always exited 0), and chunks the directory could not read
(a damaged or missing ``.gmeta``, a stale index) are reported on stderr, one line each, and
also make the exit code 1, since the checks only see the chunks that could be opened.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, TypedDict

from ..errors import GulpError
from ..sanity_utils import (
    check_data_file_size,
    check_data_file_size_larger_zero,
    check_for_duplicate_ids,
    check_for_failures,
    check_meta_file_size_larger_zero,
)
from ._common import entry_point, error_line, say

if TYPE_CHECKING:
    from ..directory import GulpDirectory

PROG = "gulp2_sanity_check"

USAGE = """gulp2_sanity_check

Usage:
    gulp2_sanity_check <gulp_directory>

Arguments:
    gulp_directory      Directory where the Gulp-Files are located
"""


class _Test(TypedDict):
    message: str
    check: Callable[[GulpDirectory], list[str]]


TESTS: list[_Test] = [
    {"message": "Check for empty meta files", "check": check_meta_file_size_larger_zero},
    {"message": "Check for empty data files", "check": check_data_file_size_larger_zero},
    {"message": "Check data file size equals size in meta file", "check": check_data_file_size},
    {"message": "Check presence of duplicate ids", "check": check_for_duplicate_ids},
]


def run_tests(gulp_directory: GulpDirectory) -> bool:
    """Run and print every check in order, as gulpio2 does; True if all of them passed."""
    passed = True
    for test in TESTS:
        result = {"message": test["message"], "failures": test["check"](gulp_directory)}
        check_for_failures(result)
        passed = passed and not result["failures"]
    return passed


@entry_point
def main(argv: list[str] | None = None) -> int:
    """Check the directory in ``argv`` (default: ``sys.argv[1:]``); exit code 0 if it is sane."""
    from ..directory import GulpDirectory, problem_text

    parser = argparse.ArgumentParser(
        prog=PROG, description=USAGE, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("gulp_directory", help="Directory where the Gulp-Files are located")
    args = parser.parse_args(argv)
    try:
        if not os.path.isdir(args.gulp_directory):
            raise GulpError(f"{args.gulp_directory}: no such directory")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # reported below from gd.problems, one line each
            gd = GulpDirectory(args.gulp_directory)
            passed = run_tests(gd)
        for problem in gd.problems:
            say(f"{PROG}: {problem_text(problem)}", file=sys.stderr)
    except (GulpError, OSError, KeyError) as e:
        return error_line(PROG, e)
    return 0 if passed and not gd.problems else 1


if __name__ == "__main__":
    sys.exit(main())
