"""The one fingerprint algorithm: a digest of an object's canonical form.

Used by the built-in adapters' ``fingerprint()`` and by the ingestor for adapters without
one, to recognise a restarted run; :func:`settings_of` says which attributes of an adapter are
settings (what is made of the input) rather than places (where the input and output are).
Sets and dicts are sorted, so the digest does not change with ``PYTHONHASHSEED`` between runs;
and unlike a pickle it does not depend on object identity (equal strings that are one object
in one run and two in the next pickle differently).
"""

from __future__ import annotations

import hashlib
import os
from typing import Any


def digest(obj: object) -> str:
    """The sha256 hex digest of ``obj``'s canonical form (its class and attributes for
    objects); raises :class:`NoCanonicalForm` for anything without one."""
    h = hashlib.sha256()
    _canonical(obj, h, depth=0, seen=set())
    return h.hexdigest()


class NoCanonicalForm(Exception):
    """The object holds something without a deterministic serialisation."""


def _canonical(obj: object, h: hashlib._Hash, depth: int, seen: set[int]) -> None:
    """Feeds a deterministic serialisation of ``obj`` into ``h``."""
    import numpy as np

    if depth > 50:
        raise NoCanonicalForm("nested too deeply")

    def put(tag: str, text: str = "") -> None:
        h.update(f"{tag}{len(text)}:{text};".encode("utf-8", "surrogatepass"))

    if obj is None or isinstance(obj, (bool, int, float, complex, str)):
        put(type(obj).__name__, repr(obj))
    elif isinstance(obj, (bytes, bytearray)):
        put("bytes", bytes(obj).hex())
    elif isinstance(obj, os.PathLike):
        put("path", os.fspath(obj))
    elif isinstance(obj, slice):
        put("slice", repr((obj.start, obj.stop, obj.step)))
    elif isinstance(obj, np.ndarray):
        put("ndarray", f"{obj.dtype.str}{obj.shape}")
        h.update(np.ascontiguousarray(obj).tobytes())
    elif isinstance(obj, np.generic):
        put("npscalar", repr(obj.item()))
    elif id(obj) in seen:
        raise NoCanonicalForm("it refers to itself")
    else:
        seen = seen | {id(obj)}
        if isinstance(obj, (list, tuple)):
            put(type(obj).__name__, str(len(obj)))
            for x in obj:
                _canonical(x, h, depth + 1, seen)
        elif isinstance(obj, (set, frozenset)):
            items = []
            for x in obj:
                sub = hashlib.sha256()
                _canonical(x, sub, depth + 1, seen)
                items.append(sub.hexdigest())
            put("set", ",".join(sorted(items)))
        elif isinstance(obj, dict):
            items = []
            for k, v in obj.items():
                sub = hashlib.sha256()
                _canonical(k, sub, depth + 1, seen)
                _canonical(v, sub, depth + 1, seen)
                items.append(sub.hexdigest())
            put(type(obj).__name__, ",".join(sorted(items)))
        elif hasattr(obj, "__dict__") or hasattr(type(obj), "__slots__"):
            cls = type(obj)
            put("object", f"{cls.__module__}.{cls.__qualname__}")
            state = dict(getattr(obj, "__dict__", {}))
            for name in getattr(cls, "__slots__", ()):
                if hasattr(obj, name):
                    state[name] = getattr(obj, name)
            if not state and callable(obj):
                put("callable", getattr(obj, "__qualname__", repr(obj)))
            _canonical(state, h, depth + 1, seen)
        else:
            raise NoCanonicalForm(f"a {type(obj).__name__} attribute")


#: Attributes that hold no setting: where the output goes, gulpio2's unused bursting folder.
NOT_SETTINGS = ("output_folder", "shm_dir_path")

_SCALARS = (bool, int, float, str)


def is_location(name: str) -> bool:
    """Attributes that say where the input is (``folder``, ``json_file``, ``root_folder``,
    ...), not what is made of it."""
    return name in ("folder", "path", "root", "input") or name.endswith(
        ("_folder", "_file", "_path", "_dir", "_root")
    )


def settings_of(adapter: object) -> dict[str, Any]:
    """An adapter's settings: its public attributes that are numbers, strings or short lists
    of them, except those naming a place (input and output folders and files)."""
    out: dict[str, Any] = {}
    for name, value in vars(adapter).items():
        if name.startswith("_") or name in NOT_SETTINGS or is_location(name):
            continue
        if value is None or isinstance(value, _SCALARS):
            out[name] = value
        elif (
            isinstance(value, (list, tuple))
            and len(value) <= 16
            and all(v is None or isinstance(v, _SCALARS) for v in value)
        ):
            out[name] = list(value)
    return out
