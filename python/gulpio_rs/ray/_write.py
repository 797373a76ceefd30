"""``write_gulp``: pack a ``ray.data.Dataset`` of videos into a gulp directory.

Three passes over the dataset, the first two on the cluster's workers:

1. check every row (``id`` present, ``frames`` usable) and collect the ids in the dataset's
   order (``preserve_order``): small, and enough for the driver to refuse bad input and
   duplicate ids before any chunk exists, and to give row ``i`` the fixed place
   ``chunk first + i // videos_per_chunk``;
2. encode frames to JPEG where the rows are (``map_batches``), tagging each row with its
   chunk and position;
3. group the encoded rows by chunk (``groupby().map_groups()``): one task writes and publishes
   one chunk atomically, in position order.

Where a row lands depends only on its position in the dataset, never on block boundaries,
node count or which attempt of a task ran, so the output is byte-identical to a
single-process ``GulpIngestor`` run over the same rows.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict
from fractions import Fraction
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np
import numpy.typing as npt

from .. import _manifest, _native
from .._choices import Encoding, Subsampling
from .._encode_options import DEFAULT, EncodeOptions
from .._plural import plural
from .._storage import storage_options_list
from ..errors import BrokenChunkWarning, GulpError
from ..ingest.encoder import FrameEncoder
from ..ingest.plan import RunKey, calculate_chunk_slices, ids_by_chunk, load_or_create_plan
from ..ingest.publish import counted, earlier_attempt, finished, publish_chunk
from ..ingest.report import (
    ChunkResult,
    IngestError,
    IngestReport,
    IngestWarning,
    failure_pairs,
)
from ._common import connect, forget_remote, open_remote, remove_temporaries, task_error

if TYPE_CHECKING:
    import pyarrow as pa
    from ray.data import Dataset

    from .._storage import StorageOptions
    from ..directory import GulpDirectory
    from ..ingest.av1 import SegmentVideo

#: A batch as Ray hands it to a UDF with ``batch_format="numpy"``: a column per name.
_Batch = dict[str, npt.NDArray[Any]]

#: Where a write task uploads its chunk: a dataset URL and its storage options (None: local).
_Remote = tuple[str, "StorageOptions | None"]

# -- pass 1: check rows, collect ids ---------------------------------------------------------


def _frames_problem(frames: Any) -> str | None:
    """Why ``frames`` (a row's value, as the dataset holds it: anything) cannot be gulped, or
    ``None``."""
    if frames is None:
        return "no 'frames'"
    if isinstance(frames, np.ndarray) and frames.dtype != object:
        if frames.dtype != np.uint8:
            return f"frames must be uint8, not {frames.dtype}"
        if frames.ndim not in (3, 4):
            return f"frames must be (T, H, W, C) or (T, H, W), not shape {frames.shape}"
        return None if len(frames) else "no frames"
    items = list(frames)
    if not items:
        return "no frames"
    for i, f in enumerate(items):
        if isinstance(f, (bytes, bytearray, np.bytes_)):
            continue
        if not isinstance(f, np.ndarray) or f.dtype != np.uint8:
            kind = getattr(f, "dtype", type(f).__name__)
            return f"frame {i} must be JPEG bytes or a uint8 array, not {kind}"
    return None


def _check_batch(batch: _Batch) -> dict[str, list[str | None]]:
    n = len(next(iter(batch.values()))) if batch else 0
    if "id" not in batch:
        return {"id": [None] * n, "problem": [f"no 'id' column (columns: {sorted(batch)})"] * n}
    ids: list[str | None] = []
    problems: list[str | None] = []
    for i in range(n):
        id_ = batch["id"][i]
        if id_ is None or (isinstance(id_, float) and np.isnan(id_)):
            ids.append(None)
            problems.append("a row has no 'id'")
            continue
        id_ = str(id_.item() if isinstance(id_, np.generic) else id_)
        ids.append(id_)
        frames = batch["frames"][i] if "frames" in batch else None
        problems.append(_frames_problem(frames) or "")
    return {"id": ids, "problem": problems}


# -- pass 2: encode --------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A JSON-ready value from what Ray hands a UDF (numpy scalars and arrays)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()] if value.dtype == object else value.tolist()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _meta(batch: _Batch, i: int) -> Any:
    """The row's metadata: any JSON (a dict unless the ``meta`` column's text is other JSON)."""
    if "meta" in batch:
        m = batch["meta"][i]
        if isinstance(m, (str, np.str_)):
            return json.loads(str(m))
        return _plain(m) if m is not None else {}
    return {k: _plain(v[i]) for k, v in batch.items() if k not in ("id", "frames", *_TIME_KEYS)}


#: Optional columns with a video's frame timestamps, as an adapter's item gives them
#: (docs/INGEST.md, "Frame timestamps"): stored as the ingest stores them, not as metadata.
_TIME_KEYS = ("timestamps", "fps", "end")


def _times(batch: _Batch, i: int) -> str:
    """The row's timestamp columns as JSON text ("" without any), exact: a
    :class:`~fractions.Fraction` (what the video adapters give) as ``{"n": .., "d": ..}``."""
    got = {k: _time_json(batch[k][i]) for k in _TIME_KEYS if k in batch}
    got = {k: v for k, v in got.items() if v is not None}
    return json.dumps(got) if got else ""


def _time_json(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return [_time_json(v) for v in value.tolist()]
    if isinstance(value, (list, tuple)):
        return [_time_json(v) for v in value]
    if isinstance(value, Fraction):
        return {"n": value.numerator, "d": value.denominator}
    return value.item() if isinstance(value, np.generic) else value


def _time_value(value: Any) -> Any:
    """:func:`_time_json` undone."""
    if isinstance(value, list):
        return [_time_value(v) for v in value]
    if isinstance(value, dict):
        return Fraction(value["n"], value["d"])
    return value


def _frame_list(frames: Any) -> list[Any]:
    if isinstance(frames, np.ndarray) and frames.dtype != object:
        return list(frames)
    return [bytes(f) if isinstance(f, (bytes, bytearray, np.bytes_)) else f for f in frames]


def _encode_batch(
    batch: _Batch,
    index: dict[str, int],
    first: int,
    per_chunk: int,
    todo: set[int],
    options: EncodeOptions,
    size: int | None,
    skip: dict[str, str],
) -> pa.Table:
    import pyarrow as pa

    columns = ("chunk", "pos", "id", "meta", "jpegs", "segments", "stream", "error", "times")
    out: dict[str, list[Any]] = {k: [] for k in columns}
    n = len(batch["id"])
    with FrameEncoder(options) as encoder:
        for i in range(n):
            id_ = batch["id"][i]
            id_ = str(id_.item() if isinstance(id_, np.generic) else id_)
            pos = index[id_]
            chunk = first + pos // per_chunk
            if chunk not in todo:
                continue  # published by an earlier run
            jpegs: list[bytes] = []
            segments: list[bytes] = []
            stream, error = "", skip.get(id_, "")
            if not error:
                try:
                    stored = encoder.encode_stored(_frame_list(batch["frames"][i]), size)
                except (GulpError, ValueError, OSError) as e:
                    error = str(e)
                else:
                    if isinstance(stored, list):
                        jpegs = stored
                    else:  # encoding="video": a SegmentVideo, as columns
                        segments = [s.data for s in stored.segments]
                        stream = _stream_json(stored)
            out["chunk"].append(chunk)
            out["pos"].append(pos)
            out["id"].append(id_)
            out["meta"].append(json.dumps(_meta(batch, i)))
            out["jpegs"].append(jpegs)
            out["segments"].append(segments)
            out["stream"].append(stream)
            out["error"].append(error)
            out["times"].append(_times(batch, i))
    return pa.table(out, schema=_ENCODED_SCHEMA())


def _stream_json(video: SegmentVideo) -> str:
    """A ``SegmentVideo`` without its streams (they travel in the ``segments`` column)."""
    return json.dumps(
        {
            "frames": [s.frames for s in video.segments],
            "width": video.width,
            "height": video.height,
            "gop": video.gop,
            "matrix": video.matrix,
            "full_range": video.full_range,
        }
    )


def _segment_video(segments: list[bytes], stream: str) -> SegmentVideo:
    from ..ingest.av1 import Segment, SegmentVideo

    s = json.loads(stream)
    parts = [Segment(d, n, True) for d, n in zip(segments, s.pop("frames"), strict=True)]
    return SegmentVideo(parts, **s)


def _ENCODED_SCHEMA() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            ("chunk", pa.int64()),
            ("pos", pa.int64()),
            ("id", pa.string()),
            ("meta", pa.string()),
            ("jpegs", pa.list_(pa.binary())),
            # encoding="video": the segments' streams, and the rest of the SegmentVideo.
            ("segments", pa.list_(pa.binary())),
            ("stream", pa.string()),
            ("error", pa.string()),
            ("times", pa.string()),
        ]
    )


# -- pass 3: write one chunk -----------------------------------------------------------------


class _EncodedRow(TypedDict):
    """A row of the encoded table (:func:`_ENCODED_SCHEMA`), as ``to_pylist`` gives it."""

    chunk: int
    pos: int
    id: str
    meta: str  # JSON
    jpegs: list[bytes]
    segments: list[bytes]
    stream: str  # JSON of the SegmentVideo without its streams; "" for JPEG frames
    error: str
    times: str  # JSON; "" without timestamps


class _Rows:
    """The adapter ``publish_chunk`` expects, over one chunk's encoded rows."""

    def __init__(self, rows: list[_EncodedRow]):
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def iter_data(self, slice_element: object = None) -> Iterator[dict[str, Any]]:
        for r in self.rows:
            frames: list[bytes] | SegmentVideo = (
                _segment_video(r["segments"], r["stream"]) if r.get("stream") else r["jpegs"]
            )
            item = {"id": r["id"], "meta": json.loads(r["meta"]), "frames": frames}
            if r.get("times"):
                item.update({k: _time_value(v) for k, v in json.loads(r["times"]).items()})
            if r["error"]:
                item["error"] = r["error"]
            yield item


