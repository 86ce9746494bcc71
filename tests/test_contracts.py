"""Every registered component through the public contract suite (`seq2seq.testing`), and
the suite against components broken on purpose: each must fail, naming the right check.

The cases come from the registry (`contract_cases`, through the suite's pytest plugin), so
a new built-in is checked with no list to edit. The broken components are registered by
fixtures, after collection, so they never join those cases.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from helpers import dot_score_plugin, plugins_unloaded_after, run_main

from seq2seq import registry
from seq2seq.cli import check as check_cli
from seq2seq.config.schema import register_configs
from seq2seq.models.attention.regions import Region
from seq2seq.models.attention.scores import DotProductScore, GeneralScore
from seq2seq.models.costs import linear
from seq2seq.testing import ContractFailure, assert_component, check_component

pytest_plugins = ["seq2seq.testing.pytest_plugin"]


def test_every_registered_component_keeps_its_contract(contract_case, contract_runner):
    contract_runner.require(contract_case)


# ---------------------------------------------------------------- broken on purpose


@pytest.fixture
def throwaway():
    """Register classes for one test (`throwaway(group, name, cls, **how)`), then remove them."""
    registered = []

    def register(group: str, name: str, cls: type, **how):
        registry.register(group, name, **how)(cls)
        registered.append((group, name))
        return cls

    yield register
    for group, name in registered:
        registry.unregister(group, name)
    register_configs()


def results_by_check(runner, group: str, name: str, *checks: str) -> dict:
    return {check: runner.run(group, name, check) for check in checks}


def test_local_attention_keeps_its_contract_in_its_other_mode(contract_runner):
    """Options are checked too: local-m (`mode: monotonic`) with a window of 1."""
    options = {"mode": "monotonic", "window": 1}
    for check in ("shapes", "masking", "incremental", "gradients", "flops"):
        result = contract_runner.run("region", "local", check, options)
        assert result.passed, result.detail


class LeakyDotScore(DotProductScore):
    """`qᵀk / max |k|`: keys scaled by their largest entry in the sentence, padding included."""

    def __init__(self, query_width: int, key_width: int, heads: int):
        super().__init__()
        if query_width != key_width:
            raise ValueError("one width for queries and keys")

    def project_keys(self, keys: torch.Tensor) -> torch.Tensor:
        return keys / keys.abs().amax(dim=(2, 3), keepdim=True)  # (batch, heads, src_len, width)


def test_a_score_that_mixes_in_padded_keys_fails_masking_only(throwaway, contract_runner):
    throwaway("score", "leaky_dot", LeakyDotScore)
    results = results_by_check(contract_runner, "score", "leaky_dot", "shapes", "masking", "flops")
    assert results["shapes"].passed and results["flops"].passed
    assert not results["masking"].passed
    assert "padded keys hold changes the weights of real keys" in results["masking"].detail


class UnmaskedRegion(Region):
    """A softmax over every key, padding included."""

    def forward(self, scores, visible, query, query_positions, lengths):
        return torch.softmax(scores, dim=-1)


def test_a_region_that_ignores_the_mask_fails_masking_named(throwaway):
    throwaway("region", "unmasked", UnmaskedRegion)
    with pytest.raises(
        ContractFailure,
        match=r"region 'unmasked' fails the 'masking' check: .*padded keys get weight",
    ):
        assert_component("region", "unmasked", checks=("shapes", "masking"))  # fmt: skip


class MiscountedScore(GeneralScore):
    """The built-in general score `qᵀ(W k)` with a formula that forgets the products of `W k`."""

    @staticmethod
    def flops(rows: int, queries: int, keys: int, width: int) -> int:
        return 2 * rows * queries * keys * width  # missing: linear(rows * keys, width, width)


def test_a_wrong_flop_formula_fails_flops_with_both_counts(throwaway, contract_runner):
    throwaway("score", "miscounted", MiscountedScore)
    result = contract_runner.run("score", "miscounted", "flops")
    missing = linear(3 * 2 * 7, 6, 6)  # W k: batch 3 x 2 heads x 7 keys, width 6
    formula, counted = 2 * 3 * 2 * 5 * 7 * 6, 2 * 3 * 2 * 5 * 7 * 6 + missing
    assert not result.passed
    assert f"the formula gives {formula:,} forward FLOPs, torch counts {counted:,}" in result.detail


@dataclass
class WidthOptions:
    hidden: int = 3


class DefaultsApartScore(LeakyDotScore):
    def __init__(self, query_width: int, key_width: int, heads: int, hidden: int = 4):
        super().__init__(query_width, key_width, heads)


def preset(folder, group: str, name: str, text: str):
    (folder / group).mkdir(parents=True, exist_ok=True)
    (folder / group / f"{name}.yaml").write_text(text)
    return folder


def test_a_component_without_a_preset_fails_config_naming_the_file_to_write(
    throwaway, contract_runner
):
    throwaway("score", "unpreset", LeakyDotScore)
    result = contract_runner.run("score", "unpreset", "config")
    assert not result.passed
    assert "no preset chooses it: write attention/unpreset.yaml" in result.detail


def test_class_defaults_apart_from_the_schema_fail_config(throwaway, tmp_path):
    throwaway("score", "defaults_apart", DefaultsApartScore, options=WidthOptions)
    yaml = (
        "defaults:\n  - base_attention\n  - score: defaults_apart\n  - region: soft\n  - _self_\n"
    )
    folder = preset(tmp_path, "attention", "defaults_apart", yaml)
    (result,) = check_component("score", "defaults_apart", checks=["config"], config_dir=folder)
    assert not result.passed
    assert "DefaultsApartScore(hidden=4) but its schema's default is 3" in result.detail


def test_a_preset_that_takes_a_value_from_another_fails_config(tmp_path):
    """The score (and `heads: 4`) come from multihead.yaml, which the user's preset pulls in
    unseen: the preset writes only `dropout`."""
    yaml = "defaults:\n  - multihead\n  - _self_\n\ndropout: 0.1\n"
    folder = preset(tmp_path, "attention", "sneaky", yaml)
    (result,) = check_component("attention", "attention", checks=["config"], config_dir=folder)
    assert not result.passed
    assert (
        f"{folder / 'attention' / 'sneaky.yaml'} gives score = {{'name': 'scaled_dot'}}"
        in result.detail
    )
    assert result.detail.endswith("but does not write it")


# ---------------------------------------------------------------- a plugin, by command line

HALVED_DOT = dot_score_plugin("halved_dot", 0.5)  # s(q, k) = qᵀk / 2
HALVED_DOT_YAML = """\
# s = qᵀk / 2
defaults:
  - base_attention
  - score: halved_dot
  - region: soft
  - _self_
