"""N vs 1: the one vector of a plain encoder-decoder, made three ways, and what pooling looks at.

An encoder-decoder without attention hands its decoder one vector for the whole source
(the notes' "N vs 1" half of "N vs M"). The lab's GRU model (`gru_model`, bi-GRU encoder
and GRU decoder, `attention=none`) takes it three ways:

* `final`: the encoder's last state, `h_0 = tanh(W [h→_S; h←_1] + b)` (a bi-GRU's last
  state is both directions' ends), the one context the mean of the states, as today
  (`model.summary=auto`; the very run `context_vector` trains as its plain model);
* `mean`: `s = (1/S) Σ_j h_j` starts the decoder too (`model.summary=mean`);
* `attention_pool`: both the start and the one context are attention pooled,

      s_j = wᵀ tanh(U h_j + b),   α = softmax_j(s),   c = Σ_j α_j h_j

  (the notes' "traditional attention", `softmax(Wᵀ Uᵀ Q)·Q`; Yang et al. 2016, eqs. 5-7:
  `seq2seq.models.attention.pooling`), one learned query w for the start
  (`model.summary=attention_pool`) and one for the context (`attention.context=attention_pool`);

and, as a reference, the same model with additive attention, a new context per step.

Each run's greedy test translations are scored overall and in source-length buckets
(`seq2seq.lab.context_vector`'s buckets) with the paired bootstrap against `final`.

What the poolings look at is measured on the test sentences (EOS included, as the model
reads them) with `Seq2Seq.pooling_weights`:

* the share of the weight that falls in each of `POSITION_BINS` stretches of the sentence
  (piece i of m goes to bin ⌊bins·(i + ½)/m⌋) and on EOS, averaged over sentences, beside
  the same shares of uniform weights (the `mean` arm's, 1/n each);
* the entropy H(α) = −Σ_i α_i ln α_i against ln n, the uniform weights' (n = pieces + EOS);
* the pieces that get the most weight: each occurrence's weight times n (1 = a uniform
  share, so that short and long sentences count alike), averaged over the piece's
  occurrences, for the pieces seen at least `MIN_COUNT` times (EOS left out: it is its own
  bin above).

The claim is taken to agree when the pooled arm's overall test BLEU is at least that of
both `final` and `mean` (fixed before the run; the p-values say whether the gaps are
significant, they do not change the verdict).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib
import torch
from matplotlib.figure import Figure

from seq2seq.data.batching import collate
from seq2seq.data.prepare import prepare
from seq2seq.lab.context_vector import (
    BUCKETS,
    DOC_ARM_OVERRIDES,
    QUICK_BUCKETS,
    GreedyOutput,
    LengthBucket,
    greedy_output,
    length_buckets,
    source_length,
)
from seq2seq.lab.experiment import Experiment, Finding, LabContext
from seq2seq.lab.lab_models import TATOEBA_STEPS, gru_model
from seq2seq.lab.training import TrainedRun, compose_config, run_overrides, trained
from seq2seq.metrics import BootstrapResult, paired_bootstrap
from seq2seq.runs.assemble import data_config
from seq2seq.special_tokens import EOS_PIECE
from seq2seq.visualise.fonts import cjk_font_family
from seq2seq.visualise.heatmap import draw_alignment

ARMS = ("final", "mean", "attention_pool", "additive")  # the first is the baseline of every test
BASELINE, POOLED = "final", "attention_pool"
# the same runs as context_vector's documents study uses for these arms (shared by their overrides)
ARM_OVERRIDES = {arm: DOC_ARM_OVERRIDES[arm] for arm in ARMS}
LABELS = {
    "final": "last state",
    "mean": "mean",
    "attention_pool": "attention pooling",
    "additive": "additive attention (reference)",
}
COLOURS = {"final": "C0", "mean": "C2", "attention_pool": "C3", "additive": "C1"}
# One seed per arm: two would double the default size's training to about 12 minutes.
SEEDS = 1
POSITION_BINS = 5
MIN_COUNT, QUICK_MIN_COUNT = 20, 5
TOP_PIECES = 10
WEIGHT_BATCH = 128  # test sentences per forward pass when reading the weights


@dataclass(frozen=True)
class PooledSentence:
    """One test sentence as a pooling weighs it: its piece ids and pieces, EOS last, and
    the weights (one per piece, summing to 1)."""

    ids: list[int]
    pieces: list[str]
    weights: list[float]


@dataclass(frozen=True)
class WeightProfile:
    """What one pooling looks at over the test sentences (module docstring)."""

    bin_shares: list[float]  # mean share of the weight in each relative-position bin
    eos_share: float
    uniform_bin_shares: list[float]  # the same for uniform weights 1/n
    uniform_eos_share: float
    ends_share: float  # mean weight on the first and the last piece
    uniform_ends_share: float
    entropy: float  # mean H(α), nats
    uniform_entropy: float  # mean ln n
    entropy_ratio: float  # mean of H(α) / ln n over sentences with n ≥ 2
    top_pieces: list[dict[str, Any]]  # piece, count, mean weight, mean weight × n


# ------------------------------------------------------------------ what a pooling looks at


def position_shares(weights: Sequence[float], bins: int) -> tuple[list[float], float]:
    """The weight in each of `bins` stretches of the sentence and on EOS: `weights` are
    one sentence's, EOS last; piece i of the m before it goes to bin ⌊bins·(i + ½)/m⌋."""
    pieces = len(weights) - 1
    shares = [0.0] * bins
    for index, weight in enumerate(weights[:-1]):
        shares[int(bins * (index + 0.5) / pieces)] += weight
    return shares, float(weights[-1])


