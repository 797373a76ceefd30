"""GulpDistributedSampler in a real two-process torchrun job on the CPU (gloo): every rank gets
the same number of videos, ranks are disjoint except the documented padding, and together
they cover the dataset."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

from test_torch_dataset import write_videos  # noqa: E402

from gulpio_rs.torch import GulpDistributedSampler  # noqa: E402

NUM_VIDEOS = 11  # odd: two ranks need one padding sample
WORLD = 2
SEED = 11

TRAINING_SCRIPT = textwrap.dedent(
    """
    import json, sys

    import torch.distributed as dist
    from torch.utils.data import DataLoader

    from gulpio_rs.torch import GulpDistributedSampler, GulpVideoDataset, gulp_collate

    path, out, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    ds = GulpVideoDataset(path, frames=2, target="v")
    result = {"rank": rank, "world": dist.get_world_size(), "epochs": {}}
    for drop_last in (False, True):
        # num_replicas and rank come from the process group.
        sampler = GulpDistributedSampler(ds, seed=seed, drop_last=drop_last)
        result["sampler"] = [sampler.num_replicas, sampler.rank]
        loader = DataLoader(ds, batch_size=2, sampler=sampler, collate_fn=gulp_collate)
        for epoch in (0, 1):
            sampler.set_epoch(epoch)
            mine = [v for clips, targets in loader for v in targets.tolist()]
            everyone = [None] * dist.get_world_size()
            dist.all_gather_object(everyone, mine)
            result["epochs"][f"{epoch} drop_last={drop_last}"] = {"mine": mine, "all": everyone}
    with open(f"{out}/rank{rank}.json", "w") as f:
        json.dump(result, f)
    dist.destroy_process_group()
    """
)


@pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available")
def test_torchrun_two_ranks(tmp_path):
    data = write_videos(tmp_path / "videos", [3] * NUM_VIDEOS)
    script = tmp_path / "train.py"
    script.write_text(TRAINING_SCRIPT)
    out = tmp_path / "out"
    out.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GULPIO_", "RANK", "WORLD"))}
    env["OMP_NUM_THREADS"] = "1"
    # Both ranks are on this machine: talk over loopback, whatever the hostname resolves to.
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    cmd += [f"--nproc_per_node={WORLD}", str(script), data, str(out), str(SEED)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in range(WORLD)]
    assert [r["rank"] for r in ranks] == [0, 1] and all(r["world"] == WORLD for r in ranks)
    assert [r["sampler"] for r in ranks] == [[WORLD, 0], [WORLD, 1]]
    orders = {}
    for key, got in ranks[0]["epochs"].items():
        everyone = got["all"]
        # all_gather agrees with what each rank recorded itself.
        assert [ranks[r]["epochs"][key]["mine"] for r in range(WORLD)] == everyone
        counts = {len(part) for part in everyone}
        flat = [v for part in everyone for v in part]
        if key.endswith("drop_last=False"):
            assert counts == {6}  # ceil(11 / 2)
            assert set(flat) == set(range(NUM_VIDEOS))
            # The one padding sample repeats the epoch order's first sample.
            assert len(flat) - len(set(flat)) == 1
            assert everyone[1][-1] == everyone[0][0]
        else:
            assert counts == {5}  # floor(11 / 2)
            assert len(set(flat)) == len(flat) == 10
        # The split is the pure function of (seed, epoch) a single process computes too.
        epoch = int(key.split()[0])
        for r, part in enumerate(everyone):
            expected = GulpDistributedSampler(
                NUM_VIDEOS, WORLD, r, seed=SEED, drop_last=key.endswith("True")
            )
            expected.set_epoch(epoch)
            assert part == list(expected)
        orders[key] = everyone
    assert orders["0 drop_last=False"] != orders["1 drop_last=False"]
