"""Data-parallel training: batch sharding, and DDP under torchrun (gloo, CPU) against one
process accumulating the same batches."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
import torch
from helpers import TINY_TOY

from seq2seq.checkpoint import load_checkpoint
from seq2seq.training.distributed import Distributed, from_environment, shard, stream


def test_ranks_share_an_epoch_without_overlap_and_agree_on_positions():
    batches = [f"b{i}" for i in range(11)]
    per_rank = [list(shard(batches, 0, Distributed(rank, rank, 3))) for rank in range(3)]
    taken = [batch for rank in per_rank for _, batch in rank]
    assert sorted(taken) == sorted(batches[:9])  # the last incomplete group is skipped
    assert len(set(taken)) == 9
    assert per_rank[1][:2] == [(3, "b1"), (6, "b4")]
    assert [p for p, _ in per_rank[0]] == [p for p, _ in per_rank[2]]  # same update count
    # Resuming at a saved position continues with the next group.
    assert list(shard(batches, 6, Distributed(2, 2, 3))) == [(9, "b8")]


def test_one_process_reads_every_batch_in_order():
    batches = list(range(5))
    assert list(shard(batches, 2, Distributed())) == [(3, 2), (4, 3), (5, 4)]


def _train_command(launcher: list[str], run_dir, data_root, extra: list[str]) -> list[str]:
    overrides = TINY_TOY + [
        f"data.root={data_root}",
        "trainer.max_steps=3",
        "trainer.valid_every=3",
        "trainer.test_search.beam_size=1",
        "decoder.dropout=0",  # dropout masks would differ between the two set-ups
        "model.embed_dropout=0",
        f"hydra.run.dir={run_dir}",
    ]
    return [*launcher, "-m", "seq2seq.cli.train", *overrides, *extra]


def _run(command: list[str]) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    finished = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert finished.returncode == 0, finished.stderr[-3000:]


def test_two_gloo_ranks_train_like_one_process_accumulating_their_batches(tmp_path):
    """Rank r takes batches r, r+2, ...; DDP averages the two gradients, which is what
    `trainer.accumulate=2` computes in one process over the same consecutive batches."""
    data_root = tmp_path / "data"
    single = _train_command(
        [sys.executable], tmp_path / "single", data_root, ["trainer.accumulate=2"]
    )
    _run(single)  # also prepares the toy data the ranks then read
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    _run(_train_command(torchrun, tmp_path / "ddp", data_root, []))

    one = load_checkpoint(tmp_path / "single" / "checkpoints" / "last.pt")
    two = load_checkpoint(tmp_path / "ddp" / "checkpoints" / "last.pt")
    assert two["progress"]["step"] == one["progress"]["step"] == 3
    assert two["progress"]["position"] == one["progress"]["position"] == 6  # 2 batches/update
    for name, weight in one["model"].items():
        torch.testing.assert_close(two["model"][name], weight, rtol=1e-4, atol=1e-5, msg=name)
    assert (tmp_path / "ddp" / "results.json").is_file()  # rank 0 tested and wrote results


def test_the_data_parallel_flag_follows_the_environment(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")  # torchrun sets them; several ranks need them
    monkeypatch.setenv("MASTER_PORT", "29500")
    ranks = from_environment()
    assert ranks.enabled and not ranks.is_main
    monkeypatch.delenv("WORLD_SIZE")
    monkeypatch.delenv("RANK")
    assert not from_environment().enabled and from_environment().is_main


def test_the_stream_commits_positions_of_whole_groups_across_epochs():
    """The cursor after each batch is where a resume continues: the next group of W
    batches, or the next epoch's start after an epoch's last complete group."""
    epochs = {0: ["a0", "a1", "a2", "a3", "a4"], 1: ["b0", "b1", "b2", "b3", "b4"]}
    rank1 = list(stream(epochs.__getitem__, 0, 2, Distributed(1, 1, 2), max_epochs=2))
    assert rank1 == [("a3", (1, 0)), ("b1", (1, 2)), ("b3", (2, 0))]
    single = list(stream(epochs.__getitem__, 1, 3, Distributed(), max_epochs=2))
    assert single == [("b3", (1, 4)), ("b4", (2, 0))]
    assert list(stream(epochs.__getitem__, 2, 0, Distributed(), max_epochs=2)) == []


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow
def test_two_nodes_of_one_process_each_train_like_one_process_accumulating(tmp_path):
    """Multi-node launch on one machine: two torchrun launches ("nodes") of one process
    each meet through the c10d rendezvous, as on a cluster; the weights equal one process
    with `trainer.accumulate=2`."""
    data_root = tmp_path / "data"
    _run(_train_command([sys.executable], tmp_path / "single", data_root, ["trainer.accumulate=2"]))
    endpoint = f"127.0.0.1:{_free_port()}"
    nodes = []
    for node in range(2):
        launcher = [
            sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=1",
            "--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}", "--rdzv-id=two-nodes",
        ]  # fmt: skip
        command = _train_command(launcher, tmp_path / f"node{node}", data_root, [])
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        nodes.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))  # fmt: skip
    outputs = [node.communicate(timeout=600)[0] for node in nodes]
    assert all(node.returncode == 0 for node in nodes), "\n".join(o[-2000:] for o in outputs)

    one = load_checkpoint(tmp_path / "single" / "checkpoints" / "last.pt")
    written = [p for p in tmp_path.glob("node*/checkpoints/last.pt")]
    assert len(written) == 1  # rank 0 alone writes, in its node's run folder
    two = load_checkpoint(written[0])
    assert two["progress"]["step"] == one["progress"]["step"] == 3
    for name, weight in one["model"].items():
        torch.testing.assert_close(two["model"][name], weight, rtol=1e-4, atol=1e-5, msg=name)
