"""The 20BN adapters (Jester, Something-Something): JSON or CSV lists of ids."""

from __future__ import annotations

import csv
import gzip
import json
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..source_video import VIDEO_EXTENSIONS
from .base import (
    _BuiltinAdapter,
    _check_size,
    _check_unique_ids,
    _error_item,
    _frame_rate,
    _shuffled,
    _slice,
)
from .files import _has_extension, _visible
from .items import _frames_folder_item, _video_item
from .labels import Custom20BNAdapterMixin

if TYPE_CHECKING:
    from _typeshed import StrPath


def _read_20bn_csv(csv_file: StrPath, min_columns: int) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = []
    with open(csv_file, newline="") as f:
        for lineno, row in enumerate(csv.reader(f, delimiter=";"), 1):
            if not row or not any(cell.strip() for cell in row):
                continue
            if len(row) < min_columns:
                raise ValueError(f"{csv_file}:{lineno}: expected 'id;label', got {row!r}")
            data.append({"id": row[0], "label": row[1] if len(row) > 1 else "dummy"})
    return data


def _single_video_in(folder: str, preferred: str) -> str:
    """The one video file in ``folder``: the only ``preferred`` file, else the only video."""
    try:
        names = sorted(n for n in os.listdir(folder) if _visible(n))
    except FileNotFoundError:
        raise FileNotFoundError(f"no video folder {folder}") from None
    files = [n for n in names if os.path.isfile(os.path.join(folder, n))]
    for exts in ((preferred,), VIDEO_EXTENSIONS):
        found = [n for n in files if _has_extension(n, exts)]
        if len(found) == 1:
            return os.path.join(folder, found[0])
        if len(found) > 1:
            raise ValueError(f"{len(found)} videos in {folder}, expected one: {found}")
    raise FileNotFoundError(f"no video file in {folder}")


class _Custom20BNVideoAdapter(_BuiltinAdapter, Custom20BNAdapterMixin):
    """Shared construction and iteration of the two 20BN video adapters."""

    def _setup(
        self,
        source: str,
        *,
        label_name: str,
        output_folder: StrPath,
        folder: StrPath,
        shuffle: bool,
        frame_size: int,
        frame_rate: float | None,
        shm_dir_path: str,
        remove_duplicate_ids: bool,
        seed: int | None,
        max_frames: int | None,
    ) -> None:
        self.label_name = label_name
        self.output_folder = output_folder
        self.labels2idx = self.create_label2idx_dict(self.label_name)
        self.folder = folder
        self.shuffle = bool(shuffle)
        self.frame_size = int(_check_size(frame_size, "frame_size"))
        self.frame_rate = _frame_rate(frame_rate)
        self.shm_dir_path = shm_dir_path
        self.max_frames = max_frames
        self.seed = seed
        self.all_meta = self.get_meta()
        if remove_duplicate_ids:
            from .. import utils

            self.all_meta = utils.remove_entries_with_duplicate_ids(output_folder, self.all_meta)
        else:
            _check_unique_ids((m["id"] for m in self.all_meta), source)
        _shuffled(self.all_meta, self.shuffle, seed)

    def get_meta(self) -> list[dict[str, Any]]:
        """``{'id', 'label', 'idx'}`` for every entry, in input order."""
        return [
            {
                "id": entry["id"],
                "label": entry[self.label_name],
                "idx": self.labels2idx[str(entry[self.label_name])],
            }
            for entry in self.data
        ]

    def __len__(self) -> int:
        return len(self.all_meta)

    def _video_path(self, id_: object) -> str:
        raise NotImplementedError

    def iter_data(self, slice_element: slice | None = None) -> Iterator[dict[str, Any]]:
        """Decode each video of the slice (one at a time) and yield it."""
        self.write_label2idx_dict()
        for meta in self.all_meta[_slice(slice_element, len(self))]:
            try:
                path = self._video_path(meta["id"])
            except (OSError, ValueError) as e:
                yield _error_item(meta["id"], meta, str(e))
                continue
            yield _video_item(
                meta["id"], meta, path, self.frame_rate, self.frame_size, self.max_frames
            )


