"""Time to quality in `make bench-peer` (`--quality`): the training clock and its saves, the
threshold crossings and their ratios, the configs of that mode, its options and its tables.
Fast: no peer installed; ours trains a toy model for about two seconds."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from seq2seq.config.build import plain
from seq2seq.lab.lab_models import TOY_GRU
from tests.test_bench_peer import fake_prepared, peer_options
from tools.bench.peer import driver, onmt_driver
from tools.bench.peer.data_export import write_export
from tools.bench.peer.joey_config import joey_config
from tools.bench.peer.onmt_config import onmt_decode_settings, onmt_train_config
from tools.bench.peer.ours import our_config, our_overrides, our_quality_decode, our_quality_train
from tools.bench.peer.peer_options import check_options
from tools.bench.peer.quality_clock import SaveClock, next_save_time, read_saves, record_save
from tools.bench.peer.result_tables import quality_runs_table, quality_table
from tools.bench.peer.time_to_quality import first_reached, minutes_to, time_ratio

ROOT = Path(__file__).resolve().parents[1]

# ---------------------------------------------------------------- the clock


class FakeTime:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.value = 100.0

    def __call__(self) -> float:
        return self.value


def test_the_next_save_is_at_the_next_multiple_of_the_interval():
    assert next_save_time(0.0, 60.0) == 60.0
    assert next_save_time(59.9, 60.0) == 60.0
    assert next_save_time(60.0, 60.0) == 120.0  # saved exactly at 60: the next is 120
    assert next_save_time(185.0, 60.0) == 240.0  # a late save skips the multiples it passed


def test_the_clock_saves_at_the_first_update_after_each_interval_and_stops_while_saving(tmp_path):
    now = FakeTime()
    saves = tmp_path / "saves.jsonl"
    clock = SaveClock(every_s=10.0, budget_s=25.0, saves=saves, now=now)
    clock.start()
    written = []

    def save(step: int) -> Path:
        now.value += 4.0  # writing takes 4 s, off the clock
        written.append(step)
        return tmp_path / f"{step}.ckpt"

    over = []
    # Updates of 3 s each: boundaries at training seconds 3, 6, 9, 12, ...
    for step in range(1, 20):
        now.value += 3.0
        over.append(clock.at_update(step, save))
        if over[-1]:
            break
    # Saves due at 10 and 20: the first updates at or after them end at 12 (step 4) and 21
    # (step 7); the budget (25) is spent at 27 (step 9), saved as well.
    assert written == [4, 7, 9]
    assert [(s["step"], s["seconds"]) for s in read_saves(saves)] == [(4, 12.0), (7, 21.0), (9, 27.0)]
    assert over == [False] * 8 + [True]
    assert read_saves(saves)[0]["checkpoint"] == str(tmp_path / "4.ckpt")


def test_the_clock_ignores_a_call_without_a_new_update(tmp_path):
    now = FakeTime()
    clock = SaveClock(every_s=1.0, budget_s=5.0, saves=tmp_path / "s.jsonl", now=now)
    clock.start()
    now.value += 2.0
    assert clock.at_update(0, lambda step: tmp_path) is False  # before the first update
    assert not (tmp_path / "s.jsonl").exists()
    now.value += 10.0
    assert clock.at_update(3, lambda step: tmp_path) is True  # over the budget: saved
    assert clock.at_update(3, lambda step: tmp_path) is False  # the same step: nothing new
    assert len(read_saves(tmp_path / "s.jsonl")) == 1


def test_a_save_interval_beyond_the_budget_is_refused(tmp_path):
    with pytest.raises(ValueError, match="save interval"):
        SaveClock(every_s=120.0, budget_s=60.0, saves=tmp_path / "s.jsonl")
    with pytest.raises(RuntimeError, match="not started"):
        SaveClock(every_s=1.0, budget_s=2.0, saves=tmp_path / "s.jsonl").seconds()


def test_saves_are_read_back_in_order(tmp_path):
    saves = tmp_path / "saves.jsonl"
    assert read_saves(saves) == []
    record_save(saves, 5, 61.5, tmp_path / "a.pt")
    record_save(saves, 9, 122.0, tmp_path / "b.pt")
    assert read_saves(saves) == [
        {"step": 5, "seconds": 61.5, "checkpoint": str(tmp_path / "a.pt")},
        {"step": 9, "seconds": 122.0, "checkpoint": str(tmp_path / "b.pt")},
    ]


# ---------------------------------------------------------------- the peers' save hooks


class FakeJoeyManager:
    """What `joey_saves_by_clock` touches of JoeyNMT's TrainManager."""

    def __init__(self, model_dir: Path, now: FakeTime):
        self.model_dir, self.now = model_dir, now
        self.stats = SimpleNamespace(steps=0)
        self.saved: list[int] = []

    def train_and_validate(self, batches: list[int]) -> None:
        try:
            for batch in batches:
                self._train_step(batch)
        except KeyboardInterrupt:  # as JoeyNMT's loop does
            self.saved.append(-self.stats.steps)  # its own final save, marked

    def _train_step(self, batch: int) -> None:
        self.now.value += 2.0  # a step of 2 s
        self.stats.steps += 1

    def _save_checkpoint(self, new_best: bool, score: float) -> None:
        assert new_best is False and math.isnan(score)  # no score: JoeyNMT deletes nothing
        self.saved.append(self.stats.steps)


