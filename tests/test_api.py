"""The Python API (`seq2seq.api`, re-exported by `seq2seq`) against the commands it wraps.

What the API gives for a checkpoint and some inputs is checked against what the commands
print for the same checkpoint and inputs, run in process through their `main(argv)` (the
training command in a subprocess): `seq2seq-translate`'s n-best lines, scores and Pharaoh
links, the weights and pieces of its `--html` page; `seq2seq-evaluate --json`'s scores and
hypotheses file; `seq2seq-train`'s one-line error for a bad override or value. The models:
a toy Transformer that the API itself trains (2 updates, 1 encoder layer, 2 decoder layers
of 4 cross-attention heads), a toy GRU without attention trained by `train_and_test`, and
the tiny zh→en lexicon Transformer (tests/lexicon_model.py), whose checkpoint stores the
head training chose on the valid gold pairs.
"""

from __future__ import annotations

import html
import json
import logging
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import TOY_TRANSFORMER, compose_config, run_main
from lexicon_model import lexicon_checkpoint

import seq2seq
from seq2seq.align.pharaoh import parse_links
from seq2seq.checkpoint import CheckpointError
from seq2seq.cli import evaluate, translate
from seq2seq.config.build import ConfigError
from seq2seq.config.search_settings import SearchSettingsError
from seq2seq.metrics import corpus_scores
from seq2seq.runs.assemble import train_and_test

REPO_ROOT = Path(__file__).resolve().parent.parent
LINES = ["a b c d e", "j i h", "", "c c a b j i"]
LONG = " ".join("abcdefghij"[i % 10] for i in range(130))  # 130 pieces: over max_len 100
TIME_FOLDER = re.compile(r"\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d(_\d+)?")


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory) -> tuple[seq2seq.TrainResult, list[str], Path]:
    """A toy Transformer trained by `seq2seq.train`: the result, the overrides, the root."""
    root = tmp_path_factory.mktemp("api")
    overrides = TOY_TRANSFORMER + [f"data.root={root / 'data'}"]
    return seq2seq.train(overrides, outputs=root / "runs"), overrides, root


@pytest.fixture(scope="module")
def model(toy_run) -> seq2seq.Model:
    return seq2seq.load(toy_run[0].checkpoint)


@pytest.fixture(scope="module")
def no_attention(tmp_path_factory) -> Path:
    """A toy GRU with attention=none, trained as the tests train (not by the API)."""
    root = tmp_path_factory.mktemp("none")
    toy = [o for o in TOY_TRANSFORMER if not o.startswith(("encoder", "decoder", "attention", "model"))]  # fmt: skip
    overrides = [*toy, "encoder=gru", "decoder=gru", "attention=none", "encoder.hidden_size=8",
                 "decoder.hidden_size=8", "model.embed_dim=8", f"data.root={root / 'data'}"]  # fmt: skip
    train_and_test(compose_config(overrides), root / "run")
    return root / "run" / "checkpoints" / "best.pt"


@pytest.fixture(scope="module")
def lexicon(tmp_path_factory) -> Path:
    """The tiny zh→en Transformer of tests/lexicon_model.py (20 source pieces at most)."""
    return lexicon_checkpoint(tmp_path_factory.mktemp("lexicon"))


def page_data(page: str) -> dict:
    """The JSON data of an attention viewer page."""
    found = re.search(r'<script type="application/json" id="attention-data">(.*?)</script>',
                      page, re.S)  # fmt: skip
    return json.loads(found.group(1))


# ---------------------------------------------------------------- train