class Custom20BNJsonVideoAdapter(_Custom20BNVideoAdapter):
    """20BN datasets described by a JSON list with one video folder per id (Jester v2 style).

    ``json_file`` (``.json`` or ``.json.gz``) lists ``{'id': ..., <label_name>: ...}``; the
    video is the one ``.mp4`` in ``<folder>/<id>/`` (another single video file is accepted
    when there is no ``.mp4``). It is decoded at ``frame_rate`` frames per second (``None``:
    native), its shorter side resized to ``frame_size`` (-1: kept). meta is
    ``{'id', 'label', 'idx'}`` with ``idx`` from ``<output_folder>/label2idx.json``.

    Differences from gulpio2: entries without ``label_name`` get the label ``"dummy"`` (as the
    CSV adapter does for one-column rows; gulpio2 raised KeyError); a missing or ambiguous
    video is an error item instead of an AssertionError that ends the run. With
    ``remove_duplicate_ids`` (gulpio2 semantics) ids already in the output folder are dropped
    too, so a restarted run over the same output sees fewer items; restart such a run
    without the flag.
    """

    def __init__(
        self,
        json_file: StrPath,
        folder: StrPath,
        output_folder: StrPath,
        shuffle: bool = False,
        frame_size: int = -1,
        frame_rate: float | None = 8,
        shm_dir_path: str = "/dev/shm",
        label_name: str = "template",
        remove_duplicate_ids: bool = False,
        *,
        seed: int | None = 0,
        max_frames: int | None = None,
    ) -> None:
        self.json_file = json_file
        name = os.fspath(json_file)
        if name.endswith(".json.gz"):
            self.data = self.read_gz_json(name)
        elif name.endswith(".json"):
            self.data = self.read_json(name)
        else:
            raise RuntimeError("Wrong data file format (.json.gz or .json)")
        self.data = [
            entry if label_name in entry else {**entry, label_name: "dummy"} for entry in self.data
        ]
        self._setup(
            name,
            label_name=label_name,
            output_folder=output_folder,
            folder=folder,
            shuffle=shuffle,
            frame_size=frame_size,
            frame_rate=frame_rate,
            shm_dir_path=shm_dir_path,
            remove_duplicate_ids=remove_duplicate_ids,
            seed=seed,
            max_frames=max_frames,
        )

    @staticmethod
    def read_json(json_file: StrPath) -> list[dict[str, Any]]:
        """The JSON list of entries."""
        with open(json_file) as f:
            entries: list[dict[str, Any]] = json.load(f)
        return entries

    @staticmethod
    def read_gz_json(gz_json_file: StrPath) -> list[dict[str, Any]]:
        """The gzipped JSON list of entries."""
        with gzip.open(gz_json_file, "rt") as fp:
            entries: list[dict[str, Any]] = json.load(fp)
        return entries

    def _video_path(self, id_: object) -> str:
        return _single_video_in(os.path.join(os.fspath(self.folder), str(id_)), ".mp4")


