"""``label2idx.json``: the label bookkeeping of the built-in adapters."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .._atomic import write_json_atomically

LABEL2IDX_FILE = "label2idx.json"


class _Label2IdxMixin:
    """``label2idx.json`` in ``output_folder``: stable across extensions, written atomically."""

    output_folder: str | os.PathLike[str] | None

    if TYPE_CHECKING:
        # Each subclass has it: an attribute of the folder adapters, a property of the 20BN.
        @property
        def label2idx(self) -> dict[str, int]: ...

    def _label2idx_path(self) -> str:
        return os.path.join(self._label2idx_folder(), LABEL2IDX_FILE)

    def _label2idx_folder(self) -> str:
        """The local folder of ``label2idx.json``: ``output_folder``, or for a dataset URL the
        ingest's staging folder for it (uploaded with the chunks, as the command line does),
        never a local path spelled like the URL."""
        from .. import _native
        from ..ingest.remote import staging_folder

        if self.output_folder is None:
            raise TypeError(f"{type(self).__name__} has no output_folder for label2idx.json")
        folder = os.fsdecode(os.fspath(self.output_folder))
        return staging_folder(folder) if _native.is_remote_url(folder) else folder

    def check_if_label2idx_exists(self) -> bool:
        """True if the output folder already has a ``label2idx.json``."""
        return self.output_folder is not None and os.path.exists(self._label2idx_path())

    def read_label2idx(self) -> dict[str, int]:
        """The output folder's ``label2idx.json``."""
        with open(self._label2idx_path()) as f:
            label2idx: dict[str, int] = json.load(f)
        return label2idx

    def _stable_label2idx(self, labels: Iterable[object]) -> dict[str, int]:
        """Existing labels keep their index; new ones are appended in sorted order."""
        label2idx = dict(self.read_label2idx()) if self.check_if_label2idx_exists() else {}
        next_idx = max(label2idx.values(), default=-1) + 1
        for label in sorted({str(label) for label in labels}):
            if label not in label2idx:
                label2idx[label] = next_idx
                next_idx += 1
        return label2idx

    def _label_index(self) -> dict[str, int]:
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
        os.makedirs(self._label2idx_folder(), exist_ok=True)
        write_json_atomically(path, label2idx)


class Custom20BNAdapterMixin(_Label2IdxMixin):
    """gulpio2's label bookkeeping of the 20BN adapters (``labels2idx``)."""

    data: list[dict[str, Any]]
    labels2idx: dict[str, int]

    def create_label2idx_dict(self, label_name: str) -> dict[str, int]:
        """``{label: idx}`` for every label in ``self.data``, extending the existing file."""
        return self._stable_label2idx(item[label_name] for item in self.data)

    @property
    def label2idx(self) -> dict[str, int]:
        """Alias of ``labels2idx`` (the name the other gulpio2 adapters use)."""
        return self.labels2idx


class _LabelFolderMixin(_Label2IdxMixin):
    """gulpio2's label bookkeeping of the folder and list adapters (``label2idx``)."""

    data: list[dict[str, Any]]
    label2idx: dict[str, int]

    def create_label2idx_dict(self) -> dict[str, int]:
        """``{label: idx}`` for every label in ``self.data``, extending the existing file."""
        return self._stable_label2idx(item["label"] for item in self.data)

    @property
    def labels2idx(self) -> dict[str, int]:
        """Alias of ``label2idx`` (the name the 20BN adapters use)."""
        return self.label2idx
