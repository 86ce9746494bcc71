"""Hostile checkpoints: a config tampered with to run code, read the environment or write
files must be refused, with one error line naming the offending key and exit code 2,
before anything is built; the user's files stay untouched.

A real tiny checkpoint is trained once per module (toy task, two steps), then each attack
edits a copy of its config and saves it with `torch.save`, as an attacker would.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from helpers import TINY_TOY, compose_config

from seq2seq.checkpoint import CheckpointError
from seq2seq.cli import evaluate, translate
from seq2seq.runs.assemble import train_and_test
from seq2seq.search.translator import Translator
from seq2seq.study.alignments import runs_figure
from tools.bench.decoding_speed import decoding_section

REPO_ROOT = Path(__file__).resolve().parents[2]
VICTIM_TEXT = b"precious user data\n"
VICTIM_MTIME_NS = 1_000_000_000 * 10**9  # an old, recognisable modification time

pytestmark = pytest.mark.attack("checkpoint")


def train_tiny_checkpoint(root: Path) -> Path:
    """Train the toy model for two steps through the library; returns best.pt."""
    cfg = compose_config(
        TINY_TOY
        + [
            "trainer.max_steps=2",
            "trainer.valid_every=2",
            "trainer.test_search.beam_size=1",
            "logging.tensorboard=false",
            "data.source.train_size=64",
            "data.source.valid_size=8",
            "data.source.test_size=8",
        ]
    )
    train_and_test(cfg, root / "run", outputs_root=root)
    return root / "run" / "checkpoints" / "best.pt"


@pytest.fixture(scope="module")
def payload(tmp_path_factory) -> dict:
    """The checkpoint's contents, loaded as plain data."""
    path = train_tiny_checkpoint(tmp_path_factory.mktemp("tiny"))
    return torch.load(path, weights_only=True)


@pytest.fixture
def victim(tmp_path) -> Path:
    """A user file that no checkpoint may touch."""
    path = tmp_path / "victim.txt"
    path.write_bytes(VICTIM_TEXT)
    os.utime(path, ns=(VICTIM_MTIME_NS, VICTIM_MTIME_NS))
    return path


def assert_untouched(victim: Path) -> None:
    assert victim.read_bytes() == VICTIM_TEXT
    assert victim.stat().st_mtime_ns == VICTIM_MTIME_NS


def save_tampered(payload: dict, folder: Path, edit: Callable[[dict], None]) -> Path:
    """A copy of the checkpoint whose config `edit` changed in place."""
    hostile = copy.deepcopy(payload)
    edit(hostile["config"])
    path = folder / "hostile.pt"
    torch.save(hostile, path)
    return path


def open_for_writing(victim: Path) -> dict:
    return {"_target_": "builtins.open", "_args_": [str(victim), "w"]}


def setting(key: str, value: object) -> tuple[str, Callable[[dict, Path], None]]:
    """An attack that sets one plain value, `part.name`: the error must name that key."""
    part, name = key.split(".", 1)
    return key, lambda config, victim: config[part].update({name: value})


# Each attack: the key the error must name, and how it edits the config (given the victim).
ATTACKS: dict[str, tuple[str, Callable[[dict, Path], None]]] = {
    "nested_open": (
        "encoder.dropout",
        lambda c, v: c["encoder"].update(
            dropout={"_target_": "builtins.len", "_args_": [[open_for_writing(v)]]}
        ),
    ),
    "nested_path_write_text": (
        "decoder.dropout",
        lambda c, v: c["decoder"].update(
            dropout={
                "_target_": "pathlib.Path.write_text",
                "_args_": [{"_target_": "pathlib.Path", "_args_": [str(v)]}, "pwned"],
            }
        ),
    ),
    "nested_target_keeping_the_width": (
        "encoder.hidden_size",
        lambda c, v: c["encoder"].update(
            hidden_size={
                "_target_": "builtins.max",
                "_args_": [16, {"_target_": "builtins.len", "_args_": [[open_for_writing(v)]]}],
            }
        ),
    ),
    "env_interpolation_in_model": setting("encoder.cell", "${oc.env:SEQ2SEQ_ATTACK_CELL}"),
    "env_interpolation_in_data": setting("data.root", "${oc.env:HOME}"),
    "unknown_top_level_target": setting("encoder._target_", "os.system"),
    "target_on_the_prefix_not_in_the_list": setting(
        "attention._target_", "seq2seq.data.fetch.fetch"
    ),
    "wrong_type": setting("encoder.num_layers", "many"),
    "unknown_key": setting("decoder.evil", 1),
    "hydra_args_at_part_top": (
        "encoder._args_",
        lambda c, v: c["encoder"].update(_args_=[[open_for_writing(v)]]),
    ),
    "unknown_section": (
        "evil",
        lambda c, v: c.update(evil={"_target_": "os.system", "_args_": ["true"]}),
    ),
    "dropout_out_of_range": setting("encoder.dropout", 1.5),
    "data_name_with_separators": setting("data.name", "../../evil"),
}


def run_program(program: str, checkpoint: Path, tmp_path: Path) -> int:
    if program == "translate":
        return translate.main([str(checkpoint), "a b c"])
    return evaluate.main([str(checkpoint), "--split", "test", "-o", str(tmp_path / "out.hyp")])


