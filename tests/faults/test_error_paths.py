"""Error paths that raise again: a roll-back or clean-up meets the very input that made the
main path fail (a link loop, a folder that vanished, a plugin that raised) and must not
raise a second error that hides the first. Each roll-back is attacked with that input:
the plugin importer's (`seq2seq.plugins`: loop files and folders, a plugin that turns
itself into a loop or removes its folder and then raises, a plugin raising on import, an
unreadable file), the prepared cache's naming of a damaged file, and the linking of a
sweep's runs into another whose entries loop. Each ends in one line (exit 2 for a
command) with nothing left registered.
"""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

import pytest
from watched import run_watched, within_time

from seq2seq import registry
from seq2seq.data.prepare import _at_fault
from seq2seq.plugins import PluginError, import_plugins, imported
from seq2seq.study.sweep import link_runs

pytestmark = pytest.mark.attack("error_path")


def plugin_refused(spec: str, base: Path) -> str:
    """The one-line PluginError importing `spec` ends in; nothing of it stays registered
    or imported."""
    modules = set(sys.modules)
    with pytest.raises(PluginError) as raised:
        within_time(import_plugins, [spec], base)
    message = str(raised.value)
    assert "\n" not in message and message.startswith(f"plugin {spec!r}: ")
    assert not [c for g in registry.GROUPS for c in registry.components(g) if c.plugin == spec]
    assert spec not in [plugin.spec for plugin in imported()]
    left = {name for name in set(sys.modules) - modules if name.startswith("errpath_")}
    assert not left, left
    return message


REGISTERS = (
    "import torch\nfrom seq2seq import registry\n"
    "@registry.register('score', '{name}')\n"
    "class Score(torch.nn.Module):\n    pass\n"
)


# ---------------------------------------------------------------- plugin specs that loop


def test_a_plugin_file_linking_to_itself_is_one_line(tmp_path):
    os.symlink("loop.py", tmp_path / "loop.py")
    assert "is a symbolic link loop" in plugin_refused("./loop.py", tmp_path)


def test_two_plugin_files_linking_to_each_other_are_one_line(tmp_path):
    os.symlink("b.py", tmp_path / "a.py")
    os.symlink("a.py", tmp_path / "b.py")
    assert "is a symbolic link loop" in plugin_refused("./a.py", tmp_path)


def test_a_plugin_folder_linking_to_itself_is_one_line(tmp_path):
    os.symlink("loopdir", tmp_path / "loopdir")
    assert "is a symbolic link loop" in plugin_refused("./loopdir", tmp_path)


@pytest.mark.parametrize("command", ["seq2seq.cli.check", "seq2seq.cli.translate"])
def test_a_command_says_a_looping_plugin_in_one_line(tmp_path, command):
    """Before: `RuntimeError: Symlink loop`, raised again while rolling the import back
    (a fresh process imports modules during the plugin's import, which the roll-back
    looked at by resolving the looping spec)."""
    os.symlink("loop.py", tmp_path / "loop.py")
    arguments = ["score", "dot", "--quick"] if command.endswith("check") else ["model.pt"]
    done = run_watched(["-m", command, *arguments, "--plugins", "./loop.py"], timeout=60,
                       max_mb=1500, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 2, (done.killed, done.stderr[-2000:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "loop.py" in lines[0] and "symbolic link loop" in lines[0], lines
    assert "RuntimeError" not in done.stderr


# ---------------------------------------------------------------- plugins failing on import


def test_a_plugin_that_registers_then_raises_is_rolled_back(tmp_path):
    source = REGISTERS.format(name="errpath_raising") + "raise ValueError('broken plugin')\n"
    (tmp_path / "errpath_raising.py").write_text(source, encoding="utf-8")
    message = plugin_refused("./errpath_raising.py", tmp_path)
    assert "ValueError: broken plugin" in message and "errpath_raising" not in registry.names(
        "score"
    )


def test_a_plugin_that_turns_itself_into_a_link_loop_then_raises_is_rolled_back(tmp_path):
    """The roll-back meets the loop the failure left: it must not raise RuntimeError."""
    source = REGISTERS.format(name="errpath_looping") + (
        "import os\nos.remove(__file__)\nos.symlink(os.path.basename(__file__), __file__)\n"
        "raise OSError('gone')\n"
    )
    (tmp_path / "errpath_looping.py").write_text(source, encoding="utf-8")
    assert "OSError: gone" in plugin_refused("./errpath_looping.py", tmp_path)


def test_a_plugin_folder_that_vanishes_during_its_import_is_rolled_back(tmp_path):
    folder = tmp_path / "vanishing"
    folder.mkdir()
    source = REGISTERS.format(name="errpath_vanishing") + (
        "import shutil, os\nshutil.rmtree(os.path.dirname(__file__))\n"
        "os.symlink('vanishing', os.path.dirname(__file__))\nraise RuntimeError('vanished')\n"
    )
    (folder / "errpath_vanishing.py").write_text(source, encoding="utf-8")
    assert "RuntimeError: vanished" in plugin_refused("./vanishing", tmp_path)
    assert "errpath_vanishing" not in registry.names("score")


def test_a_package_plugin_whose_module_raises_is_rolled_back(tmp_path):
    package = tmp_path / "errpath_pkg"
    package.mkdir()
    (package / "__init__.py").write_text(REGISTERS.format(name="errpath_pkg"), encoding="utf-8")
    (package / "bad.py").write_text("raise KeyError('inner')\n", encoding="utf-8")
    os.symlink(".", package / "again")  # the walk of the package meets a loop too
    assert "KeyError" in plugin_refused("./errpath_pkg", tmp_path)
    assert "errpath_pkg" not in registry.names("score")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads every file")
def test_an_unreadable_plugin_file_is_one_line(tmp_path):
    path = tmp_path / "errpath_locked.py"
    path.write_text("VALUE = 1\n", encoding="utf-8")
    path.chmod(0)
    try:
        assert "Permission denied" in plugin_refused("./errpath_locked.py", tmp_path)
    finally:
        path.chmod(0o644)


# ---------------------------------------------------------------- other clean-up paths


def test_naming_a_damaged_cache_file_that_is_a_link_loop_does_not_raise(tmp_path):
    """The prepared cache names the file its opening failed on; that file may be the loop."""
    loop = tmp_path / "src_ids.npy"
    os.symlink("src_ids.npy", loop)
    error = OSError(errno.ELOOP, "Too many levels of symbolic links", str(loop))
    assert _at_fault(tmp_path, error) == "src_ids.npy"


def test_linking_runs_into_a_sweep_whose_entries_loop_does_not_raise(tmp_path, capsys):
    from sweep_fixtures import fake_run, results

    source = tmp_path / "attention"
    fake_run(source / "0_attention=dot", "dot", results(3_892_384, 12.0), {})
    target = tmp_path / "encoders"
    target.mkdir()
    os.symlink("0_loop", target / "0_loop")
    made = within_time(link_runs, source, target, "attention=dot")
    assert [link.name for link in made] == ["1_attention=dot"]
    assert (target / "1_attention=dot" / ".hydra" / "config.yaml").is_file()


def test_a_config_folder_that_is_a_link_loop_is_one_line(tmp_path, capsys):
    from seq2seq.cli import check

    os.symlink("configs", tmp_path / "configs")
    argv = ["score", "dot", "--config-dir", str(tmp_path / "configs"), "--quick"]
    assert within_time(check.main, argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "configs" in err and "RuntimeError" not in err, err
