"""The hand-written tables of choices list exactly the installed presets: a new encoder,
decoder, attention, experiment preset or lab experiment must be documented, a removed one
must go. The tables live on the site: the training guide (presets of every group) and the
tutorial's comparing page (the lab); the README's component tables are generated
(tests/test_docs_reference.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from seq2seq import registry
from seq2seq.configs import preset_names

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
TRAINING_GUIDE = (ROOT / "docs" / "guides" / "training.md").read_text(encoding="utf-8")
COMPARING = (ROOT / "docs" / "tutorial" / "comparing.md").read_text(encoding="utf-8")


def section(page: str, heading: str) -> str:
    """The text under `heading` up to the next heading of the same or a higher level."""
    level = heading.split(" ", 1)[0]
    after = page.split(f"\n{heading}\n", 1)[1]
    return re.split(rf"\n#{{1,{len(level)}}} ", after, maxsplit=1)[0]


def table_after(page: str, header_cell: str) -> list[str]:
    """The first cells of the table whose header row starts with `| header_cell |`."""
    rows = page.split(f"\n| {header_cell} |", 1)[1].split("\n\n", 1)[0].splitlines()[2:]
    return [row.split("|")[1].strip() for row in rows]


def test_the_attention_table_lists_every_attention_preset():
    names = {cell.strip("`") for cell in table_after(TRAINING_GUIDE, "`attention=`")}
    assert names == set(preset_names("attention"))


@pytest.mark.parametrize("group", ["encoder", "decoder"])
def test_the_guide_names_every_preset_of_the_group(group):
    paragraph = TRAINING_GUIDE.split("**Encoders and decoders.**", 1)[1].split("\n\n", 1)[0]
    named = set(re.findall(r"`(?:\w+=)?(\w+)`", paragraph))
    assert set(preset_names(group)) <= named


def test_the_experiment_table_lists_every_experiment():
    cells = table_after(section(TRAINING_GUIDE, "## Presets"), "preset")
    named = {name for cell in cells for name in re.findall(r"`(\w+)`", cell)}
    assert named == set(preset_names("experiment"))


def test_every_registered_score_and_region_is_named_in_the_readme():
    for group in ("score", "region"):
        for name in registry.names(group):
            assert f"`{name}`" in README or f"={name}`" in README, f"{group} {name!r}"


def test_the_lab_table_lists_every_lab_experiment():
    from seq2seq.lab.catalogue import experiments

    cells = table_after(section(COMPARING, "## The attention lab"), "experiment")
    assert [re.match(r"\[`(\w+)`\]", cell).group(1) for cell in cells] == list(experiments())