def ends_share(weights: Sequence[float]) -> float:
    """The weight on the first and the last piece before EOS (one piece counted once; 0
    for an empty source): where a bi-RNN encoder's two directions have read it all."""
    pieces = len(weights) - 1
    return 0.0 if pieces == 0 else float(weights[0] + (weights[pieces - 1] if pieces > 1 else 0))


def entropy(weights: Sequence[float]) -> float:
    """H(α) = −Σ α_i ln α_i in nats (0 ln 0 = 0)."""
    return -sum(w * math.log(w) for w in weights if w > 0)


def top_pieces(sentences: Sequence[PooledSentence], min_count: int) -> list[dict[str, Any]]:
    """The `TOP_PIECES` pieces (EOS left out) seen at least `min_count` times with the
    largest mean weight × n (n the sentence's pieces with EOS)."""
    seen: dict[str, list[tuple[float, float]]] = {}
    for sentence in sentences:
        n = len(sentence.weights)
        for piece, weight in zip(sentence.pieces[:-1], sentence.weights[:-1], strict=True):
            seen.setdefault(piece, []).append((weight, weight * n))
    rows = [
        {
            "piece": piece,
            "count": len(pairs),
            "mean weight": statistics.fmean(w for w, _ in pairs),
            "× uniform": statistics.fmean(r for _, r in pairs),
        }
        for piece, pairs in seen.items()
        if len(pairs) >= min_count
    ]
    return sorted(rows, key=lambda row: (-row["× uniform"], row["piece"]))[:TOP_PIECES]


def weight_profile(sentences: Sequence[PooledSentence], min_count: int) -> WeightProfile:
    """The profile of one pooling's weights over `sentences` (module docstring)."""
    weights = [s.weights for s in sentences]
    flat = [[1 / len(w)] * len(w) for w in weights]  # uniform weights, the mean's
    measured = [position_shares(w, POSITION_BINS) for w in weights]
    uniform = [position_shares(w, POSITION_BINS) for w in flat]
    ratios = [entropy(w) / math.log(len(w)) for w in weights if len(w) >= 2]
    return WeightProfile(
        bin_shares=mean_columns([shares for shares, _ in measured]),
        eos_share=statistics.fmean(eos for _, eos in measured),
        uniform_bin_shares=mean_columns([shares for shares, _ in uniform]),
        uniform_eos_share=statistics.fmean(eos for _, eos in uniform),
        ends_share=statistics.fmean(ends_share(w) for w in weights),
        uniform_ends_share=statistics.fmean(ends_share(w) for w in flat),
        entropy=statistics.fmean(entropy(w) for w in weights),
        uniform_entropy=statistics.fmean(math.log(len(w)) for w in weights),
        entropy_ratio=statistics.fmean(ratios) if ratios else float("nan"),
        top_pieces=top_pieces(sentences, min_count),
    )


