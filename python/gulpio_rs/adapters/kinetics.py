"""Kinetics and ActivityNet: videos described by an annotation JSON."""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from ..source_video import VIDEO_EXTENSIONS, read_video
from .base import _BuiltinAdapter, _check_size, _check_unique_ids, _frame_rate, _shuffled, _slice
from .files import _files_under, _has_extension, _visible
from .items import _video_item

if TYPE_CHECKING:
    from _typeshed import StrPath

_KINETICS_NAME = re.compile(r"^(?P<id>.+)_\d{6}_\d{6}$")


class _JsonVideosAdapter(_BuiltinAdapter):
    """What the Kinetics and ActivityNet adapters share: videos listed in ``vid_storage``
    (``{'id', 'meta', 'path'}``), annotations re-read from ``json_file`` on access."""

    vid_storage: list[dict[str, Any]]  # filled by each adapter's set_video_storage

    def _setup(
        self,
        json_file: StrPath,
        folder: StrPath,
        shuffle: bool,
        frame_size: int,
        shm_dir_path: str,
        frame_rate: float | None,
        max_frames: int | None,
        seed: int | None,
    ) -> None:
        self.json_file = json_file
        self.folder = folder
        self.frame_size = frame_size  # as given, like gulpio2
        _check_size(frame_size, "frame_size")
        self.frame_rate = _frame_rate(frame_rate)
        self.max_frames = max_frames
        self.shm_dir_path = shm_dir_path
        self.shuffle = bool(shuffle)
        self.seed = seed
        self._collect(self.read_json(json_file))
        _check_unique_ids((v["id"] for v in self.vid_storage), os.fspath(folder))
        _shuffled(self.vid_storage, self.shuffle, seed)

    def _collect(self, json_storage: dict[str, Any]) -> None:
        raise NotImplementedError

    def _records(self) -> list[dict[str, Any]]:
        return self.vid_storage

    @staticmethod
    def read_json(json_file: StrPath) -> dict[str, Any]:
        raise NotImplementedError

    @property
    def json_storage(self) -> dict[str, Any]:
        """The annotations (gulpio2's attribute; read on access, not kept)."""
        return self.read_json(self.json_file)

    def __len__(self) -> int:
        return len(self.vid_storage)

    def get_bursted_frames(self, vid_file: StrPath) -> list[np.ndarray]:
        """All frames of one video (gulpio2's name; decoded with PyAV, not bursted)."""
        return read_video(
            os.path.join(os.fspath(self.folder), vid_file),
            frame_rate=self.frame_rate,
            frame_size=int(self.frame_size),
            max_frames=self.max_frames,
        )

    def iter_data(self, slice_element: slice | None = None) -> Iterator[dict[str, Any]]:
        """Decode each video of the slice (one at a time) and yield it."""
        for v in self.vid_storage[_slice(slice_element, len(self))]:
            yield _video_item(
                v["id"],
                v["meta"],
                v["path"],
                self.frame_rate,
                int(self.frame_size),
                self.max_frames,
            )


