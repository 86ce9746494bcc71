"""The component registry: one identity per component, and what each registered one owes.

What a score, region, attention class, encoder or decoder owes (a YAML preset, a FLOP
formula that torch's count confirms, constructor defaults equal to its schema's, and the
rest of the contract) is checked by the public contract suite, on every registered one
(`seq2seq.testing`, tests/test_contracts.py). Here: the registry itself, what a schedule
owes (a preset, no FLOPs, one set of defaults), and a score added the way the README's
"Adding an attention score" does, trained a step.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import fields
from enum import Enum

import pytest
import torch
import torch.nn.functional as F
from helpers import compose_config
from torch.utils.flop_counter import FlopCounterMode

from seq2seq import registry
from seq2seq.config.build import ConfigError, build_model, plain
from seq2seq.config.schema import register_configs
from seq2seq.config.value_checks import check_settings
from seq2seq.configs import preset_names
from seq2seq.models.attention import Attention, attention_choice, component_node
from seq2seq.models.attention.head_maps import HeadLinear
from seq2seq.models.attention.scores import DotProductScore, build_score
from seq2seq.models.costs import linear

# Constructor arguments that the model builder or the trainer passes, not the config.
PASSED_BY_THE_BUILDER = {"embed_dim", "attention", "query_dim", "key_dim", "value_dim",
                         "optimizer", "total_steps"}  # fmt: skip
TINY = ["model.embed_dim=8", "encoder.hidden_size=8", "decoder.hidden_size=8"]


def every(*groups: str) -> list[registry.Component]:
    return [component for group in groups for component in registry.components(group)]


def ids(components: list[registry.Component]) -> list[str]:
    return [f"{component.group}-{component.name}" for component in components]


def parametrize_components(*groups: str):
    components = every(*groups)
    return pytest.mark.parametrize("component", components, ids=ids(components))


@pytest.fixture(scope="module")
def presets() -> dict[str, list]:
    """The schedules' presets, composed, as plain dicts (the contract suite composes the
    other groups' presets)."""
    return {
        group: [
            plain(compose_config(TINY + [f"{group}={name}"])[group]) for name in preset_names(group)
        ]
        for group in ("schedule",)
    }


def default_options(component: registry.Component) -> dict:
    """A score's or region's options at their defaults (its node without the name)."""
    node = component_node(component.group, component.name)
    del node["name"]
    return node


def plain_default(value):
    return value.value if isinstance(value, Enum) else value


# ---------------------------------------------------------------- the registry itself


def test_a_lookup_names_the_group_and_the_known_names():
    with pytest.raises(registry.UnknownComponent, match=r"score must be one of \('dot'"):
        registry.get("score", "bilinearr")
    with pytest.raises(registry.UnknownComponent, match="group must be one of"):
        registry.names("scores")
    with pytest.raises(registry.UnknownComponent, match="encoder._target_ must be one of"):
        registry.of_node("encoder", {"_target_": "seq2seq.models.encoders.RNNEncoderX"})


def test_names_are_in_registration_order_and_nodes_find_their_component():
    assert registry.names("score")[:5] == ("dot", "scaled_dot", "general", "additive", "cosine")
    node = {"_target_": "seq2seq.models.attention.NoAttention"}
    assert registry.of_node("attention", node).name == "none"


def test_a_name_is_registered_once():
    with pytest.raises(ValueError, match="registered already"):
        registry.register("score", "dot")(DotProductScore)


# ---------------------------------------------------------------- a YAML preset each


@parametrize_components("schedule")
def test_every_schedule_has_a_preset_that_builds_it(component, presets):
    targets = {node["_target_"] for node in presets[component.group]}
    assert component.target in targets, f"no preset in configs/{component.group} builds it"


# ---------------------------------------------------------------- no FLOPs


@parametrize_components("schedule")
def test_schedules_compute_no_products(component):
    assert component.flops is None


# ---------------------------------------------------------------- one set of defaults


@parametrize_components("schedule")
def test_schedule_defaults_are_the_schema_defaults(component):
    parameters = inspect.signature(component.builder).parameters
    schema = {f.name: plain_default(f.default) for f in fields(component.schema)}
    del schema["_target_"]
    assert set(schema) <= set(parameters), "a schema key the constructor does not take"
    assert set(parameters) - set(schema) <= PASSED_BY_THE_BUILDER, (
        "a constructor argument no config sets"
    )
    assert {key: parameters[key].default for key in schema} == schema


