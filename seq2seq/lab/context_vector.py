"""One context vector against one per step: BLEU against the source length.

A plain encoder-decoder hands the decoder one summary of the source (here the mean of the
encoder states, `attention=none`: `c = (1/S) Σ_j h_j` at every step), however long the
sentence. With attention the decoder builds a new context at each step t,

    c_t = Σ_j α_tj h_j,   α_t = softmax_j(score(s_{t-1}, h_j))   (Bahdanau et al. 2015, eqs. 5-6)

so nothing has to be squeezed into one vector. Bahdanau et al. (2015, fig. 2) showed the
plain model's BLEU falling with the sentence length while the attentive model's held up:
the advantage of attention should grow with the length of the source.

The experiment trains the lab's GRU model (`seq2seq.lab.lab_models.gru_model`) with
`attention=none`, `additive` and `scaled_dot`, two seeds each, and scores each run's own
greedy test output (`test.hyp` beside `test.ref`, written by `train_and_test`) per
source-length bucket: the test sentences are sorted by their source length in characters
(spaces not counted: Chinese characters on Tatoeba, symbols on a toy task) and cut into
buckets of about equal size that never split one length. A bucket's BLEU is corpus BLEU
over its sentences with the project's one scorer (`seq2seq.metrics.paired_bootstrap`, the
same sacrebleu BLEU as `corpus_scores`), which also gives each seed's 95% bootstrap
interval (1,000 resamples of the bucket's sentences) and the p-value of each attention
against the plain model on the same sentences. The figure draws the mean over seeds, its
band spanning every seed's interval.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from seq2seq.data.prepare import prepare
from seq2seq.lab.experiment import Experiment, Finding, LabContext
from seq2seq.lab.lab_models import TATOEBA_STEPS, gru_model
from seq2seq.lab.training import TrainedRun, compose_config, run_overrides, trained
from seq2seq.metrics import BootstrapResult, paired_bootstrap
from seq2seq.runs.assemble import data_config

MECHANISMS = ("none", "additive", "scaled_dot")  # the first is the baseline of every test
LABELS = {"none": "none (one fixed context)", "additive": "additive", "scaled_dot": "scaled dot"}
COLOURS = {"none": "C0", "additive": "C1", "scaled_dot": "C2"}  # the same in both panels
SEEDS, QUICK_SEEDS = 2, 1
BUCKETS, QUICK_BUCKETS = 5, 4


@dataclass(frozen=True)
class LengthBucket:
    """Test sentences whose source length lies in [shortest, longest]."""

    shortest: int
    longest: int
    members: list[int]  # indices into the test split

    @property
    def label(self) -> str:
        if self.shortest == self.longest:
            return str(self.shortest)
        return f"{self.shortest}–{self.longest}"


@dataclass(frozen=True)
class GreedyOutput:
    """One run's greedy test translations, with the sources and references they belong to."""

    sources: list[str]
    hypotheses: list[str]
    references: list[str]
    tgt_lang: str


# ------------------------------------------------------------------ lengths and buckets


def source_length(line: str) -> int:
    """Characters of a source line, spaces not counted (a toy line "c a d" has 3)."""
    return sum(1 for char in line if not char.isspace())