"""


@pytest.fixture
def lab(tmp_path):
    """A user's folder: the plugin score and its preset, unloaded after the test."""
    (tmp_path / "scores.py").write_text(HALVED_DOT)
    (tmp_path / "configs" / "attention").mkdir(parents=True)
    (tmp_path / "configs" / "attention" / "halved_dot.yaml").write_text(HALVED_DOT_YAML)
    with plugins_unloaded_after():
        yield tmp_path
    register_configs()


def test_seq2seq_check_passes_a_plugin_score_with_its_preset(lab, capsys):
    arguments = ["--plugins", lab / "scores.py", "--config-dir", lab / "configs",
                 "--check", "config", "--check", "masking"]  # fmt: skip
    code, out, _ = run_main(check_cli.main, capsys, "score", "halved_dot", *arguments)
    assert code == 0, out
    assert "plugin" in out.splitlines()[0] and "2 of 2 checks passed" in out
    assert "attention/halved_dot.yaml compose" in out


def test_seq2seq_check_fails_a_plugin_without_its_preset_and_names_the_check(lab, capsys):
    code, out, _ = run_main(check_cli.main, capsys, "score", "halved_dot", "--plugins",
                            lab / "scores.py", "--check", "config")  # fmt: skip
    assert code == 1
    assert "config  FAILED" in out and "no preset chooses it" in out


def test_seq2seq_check_refuses_an_unknown_component_in_one_line(capsys):
    code, _, err = run_main(check_cli.main, capsys, "score", "bilinearr", "--quick")
    assert code == 2 and err.count("\n") == 1 and "score must be one of" in err


@pytest.mark.parametrize(("declared", "message"), [
    (frozenset({"hidden"}), "a step changed source_state entry 'hidden'"),
    (frozenset({"cache"}), "source_state names \\['cache'\\], which its state lacks"),
])  # fmt: skip
def test_a_wrong_source_state_declaration_fails_the_incremental_check(declared, message):
    from seq2seq.models.attention import Attention
    from seq2seq.models.decoders import RNNDecoder
    from seq2seq.testing.incremental import source_entries_unchanged
    from seq2seq.testing.results import Violation

    torch.manual_seed(0)
    decoder = RNNDecoder(8, attention=lambda **widths: Attention(**widths), hidden_size=8)
    decoder.source_state = declared
    memory, mask = torch.randn(2, 3, 8), torch.ones(2, 3, dtype=torch.bool)
    state = decoder.init_state(memory, mask, torch.randn(2, 8))
    with pytest.raises(Violation, match=message):
        source_entries_unchanged(decoder, state, [torch.randn(2, 1, 8)] * 2, "decoder")
