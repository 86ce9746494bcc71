"""`trainer.select_metric`: best.pt, early stopping (`trainer.patience`) and the plateau
schedule follow the selected metric in its direction; a hook's metric can be selected; a
resume keeps the choice (a checkpoint from before it resumes as BLEU's); a metric that is
unknown, or that nothing of the run reports, stops the run before it trains."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import TINY_TOY, compose_config

from seq2seq.checkpoint import CheckpointError, load_checkpoint
from seq2seq.config.build import ConfigError
from seq2seq.runs.assemble import assemble_trainer, check_startup
from seq2seq.training.progress import Progress

FAST = ["trainer.valid_every=1", "data.source.valid_size=16", "logging.tensorboard=false",
        "optim.lr=0.1"]  # fmt: skip  (lr 0.1: BLEU and TER go up and down within 8 updates)
PATIENCE = 3


def config(root: Path, *overrides: str):
    return compose_config(TINY_TOY + FAST + [f"data.root={root / 'data'}", *overrides])


def recording(trainer) -> dict[int, dict[str, float]]:
    """Every validation's metrics by step, as `validate_and_checkpoint` returns them."""
    seen: dict[int, dict[str, float]] = {}
    original = trainer.validate_and_checkpoint

    def record() -> dict[str, float]:
        seen[trainer.progress.step] = metrics = original()
        return metrics

    trainer.validate_and_checkpoint = record
    return seen


def expected(values: dict[int, float], lower_is_better: bool, patience: int) -> dict:
    """The best step and value, the validations without progress and the step training
    stops at, by the rule of JoeyNMT's early_stopping_metric (ties are no progress)."""
    best, best_step, bad, stalled = None, None, 0, 0
    for step, value in sorted(values.items()):
        better = best is None or (value < best if lower_is_better else value > best)
        if better:
            best, best_step, bad = value, step, 0
            continue
        bad, stalled = bad + 1, stalled + 1
        if patience and bad >= patience:
            return {"best": best, "step": best_step, "stalled": stalled, "stop": step, "early": True}
    return {"best": best, "step": best_step, "stalled": stalled, "stop": max(values), "early": False}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple]:
    """Eight updates, validated at each, selecting on TER (with the plateau schedule, its
    patience 0) and on BLEU: (trainer, the metrics of each validation)."""
    root = tmp_path_factory.mktemp("select")
    made = {}
    for name, extra in {
        "ter": ["trainer.select_metric=ter", "schedule=plateau", "schedule.patience=0"],
        "bleu": [],
    }.items():
        cfg = config(root, "trainer.max_steps=8", f"trainer.patience={PATIENCE}", *extra)
        trainer = assemble_trainer(cfg, root / name, observe=False)
        seen = recording(trainer)
        trainer.fit()
        made[name] = (trainer, seen)
    return made


@pytest.mark.parametrize(("name", "lower_is_better"), [("ter", True), ("bleu", False)])
def test_best_and_early_stopping_follow_the_metric_in_its_direction(runs, name, lower_is_better):
    trainer, seen = runs[name]
    want = expected({step: m[name] for step, m in seen.items()}, lower_is_better, PATIENCE)
    assert want["stalled"] > 0, "the run must have validations without progress to check"
    p = trainer.progress
    assert (p.best_metric, p.best_value, p.best_step) == (name, want["best"], want["step"])
    assert p.best_scores == seen[want["step"]]  # every metric of that validation
    assert p.step == want["stop"] and p.stopped_early == want["early"]
    best = load_checkpoint(trainer.run_dir / "checkpoints" / "best.pt")
    assert best["progress"]["step"] == want["step"]


def test_the_plateau_schedule_decays_on_each_validation_without_a_lower_ter(runs):
    trainer, seen = runs["ter"]
    want = expected({step: m["ter"] for step, m in seen.items()}, True, PATIENCE)
    assert trainer.schedule.lr == pytest.approx(0.1 * max(0.5 ** want["stalled"], 0.01))
    assert "ter" not in runs["bleu"][1][1]  # TER only computed where selected


def test_a_resume_must_select_on_the_same_metric(runs, tmp_path):
    trainer, _ = runs["ter"]
    last = trainer.run_dir / "checkpoints" / "last.pt"
    cfg = config(trainer.run_dir.parent, "trainer.max_steps=10", "schedule=plateau")
    with pytest.raises(CheckpointError, match=r"select_metric=bleu, but .* selected on ter"):
        assemble_trainer(cfg, tmp_path / "other", resume_path=last, observe=False)


def test_a_checkpoint_from_before_select_metric_resumes_selecting_bleu(runs, tmp_path):
    trainer, _ = runs["bleu"]
    payload = torch.load(trainer.run_dir / "checkpoints" / "last.pt", weights_only=True)
    progress = payload["progress"]
    old = {k: v for k, v in progress.items() if k not in ("best_metric", "best_value", "best_scores")}
    payload["progress"] = {**old, "best_bleu": progress["best_value"]}  # the old layout
    (tmp_path / "checkpoints").mkdir()
    torch.save(payload, tmp_path / "checkpoints" / "last.pt")
    cfg = config(trainer.run_dir.parent, "trainer.max_steps=10", f"trainer.patience={PATIENCE}")
    resumed = assemble_trainer(cfg, tmp_path, resume_path=tmp_path / "checkpoints" / "last.pt",
                               observe=False)  # fmt: skip
    p = resumed.progress
    assert (p.best_metric, p.best_value, p.best_step) == ("bleu", progress["best_value"],
                                                           progress["best_step"])  # fmt: skip
    assert p.bad_validations == progress["bad_validations"]
    assert Progress.from_payload({"best_bleu": -1.0}).best_value is None  # none validated yet


class ScriptedHook:
    """A hook reporting `alignment_accuracy` from a script (step → value)."""

    produces = ("alignment_accuracy",)

    def __init__(self, values: dict[int, float]):
        self.values = values

    def __call__(self, context) -> None:
        context.report("alignment_accuracy", self.values[context.step])


def test_a_hooks_metric_can_be_selected(tmp_path):
    values = {1: 0.2, 2: 0.5, 3: 0.4, 4: 0.5, 5: 0.6}
    cfg = config(tmp_path, "trainer.max_steps=5", "trainer.patience=2",
                 "trainer.select_metric=alignment_accuracy")  # fmt: skip
    trainer = assemble_trainer(cfg, tmp_path / "run", observe=False)
    trainer.hooks.append(ScriptedHook(values))
    trainer.fit()
    p = trainer.progress
    assert (p.best_value, p.best_step, p.step, p.stopped_early) == (0.5, 2, 4, True)
    assert p.best_scores["alignment_accuracy"] == 0.5 and "bleu" in p.best_scores


def test_a_hooks_metric_that_no_hook_reports_stops_before_training(tmp_path):
    cfg = config(tmp_path, "trainer.max_steps=2", "trainer.select_metric=aer")
    trainer = assemble_trainer(cfg, tmp_path / "run", observe=False)
    with pytest.raises(ConfigError, match=r"select_metric=aer: no validation hook of this run"):
        trainer.fit()
    assert trainer.progress.step == 0


def test_an_unknown_metric_fails_at_start_up_naming_the_key_and_the_metrics():
    with pytest.raises(ConfigError, match=r"trainer\.select_metric must be one of .*bleu.*") as error:
        check_startup(compose_config(TINY_TOY + ["trainer.select_metric=blue"]))
    assert "'blue'" in str(error.value) and "aer" in str(error.value)

