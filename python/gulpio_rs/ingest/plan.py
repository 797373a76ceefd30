"""The run plan: slices, the adapter fingerprint, the plan file that fixes a run's first
chunk, and what the dataset already holds (what an earlier attempt finished: ``publish``).
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
import warnings
from collections.abc import Iterable, Mapping, Sequence, Sized
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from .._atomic import write_json_atomically
from .._fingerprint import NOT_SETTINGS, NoCanonicalForm, digest, is_location, settings_of
from .._names import chunk_number, temporary_of
from .._reading import id_str
from .locks import STATE_DIR, RunLock, pid_alive, state_folder
from .report import IngestError, IngestWarning, SettingsChangedError

if TYPE_CHECKING:
    from ..directory import GulpDirectory


class RunKey(TypedDict):
    """What identifies a run: the same key, the same run (resumed). Its hash names the run
    file (:func:`plan_path`)."""

    #: ``module.QualifiedName`` of the adapter's class (``"ray.data.Dataset"`` for Ray).
    adapter: str
    #: :func:`plan_fingerprint` of the adapter (what it yields).
    fingerprint: str
    #: ``len(adapter)``.
    items: int
    videos_per_chunk: int
    num_shards: int


#: :func:`run_settings`: the adapter's settings (``"adapter"``: numbers, strings, short lists
#: of them), its input locations (``"inputs"``) and the ingest's options, as JSON.
Settings = dict[str, Any]


class Plan(RunKey):
    """A run file as read (``.gulpio-ingest/run-<id>.json``): the run's key, where its chunks
    start and how many there are (both checked when read), and what the run that made it
    added (runs of older versions, and Ray's, left out the optional fields)."""

    #: The run's id (:func:`_run_id` of the key).
    run: str
    #: The number of the run's first chunk.
    first_chunk: int
    #: How many chunks the run writes, numbered from ``first_chunk``.
    num_slices: int
    #: The positions of the items to write, as :func:`to_ranges` gives them.
    todo: NotRequired[list[list[int]]]
    #: Items the dataset held already when the run was planned.
    already_stored: NotRequired[int]
    #: A digest of the items' ids, when the adapter can list them.
    data: NotRequired[str | None]
    settings: NotRequired[Settings]


def calculate_chunk_slices(items_per_chunk: int, num_items: int) -> list[slice]:
    """Slices of ``items_per_chunk`` items covering ``range(num_items)``."""
    assert items_per_chunk > 0
    assert num_items > 0
    return [
        slice(i, min(i + items_per_chunk, num_items)) for i in range(0, num_items, items_per_chunk)
    ]


def plan_fingerprint(adapter: object) -> str:
    """Identifies what the adapter yields, so a restart is recognised and a different dataset
    of the same size is not mistaken for one.

    ``adapter.fingerprint()`` if it has one; else :func:`gulpio_rs._fingerprint.digest` of the
    adapter's attributes (the algorithm the built-in adapters' ``fingerprint()`` uses too)
    without ``output_folder`` and with the spelling of input paths normalised (``videos/`` is
    ``videos``); else, for attributes that have no canonical form, a fresh random value:
    such an adapter is never taken for a restart (it extends the dataset instead) and a warning
    says so.
    """
    fp = getattr(adapter, "fingerprint", None)
    if callable(fp):
        return str(fp())
    try:
        state = getattr(adapter, "__dict__", None)
        if state is None:
            return digest(adapter)
        cls = type(adapter)
        return digest(
            {
                "adapter": f"{cls.__module__}.{cls.__qualname__}",
                "state": {
                    name: _spelled(name, value)
                    for name, value in state.items()
                    if name not in NOT_SETTINGS
                },
            }
        )
    except NoCanonicalForm as e:
        warnings.warn(
            f"cannot fingerprint {type(adapter).__qualname__} ({e}); an interrupted ingest "
            "will not be resumed. Give the adapter a fingerprint() method returning a string "
            "that identifies its content.",
            IngestWarning,
            stacklevel=3,
        )
        return "unresumable-" + uuid.uuid4().hex


def _spelled(name: str, value: object) -> object:
    """A location attribute's value with its spelling normalised (``videos/`` and ``videos``,
    ``./a//b`` and ``a/b`` are one place)."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if is_location(name) and isinstance(value, str) and value:
        return os.path.normpath(value)
    return value


def item_ids(adapter: Sized) -> list[str] | None:
    """``adapter.item_ids()`` as strings, or None when the adapter cannot tell its ids
    without producing the items (its ``len`` must agree, or it is ignored)."""
    fn = getattr(adapter, "item_ids", None)
    if not callable(fn):
        return None
    ids = [id_str(i) for i in fn()]
    return ids if len(ids) == len(adapter) else None


def run_settings(adapter: object, **options: object) -> Settings:
    """What a run's output depends on besides the input, as JSON: the adapter's settings
    (:func:`gulpio_rs._fingerprint.settings_of`: numbers, strings, short lists of them, not
    where the input or output is) and the ingest's ``options``. Stored in the run's plan so
    that a rerun with other settings is caught before any work. ``inputs`` keeps the input
    locations (normalised), which identify the input of adapters that cannot list their ids."""
    inputs = {
        name: _spelled(name, value)
        for name, value in vars(adapter).items()
        if is_location(name) and name not in ("output_folder",) and not name.startswith("_")
    }
    inputs = {k: v for k, v in inputs.items() if v is None or isinstance(v, str)}
    return {"adapter": settings_of(adapter), "inputs": inputs, **options}


#: How settings are named in messages: a user's words, not attribute names.
SETTING_WORDS = {
    "frame_size": "frame size",
    "img_size": "image size",
    "frame_rate": "frame rate",
    "max_frames": "frames per video at most",
    "videos_per_chunk": "videos per chunk",
    "quality": "JPEG quality",
    "subsampling": "chroma subsampling",
    "restart_rows": "restart markers",
    "encoding": "encoding",
    "crf": "video quality (crf)",
    "gop": "frames per segment (gop)",
    "skip_truncated": "skip files cut short",
    "shuffle": "shuffle",
    "seed": "shuffle seed",
    "file_extensions": "file extensions",
    "label_name": "label field",
    "labels": "class folders",
    "phase": "phase",
    "remove_duplicate_ids": "remove duplicate ids",
}

#: Settings a plan leaves out when they have their default (plans written before they
#: existed say nothing about them).
_UNSTATED = {"restart_rows": False, "encoding": "jpeg", "skip_truncated": False}


def _shown(value: object) -> str:
    if value is None:
        return "not set"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, (list, tuple)):
        return ", ".join(_shown(v) for v in value)
    return str(value)


def describe_changes(before: Settings, settings: Settings) -> list[str]:
    """``["frame size: 256 -> 128", ...]`` for each setting of ``settings`` that differs
    from the plan's ``before``."""
    pairs = [(n, before.get("adapter", {}).get(n), v) for n, v in settings["adapter"].items()]
    pairs += [
        (n, before.get(n, _UNSTATED.get(n)), v)
        for n, v in settings.items()
        if n not in ("adapter", "inputs")
    ]
    pairs += [(n, before.get(n, d), d) for n, d in _UNSTATED.items() if n not in settings]
    return [
        f"{SETTING_WORDS.get(n, n.replace('_', ' '))}: {_shown(a)} -> {_shown(b)}"
        for n, a, b in pairs
        if _comparable(a) != _comparable(b)
    ]


def _comparable(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


def _same_input(old: Plan, key: RunKey, settings: Settings, data: str | None) -> bool:
    """Whether the plan ``old`` was made over the input this run reads: the same ids in the
    same order when both know them, else the same input locations and item count."""
    if data is not None and old.get("data") is not None:
        return old["data"] == data
    if old.get("items") != key["items"]:
        return False
    before = old["settings"]
    was = before.get("inputs")
    if was is None:  # a plan from before locations were kept apart from settings
        was = {k: _spelled(k, v) for k, v in before.get("adapter", {}).items() if is_location(k)}
    now = settings.get("inputs", {})
    return bool(now) and all(was.get(k) == v for k, v in now.items())


def check_settings(folder: str, key: RunKey, settings: Settings, data: str | None = None) -> None:
    """Raises :class:`SettingsChangedError` when ``folder`` holds a run of the same adapter
    class over the same input (see :func:`_same_input`) whose settings differ: rerunning it
    would decode everything again only to skip every video as already present, or mix two
    encodings in one dataset. The message names each setting that differs, in words."""
    for old in _plans(folder):
        before = old.get("settings")
        if not before or old.get("adapter") != key["adapter"]:
            continue
        same_run = all(old.get(k) == v for k, v in key.items())
        if not (same_run or _same_input(old, key, settings, data)):
            continue
        changed = describe_changes(before, settings)
        if not changed:
            continue  # the same settings: resumed, or a new run that skips what is stored
        raise SettingsChangedError(
            f"{folder} already holds a run of {key['adapter'].rsplit('.', 1)[-1]} over the same "
            f"input with other settings ({'; '.join(changed)}). Rerun with that run's settings "
            "to resume or finish it, or write into a new output directory (or delete this one) "
            "to gulp the input again with the new settings."
        )


def stored_ids(folder: str) -> dict[str, tuple[int, str]]:
    """Every id the dataset in ``folder`` holds -> (chunk number, data file name); empty for
    a folder without chunks."""
    from ..directory import GulpDirectory

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an empty or damaged folder: nothing stored there
        # What is on disk, recorded in a manifest or not.
        gd = GulpDirectory(folder, manifest="off")
    try:
        return ids_by_chunk(gd)
    finally:
        gd.close()


def ids_by_chunk(gd: GulpDirectory) -> dict[str, tuple[int, str]]:
    """Every id the ``GulpDirectory`` ``gd`` (a folder or a dataset URL) holds -> (chunk
    number, data file name)."""
    out: dict[str, tuple[int, str]] = {}
    for pos, (number, data, *_rest) in enumerate(gd.chunk_table()):
        for id_ in gd.native_chunk(pos).ids():
            out[id_] = (number, data.rsplit("/", 1)[-1])
    return out


def _chunk_numbers(folder: str) -> list[int]:
    numbers = []
    for name in os.listdir(folder):
        number = chunk_number(name)
        if number is not None:
            numbers.append(number)
    return numbers


def _plans(folder: str) -> list[Plan]:
    state = os.path.join(folder, STATE_DIR)
    plans: list[Plan] = []
    if os.path.isdir(state):
        for name in sorted(os.listdir(state)):
            if name.endswith(".json") and name.startswith("run-"):
                try:
                    plans.append(_read_plan(os.path.join(state, name)))
                except FileNotFoundError:
                    continue
    return plans


#: The fields a run file is checked for when read (ints, not negative).
_CHECKED = ("first_chunk", "num_slices")


def _bad_fields(loaded: Any) -> list[str]:
    """The fields of :data:`_CHECKED` that ``loaded`` (a run file's JSON, anything) lacks or
    has wrong: all of them if it is not an object."""
    if not isinstance(loaded, dict):
        return list(_CHECKED)
    return [k for k in _CHECKED if type(loaded.get(k)) is not int or loaded[k] < 0]


def _read_plan(path: str) -> Plan:
    """A run file, checked; :class:`IngestError` naming it and what to do if it is damaged
    (skipping it could let a new run take the chunk numbers it reserves)."""
    try:
        with open(path, "rb") as f:
            loaded = json.loads(f.read())
    except ValueError as e:  # not UTF-8 or not JSON
        why = f"it is not valid JSON ({e})"
    else:
        bad = _bad_fields(loaded)
        if not bad:
            plan: Plan = loaded  # JSON, with the fields a reader relies on checked
            return plan
        why = f"it has no valid {' or '.join(bad)}"
    raise IngestError(
        f"{path}: this ingest run file is damaged: {why}. It records where a run's chunks "
        "start, so that run cannot be resumed from it. Remove the file and run the ingest "
        "again: published chunks are kept, and their videos are skipped as already in the "
        "dataset."
    )


def load_or_create_plan(
    folder: str,
    key: RunKey,
    num_slices: int | None = None,
    settings: Settings | None = None,
    taken: Sequence[int] = (),
    extra: Mapping[str, object] | None = None,
) -> Plan:
    """The run's plan: created by whichever shard gets there first, read by the others.
    ``taken``: chunk numbers in use elsewhere (a remote dataset this folder stages for).
    ``extra``: more fields for a new plan (``todo``, ``num_slices``, ``data``, ...).
    ``num_slices``, when given, must match the plan's."""
    path = plan_path(folder, key)
    state_folder(folder)  # created; refused if it is a symlink or not a folder
    with RunLock(folder):
        if not os.path.exists(path):
            fields: dict[str, object] = dict(extra or {})
            if num_slices is not None:
                fields["num_slices"] = num_slices
            _create_plan(folder, path, key, fields, settings, taken)
    plan = _read_plan(path)
    if num_slices is not None and plan.get("num_slices") != num_slices:
        raise IngestError(
            f"{path}: the plan is for {plan.get('num_slices')} chunks, not {num_slices}"
        )
    return plan


def plan_path(folder: str, key: RunKey) -> str:
    """Where the plan of the run ``key`` is (whether or not it exists yet)."""
    run_id = _run_id(key)
    return os.path.join(folder, STATE_DIR, f"run-{run_id}.json")


def _run_id(key: RunKey) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def existing_plan(folder: str, key: RunKey) -> Plan | None:
    """The plan of the run ``key`` if an earlier attempt (or another shard) made it (None
    for a damaged one, which :func:`load_or_create_plan` then names)."""
    try:
        with open(plan_path(folder, key)) as f:
            loaded = json.load(f)
    except (OSError, ValueError):
        return None
    # (check_settings, which runs first, has read and checked every run file already.)
    if _bad_fields(loaded):
        return None
    plan: Plan = loaded  # JSON, with the fields a reader relies on checked
    return plan


def _create_plan(
    folder: str,
    path: str,
    key: RunKey,
    fields: Mapping[str, object],
    settings: Settings | None,
    taken_elsewhere: Sequence[int] = (),
) -> None:
    """Called under the run lock, so runs starting at once on one file system see each other's
    plans (and ``link`` keeps it exclusive where ``flock`` is not shared across machines)."""
    taken = _chunk_numbers(folder) + list(taken_elsewhere)
    for p in _plans(folder):
        if p.get("num_slices"):
            taken.append(p["first_chunk"] + p["num_slices"] - 1)
    plan: dict[str, object] = {
        "run": _run_id(key),
        "first_chunk": max(taken) + 1 if taken else 0,
        **fields,
        **key,
    }
    if settings is not None:
        plan["settings"] = settings
    write_json_atomically(path, plan, exclusive=True, indent=1, sort_keys=True)


def to_ranges(positions: list[int]) -> list[list[int]]:
    """``[[start, stop], ...]``: ``positions`` (ascending) as runs, compact in a plan file."""
    runs: list[list[int]] = []
    for p in positions:
        if runs and runs[-1][1] == p:
            runs[-1][1] = p + 1
        else:
            runs.append([p, p + 1])
    return runs


def from_ranges(runs: Iterable[Sequence[int]]) -> list[int]:
    """The positions of :func:`to_ranges`' runs."""
    return [p for start, stop in runs for p in range(start, stop)]


def as_slices(positions: list[int]) -> list[slice]:
    """Ascending ``positions`` as the fewest slices (what ``iter_data`` takes)."""
    return [slice(start, stop) for start, stop in to_ranges(positions)]


def remove_dead_temporaries(folder: str, numbers: set[int]) -> None:
    """Temporaries of this shard's chunks whose writer died (kill -9, machine loss). Only
    chunks this shard owns: in a directory shared by several machines, another machine's pid
    means nothing here, but no other live process writes these chunks."""
    for name in os.listdir(folder):
        temp = temporary_of(name)
        if temp and temp[0] in numbers and not pid_alive(temp[1]):
            try:
                os.unlink(os.path.join(folder, name))
            except FileNotFoundError:
                pass
