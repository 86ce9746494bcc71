"""`seq2seq.metrics.paired_bootstrap` (sacrebleu's paired bootstrap, as
`seq2seq.study.seed_significance` uses it) against cases with known answers and against a slow
resampling of the text."""

from __future__ import annotations

import random

import numpy as np
import pytest
from sacrebleu.metrics import BLEU

from seq2seq.metrics import corpus_scores, gap_interval, paired_bootstrap

WORDS = "the a cat dog sat ran on under mat house red big small quickly today".split()


def sentences(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(4, 10))) + "." for _ in range(count)]


def noisy(references: list[str], share: float, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        " ".join(word if rng.random() > share else rng.choice(WORDS) for word in line.split())
        for line in references
    ]


REFERENCES = sentences(120, 0)
BASELINE = noisy(REFERENCES, 0.4, 1)


def test_a_system_identical_to_the_baseline_has_p_one():
    base, same = paired_bootstrap([("base", BASELINE), ("same", list(BASELINE))], REFERENCES, "en")
    assert base.p_value is None and same.p_value == 1.0
    assert same.bleu == base.bleu and not same.significant()


def test_two_different_systems_that_both_score_zero_have_p_one():
    # one-word outputs have no 4-gram: BLEU 0 on the corpus and on every resample
    first = [line.split()[0] for line in REFERENCES]
    second = [line.split()[-1] for line in REFERENCES]
    assert first != second
    base, other = paired_bootstrap([("first", first), ("second", second)], REFERENCES, "en")
    assert base.bleu == other.bleu == 0.0
    assert other.p_value == 1.0 and not other.significant()


def test_a_system_that_copies_the_references_is_significantly_better():
    _, copy = paired_bootstrap([("base", BASELINE), ("copy", REFERENCES)], REFERENCES, "en")
    assert copy.bleu == pytest.approx(100.0)
    assert copy.p_value < 0.01 and copy.significant()


def test_the_interval_holds_the_corpus_bleu_of_every_system():
    systems = [
        ("base", BASELINE),
        ("a", noisy(REFERENCES, 0.2, 2)),
        ("b", noisy(REFERENCES, 0.5, 3)),
    ]
    for (_, hypotheses), result in zip(systems, paired_bootstrap(systems, REFERENCES, "en")):
        bleu = corpus_scores(hypotheses, REFERENCES, "en")["bleu"]
        assert result.bleu == pytest.approx(bleu)
        assert result.ci_low < bleu < result.ci_high
        assert result.ci_high - result.ci_low < 20  # 120 sentences: a few BLEU wide


def test_the_p_value_and_interval_are_those_of_resampling_the_text_itself():
    """The same resamples (sacrebleu's seed 12345), BLEU recomputed from the resampled
    sentences, the difference statistic of Koehn 2004 as Moses' script computes it."""
    references, count, resamples = REFERENCES[:40], 40, 200
    base, system = noisy(references, 0.4, 4), noisy(references, 0.3, 5)
    _, found = paired_bootstrap([("base", base), ("system", system)], references, "en",
                                resamples=resamples)  # fmt: skip
    indices = np.random.default_rng(12345).choice(count, size=(resamples, count), replace=True)
    metric = BLEU()

    def score(hypotheses, chosen):
        picked = [hypotheses[i] for i in chosen]
        return metric.corpus_score(picked, [[references[i] for i in chosen]]).score

    ours = np.array([score(system, chosen) for chosen in indices])
    theirs = np.array([score(base, chosen) for chosen in indices])
    observed = abs(metric.corpus_score(system, [references]).score
                   - metric.corpus_score(base, [references]).score)  # fmt: skip
    differences = np.abs(ours - theirs)
    expected_p = (np.sum(differences - differences.mean() > observed) + 1) / (resamples + 1)
    assert found.p_value == pytest.approx(expected_p)
    ordered = np.sort(ours)
    half = (ordered[resamples - resamples // 40 - 1] - ordered[resamples // 40]) / 2
    assert found.ci_low == pytest.approx(ours.mean() - half, abs=1e-4)
    assert found.ci_high == pytest.approx(ours.mean() + half, abs=1e-4)


def test_a_chinese_target_is_tokenised_by_character():
    references = ["我爱中国。", "他们在学校学习。", "今天天气很好。"] * 10
    (result,) = paired_bootstrap([("base", references)], references, "zh", resamples=50)
    assert "tok:zh" in result.signature and "bs:50" in result.signature


def test_systems_of_another_length_are_refused():
    with pytest.raises(ValueError, match="differ in length"):
        paired_bootstrap([("base", BASELINE[:-1])], REFERENCES, "en")


def slow_gaps(valid, test, resamples: int, seed: int) -> np.ndarray:
    """`gap_interval`'s resamples redone from the text: the same index draws, each resampled
    corpus scored by sacrebleu from its lines."""
    rng = np.random.default_rng(seed)
    gaps = []
    for _ in range(resamples):
        valid_rows = rng.integers(0, len(valid[0]), len(valid[0]))
        test_rows = rng.integers(0, len(test[0]), len(test[0]))

        def bleu(split, rows):
            hypotheses, references = split
            return corpus_scores([hypotheses[r] for r in rows], [references[r] for r in rows],
                                 "en")["bleu"]  # fmt: skip

        gaps.append(bleu(test, test_rows) - bleu(valid, valid_rows))
    return np.asarray(gaps)


def test_the_gap_interval_matches_a_resampling_of_the_text():
    test_refs = sentences(90, 7)
    valid, test = (BASELINE, REFERENCES), (noisy(test_refs, 0.2, 8), test_refs)
    found = gap_interval(valid, test, "en", resamples=40, seed=3)
    direct = corpus_scores(test[0], test[1], "en")["bleu"] - corpus_scores(*valid, "en")["bleu"]
    assert found.gap == pytest.approx(direct, abs=1e-9)
    low, high = np.percentile(slow_gaps(valid, test, 40, 3), [2.5, 97.5])
    assert (found.ci_low, found.ci_high) == pytest.approx((low, high), abs=1e-9)
    assert found.ci_low < found.gap < found.ci_high


def test_one_split_scored_twice_has_no_gap_and_an_interval_around_zero():
    found = gap_interval((BASELINE, REFERENCES), (BASELINE, REFERENCES), "en", resamples=200)
    assert found.gap == 0.0
    assert found.ci_low < 0.0 < found.ci_high and not found.excludes_zero()
    assert found == gap_interval((BASELINE, REFERENCES), (BASELINE, REFERENCES), "en",
                                 resamples=200)  # fmt: skip


def test_a_model_far_better_on_test_has_an_interval_above_zero():
    valid = (noisy(REFERENCES, 0.8, 2), REFERENCES)
    found = gap_interval(valid, (list(REFERENCES), REFERENCES), "en", resamples=100)
    assert found.gap > 50 and found.ci_low > 0 and found.excludes_zero()


def test_the_gap_interval_refuses_what_it_cannot_resample():
    with pytest.raises(ValueError, match="resamples"):
        gap_interval((BASELINE, REFERENCES), (BASELINE, REFERENCES), "en", resamples=0)
    with pytest.raises(ValueError):
        gap_interval((BASELINE[:-1], REFERENCES), (BASELINE, REFERENCES), "en")
