"""gulpio2's sanity checks (``gulp2_sanity_check``), with gulpio2's signatures, over a
:class:`~gulpio_rs.GulpDirectory`. Each check returns the list of failing paths or ids."""

from __future__ import annotations

import collections
import os


def check_meta_file_size_larger_zero(gulp_directory) -> list[str]:
    """Paths of empty meta files."""
    return [
        chunk.meta_file_path
        for chunk in gulp_directory.chunks()
        if os.stat(chunk.meta_file_path).st_size == 0
    ]


def check_data_file_size_larger_zero(gulp_directory) -> list[str]:
    """Paths of empty data files."""
    return [
        chunk.data_file_path
        for chunk in gulp_directory.chunks()
        if os.stat(chunk.data_file_path).st_size == 0
    ]


def check_data_file_size(gulp_directory) -> list[str]:
    """Paths of data files whose size differs from the published end of their records (an
    unpublished tail or a truncation)."""
    return [
        chunk.data_file_path
        for chunk in gulp_directory.chunks()
        if os.stat(chunk.data_file_path).st_size != chunk.published_len
    ]


def check_for_duplicate_ids(gulp_directory) -> list[str]:
    """Ids present in more than one chunk (opening a directory already refuses these)."""
    return get_duplicate_entries(extract_all_ids(gulp_directory))


def extract_all_ids(gulp_directory) -> list[str]:
    """Every video id of every chunk, in chunk order."""
    all_ids: list[str] = []
    for chunk in gulp_directory.chunks():
        all_ids.extend(chunk.keys())
    return all_ids


def get_duplicate_entries(list_) -> list:
    counts = collections.Counter(list_)
    return [item for item in counts if counts[item] > 1]


def check_for_failures(result) -> None:
    """Print gulpio2's report for one check: ``{'message': ..., 'failures': [...]}``."""
    print("Sanity Check: {}".format(result["message"]))
    if len(result["failures"]):
        print("Test failed for: {}".format(result["failures"]))
    else:
        print("Test passed")
