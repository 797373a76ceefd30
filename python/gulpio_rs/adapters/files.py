"""Listing input files: visible names, extensions, natural order."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

#: Frame file extensions :class:`FramesFolderAdapter` collects by default.
FRAME_EXTENSIONS: tuple[str, ...] = (".jpg", ".jpeg", ".png")


_DIGITS = re.compile(r"([0-9]+)")


def _natural_key(name: str) -> tuple[list[int | str], str]:
    """Sort key that orders ``frame2`` before ``frame10`` (and is plain order for padded names)."""
    # split() puts the digit runs at the odd positions, so keys always compare str with str
    # and int with int; the name itself breaks ties ("2" vs "02") independently of listdir.
    return [int(part) if i % 2 else part for i, part in enumerate(_DIGITS.split(name))], name


def _extensions(exts: Iterable[str]) -> tuple[str, ...]:
    if isinstance(exts, str):
        exts = [exts]
    return tuple("." + e.lower().lstrip(".") for e in exts)


def _has_extension(name: str, exts: tuple[str, ...]) -> bool:
    return name.lower().endswith(exts)


def _visible(name: str) -> bool:
    # Skips ".DS_Store", "._x.jpg" (macOS resource forks), ".ipynb_checkpoints", ...; glob
    # (which gulpio2 used) skips hidden names as well.
    return not name.startswith(".")


def _files_under(root: str, exts: tuple[str, ...]) -> list[str]:
    """Relative POSIX paths of the visible files under ``root`` (recursively) with ``exts``."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        dirnames[:] = [d for d in dirnames if _visible(d)]
        rel_dir = os.path.relpath(dirpath, root)
        for name in filenames:
            if _visible(name) and _has_extension(name, exts):
                rel = name if rel_dir == "." else os.path.join(rel_dir, name)
                found.append(rel.replace(os.sep, "/"))
    return sorted(found)


def _subdirs(folder: str) -> list[str]:
    return sorted(
        e.name for e in os.scandir(folder) if _visible(e.name) and e.is_dir(follow_symlinks=True)
    )


def _frame_files(folder: str, exts: tuple[str, ...]) -> list[str]:
    """The frame files directly in ``folder``, in natural name order ([] if it is missing)."""
    try:
        names = [n for n in os.listdir(folder) if _visible(n) and _has_extension(n, exts)]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [os.path.join(folder, n) for n in sorted(names, key=_natural_key)]


def _describe_folder(folder: str, exts: tuple[str, ...]) -> str:
    """What a folder holds, for "nothing to ingest" messages: its class subfolders and files."""
    if not os.path.isdir(folder):
        return f"{folder} does not exist"
    entries = [e for e in os.scandir(folder) if _visible(e.name)]
    subdirs = [e.name for e in entries if e.is_dir(follow_symlinks=True)]
    files = [e.name for e in entries if e.is_file()]
    if not entries:
        return f"{folder} is empty"
    matching = [f for f in files if _has_extension(f, exts)]
    parts = []
    if files:
        kinds = (
            f"{len(matching)} with a wanted extension"
            if matching
            else "none with a wanted extension"
        )
        parts.append(f"{len(files)} files directly in it ({kinds})")
    if subdirs:
        parts.append(
            f"{len(subdirs)} subfolders ({', '.join(sorted(subdirs)[:3])}"
            f"{', ...' if len(subdirs) > 3 else ''}) without such files"
        )
    else:
        parts.append("no class subfolders")
    return "found " + " and ".join(parts)
