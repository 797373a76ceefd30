"""gulpio2's sanity checks (``gulp2_sanity_check``), over a :class:`GulpDirectory`."""

from __future__ import annotations

import os
from collections import Counter


def _chunk_paths(gulp_directory):
    for number, data, meta, _index, _first, _count in gulp_directory._table:
        yield number, data, meta


def check_meta_file_size_larger_zero(gulp_directory) -> list[str]:
    """Paths of empty meta files."""
    return [m for _n, _d, m in _chunk_paths(gulp_directory) if os.path.getsize(m) == 0]


def check_data_file_size_larger_zero(gulp_directory) -> list[str]:
    """Paths of empty data files."""
    return [d for _n, d, _m in _chunk_paths(gulp_directory) if os.path.getsize(d) == 0]


def check_data_file_size(gulp_directory) -> list[str]:
    """Paths of data files whose size differs from the end of their last record."""
    failures = []
    for pos, (_n, data, _m) in enumerate(_chunk_paths(gulp_directory)):
        chunk = gulp_directory._handle().chunk(pos)
        if os.path.getsize(data) != chunk.published_len:
            failures.append(data)
    return failures


def extract_all_ids(all_meta_dicts) -> list[str]:
    return [id_ for meta in all_meta_dicts for id_ in meta]


def get_duplicate_entries(all_ids) -> list[str]:
    return [item for item, count in Counter(all_ids).items() if count > 1]


def check_for_duplicate_ids(gulp_directory) -> list[str]:
    """Ids present in more than one chunk (opening the directory already refuses these)."""
    return get_duplicate_entries(extract_all_ids(gulp_directory.all_meta_dicts))


def check_for_failures(result) -> None:
    """Print gulpio2's report for one check: ``result = {'message': ..., 'result': [...]}``."""
    print("Sanity Check: {}".format(result["message"]))
    if result["result"]:
        print("Test failed for: {}".format(result["result"]))
    else:
        print("Test passed")


__all__ = [
    "check_meta_file_size_larger_zero",
    "check_data_file_size_larger_zero",
    "check_data_file_size",
    "check_for_duplicate_ids",
    "extract_all_ids",
    "get_duplicate_entries",
    "check_for_failures",
]
