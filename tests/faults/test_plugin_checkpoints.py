"""Hostile checkpoints that name plugins: a checkpoint never makes the loader import a
module, a tampered plugin record is refused in one line naming its key, and passing the
plugin keeps every other check (the config's allow-list and schemas, the weights' shapes).

A real tiny checkpoint is trained once per module with a plugin score (toy task, two steps,
the plugin imported in this process and unloaded afterwards); each attack edits a copy.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from helpers import TINY_TOY, compose_config, plugins_unloaded_after

from seq2seq.cli import translate
from seq2seq.plugins import import_plugins
from seq2seq.runs.assemble import train_and_test

pytestmark = pytest.mark.attack("checkpoint")

SCORE_PLUGIN = """\
from seq2seq import registry
from seq2seq.models.attention.scores import DotProductScore


@registry.register("score", "faults_dot")
class FaultsDotScore(DotProductScore):
    def __init__(self, query_width, key_width, heads):
        super().__init__()
"""
# A module whose import would write the victim file: what a checkpoint may name.
HOSTILE_MODULE = "from pathlib import Path\nPath({victim!r}).write_text('pwned')\n"
VICTIM_TEXT = "precious user data\n"


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[dict, Path]:
    """(the checkpoint's payload, the plugin file) of a run trained with the plugin."""
    home = tmp_path_factory.mktemp("home")
    plugin = home / "faults_scores.py"
    plugin.write_text(SCORE_PLUGIN)
    overrides = ["trainer.max_steps=2", "trainer.valid_every=2", "logging.tensorboard=false",
                 "trainer.test_search.beam_size=1", "data.source.train_size=64",
                 "data.source.valid_size=8", "data.source.test_size=8", f"data.root={home / 'data'}",
                 "attention.score=faults_dot", f"plugins=[{plugin}]"]  # fmt: skip
    with plugins_unloaded_after():
        import_plugins([str(plugin)])
        train_and_test(compose_config(TINY_TOY + overrides), home / "run", outputs_root=home)
    return torch.load(home / "run" / "checkpoints" / "best.pt", weights_only=True), plugin


@pytest.fixture
def victim(tmp_path) -> Path:
    path = tmp_path / "victim.txt"
    path.write_text(VICTIM_TEXT)
    return path


@pytest.fixture(autouse=True)
def clean_plugins():
    with plugins_unloaded_after():
        yield


def save_tampered(payload: dict, folder: Path, edit: Callable[[dict], None]) -> Path:
    hostile = copy.deepcopy(payload)
    edit(hostile)
    path = folder / "hostile.pt"
    torch.save(hostile, path)
    return path


def refused_in_one_line(capsys, checkpoint: Path, *extra: str) -> str:
    code = translate.main([str(checkpoint), "a b c", *extra])
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 2 and captured.out == "", captured.err
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]


def record(payload: dict, **changes) -> None:
    payload["plugins"][0].update(changes)


# Each attack on the plugin records: the key the error must name, and the edit.
RECORD_ATTACKS: dict[str, tuple[str, Callable[[dict], None]]] = {
    "not_a_list": ("plugins: expected a list", lambda p: p.update(plugins="faults_scores")),
    "too_many": ("at most 64 records", lambda p: p.update(plugins=p["plugins"] * 65)),
    "extra_key": (
        "plugins[0]: expected a dict of exactly",
        lambda p: record(p, _target_="os.system"),
    ),
    "no_modules": ("plugins[0].modules: expected a list", lambda p: record(p, modules=[])),
    "code_as_module": (
        "plugins[0].modules[0]: expected a dotted module name",
        lambda p: record(p, modules=["os; import shutil"]),
    ),
    "sha256_not_hex": ("plugins[0].sha256", lambda p: record(p, sha256="../../etc/passwd")),
    "spec_with_a_forged_line": (
        "plugins[0].spec",
        lambda p: record(p, spec="x.py\nINFO: loaded fine"),
    ),
    "huge_path": ("plugins[0].path", lambda p: record(p, path="x" * 1_000_000)),
    "config_plugins_not_strings": (
        "plugins[0]: a printable string",
        lambda p: p.update(plugins=[]) or p["config"].update(plugins=[{"_target_": "os.system"}]),
    ),
}


