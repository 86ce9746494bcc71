"""Bootstrap resampling of BLEU (Koehn 2004, as sacrebleu's `PairedTest` does it).

`paired_bootstrap` tests whether systems differ from a baseline on the same test
sentences and gives each system's 95% confidence interval of BLEU; the comparison of runs
uses it. `gap_interval` asks the other question of two splits: how far apart one model's
BLEU on two different sets of sentences (valid and test) may fall by the choice of the
sentences alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sacrebleu.significance import PairedTest

from seq2seq.metrics.base import without_separators
from seq2seq.metrics.sacrebleu_scores import Bleu, check_corpus

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
    equals the observed one). So does a system that scores BLEU 0 against a baseline of 0:
    an n-gram order without a match in the corpus has none in any resample either, so
    every resample scores both 0. The separators of pseudo-documents are not scored
    (`without_separators`), as in `corpus_scores`.
    """
    if len(systems) < 1:
        raise ValueError("paired_bootstrap needs at least the baseline system")
    for _, hypotheses in systems:
        check_corpus(list(hypotheses), list(references))
    metric = Bleu().scorer(tgt_lang)
    named = [(name, without_separators(list(hypotheses))) for name, hypotheses in systems]
    references = without_separators(list(references))  # a document's words, as corpus_scores
    test = PairedTest(named, {"bleu": metric}, [references], test_type="bs",
                      n_samples=resamples)  # fmt: skip
    signatures, scores = test()
    (key,) = (name for name in scores if name != "System")
    signature = str(signatures[key])
    baseline, baseline_score = named[0][1], float(scores[key][0].score)
    found = []
    for (name, hypotheses), result in zip(named, scores[key], strict=True):
        p_value = result.p_value
        both_zero = float(result.score) == 0.0 == baseline_score
        if p_value is not None and (hypotheses == baseline or both_zero):
            p_value = 1.0
        found.append(BootstrapResult(
            name, float(result.score), float(result.mean), float(result.mean - result.ci),
            float(result.mean + result.ci), None if p_value is None else float(p_value), signature,
        ))  # fmt: skip
    return found


@dataclass(frozen=True)
class GapInterval:
    """test − valid BLEU of one model and its 95% bootstrap interval (`gap_interval`)."""

    gap: float
    ci_low: float
    ci_high: float
    resamples: int

    def excludes_zero(self) -> bool:
        """True when the whole interval lies on one side of 0: a gap the sampling of the two
        splits' sentences alone would rarely give."""
        return self.ci_low > 0.0 or self.ci_high < 0.0


def gap_interval(
    valid: tuple[Sequence[str], Sequence[str]],
    test: tuple[Sequence[str], Sequence[str]],
    tgt_lang: str,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = 12345,
) -> GapInterval:
    """The gap test − valid of corpus BLEU and its 95% percentile interval under the
    unpaired bootstrap: each resample draws len(valid) valid and len(test) test sentences
    with replacement, independently, and scores both draws from the sentences' summed
    n-gram statistics,

        gap_b = BLEU(Σ_{i ∈ T_b} s_i) − BLEU(Σ_{j ∈ V_b} s_j),

    so the interval is the spread a gap shows when the two splits are finite samples of
    sentences, each scored by the same model. `valid` and `test` are (hypotheses,
    references); `seed` seeds the resampling (a numpy Generator). The statistics and the
    score from their sums are sacrebleu's, through the two methods its own bootstrap uses."""
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    for hypotheses, references in (valid, test):
        check_corpus(list(hypotheses), list(references))
    metric = Bleu().scorer(tgt_lang)

    def statistics(split: tuple[Sequence[str], Sequence[str]]) -> np.ndarray:
        hypotheses, references = split
        stats = metric._extract_corpus_statistics(list(hypotheses), [list(references)])
        return np.asarray(stats, dtype=np.int64)  # (sentences, 2 + 2 · max n-gram order)

    def bleu(stats: np.ndarray) -> float:
        return float(metric._compute_score_from_stats(stats.sum(0).tolist()).score)

    valid_stats, test_stats = statistics(valid), statistics(test)
    rng = np.random.default_rng(seed)
    gaps = np.empty(resamples)
    for b in range(resamples):
        valid_rows = rng.integers(0, len(valid_stats), len(valid_stats))
        test_rows = rng.integers(0, len(test_stats), len(test_stats))
        gaps[b] = bleu(test_stats[test_rows]) - bleu(valid_stats[valid_rows])
    low, high = np.percentile(gaps, [2.5, 97.5])
    return GapInterval(bleu(test_stats) - bleu(valid_stats), float(low), float(high), resamples)