def test_train_makes_a_run_folder_as_the_command_does(toy_run, model):
    run, overrides, root = toy_run
    assert run.run_dir.parent == root / "runs" / "default"  # outputs/<name>/<date_time>
    assert TIME_FOLDER.fullmatch(run.run_dir.name)
    assert run.results == json.loads((run.run_dir / "results.json").read_text(encoding="utf-8"))
    assert run.checkpoint == run.run_dir / "checkpoints" / "best.pt" and run.checkpoint.is_file()
    record = run.run_dir / ".hydra"
    assert yaml.safe_load((record / "overrides.yaml").read_text(encoding="utf-8")) == overrides
    config = yaml.safe_load((record / "config.yaml").read_text(encoding="utf-8"))
    assert config["data"]["name"] == "toy_reverse" and config["trainer"]["max_steps"] == 2
    # the results are the scores of the translations the run wrote
    hypotheses = (run.run_dir / "test.hyp").read_text(encoding="utf-8").splitlines()
    references = (run.run_dir / "test.ref").read_text(encoding="utf-8").splitlines()
    assert (
        run.results["test"]["bleu"]
        == corpus_scores(hypotheses, references, model.languages[1])["bleu"]
    )
    log = (run.run_dir / "train.log").read_text(encoding="utf-8")
    assert f"run folder {run.run_dir}" in log and "][INFO] - " in log


def test_train_puts_the_logging_back(tmp_path, capsys):
    logger = logging.getLogger("seq2seq")
    level, handlers = logger.level, list(logger.handlers)
    run = seq2seq.train(TOY_TRANSFORMER + [f"data.root={tmp_path / 'data'}",
                                           f"hydra.run.dir={tmp_path / 'mine'}"])  # fmt: skip
    assert run.run_dir == tmp_path / "mine" and run.checkpoint.is_file()
    assert (logger.level, logger.handlers) == (level, handlers)
    printed = capsys.readouterr().out
    assert f"run folder: {run.run_dir}" in printed and "test BLEU" in printed


