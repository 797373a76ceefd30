"""The demo's adapter: clips as folders of JPEG files listed in a JSON file."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

from .base import _BuiltinAdapter, _check_unique_ids, _error_item, _reason, _slice
from .files import _frame_files


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
            self.entries: list[dict[str, Any]] = json.load(f)
        self.folder = folder
        _check_unique_ids((e["id"] for e in self.entries), os.fspath(clips_json))

    def __len__(self) -> int:
        return len(self.entries)

    def _records(self) -> list[dict[str, Any]]:
        return self.entries

    def _frames_dir(self, entry: dict[str, Any]) -> str:
        name = entry.get("folder") or "clip_" + str(entry["id"]).rsplit("_", 1)[-1]
        return os.path.join(self.folder, name)

    def iter_data(self, slice_element: slice | None = None) -> Iterator[dict[str, Any]]:
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
