"""The composed config is converted once, at the door (`seq2seq.runs.assemble`, a checkpoint's
`seq2seq.config.stored`): the layers below it read plain data or typed settings, never a
DictConfig. Their source imports no `omegaconf` and calls no `plain()`."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "seq2seq"
BELOW_THE_DOOR = ("flops.py", "visualise", "align", "training", "data", "search", "models",
                  "metrics")  # fmt: skip


def config_reads(source: str) -> list[tuple[int, str]]:
    """(line, what) of each `omegaconf` import and each call of a function named `plain`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, f"import {alias.name}") for alias in node.names
                      if alias.name.split(".")[0] == "omegaconf"]  # fmt: skip
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "omegaconf":
            found.append((node.lineno, f"from {node.module} import ..."))
        elif isinstance(node, ast.Call):
            function = node.func
            name = function.id if isinstance(function, ast.Name) else getattr(function, "attr", "")
            if name == "plain":
                found.append((node.lineno, "plain(...)"))
    return found


def modules_below_the_door() -> list[Path]:
    paths = [PACKAGE / name for name in BELOW_THE_DOOR]
    return sorted(
        file for path in paths for file in ([path] if path.is_file() else path.rglob("*.py"))
    )


def test_the_scan_finds_an_omegaconf_import_and_a_plain_call():
    source = "import omegaconf.errors\nfrom omegaconf import DictConfig\nx = build.plain(cfg)\n"
    assert [line for line, _ in config_reads(source)] == [1, 2, 3]
    assert config_reads("def plain_text(): pass\nplain_text()\n") == []


def test_no_layer_below_the_door_reads_a_dictconfig():
    modules = modules_below_the_door()
    assert len(modules) > 50  # the packages were found
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {what}"
        for path in modules
        for line, what in config_reads(path.read_text(encoding="utf-8"))
    ]
    assert not found, "convert the config at the door, not here:\n" + "\n".join(found)