def test_joeynmt_saves_by_the_clock_and_stops_at_the_budget(tmp_path):
    now = FakeTime()
    clock = SaveClock(every_s=5.0, budget_s=9.0, saves=tmp_path / "s.jsonl", now=now)
    manager_class = type("Manager", (FakeJoeyManager,), {})  # patched, not the base
    driver.joey_saves_by_clock(manager_class, clock)
    manager = manager_class(tmp_path, now)
    manager.train_and_validate(list(range(20)))
    # Steps end at 2, 4, 6, ... s: saved after step 3 (6 ≥ 5) and step 5 (10 ≥ 9, the
    # budget); then the loop ends (JoeyNMT saves that step once more).
    assert manager.saved == [3, 5, -5]
    assert [s["step"] for s in read_saves(tmp_path / "s.jsonl")] == [3, 5]
    assert read_saves(tmp_path / "s.jsonl")[1]["checkpoint"] == str(tmp_path / "5.ckpt")


def test_opennmt_saves_by_the_clock_between_batches_and_stops_at_the_budget(tmp_path):
    now = FakeTime()
    clock = SaveClock(every_s=5.0, budget_s=9.0, saves=tmp_path / "s.jsonl", now=now)
    saver = SimpleNamespace(base_path=str(tmp_path / "model"), steps=[])
    saver.save = lambda step, moving_average=None: saver.steps.append(step)

    class FakeTrainer:
        def __init__(self):
            self.optim = SimpleNamespace(training_step=1)  # the step about to be made
            self.model_saver, self.moving_average = saver, None

        def train(self, train_iter, train_steps):
            used = []
            for batch in train_iter:
                now.value += 2.0
                self.optim.training_step += 1
                used.append(batch)
            return used

    onmt_driver.save_by_clock(FakeTrainer, clock)
    used = FakeTrainer().train(iter(range(20)), 0)
    # As JoeyNMT above: saves after update 3 (6 s) and 5 (10 s ≥ the 9 s budget); the
    # batches end there.
    assert used == [0, 1, 2, 3, 4]
    assert saver.steps == [3, 5]
    assert read_saves(tmp_path / "s.jsonl")[0]["checkpoint"] == str(tmp_path / "model_step_3.pt")


# ---------------------------------------------------------------- ours: fit() between saves


