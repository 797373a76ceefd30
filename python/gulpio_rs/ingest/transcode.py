"""Converting a dataset to another encoding (``gulpio transcode``, :func:`transcode`): the
source's videos decoded and stored again, JPEG frames as video segments or the reverse, with
every ``meta_data`` element kept verbatim (labels, frame times, gulpio2's appended elements),
and the files beside the chunks (``label2idx.json``, ...: :mod:`.sidecars`) copied.

It is an ingest like any other (``GulpIngestor`` over :class:`GulpSource`, an adapter that reads
a gulp directory), so it runs in parallel worker processes, shows a progress bar, skips what
the destination holds and resumes after a crash.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import numpy as np

from .._choices import Encoding
from ..errors import GulpError
from .report import IngestReport
from .sidecars import check_destination, copy_sidecars, find_sidecars


class GulpSource:
    """An adapter over the gulp directory ``source_folder`` (a path or a dataset URL with
    ``storage_options``): each video's frames decoded (accurately, RGB or gray as stored) and
    its whole ``meta_data`` list. Pickles as its location; each worker opens the directory."""

    def __init__(self, source_folder: str, storage_options: dict[str, str] | None = None) -> None:
        self.source_folder = str(source_folder)
        self._storage_options = storage_options
        self._gd: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_gd": None}

    def _dir(self) -> Any:
        if self._gd is None:
            from ..directory import GulpDirectory

            self._gd = GulpDirectory(self.source_folder, storage_options=self._storage_options)
        return self._gd

    def __len__(self) -> int:
        return len(self._dir())

    def fingerprint(self) -> str:
        """What identifies the source's content for resuming: its chunks' names and sizes
        (chunks are published whole and never rewritten in place by our writers)."""
        gd = self._dir()
        # File names, not paths: a moved source is the same source.
        table = [
            [number, data.rsplit("/", 1)[-1], first, videos]
            for number, data, _, _, first, videos in gd.chunk_table()
        ]
        return hashlib.sha256(json.dumps([table, gd.chunk_sizes()]).encode()).hexdigest()

    def item_ids(self) -> list[str]:
        """The ids, in the order :meth:`iter_data` yields them (for skipping stored ones)."""
        return list(self._dir().keys())

    def iter_data(self, slice_element: slice | None = None) -> Iterator[dict[str, Any]]:
        gd = self._dir()
        for id_ in self.item_ids()[slice_element or slice(None)]:
            try:
                frames = _frames(gd, id_)
                elements = gd.merged_meta_dict[id_]["meta_data"]
            except (GulpError, ValueError, OSError) as e:
                yield {"id": id_, "error": f"cannot read it from the source: {e}"}
                continue
            yield {"id": id_, "meta_data": json.loads(json.dumps(elements)), "frames": frames}


def _frames(gd: Any, id_: str) -> list[np.ndarray]:
    n = gd.num_frames(id_)
    if n == 0:
        return []
    try:
        clip = gd.read(id_)
    except ValueError:  # frames of different sizes: one at a time
        return [gd.read(id_, k)[0] for k in range(n)]
    return list(clip[:, :, :, 0] if clip.shape[3] == 1 else clip)


def transcode(
    source: str,
    destination: str,
    *,
    encoding: Encoding,
    videos_per_chunk: int = 100,
    num_workers: int = 1,
    storage_options: dict[str, str] | None = None,
    **options: Any,
) -> IngestReport:
    """Stores every video of ``source`` again in ``destination`` with ``encoding`` (``"video"``
    or ``"jpeg"``), keeping ids and ``meta_data`` lists, and copies the files beside the
    chunks (``label2idx.json`` and any other file but the chunks and this package's own state:
    :func:`~gulpio_rs.ingest.sidecars.find_sidecars`; of a dataset URL, ``label2idx.json``)
    once the videos are stored. ``options`` are :class:`~gulpio_rs.GulpIngestor`'s (``crf``,
    ``gop``, ``quality``, ``subsampling``, ``progress``, ``strict``, ...). Gray videos become
    RGB when stored as video. Returns the ingest's report (``sidecars``: the files copied);
    rerunning finishes an interrupted transcode.

    Raises :class:`~gulpio_rs.ingest.sidecars.SidecarConflictError` before any work when the
    destination holds such a file with other content."""
    from .runner import GulpIngestor

    adapter = GulpSource(source, storage_options)
    sidecars = find_sidecars(source, storage_options)
    # The destination is written with the environment's credentials, as the ingest does.
    check_destination(sidecars, destination)
    report = GulpIngestor(
        adapter,
        destination,
        videos_per_chunk,
        num_workers,
        encoding=encoding,
        **options,
    )()
    # After the videos: a destination with label2idx.json looks finished, so an interrupted
    # transcode must not have one (its rerun copies them).
    report.sidecars = copy_sidecars(sidecars, destination)
    return report


__all__ = ["GulpSource", "transcode"]
