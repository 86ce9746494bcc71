"""The moving average of the weights (`trainer.ema_decay`): its formula against a loop, what
validation and the checkpoints hold, a resume that keeps it, and its refusals."""

from __future__ import annotations

import pytest
import torch
from helpers import TINY_TOY, compose_config
from test_train import _train

from seq2seq.checkpoint import load_checkpoint
from seq2seq.config.build import ConfigError
from seq2seq.config.value_checks import check_settings
from seq2seq.training.averaging import MovingAverage


def loop_average(history: list[torch.Tensor], decay: float) -> torch.Tensor:
    """θ̄ after each update, written out one update at a time (independent of the class)."""
    average = history[0].clone()
    for t, weights in enumerate(history, start=1):
        d = min(decay, (1 + t) / (10 + t))
        average = d * average + (1 - d) * weights
    return average


def test_the_average_follows_its_formula_with_the_warm_up():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    ema, history = MovingAverage(0.9), []
    for _ in range(30):
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(torch.randn_like(parameter))
        history.append(model.weight.detach().clone())
        ema.update(model)
    assert ema.updates == 30
    assert torch.allclose(ema.weights["weight"], loop_average(history, 0.9), atol=1e-6)


def test_applied_swaps_the_average_in_and_the_own_weights_back():
    model = torch.nn.Linear(2, 2)
    ema = MovingAverage(0.5)
    ema.update(model)
    own = model.weight.detach().clone()
    ema.weights["weight"].fill_(7.0)
    with ema.applied(model):
        assert torch.equal(model.weight, torch.full((2, 2), 7.0))
    assert torch.equal(model.weight, own)


def test_off_keeps_nothing_and_changes_nothing():
    model = torch.nn.Linear(2, 2)
    ema = MovingAverage(0.0)
    ema.update(model)
    assert not ema.enabled and ema.weights == {}
    with ema.applied(model):
        pass


def test_a_run_validates_and_keeps_the_average_and_resumes_with_it(tmp_path):
    common = ["trainer.valid_every=2", "trainer.test_search.beam_size=1",
              "trainer.ema_decay=0.8"]  # fmt: skip
    straight, _ = _train(tmp_path, "straight", common + ["trainer.max_steps=6"])
    _train(tmp_path, "halves", common + ["trainer.max_steps=4"])
    resumed, _ = _train(
        tmp_path, "resume", common + ["trainer.max_steps=6", f"trainer.resume={tmp_path / 'halves'}"]
    )
    last = load_checkpoint(tmp_path / "straight" / "checkpoints" / "last.pt")
    again = load_checkpoint(tmp_path / "halves" / "checkpoints" / "last.pt")
    assert last["ema"]["updates"] == again["ema"]["updates"] == 6
    for name, weight in last["ema"]["weights"].items():
        assert torch.allclose(again["ema"]["weights"][name], weight, atol=1e-6), name
        # the training weights go on apart from the average
    assert any(not torch.equal(last["model"][n], w) for n, w in last["ema"]["weights"].items())
    best = load_checkpoint(tmp_path / "straight" / "checkpoints" / "best.pt")
    assert "ema" not in best  # best.pt holds the validated average as its weights
    if best["progress"]["best_step"] == 6:
        for name, weight in last["ema"]["weights"].items():
            assert torch.equal(best["model"][name], weight), name
    assert resumed["valid_best_scores"] == pytest.approx(straight["valid_best_scores"])
    assert resumed["tested"]["ema_decay"] == 0.8


def test_without_the_average_last_pt_has_no_entry(tmp_path):
    _train(tmp_path, "plain", ["trainer.max_steps=2", "trainer.valid_every=2",
                               "trainer.test_search.beam_size=1"])  # fmt: skip
    last = load_checkpoint(tmp_path / "plain" / "checkpoints" / "last.pt")
    assert "ema" not in last


@pytest.mark.parametrize("decay", [1.0, -0.1])
def test_a_decay_outside_zero_to_one_is_refused_naming_the_key(tmp_path, decay):
    cfg = compose_config(TINY_TOY + [f"data.root={tmp_path}", f"trainer.ema_decay={decay}"])
    with pytest.raises(ConfigError, match="trainer.ema_decay"):
        check_settings(cfg)