def length_buckets(lengths: list[int], count: int) -> list[LengthBucket]:
    """At most `count` buckets of about equal size, each a whole range of lengths: a length
    goes to the bucket that the middle of its sentences falls in when the sorted lengths
    are cut into `count` equal parts; a last bucket under half that size joins the one
    before it."""
    target = len(lengths) / count
    by_length: dict[int, list[int]] = {}
    for index, length in enumerate(lengths):
        by_length.setdefault(length, []).append(index)
    groups: list[list[int]] = [[] for _ in range(count)]  # the lengths of each bucket
    filled = 0
    for length in sorted(by_length):
        middle = filled + len(by_length[length]) / 2
        groups[min(count - 1, int(middle // target))].append(length)
        filled += len(by_length[length])
    groups = [group for group in groups if group]
    if len(groups) > 1 and sum(len(by_length[n]) for n in groups[-1]) < target / 2:
        last = groups.pop()
        groups[-1] = groups[-1] + last
    return [
        LengthBucket(group[0], group[-1], [i for n in group for i in by_length[n]])
        for group in groups
    ]


# ------------------------------------------------------------------ runs and their test output


def mechanism_runs(context: LabContext) -> dict[str, list[tuple[TrainedRun, list[str]]]]:
    """Every mechanism's runs, one per seed, with the overrides each was trained with."""
    seeds = context.seeds(QUICK_SEEDS if context.quick else SEEDS)
    runs: dict[str, list[tuple[TrainedRun, list[str]]]] = {}
    for mechanism in MECHANISMS:
        for seed in seeds:
            overrides = gru_model(context, f"attention={mechanism}", seed=seed)
            run = trained(context, overrides, f"gru-{mechanism}")
            runs.setdefault(mechanism, []).append((run, overrides))
    return runs


def lines_of(path: Path) -> list[str]:
    """The lines of a file written as `"\\n".join(lines) + "\\n"` (`train_and_test`)."""
    return path.read_text(encoding="utf-8").removesuffix("\n").split("\n")


def greedy_output(context: LabContext, run: TrainedRun, overrides: list[str]) -> GreedyOutput:
    """The run's `test.hyp` and `test.ref`, and the sources of its prepared test split
    (the references are checked against the split's, so the three are in one order)."""
    data = prepare(data_config(compose_config(run_overrides(context, overrides))))
    hypotheses, references = lines_of(run.run_dir / "test.hyp"), lines_of(run.run_dir / "test.ref")
    if references != list(data.test.tgt_lines) or len(hypotheses) != len(references):
        raise ValueError(f"{run.run_dir}: test.hyp / test.ref do not match its test split")
    return GreedyOutput(list(data.test.src_lines), hypotheses, references, data.tgt_tokenizer.lang)


# ------------------------------------------------------------------ scoring


def bucket_scores(
    outputs: dict[str, GreedyOutput], bucket: LengthBucket
) -> dict[str, BootstrapResult]:
    """Each mechanism's corpus BLEU on the bucket's sentences, with its 95% bootstrap
    interval and its p-value against `none` (one seed's runs, the same sentences)."""
    members = bucket.members
    baseline = outputs[MECHANISMS[0]]
    systems = [(m, [outputs[m].hypotheses[i] for i in members]) for m in MECHANISMS]
    references = [baseline.references[i] for i in members]
    results = paired_bootstrap(systems, references, baseline.tgt_lang)
    return dict(zip(MECHANISMS, results, strict=True))


def bucket_row(
    mechanism: str, bucket: LengthBucket, per_seed: list[dict[str, BootstrapResult]]
) -> dict[str, Any]:
    """One table row: the mechanism's mean BLEU over seeds in the bucket, the seeds' range,
    the band spanning every seed's 95% interval, the gap to `none` and the largest p."""
    mine = [scores[mechanism] for scores in per_seed]
    plain = [scores[MECHANISMS[0]] for scores in per_seed]
    p_values = [result.p_value for result in mine if result.p_value is not None]
    return {
        "mechanism": mechanism,
        "source length": bucket.label,
        "sentences": len(bucket.members),
        "bleu": statistics.fmean(result.bleu for result in mine),
        "seed min": min(result.bleu for result in mine),
        "seed max": max(result.bleu for result in mine),
        "band low": max(0.0, min(result.ci_low for result in mine)),  # BLEU is in [0, 100]
        "band high": min(100.0, max(result.ci_high for result in mine)),
        "gap vs none": statistics.fmean(a.bleu - b.bleu for a, b in zip(mine, plain, strict=True)),
        "p vs none": max(p_values) if p_values else float("nan"),
    }


def bucket_table(
    context: LabContext, runs: dict[str, list[tuple[TrainedRun, list[str]]]]
) -> tuple[list[LengthBucket], list[dict[str, Any]]]:
    """The buckets (from the test sources) and one row per mechanism and bucket."""
    seeds = len(runs[MECHANISMS[0]])
    outputs = [
        {mechanism: greedy_output(context, *runs[mechanism][seed]) for mechanism in MECHANISMS}
        for seed in range(seeds)
    ]
    lengths = [source_length(line) for line in outputs[0][MECHANISMS[0]].sources]
    buckets = length_buckets(lengths, QUICK_BUCKETS if context.quick else BUCKETS)
    scores = [[bucket_scores(by_seed, bucket) for by_seed in outputs] for bucket in buckets]
    rows = [
        bucket_row(mechanism, bucket, per_seed)
        for mechanism in MECHANISMS
        for bucket, per_seed in zip(buckets, scores, strict=True)
    ]
    return buckets, rows


# ------------------------------------------------------------------ figure and finding


def draw(
    context: LabContext, buckets: list[LengthBucket], rows: list[dict[str, Any]], unit: str
) -> Path:
    """BLEU against the source-length bucket, one line per mechanism with its band (left),
    and each attention's gap to the fixed context vector (right)."""
    positions = list(range(len(buckets)))
    ticks = [f"{b.label}\n({len(b.members)})" for b in buckets]
    figure = Figure(figsize=(10, 4), layout="constrained")
    bleu_axes, gap_axes = figure.subplots(1, 2)
    for mechanism in MECHANISMS:
        mine = [row for row in rows if row["mechanism"] == mechanism]
        style = {"color": COLOURS[mechanism], "label": LABELS[mechanism]}
        bleu_axes.plot(positions, [row["bleu"] for row in mine], marker="o", **style)
        low, high = [row["band low"] for row in mine], [row["band high"] for row in mine]
        bleu_axes.fill_between(positions, low, high, color=style["color"], alpha=0.2)
        if mechanism != MECHANISMS[0]:
            gap_axes.plot(positions, [row["gap vs none"] for row in mine], marker="o", **style)
    gap_axes.axhline(0.0, color="grey", linewidth=0.8)
    for axes, ylabel in ((bleu_axes, "test BLEU"), (gap_axes, "BLEU gain over none")):
        axes.set_xticks(positions, ticks)
        axes.set_xlabel(f"source length in {unit} (sentences)")
        axes.set_ylabel(ylabel)
        axes.legend()
    bleu_axes.set_title("BLEU by source length (mean over seeds; band: 95% intervals)")
    gap_axes.set_title("attention minus one fixed context vector")
    path = context.figure("bleu_by_length")
    figure.savefig(path, dpi=110)
    return path


def gaps(rows: list[dict[str, Any]], mechanism: str) -> tuple[float, float]:
    """The mechanism's mean gap to `none` in the shortest and in the longest bucket."""
    mine = [row["gap vs none"] for row in rows if row["mechanism"] == mechanism]
    return mine[0], mine[-1]


def ratios(rows: list[dict[str, Any]], mechanism: str) -> tuple[float, float]:
    """The mechanism's mean BLEU over `none`'s in the shortest and in the longest bucket
    (NaN where `none` scores 0): the gain relative to what the plain model still gets."""
    mine = [row["bleu"] for row in rows if row["mechanism"] == mechanism]
    plain = [row["bleu"] for row in rows if row["mechanism"] == MECHANISMS[0]]
    pairs = ((mine[0], plain[0]), (mine[-1], plain[-1]))
    return tuple(a / b if b > 0 else float("nan") for a, b in pairs)


def verdict(rows: list[dict[str, Any]]) -> bool | None:
    """True when every attention's gap grows from the shortest to the longest bucket,
    False when none does, None when they disagree."""
    grows = [gaps(rows, mechanism)[1] > gaps(rows, mechanism)[0] for mechanism in MECHANISMS[1:]]
    return True if all(grows) else False if not any(grows) else None


def summary(rows, buckets, unit: str, seeds: int, where: str, agrees: bool | None) -> str:
    parts = [
        f"{LABELS[m]} {gaps(rows, m)[0]:+.1f} → {gaps(rows, m)[1]:+.1f}" for m in MECHANISMS[1:]
    ]
    outcome = {
        True: "the advantage of a context per step grows with the source length, as claimed",
        False: "the advantage does not grow with the source length here, against the claim",
        None: "the two attentions disagree, so this does not decide the claim",
    }[agrees]
    relative = [
        f"{LABELS[m]} {ratios(rows, m)[0]:.2f}× → {ratios(rows, m)[1]:.2f}×"
        for m in MECHANISMS[1:]
    ]
    return (
        f"On {where}, in {len(buckets)} source-length buckets from {buckets[0].label} to "
        f"{buckets[-1].label} {unit} ({seeds} seed(s) each), the BLEU gain over one fixed "
        f"context vector goes from the shortest to the longest bucket: {'; '.join(parts)}. "
        f"So {outcome}. Every model's BLEU falls with the length; relative to the plain "
        f"model's, attention's BLEU goes {'; '.join(relative)} (a measure chosen after the "
        "run, so a hint, not a test)."
    )


def run(context: LabContext) -> Finding:
    runs = mechanism_runs(context)
    buckets, rows = bucket_table(context, runs)
    unit = "symbols" if context.quick else "characters"
    seeds = len(runs[MECHANISMS[0]])
    agrees = verdict(rows)
    where = "the toy reverse task's test split" if context.quick else "Tatoeba's zh→en test split"
    values: dict[str, Any] = {"buckets": [bucket.label for bucket in buckets], "seeds": seeds}
    for mechanism in MECHANISMS:
        tests = [run.test_bleu for run, _ in runs[mechanism]]
        values[f"test_bleu_{mechanism}"] = statistics.fmean(tests)
        if mechanism != MECHANISMS[0]:
            values[f"gap_shortest_{mechanism}"], values[f"gap_longest_{mechanism}"] = gaps(
                rows, mechanism
            )
    return Finding(
        summary=summary(rows, buckets, unit, seeds, where, agrees),
        table=rows,
        figures=[draw(context, buckets, rows, unit)],
        values=values,
        agrees=agrees,
    )


EXPERIMENT = Experiment(
    name="context_vector",
    order=2,
    title="One context vector against one per step",
    claim=(
        "An encoder-decoder without attention must pack the whole source sentence into one "
        "vector of fixed size before it writes a word, and the longer the sentence, the more "
        "that vector has to leave out. Attention lets the decoder look back at every encoder "
        "state and form a new context for each word it writes, so it should lose less on "
        "long sentences: the BLEU gained by attention should grow with the source length "
        "(Bahdanau et al. 2015, fig. 2)."
    ),
    run=run,
    default_size=(
        "Trains the lab's GRU model on Tatoeba zh→en without attention, with additive and "
        f"with scaled dot-product attention, two seeds each (6 runs of {TATOEBA_STEPS} updates), "
        "and "
        "scores each run's greedy test translations in five source-length buckets."
    ),
)
