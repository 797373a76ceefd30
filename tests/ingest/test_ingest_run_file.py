"""A damaged run file in ``OUT/.gulpio-ingest/`` (the file that fixes where a run's chunks
start) stops the ingest with an error that names the file and says what to do, instead of a
bare JSON or KeyError message (or being skipped, which could let a new run take the chunk
numbers it reserves)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import synthetic_frame

from gulpio_rs import GulpDirectory, GulpIngestor
from gulpio_rs.adapters import AbstractDatasetAdapter
from gulpio_rs.cli import main
from gulpio_rs.ingest import STATE_DIR, IngestError
from gulpio_rs.ingest.plan import RunKey, existing_plan, load_or_create_plan, plan_path


class Videos(AbstractDatasetAdapter):
    def __init__(self, n: int, prefix: str = "v"):
        self.n, self.prefix = n, prefix

    def __len__(self):
        return self.n

    def iter_data(self, slice_element=None):
        for i in range(self.n)[slice_element or slice(None)]:
            frames = [synthetic_frame(16, 16, seed=i)]
            yield {"id": f"{self.prefix}{i}", "meta": {"i": i}, "frames": frames}


DAMAGE = {
    "truncated": b'{"first_chunk": 0, "num_sl',
    "not-utf8": b"\xff\xfe{}",
    "not-an-object": b"[1, 2]",
    "no-first-chunk": b'{"num_slices": 2, "run": "x"}',
    "negative": b'{"first_chunk": -1, "num_slices": 2}',
}


@pytest.mark.parametrize("damage", DAMAGE, ids=list(DAMAGE))
def test_a_damaged_run_file_is_named_with_what_to_do(tmp_path, damage):
    out = tmp_path / "out"
    GulpIngestor(Videos(4), out, 2, 1, progress=False)()
    (run_file,) = (out / STATE_DIR).glob("run-*.json")
    run_file.write_bytes(DAMAGE[damage])

    # The same run (resuming it) and another one (numbering after it) both need the file.
    for adapter in (Videos(4), Videos(3, prefix="w")):
        with pytest.raises(IngestError) as e:
            GulpIngestor(adapter, out, 2, 1, progress=False)()
        message = str(e.value)
        assert message.startswith(f"{run_file}: this ingest run file is damaged")
        assert "Remove the file and run the ingest again" in message

    # Doing what it says works, and keeps what was published.
    run_file.unlink()
    report = GulpIngestor(Videos(4), out, 2, 1, progress=False)()
    assert sorted(GulpDirectory(out).keys()) == ["v0", "v1", "v2", "v3"]
    # Every video is already stored: left out before decoding, counted, not failures.
    assert report.already_stored == 4 and report.failures == []


def test_the_command_says_it_in_one_line(tmp_path, capsys):
    out = tmp_path / "out"
    GulpIngestor(Videos(2), out, 2, 1, progress=False)()
    (run_file,) = (out / STATE_DIR).glob("run-*.json")
    run_file.write_text("{")
    args = ["ingest", "--adapter", f"{__name__}:Videos", "2", str(out), "--num-workers", "1"]
    assert main([*args, "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"gulpio ingest: error: {run_file}: this ingest run file is damaged")


@pytest.mark.parametrize("damage", DAMAGE, ids=list(DAMAGE))
def test_existing_plan_is_none_for_a_damaged_run_file(tmp_path, damage):
    # The runner reads every run file (check_settings) before it asks for its own, so a
    # damaged one has stopped it already; existing_plan checks the fields it hands on too,
    # and leaves naming the damage to load_or_create_plan.
    key: RunKey = {
        "adapter": "tests.Videos",
        "fingerprint": "f",
        "items": 4,
        "videos_per_chunk": 2,
        "num_shards": 1,
    }
    path = Path(plan_path(str(tmp_path), key))
    path.parent.mkdir()
    path.write_bytes(DAMAGE[damage])
    assert existing_plan(str(tmp_path), key) is None
    with pytest.raises(IngestError, match="this ingest run file is damaged"):
        load_or_create_plan(str(tmp_path), key, 2)
