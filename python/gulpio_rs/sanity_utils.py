"""gulpio2's sanity checks (``gulp2_sanity_check``), with gulpio2's signatures. Each check
returns the list of failing paths or ids.

They read only what gulpio2's read (``gulp_directory.chunks()`` and each chunk's
``meta_dict``, ``data_file_path`` and ``meta_file_path``), so they answer the same on any
object shaped like gulpio2's, not only on a :class:`~gulpio_rs.GulpDirectory` (hence
``Any``: no protocol of ours describes gulpio2's objects).
"""

from __future__ import annotations

import collections
import os
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from .chunk import GulpChunk, index_records_end

_T = TypeVar("_T")


def check_meta_file_size_larger_zero(gulp_directory: Any) -> list[str]:
    """Paths of empty meta files."""
    return [
        chunk.meta_file_path
        for chunk in gulp_directory.chunks()
        if os.stat(chunk.meta_file_path).st_size == 0
    ]


def check_data_file_size_larger_zero(gulp_directory: Any) -> list[str]:
    """Paths of empty data files."""
    return [
        chunk.data_file_path
        for chunk in gulp_directory.chunks()
        if os.stat(chunk.data_file_path).st_size == 0
    ]


def check_data_file_size(gulp_directory: Any) -> list[str]:
    """Paths of data files whose size differs from where their last record ends according to
    ``meta_dict`` (an unpublished tail, a truncation, a stale meta file).

    gulpio2 took the end of the last frame of the last id; this takes the furthest end of any
    frame, which is the same for files written in one go and also right after ``'ab'``
    appended frames to an earlier id, or when the last id has no frames.
    """
    failing = []
    for chunk in gulp_directory.chunks():
        if os.stat(chunk.data_file_path).st_size != _records_end(chunk):
            failing.append(chunk.data_file_path)
    return failing


def _records_end(chunk: Any) -> int:
    # The index's answer, only from this package's own chunks: on any other object (gulpio2's,
    # a test double) an attribute of that name means nothing, and `meta_dict` is the truth.
    if isinstance(chunk, GulpChunk):
        end = index_records_end(chunk)
        if end is not None:
            return end
    end = 0
    for entry in chunk.meta_dict.values():
        for info in entry["frame_info"]:
            end = max(end, info[0] + info[2])
    return end


def check_for_duplicate_ids(gulp_directory: Any) -> list[str]:
    """Ids present in more than one chunk (opening a directory already refuses these)."""
    return get_duplicate_entries(extract_all_ids(gulp_directory))


def extract_all_ids(gulp_directory: Any) -> list[str]:
    """Every video id of every chunk, in chunk order."""
    all_ids: list[str] = []
    for chunk in gulp_directory.chunks():
        all_ids.extend(chunk.meta_dict.keys())
    return all_ids


def get_duplicate_entries(list_: Iterable[_T]) -> list[_T]:
    counts = collections.Counter(list_)
    return [item for item in counts if counts[item] > 1]


def check_for_failures(result: Mapping[str, Any]) -> None:
    """Print gulpio2's report for one check: ``{'message': ..., 'failures': [...]}``."""
    print("Sanity Check: {}".format(result["message"]))
    if len(result["failures"]):
        print("Test failed for: {}".format(result["failures"]))
    else:
        print("Test passed")
