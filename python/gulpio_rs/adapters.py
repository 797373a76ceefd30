"""Dataset adapters: what ``GulpIngestor`` reads videos from (gulpio2's ``adapters`` module).

An adapter yields ``{'id': ..., 'meta': {...}, 'frames': [...]}`` dicts from
``iter_data(slice_element)`` and reports its size with ``__len__``. Frames may be uint8 arrays
(``HxWx3`` RGB or ``HxW`` gray), or JPEG bytes that are stored as they are.
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod


class AbstractDatasetAdapter(ABC):
    """Base class of dataset adapters (gulpio2-compatible)."""

    @abstractmethod
    def iter_data(self, slice_element=None):
        """Yield ``{'id', 'meta', 'frames'}`` dicts for the items in ``slice_element``."""

    @abstractmethod
    def __len__(self) -> int:
        """Number of items."""


class JpegFolderClipsAdapter(AbstractDatasetAdapter):
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

    def __len__(self) -> int:
        return len(self.entries)

    def _frames_dir(self, entry) -> str:
        name = entry.get("folder") or "clip_" + str(entry["id"]).rsplit("_", 1)[-1]
        return os.path.join(self.folder, name)

    def iter_data(self, slice_element=None):
        slice_element = slice_element or slice(0, len(self))
        for entry in self.entries[slice_element]:
            frames_dir = self._frames_dir(entry)
            names = sorted(n for n in os.listdir(frames_dir) if n.lower().endswith(".jpg"))
            frames = []
            for name in names:
                with open(os.path.join(frames_dir, name), "rb") as f:
                    frames.append(f.read())
            meta = {k: v for k, v in entry.items() if k != "folder"}
            yield {"id": entry["id"], "meta": meta, "frames": frames}
