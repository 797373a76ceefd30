"""The adapter contract (gulpio2's ``AbstractDatasetAdapter``) and what every built-in
adapter shares: fingerprint, id checks, shuffling, slicing, error items.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from .._fingerprint import digest, settings_of
from .._reading import id_str
from ..errors import DuplicateIdError

_T = TypeVar("_T")


class AbstractDatasetAdapter(ABC):
    """Base class of dataset adapters (gulpio2-compatible).

    Subclasses implement ``iter_data(slice_element=None)``, yielding
    ``{'id', 'meta', 'frames'}`` dicts for the items of ``slice_element`` (all items when
    ``None``), and ``__len__``. To report one unusable item without stopping the run, yield it
    with ``'frames': []`` and an ``'error'`` string. An item may carry its frames' times:
    ``'timestamps'`` (seconds, one per frame), optionally ``'fps'`` and ``'end'``; they are
    stored for time-based sampling (docs/INGEST.md, "Frame timestamps"). Adapters are pickled
    to the ingest workers,
    so keep them small: paths and metadata, not decoded frames or open files.

    Optional: ``item_ids()``, the ids of all items in iteration order, computed without
    producing frames (a list as long as ``len(adapter)``). With it the ingestor skips the items
    a dataset already holds before decoding them (a rerun, an extension with a superset of the
    input); without it they are produced first and then skipped. ``fingerprint()``: a string
    that identifies the data and settings, for recognising a restarted run (see
    docs/INGEST.md, "Restart").
    """

    @abstractmethod
    def iter_data(self, slice_element: slice | None = None) -> Iterator[dict[str, Any]]:
        """Yield ``{'id', 'meta', 'frames'}`` dicts for the items in ``slice_element``."""

    @abstractmethod
    def __len__(self) -> int:
        """Number of items."""


class _BuiltinAdapter(AbstractDatasetAdapter):
    """What every built-in adapter adds to the gulpio2 contract."""

    all_meta: list[dict[str, Any]]  # set by each adapter: the items' records

    def _records(self) -> list[dict[str, Any]]:
        """The items in iteration order, as the dicts the adapter yields them from."""
        return self.all_meta

    def item_ids(self) -> list[str]:
        """The ids of the items in iteration order, known without producing any frame.

        The ingestor uses them to skip the items a dataset already holds before decoding
        them (rerun, extension with a superset of the input).
        """
        return [id_str(r["id"]) for r in self._records()]

    def fingerprint(self) -> str:
        """A digest of what the adapter yields and how: its items (ids, labels and stored
        metadata, in order) and its settings (frame size, frame rate, shuffle, ...), but not
        where the input or the output is (a path spelled ``videos`` or ``videos/``, a moved or
        copied folder): the same for the same data and settings, different when they change.

        The ingestor compares it to recognise a restarted run. The algorithm is
        :func:`gulpio_rs._fingerprint.digest`, the one the ingestor applies to adapters
        without a ``fingerprint()``.
        """
        cls = type(self)
        return digest(
            {
                "adapter": f"{cls.__module__}.{cls.__qualname__}",
                "settings": settings_of(self),
                "items": [
                    {k: v for k, v in r.items() if k not in _RECORD_PATHS} for r in self._records()
                ],
            }
        )


#: Keys of item records that say where an item's file is, not what is stored.
_RECORD_PATHS = ("path", "folder")


def _check_unique_ids(ids: Iterable[object], source: str) -> None:
    """Raise :class:`DuplicateIdError` naming every id that occurs more than once."""
    counts = Counter(str(i) for i in ids)
    dups = [(i, n) for i, n in counts.items() if n > 1]
    if dups:
        shown = ", ".join(f"{i!r} ({n}x)" for i, n in dups[:10])
        more = f" and {len(dups) - 10} more" if len(dups) > 10 else ""
        raise DuplicateIdError(f"{len(dups)} duplicate ids in {source}: {shown}{more}")


def _shuffled(items: list[_T], shuffle: bool, seed: int | None) -> list[_T]:
    if shuffle:
        random.Random(seed).shuffle(items)
    return items


def _slice(slice_element: slice | None, n: int) -> slice:
    return slice_element or slice(0, n)


def _check_size(value: int, name: str) -> int:
    """``value`` if it is a frame size: a number of pixels for the shorter side (>= 1), or -1
    to keep the size; ValueError naming ``name`` otherwise (0 used to keep the size silently,
    which a typo of a real size should not do)."""
    size = int(value)  # a non-number fails here, early
    if size != -1 and size < 1:
        raise ValueError(
            f"{name} must be a number of pixels for the shorter side (1 or more), or -1 to "
            f"keep the frames' size; got {value!r}"
        )
    return value


def _frame_rate(value: float | str | None) -> float | int | None:
    if value is None:
        return None
    rate = float(value)
    if not rate > 0:
        raise ValueError(f"frame_rate must be positive or None, got {value!r}")
    return int(rate) if rate.is_integer() else rate


def _error_item(id_: object, meta: object, reason: str) -> dict[str, Any]:
    return {"id": id_, "meta": meta, "frames": [], "error": reason}


def _reason(e: BaseException, path: str) -> str:
    text = f"{type(e).__name__}: {e}"
    return text if path in text else f"{path}: {text}"