def mean_columns(rows: Sequence[Sequence[float]]) -> list[float]:
    return [statistics.fmean(column) for column in zip(*rows, strict=True)]


@torch.no_grad()
def pooled_sentences(
    context: LabContext, run: TrainedRun, overrides: list[str]
) -> dict[str, list[PooledSentence]]:
    """Every pooling of the run's model (`summary`, `context`) over its test sentences."""
    data = prepare(data_config(compose_config(run_overrides(context, overrides))))
    translator = run.translator(context.device)
    tokenizer = translator.src_tokenizer
    examples = [(list(src), []) for src, _ in data.test.examples]
    found: dict[str, list[PooledSentence]] = {}
    for start in range(0, len(examples), WEIGHT_BATCH):
        chunk = examples[start : start + WEIGHT_BATCH]
        batch = collate(chunk, list(range(len(chunk)))).to(context.device)
        weights = translator.model.pooling_weights(batch.src, batch.src_mask)  # (B, S) each
        for name, matrix in weights.items():
            for row, (ids, _) in enumerate(chunk):
                pieces = [tokenizer.id_to_piece(i) for i in ids] + [EOS_PIECE]
                kept = matrix[row, : len(ids) + 1].float().cpu().tolist()  # EOS included
                found.setdefault(name, []).append(PooledSentence(ids, pieces, kept))
    return found


# ------------------------------------------------------------------ runs and BLEU


def arm_runs(context: LabContext) -> dict[str, tuple[TrainedRun, list[str]]]:
    """Every arm's run (one seed) with the overrides it was trained with."""
    (seed,) = context.seeds(SEEDS)
    runs = {}
    for arm in ARMS:
        overrides = gru_model(context, *ARM_OVERRIDES[arm], seed=seed)
        label = "gru-none" if arm == BASELINE else f"gru-{arm.replace('_', '-')}"
        runs[arm] = (trained(context, overrides, label), overrides)
    return runs


def scored(outputs: dict[str, GreedyOutput], members: list[int]) -> dict[str, BootstrapResult]:
    """Each arm's corpus BLEU on `members` with its 95% interval and p against `final`."""
    systems = [(arm, [outputs[arm].hypotheses[i] for i in members]) for arm in ARMS]
    references = [outputs[BASELINE].references[i] for i in members]
    results = paired_bootstrap(systems, references, outputs[BASELINE].tgt_lang)
    return dict(zip(ARMS, results, strict=True))


def pooled_against_mean(outputs: dict[str, GreedyOutput]) -> BootstrapResult:
    """Attention pooling against the mean on the whole test split (its p-value)."""
    hypotheses = [(arm, outputs[arm].hypotheses) for arm in ("mean", POOLED)]
    references = outputs[BASELINE].references
    return paired_bootstrap(hypotheses, references, outputs[BASELINE].tgt_lang)[1]


def bleu_rows(label: str, count: int, scores: dict[str, BootstrapResult]) -> list[dict[str, Any]]:
    """One table row per arm for a group of sentences (`label`: all, or a length range)."""
    return [{
        "arm": arm,
        "source length": label,
        "sentences": count,
        "bleu": scores[arm].bleu,
        "ci low": max(0.0, scores[arm].ci_low),
        "ci high": min(100.0, scores[arm].ci_high),
        "gap vs final": scores[arm].bleu - scores[BASELINE].bleu,
        "p vs final": float("nan") if scores[arm].p_value is None else scores[arm].p_value,
    } for arm in ARMS]  # fmt: skip


