"""Corpus BLEU, chrF and TER with sacrebleu: the one scoring path for validation, test and the CLI.

Scores are computed on detokenised text, one hypothesis and one reference per sentence,
with sacrebleu's metric objects so that every score comes with its signature (the exact
settings, for anyone who wants to reproduce it). BLEU tokenises Chinese targets with
sacrebleu's `zh` tokenizer (each CJK character a token): its default `13a` would see an
unsegmented Chinese sentence as a handful of long "words" and give a BLEU near zero.

`paired_bootstrap` tests whether systems differ from a baseline on the same test
sentences (paired bootstrap resampling, Koehn 2004, as sacrebleu's `PairedTest` does it)
and gives each system's 95% confidence interval of BLEU; `scripts/compare.py` uses it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sacrebleu.metrics import BLEU, CHRF, TER
from sacrebleu.significance import PairedTest

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


# ---------------------------------------------------------------- significance

BOOTSTRAP_RESAMPLES = 1000
SIGNIFICANCE_LEVEL = 0.05


@dataclass(frozen=True)
class BootstrapResult:
    """One system's test BLEU under paired bootstrap resampling against a baseline.

    bleu: the corpus BLEU; mean: its mean over the resamples; ci_low, ci_high: the 95%
    confidence interval as sacrebleu gives it (mean ± half the width of the 2.5-97.5
    percentile range of the resampled BLEU); p_value: the probability of a difference at
    least this large under the null hypothesis of no difference (None for the baseline).
    """

    name: str
    bleu: float
    mean: float
    ci_low: float
    ci_high: float
    p_value: float | None
    signature: str

    def significant(self, level: float = SIGNIFICANCE_LEVEL) -> bool:
        return self.p_value is not None and self.p_value < level


def paired_bootstrap(
    systems: Sequence[tuple[str, Sequence[str]]],
    references: Sequence[str],
    tgt_lang: str,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> list[BootstrapResult]:
    """Paired bootstrap resampling (Koehn 2004) of BLEU, with sacrebleu's `PairedTest`:
    the first of the `(name, hypotheses)` systems is the baseline, each other one is tested
    against it on the same `resamples` resamples of the sentences. One result per system,
    in order; the baseline's has no p-value.

    The resampling seed is sacrebleu's (12345, or the SACREBLEU_SEED environment
    variable), so the p-values and intervals are reproducible. A system whose hypotheses
    are the baseline's, line for line, gets p = 1: there is no difference to test
    (sacrebleu's formula would give 1/(resamples + 1) there, as every resampled difference
    equals the observed one).
    """
    if len(systems) < 1:
        raise ValueError("paired_bootstrap needs at least the baseline system")
    for _, hypotheses in systems:
        _check_corpus(list(hypotheses), list(references))
    metric = BLEU(tokenize=bleu_tokenizer(tgt_lang))
    named = [(name, list(hypotheses)) for name, hypotheses in systems]
    test = PairedTest(named, {"bleu": metric}, [list(references)], test_type="bs",
                      n_samples=resamples)  # fmt: skip
    signatures, scores = test()
    (key,) = (name for name in scores if name != "System")
    signature = str(signatures[key])
    baseline = named[0][1]
    found = []
    for (name, hypotheses), result in zip(named, scores[key], strict=True):
        p_value = result.p_value
        if p_value is not None and hypotheses == baseline:
            p_value = 1.0
        found.append(BootstrapResult(
            name, float(result.score), float(result.mean), float(result.mean - result.ci),
            float(result.mean + result.ci), None if p_value is None else float(p_value), signature,
        ))  # fmt: skip
    return found
