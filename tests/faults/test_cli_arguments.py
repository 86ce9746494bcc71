"""Bad command-line arguments, input files and broken checkpoints given to
`seq2seq-translate` and `seq2seq-evaluate`: each ends with exactly one error line on stderr
naming what is wrong, exit code 2 and no traceback, before any translation is printed.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import torch
from helpers import TINY_TOY, compose_config

from seq2seq.cli import evaluate, translate
from seq2seq.runs.assemble import train_and_test

REPO_ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.attack("cli")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    """A real checkpoint: the toy model trained for two steps through the library."""
    root = tmp_path_factory.mktemp("tiny_cli")
    overrides = ["trainer.max_steps=2", "trainer.valid_every=2", "trainer.test_search.beam_size=1",
                 "logging.tensorboard=false", "data.source.train_size=64", "data.source.valid_size=8",
                 "data.source.test_size=8"]  # fmt: skip
    train_and_test(compose_config(TINY_TOY + overrides), root / "run", outputs_root=root)
    return root / "run" / "checkpoints" / "best.pt"


def run_cli(main: Callable[[Sequence[str]], int], argv: list[str], capsys) -> tuple[int, str, str]:
    """Exit code (returned or raised, as argparse does), stdout and stderr of one call."""
    try:
        code = main(argv)
    except SystemExit as stop:
        code = stop.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_error_line(code: int, out: str, err: str, fragment: str) -> None:
    lines = err.strip().splitlines()
    assert code == 2, err
    assert len(lines) == 1, err
    assert fragment in lines[0], err
    assert "Traceback" not in err
    assert out == ""


# Options shared by both programs: (arguments, what the error line must name).
SEARCH_CASES: dict[str, tuple[list[str], str]] = {
    "beam_size_zero": (["--beam-size", "0"], "--beam-size"),
    "beam_size_negative": (["--beam-size", "-3"], "--beam-size"),
    "beam_size_not_a_number": (["--beam-size", "five"], "--beam-size"),
    "batch_size_zero": (["--batch-size", "0"], "--batch-size"),
    "batch_size_negative": (["--batch-size", "-4"], "--batch-size"),
    "max_len_a_negative": (["--max-len-a", "-1"], "--max-len-a"),
    "max_len_a_nan": (["--max-len-a", "nan"], "--max-len-a"),
    "max_len_b_negative": (["--max-len-b", "-2"], "--max-len-b"),
    "length_penalty_infinite": (["--length-penalty", "inf"], "--length-penalty"),
    "device_unknown": (["--device", "banana"], "--device"),
}


def program_argv(program: str, checkpoint: Path, options: list[str], tmp_path: Path) -> list[str]:
    if program == "translate":
        return [str(checkpoint), "a b c", *options]
    return [str(checkpoint), "--split", "test", "-o", str(tmp_path / "out.hyp"), *options]


PROGRAMS = {"translate": translate.main, "evaluate": evaluate.main}


@pytest.mark.parametrize("program", list(PROGRAMS))
@pytest.mark.parametrize("case", list(SEARCH_CASES))
def test_bad_search_option(case, program, checkpoint, tmp_path, capsys):
    options, fragment = SEARCH_CASES[case]
    argv = program_argv(program, checkpoint, options, tmp_path)
    assert_one_error_line(*run_cli(PROGRAMS[program], argv, capsys), fragment)
    assert not (tmp_path / "out.hyp").exists()


def test_n_best_larger_than_the_beam(checkpoint, capsys):
    argv = [str(checkpoint), "a b c", "--beam-size", "2", "--n-best", "3"]
    assert_one_error_line(*run_cli(translate.main, argv, capsys), "--n-best")


@pytest.mark.parametrize("program", list(PROGRAMS))
def test_cuda_on_a_machine_without_cuda(program, checkpoint, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    argv = program_argv(program, checkpoint, ["--device", "cuda"], tmp_path)
    code, out, err = run_cli(PROGRAMS[program], argv, capsys)
    assert_one_error_line(code, out, err, "no CUDA device")
    assert "corrupt" not in err


def write_invalid_utf8(path: Path, line: int) -> Path:
    rows = [b"a b c"] * 4
    rows[line - 1] = b"a \xff\xfe b"
    path.write_bytes(b"\n".join(rows) + b"\n")
    return path


def test_translate_input_with_invalid_utf8_names_the_line(checkpoint, tmp_path, capsys):
    source = write_invalid_utf8(tmp_path / "in.txt", line=3)
    code, out, err = run_cli(translate.main, [str(checkpoint), "-i", str(source)], capsys)
    assert_one_error_line(code, out, err, "line 3")
    assert "UTF-8" in err


def test_translate_missing_input_file(checkpoint, tmp_path, capsys):
    argv = [str(checkpoint), "-i", str(tmp_path / "absent.txt")]
    assert_one_error_line(*run_cli(translate.main, argv, capsys), "absent.txt")


def test_evaluate_source_with_invalid_utf8_names_the_line(checkpoint, tmp_path, capsys):
    source = write_invalid_utf8(tmp_path / "src.txt", line=2)
    reference = tmp_path / "ref.txt"
    reference.write_text("a b c\n" * 4, encoding="utf-8")
    argv = [str(checkpoint), "--src", str(source), "--ref", str(reference)]
    assert_one_error_line(*run_cli(evaluate.main, argv, capsys), "line 2")


@pytest.mark.parametrize(
    "options, fragment",
    [(["--src", "SRC"], "--ref"), (["--src", "SRC", "--ref", "SHORT"], "lines")],
    ids=["src_without_ref", "lengths_differ"],
)
def test_evaluate_file_mode_errors(options, fragment, checkpoint, tmp_path, capsys):
    (tmp_path / "SRC").write_text("a b\nc d\n", encoding="utf-8")
    (tmp_path / "SHORT").write_text("b a\n", encoding="utf-8")
    argv = [str(checkpoint), *(str(tmp_path / o) if o.isupper() else o for o in options)]
    assert_one_error_line(*run_cli(evaluate.main, argv, capsys), fragment)


# ---------------------------------------------------------------- broken checkpoints


def garbage_sentencepiece(payload: dict) -> None:
    payload["tokenizers"]["src"].update(kind="sentencepiece", model=b"\x00not a model\xff" * 8)


def garbage_symbols(payload: dict) -> None:
    payload["tokenizers"]["tgt"]["model"] = b"\xff{garbage"


def heads_not_dividing_the_width(payload: dict) -> None:
    payload["config"]["encoder"] = {
        "_target_": "seq2seq.models.encoders.TransformerEncoder",
        "hidden_size": 16,
        "heads": 3,
        "num_layers": 1,
        "ff_size": 32,
    }


def untied_width(payload: dict) -> None:
    payload["config"]["decoder"]["hidden_size"] = 24  # the output no longer fits embed_dim 32


BROKEN: dict[str, tuple[Callable[[dict], None], str]] = {
    "garbage_sentencepiece_bytes": (garbage_sentencepiece, "tokenizers.src"),
    "garbage_symbol_tokeniser_bytes": (garbage_symbols, "tokenizers.tgt"),
    "heads_not_dividing_the_width": (heads_not_dividing_the_width, "encoder"),
    "decoder_width_breaks_tied_embeddings": (untied_width, "model.tie_embeddings"),
}


@pytest.mark.parametrize("program", list(PROGRAMS))
@pytest.mark.parametrize("case", list(BROKEN))
def test_broken_checkpoint(case, program, checkpoint, tmp_path, capsys):
    edit, fragment = BROKEN[case]
    payload = copy.deepcopy(torch.load(checkpoint, weights_only=True))
    edit(payload)
    broken = tmp_path / "broken.pt"
    torch.save(payload, broken)
    code, out, err = run_cli(PROGRAMS[program], program_argv(program, broken, [], tmp_path), capsys)
    assert_one_error_line(code, out, err, fragment)
    assert "broken.pt" in err


def test_bad_option_through_the_command_line(checkpoint, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "seq2seq.cli.translate", str(checkpoint), "a b c", "--beam-size", "0"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )  # fmt: skip
    assert_one_error_line(result.returncode, result.stdout, result.stderr, "--beam-size")


def test_valid_options_still_translate(checkpoint, tmp_path, capsys):
    source = tmp_path / "in.txt"
    source.write_text("a b c\n\nc b a\n", encoding="utf-8")
    argv = [str(checkpoint), "-i", str(source), "--beam-size", "2", "--n-best", "2"]
    code, out, err = run_cli(translate.main, argv, capsys)
    assert code == 0, err
    assert [line.split("\t")[0] for line in out.splitlines()] == ["1", "2", "1", "1", "2"]
