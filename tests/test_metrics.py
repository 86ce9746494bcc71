"""Corpus scores against sacrebleu's own command line on the same text; the registered
validation metrics, their directions and their values."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from seq2seq import registry
from seq2seq.metrics import bleu_tokenizer, corpus_scores, format_score, format_scores
from seq2seq.metrics.base import (
    HOOK,
    LOSS,
    TRANSLATIONS,
    TranslationMetric,
    metric,
    metrics_of,
    validation_metric,
)

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


# ---------------------------------------------------------------- the validation metrics

# What each built-in is known to be: higher or lower is better, and where its value is from.
BUILT_IN = {"bleu": (True, TRANSLATIONS), "chrf": (True, TRANSLATIONS),
            "ter": (False, TRANSLATIONS), "loss": (False, LOSS), "ppl": (False, LOSS),
            "aer": (False, HOOK), "alignment_accuracy": (True, HOOK)}  # fmt: skip


@pytest.mark.parametrize("name", registry.names("metric"))
def test_every_metric_is_registered_with_its_direction_and_its_source(name):
    found = metric(name)
    assert found.name == name and isinstance(found.higher_is_better, bool)
    assert found.source in (TRANSLATIONS, LOSS, HOOK) and found.label
    if name in BUILT_IN:
        assert (found.higher_is_better, found.source) == BUILT_IN[name]
    assert found.direction == ("maximize" if found.higher_is_better else "minimize")


def test_the_built_ins_are_registered():
    assert set(BUILT_IN) <= set(registry.names("metric"))


def test_translation_metrics_score_as_corpus_scores_does():
    scores = corpus_scores(CHINESE_HYPS, CHINESE_REFS, "zh", ter=True)
    for found in metrics_of(TRANSLATIONS):
        assert found.score(CHINESE_HYPS, CHINESE_REFS, "zh") == pytest.approx(scores[found.name])


def test_loss_metrics_are_the_loss_and_its_exponential():
    assert metric("loss").from_loss(2.5) == 2.5
    assert metric("ppl").from_loss(2.5) == pytest.approx(math.exp(2.5))
    assert metric("ppl").from_loss(1e4) == pytest.approx(math.exp(50.0))  # capped, finite


@pytest.mark.parametrize(
    ("name", "value", "best", "improves"),
    [
        ("bleu", 20.0, None, True),
        ("bleu", 20.0, 19.0, True),
        ("bleu", 19.0, 19.0, False),  # a tie is no progress
        ("ter", 60.0, 61.0, True),
        ("ter", 62.0, 61.0, False),
        ("loss", float("nan"), None, False),
    ],
)
def test_a_value_improves_in_the_metrics_direction(name, value, best, improves):
    assert metric(name).improves(value, best) is improves


def test_an_unknown_metric_names_the_key_and_the_registered_ones():
    with pytest.raises(ValueError, match=r"trainer\.select_metric must be one of \(.*\), got 'blue'") as error:
        metric("blue")
    assert all(name in str(error.value) for name in registry.names("metric"))


def test_a_metric_states_its_direction_and_its_source():
    with pytest.raises(TypeError, match="higher_is_better must be True or False"):
        validation_metric("bad", higher_is_better="yes")
    with pytest.raises(TypeError, match="must subclass TranslationMetric"):
        validation_metric("bad", higher_is_better=True)(object)


def test_a_registered_metric_joins_the_others():
    @validation_metric("unigram_recall", higher_is_better=True)
    class UnigramRecall(TranslationMetric):
        def score(self, hypotheses, references, tgt_lang):
            pairs = zip(hypotheses, references, strict=True)
            found = sum(len(set(h.split()) & set(r.split())) for h, r in pairs)
            return 100.0 * found / sum(len(set(r.split())) for r in references)

    try:
        assert "unigram_recall" in [m.name for m in metrics_of(TRANSLATIONS)]
        assert metric("unigram_recall").score(["a b"], ["a c"], "en") == 50.0
    finally:
        registry.unregister("metric", "unigram_recall")
