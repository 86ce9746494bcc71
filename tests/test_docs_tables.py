"""The README's tables of choices list exactly the installed presets: a new encoder,
decoder, attention or experiment preset must be documented, a removed one must go."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from seq2seq import registry
from seq2seq.configs import preset_names

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def documented(option: str) -> set[str]:
    """Every `option=NAME` in the first cell of a README table row."""
    first_cells = re.findall(r"^\| ([^|]+) \|", README, flags=re.MULTILINE)
    return {name for cell in first_cells for name in re.findall(rf"`{option}=(\w+)`", cell)}


@pytest.mark.parametrize("group", ["encoder", "decoder", "attention"])
def test_the_tables_list_every_preset_of_the_group(group):
    assert documented(group) == set(preset_names(group))


def test_the_experiment_table_lists_every_experiment():
    first_cells = re.findall(r"^\| ([^|]+) \|", README, flags=re.MULTILINE)
    named = {name for cell in first_cells for name in re.findall(r"`(\w+)`", cell)}
    assert set(preset_names("experiment")) <= named


def test_every_registered_score_and_region_is_named_in_the_readme():
    for group in ("score", "region"):
        for name in registry.names(group):
            assert f"`{name}`" in README or f"={name}`" in README, f"{group} {name!r}"


def test_the_lab_table_lists_every_lab_experiment():
    from seq2seq.lab.catalogue import experiments

    section = README.split("## The attention lab", 1)[1].split("\n## ", 1)[0]
    first_cells = re.findall(r"^\| `(\w+)` \|", section, flags=re.MULTILINE)
    assert first_cells == list(experiments())