class _Stored:
    """Stands in for ``FrameEncoder``: pass 2 already encoded the frames."""

    @staticmethod
    def encode(
        frames: list[bytes] | SegmentVideo, size: int | None = None
    ) -> list[bytes] | SegmentVideo:
        # JPEG bytes, or a SegmentVideo as it was encoded.
        return frames if hasattr(frames, "segments") else list(frames)


def _write_group(
    table: pa.Table, folder: str, strict: bool, remote: _Remote | None = None
) -> pa.Table:
    import pyarrow as pa

    rows: list[_EncodedRow] = sorted(table.to_pylist(), key=lambda r: r["pos"])
    number = rows[0]["chunk"]
    if remote is not None:
        result = _write_remote(rows, number, strict, remote)
    else:
        # A retry of a task whose first attempt published keeps the chunk if it is this one.
        earlier = earlier_attempt(folder, number, [r["id"] for r in rows])
        if earlier is not None:
            result = earlier
        else:
            result = publish_chunk(_Rows(rows), folder, number, encoder=_Stored(), strict=strict)
    return pa.table(
        {
            "chunk": [number],
            "result": [json.dumps(asdict(result))],
        }
    )


def _write_remote(
    rows: list[_EncodedRow], number: int, strict: bool, remote: _Remote
) -> ChunkResult:
    """Stages the chunk in a temporary folder on this node and uploads it. A retried task
    stages the same bytes (the frames were encoded in the pass before), so it finds its
    ``.gmeta`` already there and identical (done), or only data and index of a killed attempt,
    which no reader pairs and which it overwrites before committing."""
    import shutil
    import tempfile

    stage = tempfile.mkdtemp(prefix="gulpio-ray-stage-")
    try:
        return publish_chunk(
            _Rows(rows),
            stage,
            number,
            encoder=_Stored(),
            strict=strict,
            record=False,
            remote=open_remote(*remote),
        )
    finally:
        shutil.rmtree(stage, ignore_errors=True)


