"""The metadata mappings gulpio2 exposes (``merged_meta_dict``, ``all_meta_dicts``,
``GulpChunk.meta_dict``), built per video on first access instead of parsed at open.

A :class:`LazyMetaDict` is a real ``OrderedDict``: every key (video id) is stored from the
start, so ``len``, ``in``, iteration, ``reversed`` and ``keys()`` are the C dict's own, and
``isinstance(x, dict)`` holds. Only the values start as a placeholder and are built (and
kept, so mutations stick as they do in gulpio2) when first read. Every operation that exposes
values without going through ``__getitem__`` (``values``/``items``, ``==``, ``repr``, pickling,
copying, ``|``) builds them all first, so it sees exactly what gulpio2's dict would hold.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Self, SupportsIndex, cast

if TYPE_CHECKING:
    from collections import _odict_items, _odict_values

    from _typeshed import SupportsKeysAndGetItem

    from ._native import Chunk

_UNLOADED = object()

#: How a :class:`LazyMetaDict` pickles: the plain mapping's class and its items.
_Reduced = tuple[type[dict[str, Any]], tuple[list[tuple[str, Any]]]]


# Keys are video ids; values are the entries gulpio2 loads from JSON (``frame_info`` and
# ``meta_data``, whatever the adapter stored), which callers may replace with anything: Any.
class LazyMetaDict(OrderedDict[str, Any]):
    """``{id: OrderedDict(frame_info=[...], meta_data=[...])}`` with values built on access.

    ``load(id)`` builds one value. ``plain=True`` makes it print, pickle and copy as a plain
    ``dict`` (gulpio2's ``merged_meta_dict``), else as an ``OrderedDict`` (its chunk dicts).
    """

    # Set by build(), the only way placeholders get in; a dict made otherwise never loads.
    _load: Callable[[str], Any] | None = None
    _plain = False
    _complete = True

    _load_many: Callable[[], Iterable[tuple[str, Any]]] | None = None

    @classmethod
    def build(
        cls,
        keys: Iterable[str],
        load: Callable[[str], Any],
        *,
        load_many: Callable[[], Iterable[tuple[str, Any]]] | None = None,
        plain: bool = False,
    ) -> Self:
        """``load(key)`` builds one value; ``load_many()``, if given, yields ``(key, value)``
        for every key faster than one ``load`` per key (used when all values are needed)."""
        # fromkeys is the fastest way to fill an OrderedDict (faster than a loop of setitems).
        # Called on cls it makes a cls, but typeshed types it as returning an OrderedDict.
        new = cast(Self, cls.fromkeys(keys, _UNLOADED))
        new._load = load
        new._load_many = load_many
        new._plain = plain
        new._complete = False
        return new

    # -- values on demand --------------------------------------------------------------------
    def __getitem__(self, key: str) -> Any:
        value = OrderedDict.__getitem__(self, key)
        if value is _UNLOADED:
            assert self._load is not None  # only build() stores placeholders
            value = self._load(key)
            OrderedDict.__setitem__(self, key, value)
        return value

    def _load_all(self) -> None:
        if self._complete:
            return
        missing = {k for k, v in OrderedDict.items(self) if v is _UNLOADED}
        if self._load_many is not None and missing:
            for key, value in self._load_many():
                if key in missing:  # values already handed out stay the same objects
                    OrderedDict.__setitem__(self, key, value)
                    missing.discard(key)
        for key in missing:  # keys the caller added or re-added
            assert self._load is not None  # only build() stores placeholders
            OrderedDict.__setitem__(self, key, self._load(key))
        self._complete = True

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def values(self) -> _odict_values[str, Any]:
        self._load_all()
        return OrderedDict.values(self)

    def items(self) -> _odict_items[str, Any]:
        self._load_all()
        return OrderedDict.items(self)

    def pop(self, key: str, *default: Any) -> Any:
        if key in self:
            self[key]
        return OrderedDict.pop(self, key, *default)

    def popitem(self, last: bool = True) -> tuple[str, Any]:
        if len(self):
            self[next(reversed(self)) if last else next(iter(self))]
        return OrderedDict.popitem(self, last)

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key in self:
            return self[key]
        return OrderedDict.setdefault(self, key, default)

    # -- whole-dict behaviour: as the dict gulpio2 returns -----------------------------------
    def materialize(self) -> dict[str, Any]:
        """A plain ``dict`` / ``OrderedDict`` copy (values shared, not copied)."""
        return (dict if self._plain else OrderedDict)(self.items())

    # gulpio2's dicts copy to a plain dict / OrderedDict, not to another lazy one.
    copy = materialize  # type: ignore[assignment]

    def __eq__(self, other: object) -> bool:
        self._load_all()
        if isinstance(other, LazyMetaDict):
            other._load_all()
        if self._plain:
            return dict.__eq__(self, other)
        return OrderedDict.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self.materialize())

    __str__ = __repr__

    def __reduce_ex__(self, protocol: SupportsIndex) -> _Reduced:
        # Pickled and (deep)copied as the plain mapping: no loader, no native handles.
        return (dict if self._plain else OrderedDict), (list(self.items()),)

    def __reduce__(self) -> _Reduced:
        return self.__reduce_ex__(2)

    # The three ignores: `|` makes a plain dict / OrderedDict, as gulpio2's dicts do, not
    # another lazy one (typeshed's OrderedDict returns Self), and the keys are video ids (str),
    # where typeshed's dict merges dicts of any key type (which mypy checks `|=` against too).
    def __or__(self, other: dict[str, Any]) -> dict[str, Any]:  # type: ignore[override]
        if not isinstance(other, dict):
            return NotImplemented
        new = self.materialize()
        new.update(other)
        return new

    def __ror__(self, other: dict[str, Any]) -> dict[str, Any]:  # type: ignore[override]
        if not isinstance(other, dict):
            return NotImplemented
        new = (dict if type(other) is dict else OrderedDict)(other)
        new.update(self.items())
        return new

    def __ior__(  # type: ignore[override]
        self, other: SupportsKeysAndGetItem[str, Any] | Iterable[tuple[str, Any]]
    ) -> Self:
        self.update(other)
        return self


def native_entry(reader: Chunk, video: int) -> OrderedDict[str, Any]:
    """One video's entry as gulpio2's JSON serializer loads it (``OrderedDict`` objects,
    ``frame_info`` as ``[loc, pad, length]`` lists), from a Rust chunk reader."""
    return OrderedDict(
        [
            ("frame_info", [list(info) for info in reader.frame_info(video)]),
            ("meta_data", json.loads(reader.meta_data(video), object_pairs_hook=OrderedDict)),
        ]
    )
