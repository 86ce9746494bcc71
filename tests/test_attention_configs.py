"""The attention presets in configs/attention/ compose to every option of their schema
(they state only what differs from its defaults), their score and region to full nodes
(the config groups `attention/score` and `attention/region`), and build what they say."""

from __future__ import annotations

import inspect

import pytest
from helpers import compose_config
from hydra.utils import instantiate
from omegaconf import OmegaConf

from seq2seq import registry
from seq2seq.config.build import plain
from seq2seq.configs import config_files
from seq2seq.models.attention import Attention, NoAttention, component_node

# The registered attention component each preset is checked against (`base_<name>`).
PRESET_COMPONENTS = {
    entry.name.removesuffix(".yaml"): OmegaConf.create(entry.read_text()).defaults[0]
    for entry in config_files("attention")
}
SCORED = sorted(preset for preset, base in PRESET_COMPONENTS.items() if base == "base_attention")
ATTENTION_KEYS = {
    name
    for name, parameter in inspect.signature(Attention).parameters.items()
    if parameter.kind is inspect.Parameter.KEYWORD_ONLY
}
LOCAL_P = {"name": "local", "window": 5, "mode": "predictive"}
EXPECTED = {
    "local": dict(score={"name": "general"}, region=LOCAL_P, heads=1),
    "hard": dict(score={"name": "additive", "hidden_dim": None},
                 region={"name": "hard", "gumbel_tau": 1.0, "estimator": "straight_through"},
                 heads=1),
    "sparsemax": dict(score={"name": "additive", "hidden_dim": None},
                      region={"name": "sparsemax"}, heads=1),
    "entmax15": dict(score={"name": "additive", "hidden_dim": None},
                     region={"name": "entmax15"}, heads=1),
    "multihead": dict(score={"name": "scaled_dot"}, region={"name": "soft"}, heads=4),
}  # fmt: skip


def build(preset: str, *overrides: str):
    """Compose the preset as seq2seq-train does (schema checked), then build it."""
    cfg = compose_config([f"attention={preset}", *overrides])
    config = plain(cfg.attention)
    return config, instantiate(config, query_dim=8, key_dim=8, value_dim=8)


@pytest.mark.parametrize("preset", sorted(PRESET_COMPONENTS))
def test_every_preset_builds_the_class_of_its_schema(preset):
    config, built = build(preset)
    component = registry.of_node("attention", config)
    assert PRESET_COMPONENTS[preset] == f"base_{component.name}"
    assert type(built) is component.builder


@pytest.mark.parametrize("preset", SCORED)
def test_scored_presets_have_every_attention_key_and_accept_overrides(preset):
    overrides = (
        "attention/region=local",
        "attention.region.window=3",
        "attention.region.mode=monotonic",
    )
    config, attention = build(preset, *overrides)
    assert set(config) - {"_target_"} == ATTENTION_KEYS
    assert config["region"] == {"name": "local", "window": 3, "mode": "monotonic"}
    assert isinstance(attention, Attention) and attention.region.window == 3
    assert attention.region.mode == "monotonic"
    assert attention.score_name == EXPECTED.get(preset, {}).get("score", {"name": preset})["name"]


@pytest.mark.parametrize("preset", SCORED)
def test_presets_compose_full_option_nodes_at_their_dataclass_defaults(preset):
    config, _ = build(preset)
    for group in ("score", "region"):
        assert config[group] == component_node(group, config[group]["name"])


@pytest.mark.parametrize("preset", sorted(EXPECTED))
def test_named_presets_hold_the_documented_choices(preset):
    config, attention = build(preset)
    assert {key: config[key] for key in EXPECTED[preset]} == EXPECTED[preset]
    assert attention.heads == EXPECTED[preset]["heads"]


def test_none_preset_builds_no_attention():
    config, no_attention = build("none")
    assert set(config) == {"_target_", "context"} and isinstance(no_attention, NoAttention)
    assert config["context"] == "mean" and no_attention.pooling is None  # the plain mean