@pytest.mark.parametrize("attack", list(RECORD_ATTACKS))
def test_a_tampered_plugin_record_is_refused_naming_the_key(
    attack, trained, tmp_path, capsys, fault_figures
):
    key, edit = RECORD_ATTACKS[attack]
    payload, plugin = trained
    hostile = save_tampered(payload, tmp_path, edit)
    line = refused_in_one_line(capsys, hostile, "--plugins", str(plugin))
    assert key in line, line
    fault_figures.add("hostile_checkpoints_refused", 1)


def test_a_recorded_module_is_never_imported(trained, tmp_path, capsys, monkeypatch, victim):
    """The record names a module beside the user, in the current folder; refused without
    importing it."""
    (tmp_path / "evil_scores.py").write_text(HOSTILE_MODULE.format(victim=str(victim)))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = str(tmp_path / "evil_scores.py")
    hostile = save_tampered(
        trained[0], tmp_path, lambda p: record(p, spec=spec, path=spec, modules=["evil_scores"])
    )
    line = refused_in_one_line(capsys, hostile)
    assert f"trained with plugin {spec!r} (module evil_scores)" in line
    assert "a plugin runs its code, so pass only plugins you trust" in line
    assert victim.read_text() == VICTIM_TEXT and "evil_scores" not in sys.modules


def test_a_record_naming_an_imported_builtin_module_is_still_refused(trained, tmp_path, capsys):
    """`os` is imported in every process, but not as a plugin the user passed."""
    hostile = save_tampered(trained[0], tmp_path, lambda p: record(p, spec="os", modules=["os"]))
    assert "pass --plugins os to load it" in refused_in_one_line(capsys, hostile)


def test_a_component_without_its_record_is_refused_naming_it(trained, tmp_path, capsys):
    hostile = save_tampered(trained[0], tmp_path, lambda p: p.update(plugins=[]))
    assert "faults_dot" in refused_in_one_line(capsys, hostile)


def test_a_part_target_without_a_record_is_not_imported(
    trained, tmp_path, capsys, monkeypatch, victim
):
    (tmp_path / "evil_parts.py").write_text(HOSTILE_MODULE.format(victim=str(victim)))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))

    def edit(payload: dict) -> None:
        payload["plugins"] = []
        payload["config"]["attention"]["score"] = {"name": "dot"}  # only the part is foreign
        payload["config"]["encoder"]["_target_"] = "evil_parts.Encoder"

    line = refused_in_one_line(capsys, save_tampered(trained[0], tmp_path, edit))
    assert "encoder._target_" in line
    assert victim.read_text() == VICTIM_TEXT and "evil_parts" not in sys.modules


def test_with_the_plugin_passed_a_nested_target_is_still_refused(trained, tmp_path, capsys, victim):
    payload, plugin = trained
    opener = {"_target_": "builtins.open", "_args_": [str(victim), "w"]}

    def edit(hostile: dict) -> None:
        hostile["config"]["encoder"]["dropout"] = {"_target_": "builtins.len", "_args_": [[opener]]}

    line = refused_in_one_line(
        capsys, save_tampered(payload, tmp_path, edit), "--plugins", str(plugin)
    )
    assert "encoder.dropout" in line and victim.read_text() == VICTIM_TEXT


def test_with_the_plugin_passed_weights_of_another_shape_are_refused(trained, tmp_path, capsys):
    payload, plugin = trained
    name = next(iter(payload["model"]))

    def edit(hostile: dict) -> None:
        hostile["model"][name] = torch.zeros(3, 5)

    line = refused_in_one_line(
        capsys, save_tampered(payload, tmp_path, edit), "--plugins", str(plugin)
    )
    assert f"parameter {name}" in line
