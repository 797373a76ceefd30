"""Dataset adapters: what ``GulpIngestor`` reads videos and images from (gulpio2's ``adapters``).

An adapter yields ``{'id': ..., 'meta': {...}, 'frames': [...]}`` dicts from
``iter_data(slice_element)`` and reports its size with ``__len__``. Frames may be uint8 arrays
(``HxWx3`` RGB, ``HxW`` or ``HxWx1`` gray; RGBA is converted), JPEG bytes, or paths of JPEG
files; JPEG bytes and files are stored as they are once a strict decode has shown they are
whole, so an already-compressed frame is not encoded a second time.

The built-in adapters keep gulpio2's constructor signatures (``shm_dir_path`` is accepted and
unused: videos are decoded in-process with PyAV, see :mod:`gulpio_rs.video`) and add keyword
arguments after them. Compared with gulpio2 they also:

- never raise out of ``iter_data`` for one bad item (unreadable video, damaged image, no
  frames): they yield ``{'id', 'meta', 'frames': [], 'error': '<reason naming the file>'}``,
  which the ingestor reports and skips (or stops on under ``strict=True``);
- check at construction that ids are unique and raise
  :class:`~gulpio_rs.errors.DuplicateIdError` naming the duplicates (the 20BN adapters drop
  them instead under ``remove_duplicate_ids=True``, as gulpio2 does);
- shuffle deterministically (``shuffle=True`` with ``seed=0``), because a restarted ingest must
  cut the adapter into the same slices;
- write ``label2idx.json`` atomically and only when it changes, with labels that already exist
  in the output folder keeping their index (new labels are appended), so extending a dataset
  keeps ``meta['idx']`` stable; the mapping comes from the whole input list, so every worker
  and every shard writes the same file;
- yield JPEG file paths instead of decoded pixels when no resize is asked for, and decode
  videos one at a time inside ``iter_data`` (memory stays bounded by one video);
- hold only lists of paths and small dicts, so they pickle quickly, and have a
  ``fingerprint()`` that is the same for the same arguments and inputs (the ingestor
  recognises a restarted run by it).

Per-adapter differences are listed in each class's docstring.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import json
import os
import random
import re
import uuid
import warnings
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

from .errors import DuplicateIdError
from .video import VIDEO_EXTENSIONS, read_video

#: Frame file extensions :class:`FramesFolderAdapter` collects by default.
FRAME_EXTENSIONS: tuple[str, ...] = (".jpg", ".jpeg", ".png")

LABEL2IDX_FILE = "label2idx.json"


class AbstractDatasetAdapter(ABC):
    """Base class of dataset adapters (gulpio2-compatible).

    Subclasses implement ``iter_data(slice_element=None)``, yielding
    ``{'id', 'meta', 'frames'}`` dicts for the items of ``slice_element`` (all items when
    ``None``), and ``__len__``. To report one unusable item without stopping the run, yield it
    with ``'frames': []`` and an ``'error'`` string. Adapters are pickled to the ingest workers,
    so keep them small: paths and metadata, not decoded frames or open files.
    """

    @abstractmethod
    def iter_data(self, slice_element=None):
        """Yield ``{'id', 'meta', 'frames'}`` dicts for the items in ``slice_element``."""

    @abstractmethod
    def __len__(self) -> int:
        """Number of items."""


class _BuiltinAdapter(AbstractDatasetAdapter):
    """What every built-in adapter adds to the gulpio2 contract."""

    def fingerprint(self) -> str:
        """A digest of everything the adapter yields from: the same for the same arguments
        and input lists, different when they change.

        The ingestor compares it to recognise a restarted run. A pickle is not stable enough
        for that: equal strings that are one object in one run and two in the next (labels read
        back from ``label2idx.json``) pickle differently.
        """
        state = {"class": f"{type(self).__module__}.{type(self).__qualname__}", **vars(self)}
        text = json.dumps(state, sort_keys=True, default=str, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


# ------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------
_DIGITS = re.compile(r"([0-9]+)")


def _natural_key(name: str):
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


def _check_unique_ids(ids: Iterable, source: str) -> None:
    """Raise :class:`DuplicateIdError` naming every id that occurs more than once."""
    counts = Counter(str(i) for i in ids)
    dups = [(i, n) for i, n in counts.items() if n > 1]
    if dups:
        shown = ", ".join(f"{i!r} ({n}x)" for i, n in dups[:10])
        more = f" and {len(dups) - 10} more" if len(dups) > 10 else ""
        raise DuplicateIdError(f"{len(dups)} duplicate ids in {source}: {shown}{more}")


def _shuffled(items: list, shuffle: bool, seed) -> list:
    if shuffle:
        random.Random(seed).shuffle(items)
    return items


def _slice(slice_element, n: int) -> slice:
    return slice_element or slice(0, n)


def _frame_rate(value) -> float | int | None:
    if value is None:
        return None
    rate = float(value)
    if not rate > 0:
        raise ValueError(f"frame_rate must be positive or None, got {value!r}")
    return int(rate) if rate.is_integer() else rate


def _error_item(id_, meta, reason: str) -> dict:
    return {"id": id_, "meta": meta, "frames": [], "error": reason}


def _reason(e: BaseException, path: str) -> str:
    text = f"{type(e).__name__}: {e}"
    return text if path in text else f"{path}: {text}"


def _video_item(id_, meta, path: str, frame_rate, frame_size, max_frames) -> dict:
    """The item of one video, decoded now; an unreadable video becomes an error item."""
    try:
        frames = read_video(
            path, frame_rate=frame_rate, frame_size=frame_size, max_frames=max_frames
        )
    except Exception as e:  # one bad video must not end the run: the ingestor reports it
        return _error_item(id_, meta, _reason(e, path))
    return {"id": id_, "meta": meta, "frames": frames}


# JPEG frames stored unchanged must decode as gulpio2 decodes them (baseline or progressive
# Huffman, 8-bit, gray or YCbCr); CMYK, 12-bit, arithmetic-coded and lossless JPEGs are decoded
# with Pillow and re-encoded instead.
_SOF_PASSTHROUGH = (0xC0, 0xC1, 0xC2)
_SOF_ALL = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _is_plain_jpeg(path: str) -> bool:
    """True if ``path`` is a JPEG whose frame header allows storing its bytes unchanged.

    Reads only the marker segments up to the frame header. Damage further in is found by the
    ingestor's strict decode, which then reports the frame.
    """
    with open(path, "rb") as f:
        if f.read(2) != b"\xff\xd8":
            return False
        while True:
            byte = f.read(1)
            if byte != b"\xff":
                return False
            marker = f.read(1)
            while marker == b"\xff":  # fill bytes
                marker = f.read(1)
            if not marker:
                return False
            code = marker[0]
            if code == 0x01 or 0xD0 <= code <= 0xD8:  # segments without a length
                continue
            if code in (0xD9, 0xDA):  # end of image or scan data before a frame header
                return False
            head = f.read(2)
            if len(head) != 2:
                return False
            length = int.from_bytes(head, "big")
            if code in _SOF_ALL:
                sof = f.read(6)
                return (
                    len(sof) == 6 and code in _SOF_PASSTHROUGH and sof[0] == 8 and sof[5] in (1, 3)
                )
            if length < 2:
                return False
            f.seek(length - 2, os.SEEK_CUR)


def _pil_to_array(img) -> np.ndarray:
    """An 8-bit RGB array, or gray for one-channel images (palette, alpha, CMYK and 16-bit
    images converted; alpha is dropped, as ``convert('RGB')`` does)."""
    mode = img.mode
    if mode in ("RGB", "L"):
        return np.asarray(img)
    if mode.startswith("I;16") or mode == "I":
        # 16-bit gray keeps its high byte; Pillow's convert('L') would clip at 255 instead.
        arr = np.asarray(img).astype(np.int64)
        return np.clip(arr >> 8, 0, 255).astype(np.uint8)
    if mode in ("1", "LA", "La", "F"):
        return np.asarray(img.convert("L"))
    if mode in ("P", "PA"):
        # Via RGBA so Pillow does not warn about palette transparency.
        img = img.convert("RGBA")
    return np.asarray(img.convert("RGB"))


def _image_frame(path: str, size: int):
    """One image file as a frame: its path if it can be stored as it is (a plain JPEG and no
    resize asked), else the decoded uint8 array (resized by :func:`_image_item`)."""
    if size < 1 and _is_plain_jpeg(path):
        return path
    from PIL import Image

    with Image.open(path) as img:
        img.load()
        return _pil_to_array(img)


def _frames_folder_item(id_, meta, folder: str, exts: tuple[str, ...], size: int) -> dict:
    """The item of one folder of frame files; an unreadable folder makes it an error item."""
    try:
        paths = _frame_files(folder, exts)
    except OSError as e:
        return _error_item(id_, meta, _reason(e, folder))
    return _image_item(id_, meta, paths, size, f"no frames in {folder}")


def _image_item(id_, meta, paths: Sequence[str], size: int, empty_reason: str) -> dict:
    """The item of one image or frame folder; any unreadable file makes it an error item."""
    if not paths:
        return _error_item(id_, meta, empty_reason)
    frames = []
    for path in paths:
        try:
            frames.append(_image_frame(path, size))
        except Exception as e:  # one bad file must not end the run: the ingestor reports it
            return _error_item(id_, meta, _reason(e, path))
    if size >= 1:
        from . import utils

        # One call for the whole video; looked up at call time (the Rust resize).
        frames = [np.ascontiguousarray(f) for f in utils.resize_frames(frames, size)]
    return {"id": id_, "meta": meta, "frames": frames}


def _frame_files(folder: str, exts: tuple[str, ...]) -> list[str]:
    """The frame files directly in ``folder``, in natural name order ([] if it is missing)."""
    try:
        names = [n for n in os.listdir(folder) if _visible(n) and _has_extension(n, exts)]
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [os.path.join(folder, n) for n in sorted(names, key=_natural_key)]


# ------------------------------------------------------------------------------------------
# label2idx.json
# ------------------------------------------------------------------------------------------
class _Label2IdxMixin:
    """``label2idx.json`` in ``output_folder``: stable across extensions, written atomically."""

    output_folder: str | None

    def _label2idx_path(self) -> str:
        return os.path.join(os.fspath(self.output_folder), LABEL2IDX_FILE)

    def check_if_label2idx_exists(self) -> bool:
        """True if the output folder already has a ``label2idx.json``."""
        return self.output_folder is not None and os.path.exists(self._label2idx_path())

    def read_label2idx(self) -> dict:
        """The output folder's ``label2idx.json``."""
        with open(self._label2idx_path()) as f:
            return json.load(f)

    def _stable_label2idx(self, labels: Iterable) -> dict:
        """Existing labels keep their index; new ones are appended in sorted order."""
        label2idx = dict(self.read_label2idx()) if self.check_if_label2idx_exists() else {}
        next_idx = max(label2idx.values(), default=-1) + 1
        for label in sorted({str(label) for label in labels}):
            if label not in label2idx:
                label2idx[label] = next_idx
                next_idx += 1
        return label2idx

    def _label_index(self) -> dict:
        return self.label2idx

    def write_label2idx_dict(self) -> None:
        """Write ``label2idx.json`` atomically, unless it already holds the same mapping."""
        if self.output_folder is None:
            return
        label2idx = self._label_index()
        path = self._label2idx_path()
        try:
            if self.read_label2idx() == label2idx:
                return
        except (OSError, ValueError):
            pass
        os.makedirs(os.fspath(self.output_folder), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.{uuid.uuid4().hex}.tmp"
        try:
            # os.open with 0o666 honours the umask, as gulpio2's plain open() did.
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            with os.fdopen(fd, "w") as f:
                json.dump(label2idx, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


class Custom20BNAdapterMixin(_Label2IdxMixin):
    """gulpio2's label bookkeeping of the 20BN adapters (``labels2idx``)."""

    def create_label2idx_dict(self, label_name) -> dict:
        """``{label: idx}`` for every label in ``self.data``, extending the existing file."""
        return self._stable_label2idx(item[label_name] for item in self.data)

    @property
    def label2idx(self) -> dict:
        """Alias of ``labels2idx`` (the name the other gulpio2 adapters use)."""
        return self.labels2idx


class _LabelFolderMixin(_Label2IdxMixin):
    """gulpio2's label bookkeeping of the folder and list adapters (``label2idx``)."""

    def create_label2idx_dict(self) -> dict:
        """``{label: idx}`` for every label in ``self.data``, extending the existing file."""
        return self._stable_label2idx(item["label"] for item in self.data)

    @property
    def labels2idx(self) -> dict:
        """Alias of ``label2idx`` (the name the 20BN adapters use)."""
        return self.label2idx


def _read_20bn_csv(csv_file, min_columns: int) -> list[dict]:
    data = []
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


# ------------------------------------------------------------------------------------------
# 20BN adapters
# ------------------------------------------------------------------------------------------
class _Custom20BNVideoAdapter(_BuiltinAdapter, Custom20BNAdapterMixin):
    """Shared construction and iteration of the two 20BN video adapters."""

    def _setup(
        self,
        source,
        *,
        label_name,
        output_folder,
        folder,
        shuffle,
        frame_size,
        frame_rate,
        shm_dir_path,
        remove_duplicate_ids,
        seed,
        max_frames,
    ):
        self.label_name = label_name
        self.output_folder = output_folder
        self.labels2idx = self.create_label2idx_dict(self.label_name)
        self.folder = folder
        self.shuffle = bool(shuffle)
        self.frame_size = int(frame_size)
        self.frame_rate = _frame_rate(frame_rate)
        self.shm_dir_path = shm_dir_path
        self.max_frames = max_frames
        self.seed = seed
        self.all_meta = self.get_meta()
        if remove_duplicate_ids:
            from . import utils

            self.all_meta = utils.remove_entries_with_duplicate_ids(
                self.output_folder, self.all_meta
            )
        else:
            _check_unique_ids((m["id"] for m in self.all_meta), source)
        _shuffled(self.all_meta, self.shuffle, seed)

    def get_meta(self) -> list[dict]:
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

    def _video_path(self, id_) -> str:
        raise NotImplementedError

    def iter_data(self, slice_element=None):
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
        json_file,
        folder,
        output_folder,
        shuffle=False,
        frame_size=-1,
        frame_rate=8,
        shm_dir_path="/dev/shm",
        label_name="template",
        remove_duplicate_ids=False,
        *,
        seed=0,
        max_frames=None,
    ):
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
    def read_json(json_file) -> list:
        """The JSON list of entries."""
        with open(json_file) as f:
            return json.load(f)

    @staticmethod
    def read_gz_json(gz_json_file) -> list:
        """The gzipped JSON list of entries."""
        with gzip.open(gz_json_file, "rt") as fp:
            return json.load(fp)

    def _video_path(self, id_) -> str:
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
        csv_file,
        folder,
        output_folder,
        shuffle=False,
        frame_size=-1,
        frame_rate=12,
        shm_dir_path="/dev/shm",
        label_name="label",
        remove_duplicate_ids=False,
        *,
        seed=0,
        max_frames=None,
    ):
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
    def read_csv(csv_file) -> list[dict]:
        """``[{'id', 'label'}]`` from ``id;label`` (or ``id``) rows."""
        return _read_20bn_csv(csv_file, min_columns=1)

    def get_single_video_file_path(self, folder_name, format_="webm") -> str:
        """``<folder_name>.<format_>``, else the one ``<folder_name>.<video ext>`` that exists."""
        for ext in ("." + format_.lstrip("."), *VIDEO_EXTENSIONS):
            path = folder_name + ext
            if os.path.isfile(path):
                return path
        raise FileNotFoundError(f"no video {folder_name}.{format_.lstrip('.')}")

    def _video_path(self, id_) -> str:
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
        csv_file,
        folder,
        output_folder,
        shuffle=False,
        frame_size=-1,
        shm_dir_path="/dev/shm",
        *,
        seed=0,
    ):
        self.data = self.read_csv(csv_file)
        self.output_folder = output_folder
        self.labels2idx = self.create_label2idx_dict("label")
        self.folder = folder
        self.shuffle = bool(shuffle)
        self.frame_size = int(frame_size)
        self.shm_dir_path = shm_dir_path
        self.seed = seed
        self.all_meta = self.get_meta()
        _check_unique_ids((m["id"] for m in self.all_meta), os.fspath(csv_file))
        _shuffled(self.all_meta, self.shuffle, seed)

    @staticmethod
    def read_csv(csv_file) -> list[dict]:
        """``[{'id', 'label'}]`` from ``id;label`` rows."""
        return _read_20bn_csv(csv_file, min_columns=2)

    def get_meta(self) -> list[dict]:
        """``{'id', 'label', 'idx'}`` for every row, in input order."""
        return [
            {"id": e["id"], "label": e["label"], "idx": self.labels2idx[str(e["label"])]}
            for e in self.data
        ]

    def __len__(self) -> int:
        return len(self.all_meta)

    def iter_data(self, slice_element=None):
        """Yield each id's frames (JPEG paths, or arrays when resizing)."""
        self.write_label2idx_dict()
        exts = (".jpg", ".jpeg")
        for meta in self.all_meta[_slice(slice_element, len(self))]:
            video_folder = os.path.join(os.fspath(self.folder), str(meta["id"]))
            yield _frames_folder_item(meta["id"], meta, video_folder, exts, self.frame_size)


