"""Hard attention trained by REINFORCE: the estimator is unbiased, the forward pass is an exact
one-hot sample, the trainer runs it, saves and resumes its baseline, and its option is checked."""

from __future__ import annotations

import json

import pytest
import torch
from helpers import TINY_TOY, compose_config
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from seq2seq.checkpoint import load_checkpoint
from seq2seq.config.build import ConfigError
from seq2seq.config.value_checks import check_settings
from seq2seq.models.attention.masks import visible_keys
from seq2seq.models.attention.regions import HardRegion, masked_log_softmax, one_hot_argmax
from seq2seq.runs.assemble import train_and_test
from seq2seq.search.translator import Translator
from seq2seq.testing import check_component
from seq2seq.training.reinforce import recording, reinforce_regions, reinforce_surrogate

REINFORCE = ["attention=hard", "attention.region.estimator=reinforce"]
SAMPLES = 40_000


def reinforce_region() -> HardRegion:
    return HardRegion(3, 1, estimator="reinforce").train()


def sampled(region: HardRegion, scores: torch.Tensor, visible: torch.Tensor):
    """(weights, per-sentence log π) of one recorded training forward pass."""
    positions = torch.arange(scores.size(2)).unsqueeze(0)  # (1, tgt_len)
    lengths = visible[:, 0, 0].sum(-1).expand(scores.size(0))
    with recording(region) as choices:
        weights = region(scores, visible, None, positions, lengths)
    return weights, choices.log_probs(region)


# ---------------------------------------------------------------- the estimator


THETA = [0.5, -0.3, 1.0, 0.0]  # learnable scores of one query over 4 keys
VALUES = [1.0, 2.0, -1.0, 0.5]  # the fixed value of each key


def reward_of(value: torch.Tensor) -> torch.Tensor:
    return (value - 0.3).square()


def exact_gradient() -> torch.Tensor:
    """∇_θ E_k[R(v_k)] = Σ_k ∇p_k R(v_k), by enumerating the keys."""
    theta = torch.tensor(THETA, requires_grad=True)
    expected = (torch.softmax(theta, dim=0) * reward_of(torch.tensor(VALUES))).sum()
    return torch.autograd.grad(expected, theta)[0]


def reinforce_estimates(baseline: float) -> torch.Tensor:
    """SAMPLES independent REINFORCE estimates of ∇_θ E[R], (SAMPLES, 4): one sampled key
    per sentence through the real region and surrogate."""
    torch.manual_seed(0)
    region = reinforce_region()
    region.update_baseline(torch.tensor(baseline))  # the first update sets b
    theta = torch.tensor(THETA, requires_grad=True)
    scores = theta.expand(SAMPLES, 1, 1, 4)  # (sentences, heads, tgt_len, src_len)
    scores.retain_grad()
    weights, log_probs = sampled(region, scores, torch.ones(1, 1, 1, 4, dtype=torch.bool))
    value = weights[:, 0, 0] @ torch.tensor(VALUES)  # (sentences,) the chosen key's value
    reinforce_surrogate(log_probs, reward_of(value), region.baseline_value()).backward()
    assert torch.allclose(theta.grad, scores.grad.sum(dim=(0, 1, 2)), atol=1e-3)
    return -scores.grad[:, 0, 0]  # the surrogate is minimised: −its gradient estimates ∇E[R]


@pytest.mark.parametrize("baseline", [0.0, 1.2])
def test_the_average_reinforce_gradient_is_the_exact_one(baseline):
    estimates = reinforce_estimates(baseline)
    mean, error = estimates.mean(0), estimates.std(0) / SAMPLES**0.5
    gap = (mean - exact_gradient()).abs()
    assert (gap <= 4 * error).all(), (mean, exact_gradient(), error)


def test_a_baseline_near_the_mean_reward_lowers_the_variance():
    probabilities = torch.softmax(torch.tensor(THETA), 0)
    expected = float((probabilities * reward_of(torch.tensor(VALUES))).sum())
    assert reinforce_estimates(expected).var(0).sum() < reinforce_estimates(0.0).var(0).sum()


def test_the_baseline_starts_at_the_first_mean_then_moves_by_the_average():
    region = reinforce_region()
    assert torch.isnan(region.baseline) and region.baseline_value() == 0.0
    region.update_baseline(torch.tensor(-2.0))
    assert region.baseline == -2.0
    region.update_baseline(torch.tensor(-1.0))
    assert region.baseline == pytest.approx(0.9 * -2.0 + 0.1 * -1.0)
    region.update_baseline(torch.tensor(float("nan")))  # ignored
    assert region.baseline == pytest.approx(-1.9)


# ---------------------------------------------------------------- the forward pass


def padded_case():
    torch.manual_seed(3)
    scores = (3 * torch.randn(3, 2, 5, 7)).requires_grad_()  # (batch, heads, tgt, src)
    mask = torch.arange(7) < torch.tensor([7, 4, 0]).unsqueeze(1)  # real keys: 7, 4, none
    return scores, visible_keys(mask, False, 5, 7)


