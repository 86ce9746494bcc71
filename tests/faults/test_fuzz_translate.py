"""Fuzzing `seq2seq-translate` with generated inputs and arguments (hypothesis).

Whatever the input file holds (any text, control characters, invalid UTF-8, very long or
empty lines) and whatever the search arguments, the CLI either translates every line (exit
0, one output line per input line) or refuses with one error line (exit 2); it never ends
in a traceback. The short run is part of `make test`; `make faults` runs the long one.
"""

from __future__ import annotations

import math

import pytest
from helpers import compose_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seq2seq.cli import translate
from seq2seq.runs.assemble import train_and_test

TINY_SLICE = [
    "data.max_pairs=1500",
    "data.valid_size=40",
    "data.test_size=40",
    "data.src_vocab_size=1000",
    "data.tgt_vocab_size=300",
    "data.max_len=24",
    "data.max_tokens=1024",
    "encoder=gru",
    "decoder=gru",
    "attention=additive",
    "encoder.hidden_size=8",
    "decoder.hidden_size=16",
    "model.embed_dim=16",
    "trainer.max_steps=2",
    "trainer.valid_every=2",
    "trainer.threads=1",
    "trainer.test_search.beam_size=1",
    "logging.progress_bar=false",
    "logging.tensorboard=false",
]

# Text the corpus never shows: control characters, joiners, CJK, emoji, tabs and spaces.
LINE_TEXT = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"),
    max_size=80,
)
RAW_LINE = st.one_of(
    LINE_TEXT.map(lambda text: text.encode("utf-8")),
    st.binary(max_size=40).map(lambda raw: raw.replace(b"\n", b" ").replace(b"\r", b" ")),
    st.sampled_from(["我爱中国。" * 60, "", " ", "\t", "\ufeff我爱中国。", "\x00"]).map(str.encode),
)
# Option values a user could type: valid ones most of the time, so that most examples are
# translated, and any integer or float (negative, zero, nan, inf) the rest of the time.
VALID_ARGUMENTS = st.fixed_dictionaries(
    {
        "beam": st.integers(1, 4),
        "n_best": st.just(1),
        "batch": st.integers(1, 6),
        "max_len_a": st.floats(0.0, 3.0),
        "max_len_b": st.integers(0, 12),
    }
)
ANY_ARGUMENTS = st.fixed_dictionaries(
    {
        "beam": st.integers(-2, 4),
        "n_best": st.integers(-1, 5),
        "batch": st.integers(-2, 6),
        "max_len_a": st.floats(-2.0, 3.0, allow_nan=False) | st.sampled_from([math.nan, math.inf]),
        "max_len_b": st.integers(-3, 12),
    }
)
ARGUMENTS = st.one_of(VALID_ARGUMENTS, VALID_ARGUMENTS, VALID_ARGUMENTS, ANY_ARGUMENTS)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, corpus_mirror, monkeypatch_module):
    root = tmp_path_factory.mktemp("fuzz")
    monkeypatch_module.setenv("SEQ2SEQ_DATA_MIRROR", str(corpus_mirror))
    cfg = compose_config(TINY_SLICE + [f"data.root={root / 'data'}"])
    train_and_test(cfg, root / "run", outputs_root=root)
    return root / "run" / "checkpoints" / "best.pt"


@pytest.fixture(scope="module")
def monkeypatch_module():
    patcher = pytest.MonkeyPatch()
    yield patcher
    patcher.undo()


def run_translate(capsys, path, lines: list[bytes], args: dict) -> tuple[int, list[str], list[str]]:
    """Write the lines to `path`, run the CLI on them; (exit code, stdout lines, stderr lines)."""
    path.write_bytes(b"\n".join(lines) + b"\n")
    argv = [
        str(args["checkpoint"]), "-i", str(path),
        "--beam-size", str(args["beam"]), "--n-best", str(args["n_best"]),
        "--batch-size", str(args["batch"]),
        "--max-len-a", str(args["max_len_a"]), "--max-len-b", str(args["max_len_b"]),
    ]  # fmt: skip
    try:
        code = translate.main(argv)
    except SystemExit as stop:  # argparse refuses a malformed option with exit code 2
        code = stop.code
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), [line for line in captured.err.splitlines() if line]


def check_outcome(code, out, err, lines: list[bytes], args: dict) -> None:
    assert not any("Traceback" in line for line in err), err
    assert code in (0, 2), (code, err)
    if code == 2:
        assert len(err) == 1, err  # one error line, nothing else
        return
    if args["n_best"] == 1:
        assert len(out) == len(lines), (len(out), len(lines))  # one output line per input
    else:
        assert all(line.split("\t")[0].isdigit() for line in out), out  # rank<TAB>score<TAB>text


def fuzz(capsys, tmp_path, checkpoint, fault_figures, examples: int) -> None:
    counts = {"examples": 0, "lines": 0, "refused": 0, "translated": 0}

    @settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(lines=st.lists(RAW_LINE, min_size=1, max_size=6), args=ARGUMENTS)
    def one_example(lines, args):
        args = {**args, "checkpoint": checkpoint}
        code, out, err = run_translate(capsys, tmp_path / "input.txt", lines, args)
        counts["examples"] += 1
        counts["lines"] += len(lines)
        counts["refused"] += code == 2
        counts["translated"] += len(lines) if code == 0 else 0
        check_outcome(code, out, err, lines, args)

    one_example()
    fault_figures.add("translate_fuzz_examples", counts["examples"])
    fault_figures.add("translate_fuzz_input_lines", counts["lines"])
    fault_figures.add("translate_fuzz_refused_with_one_line", counts["refused"])
    fault_figures.add("translate_fuzz_lines_translated", counts["translated"])


@pytest.mark.attack("cli")
def test_translate_survives_generated_inputs(capsys, tmp_path, checkpoint, fault_figures):
    fuzz(capsys, tmp_path, checkpoint, fault_figures, examples=25)


@pytest.mark.faults
@pytest.mark.attack("cli")
def test_translate_survives_thousands_of_generated_inputs(
    capsys, tmp_path, checkpoint, fault_figures
):
    fuzz(capsys, tmp_path, checkpoint, fault_figures, examples=600)
