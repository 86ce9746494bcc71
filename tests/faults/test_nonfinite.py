"""Non-finite losses: a NaN/inf loss or gradient norm skips the update and is counted; a run
that keeps producing them stops with one message (exit code 2) and leaves its last good
checkpoint as it was."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
import torch
from helpers import TINY_TOY, compose_config, run_training_process, toy_train_command
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from seq2seq.checkpoint import load_checkpoint
from seq2seq.config.build import ConfigError
from seq2seq.runs.assemble import train_and_test
from seq2seq.training.objectives import CrossEntropy


def _all_finite(weights: dict[str, torch.Tensor]) -> bool:
    return all(bool(torch.isfinite(t).all()) for t in weights.values() if t.is_floating_point())


@pytest.mark.attack("nonfinite")
def test_a_diverging_run_stops_with_one_message_and_exit_code_2(tmp_path):
    run_dir = tmp_path / "run"
    command = toy_train_command(tmp_path, run_dir, "optim.lr=1e9", "trainer.max_steps=200",
               "trainer.valid_every=5", "trainer.valid_max_sentences=4", "trainer.max_nonfinite_steps=3",
               "trainer.test_search.beam_size=2")  # fmt: skip
    finished = run_training_process(command)
    output = finished.stdout
    assert finished.returncode == 2, output[-3000:]
    assert "Traceback" not in output and "IndexError" not in output
    errors = [line for line in output.splitlines() if "[ERROR]" in line]
    assert len(errors) == 1, errors
    assert "3 updates in a row" in errors[0] and "learning rate" in errors[0]
    assert "optim.lr" in errors[0]
    stopped_at = int(re.search(r"at step (\d+)", errors[0]).group(1))
    # The last good checkpoint is intact, loadable, finite and from before the divergence.
    last = load_checkpoint(run_dir / "checkpoints" / "last.pt")
    assert _all_finite(last["model"])
    assert last["progress"]["step"] <= stopped_at
    assert not (run_dir / "results.json").exists()  # no test search on broken weights


@pytest.mark.attack("nonfinite")
def test_one_nan_batch_is_skipped_counted_and_training_continues(tmp_path, monkeypatch):
    original = CrossEntropy.loss
    calls = {"count": 0}

    def poison_the_fifth_batch(self, model, batch):
        parts = original(self, model, batch)
        calls["count"] += 1
        if calls["count"] == 5:
            parts = replace(parts, loss=parts.loss * float("nan"))
        return parts

    monkeypatch.setattr(CrossEntropy, "loss", poison_the_fifth_batch)
    cfg = compose_config(TINY_TOY + [f"data.root={tmp_path / 'data'}", "trainer.max_steps=8",
                                     "trainer.valid_every=8", "trainer.test_search.beam_size=1"])  # fmt: skip
    run_dir = tmp_path / "run"
    results = train_and_test(cfg, run_dir, outputs_root=tmp_path)
    assert results["steps"] == 8  # steps count applied updates: the skipped one is redone
    assert calls["count"] == 9
    payload = load_checkpoint(run_dir / "checkpoints" / "last.pt")
    assert payload["progress"]["skipped_steps"] == 1
    assert payload["progress"]["nonfinite_streak"] == 0
    assert _all_finite(payload["model"])
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in rows] == list(range(1, 9))
    assert all(torch.isfinite(torch.tensor(row["train/loss"])) for row in rows)
    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    skipped = events.Scalars("train/skipped_steps")
    assert skipped and skipped[-1].value == 1


@pytest.mark.attack("nonfinite")
def test_max_nonfinite_steps_below_one_is_refused_with_its_name(tmp_path):
    cfg = compose_config(TINY_TOY + [f"data.root={tmp_path}", "trainer.max_nonfinite_steps=0"])
    with pytest.raises(ConfigError, match="trainer.max_nonfinite_steps"):
        train_and_test(cfg, tmp_path / "run", outputs_root=tmp_path)
