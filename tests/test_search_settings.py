"""`SearchSettings`: the one definition behind the Hydra schema and the CLI options."""

from __future__ import annotations

import argparse
from dataclasses import asdict, fields
from typing import get_type_hints

import pytest
from helpers import compose_config
from omegaconf import OmegaConf
from omegaconf.errors import ConfigKeyError, ValidationError

from seq2seq.cli import common, evaluate, translate
from seq2seq.config.build import ConfigError
from seq2seq.config.search_settings import SearchSettings, SearchSettingsError
from seq2seq.config.value_checks import check_test_search

PUBLISHED = {  # the test-time search of the published BLEU figures (BENCHMARKS.md)
    "beam_size": 5,
    "length_penalty": 1.0,
    "max_len_a": 1.5,
    "max_len_b": 10,
    "batch_size": 128,
    "n_best": 1,
}
PARSERS = {"translate": translate.build_parser, "evaluate": evaluate.build_parser}
OMITTED = {"translate": set(), "evaluate": {"n_best"}}  # evaluate scores the best hypothesis


def search_options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """The parser's options named like a `SearchSettings` field, by field name."""
    names = {setting.name for setting in fields(SearchSettings)}
    return {action.dest: action for action in parser._actions if action.dest in names}


def test_the_defaults_are_the_published_test_search():
    assert asdict(SearchSettings()) == PUBLISHED


def test_every_field_has_help_and_a_type_omegaconf_supports():
    types = get_type_hints(SearchSettings)
    for setting in fields(SearchSettings):
        assert setting.metadata["help"], setting.name
        assert types[setting.name] in (int, float), setting.name


@pytest.mark.parametrize("program", list(PARSERS))
def test_the_cli_options_are_the_fields_with_their_defaults(program):
    options = search_options(PARSERS[program]())
    types = get_type_hints(SearchSettings)
    expected = [s.name for s in fields(SearchSettings) if s.name not in OMITTED[program]]
    assert list(options) == expected
    for name, action in options.items():
        assert action.option_strings == ["--" + name.replace("_", "-")]
        assert action.default == getattr(SearchSettings(), name)
        assert action.type is types[name]


@pytest.mark.parametrize("program", list(PARSERS))
def test_settings_from_the_default_options_are_the_default_settings(program):
    args = PARSERS[program]().parse_args(["model.pt"])
    assert common.settings_from(args) == SearchSettings()


def test_settings_from_the_options_given():
    argv = [
        "model.pt",
        "--beam-size",
        "3",
        "--n-best",
        "2",
        "--max-len-a",
        "0.5",
        "--batch-size",
        "7",
    ]
    args = translate.build_parser().parse_args(argv)
    assert common.settings_from(args) == SearchSettings(
        beam_size=3, n_best=2, max_len_a=0.5, batch_size=7
    )


def test_the_hydra_schema_of_test_search_is_the_dataclass():
    """Holds once `TrainerConfig.test_search` is declared as `SearchSettings`."""
    test_search = compose_config([]).trainer.test_search
    assert OmegaConf.get_type(test_search) is SearchSettings
    assert OmegaConf.to_object(test_search) == SearchSettings()


def test_a_structured_config_merges_overrides_and_refuses_wrong_types_and_keys():
    schema = OmegaConf.structured(SearchSettings)
    assert OmegaConf.to_object(OmegaConf.merge(schema, {"beam_size": 3})) == SearchSettings(
        beam_size=3
    )
    with pytest.raises(ValidationError):
        OmegaConf.merge(schema, {"beam_size": "five"})
    with pytest.raises(ConfigKeyError):
        OmegaConf.merge(schema, {"beam": 3})


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"beam_size": 0}, "beam_size"),
        ({"batch_size": True}, "batch_size"),
        ({"beam_size": 2, "n_best": 3}, "n_best"),
        ({"length_penalty": float("nan")}, "length_penalty"),
        ({"max_len_a": -1.0}, "max_len_a"),
        ({"max_len_b": 1.5}, "max_len_b"),
    ],
)
def test_bad_values_raise_naming_the_field(values, field):
    with pytest.raises(SearchSettingsError) as raised:
        SearchSettings(**values)
    assert raised.value.field == field
    with pytest.raises(ConfigError, match=f"trainer.test_search.{field} "):
        check_test_search(values)


def test_an_unknown_test_search_key_is_a_config_error():
    with pytest.raises(ConfigError, match="trainer.test_search"):
        check_test_search({"beam": 3})
