"""Where an ingest runs its chunks (``ingest.executors``): executors by name, registered by
whoever provides them; the ingest itself knows only the registry."""

from __future__ import annotations

import pytest
from helpers import ListAdapter, synthetic_frame

from gulpio_rs import GulpIngestor
from gulpio_rs.ingest import executors
from gulpio_rs.ingest.executors import ChunkJob, register_executor


def _items(n: int = 5) -> ListAdapter:
    return ListAdapter(
        [
            {"id": f"v{i}", "meta": {"i": i}, "frames": [synthetic_frame(24, 32, seed=i)] * 2}
            for i in range(n)
        ]
    )


class Inline:
    """Writes the chunks here, one after another, in reverse order: any executor that runs
    the job's worker gives the same dataset."""

    made: list[Inline] = []

    def __init__(self, address: str | None) -> None:
        self.address = address
        self.jobs: list[ChunkJob] = []
        Inline.made.append(self)

    def threads_per_worker(self, num_workers: int) -> int:
        return 1

    def run(self, job: ChunkJob) -> None:
        self.jobs.append(job)
        worker = job.new_worker(*job.worker_args, None)
        try:
            for number, parts in reversed(job.todo):
                r = worker.run(number, parts)
                job.report.add(r)
                job.bar.update(r.videos, r.frames)
        finally:
            worker.encoder.close()


@pytest.fixture
def inline(monkeypatch):
    monkeypatch.setattr(executors, "_EXECUTORS", dict(executors._EXECUTORS))
    Inline.made = []
    register_executor("inline", Inline)
    return Inline


def _files(folder):
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


def test_a_registered_executor_runs_the_chunks(tmp_path, inline):
    ours = GulpIngestor(_items(), tmp_path / "a", 2, 1, executor="inline", ray_address="x:1")
    assert ours.options.threads == 1  # the executor's choice
    report = ours()
    (made,) = inline.made
    assert made.address == "x:1"
    (job,) = made.jobs
    assert [n for n, _ in job.todo] == [0, 1, 2] and job.num_workers == 1
    assert report.videos == 5 and report.chunks_written == 3
    GulpIngestor(_items(), tmp_path / "b", 2, 1, threads=1)()
    assert _files(tmp_path / "a") == _files(tmp_path / "b")


def test_unknown_executors_are_refused_with_the_known_ones(tmp_path, inline):
    with pytest.raises(ValueError, match=r"executor must be 'process', .* not 'dask'") as e:
        GulpIngestor(_items(), tmp_path, 1, 1, executor="dask")
    assert "'ray'" in str(e.value) and "'inline'" in str(e.value)
    assert executors.names()[0] == "process"


def test_the_ray_executor_is_registered_by_its_package_when_asked_for():
    # Without importing Ray itself (tests/ray_cluster checks that importing gulpio_rs.ray
    # does not).
    assert type(executors.executor("ray", "auto")).__module__ == "gulpio_rs.ray._ingest"