def test_our_training_saves_at_each_interval_and_its_checkpoints_translate(tmp_path):
    run_dir, saves = tmp_path / "run", tmp_path / "saves.jsonl"
    overrides = [*our_overrides(1.2 / 60, 1, 5), *TOY_GRU, f"data.root={tmp_path / 'data'}"]
    summary = our_quality_train("gru_additive", run_dir, overrides, 0.4, 1.2, saves)
    recorded = read_saves(saves)
    assert [len(recorded), summary["updates"]] == [3, recorded[-1]["step"]]
    for save, due in zip(recorded, (0.4, 0.8, 1.2)):
        assert due <= save["seconds"] < due + 0.4  # the first update at or after it
        payload = torch.load(save["checkpoint"], map_location="cpu", weights_only=False)
        assert payload["progress"]["step"] == save["step"]  # the weights of that step
    assert recorded[0]["step"] < recorded[1]["step"] < recorded[2]["step"]
    sources = tmp_path / "sources.txt"
    sources.write_text("a b c\nd e\n", encoding="utf-8")
    our_quality_decode(saves, sources, 1, tmp_path / "out.json")
    outputs = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    assert [len(lines) for lines in outputs] == [2, 2, 2]


# ---------------------------------------------------------------- crossings and ratios


def series(*points: tuple[float, float]) -> list[dict]:
    """Saves at (minute, BLEU)."""
    return [{"step": 10 * i, "seconds": 60 * m, "bleu": b} for i, (m, b) in enumerate(points)]


def test_the_time_to_a_threshold_is_the_first_save_at_or_above_it():
    scores = series((1, 2.0), (2, 9.5), (3, 15.2), (4, 14.9), (5, 20.0), (6, 21.0))
    assert minutes_to(scores, 15) == 3  # the first crossing, not the dip after it
    assert minutes_to(scores, 20) == 5  # a tie reaches the threshold
    assert first_reached(scores, 20)["step"] == 40
    assert minutes_to(scores, 21.5) is None  # never
    assert minutes_to(list(reversed(scores)), 15) == 3  # in training time, not list order
    assert minutes_to([], 15) is None


def test_ratios_are_exact_or_bounds_when_a_side_never_gets_there():
    exact = time_ratio(ours=4.0, peer=12.0, budget=30.0)
    assert (exact.value, exact.bound) == (3.0, "=")
    at_least = time_ratio(ours=5.0, peer=None, budget=30.0)  # the peer needs > 30 min
    assert (at_least.value, at_least.bound) == (6.0, ">")
    at_most = time_ratio(ours=None, peer=12.0, budget=30.0)  # ours needs > 30 min
    assert (at_most.value, at_most.bound) == (0.4, "<")
    assert time_ratio(None, None, 30.0) is None


def test_the_quality_table_gives_minutes_and_ratios_per_threshold():
    rows = {
        "gru_additive": {
            "ours": series((1, 9.0), (2, 15.0), (3, 20.5)),
            "joeynmt": series((5, 10.0), (10, 15.1), (30, 18.0)),
            "opennmt": series((2, 12.0), (4, 16.0), (6, 20.0)),
        }
    }
    lines = quality_table(rows, ["joeynmt", "opennmt"], [15, 20], budget=30)
    assert lines[0] == (
        "| shape | valid BLEU ≥ | ours min | JoeyNMT min | OpenNMT-py min | JoeyNMT min / ours"
        " | OpenNMT-py min / ours |"
    )
    # 15: ours 2, JoeyNMT 10 (5.0×), OpenNMT-py 4 (2.0×); 20: ours 3, JoeyNMT never
    # (> 30 / 3 = 10×), OpenNMT-py 6 (2.0×).
    assert lines[2] == "| gru_additive | 15 | 2.0 | 10.0 | 4.0 | 5.0× | 2.0× |"
    assert lines[3] == "| gru_additive | 20 | 3.0 | > 30 | 6.0 | > 10.0× | 2.0× |"
    assert all(line.count("|") == lines[0].count("|") for line in lines)
    summary = quality_runs_table(rows, ["joeynmt", "opennmt"])
    assert summary[2] == "| gru_additive | 3, 3, 3 | 20.50, 18.00, 20.00 | 3.0, 30.0, 6.0 |"