def bleu_table(
    outputs: dict[str, GreedyOutput], buckets: list[LengthBucket]
) -> list[dict[str, Any]]:
    """Rows for the whole test split, then for each length bucket, each arm in each."""
    everyone = list(range(len(outputs[BASELINE].references)))
    rows = bleu_rows("all", len(everyone), scored(outputs, everyone))
    for bucket in buckets:
        rows += bleu_rows(bucket.label, len(bucket.members), scored(outputs, bucket.members))
    return rows


def overall(rows: list[dict[str, Any]], arm: str) -> dict[str, Any]:
    return next(row for row in rows if row["arm"] == arm and row["source length"] == "all")


def verdict(rows: list[dict[str, Any]]) -> bool:
    """True when attention pooling's overall BLEU is at least both the last state's and the
    mean's (significant or not: the p-values are reported beside it)."""
    pooled = overall(rows, POOLED)["bleu"]
    return pooled >= overall(rows, "final")["bleu"] and pooled >= overall(rows, "mean")["bleu"]


# ------------------------------------------------------------------ figures


def draw_bleu(
    context: LabContext, buckets: list[LengthBucket], rows: list[dict[str, Any]], unit: str
) -> Path:
    """Test BLEU against the source-length bucket, one line per arm with its 95% band."""
    positions = list(range(len(buckets)))
    figure = Figure(figsize=(7, 4.2), layout="constrained")
    axes = figure.subplots()
    for arm in ARMS:
        mine = [row for row in rows if row["arm"] == arm and row["source length"] != "all"]
        label = f"{LABELS[arm]} (all: {overall(rows, arm)['bleu']:.1f})"
        style = {"color": COLOURS[arm], "linestyle": "--" if arm == "additive" else "-"}
        axes.plot(positions, [row["bleu"] for row in mine], marker="o", label=label, **style)
        low, high = [row["ci low"] for row in mine], [row["ci high"] for row in mine]
        axes.fill_between(positions, low, high, color=style["color"], alpha=0.12)
    axes.set_xticks(positions, [f"{b.label}\n({len(b.members)})" for b in buckets])
    axes.set_xlabel(f"source length in {unit} (sentences)")
    axes.set_ylabel("test BLEU (greedy)")
    axes.set_title("The one vector made three ways, and attention (band: 95% interval)")
    axes.legend()
    path = context.figure("bleu_by_length")
    figure.savefig(path, dpi=110)
    return path


def draw_profiles(context: LabContext, profiles: dict[str, WeightProfile]) -> Path:
    """Left: each pooling's share of the weight by relative position and on EOS, beside the
    uniform weights'. Right: the pieces each pooling weighs most (× a uniform share)."""
    with matplotlib.rc_context({"font.family": list(cjk_font_family())}):
        figure = Figure(figsize=(11, 4.2), layout="constrained")
        share_axes, *piece_axes = figure.subplots(1, 1 + len(profiles))
        draw_shares(share_axes, profiles)
        for index, name in enumerate(profiles):
            draw_top_pieces(piece_axes[index], name, profiles[name], pooling_colour(index))
        path = context.figure("pooling_weights")
        figure.savefig(path, dpi=110)
    return path


def draw_shares(axes: Any, profiles: dict[str, WeightProfile]) -> None:
    edges = [k / POSITION_BINS for k in range(POSITION_BINS + 1)]
    ticks = [f"{low:.1f}–{high:.1f}" for low, high in zip(edges, edges[1:])] + ["EOS"]
    width = 0.8 / (len(profiles) + 1)
    first = next(iter(profiles.values()))
    uniform = [*first.uniform_bin_shares, first.uniform_eos_share]
    places = range(len(ticks))
    axes.bar([p - 0.4 + width / 2 for p in places], uniform, width, color="0.7",
             label="uniform (the mean)")  # fmt: skip
    for index, (name, profile) in enumerate(profiles.items(), start=1):
        shares = [*profile.bin_shares, profile.eos_share]
        offsets = [p - 0.4 + width * (index + 0.5) for p in places]
        axes.bar(offsets, shares, width, color=pooling_colour(index - 1),
                 label=f"{name} (H/ln n = {profile.entropy_ratio:.2f})")  # fmt: skip
    axes.set_xticks(list(places), ticks, fontsize=8)
    axes.set_xlabel("relative position in the source")
    axes.set_ylabel("mean share of the pooling weight")
    axes.set_title("Where the pooling weight falls")
    axes.legend(fontsize=8)


