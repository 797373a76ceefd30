"""gulpio2's metadata serializers. Datasets use JSON; the pickle serializer exists only so
gulpio2 imports keep working, and never loads anything."""

from __future__ import annotations

import json
import pickle
from abc import ABC, abstractmethod
from collections import OrderedDict


class AbstractSerializer(ABC):  # pragma: no cover - interface only
    @abstractmethod
    def load(self, file_name):
        pass

    @abstractmethod
    def dump(self, thing, file_name):
        pass


class PickleSerializer(AbstractSerializer):
    """Kept for import compatibility only: gulpio-rs never loads pickles from a dataset."""

    def load(self, file_name):
        raise NotImplementedError(
            "gulpio-rs does not load pickled metadata (unsafe on untrusted data); "
            "datasets use JSON .gmeta files"
        )

    def dump(self, thing, file_name):
        with open(file_name, "wb") as file_pointer:
            pickle.dump(thing, file_pointer)


class JSONSerializer(AbstractSerializer):
    def load(self, file_name):
        with open(file_name) as file_pointer:
            return json.load(file_pointer, object_pairs_hook=OrderedDict)

    def dump(self, thing, file_name):
        with open(file_name, "w") as file_pointer:
            json.dump(thing, file_pointer)


pickle_serializer = PickleSerializer()
json_serializer = JSONSerializer()
