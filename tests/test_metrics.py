"""Corpus scores against sacrebleu's own command line on the same text."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from seq2seq.metrics import bleu_tokenizer, corpus_scores, format_score, format_scores

ENGLISH_REFS = ["The cat sat on the mat.", "He went to Beijing yesterday.", "I like apples a lot!"]
ENGLISH_HYPS = ["The cat sat on a mat.", "Yesterday he went to Beijing.", "I like apples!"]
CHINESE_REFS = ["我很喜欢吃苹果。", "他昨天去了北京。", "猫坐在垫子上。"]
CHINESE_HYPS = ["我喜欢苹果。", "他昨天去北京了。", "猫坐在垫子上。"]


def sacrebleu_cli(tmp_path: Path, hyps: list[str], refs: list[str], *options: str) -> dict:
    """{metric name: (score, signature)} from `python -m sacrebleu` on files in tmp_path."""
    (tmp_path / "ref.txt").write_text("\n".join(refs) + "\n", encoding="utf-8")
    (tmp_path / "hyp.txt").write_text("\n".join(hyps) + "\n", encoding="utf-8")
    command = [sys.executable, "-m", "sacrebleu", "ref.txt", "-i", "hyp.txt", "-w", "4", *options]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, check=True)
    parsed = json.loads(result.stdout)
    entries = parsed if isinstance(parsed, list) else [parsed]  # a list for several metrics
    return {entry["name"]: (entry["score"], entry["signature"]) for entry in entries}


def assert_same_scores(ours: dict, cli: dict) -> None:
    """Each of our scores and signatures equals the command line's."""
    for ours_name, cli_name in (("bleu", "BLEU"), ("chrf", "chrF2"), ("ter", "TER")):
        score, signature = cli[cli_name]
        assert ours[ours_name] == pytest.approx(score, abs=1e-4), ours_name
        assert ours[f"{ours_name}_signature"] == signature, ours_name


def test_english_scores_equal_the_command_line(tmp_path):
    cli = sacrebleu_cli(tmp_path, ENGLISH_HYPS, ENGLISH_REFS, "-m", "bleu", "chrf", "ter")
    ours = corpus_scores(ENGLISH_HYPS, ENGLISH_REFS, "en", ter=True)
    assert_same_scores(ours, cli)
    assert 0 < ours["bleu"] < 100


def test_chinese_scores_equal_the_command_line_for_en_zh(tmp_path):
    # Told the pair is en-zh, the command line picks the zh tokenizer by itself.
    options = ("-l", "en-zh", "-m", "bleu", "chrf", "ter", "--ter-asian-support")
    cli = sacrebleu_cli(tmp_path, CHINESE_HYPS, CHINESE_REFS, *options)
    ours = corpus_scores(CHINESE_HYPS, CHINESE_REFS, "zh", ter=True)
    assert_same_scores(ours, cli)
    assert "tok:zh" in ours["bleu_signature"]


def test_zh_tokenizer_changes_bleu_on_unsegmented_chinese(tmp_path):
    as_13a = sacrebleu_cli(tmp_path, CHINESE_HYPS, CHINESE_REFS, "-m", "bleu", "--tokenize", "13a")
    chinese = corpus_scores(CHINESE_HYPS, CHINESE_REFS, "zh")
    not_chinese = corpus_scores(CHINESE_HYPS, CHINESE_REFS, "en")
    assert not_chinese["bleu"] == pytest.approx(as_13a["BLEU"][0], abs=1e-4)
    assert chinese["bleu"] > not_chinese["bleu"] + 10  # characters match where "words" do not


@pytest.mark.parametrize(
    ("lang", "tokenizer"),
    [
        ("zh", "zh"),
        ("zh-Hans", "zh"),
        ("ZH_tw", "zh"),
        ("cmn", "zh"),
        ("ja", "13a"),
        ("en", "13a"),
        ("de", "13a"),
    ],
)
def test_bleu_tokenizer_by_target_language(lang, tokenizer):
    assert bleu_tokenizer(lang) == tokenizer


def test_identical_text_scores_100():
    scores = corpus_scores(CHINESE_REFS, CHINESE_REFS, "zh", ter=True)
    assert scores["bleu"] == pytest.approx(100.0)
    assert scores["chrf"] == pytest.approx(100.0)
    assert scores["ter"] == pytest.approx(0.0)


def test_ter_is_optional():
    assert set(corpus_scores(ENGLISH_HYPS, ENGLISH_REFS, "en")) == {
        "bleu",
        "bleu_signature",
        "chrf",
        "chrf_signature",
    }


def test_format_score_and_scores():
    assert format_score("BLEU", 23.456, "tok:zh") == "BLEU = 23.46 (tok:zh)"
    scores = corpus_scores(ENGLISH_HYPS, ENGLISH_REFS, "en")
    assert format_scores(scores).splitlines() == [
        f"BLEU = {scores['bleu']:.2f} ({scores['bleu_signature']})",
        f"chrF2 = {scores['chrf']:.2f} ({scores['chrf_signature']})",
    ]


@pytest.mark.parametrize(
    ("hyps", "refs", "message"),
    [
        (["a", "b"], ["a"], "differ in length: 2 != 1"),
        ([], [], "empty"),
        (["a", None], ["a", "b"], "hypotheses must be strings; not at positions \\[1\\]"),
    ],
)
def test_bad_corpus_raises(hyps, refs, message):
    with pytest.raises(ValueError, match=message):
        corpus_scores(hyps, refs, "en")
