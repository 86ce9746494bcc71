"""The README stays true to the configs: every option a user can pick is listed."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _options(group: str) -> list[str]:
    return sorted(path.stem for path in (ROOT / "configs" / group).glob("*.yaml"))


@pytest.mark.parametrize("group", ["encoder", "decoder", "attention", "data", "schedule"])
def test_every_option_of_a_group_is_in_the_readme(group):
    missing = [name for name in _options(group) if f"{group}={name}" not in README]
    assert not missing, f"README does not mention {group}={', '.join(missing)}"


def test_every_experiment_preset_is_in_the_readme():
    missing = [name for name in _options("experiment") if f"`{name}`" not in README]
    assert not missing, f"README does not list the presets {missing}"


def test_the_readme_commands_exist_in_the_makefile():
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in ("train", "test", "lint", "tensorboard", "test-all", "clean"):
        assert f"\n{target}:" in makefile, f"make {target} is in the README but not the Makefile"