def cli_train_error(tmp_path: Path, override: str) -> str:
    """The last line seq2seq-train prints for `override` (its run folder below tmp_path)."""
    command = [sys.executable, "-m", "seq2seq.cli.train", *TOY_TRANSFORMER, override,
               f"data.root={tmp_path / 'data'}", f"hydra.run.dir={tmp_path / 'cli'}"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    return (done.stdout + done.stderr).strip().splitlines()[-1]


@pytest.mark.parametrize(
    ("override", "refused_by"),
    [("trainer.max_stepz=3", "hydra"), ("trainer.max_steps=0", "the door")],
    ids=["unknown key (Hydra)", "value out of range (the door)"],
)
def test_a_bad_override_is_the_commands_one_line_error(tmp_path, override, refused_by):
    with pytest.raises(ConfigError) as refused:
        seq2seq.train(TOY_TRANSFORMER + [override], outputs=tmp_path / "runs")
    message = str(refused.value)
    assert "\n" not in message and override.split("=")[0].split(".")[-1] in message
    assert not (tmp_path / "runs").exists()  # refused before any folder is made
    line = cli_train_error(tmp_path, override)
    if refused_by == "hydra":  # Hydra's refusal, printed by the command
        assert line == f"seq2seq-train: {message}"
    else:  # the checks at the door, logged by the command as Hydra formats its log
        assert re.fullmatch(r"\[[^]]+\]\[[\w.]+\]\[ERROR\] - " + re.escape(message), line)


def test_train_takes_a_composed_config_or_overrides_not_both(tmp_path):
    config = compose_config(TOY_TRANSFORMER)
    with pytest.raises(ValueError, match="not both"):
        seq2seq.train(["trainer.max_steps=1"], config=config)
    with pytest.raises(TypeError, match="DictConfig"):
        seq2seq.train(config={"trainer": {"max_steps": 1}})


# ---------------------------------------------------------------- translate


def test_translations_links_and_scores_equal_seq2seq_translate(model, toy_run, capsys):
    results = model.translate(LINES, beam=3, n_best=2)
    code, out, err = run_main(translate.main, capsys, toy_run[0].checkpoint, *LINES,
                              "--beam-size", 3, "--n-best", 2, "--alignments")  # fmt: skip
    assert code == 0, err
    printed = out.splitlines()
    assert len(results) == len(LINES) and all(isinstance(r, seq2seq.Result) for r in results)
    assert [len(r.texts) for r in results] == [2, 2, 0, 2]
    for result in results:
        if not result.source:  # an empty line: one empty output without links
            assert printed.pop(0).split("\t") == ["1", "0.0000", "", ""]
            assert (result.text, result.scores, result.links) == ("", [], [])
            continue
        ranks = [printed.pop(0).split("\t") for _ in result.texts]
        assert [int(rank) for rank, _, _, _ in ranks] == [1, 2]
        assert result.texts == [text for _, _, text, _ in ranks]
        assert [f"{score:.4f}" for score in result.scores] == [score for _, score, _, _ in ranks]
        assert result.links == sorted(parse_links(ranks[0][3]).sure)
        assert result.text == result.texts[0]
    assert printed == []


def test_attention_and_pieces_equal_the_commands_viewer_page(model, toy_run, tmp_path, capsys):
    results = model.translate(LINES, beam=3)
    page = tmp_path / "page.html"
    code, _, err = run_main(translate.main, capsys, toy_run[0].checkpoint, *LINES,
                            "--beam-size", 3, "--html", page)  # fmt: skip
    assert code == 0, err
    sentences = page_data(page.read_text(encoding="utf-8"))["sentences"]
    shown = [result for result in results if result.source]  # the page skips empty lines
    assert [s["source"] for s in sentences] == [r.source for r in shown]
    for sentence, result in zip(sentences, shown):
        cross = sentence["views"][0]
        assert (cross["name"], sentence["output"]) == ("cross", result.text)
        assert (cross["rows"], cross["columns"]) == (result.target_pieces, result.source_pieces)
        on_page = np.array([layer["heads"] for layer in cross["layers"]], dtype=np.float32)
        assert result.attention.dtype == np.float32 and result.attention.shape == on_page.shape
        assert result.attention.shape[:2] == (2, 4)  # decoder layers, cross-attention heads
        np.testing.assert_allclose(result.attention, on_page, atol=5e-5 + 1e-6, rtol=0)
    empty = results[LINES.index("")]
    assert (empty.text, empty.texts, empty.target_pieces, empty.attention, empty.links) == ("", [], [], None, [])  # fmt: skip


def test_a_str_gives_one_result_and_the_search_keywords_work(model):
    one = model.translate(LINES[0])
    assert isinstance(one, seq2seq.Result) and one.source == LINES[0]
    assert one.text == model.translate([LINES[0]])[0].text == model.translate(LINES)[0].text
    greedy, beam = model.translate(LINES[0], beam=1), model.translate(LINES[0], beam=4, n_best=4)
    assert len(greedy.texts) == 1 and len(beam.texts) == 4
    short = model.translate(LINES[0], max_len_a=0.0, max_len_b=2)
    assert len(short.target_pieces) <= 3  # two pieces and the EOS
    assert model.translate((LINES[0], LINES[1]))[1].source == LINES[1]


def test_bad_search_keywords_are_the_commands_errors_by_their_keyword(model, toy_run, capsys):
    for keyword, option, value in [("beam", "--beam-size", 0), ("n_best", "--n-best", 3),
                                   ("max_len_b", "--max-len-b", -1)]:  # fmt: skip
        with pytest.raises(SearchSettingsError) as refused:
            model.translate("a b", **{keyword: value})
        code, _, err = run_main(
            translate.main, capsys, toy_run[0].checkpoint, "a b", "--beam-size", 1, option, value
        )  # the API's beam by default
        assert code == 2
        assert err.strip() == f"seq2seq-translate: error: {option} {refused.value.problem}"
        assert str(refused.value) == f"{keyword} {refused.value.problem}"
    for wrong in (None, 3, ["a", 3]):
        with pytest.raises(TypeError, match="str"):
            model.translate(wrong)


def test_the_notes_say_what_happened_to_the_input(model):
    cut, plain = model.translate([LONG, LINES[0]])
    assert len(cut.source_pieces) - 1 == model.translator.max_source_len == 100
    assert cut.notes == ["130 source pieces, truncated to the model's limit of 100: only the first 100 were translated"]  # fmt: skip
    assert "truncated" in repr(cut) and plain.notes == []


def test_links_count_the_words(model):
    result = model.translate("a b c d e")
    assert result.source_words == ["a", "b", "c", "d", "e"]
    assert result.target_words == result.text.split()
    assert result.word_links() == [(result.source_words[s], result.target_words[t]) for s, t in result.links]  # fmt: skip
    # argmax extraction: each target word links exactly one source word
    assert sorted(t for _, t in result.links) == list(range(len(result.target_words)))


def test_a_chinese_model_links_and_notes_as_the_command_does(lexicon, capsys, caplog):
    lines = ["汤姆吃米饭。", "Hello world.", "我喜欢猫。" * 6]
    results = seq2seq.load(lexicon).translate(lines)
    caplog.clear()  # what follows is the command's
    code, out, err = run_main(translate.main, capsys, lexicon, *lines, "--beam-size", 1,
                              "--alignments")  # fmt: skip
    assert code == 0, err
    for result, line in zip(results, out.splitlines(), strict=True):
        text, links = line.split("\t")
        assert result.text == text and result.links == sorted(parse_links(links).sure)
    assert results[0].source_words == list(lines[0])  # a Chinese word is a character
    assert "(chosen on the valid gold" in err  # links from the head training chose
    warnings = [record.getMessage() for record in caplog.records if record.levelname == "WARNING"]
    assert results[0].notes == []
    (script,) = results[1].notes
    assert f"line 2: {script}" in warnings
    (cut,) = results[2].notes  # the cut in the command's words, then what it means
    assert f"line 3: {cut.split(': only')[0]}" in warnings and "30 source pieces" in cut


def test_a_model_without_attention_gives_no_weights_and_no_links(no_attention):
    result = seq2seq.load(no_attention).translate("a b c")
    assert result.text and result.attention is None and result.links is None
    assert result.word_links() == [] and result._repr_png_() is None
    assert "<iframe" not in result._repr_html_() and "attention=none" in result._repr_html_()


def test_load_refuses_as_the_commands_do(tmp_path, capsys):
    broken = tmp_path / "broken.pt"
    broken.write_bytes(b"not a checkpoint")
    for path in (tmp_path / "missing.pt", broken):
        with pytest.raises(CheckpointError) as refused:
            seq2seq.load(path)
        code, _, err = run_main(translate.main, capsys, path, "a b")
        assert code == 2 and err.strip() == f"seq2seq-translate: {refused.value}"
    with pytest.raises(ValueError, match="device 'tpu' is not a device name"):
        seq2seq.load(broken, device="tpu")
    with pytest.raises(ValueError, match="threads must be an integer from 1"):
        seq2seq.load(broken, threads=0)


def test_model_describes_itself(model, toy_run):
    config = yaml.safe_load((toy_run[0].run_dir / ".hydra" / "config.yaml").read_text())
    assert model.languages == (config["data"]["src_lang"], config["data"]["tgt_lang"])
    assert "encoder=transformer" in model.title and "heads=4" in model.title
    assert "→".join(model.languages) in repr(model) and model.title in repr(model)
    assert model.gold_aer() is None  # no hand-aligned pairs for a toy task


# ---------------------------------------------------------------- pictures


def test_a_result_shows_the_commands_viewer_page_inline(model, toy_run, tmp_path, capsys):
    result = model.translate(LINES[0])
    page = tmp_path / "one.html"
    code, _, err = run_main(translate.main, capsys, toy_run[0].checkpoint, LINES[0],
                            "--beam-size", 1, "--html", page)  # fmt: skip
    assert code == 0, err
    inline = result._repr_html_()
    frame = re.fullmatch(r'<iframe srcdoc="([^"]*)".*></iframe>', inline, re.S)
    assert frame is not None
    assert page_data(html.unescape(frame.group(1))) == page_data(page.read_text(encoding="utf-8"))


def test_plot_png_and_bertviz_hold_the_results_weights(model):
    result = model.translate(LINES[0])
    figure = result.plot(layer=1, head=2)
    drawn = figure.axes[0].images[0].get_array()
    np.testing.assert_allclose(np.asarray(drawn), result.attention[1, 2], atol=1e-6)
    assert figure._repr_png_()[:8] == b"\x89PNG\r\n\x1a\n"
    mean = np.asarray(result.plot(layer=0).axes[0].images[0].get_array())
    np.testing.assert_allclose(mean, result.attention[0].mean(axis=0), atol=1e-6)
    assert result._repr_png_()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="layer 5"):
        result.plot(layer=5)
    inputs = result.to_bertviz()
    assert inputs["encoder_tokens"] == result.source_pieces
    assert inputs["decoder_tokens"] == result.target_pieces
    for layer, weights in enumerate(inputs["cross_attention"]):
        np.testing.assert_allclose(weights[0].numpy(), result.attention[layer], atol=1e-6)