# ------------------------------------------------------------------------------------------
# image adapters
# ------------------------------------------------------------------------------------------
def _class_folder_items(folder, exts: tuple[str, ...], kind: str) -> list[dict]:
    """``{'id', 'label', 'path'}`` for the files of ``<folder>/<label>/**``, sorted by path.

    The label is the first-level subfolder; the id is ``"<label>-<path below it>"``, which is
    gulpio2's ``"<label>-<filename>"`` for the usual one-level layout and stays unique when
    class folders are nested.
    """
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"no {kind} folder {folder}")
    items = []
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
            f"ignored (e.g. {sorted(loose)[0]!r})",
            stacklevel=3,
        )
    items.sort(key=_file_of)  # gulpio2's order: its sorted glob of the file paths
    return items


def _file_of(item: dict) -> str:
    """The file of a class-folder item (its directory plus the name at the end of its id)."""
    return os.path.join(item["path"], item["id"][len(item["label"]) + 1 :].rsplit("/", 1)[-1])


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
        self, input_file, output_folder, root_folder="", shuffle=False, img_size=-1, *, seed=0
    ):
        self.input_file = input_file
        self.output_folder = output_folder
        self.root_folder = root_folder
        self.folder = root_folder
        self.data = ImageListAdapter.parse_paths(self.input_file)
        self.label2idx = self.create_label2idx_dict()
        self.shuffle = bool(shuffle)
        self.img_size = int(img_size)
        self.seed = seed
        self.all_meta = self.get_meta()
        _check_unique_ids((m["id"] for m in self.all_meta), os.fspath(input_file))
        _shuffled(self.all_meta, self.shuffle, seed)

    @staticmethod
    def parse_paths(input_file) -> list[dict]:
        """``[{'id', 'label', 'path'}]`` from the ``path,label`` lines."""
        data = []
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

    def get_meta(self) -> list[dict]:
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

    def iter_data(self, slice_element=None):
        """Yield one image per item."""
        self.write_label2idx_dict()
        for entry in self.all_meta[_slice(slice_element, len(self))]:
            meta = {k: v for k, v in entry.items() if k != "path"}
            img_path = os.path.join(os.fspath(self.root_folder), str(entry["path"]))
            yield _image_item(meta["id"], meta, [img_path], self.img_size, "")


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
        folder,
        output_folder,
        file_extensions=(".jpg", ".png"),
        shuffle=False,
        img_size=-1,
        *,
        seed=0,
    ):
        self.file_extensions = list(file_extensions)
        self.data = self.parse_folder(folder)
        self.output_folder = output_folder
        self.label2idx = self.create_label2idx_dict()
        self.folder = folder
        self.shuffle = bool(shuffle)
        self.img_size = int(img_size)
        self.seed = seed
        self.all_meta = self.get_meta()
        _check_unique_ids((m["id"] for m in self.all_meta), os.fspath(folder))
        _shuffled(self.all_meta, self.shuffle, seed)

    def parse_folder(self, folder) -> list[dict]:
        """``[{'id', 'label', 'path'}]`` for every image, sorted by path."""
        return _class_folder_items(folder, _extensions(self.file_extensions), "image")

    def get_meta(self) -> list[dict]:
        """``{'id', 'label', 'path', 'idx'}`` per image."""
        return [{**e, "idx": self.label2idx[str(e["label"])]} for e in self.data]

    def __len__(self) -> int:
        return len(self.all_meta)

    def iter_data(self, slice_element=None):
        """Yield one image per item."""
        self.write_label2idx_dict()
        for meta in self.all_meta[_slice(slice_element, len(self))]:
            yield _image_item(meta["id"], meta, [_file_of(meta)], self.img_size, "")


