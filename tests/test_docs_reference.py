"""The reference pages (docs/reference/) are what the code generates: every config key,
every registered component with its FLOP formula, every command's --help; so are the
READMEs' tables of encoders, decoders, scores and regions."""

from __future__ import annotations

from pathlib import Path

import pytest

from seq2seq import registry
from seq2seq.config.value_checks import SECTION_RULES, at_least, optional
from tools.site import readme_tables, reference
from tools.site.reference import linked_doc_pages

REPO_ROOT = Path(__file__).resolve().parent.parent
DOCS = REPO_ROOT / "docs"


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    return reference.pages()


def test_the_committed_reference_pages_are_what_the_code_generates(pages):
    stale = [
        relative for relative, text in pages.items()
        if not (DOCS / relative).is_file() or (DOCS / relative).read_text(encoding="utf-8") != text
    ]  # fmt: skip
    assert not stale, (
        f"docs/{', docs/'.join(stale)} differ from what the code generates: run `make docs` "
        "(or `.venv/bin/python -m tools.site --no-outputs`) and commit the pages"
    )


def test_the_config_page_has_a_row_for_every_checked_key_with_its_check(pages):
    config = pages[reference.CONFIG_PAGE]
    for section in ("model", "optim", "trainer", "alignment"):
        for key in SECTION_RULES[section]:
            assert f"| `{section}.{key}` |" in config, f"{section}.{key}"
    assert "| `trainer.accumulate` | `int` | `1` | must be an integer of at least 1 |" in config
    assert (
        "| `attention.region.window` | `int` | `5` | must be an integer of at least 1 |" in config
    )


def test_a_rule_describes_itself(pages):
    assert (
        reference.rule_text(optional(at_least(1))) == "must be an integer of at least 1 (or null)"
    )


def test_the_components_page_names_every_component_with_its_flops(pages):
    components = pages[reference.COMPONENTS_PAGE]
    for group in registry.GROUPS:
        for component in registry.components(group):
            assert f"| `{component.name}` |" in components, f"{group} {component.name}"
            if component.flops is not None:
                assert f"### {group}: {component.name}" in components
    assert "its `flops` at the default options: `2·keys·queries·rows·width`" in components


def test_the_commands_page_holds_every_commands_help(pages):
    commands = pages[reference.COMMANDS_PAGE]
    for command in reference.console_commands():
        assert f"## {command}\n\n```text\n" in commands
    assert "== Configuration groups ==" in commands  # seq2seq-train's Hydra help


def test_the_readmes_component_tables_are_what_the_registry_generates():
    stale = readme_tables.stale_readmes(REPO_ROOT)
    assert not stale, (
        f"the components tables of {', '.join(stale)} (between <!-- generated: components --> "
        "and <!-- /generated -->) differ from the registry: run make docs "
        "(or `.venv/bin/python -m tools.site --no-outputs`) and commit the README"
    )


def test_the_readme_tables_list_every_encoder_decoder_score_and_region_with_its_summary():
    tables = readme_tables.tables()
    for group in readme_tables.GROUP_HEADS:
        for component in registry.components(group):
            summary = linked_doc_pages(readme_tables.summary(component), "")  # pages as links
            row = next(
                (line for line in tables.splitlines() if line.startswith(f"| `{component.name}` |")
                 and summary in line),
                None,
            )  # fmt: skip
            assert row is not None, f"{group} {component.name}"
            assert not readme_tables.summary(component).startswith("`("), (
                f"{group} {component.name}: its class docstring starts with a signature, "
                "not a summary"
            )
    assert (
        "| `local` | Local attention (Luong et al. 2015, §3.2): attend only to keys in " in tables
    )
    assert "`attention.region.window`, `attention.region.mode` |" in tables
    assert (
        "| `sparsemax` | `p = sparsemax(s) = argmin_{p ∈ Δ} ‖p − s‖²` (Martins & Astudillo 2016) |"
        in tables
    )


def test_a_readme_whose_tables_differ_from_the_registry_is_stale_until_regenerated(tmp_path):
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    drifted = readme_tables.fill(readme, "| encoder | what it is |\n|---|---|\n| `rnn` | old |\n")
    (tmp_path / "README.md").write_text(drifted, encoding="utf-8")
    (tmp_path / "README.zh-CN.md").write_text(
        drifted.replace("# seq2seq", "# 中文"), encoding="utf-8"
    )
    assert readme_tables.stale_readmes(tmp_path) == ["README.md", "README.zh-CN.md"]
    assert readme_tables.write_readmes(tmp_path) == [
        tmp_path / "README.md",
        tmp_path / "README.zh-CN.md",
    ]
    assert readme_tables.stale_readmes(tmp_path) == []
    regenerated = (tmp_path / "README.md").read_text(encoding="utf-8")
    assert regenerated.replace(readme_tables.tables(), "") == drifted.replace(
        "| encoder | what it is |\n|---|---|\n| `rnn` | old |\n", ""
    )  # only the region changed


def test_a_readme_without_the_region_is_reported_and_a_chinese_one_without_it_is_left_alone(
    tmp_path,
):
    (tmp_path / "README.md").write_text("# seq2seq\n\nno tables here\n", encoding="utf-8")
    (tmp_path / "README.zh-CN.md").write_text("# 中文\n", encoding="utf-8")
    assert readme_tables.stale_readmes(tmp_path) == ["README.md"]
    with pytest.raises(readme_tables.MissingRegion):
        readme_tables.write_readmes(tmp_path)
    assert (tmp_path / "README.zh-CN.md").read_text(encoding="utf-8") == "# 中文\n"
