"""Installed like a library: a built wheel works from any folder, configs included.

The wheel is installed non-editable into a fresh virtual environment that borrows this
environment's packages (torch and the rest: a `.pth` line adds their folder, without
running this environment's own `.pth` files, so the editable install of this checkout is
not visible there). From an empty folder it then trains a toy model for a few steps,
translates with the checkpoint, and prepares a corpus described in a config folder of the
user's own (`--config-dir`), with nothing edited inside the installed package.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
# Top-level folders of a checkout that are not part of the source distribution.
NOT_SOURCE = {".git", ".venv", "data", "outputs", "multirun", "build", "bench", "runs"}


def test_every_package_of_the_source_tree_is_listed_in_pyproject():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    listed = set(
        tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    on_disk = {
        ".".join(init.parent.relative_to(REPO_ROOT).parts)
        for init in (REPO_ROOT / "seq2seq").rglob("__init__.py")
    }
    assert on_disk | {"seq2seq.configs", "seq2seq.configs.compare"} == listed


def run(command: list[str], cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"{' '.join(command)}\n{result.stdout}\n{result.stderr}"
    return result


def _not_source(folder: str, names: list[str]) -> set[str]:
    top = NOT_SOURCE if Path(folder) == REPO_ROOT else set()
    return {
        name for name in names if name in top or name == "__pycache__" or name.endswith(".egg-info")
    }


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A fresh virtual environment with the wheel of this checkout installed; its bin/."""
    root = tmp_path_factory.mktemp("install")
    source = root / "source"  # a copy, so that the build leaves nothing in the checkout
    shutil.copytree(REPO_ROOT, source, ignore=_not_source)
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(root / "wheel"), str(source)], cwd=root)  # fmt: skip
    (wheel,) = (root / "wheel").glob("seq2seq_attention-*.whl")
    venv = root / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=root)
    python = venv / "bin" / "python"
    new_site = Path(run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                        cwd=root).stdout.strip())  # fmt: skip
    (new_site / "borrowed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
         "--no-index", str(wheel)], cwd=root)  # fmt: skip
    return venv / "bin"


def test_the_installed_package_is_the_wheel_not_the_checkout(installed, tmp_path):
    result = run([str(installed / "python"), "-c",
                  "import seq2seq, seq2seq.configs as c; print(seq2seq.__file__); "
                  "print(len(c.config_files('encoder')))"], cwd=tmp_path)  # fmt: skip
    module_file, encoders = result.stdout.split()
    assert Path(module_file).is_relative_to(installed.parent)
    assert int(encoders) == len(list((REPO_ROOT / "configs" / "encoder").glob("*.yaml")))


def test_the_wheel_installs_no_workshop_module(installed, tmp_path):
    """Benchmarks, the site generator, the docs-block checker and the load tester stay in the
    checkout's workshop (tools/): the wheel installs the translator and its annexes only."""
    result = run([str(installed / "python"), "-c",
                  "import importlib.util as u, pathlib, seq2seq; "
                  "print(u.find_spec('tools') is None); "
                  "root = pathlib.Path(seq2seq.__file__).parent; "
                  "print('\\n'.join(str(p.relative_to(root)) for p in root.rglob('*.py')))"],
                 cwd=tmp_path)  # fmt: skip
    first, *modules = result.stdout.splitlines()
    assert first == "True"
    assert "cli/train.py" in modules and "search/translator.py" in modules
    workshop = [m for m in modules
                if m.startswith(("bench/", "site/")) or m in ("serve/load.py", "testing/doc_blocks.py")]  # fmt: skip
    assert workshop == []


def test_every_command_of_pyproject_is_installed(installed, tmp_path):
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    commands = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert [name for name in commands if not (installed / name).is_file()] == []
    usage = run([str(installed / "seq2seq-align-both"), "--help"], cwd=tmp_path).stdout
    assert usage.startswith("usage: seq2seq-align-both")


def test_train_then_translate_from_an_empty_folder(installed, tmp_path):
    run([str(installed / "seq2seq-train"), "data=toy_copy", "data.source.train_size=256",
         "data.source.valid_size=16", "data.source.test_size=16", "encoder=gru", "decoder=gru",
         "attention=additive", "encoder.hidden_size=8", "decoder.hidden_size=16",
         "model.embed_dim=16", "trainer.max_steps=3", "trainer.valid_every=3",
         "trainer.threads=1", "trainer.test_search.beam_size=1", "logging.progress_bar=false",
         "hydra.run.dir=run"], cwd=tmp_path)  # fmt: skip
    checkpoint = tmp_path / "run" / "checkpoints" / "best.pt"
    assert checkpoint.is_file()
    result = run([str(installed / "seq2seq-translate"), str(checkpoint), "a b c", "--beam-size", "2"],
                 cwd=tmp_path)  # fmt: skip
    assert len(result.stdout.splitlines()) == 1


