"""`seq2seq-align` and `seq2seq-translate --alignments` end to end: a GRU with additive
attention trained briefly on the toy `reverse` task must align the anti-diagonal (target j
↔ source n-1-j, `seq2seq.data.toy_tasks.gold_alignment`), and every output must parse back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import compose_config, run_main

from seq2seq.align.extract import AlignmentError
from seq2seq.align.pharaoh import Links, format_links, parse_links, read_links
from seq2seq.cli import align, translate
from seq2seq.data.toy_tasks import ToySpec, gold_alignment, toy_splits
from seq2seq.metrics.aer import corpus_counts
from seq2seq.runs.assemble import train_and_test

TOY = {"task": "reverse", "num_symbols": 10, "min_len": 3, "max_len": 8}
SIZES = {"train": 4000, "valid": 32, "test": 64}
SEED = 1234
REVERSE_GRU = [
    "data=toy_reverse", f"data.source.vocab_size={TOY['num_symbols']}",
    f"data.source.min_len={TOY['min_len']}", f"data.source.max_len={TOY['max_len']}",
    f"data.source.train_size={SIZES['train']}", f"data.source.valid_size={SIZES['valid']}",
    f"data.source.test_size={SIZES['test']}", f"data.seed={SEED}", "data.max_tokens=512",
    "encoder=gru", "decoder=gru", "attention=additive", "encoder.hidden_size=16",
    "decoder.hidden_size=32", "model.embed_dim=32", "encoder.dropout=0.0", "decoder.dropout=0.0",
    "optim.lr=5e-3", "schedule=inverse_sqrt", "schedule.warmup_steps=50",
    "trainer.max_steps=300", "trainer.valid_every=300", "trainer.threads=1",
    "trainer.log_every=100", "trainer.label_smoothing=0.0", "trainer.test_search.beam_size=1",
    "logging.progress_bar=false", "logging.tensorboard=false",
]  # fmt: skip


def anti_diagonal(sentence: str) -> Links:
    length = len(sentence.split())
    return Links.of((source, j) for j, source in enumerate(gold_alignment("reverse", length)))


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory) -> dict[str, Path]:
    """A trained reverse model and its test split as files: src, tgt and gold links."""
    root = tmp_path_factory.mktemp("align")
    train_and_test(compose_config(REVERSE_GRU + [f"data.root={root / 'data'}"]), root / "run")
    test = toy_splits(ToySpec(**TOY), SIZES, SEED)["test"]
    files = {"checkpoint": root / "run" / "checkpoints" / "best.pt"}
    for name, lines in (
        ("src", [source for source, _ in test]),
        ("tgt", [target for _, target in test]),
        ("gold", [format_links(anti_diagonal(source)) for source, _ in test]),
    ):
        files[name] = root / f"test.{name}"
        files[name].write_text("\n".join(lines) + "\n", encoding="utf-8")
    return files


def test_a_trained_reverse_model_aligns_the_anti_diagonal(toy_run, capsys, tmp_path):
    files, out_file = toy_run, tmp_path / "test.align"
    code, out, err = run_main(align.main, capsys, files["checkpoint"], "--src", files["src"],
                              "--tgt", files["tgt"], "--gold", files["gold"], "-o", out_file,
                              "--json")  # fmt: skip
    assert code == 0, err
    scores = json.loads(out)
    assert scores["aer"] < 0.2 and scores["sentences"] == SIZES["test"]
    proposed = read_links(out_file)
    sources = files["src"].read_text(encoding="utf-8").splitlines()
    assert [len(links.sure) for links in proposed] == [len(s.split()) for s in sources]  # argmax
    assert corpus_counts(proposed, [anti_diagonal(s) for s in sources]).aer == scores["aer"]


def test_links_go_to_stdout_without_gold_and_parse_back(toy_run, capsys):
    files = toy_run
    code, out, _ = run_main(align.main, capsys, files["checkpoint"], "--src", files["src"],
                            "--tgt", files["tgt"], "--extract", "threshold", "--threshold", "0.5")  # fmt: skip
    assert code == 0
    lines = out.split("\n")[:-1]
    assert len(lines) == SIZES["test"]
    assert all(parse_links(line).sure == parse_links(line).possible for line in lines)


def test_score_mode_gives_the_same_scores_and_reads_one_based_gold(toy_run, capsys, tmp_path):
    files, out_file = toy_run, tmp_path / "test.align"
    _, out, _ = run_main(align.main, capsys, files["checkpoint"], "--src", files["src"],
                         "--tgt", files["tgt"], "--gold", files["gold"], "-o", out_file,
                         "--json")  # fmt: skip
    with_checkpoint = json.loads(out)
    code, out, _ = run_main(align.main, capsys, "--score", out_file, "--gold", files["gold"],
                            "--json")  # fmt: skip
    scored = json.loads(out)
    assert code == 0 and scored == with_checkpoint
    one_based = tmp_path / "gold.1"
    one_based.write_text(
        "\n".join(" ".join(f"{i + 1}-{j + 1}" for i, j in sorted(links.sure))
                  for links in read_links(files["gold"])) + "\n", encoding="utf-8",
    )  # fmt: skip
    code, out, _ = run_main(align.main, capsys, "--score", out_file, "--gold", one_based,
                            "--one-based", "--json")  # fmt: skip
    assert code == 0 and json.loads(out) == scored
    code, out, _ = run_main(align.main, capsys, "--score", out_file, "--gold", files["gold"])
    assert out.startswith("precision ") and " AER " in out and f"{SIZES['test']} pairs" in out


def test_translate_appends_the_links_of_its_own_output(toy_run, capsys):
    files = toy_run
    sources = files["src"].read_text(encoding="utf-8").splitlines()[:20]
    code, out, _ = run_main(translate.main, capsys, files["checkpoint"], *sources,
                            "--alignments", "--beam-size", "1")  # fmt: skip
    assert code == 0
    rows = [line.split("\t") for line in out.split("\n")[:-1]]
    assert len(rows) == len(sources) and all(len(row) == 2 for row in rows)
    reversed_rows = [
        (source, parse_links(links))
        for source, (text, links) in zip(sources, rows)
        if text == " ".join(reversed(source.split()))
    ]
    assert len(reversed_rows) >= 15  # the model reverses
    proposed = [links for _, links in reversed_rows]
    assert corpus_counts(proposed, [anti_diagonal(s) for s, _ in reversed_rows]).aer < 0.2


def test_translate_alignments_with_nbest_and_an_empty_line(toy_run, capsys):
    code, out, _ = run_main(translate.main, capsys, toy_run["checkpoint"], "a b c", "",
                            "--alignments", "--beam-size", "2", "--n-best", "2")  # fmt: skip
    assert code == 0
    rows = [line.split("\t") for line in out.split("\n")[:-1]]
    assert [row[0] for row in rows] == ["1", "2", "1"]
    assert all(len(row) == 4 for row in rows)
    assert rows[-1][2:] == ["", ""]  # an empty line: no text, no links
    for row in rows:
        parse_links(row[3])


def test_translate_alignments_without_attention_weights_is_one_line(toy_run, capsys, monkeypatch):
    def no_weights(*_):
        raise AlignmentError("the model has no attention weights (attention=none)")

    monkeypatch.setattr(translate, "translation_links", no_weights)
    code, out, err = run_main(translate.main, capsys, toy_run["checkpoint"], "a b", "--alignments")
    assert code == 2 and out == ""
    assert (
        err == "seq2seq-translate: --alignments: the model has no attention weights "
        "(attention=none)\n"
    )


def test_errors_with_a_checkpoint_are_one_line(toy_run, capsys, tmp_path):
    files = toy_run
    short = tmp_path / "short.tgt"
    short.write_text("a\n", encoding="utf-8")
    base = [files["checkpoint"], "--src", files["src"]]
    cases = [
        (["--tgt", short], [f"--src {files['src']} has 64 lines", f"--tgt {short} has 1"]),
        (["--tgt", files["tgt"], "--layer", "5"], ["layer 5", "1 attention layer"]),
        (["--tgt", files["tgt"], "--head", "3"], ["head 3", "1 head"]),
        (["--tgt", files["tgt"], "--gold", short], [f"--gold {short} has 1 lines"]),
        (["--tgt", files["tgt"], "--device", "tpu"], ["--device: 'tpu'"]),
        (["--tgt", files["tgt"], "-o", short / "x.align"], ["--output", "x.align", "not a folder"]),
    ]
    for extra, expected in cases:
        code, out, err = run_main(align.main, capsys, *base, *extra)
        assert code == 2 and out == "", (extra, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
        assert all(part in err for part in expected), (extra, err)


def test_a_gold_link_beyond_its_pair_suggests_one_based(toy_run, capsys, tmp_path):
    files = toy_run
    gold = tmp_path / "gold.1"
    lines = ["0-0"] * SIZES["test"]
    lines[2] = "9-9"
    gold.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, _, err = run_main(align.main, capsys, files["checkpoint"], "--src", files["src"],
                            "--tgt", files["tgt"], "--gold", gold)  # fmt: skip
    assert code == 2 and f"--gold {gold} line 3: link 9-9 lies outside" in err
    assert "1-based?" in err


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        ([], "give a checkpoint with --src and --tgt, or --score FILE with --gold"),
        (["--score", "x.align"], "--score needs --gold"),
        (["ckpt.pt", "--score", "x", "--gold", "g"], "--score scores an existing file"),
        (["ckpt.pt", "--src", "s"], "a checkpoint needs --src and --tgt"),
        (["--head", "first"], "expected a head index (0, 1, ...) or mean"),
        (["--extract", "max"], "invalid choice: 'max'"),
        (["ckpt.pt", "--src", "s", "--tgt", "t", "--threshold", "2"], "threshold must be"),
        (["ckpt.pt", "--src", "s", "--tgt", "t", "--symmetrise", "union"], "give the other one"),
        (["--score", "x", "--gold", "g", "--reverse", "r.pt"], "give no checkpoint, --reverse"),
        (["--symmetrise", "grow"], "invalid choice: 'grow'"),
    ],
)
def test_wrong_options_are_one_line(capsys, argv, expected):
    code, _, err = run_main(align.main, capsys, *argv)
    assert code == 2 and expected in err and len(err.strip().splitlines()) == 1


def test_scoring_names_the_file_line_and_token_of_a_bad_link(capsys, tmp_path):
    proposed, gold = tmp_path / "hyp.align", tmp_path / "gold.align"
    proposed.write_text("0-0\n1-1\n", encoding="utf-8")
    gold.write_text("0-0 0-1-P\n1-1 1:2\n", encoding="utf-8")
    code, _, err = run_main(align.main, capsys, "--score", proposed, "--gold", gold)
    assert code == 2 and f"--gold {gold} line 2: malformed link '1:2'" in err
    gold.write_text("0-0\n", encoding="utf-8")
    code, _, err = run_main(align.main, capsys, "--score", proposed, "--gold", gold)
    assert code == 2 and f"--gold {gold} has 1 lines" in err
    code, _, err = run_main(align.main, capsys, "--score", tmp_path / "absent", "--gold", gold)
    assert code == 2 and "--score" in err and "absent" in err


def test_scoring_without_a_checkpoint_by_hand(capsys, tmp_path):
    # Pair 1: A = {0-0, 1-1}, S = {0-0}, P = S ∪ {1-1}; pair 2: A = {}, S = {0-1}.
    # |A| = 2, |S| = 2, |A∩S| = 1, |A∩P| = 2: precision 1, recall 0.5, AER 1 − 3/4.
    proposed, gold = tmp_path / "hyp.align", tmp_path / "gold.align"
    proposed.write_text("0-0 1-1\n\n", encoding="utf-8")
    gold.write_text("0-0 1p1\n0-1\n", encoding="utf-8")
    code, out, _ = run_main(align.main, capsys, "--score", proposed, "--gold", gold, "--json")
    scores = json.loads(out)
    assert code == 0 and scores["precision"] == 1.0 and scores["recall"] == 0.5
    assert scores["aer"] == pytest.approx(0.25)
