"""gulpio2's metadata serializers. Datasets use JSON (``GulpDirectory`` reads nothing else).
``pickle_serializer`` works for a ``GulpChunk`` whose caller passes it for their own file;
nothing in gulpio-rs chooses it by itself."""

from __future__ import annotations

import json
import pickle
from abc import ABC, abstractmethod
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from ._files import open_for_reading, open_for_writing

if TYPE_CHECKING:
    from _typeshed import StrPath


class AbstractSerializer(ABC):  # pragma: no cover - interface only
    @abstractmethod
    def load(self, file_name: StrPath) -> Any:
        pass

    @abstractmethod
    def dump(self, thing: Any, file_name: StrPath) -> None:
        pass


class _Unpickler(pickle.Unpickler):
    # Pickles written by gulpio/gulpio2 name their ImgInfo class; read them without either.
    def find_class(self, module: str, name: str) -> Any:
        if name == "ImgInfo" and module in ("gulpio.fileio", "gulpio2.fileio"):
            from ._reading import ImgInfo

            return ImgInfo
        return super().find_class(module, name)


class PickleSerializer(AbstractSerializer):
    """gulpio2's pickle serializer, for chunks whose caller passes it explicitly.

    Unpickling runs code from the file: use it only for files you made yourself.
    """

    def load(self, file_name: StrPath) -> Any:
        with open_for_reading(file_name, "rb") as file_pointer:
            return _Unpickler(file_pointer).load()

    def dump(self, thing: Any, file_name: StrPath) -> None:
        with open_for_writing(file_name, "wb") as file_pointer:
            pickle.dump(thing, file_pointer)


class JSONSerializer(AbstractSerializer):
    def load(self, file_name: StrPath) -> Any:
        with open_for_reading(file_name, "r") as file_pointer:
            return json.load(file_pointer, object_pairs_hook=OrderedDict)

    def dump(self, thing: Any, file_name: StrPath) -> None:
        with open_for_writing(file_name, "w") as file_pointer:
            json.dump(thing, file_pointer)


pickle_serializer = PickleSerializer()
json_serializer = JSONSerializer()
