"""``storage_options`` of a remote dataset: kept as given, printed without secrets."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import _native


class StorageOptions(dict[str, Any]):
    """``storage_options`` as given (a dict), printed without secret values: kept on the
    directory so that pickled copies (DataLoader workers) reconnect with them."""

    def __repr__(self) -> str:
        shown = {k: "***" if _native.is_secret_option(str(k)) else v for k, v in self.items()}
        return f"StorageOptions({shown!r})"

    __str__ = __repr__

    def pairs(self) -> list[tuple[str, str]]:
        """String pairs for the core (booleans as ``"true"``/``"false"``)."""
        out = []
        for key, value in self.items():
            if isinstance(value, bool):
                value = "true" if value else "false"
            out.append((str(key), str(value)))
        return out


def storage_options_list(options: Mapping[str, Any] | None) -> StorageOptions | None:
    """``storage_options`` checked to be a mapping, kept as a :class:`StorageOptions`."""
    if options is None:
        return None
    if not isinstance(options, Mapping):
        raise TypeError(f"storage_options must be a dict, not {type(options).__name__}")
    return StorageOptions(options)
