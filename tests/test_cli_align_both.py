"""`seq2seq-align-both`: two tiny Transformers of opposite directions trained for seconds on a
toy lexicon corpus served as the Tatoeba presets' data (`helpers.toy_corpus_lines`), through
seq2seq-train's own entry, then their symmetrised links checked against what
`seq2seq-align FORWARD --reverse REVERSE` writes for the same pairs.

The models align poorly; what is checked is which models, pairs and method make the links,
which direction is trained or reused, and the one-line errors."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import shutil
import zipfile
from pathlib import Path

import pytest
from helpers import run_main, toy_corpus_lines
from omegaconf import OmegaConf

from seq2seq.align.gold import gold_set
from seq2seq.align.pharaoh import format_links
from seq2seq.cli import align, align_both
from seq2seq.data.fetch import MIRROR_ENV
from seq2seq.study.aer_rows import read_aligners

LEXICON_DATA = [
    "data.source.url=https://example.org/anki/toy-eng.zip", "data.source.member=toy.txt",
    "data.source.sha256=null", "data.valid_size=20", "data.test_size=20",
    "data.src_vocab_size=30", "data.tgt_vocab_size=30", "data.max_len=100", "data.max_tokens=512",
]  # fmt: skip
# make train's experiment (the command's default), shrunk to seconds
TINY = [
    "encoder.hidden_size=16", "decoder.hidden_size=16", "model.embed_dim=16",
    "encoder.num_layers=1", "decoder.num_layers=1", "encoder.heads=2", "decoder.heads=2",
    "attention.heads=2", "encoder.ff_size=24", "decoder.ff_size=24", "schedule.warmup_steps=2",
    "trainer.max_steps=10", "trainer.valid_every=10", "trainer.threads=1",
    "trainer.test_search.beam_size=1", "logging.progress_bar=false", "logging.tensorboard=false",
]  # fmt: skip


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """OUT_DIR after `seq2seq-align-both OUT_DIR --train OVERRIDES --json`, with the
    overrides, the command's exit code, stdout and the checkpoints' digests."""
    root = tmp_path_factory.mktemp("both")
    mirror = root / "mirror"
    mirror.mkdir()
    with zipfile.ZipFile(mirror / "toy-eng.zip", "w") as archive:
        archive.writestr("toy.txt", "\n".join(toy_corpus_lines(300, seed=0)) + "\n")
    overrides = [*LEXICON_DATA, f"data.root={root / 'data'}", *TINY]
    out, stdout = root / "out", io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(MIRROR_ENV, str(mirror))
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(io.StringIO()):
            code = align_both.main([str(out), "--train", *overrides, "--json"])
        checkpoints = {name: out / name / "checkpoints" / "best.pt" for name in ("zh_en", "en_zh")}
        yield {
            "root": root, "out": out, "overrides": overrides, "code": code,
            "stdout": stdout.getvalue(), "checkpoints": checkpoints,
            "digests": {name: digest(path) for name, path in checkpoints.items()},
        }  # fmt: skip


def seq2seq_align(capsys, forward: Path, reverse: Path, *argv: object) -> tuple[int, str]:
    """`seq2seq-align FORWARD --reverse REVERSE ARGV`: exit code and stdout."""
    code, out, _ = run_main(align.main, capsys, forward, "--reverse", reverse, *argv)
    return code, out


def test_training_both_writes_the_links_seq2seq_align_writes(trained, capsys, tmp_path):
    out, checkpoints = trained["out"], trained["checkpoints"]
    assert trained["code"] == 0
    # each direction trained by seq2seq-train's Hydra app, the reverse with the other preset
    for name, languages in (("zh_en", ("zh", "en")), ("en_zh", ("en", "zh"))):
        config = OmegaConf.load(out / name / ".hydra" / "config.yaml")
        assert (config.data.src_lang, config.data.tgt_lang) == languages
        assert config.data.name == f"tatoeba_{name}" and config.trainer.max_steps == 10
    split = trained["root"] / "data" / "prepared" / "tatoeba_zh_en"
    expected = tmp_path / "expected.align"
    code, _ = seq2seq_align(capsys, checkpoints["zh_en"], checkpoints["en_zh"],
                            "--src", split / "test.zh", "--tgt", split / "test.en",
                            "--symmetrise", "harmonic", "-o", expected)  # fmt: skip
    assert code == 0
    written = (out / "test.harmonic.align").read_text(encoding="utf-8")
    assert written == expected.read_text(encoding="utf-8") and len(written.splitlines()) == 20
    # the scores: seq2seq-align on the gold test pairs, written out as files
    files = {}
    pairs = gold_set("zh", "en", "test")
    for side, lines in (("zh", [p.source for p in pairs]), ("en", [p.target for p in pairs]),
                        ("align", [format_links(p.links) for p in pairs])):  # fmt: skip
        files[side] = tmp_path / f"gold.{side}"
        files[side].write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, scored = seq2seq_align(capsys, checkpoints["zh_en"], checkpoints["en_zh"],
                                 "--src", files["zh"], "--tgt", files["en"],
                                 "--gold", files["align"], "--json")  # fmt: skip
    assert code == 0 and json.loads(trained["stdout"]) == json.loads(scored)
    (row,) = read_aligners(out / "test.harmonic.aer.json")  # make compare's BASELINE_AER form
    assert row["test_aer"] == json.loads(scored)["aer"]


def test_a_trained_direction_is_reused_and_the_other_trained(trained, capsys, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(trained["out"] / "zh_en", out / "zh_en")
    kept = out / "zh_en" / "checkpoints" / "best.pt"
    before = kept.stat().st_mtime_ns
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(MIRROR_ENV, str(trained["root"] / "mirror"))
        code, _, err = run_main(align_both.main, capsys, out, "--train",
                                "--symmetrise", "grow-diag-final-and", *trained["overrides"])  # fmt: skip
    assert code == 0
    assert f"{out / 'zh_en'}: checkpoints/best.pt is there; not trained again" in err
    assert "training en→zh" in err and "training zh→en" not in err
    assert digest(kept) == trained["digests"]["zh_en"] and kept.stat().st_mtime_ns == before
    assert (out / "en_zh" / "checkpoints" / "best.pt").is_file()
    # a second time, nothing is trained: both checkpoints stay as they are
    digests = {name: digest(out / name / "checkpoints" / "best.pt") for name in ("zh_en", "en_zh")}
    code, _, err = run_main(align_both.main, capsys, out, "--train", *trained["overrides"],
                            "--symmetrise", "grow-diag-final-and", "-o", tmp_path / "again.align")  # fmt: skip
    assert code == 0 and "training" not in err and err.count("not trained again") == 2
    assert digests == {
        name: digest(out / name / "checkpoints" / "best.pt") for name in ("zh_en", "en_zh")
    }
    again = (tmp_path / "again.align").read_text(encoding="utf-8")
    assert again == (out / "test.grow-diag-final-and.align").read_text(encoding="utf-8")


@pytest.mark.parametrize("method", ["grow-diag-final-and", "intersection"])
def test_the_data_preset_given_is_the_forward_direction(trained, capsys, tmp_path, method):
    checkpoints = trained["checkpoints"]
    output = tmp_path / "en_zh.align"
    code, _, err = run_main(align_both.main, capsys, trained["out"], "data=tatoeba_en_zh",
                            *trained["overrides"], "--symmetrise", method, "-o", output)  # fmt: skip
    assert code == 0 and "training" not in err
    split = trained["root"] / "data" / "prepared" / "tatoeba_en_zh"
    expected = tmp_path / "expected.align"
    code, _ = seq2seq_align(capsys, checkpoints["en_zh"], checkpoints["zh_en"],
                            "--src", split / "test.en", "--tgt", split / "test.zh",
                            "--symmetrise", method, "-o", expected)  # fmt: skip
    assert code == 0
    assert output.read_text(encoding="utf-8") == expected.read_text(encoding="utf-8")


def test_given_pairs_and_gold_are_aligned_and_scored(trained, capsys, tmp_path):
    checkpoints = trained["checkpoints"]
    source, target, gold = (tmp_path / name for name in ("pairs.zh", "pairs.en", "pairs.gold"))
    source.write_text("我 喜欢 猫 。\n汤姆 吃 米饭 。\n", encoding="utf-8")
    target.write_text("I like cats.\nTom eat rice.\n", encoding="utf-8")
    gold.write_text("0-0 1-1 2-2\n0-0 1-1 2-2\n", encoding="utf-8")
    files = ["--src", source, "--tgt", target, "--gold", gold, "--json"]
    code, out, _ = run_main(align_both.main, capsys, trained["out"], *trained["overrides"],
                            *files, "-o", tmp_path / "both.align")  # fmt: skip
    code_align, expected = seq2seq_align(capsys, checkpoints["zh_en"], checkpoints["en_zh"],
                                         *files, "-o", tmp_path / "align.align")  # fmt: skip
    assert code == code_align == 0 and json.loads(out) == json.loads(expected)
    assert (tmp_path / "both.align").read_bytes() == (tmp_path / "align.align").read_bytes()


def test_bad_input_is_one_line_and_removes_nothing(trained, capsys, tmp_path):
    overrides, zh_en = trained["overrides"], trained["checkpoints"]["zh_en"]
    crossed = tmp_path / "crossed"  # an en_zh folder holding a zh→en checkpoint
    for name in ("zh_en", "en_zh"):
        (crossed / name / "checkpoints").mkdir(parents=True)
        shutil.copy(zh_en, crossed / name / "checkpoints" / "best.pt")
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine\n", encoding="utf-8")
    a_file = tmp_path / "a_file"
    a_file.write_text("x\n", encoding="utf-8")
    cases = [
        ([tmp_path / "new", *overrides], f"{tmp_path / 'new' / 'zh_en'}/checkpoints/best.pt: no "
         "checkpoint; add --train"),
        ([busy, "--train", *overrides], "OUT_DIR", "notes.txt"),
        ([a_file, "--train", *overrides], "OUT_DIR", str(a_file)),
        ([tmp_path / "out", "-o", a_file / "x.align", *overrides], "--output", "x.align"),
        ([crossed, *overrides], f"{crossed / 'en_zh' / 'checkpoints' / 'best.pt'} translates "
         "zh→en; the en_zh direction must translate en→zh"),
        ([tmp_path / "out", "--train", f"hydra.run.dir={tmp_path}"], "hydra.run.dir=", "leave it out"),
        ([tmp_path / "out", "--train", "data.src_lang=en"], "data.src_lang=en"),
        ([tmp_path / "out", "--train", "data=toy_copy"], "data=toy_copy: no data preset of the other"),
        ([tmp_path / "out", "--train", "encoder.no_such_key=1"], "no_such_key"),
        ([tmp_path / "out", "--gold", a_file], "--gold scores the links of --src and --tgt"),
        ([tmp_path / "out", "--src", a_file], "--src and --tgt go together"),
        ([tmp_path / "out", "--src", a_file, "--tgt", tmp_path / "absent", *overrides], "--tgt", "absent"),
        ([tmp_path / "out", "--train", f"data.alignments={a_file}"], "data.alignments=", "leave it out"),
        ([tmp_path / "out", "--rounds", "1", *overrides], "--rounds", "add --train"),
        ([tmp_path / "out", "--train", "--rounds", "-1"], "--rounds", "must be an integer from 0 to 20"),
        ([tmp_path / "out", "--train", "--rounds", "1", *overrides], "--rounds", "alignment=layer"),
    ]  # fmt: skip
    for argv, *expected in cases:
        code, out, err = run_main(align_both.main, capsys, *argv)
        assert code == 2 and out == "", (argv, err)
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        assert all(part in err for part in expected), (expected, err)
    assert not (tmp_path / "new").exists() and not (tmp_path / "out").exists()
    assert (busy / "notes.txt").read_text(encoding="utf-8") == "mine\n"
    assert a_file.read_text(encoding="utf-8") == "x\n"
    assert digest(crossed / "en_zh" / "checkpoints" / "best.pt") == trained["digests"]["zh_en"]
    assert sorted(path.name for path in crossed.iterdir()) == ["en_zh", "zh_en"]


def test_options_may_follow_the_overrides():
    parser = align_both.build_parser()
    args = parser.parse_intermixed_args(["out", "a=1", "--train", "b=2", "--symmetrise", "union"])
    assert args.overrides == ["a=1", "b=2"] and args.train and args.symmetrise == "union"


def test_layer_and_head_read_both_models_as_seq2seq_align_reads_them(trained, capsys, tmp_path):
    checkpoints, out = trained["checkpoints"], tmp_path / "out"
    shutil.copytree(trained["out"], out)
    reading = ["--layer", "0", "--head", "1"]
    code, _, err = run_main(align_both.main, capsys, out, *trained["overrides"], *reading)
    assert code == 0 and "aligned with" not in err  # the user's reading, not each default
    split = trained["root"] / "data" / "prepared" / "tatoeba_zh_en"
    expected = tmp_path / "expected.align"
    code, _ = seq2seq_align(capsys, checkpoints["zh_en"], checkpoints["en_zh"], *reading,
                            "--src", split / "test.zh", "--tgt", split / "test.en",
                            "-o", expected)  # fmt: skip
    assert code == 0
    written = (out / "test.harmonic.align").read_text(encoding="utf-8")
    assert written == expected.read_text(encoding="utf-8")
    default = (trained["out"] / "test.harmonic.align").read_text(encoding="utf-8")
    assert written != default  # head 1 alone is not each model's own reading
    (row,) = read_aligners(out / "test.harmonic.aer.json")
    assert row["model"].endswith("(zh→en + en→zh, layer 0 head 1)")


@pytest.mark.parametrize(
    ("reading", "message"),
    [(["--head", "first"], "--head: expected a head index (0, 1, ...) or mean"),
     (["--layer", "7"], "layer")],
)  # fmt: skip
def test_a_layer_or_head_the_models_lack_is_one_line(trained, capsys, reading, message):
    code, out, err = run_main(align_both.main, capsys, trained["out"], *trained["overrides"],
                              *reading, "-o", trained["root"] / "never.align")  # fmt: skip
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    assert message in err and "Traceback" not in err
    assert not (trained["root"] / "never.align").exists()


def test_a_round_trains_both_directions_on_the_links_of_the_round_before(trained, capsys, tmp_path):
    """Round 0: unsupervised layers; round 1: layers guided by round 0's symmetrised links
    of the training pairs, each direction's file in its own order, an empty line for each
    pair data.max_len drops."""
    out = tmp_path / "out"
    overrides = [*trained["overrides"], "data.max_len=20", "alignment=layer",
                 "alignment.training=unsupervised"]  # fmt: skip
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(MIRROR_ENV, str(trained["root"] / "mirror"))
        code, _, err = run_main(align_both.main, capsys, out, "--train", "--rounds", "1",
                                *overrides)  # fmt: skip
    assert code == 0, err
    assert "round 0: AER" in err and "round 1: AER" in err
    assert "on the 100 hand-aligned valid pairs" in err  # the valid gold set, counted once
    split = trained["root"] / "data" / "prepared" / "tatoeba_zh_en"
    expected = tmp_path / "train.align"  # round 0's two models on the prepared training pairs
    code, _ = seq2seq_align(capsys, out / "zh_en" / "checkpoints" / "best.pt",
                            out / "en_zh" / "checkpoints" / "best.pt",
                            "--src", split / "train.zh", "--tgt", split / "train.en",
                            "--symmetrise", "harmonic", "-o", expected)  # fmt: skip
    assert code == 0
    forward = (out / "round1" / "train.zh_en.align").read_text(encoding="utf-8").splitlines()
    every = expected.read_text(encoding="utf-8").splitlines()
    sources = (split / "train.zh").read_text(encoding="utf-8").splitlines()
    assert len(forward) == len(every) == len(sources)
    dropped = [index for index, line in enumerate(forward) if line != every[index]]
    assert dropped and all(forward[index] == "" for index in dropped)
    # the kept pairs are those round 1 trained on, each with its own line's links
    log = (out / "round1" / "zh_en" / "train.log").read_text(encoding="utf-8")
    kept = re.search(r"piece links of ([\d,]+) training pairs", log)
    assert kept and len(forward) - len(dropped) == int(kept.group(1).replace(",", ""))
    reverse = (out / "round1" / "train.en_zh.align").read_text(encoding="utf-8").splitlines()
    for ahead, back in zip(forward, reverse, strict=True):
        swapped = {tuple(reversed(link.split("-"))) for link in back.split()}
        assert swapped == {tuple(link.split("-")) for link in ahead.split()}
    for name in ("zh_en", "en_zh"):
        config = OmegaConf.load(out / "round1" / name / ".hydra" / "config.yaml")
        assert config.data.alignments == str(out / "round1" / f"train.{name}.align")
        assert config.alignment.separate and config.alignment.training == "guided"
        assert OmegaConf.load(out / name / ".hydra" / "config.yaml").alignment.training == (
            "unsupervised"
        )
    # the final links are round 1's models'
    final = tmp_path / "final.align"
    code, _ = seq2seq_align(capsys, out / "round1" / "zh_en" / "checkpoints" / "best.pt",
                            out / "round1" / "en_zh" / "checkpoints" / "best.pt",
                            "--src", split / "test.zh", "--tgt", split / "test.en",
                            "--symmetrise", "harmonic", "-o", final)  # fmt: skip
    assert code == 0
    assert (out / "test.harmonic.align").read_bytes() == final.read_bytes()
    (row,) = read_aligners(out / "test.harmonic.aer.json")
    assert row["model"].endswith("(zh→en + en→zh, round 1)")
    # again: every round's models are there, nothing is aligned or trained again
    before = {path: digest(path) for path in out.rglob("*.align")}
    code, _, err = run_main(align_both.main, capsys, out, "--train", "--rounds", "1", *overrides)
    assert code == 0 and "training zh→en" not in err and "training en→zh" not in err
    assert err.count("not trained again") == 4 and "written for" not in err
    assert before == {path: digest(path) for path in out.rglob("*.align")}