class Custom20BNCsvWebmAdapter(_Custom20BNVideoAdapter):
    """20BN datasets described by a ``;`` CSV with one ``<id>.webm`` per id (Something-Something
    v2 style).

    Rows are ``id;label``, or just ``id`` (label ``"dummy"``, for test sets). The video is
    ``<folder>/<id>.webm`` (or ``<folder>/<id>.<ext>`` for another video extension when there
    is no ``.webm``). meta is ``{'id', 'label', 'idx'}``; the rest as
    :class:`Custom20BNJsonVideoAdapter` (``frame_rate`` defaults to 12 as in gulpio2's class;
    its command line used 8).

    Differences from gulpio2: blank rows are skipped; a missing video is an error item; ids are
    not glob patterns (gulpio2 globbed ``<id>.webm``).
    """

    def __init__(
        self,
        csv_file: StrPath,
        folder: StrPath,
        output_folder: StrPath,
        shuffle: bool = False,
        frame_size: int = -1,
        frame_rate: float | None = 12,
        shm_dir_path: str = "/dev/shm",
        label_name: str = "label",
        remove_duplicate_ids: bool = False,
        *,
        seed: int | None = 0,
        max_frames: int | None = None,
    ) -> None:
        self.data = self.read_csv(csv_file)
        if label_name != "label" and self.data:
            raise ValueError(
                f"label_name={label_name!r}: CSV rows only have an 'id' and a 'label' column"
            )
        self._setup(
            os.fspath(csv_file),
            label_name=label_name,
            output_folder=output_folder,
            folder=folder,
            shuffle=shuffle,
            frame_size=frame_size,
            frame_rate=frame_rate,
            shm_dir_path=shm_dir_path,
            remove_duplicate_ids=remove_duplicate_ids,
            seed=seed,
            max_frames=max_frames,
        )

    @staticmethod
    def read_csv(csv_file: StrPath) -> list[dict[str, Any]]:
        """``[{'id', 'label'}]`` from ``id;label`` (or ``id``) rows."""
        return _read_20bn_csv(csv_file, min_columns=1)

    def get_single_video_file_path(self, folder_name: str, format_: str = "webm") -> str:
        """``<folder_name>.<format_>``, else the one ``<folder_name>.<video ext>`` that exists."""
        for ext in ("." + format_.lstrip("."), *VIDEO_EXTENSIONS):
            path = folder_name + ext
            if os.path.isfile(path):
                return path
        raise FileNotFoundError(f"no video {folder_name}.{format_.lstrip('.')}")

    def _video_path(self, id_: object) -> str:
        return self.get_single_video_file_path(os.path.join(os.fspath(self.folder), str(id_)))


class Custom20BNCsvJpegAdapter(_BuiltinAdapter, Custom20BNAdapterMixin):
    """20BN datasets of JPEG frame folders described by a ``;`` CSV (Jester v1 style).

    Rows are ``id;label``; the frames are ``<folder>/<id>/*.jpg`` in natural name order.
    Without a resize (``frame_size=-1``) the JPEG files are stored as they are; otherwise they
    are decoded, resized and re-encoded. meta is ``{'id', 'label', 'idx'}``.

    Differences from gulpio2: frames are not re-encoded when no resize is asked; ``.jpeg`` and
    upper-case extensions count too; a folder without frames or with a damaged image is an
    error item.
    """

    def __init__(
        self,
        csv_file: StrPath,
        folder: StrPath,
        output_folder: StrPath,
        shuffle: bool = False,
        frame_size: int = -1,
        shm_dir_path: str = "/dev/shm",
        *,
        seed: int | None = 0,
    ) -> None:
        self.data = self.read_csv(csv_file)
        self.output_folder = output_folder
        self.labels2idx = self.create_label2idx_dict("label")
        self.folder = folder
        self.shuffle = shuffle  # as given, like gulpio2
        self.frame_size = frame_size
        _check_size(frame_size, "frame_size")
        self.shm_dir_path = shm_dir_path
        self.seed = seed
        self.all_meta = self.get_meta()
        _check_unique_ids((m["id"] for m in self.all_meta), os.fspath(csv_file))
        _shuffled(self.all_meta, self.shuffle, seed)

    @staticmethod
    def read_csv(csv_file: StrPath) -> list[dict[str, Any]]:
        """``[{'id', 'label'}]`` from ``id;label`` rows."""
        return _read_20bn_csv(csv_file, min_columns=2)

    def get_meta(self) -> list[dict[str, Any]]:
        """``{'id', 'label', 'idx'}`` for every row, in input order."""
        return [
            {"id": e["id"], "label": e["label"], "idx": self.labels2idx[str(e["label"])]}
            for e in self.data
        ]

    def __len__(self) -> int:
        return len(self.all_meta)

    def iter_data(self, slice_element: slice | None = None) -> Iterator[dict[str, Any]]:
        """Yield each id's frames (JPEG paths, or arrays when resizing)."""
        self.write_label2idx_dict()
        exts = (".jpg", ".jpeg")
        for meta in self.all_meta[_slice(slice_element, len(self))]:
            video_folder = os.path.join(os.fspath(self.folder), str(meta["id"]))
            yield _frames_folder_item(meta["id"], meta, video_folder, exts, int(self.frame_size))
