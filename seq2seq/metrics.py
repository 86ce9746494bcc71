"""Corpus BLEU, chrF and TER with sacrebleu: the one scoring path for validation, test and the CLI.

Scores are computed on detokenised text, one hypothesis and one reference per sentence,
with sacrebleu's metric objects so that every score comes with its signature (the exact
settings, for anyone who wants to reproduce it). BLEU tokenises Chinese targets with
sacrebleu's `zh` tokenizer (each CJK character a token): its default `13a` would see an
unsegmented Chinese sentence as a handful of long "words" and give a BLEU near zero.
"""

from __future__ import annotations

from sacrebleu.metrics import BLEU, CHRF, TER

from seq2seq.data.languages import is_chinese


def bleu_tokenizer(tgt_lang: str) -> str:
    """sacrebleu's tokenizer for BLEU on `tgt_lang`: "zh" for Chinese, else "13a"."""
    return "zh" if is_chinese(tgt_lang) else "13a"


def corpus_scores(
    hypotheses: list[str], references: list[str], tgt_lang: str, *, ter: bool = False
) -> dict[str, float | str]:
    """Corpus scores of detokenised `hypotheses` against one reference each.

    Returns `bleu`, `chrf` (and `ter` with `ter=True`, slower) as floats on a 0-100
    scale, with `bleu_signature`, `chrf_signature` (and `ter_signature`).
    """
    _check_corpus(hypotheses, references)
    chinese = is_chinese(tgt_lang)
    metrics = {"bleu": BLEU(tokenize=bleu_tokenizer(tgt_lang)), "chrf": CHRF()}
    if ter:
        metrics["ter"] = TER(asian_support=chinese)
    scores: dict[str, float | str] = {}
    for name, metric in metrics.items():
        scores[name] = metric.corpus_score(hypotheses, [references]).score
        scores[f"{name}_signature"] = str(metric.get_signature())
    return scores


def _check_corpus(hypotheses: list[str], references: list[str]) -> None:
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
    names = {"bleu": "BLEU", "chrf": "chrF2", "ter": "TER"}
    return "\n".join(
        format_score(label, scores[key], scores[f"{key}_signature"])
        for key, label in names.items()
        if key in scores
    )
