"""Training compute is counted as it is spent: `train/tflop` and `results.json` hold the
analytic FLOPs (`seq2seq.flops`) of every batch trained on, and a resumed run goes on
counting from where it stopped. The status line says how long the run will take here."""

from __future__ import annotations

import logging

import pytest
from helpers import TINY_TOY, compose_config
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from seq2seq.config.build import plain
from seq2seq.data.batching import TokenBatchSampler, collate
from seq2seq.data.prepare import prepare
from seq2seq.flops import training_flops
from seq2seq.runs.assemble import data_config, train_and_test
from seq2seq.training.progress import ESTIMATE_AFTER, ProgressDisplay

STEPS = 12
COMMON = ["trainer.valid_every=6", "trainer.test_search.beam_size=1"]


def config(tmp_path, *overrides: str):
    return compose_config(TINY_TOY + [f"data.root={tmp_path / 'data'}", *COMMON, *overrides])


def flops_of_the_first_batches(cfg, count: int) -> int:
    """Independently: the sampler's batches in training order, each counted by its shapes."""
    data = prepare(data_config(cfg))
    train = data.train
    sampler = TokenBatchSampler(
        train.src_lengths, train.tgt_lengths, max_tokens=cfg.data.max_tokens, shuffle=True,
        seed=cfg.trainer.seed,
    )  # fmt: skip
    order = [batch for epoch in range(10) for batch in sampler.batches(epoch)][:count]
    vocab = (data.src_tokenizer.vocab_size, data.tgt_tokenizer.vocab_size)
    total = 0
    for indices in order:
        batch = collate([train.examples[i] for i in indices], indices)
        total += training_flops(
            plain(cfg), len(batch), batch.src.size(1), batch.tgt_in.size(1), *vocab
        )
    return total


def logged_tflop(run_dir) -> dict[int, float]:
    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    return {event.step: event.value for event in events.Scalars("train/tflop")}


def test_train_tflop_is_the_flops_of_every_batch_and_survives_a_resume(tmp_path):
    cfg = config(tmp_path, f"trainer.max_steps={STEPS}")
    straight = train_and_test(cfg, tmp_path / "straight", outputs_root=tmp_path)
    expected = flops_of_the_first_batches(cfg, STEPS)
    assert straight["train_tflop"] == pytest.approx(expected / 1e12, rel=1e-9)
    logged = logged_tflop(tmp_path / "straight")
    assert sorted(logged) == list(range(1, STEPS + 1))  # every logged step and validation
    assert logged[STEPS] == pytest.approx(expected / 1e12, rel=1e-6)
    assert all(logged[s] < logged[s + 1] for s in range(1, STEPS))

    train_and_test(config(tmp_path, "trainer.max_steps=6"), tmp_path / "halves", tmp_path)
    resume = [f"trainer.max_steps={STEPS}", f"trainer.resume={tmp_path / 'halves'}"]
    resumed = train_and_test(config(tmp_path, *resume), tmp_path / "resume", tmp_path)
    assert resumed["train_tflop"] == straight["train_tflop"]


def test_the_first_lines_say_how_long_the_budget_takes_here(caplog):
    display = ProgressDisplay(total_steps=1000, max_minutes=None, enabled=False)
    with caplog.at_level(logging.INFO, logger="seq2seq.training.progress"):
        for step in range(1, ESTIMATE_AFTER + 2):
            display.advance(step, train_seconds=0.5 * step)  # 0.5 s per update
    (line,) = [r.getMessage() for r in caplog.records if "per update" in r.getMessage()]
    assert line.startswith("0.50 s per update on this machine")
    assert f"the {1000 - ESTIMATE_AFTER - 1:,} updates left" in line and "about 8 min" in line
    assert display.minutes_left(1000) == 0


def test_a_time_budget_says_where_it_will_stop_the_run():
    display = ProgressDisplay(total_steps=10_000, max_minutes=2.0, enabled=False)
    for step in range(1, ESTIMATE_AFTER + 2):
        display.advance(step, train_seconds=0.5 * step)
    line = display.estimate(ESTIMATE_AFTER + 1, train_seconds=0.5 * (ESTIMATE_AFTER + 1))
    # 120 s at 0.5 s per update: about 240 updates in all.
    assert "trainer.max_minutes=2 will stop the run near update 240" in line