def pooling_colour(index: int) -> str:
    """The colour of the index-th pooling, the same in both panels."""
    return f"C{3 + index}"


def draw_top_pieces(axes: Any, name: str, profile: WeightProfile, colour: str) -> None:
    rows = list(reversed(profile.top_pieces))
    axes.barh(range(len(rows)), [row["× uniform"] for row in rows], color=colour)
    axes.set_yticks(range(len(rows)), [f"{row['piece']} ({row['count']})" for row in rows])
    axes.axvline(1.0, color="grey", linewidth=0.8)
    axes.set_xlabel("mean weight × n (1 = uniform)")
    axes.set_title(f"{name}: most weighted pieces", fontsize=10)


def pooling_names(found: dict[str, Any]) -> list[str]:
    """The poolings in the order they act: the decoder's start, then its context(s)."""
    return sorted(found, key=lambda name: (name != "summary", name))


def example_index(sentences: list[PooledSentence]) -> int:
    """The first test sentence of the median number of pieces: a typical one to draw."""
    lengths = [len(s.pieces) for s in sentences]
    median = sorted(lengths)[len(lengths) // 2]
    return lengths.index(median)


def draw_example(context: LabContext, found: dict[str, list[PooledSentence]]) -> Path:
    """One test sentence's weights, a row per pooling, as a heat map."""
    names = pooling_names(found)
    index = example_index(found[names[0]])
    pieces = found[names[0]][index].pieces
    matrix = torch.tensor([found[name][index].weights for name in names])  # (poolings, n)
    title = f"attention pooling over test sentence {index}"
    figure = draw_alignment(pieces, names, matrix[None, None], title)
    path = context.figure("pooling_example")
    figure.savefig(path, dpi=110)
    return path


# ------------------------------------------------------------------ finding


def pieces_text(profile: WeightProfile, count: int = 5) -> str:
    return ", ".join(f"{row['piece']} ({row['× uniform']:.1f}×, {row['count']})"
                     for row in profile.top_pieces[:count]) or "none seen often enough"  # fmt: skip


def ends_text(profile: WeightProfile) -> str:
    """The weight on the two end pieces, and what it means when it is over twice the
    uniform share: a bi-GRU's states there have each read the whole sentence one way."""
    ends, uniform = profile.ends_share, profile.uniform_ends_share
    text = f"{ends:.2f} on the first and last pieces (uniform {uniform:.2f})"
    if ends > 2 * uniform:
        text += (", where the bi-GRU encoder's two directions have each read the whole "
                 "sentence: it may pick states that already summarise the sentence rather "
                 "than the pieces at those places")  # fmt: skip
    return text


def profile_text(name: str, profile: WeightProfile) -> str:
    first, last = profile.bin_shares[0], profile.bin_shares[-1]
    return (
        f"the {name} pooling puts {first:.2f} of its weight on the first fifth of the "
        f"source (uniform {profile.uniform_bin_shares[0]:.2f}), {last:.2f} on the last "
        f"(uniform {profile.uniform_bin_shares[-1]:.2f}), {profile.eos_share:.2f} on EOS "
        f"(uniform {profile.uniform_eos_share:.2f}) and {ends_text(profile)}; "
        f"its entropy is {profile.entropy:.2f} "
        f"nats against ln n = {profile.uniform_entropy:.2f} (ratio {profile.entropy_ratio:.2f}); "
        f"its most weighted pieces (× uniform, count): {pieces_text(profile)}"
    )


def summary(
    rows: list[dict[str, Any]], against_mean: BootstrapResult,
    profiles: dict[str, WeightProfile], where: str, agrees: bool,
) -> str:  # fmt: skip
    bleu = {arm: overall(rows, arm) for arm in ARMS}
    scores = "; ".join(f"{LABELS[arm]} {bleu[arm]['bleu']:.2f}" for arm in ARMS)
    outcome = ("attention pooling scores at least as well as both, as claimed" if agrees else
               "attention pooling does not beat both, against the claim")  # fmt: skip
    return (
        f"On {where} (one seed per arm), greedy test BLEU: {scores}. Attention pooling "
        f"against the last state {bleu[POOLED]['gap vs final']:+.2f} (p = "
        f"{bleu[POOLED]['p vs final']:.3f}), against the mean "
        f"{against_mean.bleu - bleu['mean']['bleu']:+.2f} (p = {against_mean.p_value:.3f}): "
        f"{outcome}. On the test sentences, "
        + "; ".join(profile_text(name, profile) for name, profile in profiles.items())
        + "."
    )


def values_of(rows, against_mean, profiles, buckets) -> dict[str, Any]:
    values: dict[str, Any] = {"buckets": [b.label for b in buckets], "seeds": SEEDS}
    for arm in ARMS:
        values[f"test_bleu_{arm}"] = overall(rows, arm)["bleu"]
    values["p_pooled_vs_final"] = overall(rows, POOLED)["p vs final"]
    values["p_pooled_vs_mean"] = against_mean.p_value
    for name, profile in profiles.items():
        values[f"weights_{name}"] = profile.__dict__
    return values


def run(context: LabContext) -> Finding:
    runs = arm_runs(context)
    outputs = {arm: greedy_output(context, *runs[arm]) for arm in ARMS}
    lengths = [source_length(line) for line in outputs[BASELINE].sources]
    buckets = length_buckets(lengths, QUICK_BUCKETS if context.quick else BUCKETS)
    rows = bleu_table(outputs, buckets)
    against_mean = pooled_against_mean(outputs)
    found = pooled_sentences(context, *runs[POOLED])
    min_count = QUICK_MIN_COUNT if context.quick else MIN_COUNT
    profiles = {name: weight_profile(found[name], min_count) for name in pooling_names(found)}
    agrees = verdict(rows)
    unit = "symbols" if context.quick else "characters"
    where = "the toy reverse task's test split" if context.quick else "Tatoeba's zh→en test split"
    figures = [draw_bleu(context, buckets, rows, unit), draw_profiles(context, profiles),
               draw_example(context, found)]  # fmt: skip
    return Finding(
        summary=summary(rows, against_mean, profiles, where, agrees),
        table=rows,
        figures=figures,
        values=values_of(rows, against_mean, profiles, buckets),
        agrees=agrees,
    )


EXPERIMENT = Experiment(
    name="pooling",
    order=9,
    title="N vs 1: last state, mean or attention pooling",
    claim=(
        "Without attention the decoder gets one vector for the whole source sentence. The "
        "encoder's last state leans on the end of the sentence and a plain mean gives every "
        "piece the same say; attention pooling (the notes' traditional attention, one learned "
        "query scoring every encoder state, Yang et al. 2016) learns which positions matter "
        "and weighs them, so it should summarise the sentence better than either: a plain "
        "encoder-decoder started and fed by attention pooling should translate at least as "
        "well as one that uses the last state or the mean, and its weights should show "
        "which positions carry the sentence."
    ),
    run=run,
    default_size=(
        "Trains the lab's GRU model on Tatoeba zh→en without attention, its one vector the "
        "encoder's last state, the mean of its states or their attention pooling, and with "
        f"additive attention as a reference: one seed each (4 runs of {TATOEBA_STEPS} "
        "updates); scores each run's greedy test translations overall and in five "
        "source-length buckets against the last state, and reads the pooling weights of "
        "the 1,000 test sentences."
    ),
)