# ------------------------------------------------------------------------------------------
# video adapters
# ------------------------------------------------------------------------------------------
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
        folder,
        output_folder,
        file_extensions=VIDEO_EXTENSIONS,
        shuffle=False,
        frame_size=-1,
        shm_dir_path="/dev/shm",
        *,
        frame_rate=None,
        max_frames=None,
        seed=0,
    ):
        self.file_extensions = list(file_extensions)
        self.data = self.parse_folder(folder)
        self.output_folder = output_folder
        self.label2idx = self.create_label2idx_dict()
        self.folder = folder
        self.shuffle = bool(shuffle)
        self.frame_size = int(frame_size)
        self.frame_rate = _frame_rate(frame_rate)
        self.max_frames = max_frames
        self.seed = seed
        self.all_meta = self.get_meta()
        self.shm_dir_path = shm_dir_path
        _check_unique_ids((m["id"] for m in self.all_meta), os.fspath(folder))
        _shuffled(self.all_meta, self.shuffle, seed)

    def parse_folder(self, folder) -> list[dict]:
        """``[{'id', 'label', 'path'}]`` for every video, sorted by path."""
        return _class_folder_items(folder, _extensions(self.file_extensions), "video")

    def get_meta(self) -> list[dict]:
        """``{'id', 'label', 'path', 'idx'}`` per video."""
        return [{**e, "idx": self.label2idx[str(e["label"])]} for e in self.data]

    def __len__(self) -> int:
        return len(self.all_meta)

    def iter_data(self, slice_element=None):
        """Decode each video of the slice (one at a time) and yield it."""
        self.write_label2idx_dict()
        for meta in self.all_meta[_slice(slice_element, len(self))]:
            yield _video_item(
                meta["id"], meta, _file_of(meta), self.frame_rate, self.frame_size, self.max_frames
            )

    def get_bursted_frames(self, video_path) -> list[np.ndarray]:
        """All frames of one video (gulpio2's name; decoded with PyAV, not bursted)."""
        return read_video(
            video_path,
            frame_rate=self.frame_rate,
            frame_size=self.frame_size,
            max_frames=self.max_frames,
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
        folder,
        output_folder=None,
        file_extensions=FRAME_EXTENSIONS,
        shuffle=False,
        frame_size=-1,
        *,
        labels=None,
        seed=0,
    ):
        self.folder = folder
        self.output_folder = output_folder
        self.file_extensions = list(file_extensions)
        self.shuffle = bool(shuffle)
        self.frame_size = int(frame_size)
        self.seed = seed
        self.labels = self._detect_labels(labels)
        self.data = self.parse_folder(folder)
        self.label2idx = self.create_label2idx_dict() if self.labels else {}
        self.all_meta = self.get_meta()
        _check_unique_ids((m["id"] for m in self.all_meta), os.fspath(folder))
        _shuffled(self.all_meta, self.shuffle, seed)

    def _detect_labels(self, labels) -> bool:
        folder = os.fspath(self.folder)
        if not os.path.isdir(folder):
            raise FileNotFoundError(f"no frames folder {folder}")
        if labels is not None:
            return bool(labels)
        exts = _extensions(self.file_extensions)
        with_frames, without = [], []
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

    def parse_folder(self, folder) -> list[dict]:
        """``[{'id', 'label'?, 'path'}]`` for every video folder, sorted."""
        folder = os.fspath(folder)
        if not self.labels:
            return [{"id": v, "path": os.path.join(folder, v)} for v in _subdirs(folder)]
        return [
            {"id": f"{label}/{v}", "label": label, "path": os.path.join(folder, label, v)}
            for label in _subdirs(folder)
            for v in _subdirs(os.path.join(folder, label))
        ]

    def get_meta(self) -> list[dict]:
        """The item list: stored meta plus the video folder path (not stored)."""
        if not self.labels:
            return [{"id": e["id"], "path": e["path"]} for e in self.data]
        return [{**e, "idx": self.label2idx[str(e["label"])]} for e in self.data]

    def __len__(self) -> int:
        return len(self.all_meta)

    def iter_data(self, slice_element=None):
        """Yield each video folder's frames (JPEG paths, or arrays when decoding)."""
        if self.labels:
            self.write_label2idx_dict()
        exts = _extensions(self.file_extensions)
        for entry in self.all_meta[_slice(slice_element, len(self))]:
            meta = {k: v for k, v in entry.items() if k != "path"}
            yield _frames_folder_item(meta["id"], meta, entry["path"], exts, self.frame_size)