def test_training_weights_are_exact_one_hots_of_visible_keys_with_no_gradient():
    scores, visible = padded_case()
    weights, log_probs = sampled(reinforce_region(), scores, visible)
    assert not weights.requires_grad  # no path from the weights to the scores
    assert set(weights.unique().tolist()) <= {0.0, 1.0}
    assert (weights.sum(-1)[:2] == 1).all() and (weights[2] == 0).all()  # the empty row: 0
    assert (weights.masked_fill(visible, 0) == 0).all()
    chosen = (weights * masked_log_softmax(scores, visible)).sum(dim=(1, 2, 3))
    assert torch.allclose(log_probs, chosen) and log_probs[2] == 0
    log_probs.sum().backward()
    assert torch.isfinite(scores.grad).all() and (scores.grad[2] == 0).all()


def test_padded_keys_are_never_sampled_and_evaluation_takes_the_argmax():
    scores, visible = padded_case()
    region = reinforce_region()
    draws = torch.stack([sampled(region, scores, visible)[0] for _ in range(200)])
    assert (draws.masked_fill(visible, 0) == 0).all()
    assert (draws[:, 1].sum(dim=(0, 1, 2))[:4] > 0).all()  # every real key drawn sometime
    assert torch.equal(region.eval()(scores, visible, None, None, None),
                       one_hot_argmax(scores, visible))  # fmt: skip


def test_the_region_keeps_its_contract_with_reinforce():
    results = check_component(
        "region", "hard", options={"estimator": "reinforce"},
        checks=("masking", "incremental", "gradients", "flops"),
    )  # fmt: skip
    assert all(result.passed for result in results), [r.detail for r in results]


# ---------------------------------------------------------------- through the trainer


def toy_run(tmp_path, name: str, *overrides: str) -> dict:
    cfg = compose_config(
        TINY_TOY + REINFORCE + [f"data.root={tmp_path / 'data'}", "trainer.valid_every=2",
                                "trainer.test_search.beam_size=1", *overrides]
    )  # fmt: skip
    return train_and_test(cfg, tmp_path / name, outputs_root=tmp_path)


def train_losses(run_dir) -> list[float]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["train/loss"] for line in lines]


def test_toy_training_runs_and_resumes_with_its_baseline(tmp_path):
    toy_run(tmp_path, "straight", "trainer.max_steps=4")
    toy_run(tmp_path, "halves", "trainer.max_steps=2")
    half = load_checkpoint(tmp_path / "halves" / "checkpoints" / "last.pt")
    saved = half["model"]["decoder.attention.region.baseline"]
    assert torch.isfinite(saved) and -10 < saved < 0  # a mean log-likelihood
    toy_run(tmp_path, "resume", "trainer.max_steps=4", f"trainer.resume={tmp_path / 'halves'}")
    straight, resumed = tmp_path / "straight", tmp_path / "halves"
    assert train_losses(resumed) == pytest.approx(train_losses(straight), rel=1e-5)
    final = [load_checkpoint(run / "checkpoints" / "last.pt")["model"]
             for run in (straight, resumed)]  # fmt: skip
    key = "decoder.attention.region.baseline"
    assert final[0][key] == pytest.approx(float(final[1][key]), rel=1e-5)
    logged = json.loads((straight / "metrics.jsonl").read_text().splitlines()[-1])
    assert logged["train/reinforce_baseline"] == pytest.approx(float(final[0][key]), rel=1e-5)
    translator = Translator.load(straight / "checkpoints" / "best.pt")  # shapes checked
    assert len(reinforce_regions(translator.model)) == 1


def test_the_straight_through_model_has_no_baseline():
    cfg = compose_config(TINY_TOY + ["attention=hard"])
    assert OmegaConf.select(cfg, "attention.region.estimator").name == "straight_through"
    assert "baseline" not in dict(HardRegion(3, 1).named_buffers())


# ---------------------------------------------------------------- the option


def test_a_bad_estimator_is_refused_naming_its_key():
    with pytest.raises(ConfigCompositionException) as composed:
        compose_config(TINY_TOY + ["attention=hard", "attention.region.estimator=sampled"])
    assert "attention.region.estimator" in str(composed.value.__cause__)
    config = OmegaConf.to_container(compose_config(TINY_TOY + REINFORCE), enum_to_str=True)
    config["attention"]["region"]["estimator"] = "sampled"  # as a checkpoint could hold it
    wrong = r"attention\.region\.estimator must be one of straight_through, reinforce, got 'sampled'"
    with pytest.raises(ConfigError, match=wrong):
        check_settings(config)


def test_compile_is_refused_with_reinforce():
    cfg = compose_config(TINY_TOY + REINFORCE + ["trainer.compile=true"])
    with pytest.raises(ConfigError, match=r"attention\.region\.estimator=reinforce .* "
                                          r"trainer\.compile=true"):  # fmt: skip
        check_settings(cfg)