def test_a_side_without_saves_shows_no_time_and_no_ratio():
    rows = {"gru_additive": {"ours": series((1, 16.0)), "joeynmt": []}}
    lines = quality_table(rows, ["joeynmt"], [15], budget=30)
    assert lines[2] == "| gru_additive | 15 | 1.0 | — | — |"


# ---------------------------------------------------------------- configs and data


def test_the_joeynmt_quality_config_differs_only_in_its_test_split(tmp_path):
    ours = plain(our_config("gru_additive"))
    plain_config = joey_config(ours, tmp_path / "data", tmp_path / "model", log_every=5)
    quality = joey_config(ours, tmp_path / "data", tmp_path / "model", log_every=5, quality=True)
    assert plain_config["data"]["test"] == str(tmp_path / "data" / "test")
    assert quality["data"].pop("test") == str(tmp_path / "data" / "quality")
    plain_config["data"].pop("test")
    assert quality == plain_config  # validation stays off: the driver saves by its clock
    assert quality["training"]["validation_freq"] >= 10**8


def test_the_opennmt_quality_config_keeps_every_checkpoint(tmp_path):
    ours = plain(our_config("transformer_small"))
    plain_config = onmt_train_config(ours, tmp_path / "data", tmp_path, log_every=5)
    quality = onmt_train_config(ours, tmp_path / "data", tmp_path, log_every=5, quality=True)
    assert plain_config["keep_checkpoint"] == 1 and plain_config["save_checkpoint_steps"] == 0
    assert "valid" not in plain_config["data"] and plain_config["valid_steps"] >= 10**8
    assert quality.pop("keep_checkpoint") == -1  # all that the driver saves
    plain_config.pop("keep_checkpoint")
    assert quality == plain_config
    settings = onmt_decode_settings(ours, tmp_path / "data", tmp_path, "quality")
    assert settings["sources"] == str(tmp_path / "data" / "quality.zh")


def test_the_export_adds_the_first_valid_pairs_for_scoring(tmp_path):
    counts = write_export(fake_prepared(20), "zh", "en", 5, tmp_path, quality_sentences=12)
    assert counts["quality"] == 12
    sources = (tmp_path / "quality.zh").read_text(encoding="utf-8").splitlines()
    references = (tmp_path / "quality-reference.en").read_text(encoding="utf-8").splitlines()
    assert sources == [f"valid源{i}" for i in range(12)]
    assert references == [f"valid target {i}" for i in range(12)]
    assert not (tmp_path / "quality.en").exists()  # JoeyNMT decodes the sources alone
    write_export(fake_prepared(20), "zh", "en", 5, tmp_path / "off")
    assert not (tmp_path / "off" / "quality.zh").exists()


# ---------------------------------------------------------------- options


@pytest.mark.parametrize("thresholds", [[0.0], [15.0, 101.0], [float("nan")], []])
def test_bad_thresholds_are_refused_naming_the_option(tmp_path, thresholds):
    with pytest.raises(SystemExit, match="--quality:"):
        check_options(peer_options(tmp_path, quality=thresholds))


def test_a_save_interval_longer_than_the_budget_is_refused(tmp_path):
    options = peer_options(tmp_path, quality=[15.0], quality_minutes=2.0, quality_every=3.0)
    with pytest.raises(SystemExit, match="--quality-every 3 is longer than --quality-minutes 2"):
        check_options(options)
    with pytest.raises(SystemExit, match="--quality-sentences"):
        check_options(peer_options(tmp_path, quality=[15.0], quality_sentences=0))


def test_thresholds_are_sorted_once_each_and_off_by_default(tmp_path):
    assert check_options(peer_options(tmp_path, quality=[20.0, 15.0, 20.0])).quality == [15, 20]
    assert check_options(peer_options(tmp_path)).quality is None


def test_the_command_line_refuses_a_threshold_naming_the_option():
    done = subprocess.run(
        [sys.executable, "scripts/bench_peer.py", "--quality", "15", "0"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert "--quality" in done.stderr and "'0'" in done.stderr
