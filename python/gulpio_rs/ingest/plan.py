"""The run plan: slices, the adapter fingerprint, the plan file that fixes a run's first
chunk, and what an earlier attempt already finished.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
import warnings

from .. import _native
from .._atomic import write_json_atomically
from .._fingerprint import NoCanonicalForm, digest
from .._names import chunk_number, chunk_paths, temporary_of
from ..errors import GulpError
from .locks import STATE_DIR, RunLock, pid_alive
from .report import ChunkResult, IngestError, IngestWarning, SettingsChangedError


def calculate_chunk_slices(items_per_chunk: int, num_items: int) -> list[slice]:
    """Slices of ``items_per_chunk`` items covering ``range(num_items)``."""
    assert items_per_chunk > 0
    assert num_items > 0
    return [
        slice(i, min(i + items_per_chunk, num_items)) for i in range(0, num_items, items_per_chunk)
    ]


def _fingerprint(adapter) -> str:
    """Identifies the adapter's content, so a restart is recognised and a different dataset of
    the same size is not mistaken for one.

    ``adapter.fingerprint()`` if it has one; else :func:`gulpio_rs._fingerprint.digest` of the
    adapter (the algorithm the built-in adapters' ``fingerprint()`` uses too); else, for
    attributes that have no canonical form, a fresh random value:
    such an adapter is never taken for a restart (it extends the dataset instead) and a warning
    says so.
    """
    fp = getattr(adapter, "fingerprint", None)
    if callable(fp):
        return str(fp())
    try:
        return digest(adapter)
    except NoCanonicalForm as e:
        warnings.warn(
            f"cannot fingerprint {type(adapter).__qualname__} ({e}); an interrupted ingest "
            "will not be resumed. Give the adapter a fingerprint() method returning a string "
            "that identifies its content.",
            IngestWarning,
            stacklevel=3,
        )
        return "unresumable-" + uuid.uuid4().hex


_SCALARS = (bool, int, float, str)


def run_settings(adapter, **options) -> dict:
    """What a run's output depends on besides the input, as JSON: the adapter's simple
    attributes (numbers, strings, short lists of them) and the ingest's ``options``. Stored
    in the run's plan so that a rerun with other settings is caught before any work."""
    attrs = {}
    for name, value in vars(adapter).items():
        if name.startswith("_") or name in ("output_folder", "shm_dir_path"):
            continue
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        if value is None or isinstance(value, _SCALARS):
            attrs[name] = value
        elif (
            isinstance(value, (list, tuple))
            and len(value) <= 16
            and all(v is None or isinstance(v, _SCALARS) for v in value)
        ):
            attrs[name] = list(value)
    return {"adapter": attrs, **options}


def _is_input(name: str) -> bool:
    """Attributes that say where the input is (``folder``, ``json_file``, ``root_folder``,
    ...): a run with the same ones reads the same data."""
    return name in ("folder", "path", "root", "input") or name.endswith(
        ("_folder", "_file", "_path", "_dir", "_root")
    )


def check_settings(folder: str, key: dict, settings: dict) -> None:
    """Raises :class:`SettingsChangedError` when ``folder`` holds a run of the same adapter
    class over the same input (same input attributes and item count) whose settings differ:
    rerunning it would decode everything again only to skip every video as already present."""
    for old in _plans(folder):
        before = old.get("settings")
        if not before or old.get("adapter") != key["adapter"]:
            continue
        same_run = all(old.get(k) == v for k, v in key.items())
        if not same_run:
            inputs = [k for k in settings["adapter"] if _is_input(k)]
            if not inputs or old.get("items") != key["items"]:
                continue
            if any(before["adapter"].get(k) != settings["adapter"][k] for k in inputs):
                continue
        changed = [
            (name, before["adapter"].get(name), value)
            for name, value in settings["adapter"].items()
            if before["adapter"].get(name) != value
        ] + [
            (name, before.get(name), value)
            for name, value in settings.items()
            if name != "adapter" and before.get(name) != value
        ]
        if not changed and same_run:
            continue
        if not changed:
            changed = [("adapter content", "", "changed")]
        what = "; ".join(f"{name}: {a!r} -> {b!r}" for name, a, b in changed)
        raise SettingsChangedError(
            f"{folder} already holds a run of {key['adapter'].rsplit('.', 1)[-1]} over the same "
            f"input with other settings ({what}). Rerun with that run's settings to resume or "
            "finish it, or write into a new output directory (or delete this one) to gulp the "
            "input again with the new settings."
        )


def _chunk_numbers(folder: str) -> list[int]:
    numbers = []
    for name in os.listdir(folder):
        number = chunk_number(name)
        if number is not None:
            numbers.append(number)
    return numbers


def _plans(folder: str) -> list[dict]:
    state = os.path.join(folder, STATE_DIR)
    plans = []
    if os.path.isdir(state):
        for name in sorted(os.listdir(state)):
            if name.endswith(".json") and name.startswith("run-"):
                try:
                    plans.append(_read_plan(os.path.join(state, name)))
                except FileNotFoundError:
                    continue
    return plans


def _read_plan(path: str) -> dict:
    """A run file, checked; :class:`IngestError` naming it and what to do if it is damaged
    (skipping it could let a new run take the chunk numbers it reserves)."""
    try:
        with open(path, "rb") as f:
            plan = json.loads(f.read())
    except ValueError as e:  # not UTF-8 or not JSON
        why = f"it is not valid JSON ({e})"
    else:
        fields = ("first_chunk", "num_slices")
        bad = (
            list(fields)
            if not isinstance(plan, dict)
            else [k for k in fields if type(plan.get(k)) is not int or plan[k] < 0]
        )
        if not bad:
            return plan
        why = f"it has no valid {' or '.join(bad)}"
    raise IngestError(
        f"{path}: this ingest run file is damaged: {why}. It records where a run's chunks "
        "start, so that run cannot be resumed from it. Remove the file and run the ingest "
        "again: published chunks are kept, and their videos are skipped as already in the "
        "dataset."
    )


def _plan(
    folder: str,
    key: dict,
    num_slices: int,
    settings: dict | None = None,
    taken: list[int] = (),
) -> dict:
    """The run's plan: created by whichever shard gets there first, read by the others.
    ``taken``: chunk numbers in use elsewhere (a remote dataset this folder stages for)."""
    run_id = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    state = os.path.join(folder, STATE_DIR)
    os.makedirs(state, exist_ok=True)
    path = os.path.join(state, f"run-{run_id}.json")
    with RunLock(folder):
        if not os.path.exists(path):
            _create_plan(folder, path, run_id, key, num_slices, settings, taken)
    plan = _read_plan(path)
    if plan.get("num_slices") != num_slices:
        raise IngestError(
            f"{path}: the plan is for {plan.get('num_slices')} chunks, not {num_slices}"
        )
    return plan


def _create_plan(
    folder: str,
    path: str,
    run_id: str,
    key: dict,
    num_slices: int,
    settings: dict | None,
    taken_elsewhere: list[int] = (),
) -> None:
    """Called under the run lock, so runs starting at once on one file system see each other's
    plans (and ``link`` keeps it exclusive where ``flock`` is not shared across machines)."""
    taken = _chunk_numbers(folder) + list(taken_elsewhere)
    for p in _plans(folder):
        taken.append(p["first_chunk"] + p["num_slices"] - 1)
    plan = {
        "run": run_id,
        "first_chunk": max(taken) + 1 if taken else 0,
        "num_slices": num_slices,
        **key,
    }
    if settings is not None:
        plan["settings"] = settings
    write_json_atomically(path, plan, exclusive=True, indent=1, sort_keys=True)


def _chunk_done(folder: str, number: int) -> ChunkResult | None:
    """The result recorded for a finished chunk, or ``None`` if it must be (re)written."""
    record = os.path.join(folder, STATE_DIR, f"chunk-{number}.json")
    data, meta = chunk_paths(folder, number)
    try:
        with open(record) as f:
            r = ChunkResult(**json.load(f))
    except (OSError, ValueError, TypeError):
        r = None
    if not (os.path.exists(data) and os.path.exists(meta)):
        if r is not None and not r.published and not os.path.exists(data):
            # Every video was skipped (recorded after the attempt, nothing published).
            r.failures = [tuple(f) for f in r.failures]
            r.resumed = True
            return r
        return None
    try:
        native, problem = _native.Chunk.open(data, meta)
    except (GulpError, OSError, ValueError):
        return None
    if problem or not native.indexed:
        return None  # published but not indexed: a crash inside the publication
    videos = len(native.ids())
    if r is None or r.videos != videos:
        # No record (older writer) or one from another attempt: count from the chunk itself.
        r = ChunkResult(chunk=number, videos=videos)
        infos = [native.frame_info(v) for v in range(videos)]
        r.frames = sum(len(i) for i in infos)
        r.bytes = sum(length - pad for info in infos for _, pad, length in info)
    r.failures = [tuple(f) for f in r.failures]
    r.resumed = True
    return r


def _remove_dead_temporaries(folder: str, numbers: set[int]) -> None:
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
