"""Plugins: a user's modules, imported by spec, whose components join the built-ins.

One toy run is trained with a plugin score from a folder of its own (a subprocess, started
in that folder with a relative spec and `hydra.job.chdir=true`); its checkpoint then names
the plugin, is refused without it and loads with it. The other tests import plugins in
this process and unload them afterwards (`clean_plugins`), so the registry the other
tests see is the built-ins'.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest
import torch
from helpers import (
    TINY_TOY,
    compose_config,
    dot_score_plugin,
    plugins_unloaded_after,
    run_main,
    run_training_process,
    toy_train_command,
)
from torch.utils.flop_counter import FlopCounterMode

from seq2seq import registry
from seq2seq.checkpoint import CheckpointError
from seq2seq.cli import align, evaluate, translate
from seq2seq.config import schema as config
from seq2seq.config.build import ConfigError, plain
from seq2seq.config.stored import check_known_keys
from seq2seq.models.attention import Attention
from seq2seq.plugins import PluginError, import_plugins
from seq2seq.runs.assemble import assemble_trainer, check_startup
from seq2seq.visualise.heatmap import run_title

# s(q, k) = 2·qᵀk: a score without options whose weights an independent softmax checks.
SCORE_PLUGIN = dot_score_plugin("twice_dot", 2.0)

# A part with a schema of its own: the RNN encoder under a new name and `_target_`.
PART_PLUGIN = '''\
from dataclasses import dataclass

from seq2seq import registry
from seq2seq.models.encoders.rnn import RNNEncoder, RNNEncoderConfig


@dataclass
class EchoEncoderConfig(RNNEncoderConfig):
    _target_: str = "echo_parts.EchoEncoder"


@registry.register("encoder", "echo", schema=EchoEncoderConfig)
class EchoEncoder(RNNEncoder):
    """The RNN encoder, registered by a plugin."""
'''


TOY_SIZES = ["trainer.max_steps=2", "trainer.valid_every=2", "logging.tensorboard=false",
             "data.source.train_size=64", "data.source.valid_size=8", "data.source.test_size=8"]  # fmt: skip


ECHO_YAML = """\
# The plugin's encoder; no schema in a defaults list: Hydra composes it before the import.
_target_: echo_parts.EchoEncoder
cell: gru
hidden_size: 8
"""


def dot_plugin(name: str) -> str:
    return dot_score_plugin(name, 2.0)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(autouse=True)
def clean_plugins():
    """Unload every plugin a test imported, and restore sys.path."""
    with plugins_unloaded_after():
        yield


# ---------------------------------------------------------------- a run with a plugin


@pytest.fixture(scope="module")
def plugin_run(tmp_path_factory) -> Path:
    """A toy run trained with `plugins=[lab/scores.py]` from its own folder; returns it."""
    home = tmp_path_factory.mktemp("home")
    write(home / "lab" / "scores.py", SCORE_PLUGIN)
    run_dir = home / "run"
    command = toy_train_command(
        home, run_dir, "plugins=[lab/scores.py]", "attention.score=twice_dot", *TOY_SIZES,
        "trainer.test_search.beam_size=1", "hydra.job.chdir=true",
    )  # fmt: skip
    result = run_training_process(command, cwd=home)
    assert result.returncode == 0, result.stdout[-3000:]
    return home


def test_the_checkpoint_records_the_plugin(plugin_run):
    payload = torch.load(plugin_run / "run" / "checkpoints" / "best.pt", weights_only=True)
    file = plugin_run / "lab" / "scores.py"
    assert payload["plugins"] == [
        {"spec": "lab/scores.py", "path": str(file.resolve()), "modules": ["scores"],
         "sha256": sha256(file)}
    ]  # fmt: skip
    assert payload["config"]["plugins"] == ["lab/scores.py"]
    assert payload["config"]["attention"]["score"]["name"] == "twice_dot"


def checkpoint_command(program: str, home: Path, *extra: str) -> list[str]:
    checkpoint = home / "run" / "checkpoints" / "best.pt"
    if program == "align":
        src = write(home / "src.txt", "a b c\n")
        return [checkpoint, "--src", src, "--tgt", src, *extra]
    if program == "evaluate":
        return [checkpoint, "--src", write(home / "src.txt", "a b c\n"), "--ref",
                home / "src.txt", "-o", home / "out.hyp", *extra]  # fmt: skip
    return [checkpoint, "a b c", *extra]


PROGRAMS = {"translate": translate.main, "evaluate": evaluate.main, "align": align.main}


@pytest.mark.parametrize("program", list(PROGRAMS))
def test_without_the_plugin_the_checkpoint_is_refused_in_one_line(
    program, plugin_run, capsys, monkeypatch
):
    monkeypatch.chdir(plugin_run)
    code, out, err = run_main(PROGRAMS[program], capsys, *checkpoint_command(program, plugin_run))
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "trained with plugin 'lab/scores.py' (module scores)" in lines[0]
    assert "pass --plugins lab/scores.py to load it" in lines[0]
    assert "scores" not in sys.modules  # nothing was imported because the checkpoint named it


def test_with_the_plugin_the_checkpoint_translates(plugin_run, capsys, monkeypatch):
    monkeypatch.chdir(plugin_run)
    code, out, err = run_main(
        translate.main, capsys, *checkpoint_command("translate", plugin_run),
        "--plugins", "lab/scores.py", "--show-attention",
    )  # fmt: skip
    assert code == 0, err
    assert len(out.splitlines()) == 1
    assert "WARNING" not in err


def test_a_changed_plugin_warns_naming_both_and_loads(plugin_run, tmp_path, capsys, caplog):
    original = plugin_run / "lab" / "scores.py"
    changed = write(tmp_path / "elsewhere" / "scores.py", SCORE_PLUGIN + "# edited\n")
    code, _, err = run_main(
        translate.main, capsys, *checkpoint_command("translate", plugin_run),
        "--plugins", changed,
    )  # fmt: skip
    assert code == 0, err
    [warning] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert f"plugin {str(changed)!r} ({changed}, sha256 {sha256(changed)}) differs" in warning
    assert f"the plugin 'lab/scores.py' ({original}, sha256 {sha256(original)})" in warning


def test_resume_needs_the_plugin_given_with_plugins(plugin_run):
    """The run's settings without the plugin (a built-in score): refused, naming
    `plugins=`, before the architecture comparison (which would differ too)."""
    cfg = compose_config(TINY_TOY + TOY_SIZES + [f"data.root={plugin_run / 'data'}"])
    with pytest.raises(CheckpointError) as refused:
        assemble_trainer(cfg, plugin_run / "resumed", resume_path=plugin_run / "run" /
                         "checkpoints" / "last.pt", observe=False)  # fmt: skip
    assert "trained with plugin 'lab/scores.py'" in str(refused.value)
    assert "pass 'plugins=[lab/scores.py]' to load it" in str(refused.value)


# ---------------------------------------------------------------- importing


def test_a_file_plugin_joins_the_registry_and_everything_that_enumerates_it(tmp_path):
    file = write(tmp_path / "lab" / "scores.py", SCORE_PLUGIN)
    [plugin] = import_plugins(["lab/scores.py"], base=tmp_path)
    assert (plugin.spec, plugin.path, plugin.modules) == ("lab/scores.py", str(file), ("scores",))
    assert plugin.sha256 == sha256(file)
    component = registry.get("score", "twice_dot")
    assert component.plugin == "lab/scores.py" and component.origin == "plugin 'lab/scores.py'"
    assert registry.get("score", "dot").plugin is None
    assert plugin.components() == [component]
    # its weights, against an independent softmax(2 qᵀk)
    attention = Attention(4, 4, 4, score="twice_dot")
    query, keys = torch.randn(2, 3, 4), torch.randn(2, 5, 4)
    with FlopCounterMode(display=False) as counter:
        _, weights = attention(query, keys, keys)
    expected = torch.softmax(2 * query @ keys.transpose(1, 2), dim=-1)
    torch.testing.assert_close(weights[:, 0], expected)
    node = {"score": "twice_dot", "region": "soft", "heads": 1, "head_dim": None}
    assert Attention.flops(node, 2, 3, 5, 4) == counter.get_total_flops()
    cfg = compose_config(["attention=dot", "attention.score=twice_dot"])
    assert "score=twice_dot" in run_title(plain(cfg))


def test_importing_twice_runs_the_plugin_once(tmp_path):
    runs = tmp_path / "runs.txt"
    write(tmp_path / "lab" / "scores.py", SCORE_PLUGIN + f"open({str(runs)!r}, 'a').write('ran')\n")
    first = import_plugins(["lab/scores.py"], base=tmp_path)
    assert import_plugins(["lab/scores.py", "./lab/scores.py"], base=tmp_path)[0] == first[0]
    assert runs.read_text() == "ran"
    assert registry.names("score").count("twice_dot") == 1


def test_a_part_plugin_from_a_user_yaml_has_its_schema_checked_at_startup(tmp_path):
    """Its YAML, in the user's config folder, composes before the plugin is imported (no
    schema in its defaults); its registered schema checks it at start-up."""
    write(tmp_path / "echo_parts.py", PART_PLUGIN)
    write(tmp_path / "configs" / "encoder" / "echo.yaml", ECHO_YAML)
    overrides = ["encoder=echo", "decoder=gru", "attention=additive", "model.embed_dim=8",
                 "decoder.hidden_size=8", f"hydra.searchpath=[file://{tmp_path / 'configs'}]"]
    cfg = compose_config(overrides)
    import_plugins(["echo_parts"], base=tmp_path)  # a dotted name, found from base
    assert config.buildable_classes("encoder")["echo_parts.EchoEncoder"].__name__ == (
        "EchoEncoderConfig"
    )
    assert "base_echo" in config.schemas(["encoder"])["encoder"]
    check_known_keys(cfg)  # the plugin's schema accepts the node
    assert registry.of_node("encoder", plain(cfg.encoder)).name == "echo"
    with pytest.raises(ConfigError, match=r"encoder\.hiden_size"):
        check_known_keys(compose_config(overrides + ["+encoder.hiden_size=4"]))
    with pytest.raises(ConfigError, match=r"encoder\.hidden_size"):
        check_known_keys(compose_config(overrides + ["encoder.hidden_size=many"]))


def test_a_plain_folder_imports_each_file_and_hashes_them_together(tmp_path):
    folder = tmp_path / "mine"
    first = write(folder / "first_score.py", dot_plugin("first_dot"))
    second = write(folder / "second_score.py", dot_plugin("second_dot"))
    [plugin] = import_plugins(["./mine"], base=tmp_path)
    assert plugin.modules == ("first_score", "second_score")
    assert {"first_dot", "second_dot"} <= set(registry.names("score"))
    manifest = f"{sha256(first)}  first_score.py\n{sha256(second)}  second_score.py\n"
    assert plugin.sha256 == hashlib.sha256(manifest.encode()).hexdigest()


def test_a_package_is_imported_with_its_submodules(tmp_path):
    write(tmp_path / "lab_pkg" / "__init__.py", "")
    write(tmp_path / "lab_pkg" / "attention" / "__init__.py", "")
    write(tmp_path / "lab_pkg" / "attention" / "deep.py", dot_plugin("deep_dot"))
    [plugin] = import_plugins(["lab_pkg"], base=tmp_path)
    assert plugin.modules == ("lab_pkg", "lab_pkg.attention", "lab_pkg.attention.deep")
    assert registry.get("score", "deep_dot").plugin == "lab_pkg"


def test_a_name_clash_with_a_builtin_names_both_and_registers_nothing(tmp_path):
    write(tmp_path / "clash.py", dot_plugin("general") + dot_plugin("extra_dot"))
    before = registry.names("score")
    with pytest.raises(PluginError) as failure:
        import_plugins(["clash.py"], base=tmp_path)
    message = str(failure.value)
    assert message.startswith("plugin 'clash.py': score 'general' (plugin 'clash.py', clash.")
    assert "score 'general' (built-in, seq2seq.models.attention.scores." in message
    assert registry.names("score") == before and "clash" not in sys.modules


def test_a_name_clash_between_plugins_names_both(tmp_path):
    write(tmp_path / "a" / "one.py", dot_plugin("shared_dot"))
    write(tmp_path / "b" / "two.py", dot_plugin("shared_dot"))
    with pytest.raises(PluginError, match=r"\(plugin 'b/two.py', two\..*\(plugin 'a/one.py'"):
        import_plugins(["a/one.py", "b/two.py"], base=tmp_path)
    assert registry.get("score", "shared_dot").plugin == "a/one.py"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import not_a_module_anywhere\n", "ModuleNotFoundError: No module named"),
        ("def broken(:\n", "SyntaxError: invalid syntax"),
        ("raise RuntimeError('no GPU here')\n", "RuntimeError: no GPU here"),
    ],
)
def test_an_import_error_names_the_spec_the_error_and_the_line(source, expected, tmp_path):
    file = write(tmp_path / "lab" / "bad.py", source)
    with pytest.raises(PluginError) as failure:
        import_plugins(["lab/bad.py"], base=tmp_path)
    message = str(failure.value)
    assert message.startswith("plugin 'lab/bad.py': importing it failed: ")
    assert expected in message and f"({file} line 1)" in message
    assert "\n" not in message and "bad" not in sys.modules


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("missing.py", "is not a .py file or a folder"),
        ("not_a_module_anywhere", "no module of that name on sys.path or in"),
        ("seq2seq.models", "a module of seq2seq is built in, not a plugin"),
        ("lab/my-score.py", "'my-score' is not a Python identifier"),
        ("lab/json.py", "the module name 'json' is taken by"),
    ],
)
def test_a_spec_that_cannot_be_a_plugin_is_named(spec, expected, tmp_path):
    write(tmp_path / "lab" / "my-score.py", SCORE_PLUGIN)
    write(tmp_path / "lab" / "json.py", SCORE_PLUGIN)
    with pytest.raises(PluginError, match=expected) as failure:
        import_plugins([spec], base=tmp_path)
    assert str(failure.value).startswith(f"plugin {spec!r}: ")
    assert "twice_dot" not in registry.names("score")


def test_startup_refuses_a_config_whose_plugins_were_not_imported():
    cfg = compose_config(["plugins=[./lab/scores.py]"])
    with pytest.raises(ConfigError, match=r"plugins\[0\]: './lab/scores.py' is not imported"):
        check_startup(cfg)


def test_a_plugin_is_settable_from_an_experiment_yaml(tmp_path):
    write(tmp_path / "experiment" / "mine.yaml",
          "# @package _global_\nplugins: [./lab/scores.py]\n")  # fmt: skip
    cfg = compose_config(["+experiment=mine", f"hydra.searchpath=[file://{tmp_path}]"])
    assert list(cfg.plugins) == ["./lab/scores.py"]
    assert list(compose_config([]).plugins) == []