# -- the driver ------------------------------------------------------------------------------


def _remote_done(gd: GulpDirectory, first: int, end: int) -> dict[int, ChunkResult]:
    """The chunks of this run's numbers a remote dataset already has (committed: its listing
    pairs data with meta), counted from their indexes. Their skipped videos are not known
    remotely; the report of a resumed remote run lists only this attempt's."""
    done: dict[int, ChunkResult] = {}
    for pos, (number, *_rest) in enumerate(gd.chunk_table()):
        if first <= number < end:
            done[number] = counted(number, gd.native_chunk(pos))
            done[number].resumed = True
    return done


def _open_output(folder: str, storage_options: StorageOptions | None) -> GulpDirectory:
    """The output as a ``GulpDirectory`` (created if local and missing)."""
    from ..directory import GulpDirectory
    from ..errors import EmptyDirectoryWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyDirectoryWarning)
        warnings.simplefilter("ignore", BrokenChunkWarning)
        # The chunks on disk, whose numbers this run must not take.
        return GulpDirectory(folder, storage_options=storage_options, manifest="off")


def write_gulp(
    ds: Dataset,
    path: str | os.PathLike[str],
    *,
    videos_per_chunk: int = 100,
    quality: int = DEFAULT.quality,
    subsampling: Subsampling = DEFAULT.subsampling,
    restart_rows: bool = DEFAULT.restart_rows,
    encoding: Encoding = DEFAULT.encoding,
    crf: int = DEFAULT.crf,
    gop: int = DEFAULT.gop,
    preset: int = DEFAULT.preset,
    frame_size: int | None = None,
    strict: bool = False,
    threads: int = 1,
    ray_address: str | None = None,
    storage_options: dict[str, str] | None = None,
) -> IngestReport:
    """Packs the videos of ``ds`` into the gulp directory ``path`` (created, or extended after
    its existing chunks) and returns an :class:`~gulpio_rs.ingest.IngestReport`.

    Each row is one video: ``id`` (str), ``frames`` (a ``(T, H, W, C)`` or ``(T, H, W)``
    uint8 array, or a list of JPEG ``bytes`` / uint8 arrays) and its metadata: a ``meta``
    column (a dict, or a JSON string, kept exactly) or else every other column. Optional
    ``timestamps`` (one per frame, seconds), ``fps`` and ``end`` columns are the frames' times,
    stored as the ingest stores an adapter item's (docs/INGEST.md, "Frame timestamps").
    ``quality``/``subsampling``/``restart_rows`` and ``encoding``/``crf``/``gop``/``preset``
    (AV1 video segments) as :class:`~gulpio_rs.GulpIngestor`; ``frame_size`` resizes so the
    shorter side has that many pixels. The dataset's order fixes the chunks (this turns on
    ``preserve_order`` for ``ds``): row ``i`` goes to chunk
    ``first + i // videos_per_chunk``, so the output is byte-identical to ``GulpIngestor``
    over the same rows, whatever the cluster.

    Before anything is written, rows without an ``id``, unusable ``frames`` (not uint8, wrong
    shape) and ids that repeat raise :class:`~gulpio_rs.ingest.IngestError` naming the id.
    Frames that fail to encode and ids already in the directory are skipped and reported
    (``strict=True`` raises instead, before that chunk is published). Running the same call
    again after a crash writes only the chunks that were not published. ``ds`` is read twice
    (the id check, then the frames): materialize it first if producing it is expensive.

    ``path`` may be a dataset URL (``s3://``, ``gs://``, ``az://``) with ``storage_options``
    as :class:`~gulpio_rs.GulpDirectory` takes them: each write task stages its chunk on its
    own node and uploads it (data, index, ``.gmeta`` last), so no shared file system is
    needed; the run's plan is kept in the local staging folder of ``GulpIngestor`` for that
    URL. A rerun skips the chunks the URL already has.
    """
    import time

    t0 = time.perf_counter()
    ray = connect(ray_address)
    folder = os.fspath(path)
    options = storage_options_list(storage_options)
    remote: _Remote | None = None
    if _native.is_remote_url(folder):
        from ..ingest.remote import staging_folder

        remote = (folder, options)
        url, folder = folder, staging_folder(folder)
    per_chunk = int(videos_per_chunk)
    if per_chunk < 1:
        raise ValueError(f"videos_per_chunk must be >= 1, not {videos_per_chunk}")
    encode_options = EncodeOptions(
        int(quality),
        subsampling,
        int(threads),
        bool(restart_rows),
        encoding,
        int(crf),
        int(gop),
        int(preset),
    )
    size = int(frame_size) if frame_size is not None and frame_size > 0 else None

    # Pass 1: the ordered ids, and every reason to refuse the input.
    ds.context.execution_options.preserve_order = True
    try:
        checked = ds.map_batches(_check_batch, batch_format="numpy").take_all()
    except ray.exceptions.RayError as e:
        raise task_error(ray, e) from None
    ids: list[str] = []
    for row in checked:
        if row["problem"]:
            where = f"video {row['id']!r}: " if row["id"] is not None else ""
            raise IngestError(f"{where}{row['problem']}; nothing was written")
        ids.append(row["id"])
    if not ids:
        raise IngestError("the dataset has no rows; nothing was written")
    repeated = [i for i, c in Counter(ids).items() if c > 1]
    if repeated:
        first_pos = [n for n, i in enumerate(ids) if i == repeated[0]]
        raise IngestError(
            f"video {repeated[0]!r}: duplicate id (rows {first_pos[:3]})"
            + (f" and {len(repeated) - 1} more repeated ids" if len(repeated) > 1 else "")
            + "; nothing was written"
        )

    # The plan: which chunk numbers this dataset owns (fixed by the first attempt).
    os.makedirs(folder, exist_ok=True)
    slices = calculate_chunk_slices(per_chunk, len(ids))
    key: RunKey = {
        "adapter": "ray.data.Dataset",
        "fingerprint": hashlib.sha256("\n".join(ids).encode()).hexdigest(),
        "items": len(ids),
        "videos_per_chunk": per_chunk,
        "num_shards": 1,
    }
    # A new dataset gets its manifest before its first chunk (docs/FORMAT.md §7.6).
    _manifest.create_if_new(url if remote else folder, options)
    output = _open_output(url if remote else folder, options)
    taken = [number for number, *_ in output.chunk_table()] if remote else []
    first = load_or_create_plan(folder, key, len(slices), taken=taken)["first_chunk"]
    end = first + len(slices)
    existing = {
        id_: data for id_, (n, data) in ids_by_chunk(output).items() if not first <= n < end
    }
    finished_remotely = _remote_done(output, first, end) if remote else {}
    output.close()
    skip = {i: f"id already in the dataset ({existing[i]})" for i in ids if i in existing}
    if skip and strict:
        id_, reason = next(iter(skip.items()))
        raise IngestError(f"video {id_!r}: {reason}; nothing was written")

    report = IngestReport(output_folder=url if remote else folder)
    todo: set[int] = set()
    for n in range(first, end):
        done = finished_remotely.get(n) if remote else finished(folder, n)
        if done is not None:
            report.add(done)
        else:
            todo.add(n)

    if todo:
        index = {id_: pos for pos, id_ in enumerate(ids)}
        # Ray's annotation of map_batches (and of map_groups) has no room for fn_kwargs: the
        # function it takes has the batch as its only parameter.
        encoded = ds.map_batches(
            _encode_batch,  # type: ignore[arg-type]
            batch_format="numpy",
            num_cpus=encode_options.threads,
            fn_kwargs={
                "index": index,
                "first": first,
                "per_chunk": per_chunk,
                "todo": todo,
                "options": encode_options,
                "size": size,
                "skip": skip,
            },
        )
        # Few partitions: the default (hundreds) costs seconds of actor start-up per run.
        parts = max(1, min(len(todo), int(ray.cluster_resources().get("CPU", 1)) * 2))
        written = encoded.groupby("chunk", num_partitions=parts).map_groups(
            _write_group,  # type: ignore[arg-type]
            batch_format="pyarrow",
            fn_kwargs={"folder": folder, "strict": bool(strict), "remote": remote},
        )
        try:
            results = written.take_all()
        except ray.exceptions.RayError as e:
            raise task_error(ray, e) from None
        for row in sorted(results, key=lambda r: r["chunk"]):
            r = ChunkResult(**json.loads(row["result"]))
            r.failures = failure_pairs(r.failures)
            report.add(r)
        if remote is None:
            remove_temporaries(folder, todo)
        else:
            forget_remote(url)
        _manifest.compact_after_run(url if remote else folder, options)
    report.seconds = time.perf_counter() - t0
    if report.failures:
        warnings.warn(
            f"{plural(len(report.failures), 'video was', 'videos were')} skipped (see the "
            "report): " + "; ".join(f"{i}: {r}" for i, r in report.failures[:5]),
            IngestWarning,
            stacklevel=2,
        )
    return report
