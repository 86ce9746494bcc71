"""The options of scores and regions: each component's dataclass, the one check of a node
against it (`seq2seq.option_rules`), the full node a name or a partial node stands for
(`component_node`), the Hydra groups `attention/score` and `attention/region`, and the
old layout (flat `attention.window`, ...) of checkpoints and run folders, migrated."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import pytest
import yaml
from helpers import compose_config
from omegaconf import OmegaConf

from seq2seq import registry
from seq2seq.config.build import ConfigError, build_model, plain
from seq2seq.config.stored import current_layout, validated_config
from seq2seq.config.value_checks import complete_option_nodes
from seq2seq.models.attention import attention_choice, component_name, component_node
from seq2seq.option_rules import OptionError, at_least, checked_options, greater_than
from seq2seq.study.reading import read_config
from seq2seq.visualise.heatmap import describe_run

TINY = ["encoder=gru", "decoder=gru", "model.embed_dim=8", "encoder.hidden_size=8",
        "decoder.hidden_size=8"]  # fmt: skip
ATTENTION = "seq2seq.models.attention.Attention"


# ---------------------------------------------------------------- the check of a node


class Colour(Enum):
    red = "red"
    blue = "blue"


@dataclass
class Example:
    count: int = field(default=2, metadata=at_least(1))
    rate: float | None = field(default=None, metadata=greater_than(0))
    colour: Colour = Colour.red


def check(values: dict) -> dict:
    return checked_options(Example, values, "attention.score", "score 'example'")


def test_a_valid_node_comes_back_complete_with_choices_by_name():
    assert check({}) == {"count": 2, "rate": None, "colour": "red"}
    assert check({"rate": 3, "colour": Colour.blue}) == {"count": 2, "rate": 3, "colour": "blue"}


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"count": 0}, "attention.score.count must be an integer of at least 1, got 0"),
        ({"count": 2.5}, "attention.score.count must be an integer of at least 1, got 2.5"),
        ({"count": True}, "attention.score.count must be an integer of at least 1, got True"),
        ({"count": None}, "attention.score.count must be an integer of at least 1, got None"),
        ({"rate": 0}, "attention.score.rate must be a finite number > 0 (or null), got 0"),
        ({"rate": float("inf")}, "attention.score.rate must be a finite number > 0 (or null)"),
        ({"rate": "fast"}, "attention.score.rate must be a finite number > 0 (or null), got 'fast'"),
        ({"colour": "green"}, "attention.score.colour must be one of red, blue, got 'green'"),
        ({"cuont": 3}, "attention.score.cuont: not an option of score 'example' (did you mean "
                       "count?); its options: count, rate, colour"),
    ],
)  # fmt: skip
def test_a_bad_value_or_key_is_named_with_what_is_allowed(values, message):
    with pytest.raises(OptionError) as failure:
        check(values)
    assert str(failure.value).startswith(message)


def test_a_component_without_options_refuses_every_key():
    with pytest.raises(
        OptionError, match="attention.region.window: not an option of region 'soft'"
    ):
        checked_options(None, {"window": 3}, "attention.region", "region 'soft'")
    assert checked_options(None, {}, "attention.region", "region 'soft'") == {}


# ---------------------------------------------------------------- names and nodes


def test_a_name_or_a_partial_node_becomes_the_full_node():
    assert component_node("region", "local") == {"name": "local", "window": 5, "mode": "predictive"}
    assert component_node("region", {"name": "local", "window": 2}) == {
        "name": "local", "window": 2, "mode": "predictive"}  # fmt: skip
    assert component_node("score", "cosine") == {"name": "cosine", "scale": None}
    assert component_node("score", {"name": "dot"}) == {"name": "dot"}


def test_an_unknown_name_or_a_node_without_one_lists_the_registered_names():
    with pytest.raises(OptionError) as failure:
        component_node("score", "bilinearr", "attention.score")
    assert all(name in str(failure.value) for name in registry.names("score"))
    with pytest.raises(OptionError, match=r"attention.score.name must name a registered score"):
        component_node("score", {"hidden_dim": 3}, "attention.score")
    with pytest.raises(OptionError, match=r"attention.region must be a registered region's name"):
        component_node("region", 3, "attention.region")


def test_every_registered_option_dataclass_is_checkable_and_complete_at_its_defaults():
    for group in ("score", "region"):
        for component in registry.components(group):
            node = component_node(group, component.name)
            assert component_node(group, node) == node  # a full node is its own completion


def test_the_chosen_names_come_from_strings_and_nodes_alike():
    node = {"_target_": ATTENTION, "score": "dot", "region": {"name": "local", "window": 2}}
    assert attention_choice(node) == ("dot", "local")
    assert attention_choice({"_target_": "seq2seq.models.attention.NoAttention"}) is None
    assert component_name({"name": "my_plugin_score"}) == "my_plugin_score"  # no lookup


# ---------------------------------------------------------------- Hydra's groups, start-up


def test_a_group_choice_replaces_the_node_with_that_components_defaults():
    cfg = compose_config(["attention=local", "attention/region=hard", "attention/score=cosine"])
    assert OmegaConf.to_container(cfg.attention.region, enum_to_str=True) == {
        "name": "hard", "gumbel_tau": 1.0, "estimator": "straight_through"
    }
    assert OmegaConf.to_container(cfg.attention.score) == {"name": "cosine", "scale": None}


def test_start_up_writes_the_full_nodes_into_the_config():
    cfg = compose_config(["attention=local", "attention.region=soft", "attention.score=dot"])
    assert cfg.attention.region == "soft" and cfg.attention.score == "dot"  # bare names
    complete_option_nodes(cfg)
    assert OmegaConf.to_container(cfg.attention.region) == {"name": "soft"}
    assert OmegaConf.to_container(cfg.attention.score) == {"name": "dot"}


def test_start_up_refuses_the_options_a_switched_name_leaves_behind():
    cfg = compose_config(["attention=local", "attention.region.name=soft"])
    with pytest.raises(ConfigError) as failure:
        complete_option_nodes(cfg)
    assert str(failure.value) == (
        "attention.region.window: not an option of region 'soft', which has none; "
        "`attention.region=soft` chooses region 'soft' with its defaults alone"
    )


# ---------------------------------------------------------------- the old layout


def old_attention(score: str, region: str, **flat) -> dict:
    """An attention section as checkpoints and config.yaml held it before: every option flat."""
    options = dict(hidden_dim=None, window=5, local_mode="predictive", gumbel_tau=1.0,
                   cosine_scale=None)  # fmt: skip
    return {"_target_": ATTENTION, "score": score, "region": region, "heads": 1,
            "head_dim": None, **options, **flat, "dropout": 0.0}  # fmt: skip


def checkpoint_config(attention: dict, preset: str = "additive") -> dict:
    composed = compose_config(TINY + [f"attention={preset}"])
    return {**OmegaConf.to_container(composed, resolve=True, enum_to_str=True),
            "attention": attention}  # fmt: skip


@pytest.mark.parametrize(
    ("flat", "score", "region"),
    [
        (dict(score="general", region="local", window=3, local_mode="monotonic", hidden_dim=7),
         {"name": "general"}, {"name": "local", "window": 3, "mode": "monotonic"}),
        (dict(score="additive", region="hard", hidden_dim=7, gumbel_tau=0.5, window=2),
         {"name": "additive", "hidden_dim": 7},
         {"name": "hard", "gumbel_tau": 0.5, "estimator": "straight_through"}),
        (dict(score="cosine", region="soft", cosine_scale=4.0, local_mode="monotonic"),
         {"name": "cosine", "scale": 4.0}, {"name": "soft"}),
    ],
)  # fmt: skip
def test_an_old_checkpoint_moves_the_options_its_choices_read_and_drops_the_rest(
    flat, score, region
):
    config = validated_config(checkpoint_config(old_attention(**flat)))
    attention = OmegaConf.to_container(config.attention)
    assert attention == {"_target_": ATTENTION, "score": score, "region": region, "heads": 1,
                         "head_dim": None, "dropout": 0.0}  # fmt: skip


def test_an_old_checkpoint_builds_the_model_of_the_same_choices_today():
    old = checkpoint_config(old_attention("general", "local", window=3, local_mode="monotonic"))
    new = compose_config(TINY + ["attention=local", "attention.region.window=3",
                                 "attention.region.mode=monotonic"])  # fmt: skip
    old_model, new_model = build_model(validated_config(old), 11, 11), build_model(new, 11, 11)
    shapes = {name: p.shape for name, p in new_model.state_dict().items()}
    assert {name: p.shape for name, p in old_model.state_dict().items()} == shapes
    assert old_model.decoder.attention.region.mode == "monotonic"
    assert current_layout(old)["attention"] == current_layout(
        OmegaConf.to_container(new, resolve=True, enum_to_str=True))["attention"]  # fmt: skip


def test_flat_keys_beside_a_node_are_refused_not_moved():
    attention = {**old_attention("general", "local"), "region": {"name": "local"}}
    with pytest.raises(ConfigError, match=r"^attention\.(hidden_dim|window|local_mode)"):
        validated_config(checkpoint_config(attention))


@pytest.mark.parametrize(
    ("region", "message"),
    [
        ({"name": "local", "windw": 3}, "attention.region.windw: not an option of region 'local'"),
        ({"name": "local", "window": 0}, "attention.region.window must be an integer of at least 1"),
        ({"name": "everywhere"}, "attention.region.name must be one of the registered regions"),
    ],
)  # fmt: skip
def test_a_checkpoints_option_node_is_checked_against_its_dataclass(region, message):
    attention = {"_target_": ATTENTION, "score": "general", "region": region, "heads": 1}
    with pytest.raises(ConfigError) as failure:
        validated_config(checkpoint_config(attention))
    assert str(failure.value).startswith(message)


def test_an_old_run_folder_is_described_with_its_options(tmp_path):
    config = checkpoint_config(old_attention("general", "local", window=3, local_mode="monotonic"))
    (tmp_path / ".hydra").mkdir()
    (tmp_path / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    assert describe_run(plain(read_config(tmp_path)))["region"] == "local-m D=3"
