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
  ``fingerprint()`` that is the same for the same data and settings wherever the input and
  output folders are and however their paths are spelled (the ingestor recognises a restarted
  run by it), and ``item_ids()``, so that items a dataset already holds are skipped before
  anything is decoded.

Per-adapter differences are listed in each class's docstring.
"""

from __future__ import annotations

from ..source_video import VIDEO_EXTENSIONS
from .base import AbstractDatasetAdapter
from .clips import JpegFolderClipsAdapter
from .files import FRAME_EXTENSIONS
from .folders import (
    FramesFolderAdapter,
    ImageFolderAdapter,
    ImageListAdapter,
    VideoFilesAdapter,
    VideoFolderAdapter,
)
from .kinetics import ActivitynetAdapter, KineticsAdapter
from .labels import LABEL2IDX_FILE, Custom20BNAdapterMixin
from .twentybn import Custom20BNCsvJpegAdapter, Custom20BNCsvWebmAdapter, Custom20BNJsonVideoAdapter

__all__ = [
    "AbstractDatasetAdapter",
    "Custom20BNAdapterMixin",
    "Custom20BNJsonVideoAdapter",
    "Custom20BNCsvWebmAdapter",
    "Custom20BNCsvJpegAdapter",
    "ImageListAdapter",
    "ImageFolderAdapter",
    "VideoFolderAdapter",
    "VideoFilesAdapter",
    "FramesFolderAdapter",
    "KineticsAdapter",
    "ActivitynetAdapter",
    "JpegFolderClipsAdapter",
    "FRAME_EXTENSIONS",
    "LABEL2IDX_FILE",
    "VIDEO_EXTENSIONS",
]

# The classes are defined in submodules but belong to this module's public surface: their
# module is this one, so pickles (worker processes, saved adapters), reprs, ``--adapter``
# names and the fingerprints and plan keys of earlier versions all keep saying
# ``gulpio_rs.adapters.<Class>``.
for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type) and _obj.__module__.startswith(__name__ + "."):
        _obj.__module__ = __name__
del _name, _obj
