"""``read_gulp``: a gulp directory as a ``ray.data.Dataset``, one row per video."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from .._read_spec import ReadSpec, read_spec
from .._reading import Selection
from ._common import connect, open_remote

if TYPE_CHECKING:
    from ray.data import Dataset

    from .._storage import StorageOptions


def _read_chunk(
    batch: dict[str, np.ndarray],
    frames: Selection,
    decode: bool,
    spec: ReadSpec,
    videos_per_block: int,
    remote: tuple[str, StorageOptions | None, bytes | None] | None = None,
) -> Iterator[dict[str, list[Any]]]:
    """One chunk (the batch holds its paths, or its position in a remote dataset) -> batches of
    its videos. Only this chunk's files are read; the frame selection is resolved per video
    before anything decodes, by the core read every batch read comes to."""
    from .. import _native

    for data, meta, pos in zip(batch["data"], batch["meta"], batch["pos"], strict=True):
        if remote is None:
            chunk, _ = _native.Chunk.open(str(data), str(meta))
        else:
            chunk = open_remote(*remote).native_chunk(int(pos))
        n = len(chunk)
        for start in range(0, n, videos_per_block):
            videos = range(start, min(n, start + videos_per_block))
            items = [(chunk, v, frames) for v in videos]
            if decode:
                clips = list(_native.read_batch(items, spec))
            else:
                clips = [[bytes(m) for m in c.frame_views(v, s, spec.check)] for c, v, s in items]
            yield {
                "id": [chunk.id(v) for v in videos],
                "frames": clips,
                "meta": [_first(chunk.meta_data(v)) for v in videos],
            }


def _first(meta_data: str) -> dict[str, Any]:
    items = json.loads(meta_data)
    return dict(items[0]) if items else {}


def read_gulp(
    path: str | os.PathLike[str],
    *,
    frames: Selection = None,
    decode: bool = True,
    check_data: bool = True,
    colorspace: str | None = None,
    threads: int | None = 1,
    videos_per_block: int = 16,
    ray_address: str | None = None,
    storage_options: dict[str, str] | None = None,
) -> Dataset:
    """A gulp directory as a ``ray.data.Dataset`` with one row per video: ``id`` (str),
    ``frames`` and ``meta`` (the video's metadata dict).

    ``frames``: the decoded ``(T, H, W, C)`` uint8 clip, or with ``decode=False`` the list of
    stored JPEG ``bytes``. ``frames=`` selects frames as :meth:`GulpDirectory.read` does
    (``None``, a slice, a list of indices, an int), before decoding. Each read task handles
    one chunk (so it opens only that chunk's files) and emits blocks of at most
    ``videos_per_block`` videos, so blocks never span chunks; rows come in
    :meth:`GulpDirectory.keys` order. ``threads`` decode threads per task (each read task
    asks Ray for one CPU). CRC checks as ``check_data``.

    ``path`` may be a dataset URL (``s3://``, ``gs://``, ``az://``, ``http(s)://``) with
    ``storage_options`` as :class:`~gulpio_rs.GulpDirectory` takes them: each worker process
    opens the dataset once and its tasks fetch only their chunk's frames (ranged requests,
    CRC-checked). The options travel to the workers inside the task arguments; their secret
    values never appear in a repr or message.
    """
    from .._storage import storage_options_list
    from ..directory import GulpDirectory

    ray = connect(ray_address)
    folder = os.fspath(path)
    if videos_per_block < 1:
        raise ValueError(f"videos_per_block must be >= 1, not {videos_per_block}")
    options = storage_options_list(storage_options)
    with GulpDirectory(folder, strict=True, storage_options=options) as gd:
        table = gd.chunk_table()
        # Tasks find a remote chunk by its position: in the state planned from.
        remote = (folder, options, gd.manifest_state) if gd.is_remote else None
    items = [
        {"data": data, "meta": meta, "pos": pos} for pos, (_, data, meta, *_) in enumerate(table)
    ]
    if not items:
        raise ValueError(f"{folder}: no chunks to read")
    ds: Dataset = ray.data.from_items(items, override_num_blocks=len(items))
    ds.context.execution_options.preserve_order = True
    # Ray's annotation of map_batches has no room for fn_kwargs (fn takes the batch alone).
    return ds.map_batches(
        _read_chunk,  # type: ignore[arg-type]
        batch_size=1,
        batch_format="numpy",
        fn_kwargs={
            "frames": frames,
            "decode": decode,
            "spec": read_spec(0, colorspace=colorspace, threads=threads, check=check_data),
            "videos_per_block": int(videos_per_block),
            "remote": remote,
        },
    )
