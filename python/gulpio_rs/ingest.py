"""gulpio2's ingestion classes: ``ChunkWriter`` writes one adapter slice into one chunk;
``GulpIngestor`` spreads chunks over worker processes."""

from __future__ import annotations

import os
import warnings
from concurrent.futures import ProcessPoolExecutor

from .chunk import GulpChunk
from .directory import GulpDirectory


def calculate_chunk_slices(items_per_chunk: int, num_items: int) -> list[slice]:
    """Slices of ``items_per_chunk`` items covering ``range(num_items)``."""
    assert items_per_chunk > 0
    assert num_items > 0
    return [
        slice(i, min(i + items_per_chunk, num_items)) for i in range(0, num_items, items_per_chunk)
    ]


class ChunkWriter:
    """Writes the videos of one adapter slice into one chunk (gulpio2's ``ChunkWriter``)."""

    def __init__(self, adapter):
        self.adapter = adapter
        self.skipped: list[str] = []

    def write_chunk(self, output_chunk: GulpChunk, input_slice):
        with output_chunk.open("wb"):
            for video in self.adapter.iter_data(input_slice):
                id_ = video["id"]
                meta_data = video["meta"]
                frames = video["frames"]
                if len(frames) > 0:
                    output_chunk.append(id_, meta_data, frames)
                else:
                    self.skipped.append(str(id_))
                    warnings.warn(f"Failed to write video with id: {id_}; no frames", stacklevel=2)
        return self.skipped


class GulpIngestor:
    """Gulps an adapter into ``output_folder`` with ``num_workers`` processes, one chunk of
    ``videos_per_chunk`` videos per task (gulpio2's ``GulpIngestor``). New chunks are numbered
    after the existing ones, so running it again on a new adapter extends the dataset."""

    def __init__(self, adapter, output_folder, videos_per_chunk, num_workers):
        assert int(num_workers) > 0
        self.adapter = adapter
        self.output_folder = str(output_folder)
        self.videos_per_chunk = int(videos_per_chunk)
        self.num_workers = int(num_workers)

    def __call__(self):
        os.makedirs(self.output_folder, exist_ok=True)
        chunk_slices = calculate_chunk_slices(self.videos_per_chunk, len(self.adapter))
        gulp_directory = GulpDirectory(self.output_folder)
        new_chunks = list(gulp_directory.new_chunks(len(chunk_slices)))
        chunk_writer = ChunkWriter(self.adapter)
        if self.num_workers == 1:
            results = [
                chunk_writer.write_chunk(c, s)
                for c, s in zip(new_chunks, chunk_slices, strict=True)
            ]
        else:
            with ProcessPoolExecutor(max_workers=self.num_workers) as executor:
                results = list(executor.map(chunk_writer.write_chunk, new_chunks, chunk_slices))
        return [id_ for skipped in results for id_ in skipped]
