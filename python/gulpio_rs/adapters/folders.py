"""Adapters over folders and lists of files: images, videos, folders of frames."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .._plural import plural
from ..source_video import VIDEO_EXTENSIONS, read_video
from .base import _BuiltinAdapter, _check_size, _check_unique_ids, _frame_rate, _shuffled, _slice
from .files import (
    FRAME_EXTENSIONS,
    _describe_folder,
    _extensions,
    _files_under,
    _has_extension,
    _subdirs,
    _visible,
)
from .items import _frames_folder_item, _image_item, _video_item
from .labels import _LabelFolderMixin

if TYPE_CHECKING:
    from _typeshed import StrPath


def _class_folder_items(folder: StrPath, exts: tuple[str, ...], kind: str) -> list[dict[str, Any]]:
    """``{'id', 'label', 'path'}`` for the files of ``<folder>/<label>/**``, sorted by path.

    The label is the first-level subfolder; the id is ``"<label>-<path below it>"``, which is
    gulpio2's ``"<label>-<filename>"`` for the usual one-level layout and stays unique when
    class folders are nested.
    """
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"no {kind} folder {folder}")
    items: list[dict[str, Any]] = []
    for label in _subdirs(folder):
        for rel in _files_under(os.path.join(folder, label), exts):
            full = os.path.join(folder, label, *rel.split("/"))
            items.append({"id": f"{label}-{rel}", "label": label, "path": os.path.dirname(full)})
    loose = [
        e.name
        for e in os.scandir(folder)
        if _visible(e.name) and e.is_file() and _has_extension(e.name, exts)
    ]
    if loose:
        warnings.warn(
            f"{len(loose)} {kind} files directly in {folder} have no class subfolder and are "
            f"ignored (e.g. {sorted(loose)[0]!r}){_without_classes(kind)}",
            stacklevel=3,
        )
    items.sort(key=_file_of)  # gulpio2's order: its sorted glob of the file paths
    return items


def _nothing_in_class_folders(folder: StrPath, file_extensions: Sequence[str], kind: str) -> str:
    folder = os.fspath(folder)
    exts = _extensions(file_extensions)
    shown = ", ".join(exts[:4]) + (", ..." if len(exts) > 4 else "")
    # Joined, not formatted: a folder given with a trailing slash must not show "flat//<class>".
    expected = os.path.join(folder, "<class>", f"<{kind}>")
    loose = os.path.isdir(folder) and any(
        _visible(e.name) and e.is_file() and _has_extension(e.name, exts)
        for e in os.scandir(folder)
    )
    found = _describe_folder(folder, exts)
    hint = _without_classes(kind) if loose else ""
    return f"no {kind}s in {folder}: expected {expected} files ({shown}); {found}{hint}"


def _without_classes(kind: str) -> str:
    """Where a folder of videos without class subfolders goes instead."""
    if kind != "video":
        return ""
    return "; for videos without classes use `gulpio ingest video-files` (VideoFilesAdapter)"


def _file_of(item: dict[str, Any]) -> str:
    """The file of a class-folder item (its directory plus the name at the end of its id)."""
    # All three are str in the items _class_folder_items makes.
    folder: str = item["path"]
    id_: str = item["id"]
    label: str = item["label"]
    return os.path.join(folder, id_[len(label) + 1 :].rsplit("/", 1)[-1])


class ImageListAdapter(_BuiltinAdapter, _LabelFolderMixin):
    """Images listed in a text file, one ``path,label`` per line (one frame per item).

    ``path`` is relative to ``root_folder`` (or absolute). The id is ``"<label>-<path>"`` and
    meta ``{'id', 'label', 'idx'}``; ``img_size`` resizes the shorter side (-1: kept; JPEG
    files are then stored as they are).

    Differences from gulpio2: the id keeps the whole path (gulpio2 took the basename of
    ``label + '-' + path``, so every path with a ``/`` lost its label and ids collided);
    blank lines are skipped and a path may contain commas (the label is after the last one);
    an unreadable image is an error item (gulpio2's ``except ImageNotFound`` never fired).
    """

    def __init__(
        self,
        input_file: StrPath,
        output_folder: StrPath,
        root_folder: StrPath = "",
        shuffle: bool = False,
        img_size: int = -1,
        *,
        seed: int | None = 0,
    ) -> None:
        self.input_file = input_file
        self.output_folder = output_folder
        self.root_folder = root_folder
        self.folder = root_folder
        self.data = ImageListAdapter.parse_paths(self.input_file)
        self.label2idx = self.create_label2idx_dict()
        self.shuffle = shuffle  # as given, like gulpio2
        self.img_size = img_size
        _check_size(img_size, "img_size")
        self.seed = seed
        self.all_meta = self.get_meta()
        _check_unique_ids((m["id"] for m in self.all_meta), os.fspath(input_file))
        _shuffled(self.all_meta, self.shuffle, seed)

    @staticmethod
    def parse_paths(input_file: StrPath) -> list[dict[str, Any]]:
        """``[{'id', 'label', 'path'}]`` from the ``path,label`` lines."""
        data: list[dict[str, Any]] = []
        with open(input_file) as f:
            for lineno, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                if "," not in line:
                    raise ValueError(f"{input_file}:{lineno}: expected 'path,label', got {line!r}")
                img_path, label_name = line.rsplit(",", 1)
                data.append(
                    {"id": f"{label_name}-{img_path}", "label": label_name, "path": img_path}
                )
        return data

    def get_meta(self) -> list[dict[str, Any]]:
        """``{'id', 'label', 'path', 'idx'}`` per line (``path`` is not stored)."""
        return [
            {
                "id": e["id"],
                "label": e["label"],
                "path": e["path"],
                "idx": self.label2idx[str(e["label"])],
            }
            for e in self.data
        ]

    def __len__(self) -> int:
        return len(self.all_meta)

    def iter_data(self, slice_element: slice | None = None) -> Iterator[dict[str, Any]]:
        """Yield one image per item."""
        self.write_label2idx_dict()
        for entry in self.all_meta[_slice(slice_element, len(self))]:
            meta = {k: v for k, v in entry.items() if k != "path"}
            img_path = os.path.join(os.fspath(self.root_folder), str(entry["path"]))
            yield _image_item(meta["id"], meta, [img_path], int(self.img_size), "")


class ImageFolderAdapter(_BuiltinAdapter, _LabelFolderMixin):
    """A folder of images with one subfolder per class (ImageNet style), one frame per item.

    Images are the files under ``<folder>/<label>/`` (recursively) whose extension is in
    ``file_extensions`` (case-insensitive). The id is ``"<label>-<filename>"`` (with the path
    below the class folder for nested folders); meta is ``{'id', 'label', 'path', 'idx'}``
    where ``path`` is the image's directory, as in gulpio2.

    Differences from gulpio2: ``folder`` needs no trailing ``/``; the label is the class
    folder even for images in nested folders (gulpio2 took the immediate parent, so nested
    folders gave wrong labels and colliding ids); files directly in ``folder`` are ignored with
    a warning; extensions match case-insensitively; ``label2idx.json`` keeps existing indices;
    an unreadable image is an error item.
    """

    def __init__(
        self,
        folder: StrPath,
        output_folder: StrPath,
        file_extensions: Sequence[str] = (".jpg", ".png"),
        shuffle: bool = False,
        img_size: int = -1,
        *,
        seed: int | None = 0,
    ) -> None:
        self.file_extensions = file_extensions  # as given, like gulpio2
        self.data = self.parse_folder(folder)
        self.output_folder = output_folder
        self.label2idx = self.create_label2idx_dict()
        self.folder = folder
        self.shuffle = shuffle  # as given, like gulpio2
        self.img_size = img_size
        _check_size(img_size, "img_size")
        self.seed = seed
        self.all_meta = self.get_meta()
        _check_unique_ids((m["id"] for m in self.all_meta), os.fspath(folder))
        _shuffled(self.all_meta, self.shuffle, seed)

    def parse_folder(self, folder: StrPath) -> list[dict[str, Any]]:
        """``[{'id', 'label', 'path'}]`` for every image, sorted by path."""
        return _class_folder_items(folder, _extensions(self.file_extensions), "image")

    def nothing_found(self) -> str:
        """Why the adapter has no items, for the one-line error an empty ingest gives."""
        return _nothing_in_class_folders(self.folder, self.file_extensions, "image")

    def get_meta(self) -> list[dict[str, Any]]:
        """``{'id', 'label', 'path', 'idx'}`` per image."""
        return [{**e, "idx": self.label2idx[str(e["label"])]} for e in self.data]

    def __len__(self) -> int:
        return len(self.all_meta)

    def iter_data(self, slice_element: slice | None = None) -> Iterator[dict[str, Any]]:
        """Yield one image per item."""
        self.write_label2idx_dict()
        for meta in self.all_meta[_slice(slice_element, len(self))]:
            yield _image_item(meta["id"], meta, [_file_of(meta)], int(self.img_size), "")


class VideoFolderAdapter(_BuiltinAdapter, _LabelFolderMixin):
    """A folder of videos with one subfolder per class (Kinetics / UCF101 style).

    Videos are the files under ``<folder>/<label>/`` (recursively) whose extension is in
    ``file_extensions`` (case-insensitive; by default every common container FFmpeg reads:
    :data:`gulpio_rs.video.VIDEO_EXTENSIONS`). Ids and meta as :class:`ImageFolderAdapter`
    (``"<label>-<filename>"``, ``{'id', 'label', 'path', 'idx'}``). Frames are decoded at the
    native rate (``frame_rate=`` resamples), shorter side resized to ``frame_size``.

    Differences from gulpio2: every extension is collected (gulpio2 kept only the last one,
    ``.webm``) and the default list is broad; the rest as :class:`ImageFolderAdapter`.
    """

    def __init__(
        self,
        folder: StrPath,
        output_folder: StrPath,
        file_extensions: Sequence[str] = VIDEO_EXTENSIONS,
        shuffle: bool = False,
        frame_size: int = -1,
        shm_dir_path: str = "/dev/shm",
        *,
        frame_rate: float | None = None,
        max_frames: int | None = None,
        seed: int | None = 0,
    ) -> None:
        self.file_extensions = file_extensions  # as given, like gulpio2
        self.data = self.parse_folder(folder)
        self.output_folder = output_folder
        self.label2idx = self.create_label2idx_dict()
        self.folder = folder
        self.shuffle = shuffle  # as given, like gulpio2
        self.frame_size = frame_size
        _check_size(frame_size, "frame_size")
        self.frame_rate = _frame_rate(frame_rate)
        self.max_frames = max_frames
        self.seed = seed
        self.all_meta = self.get_meta()
        self.shm_dir_path = shm_dir_path
        _check_unique_ids((m["id"] for m in self.all_meta), os.fspath(folder))
        _shuffled(self.all_meta, self.shuffle, seed)

    def parse_folder(self, folder: StrPath) -> list[dict[str, Any]]:
        """``[{'id', 'label', 'path'}]`` for every video, sorted by path."""
        return _class_folder_items(folder, _extensions(self.file_extensions), "video")

    def nothing_found(self) -> str:
        """Why the adapter has no items, for the one-line error an empty ingest gives."""
        return _nothing_in_class_folders(self.folder, self.file_extensions, "video")

    def get_meta(self) -> list[dict[str, Any]]:
        """``{'id', 'label', 'path', 'idx'}`` per video."""
        return [{**e, "idx": self.label2idx[str(e["label"])]} for e in self.data]

    def __len__(self) -> int:
        return len(self.all_meta)

    def iter_data(self, slice_element: slice | None = None) -> Iterator[dict[str, Any]]:
        """Decode each video of the slice (one at a time) and yield it."""
        self.write_label2idx_dict()
        for meta in self.all_meta[_slice(slice_element, len(self))]:
            yield _video_item(
                meta["id"],
                meta,
                _file_of(meta),
                self.frame_rate,
                int(self.frame_size),
                self.max_frames,
            )

    def get_bursted_frames(self, video_path: StrPath) -> list[np.ndarray]:
        """All frames of one video (gulpio2's name; decoded with PyAV, not bursted)."""
        return read_video(
            video_path,
            frame_rate=self.frame_rate,
            frame_size=int(self.frame_size),
            max_frames=self.max_frames,
        )


class VideoFilesAdapter(_BuiltinAdapter):
    """A folder of videos without classes (an unlabelled corpus: raw footage, the videos of a
    video-language dataset): every video file under ``folder``, at any depth.

    Videos are the files whose extension is in ``file_extensions`` (case-insensitive; by
    default :data:`gulpio_rs.video.VIDEO_EXTENSIONS`), hidden files and folders left out.
    The id is the file's path below ``folder`` with ``/`` between folders (``"clip.mp4"``,
    ``"day1/clip.mp4"``): unique, and the same on every run and wherever ``folder`` is. Meta
    is ``{'id'}``: no label, and no ``label2idx.json`` is written (use ``target=None`` or a
    callable with the PyTorch datasets). Frames as :class:`VideoFolderAdapter`: the native
    rate (``frame_rate=`` resamples), shorter side resized to ``frame_size``.
    """

    def __init__(
        self,
        folder: str | os.PathLike[str],
        file_extensions: tuple[str, ...] | list[str] = VIDEO_EXTENSIONS,
        shuffle: bool = False,
        frame_size: int = -1,
        *,
        frame_rate: float | None = None,
        max_frames: int | None = None,
        seed: int = 0,
    ) -> None:
        self.folder = folder
        self.file_extensions = file_extensions
        self.shuffle = shuffle
        self.frame_size = frame_size
        _check_size(frame_size, "frame_size")
        self.frame_rate = _frame_rate(frame_rate)
        self.max_frames = max_frames
        self.seed = seed
        self.all_meta = self.get_meta()
        _shuffled(self.all_meta, self.shuffle, seed)

    def get_meta(self) -> list[dict[str, Any]]:
        """``{'id', 'path'}`` per video, sorted by id (``path``, the file, is not stored)."""
        folder = os.fspath(self.folder)
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"no video folder {folder}")
        rels = _files_under(folder, _extensions(self.file_extensions))
        return [{"id": rel, "path": os.path.join(folder, *rel.split("/"))} for rel in rels]

    def nothing_found(self) -> str:
        """Why the adapter has no items, for the one-line error an empty ingest gives."""
        folder = os.fspath(self.folder)
        exts = _extensions(self.file_extensions)
        shown = ", ".join(exts[:4]) + (", ..." if len(exts) > 4 else "")
        # Every visible file ends with "": the files of other kinds, since none is a video.
        others = len(_files_under(folder, ("",))) if os.path.isdir(folder) else 0
        found = f"found {plural(others, 'other file')}" if others else "found no files"
        return (
            f"no videos in {folder}: expected video files ({shown}) in it or its subfolders; "
            + found
        )

    def __len__(self) -> int:
        return len(self.all_meta)

    def iter_data(self, slice_element: slice | None = None) -> Iterator[dict[str, Any]]:
        """Decode each video of the slice (one at a time) and yield it."""
        for entry in self.all_meta[_slice(slice_element, len(self))]:
            yield _video_item(
                entry["id"],
                {"id": entry["id"]},
                entry["path"],
                self.frame_rate,
                int(self.frame_size),
                self.max_frames,
            )


class FramesFolderAdapter(_BuiltinAdapter, _LabelFolderMixin):
    """Videos stored as folders of pre-extracted frames: ``<folder>/[<label>/]<video>/*.jpg``.

    Each video folder's frame files (extensions ``file_extensions``, case-insensitive) are its
    frames, in natural name order (``2.jpg`` before ``10.jpg``). ``labels`` says whether
    there is a class level: ``None`` (default) detects it (video folders directly in
    ``folder`` hold frame files); ``True``/``False`` force it.

    Without classes the id is the video folder's name and meta ``{'id'}``; with classes the id
    is ``"<label>/<video>"`` (unique even when two classes hold a video of the same name) and
    meta ``{'id', 'label', 'idx'}``, with ``label2idx.json`` written to ``output_folder`` (if
    given). JPEG frames are stored as they are unless ``frame_size`` asks for a resize; other
    formats (PNG) are decoded. A video folder without frames is an error item.
    """

    def __init__(
        self,
        folder: StrPath,
        output_folder: StrPath | None = None,
        file_extensions: Sequence[str] = FRAME_EXTENSIONS,
        shuffle: bool = False,
        frame_size: int = -1,
        *,
        labels: bool | None = None,
        seed: int | None = 0,
    ) -> None:
        self.folder = folder
        self.output_folder = output_folder
        self.file_extensions = file_extensions  # as given, like gulpio2
        self.shuffle = shuffle  # as given, like gulpio2
        self.frame_size = frame_size
        _check_size(frame_size, "frame_size")
        self.seed = seed
        self.labels = self._detect_labels(labels)
        self.data = self.parse_folder(folder)
        self.label2idx = self.create_label2idx_dict() if self.labels else {}
        self.all_meta = self.get_meta()
        _check_unique_ids((m["id"] for m in self.all_meta), os.fspath(folder))
        _shuffled(self.all_meta, self.shuffle, seed)

    def _detect_labels(self, labels: bool | None) -> bool:
        folder = os.fspath(self.folder)
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"no frames folder {folder}")
        if labels is not None:
            return bool(labels)
        exts = _extensions(self.file_extensions)
        with_frames: list[str] = []
        without: list[str] = []
        for name in _subdirs(folder):
            sub = os.path.join(folder, name)
            has_frames = any(
                _visible(e.name) and e.is_file() and _has_extension(e.name, exts)
                for e in os.scandir(sub)
            )
            (with_frames if has_frames else without).append(name)
        if with_frames and any(_subdirs(os.path.join(folder, n)) for n in without):
            raise ValueError(
                f"{folder} mixes video folders ({with_frames[0]!r}) and class folders "
                f"({without[0]!r}); pass labels=True or labels=False"
            )
        return not with_frames and bool(without)

    def parse_folder(self, folder: StrPath) -> list[dict[str, Any]]:
        """``[{'id', 'label'?, 'path'}]`` for every video folder, sorted."""
        folder = os.fspath(folder)
        if not self.labels:
            return [{"id": v, "path": os.path.join(folder, v)} for v in _subdirs(folder)]
        return [
            {"id": f"{label}/{v}", "label": label, "path": os.path.join(folder, label, v)}
            for label in _subdirs(folder)
            for v in _subdirs(os.path.join(folder, label))
        ]

    def get_meta(self) -> list[dict[str, Any]]:
        """The item list: stored meta plus the video folder path (not stored)."""
        if not self.labels:
            return [{"id": e["id"], "path": e["path"]} for e in self.data]
        return [{**e, "idx": self.label2idx[str(e["label"])]} for e in self.data]

    def __len__(self) -> int:
        return len(self.all_meta)

    def iter_data(self, slice_element: slice | None = None) -> Iterator[dict[str, Any]]:
        """Yield each video folder's frames (JPEG paths, or arrays when decoding)."""
        if self.labels:
            self.write_label2idx_dict()
        exts = _extensions(self.file_extensions)
        for entry in self.all_meta[_slice(slice_element, len(self))]:
            meta = {k: v for k, v in entry.items() if k != "path"}
            yield _frames_folder_item(meta["id"], meta, entry["path"], exts, int(self.frame_size))
