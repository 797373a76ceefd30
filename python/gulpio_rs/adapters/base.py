"""The adapter contract (gulpio2's ``AbstractDatasetAdapter``) and what every built-in
adapter shares: fingerprint, id checks, shuffling, slicing, error items.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterable

from .._fingerprint import digest
from ..errors import DuplicateIdError


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

        The ingestor compares it to recognise a restarted run; the algorithm is
        :func:`gulpio_rs._fingerprint.digest`, the one the ingestor applies to adapters
        without a ``fingerprint()``.
        """
        return digest(self)


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