_KINETICS_NAME = re.compile(r"^(?P<id>.+)_\d{6}_\d{6}$")


class _JsonVideosAdapter(_BuiltinAdapter):
    """What the Kinetics and ActivityNet adapters share: videos listed in ``vid_storage``
    (``{'id', 'meta', 'path'}``), annotations re-read from ``json_file`` on access."""

    @property
    def json_storage(self) -> dict:
        """The annotations (gulpio2's attribute; read on access, not kept)."""
        return self.read_json(self.json_file)

    def __len__(self) -> int:
        return len(self.vid_storage)

    def get_bursted_frames(self, vid_file) -> list[np.ndarray]:
        """All frames of one video (gulpio2's name; decoded with PyAV, not bursted)."""
        return read_video(
            os.path.join(os.fspath(self.folder), vid_file),
            frame_rate=self.frame_rate,
            frame_size=self.frame_size,
            max_frames=self.max_frames,
        )

    def iter_data(self, slice_element=None):
        """Decode each video of the slice (one at a time) and yield it."""
        for v in self.vid_storage[_slice(slice_element, len(self))]:
            yield _video_item(
                v["id"], v["meta"], v["path"], self.frame_rate, self.frame_size, self.max_frames
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
        json_file,
        folder,
        shuffle=False,
        frame_size=-1,
        shm_dir_path="/dev/shm",
        *,
        frame_rate=None,
        max_frames=None,
        seed=0,
    ):
        self.json_file = json_file
        self.folder = folder
        self.frame_size = int(frame_size)
        self.frame_rate = _frame_rate(frame_rate)
        self.max_frames = max_frames
        self.shm_dir_path = shm_dir_path
        self.shuffle = bool(shuffle)
        self.seed = seed
        self.set_video_storage(self.read_json(json_file))
        _check_unique_ids((v["id"] for v in self.vid_storage), os.fspath(folder))
        _shuffled(self.vid_storage, self.shuffle, seed)

    @staticmethod
    def video_id(path) -> str:
        """The YouTube id of a clip file name."""
        stem = os.path.basename(os.fspath(path)).split(".", 1)[0]
        m = _KINETICS_NAME.match(stem)
        return m.group("id") if m else stem

    def set_video_storage(self, json_storage: dict | None = None) -> None:
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
    def read_json(json_file) -> dict:
        """The annotation JSON (``{youtube id: entry}``)."""
        with open(json_file) as f:
            return json.load(f)


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
        json_file,
        folder,
        shuffle=False,
        frame_size=-1,
        shm_dir_path="/dev/shm",
        phase="training",
        *,
        frame_rate=None,
        max_frames=None,
        seed=0,
    ):
        self.json_file = json_file
        self.folder = folder
        self.phase = phase
        self.frame_size = int(frame_size)
        self.frame_rate = _frame_rate(frame_rate)
        self.max_frames = max_frames
        self.shm_dir_path = shm_dir_path
        self.shuffle = bool(shuffle)
        self.seed = seed
        self.set_video_storage(phase, self.read_json(json_file))
        _check_unique_ids((v["id"] for v in self.vid_storage), os.fspath(folder))
        _shuffled(self.vid_storage, self.shuffle, seed)

    def set_video_storage(self, phase="training", json_storage=None) -> None:
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
    def read_json(json_file) -> dict:
        """The ``database`` part of the annotation JSON."""
        with open(json_file) as f:
            return json.load(f)["database"]


