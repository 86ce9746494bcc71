"""Corpus BLEU, chrF and TER with sacrebleu: the one scoring path for validation, test and the CLI.

Scores are computed on detokenised text, one hypothesis and one reference per sentence,
with sacrebleu's metric objects so that every score comes with its signature (the exact
settings, for anyone who wants to reproduce it). BLEU tokenises Chinese targets with
sacrebleu's `zh` tokenizer (each CJK character a token): its default `13a` would see an
unsegmented Chinese sentence as a handful of long "words" and give a BLEU near zero; TER
uses its Asian-script support there.

Each is a registered validation metric (`seq2seq.metrics.base`): BLEU and chrF are
computed at every validation, TER (slower) only when `trainer.select_metric=ter`.
"""

from __future__ import annotations

from sacrebleu.metrics import BLEU, CHRF, TER

from seq2seq.data.languages import is_chinese
from seq2seq.metrics.base import TranslationMetric, validation_metric, without_separators


def bleu_tokenizer(tgt_lang: str) -> str:
    """sacrebleu's tokenizer for BLEU on `tgt_lang`: "zh" for Chinese, else "13a"."""
    return "zh" if is_chinese(tgt_lang) else "13a"


@validation_metric("bleu", higher_is_better=True, label="BLEU", default=True)
class Bleu(TranslationMetric):
    """Corpus BLEU (Papineni et al. 2002): the geometric mean of the 1- to 4-gram
    precisions times the brevity penalty, 0-100."""

    def scorer(self, tgt_lang: str) -> BLEU:
        return BLEU(tokenize=bleu_tokenizer(tgt_lang))


@validation_metric("chrf", higher_is_better=True, label="chrF2", default=True)
class ChrF(TranslationMetric):
    """chrF2 (Popović 2015): the character n-gram F-score with β = 2, 0-100."""

    def scorer(self, tgt_lang: str) -> CHRF:
        return CHRF()


@validation_metric("ter", higher_is_better=False, label="TER")
class Ter(TranslationMetric):
    """Translation edit rate (Snover et al. 2006): edits (shifts included) per reference
    word, 0-100 and more; lower is better."""

    def scorer(self, tgt_lang: str) -> TER:
        return TER(asian_support=is_chinese(tgt_lang))


def corpus_scores(
    hypotheses: list[str], references: list[str], tgt_lang: str, *, ter: bool = False
) -> dict[str, float | str]:
    """Corpus scores of detokenised `hypotheses` against one reference each.

    Returns `bleu`, `chrf` (and `ter` with `ter=True`, slower) as floats on a 0-100
    scale, with `bleu_signature`, `chrf_signature` (and `ter_signature`). The separators of
    pseudo-documents are not scored (`without_separators`).
    """
    check_corpus(hypotheses, references)
    hypotheses, references = without_separators(hypotheses), without_separators(references)
    metrics: list[TranslationMetric] = [Bleu(), ChrF()] + ([Ter()] if ter else [])
    scores: dict[str, float | str] = {}
    for metric in metrics:
        scorer = metric.scorer(tgt_lang)
        scores[metric.name] = scorer.corpus_score(hypotheses, [references]).score
        scores[f"{metric.name}_signature"] = str(scorer.get_signature())
    return scores


def check_corpus(hypotheses: list[str], references: list[str]) -> None:
    """ValueError unless both are equally long, non-empty lists of strings."""
    if len(hypotheses) != len(references):
        raise ValueError(
            f"hypotheses and references differ in length: {len(hypotheses)} != {len(references)}"
        )
    if not hypotheses:
        raise ValueError("hypotheses and references are empty: nothing to score")
    for name, sentences in (("hypotheses", hypotheses), ("references", references)):
        bad = [i for i, sentence in enumerate(sentences) if not isinstance(sentence, str)]
        if bad:
            raise ValueError(f"{name} must be strings; not at positions {bad[:10]}")


def format_score(name: str, score: float, signature: str) -> str:
    """ "BLEU = 23.45 (nrefs:1|case:mixed|...)"."""
    return f"{name} = {score:.2f} ({signature})"


def format_scores(scores: dict[str, float | str]) -> str:
    """One `format_score` line per metric in a `corpus_scores` result."""
    labels = {metric.name: metric.label for metric in (Bleu(), ChrF(), Ter())}
    return "\n".join(
        format_score(label, scores[key], scores[f"{key}_signature"])
        for key, label in labels.items()
        if key in scores
    )