class KineticsAdapter(_JsonVideosAdapter):
    """The Kinetics dataset (trimmed clips named ``<youtube id>_<start 6>_<end 6>.<ext>``).

    Videos are ``<folder>/<class>/*.<ext>`` (and ``<folder>/*.<ext>``); the id is the YouTube
    id and meta is ``json_file[id]``. Frames at the native rate (``frame_rate=`` resamples).
    No ``label2idx.json`` (as gulpio2).

    Differences from gulpio2: every video extension (gulpio2: ``.mp4`` only); files listed in
    sorted order (gulpio2: file-system order); the id is the name without its
    ``_<start>_<end>`` suffix (gulpio2 cut at the first ``"_00"``, which breaks ids containing
    it, and kept the extension for other names); videos whose id is not in the JSON are left
    out with a warning (gulpio2 raised KeyError mid-run); only the entries of the found videos
    are kept (``json_storage`` is read from the file when asked for), so the adapter stays
    cheap to pickle.
    """

    def __init__(
        self,
        json_file: StrPath,
        folder: StrPath,
        shuffle: bool = False,
        frame_size: int = -1,
        shm_dir_path: str = "/dev/shm",
        *,
        frame_rate: float | None = None,
        max_frames: int | None = None,
        seed: int | None = 0,
    ) -> None:
        self._setup(
            json_file, folder, shuffle, frame_size, shm_dir_path, frame_rate, max_frames, seed
        )

    def _collect(self, json_storage: dict[str, Any]) -> None:
        self.set_video_storage(json_storage)

    @staticmethod
    def video_id(path: StrPath) -> str:
        """The YouTube id of a clip file name."""
        stem = os.path.basename(os.fspath(path)).split(".", 1)[0]
        m = _KINETICS_NAME.match(stem)
        return m.group("id") if m else stem

    def set_video_storage(self, json_storage: dict[str, Any] | None = None) -> None:
        """Collect the videos that have an entry in ``json_storage`` (default: the JSON file)."""
        if json_storage is None:
            json_storage = self.read_json(self.json_file)
        folder = os.fspath(self.folder)
        paths = [os.path.join(folder, r) for r in _files_under(folder, VIDEO_EXTENSIONS)]
        paths = [p for p in paths if os.path.relpath(p, folder).count(os.sep) <= 1]
        self.vid_storage = []
        missing = []
        for path in paths:
            id_ = self.video_id(path)
            if id_ in json_storage:
                self.vid_storage.append({"id": id_, "path": path, "meta": json_storage[id_]})
            else:
                missing.append(path)
        if missing:
            warnings.warn(
                f"{len(missing)} videos in {folder} have no entry in {self.json_file} and are "
                f"left out (e.g. {missing[0]})",
                stacklevel=3,
            )

    @staticmethod
    def read_json(json_file: StrPath) -> dict[str, Any]:
        """The annotation JSON (``{youtube id: entry}``)."""
        with open(json_file) as f:
            storage: dict[str, Any] = json.load(f)
        return storage


class ActivitynetAdapter(_JsonVideosAdapter):
    """The ActivityNet dataset: ``<folder>/<youtube id>.<ext>`` files, annotations in
    ``json_file['database']``.

    The videos whose entry's ``subset`` equals ``phase`` are taken (``phase=None``: all); the
    id is the file name up to the first ``.`` and meta the whole JSON entry. Frames at the
    native rate (``frame_rate=`` resamples). No ``output_folder`` and no ``label2idx.json``
    (as gulpio2).

    Differences from gulpio2: only files with a video extension are taken (gulpio2 took every
    file not ending in ``part``); files are sorted; ``phase=None`` means every subset (gulpio2
    matched none, and its command line's missing default ended in an AssertionError); only
    the entries of the found videos are kept (``json_storage`` is read from the file when asked
    for).
    """

    def __init__(
        self,
        json_file: StrPath,
        folder: StrPath,
        shuffle: bool = False,
        frame_size: int = -1,
        shm_dir_path: str = "/dev/shm",
        phase: str | None = "training",
        *,
        frame_rate: float | None = None,
        max_frames: int | None = None,
        seed: int | None = 0,
    ) -> None:
        self.phase = phase
        self._setup(
            json_file, folder, shuffle, frame_size, shm_dir_path, frame_rate, max_frames, seed
        )

    def _collect(self, json_storage: dict[str, Any]) -> None:
        self.set_video_storage(self.phase, json_storage)

    def set_video_storage(
        self, phase: str | None = "training", json_storage: dict[str, Any] | None = None
    ) -> None:
        """Collect the videos of ``phase`` (all phases for ``None``)."""
        if json_storage is None:
            json_storage = self.read_json(self.json_file)
        folder = os.fspath(self.folder)
        self.vid_storage = []
        for name in sorted(os.listdir(folder)):
            path = os.path.join(folder, name)
            if not (_visible(name) and _has_extension(name, VIDEO_EXTENSIONS)):
                continue
            if not os.path.isfile(path):
                continue
            id_ = name.split(".")[0]
            entry = json_storage.get(id_)
            if entry is not None and (phase is None or entry.get("subset") == phase):
                self.vid_storage.append({"id": id_, "path": path, "meta": entry})

    @staticmethod
    def read_json(json_file: StrPath) -> dict[str, Any]:
        """The ``database`` part of the annotation JSON."""
        with open(json_file) as f:
            database: dict[str, Any] = json.load(f)["database"]
        return database