@parametrize_components("score", "region")
def test_options_are_the_builders_keyword_arguments_with_the_same_defaults(component):
    parameters = inspect.signature(component.builder).parameters
    widths = 3 if component.group == "score" else 2  # (query, key,) heads | query, heads
    assert list(parameters)[widths:] == list(default_options(component)), (
        "the options dataclass's fields must be the builder's keyword arguments, in order"
    )
    defaults = {key: plain_default(parameters[key].default) for key in default_options(component)}
    assert defaults == default_options(component)


def test_a_misspelt_score_fails_at_start_up_naming_the_allowed_ones():
    cfg = compose_config(["attention.score=bilinearr"])  # a plugin's score may come later
    with pytest.raises(ConfigError) as failure:
        check_settings(cfg)
    message = str(failure.value)
    assert message.startswith("attention.score must be one of the registered scores")
    assert all(name in message for name in registry.names("score")), message


# ---------------------------------------------------------------- adding a score


SCALED_GENERAL_YAML = """\
# Scaled bilinear attention, s = qᵀ W k / √d (Luong et al. 2015, scaled as Vaswani et al. 2017).
defaults:
  - base_attention
  - _self_

score: scaled_general
"""


@pytest.fixture
def scaled_general():
    """The README's example score ("Adding an attention score"), registered for one test."""

    @registry.register("score", "scaled_general")
    class ScaledGeneralScore(DotProductScore):
        """`s(q, k) = qᵀ W k / √d`: Luong et al. 2015's "general" score, scaled like
        Vaswani et al. 2017 (eq. 1) so that wide heads do not saturate the softmax."""

        def __init__(self, query_width: int, key_width: int, heads: int):
            super().__init__()
            self.key_map = HeadLinear(heads, key_width, query_width, bias=False)  # W
            self.scale = 1.0 / math.sqrt(query_width)

        def project_keys(self, keys: torch.Tensor) -> torch.Tensor:
            return self.key_map(
                keys
            )  # W k, once per sentence: (batch, heads, src_len, query_width)

        @staticmethod
        def flops(rows: int, queries: int, keys: int, width: int, **options) -> int:
            """W k for every key, then qᵀ (W k) for every pair."""
            return linear(rows * keys, width, width) + 2 * rows * queries * keys * width

    yield ScaledGeneralScore
    registry.unregister("score", "scaled_general")
    register_configs()  # the schemas without it again


def test_a_new_score_builds_and_runs_through_attention(scaled_general):
    assert isinstance(build_score("scaled_general", 4, 6, 2), scaled_general)
    torch.manual_seed(0)
    attention = Attention(8, 6, 8, score="scaled_general")
    query, keys, values = torch.randn(2, 3, 8), torch.randn(2, 5, 6), torch.randn(2, 5, 8)
    context, weights = attention(query, keys, values)
    bilinear = keys @ attention.score.key_map.weight[0]  # W k: (2, 5, 8)
    expected = torch.softmax(query @ bilinear.transpose(1, 2) / math.sqrt(8), dim=-1)
    torch.testing.assert_close(weights[:, 0], expected)
    fused, _ = attention(query, keys, values, need_weights=False)  # a dot-product score
    torch.testing.assert_close(fused, context)


def test_a_new_score_counts_its_flops_as_torch_does(scaled_general):
    attention = Attention(8, 8, 8, score="scaled_general")
    inputs = torch.randn(2, 3, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 8)
    with FlopCounterMode(display=False) as counter:
        attention(*inputs)
    node = {"score": "scaled_general", "region": "soft", "heads": 1, "head_dim": None}
    assert Attention.flops(node, 2, 3, 5, 8) == counter.get_total_flops()


def test_a_new_score_with_its_yaml_composes_and_trains_a_step(scaled_general, tmp_path):
    (tmp_path / "attention").mkdir()
    (tmp_path / "attention" / "scaled_general.yaml").write_text(SCALED_GENERAL_YAML)
    overrides = ["attention=scaled_general", "encoder=gru", "decoder=gru"]
    cfg = compose_config(TINY + overrides + [f"hydra.searchpath=[file://{tmp_path}]"])
    assert attention_choice(cfg.attention) == ("scaled_general", "soft")
    torch.manual_seed(0)
    model = build_model(cfg, 11, 11)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    src, tgt = torch.randint(4, 11, (2, 5)), torch.randint(4, 11, (2, 4))
    logits, _ = model(src, torch.ones(2, 5, dtype=torch.bool), tgt)
    F.cross_entropy(logits.reshape(-1, 11), tgt.reshape(-1)).backward()
    before = model.decoder.attention.score.key_map.weight.detach().clone()
    optimizer.step()
    assert not torch.equal(model.decoder.attention.score.key_map.weight, before)