def assert_one_error_line(err: str, key: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert key in lines[0], err
    assert "Traceback" not in err


@pytest.mark.parametrize("program", ["translate", "evaluate"])
@pytest.mark.parametrize("attack", list(ATTACKS))
def test_hostile_config_is_refused_naming_the_key(
    attack, program, payload, tmp_path, victim, capsys, monkeypatch, fault_figures
):
    monkeypatch.setenv("SEQ2SEQ_ATTACK_CELL", "gru")
    monkeypatch.chdir(tmp_path)
    key, edit = ATTACKS[attack]
    hostile = save_tampered(payload, tmp_path, lambda config: edit(config, victim))
    code = run_program(program, hostile, tmp_path)
    assert_one_error_line(capsys.readouterr().err, key)
    assert code == 2
    assert_untouched(victim)
    assert not (tmp_path / "out.hyp").exists()
    fault_figures.add("hostile_checkpoints_refused", 1)


def test_hostile_checkpoint_through_the_command_line(payload, tmp_path, victim, fault_figures):
    key, edit = ATTACKS["nested_open"]
    hostile = save_tampered(payload, tmp_path, lambda config: edit(config, victim))
    result = subprocess.run(
        [sys.executable, "-m", "seq2seq.cli.translate", str(hostile), "a b c"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert_one_error_line(result.stderr, key)
    assert result.stdout == ""
    assert_untouched(victim)
    fault_figures.add("hostile_checkpoints_refused", 1)


def test_translator_load_refuses_before_building(payload, tmp_path, victim):
    """The path `make bench` (tools.bench.decoding_speed) and scripts/compare_alignments.py
    load checkpoints through."""
    key, edit = ATTACKS["nested_target_keeping_the_width"]
    hostile = save_tampered(payload, tmp_path, lambda config: edit(config, victim))
    with pytest.raises(CheckpointError, match=key.replace(".", r"\.")):
        Translator.load(hostile)
    assert_untouched(victim)


def test_compare_alignments_refuses_a_hostile_run(payload, tmp_path, victim):
    """`scripts/compare_alignments.py` draws through `seq2seq.study.alignments.runs_figure`."""
    key, edit = ATTACKS["nested_open"]
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    hostile = save_tampered(payload, tmp_path, lambda config: edit(config, victim))
    hostile.rename(run / "checkpoints" / "best.pt")
    with pytest.raises(CheckpointError, match=key.replace(".", r"\.")):
        runs_figure([tmp_path], sentence="a b c")
    assert_untouched(victim)


def test_bench_decoding_refuses_a_hostile_checkpoint(payload, tmp_path, victim):
    key, edit = ATTACKS["nested_path_write_text"]
    hostile = save_tampered(payload, tmp_path, lambda config: edit(config, victim))
    lines = decoding_section([hostile], 4, torch.device("cpu"))
    assert any("failed" in line and key in line for line in lines), lines
    assert_untouched(victim)


# ---------------------------------------------------------------- the data section


@pytest.fixture
def no_downloads(monkeypatch) -> list[str]:
    """Record (and refuse) every URL the data fetcher would open."""
    requested: list[str] = []

    def refuse(request, *args, **kwargs):
        requested.append(getattr(request, "full_url", str(request)))
        raise OSError("network access is not allowed in this test")

    monkeypatch.setattr("seq2seq.data.fetch.urlopen", refuse)
    return requested


def _foreign_data(url: str, root: Path) -> Callable[[dict], None]:
    def edit(config: dict) -> None:
        config["data"].update(source={"name": "tabular", "url": url, "member": ""}, root=str(root))

    return edit


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:1/corpus.zip", "http://127.0.0.1:1/x%2F..%2F..%2Fevil.zip"]
)
def test_evaluate_uses_the_users_data_not_the_checkpoints(
    url, payload, tmp_path, no_downloads, capsys, monkeypatch, fault_figures
):
    outside = tmp_path / "outside"
    hostile = save_tampered(payload, tmp_path, _foreign_data(url, outside))
    monkeypatch.chdir(tmp_path)
    code = evaluate.main(
        [str(hostile), "--split", "test", "--data-root", str(tmp_path / "mine"),
         "-o", str(tmp_path / "out.hyp")]
    )  # fmt: skip
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert no_downloads == []
    assert not outside.exists()
    if code == 2:  # refused at load: the URL itself is malformed
        assert_one_error_line(err, "data.source.url")
    else:  # evaluated on the user's toy_reverse config, generated in memory
        assert code == 0 and (tmp_path / "out.hyp").is_file()
    fault_figures.add("hostile_checkpoints_refused", 1)


def test_evaluate_plain_foreign_url_is_ignored(
    payload, tmp_path, no_downloads, capsys, monkeypatch
):
    outside = tmp_path / "outside"
    hostile = save_tampered(payload, tmp_path, _foreign_data("http://127.0.0.1:1/c.zip", outside))
    monkeypatch.chdir(tmp_path)
    code = evaluate.main([str(hostile), "--split", "valid", "-o", str(tmp_path / "out.hyp")])
    assert code == 0, capsys.readouterr().err
    assert "BLEU" in capsys.readouterr().out
    assert no_downloads == [] and not outside.exists()


def test_evaluate_refuses_a_corpus_name_without_a_config(payload, tmp_path, capsys, monkeypatch):
    hostile = save_tampered(payload, tmp_path, lambda c: c["data"].update(name="not_a_config"))
    monkeypatch.chdir(tmp_path)
    code = evaluate.main([str(hostile), "--split", "test", "-o", str(tmp_path / "out.hyp")])
    assert_one_error_line(capsys.readouterr().err, "--data")
    assert code == 2
    assert list(tmp_path.iterdir()) == [hostile]


def test_evaluate_refuses_data_whose_tokenizers_differ(payload, tmp_path, capsys, monkeypatch):
    hostile = save_tampered(payload, tmp_path, lambda c: c["data"]["source"].update(vocab_size=8))
    monkeypatch.chdir(tmp_path)
    code = evaluate.main([str(hostile), "--split", "test", "-o", str(tmp_path / "out.hyp")])
    assert_one_error_line(capsys.readouterr().err, "tokeniser")
    assert code == 2