def test_prepare_a_corpus_from_a_config_folder_of_the_users_own(installed, tmp_path):
    corpus = tmp_path / "pairs.tsv"
    words = ["red", "green", "blue", "small", "big", "cat", "dog", "bird", "runs", "sleeps"]
    lines = [f"{words[i % 10]} {words[(i * 3) % 10]} {words[(i * 7) % 10]} {i}\t"
             f"{words[(i * 7) % 10].upper()} {words[i % 10].upper()} {i}" for i in range(300)]  # fmt: skip
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "myconf" / "data").mkdir(parents=True)
    (tmp_path / "myconf" / "data" / "mine.yaml").write_text(
        "defaults:\n  - base_data\n  - _self_\n"
        f"name: mine\nsource:\n  name: tabular\n  url: file://{corpus}\n  member: ''\n"
        "  sha256: null\n  num_columns: 2\n  src_column: 0\n  tgt_column: 1\n"
        "src_lang: xx\ntgt_lang: yy\n"
        "valid_size: 10\ntest_size: 10\nsrc_vocab_size: 40\ntgt_vocab_size: 40\n",
        encoding="utf-8",
    )
    result = run([str(installed / "seq2seq-data"), "prepare", "--config-dir", "myconf",
                  "data=mine", "data.root=corpora"], cwd=tmp_path)  # fmt: skip
    assert "train size" in result.stdout
    assert (tmp_path / "corpora" / "prepared" / "mine" / "train.xx").is_file()


# ---------------------------------------------------------------- a score of the user's own

OWN_ATTENTION = (REPO_ROOT / "docs" / "tutorial" / "own-attention.md").read_text(encoding="utf-8")
TOY_RUN = ["data=toy_copy", "data.source.train_size=200", "data.source.valid_size=16",
           "data.source.test_size=16", "trainer.max_steps=2", "trainer.valid_every=2",
           "schedule.warmup_steps=1"]  # fmt: skip


def tutorial_file(name: str) -> str:
    """The text the tutorial's "Your own attention" page writes to `name` (its
    `cat > name <<'EOF'` block)."""
    opening = f"cat > {name} <<'EOF'\n"
    start = OWN_ATTENTION.index(opening) + len(opening)
    return OWN_ATTENTION[start : OWN_ATTENTION.index("\nEOF\n", start) + 1]


def test_a_score_of_the_users_own_is_checked_compared_and_guards_its_checkpoints(installed, tmp_path):
    """The tutorial's "Your own attention", done from an empty folder with the wheel: the
    plugin file and YAML copied from the page pass the contract suite, are ranked by
    seq2seq-compare against two built-ins, and their checkpoint translates only when the
    plugin is named."""
    lab = tmp_path / "lab"
    (lab / "attention").mkdir(parents=True)
    for name in ("lab/scores.py", "lab/attention/scaled_general.yaml"):
        (tmp_path / name).write_text(tutorial_file(name), encoding="utf-8")
    checked = run([str(installed / "seq2seq-check"), "score", "scaled_general", "--plugins",
                   "lab/scores.py", "--config-dir", "lab"], cwd=tmp_path)  # fmt: skip
    assert "learning" in checked.stdout and "masking" in checked.stdout

    folder = tmp_path / "cmp"
    run([str(installed / "seq2seq-compare"), "attention=scaled_general,scaled_dot,additive",
         "budget=small", "seeds=1", "threads=1", "stages=[attention,summary]", f"dir={folder}",
         "plugins=[lab/scores.py]", "config_dir=lab", "report.image=false", "report.aer=false",
         "report.resamples=100", "train=[" + ",".join(f'"{item}"' for item in TOY_RUN) + "]"],
        cwd=tmp_path, timeout=600)  # fmt: skip
    table = (folder / "COMPARISON.md").read_text(encoding="utf-8")
    assert all(f"score={name} " in table for name in ("scaled_general", "scaled_dot", "additive"))

    (checkpoint,) = folder.glob("attention/*attention=scaled_general*/checkpoints/best.pt")
    refused = subprocess.run([str(installed / "seq2seq-translate"), str(checkpoint), "a b c"],
                             cwd=tmp_path, capture_output=True, text=True, timeout=180)  # fmt: skip
    assert refused.returncode == 2 and refused.stdout == ""
    assert "lab/scores.py" in refused.stderr and "--plugins" in refused.stderr
    translated = run([str(installed / "seq2seq-translate"), str(checkpoint), "a b c",
                      "--plugins", "lab/scores.py"], cwd=tmp_path)  # fmt: skip
    assert len(translated.stdout.splitlines()) == 1