# ------------------------------------------------------------------------------------------
# the demo's adapter
# ------------------------------------------------------------------------------------------
class JpegFolderClipsAdapter(_BuiltinAdapter):
    """Clips stored as folders of JPEG files, described by a JSON list.

    ``clips_json`` lists ``{"id": ..., "label": ..., ...}`` objects; the frames of clip
    ``clip_NN`` are ``<folder>/<folder_name>/*.jpg`` in name order, where ``folder_name`` is the
    entry's ``"folder"`` key or the id's suffix after the last ``_`` prefixed by ``clip_``.
    JPEG bytes are stored unchanged (no second lossy encode). This is what ``gulpio demo``
    gulps; it is also a small example of a custom adapter.
    """

    def __init__(self, clips_json: str, folder: str):
        with open(clips_json) as f:
            self.entries = json.load(f)
        self.folder = folder
        _check_unique_ids((e["id"] for e in self.entries), os.fspath(clips_json))

    def __len__(self) -> int:
        return len(self.entries)

    def _frames_dir(self, entry) -> str:
        name = entry.get("folder") or "clip_" + str(entry["id"]).rsplit("_", 1)[-1]
        return os.path.join(self.folder, name)

    def iter_data(self, slice_element=None):
        """Yield each clip's JPEG bytes."""
        for entry in self.entries[_slice(slice_element, len(self))]:
            meta = {k: v for k, v in entry.items() if k != "folder"}
            frames_dir = self._frames_dir(entry)
            try:
                frames = []
                for path in _frame_files(frames_dir, (".jpg",)):
                    with open(path, "rb") as f:
                        frames.append(f.read())
            except OSError as e:
                yield _error_item(entry["id"], meta, _reason(e, frames_dir))
                continue
            if not frames:
                yield _error_item(entry["id"], meta, f"no JPEG frames in {frames_dir}")
                continue
            yield {"id": entry["id"], "meta": meta, "frames": frames}


__all__ = [
    "AbstractDatasetAdapter",
    "Custom20BNAdapterMixin",
    "Custom20BNJsonVideoAdapter",
    "Custom20BNCsvWebmAdapter",
    "Custom20BNCsvJpegAdapter",
    "ImageListAdapter",
    "ImageFolderAdapter",
    "VideoFolderAdapter",
    "FramesFolderAdapter",
    "KineticsAdapter",
    "ActivitynetAdapter",
    "JpegFolderClipsAdapter",
    "FRAME_EXTENSIONS",
    "VIDEO_EXTENSIONS",
]
