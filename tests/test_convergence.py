"""`trainer.converged_gain`: training stops the first time the selected metric's gain over
the last part of the run falls under the threshold, the rule that COMPARISON.md's "last ¼
gain" column measures; the validation history that decides it is saved and resumed."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import TINY_TOY, compose_config
from test_select_metric import ScriptedHook

from seq2seq.checkpoint import CheckpointError
from seq2seq.runs.assemble import assemble_trainer
from seq2seq.training.convergence import recent_gain, validations_in_window
from seq2seq.training.progress import Progress

FAST = ["trainer.valid_every=1", "data.source.valid_size=16", "logging.tensorboard=false",
        "trainer.select_metric=alignment_accuracy"]  # fmt: skip
# A scripted accuracy that rises fast, then slowly: step → value.
RISING = {1: 0.10, 2: 0.30, 3: 0.50, 4: 0.60, 5: 0.66, 6: 0.70, 7: 0.72, 8: 0.73, 9: 0.74,
          10: 0.74, 11: 0.75, 12: 0.75}  # fmt: skip


def config(root: Path, *overrides: str):
    return compose_config(TINY_TOY + FAST + [f"data.root={root / 'data'}", *overrides])


def gain_by_brute_force(values: dict[int, float], last: int, fraction: float) -> float | None:
    """The gain at update `last`, straight from its definition, by another route."""
    cutoff = (1 - fraction) * last
    seen = {step: value for step, value in values.items() if step <= last}
    early = {step: value for step, value in seen.items() if step <= cutoff}
    return None if not early else max(seen.values()) - max(early.values())


def first_stop(values: dict[int, float], threshold: float, fraction: float, needed: int) -> int:
    """The first update (validated at every one) where the last `fraction` holds `needed`
    validations and the gain is under `threshold`; 0 when there is none."""
    for last in sorted(values):
        in_window = [step for step in values if (1 - fraction) * last < step <= last]
        gain = gain_by_brute_force(values, last, fraction)
        if len(in_window) >= needed and gain is not None and gain < threshold:
            return last
    return 0


def test_recent_gain_against_hand_computed_values():
    history = [[100, 1.0], [200, 5.0], [300, 4.0], [400, 5.5]]
    assert recent_gain(history, 0.25) == pytest.approx(0.5)  # best 5.5 − best up to 300 (5.0)
    assert recent_gain(history, 0.5) == pytest.approx(0.5)  # up to 200: 5.0
    assert recent_gain(history, 0.75) == pytest.approx(4.5)  # up to 100: 1.0
    assert recent_gain(history, 0.8) is None  # nothing validated up to 80
    assert recent_gain(history[:1], 0.25) is None  # a first validation never stops a run
    assert recent_gain([[1, 2.0], [10, 3.0]], 0.25) == pytest.approx(1.0)
    lower = [[1, 9.0], [2, 5.0], [4, 4.8]]  # a loss: improvements go down
    assert recent_gain(lower, 0.25, higher_is_better=False) == pytest.approx(0.2)  # 5.0 → 4.8
    assert recent_gain(lower, 0.7, higher_is_better=False) == pytest.approx(4.2)  # 9.0 → 4.8
    assert recent_gain([], 0.25) is None


def test_recent_gain_is_none_without_an_early_validation():
    assert recent_gain([[900, 1.0], [1000, 2.0]], 0.05) == pytest.approx(1.0)  # up to 950
    assert recent_gain([[800, 1.0], [1000, 2.0]], 0.1) == pytest.approx(1.0)  # up to 900
    assert recent_gain([[800, 1.0], [1000, 2.0]], 0.25) is None  # up to 750: nothing


def test_validations_in_window_counts_the_last_fraction():
    history = [[150, 1.0], [300, 2.0], [450, 3.0], [600, 3.1]]
    assert validations_in_window(history, 0.25) == 1  # after 450
    assert validations_in_window(history, 0.5) == 2  # after 300
    assert validations_in_window(history, 0.99) == 4
    assert validations_in_window([], 0.25) == 0


@pytest.mark.parametrize(
    ("threshold", "fraction", "needed"),
    [(0.05, 0.25, 1), (0.02, 0.25, 1), (0.1, 0.5, 3), (0.1, 0.25, 2), (0.1, 0.25, 3)],
)
def test_training_stops_at_the_first_validation_under_the_threshold(
    tmp_path, threshold, fraction, needed
):
    cfg = config(tmp_path, "trainer.max_steps=12", f"trainer.converged_gain={threshold}",
                 f"trainer.converged_fraction={fraction}",
                 f"trainer.converged_validations={needed}")  # fmt: skip
    trainer = assemble_trainer(cfg, tmp_path / "run", observe=False)
    trainer.hooks.append(ScriptedHook(RISING))
    trainer.fit()
    stop = first_stop(RISING, threshold, fraction, needed)
    assert stop, "the script must converge by this rule within 12 updates"
    p = trainer.progress
    assert (p.step, p.stopped_early) == (stop, True)
    assert p.history == [[step, RISING[step]] for step in range(1, stop + 1)]


def test_too_few_validations_in_the_last_part_do_not_stop_a_run():
    """With the threshold 0.1 over the last quarter, the script is flat enough at update
    6 (gain 0.04 over 5..6) but the quarter holds one validation: three are needed."""
    assert first_stop(RISING, 0.1, 0.25, 1) < first_stop(RISING, 0.1, 0.25, 3)


def test_without_a_threshold_the_run_goes_to_max_steps(tmp_path):
    cfg = config(tmp_path, "trainer.max_steps=12")
    trainer = assemble_trainer(cfg, tmp_path / "run", observe=False)
    trainer.hooks.append(ScriptedHook(RISING))
    trainer.fit()
    assert (trainer.progress.step, trainer.progress.stopped_early) == (12, False)
    assert len(trainer.progress.history) == 12


def test_a_resume_continues_the_history(tmp_path):
    cfg = config(tmp_path, "trainer.max_steps=5")
    first = assemble_trainer(cfg, tmp_path / "run", observe=False)
    first.hooks.append(ScriptedHook(RISING))
    first.fit()
    cfg = config(tmp_path, "trainer.max_steps=12", "trainer.converged_gain=0.05",
                 "trainer.converged_validations=1")  # fmt: skip
    last = tmp_path / "run" / "checkpoints" / "last.pt"
    resumed = assemble_trainer(cfg, tmp_path / "run", resume_path=last, observe=False)
    assert resumed.progress.history == [[step, RISING[step]] for step in range(1, 6)]
    resumed.hooks.append(ScriptedHook(RISING))
    resumed.fit()
    whole = config(tmp_path, "trainer.max_steps=12", "trainer.converged_gain=0.05",
                   "trainer.converged_validations=1")  # fmt: skip
    straight = assemble_trainer(whole, tmp_path / "straight", observe=False)
    straight.hooks.append(ScriptedHook(RISING))
    straight.fit()
    assert resumed.progress.history == straight.progress.history
    assert resumed.progress.step == straight.progress.step < 12


@pytest.mark.parametrize(
    "history",
    [[[1, "x"]], [[1, 0.5, 2]], "1,0.5", [[2, 0.5], [1, 0.6]], [[1, float("nan")]], [[True, 0.5]]],
)
def test_a_checkpoints_malformed_history_is_refused(history):
    with pytest.raises(CheckpointError, match=r"progress\.history"):
        Progress.from_payload({"history": history})


def test_a_checkpoint_without_history_resumes_with_an_empty_one(tmp_path):
    cfg = config(tmp_path, "trainer.max_steps=3")
    first = assemble_trainer(cfg, tmp_path / "run", observe=False)
    first.hooks.append(ScriptedHook(RISING))
    first.fit()
    last = tmp_path / "run" / "checkpoints" / "last.pt"
    payload = torch.load(last, weights_only=True)
    del payload["progress"]["history"]
    torch.save(payload, last)
    resumed = assemble_trainer(config(tmp_path, "trainer.max_steps=4"), tmp_path / "run",
                               resume_path=last, observe=False)  # fmt: skip
    assert resumed.progress.history == [] and resumed.progress.step == 3


def test_a_run_stopped_by_the_rule_trains_on_under_a_stricter_one(tmp_path):
    """Resumed with more validations required in the window, a converged run goes on exactly
    as a run with that rule from the start; resumed with its own rule, it stays stopped."""
    loose = ["trainer.max_steps=12", "trainer.converged_gain=0.05",
             "trainer.converged_validations=1"]  # fmt: skip
    strict = [*loose[:2], "trainer.converged_validations=3"]
    first = assemble_trainer(config(tmp_path, *loose), tmp_path / "run", observe=False)
    first.hooks.append(ScriptedHook(RISING))
    first.fit()
    stopped_at = first.progress.step
    assert first.progress.stopped_early and stopped_at == first_stop(RISING, 0.05, 0.25, 1)
    last = tmp_path / "run" / "checkpoints" / "last.pt"

    same = assemble_trainer(config(tmp_path, *loose), tmp_path / "run", resume_path=last,
                            observe=False)  # fmt: skip
    assert same.progress.stopped_early and same.progress.step == stopped_at

    resumed = assemble_trainer(config(tmp_path, *strict), tmp_path / "run", resume_path=last,
                               observe=False)  # fmt: skip
    assert not resumed.progress.stopped_early
    resumed.hooks.append(ScriptedHook(RISING))
    resumed.fit()
    straight = assemble_trainer(config(tmp_path, *strict), tmp_path / "straight", observe=False)
    straight.hooks.append(ScriptedHook(RISING))
    straight.fit()
    assert resumed.progress.step == straight.progress.step > stopped_at
    assert resumed.progress.history == straight.progress.history
    assert resumed.progress.stopped_early == straight.progress.stopped_early


def test_a_stop_by_patience_stands_on_resume(tmp_path):
    falling = {step: 1.0 - 0.1 * step for step in range(1, 13)}
    cfg = config(tmp_path, "trainer.max_steps=12", "trainer.patience=2")
    first = assemble_trainer(cfg, tmp_path / "run", observe=False)
    first.hooks.append(ScriptedHook(falling))
    first.fit()
    assert first.progress.stopped_early and first.progress.step == 3
    last = tmp_path / "run" / "checkpoints" / "last.pt"
    resumed = assemble_trainer(cfg, tmp_path / "run", resume_path=last, observe=False)
    assert resumed.progress.stopped_early