def test_compare_shows_results_side_by_side_under_titles(model, no_attention):
    first = model.translate(LINES[0])
    other = seq2seq.load(no_attention).translate(LINES[0])
    shown = seq2seq.compare(first, other)
    assert shown.titles == (model.title, seq2seq.load(no_attention).title)
    page = shown._repr_html_()
    assert all(html.escape(title) in page for title in shown.titles)
    assert page.count("<iframe") == 1  # the model without attention shows a note
    assert seq2seq.compare(first, titles=["mine"]).titles == ("mine",)
    with pytest.raises(ValueError, match="2 results but 1 titles"):
        seq2seq.compare(first, other, titles=["one"])
    with pytest.raises(TypeError, match=r"compare\(\*results\)"):
        seq2seq.compare([first, other])
    with pytest.raises(ValueError, match="at least one"):
        seq2seq.compare()


# ---------------------------------------------------------------- evaluate


def test_evaluate_equals_seq2seq_evaluate(model, toy_run, tmp_path, capsys):
    sources = ["a b c d e", "j i h", "c c a b j i", "e d"]
    (tmp_path / "src.txt").write_text("\n".join(sources) + "\n", encoding="utf-8")
    references = [" ".join(reversed(line.split())) for line in sources]
    (tmp_path / "ref.txt").write_text("\n".join(references) + "\n", encoding="utf-8")
    scores = seq2seq.evaluate(model, tmp_path / "src.txt", tmp_path / "ref.txt", beam=2,
                              ter=True, output=tmp_path / "api.hyp")  # fmt: skip
    code, out, err = run_main(evaluate.main, capsys, toy_run[0].checkpoint, "--src",
                              tmp_path / "src.txt", "--ref", tmp_path / "ref.txt", "--beam-size",
                              2, "--ter", "--json", "-o", tmp_path / "cli.hyp")  # fmt: skip
    assert code == 0, err
    assert scores == json.loads(out) and {"bleu", "chrf", "ter"} <= set(scores)
    assert (tmp_path / "api.hyp").read_bytes() == (tmp_path / "cli.hyp").read_bytes()
    # a checkpoint path, and the command's search defaults (beam 5)
    by_path = seq2seq.evaluate(
        str(toy_run[0].checkpoint), tmp_path / "src.txt", tmp_path / "ref.txt"
    )
    code, out, err = run_main(evaluate.main, capsys, toy_run[0].checkpoint, "--src",
                              tmp_path / "src.txt", "--ref", tmp_path / "ref.txt", "--json",
                              "-o", tmp_path / "default.hyp")  # fmt: skip
    assert code == 0, err
    assert by_path == json.loads(out)


def test_evaluate_names_the_file_that_does_not_fit(model, tmp_path):
    (tmp_path / "src.txt").write_text("a b\nc d\n", encoding="utf-8")
    (tmp_path / "ref.txt").write_text("b a\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"source_file .*src.txt has 2 lines, reference_file .*ref.txt has 1"):  # fmt: skip
        seq2seq.evaluate(model, tmp_path / "src.txt", tmp_path / "ref.txt")


# ---------------------------------------------------------------- the package


def test_import_seq2seq_stays_light_until_the_api_is_used():
    code = (
        "import sys, seq2seq\n"
        "before = [m for m in ('torch', 'hydra', 'seq2seq.api') if m in sys.modules]\n"
        "load = seq2seq.load\n"
        "print(before, 'seq2seq.api' in sys.modules, 'torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "True", "True"]
    assert set(seq2seq.__all__) >= {"load", "train", "evaluate", "compare", "Model", "Result"}
    assert all(getattr(seq2seq, name) is getattr(seq2seq.api, name) for name in seq2seq.api.__all__)
    with pytest.raises(AttributeError, match="no attribute 'lod'"):
        seq2seq.lod  # noqa: B018
