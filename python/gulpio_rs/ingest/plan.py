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
from .report import ChunkResult, IngestError, IngestWarning


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
                    with open(os.path.join(state, name)) as f:
                        plans.append(json.load(f))
                except (OSError, ValueError):
                    continue
    return plans


def _plan(folder: str, key: dict, num_slices: int) -> dict:
    """The run's plan: created by whichever shard gets there first, read by the others."""
    run_id = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    state = os.path.join(folder, STATE_DIR)
    os.makedirs(state, exist_ok=True)
    path = os.path.join(state, f"run-{run_id}.json")
    with RunLock(folder):
        if not os.path.exists(path):
            _create_plan(folder, path, run_id, key, num_slices)
    with open(path) as f:
        plan = json.load(f)
    if plan.get("num_slices") != num_slices:
        raise IngestError(
            f"{path}: the plan is for {plan.get('num_slices')} chunks, not {num_slices}"
        )
    return plan


def _create_plan(folder: str, path: str, run_id: str, key: dict, num_slices: int) -> None:
    """Called under the run lock, so runs starting at once on one file system see each other's
    plans (and ``link`` keeps it exclusive where ``flock`` is not shared across machines)."""
    taken = _chunk_numbers(folder)
    for p in _plans(folder):
        taken.append(p["first_chunk"] + p["num_slices"] - 1)
    plan = {
        "run": run_id,
        "first_chunk": max(taken) + 1 if taken else 0,
        "num_slices": num_slices,
        **key,
    }
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
