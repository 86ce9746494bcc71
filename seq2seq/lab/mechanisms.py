"""我爱中国 across mechanisms: every score and region of the registry, one sentence, one table.

Claim. An attention mechanism is a score, how well a decoder query q matches each source
key k, and a region, how the scores of one query become weights over the source:

    dot         s = qᵀk                        (Luong et al. 2015, eq. 8)
    scaled_dot  s = qᵀk / √d                   (Vaswani et al. 2017, eq. 1)
    general     s = qᵀWk                       (Luong et al. 2015, eq. 8)
    additive    s = vᵀ tanh(Wq + Uk)           (Bahdanau et al. 2015, eq. 6)
    cosine      s = γ · cos(q, k)
    soft        α = softmax(s)                 every key a share
    sparsemax   α = [s − τ]₊                   (Martins & Astudillo 2016) exact zeros
    entmax15    α = [s/2 − τ]₊²                (Peters et al. 2019) sparse, smoother
    hard        α = one-hot(argmax s)          at evaluation (Xu et al. 2015)
    local       softmax in a window around p_t (Luong et al. 2015, §3.2): local-p predicts
                p_t (with a Gaussian), local-m takes p_t = t

All of them weight the source for each target word; they differ in how sharp, sparse or
local that weighting is, and the weighting, read as a word alignment (each target word's
argmax source word), can be scored against hand-made links (AER, Och & Ney 2003).

Method. The names come from the registry (`seq2seq.registry.names`), never from a list kept
here, so a plugin's score or region (`seq2seq-lab mechanisms --plugins my_score.py`) is
trained too. Every score is trained with the soft region (its preset `attention=<score>`
where one exists with that score and the soft region, else `attention=additive
attention.score=<score>`), every other region with the lab's reference score, additive
(`attention=additive attention/region=<region>`, once per value of its option `mode` where it
has one, so local gives local-p and local-m; other options keep their defaults, so hard
attention is trained by its default estimator, straight-through: experiment 5 compares the
estimators), all as the lab's GRU model
(`seq2seq.lab.lab_models.gru_model`), so runs with the same overrides are shared with the other
experiments. Then, for each model:

* the alignment of 我爱中国。 teacher-forced on "I love China.", so that every panel has the
  same rows (`seq2seq.study.alignments.collect_panels`, the code of
  `scripts/compare_alignments.py`, drawn side by side with the CJK font);
* test AER on the gold pairs' test part, the last layer's head mean, and the layer × head
  chosen on the valid part (`seq2seq.align.model_aer.checkpoint_aer`), with test BLEU;
* on the gold test pairs, the mean entropy of each target row (the row divided by its sum
  first: local-p rows sum to less than 1) and the share of weights that are exactly zero.

At quick size the toy reverse task stands in for Tatoeba (no gold pairs): a few mechanisms
(plus any plugin's), one toy test sentence teacher-forced on its reverse, and the alignment
accuracy against the known anti-diagonal (`seq2seq.metrics.alignment_accuracy`) on the toy
test split instead of AER.

Agreement. The claim is mostly descriptive: which mechanism aligns best here is measured,
not predicted. Its testable part is that every mechanism's weighting can be read and scored
as an alignment, so `agrees` is True when every model gave a finite AER (quick: an
alignment accuracy), False when one gave none.
"""

from __future__ import annotations

import math
import typing
from dataclasses import dataclass, fields
from enum import Enum
from pathlib import Path

import torch
import yaml
from matplotlib.figure import Figure

from seq2seq import registry
from seq2seq.align.model_aer import checkpoint_aer, gold_examples
from seq2seq.config.search_settings import SearchSettings
from seq2seq.configs import config_files
from seq2seq.data.prepare import prepare
from seq2seq.lab.experiment import Experiment, Finding, LabContext
from seq2seq.lab.lab_models import TATOEBA_STEPS, gru_model
from seq2seq.lab.training import TrainedRun, trained
from seq2seq.models.attention.options import attention_choice
from seq2seq.search.translator import Translator
from seq2seq.study.alignments import collect_panels
from seq2seq.visualise.alignment import teacher_forced_attention, toy_alignment_accuracy
from seq2seq.visualise.heatmap import draw_comparison

SENTENCE, REFERENCE = "我爱中国。", "I love China."
REFERENCE_SCORE = "additive"  # the lab's reference score: every region is trained with it
SOFT = "soft"  # the region every score is trained with
QUICK_MECHANISMS = ("additive", "dot", "sparsemax", "hard")  # and every plugin's
# A region's option that chooses between variants of its weighting (local: predictive,
# monotonic): each variant is trained. Other options keep their defaults.
MODE_OPTION = "mode"


# ---------------------------------------------------------------- the mechanisms


@dataclass(frozen=True)
class Mechanism:
    """One model to train: its name in the table, its score and region, and its overrides
    of the lab's GRU model."""

    name: str  # "dot", "sparsemax", "local-monotonic"
    score: str
    region: str
    overrides: tuple[str, ...]
    plugin: str | None = None  # the spec of the plugin that registered its score or region


def mechanisms(context: LabContext) -> list[Mechanism]:
    """Every registered score with the soft region, then every other registered region
    with the additive score; at quick size only QUICK_MECHANISMS and plugins' components."""
    found = [score_mechanism(score) for score in registry.names("score")]
    for region in registry.names("region"):
        if region != SOFT:
            found.extend(region_mechanisms(region))
    if context.quick:
        found = [m for m in found if m.name in QUICK_MECHANISMS or m.plugin is not None]
    return found


def score_mechanism(score: str) -> Mechanism:
    """`score` with the soft region: its preset when that preset is (score, soft)."""
    if preset_choice(score) == (score, SOFT):
        overrides = (f"attention={score}",)
    else:
        overrides = (f"attention={REFERENCE_SCORE}", f"attention.score={score}")
    plugin = registry.get("score", score).plugin
    return Mechanism(score, score, SOFT, (*overrides, *plugin_overrides(plugin)), plugin)


def region_mechanisms(region: str) -> list[Mechanism]:
    """`region` with the additive score, once per value of its `mode` option (if any)."""
    found, plugin = [], registry.get("region", region).plugin
    for mode in mode_choices(region):
        name = region if mode is None else f"{region}-{mode}"
        chosen = () if mode is None else (f"attention.region.{MODE_OPTION}={mode}",)
        overrides = (
            f"attention={REFERENCE_SCORE}",
            f"attention/region={region}",
            *chosen,
            *plugin_overrides(plugin),
        )
        found.append(Mechanism(name, REFERENCE_SCORE, region, overrides, plugin))
    return found


def mode_choices(region: str) -> list[str | None]:
    """The values of the region's Enum option `mode` (local: predictive, monotonic);
    [None] for a region without one."""
    options = registry.get("region", region).options
    if options is None or MODE_OPTION not in {item.name for item in fields(options)}:
        return [None]
    kind = typing.get_type_hints(options)[MODE_OPTION]
    if not (isinstance(kind, type) and issubclass(kind, Enum)):
        return [None]
    return [member.name for member in kind]


def preset_choice(name: str) -> tuple[str, str] | None:
    """(score, region) that the package's preset `attention=<name>` chooses in its defaults
    list; None when there is no such preset or it names no score or region."""
    preset = next((f for f in config_files("attention") if f.name == f"{name}.yaml"), None)
    if preset is None:
        return None
    defaults = yaml.safe_load(preset.read_text(encoding="utf-8")).get("defaults", [])
    chosen = {k: v for entry in defaults if isinstance(entry, dict) for k, v in entry.items()}
    if "score" not in chosen or "region" not in chosen:
        return None
    return chosen["score"], chosen["region"]


def plugin_overrides(spec: str | None) -> tuple[str, ...]:
    """`plugins=[spec]` for a plugin's component, so that its checkpoint records the plugin."""
    return () if spec is None else (f"plugins=['{spec}']",)


# ---------------------------------------------------------------- training and measuring


@dataclass(frozen=True)
class Measured:
    """What one mechanism's model did."""

    mechanism: Mechanism
    run: TrainedRun
    alignment: float | None  # test AER (default) or toy alignment accuracy (quick)
    best_head: str  # the layer × head chosen on valid, and its test AER ("" at quick size)
    entropy: float  # mean entropy of a target row, nats
    zero_share: float  # share of exactly zero weights
    translation: str  # the model's greedy translation of the probe sentence


def measure(context: LabContext, mechanism: Mechanism) -> Measured:
    """Train (or reuse) the mechanism's model and measure its attention."""
    torch.manual_seed(context.seed)
    run = trained(context, gru_model(context, *mechanism.overrides), f"gru-{mechanism.name}")
    translator = run.translator(context.device)
    check_choice(translator, mechanism)
    pairs = scored_pairs(context, translator)
    attentions = teacher_forced_attention(translator.model, pairs, translator.device) or []
    entropy, zero_share = weight_statistics(attentions)
    alignment, best_head = alignment_quality(context, run, translator, pairs)
    sentence, _ = probe(context, translator)
    return Measured(mechanism, run, alignment, best_head, entropy, zero_share,
                    greedy(translator, sentence))  # fmt: skip


def check_choice(translator: Translator, mechanism: Mechanism) -> None:
    """ValueError when the trained model's attention is not the mechanism's (a preset
    that changed its score or region)."""
    chosen = attention_choice(translator.config.attention)
    if chosen != (mechanism.score, mechanism.region):
        raise ValueError(
            f"{mechanism.name}: {' '.join(mechanism.overrides)} trained the attention "
            f"{chosen}, not ({mechanism.score!r}, {mechanism.region!r})"
        )


def scored_pairs(context: LabContext, translator: Translator) -> list[tuple[list, list]]:
    """(source ids, target ids) whose attention is measured: the gold test pairs
    (default), the toy test split (quick)."""
    if context.quick:
        return [(list(s), list(t)) for s, t in prepare(translator.config.data).test.examples]
    examples = gold_examples(translator, "test") or []
    return [(example.source_ids, example.target_ids) for example in examples]


def alignment_quality(
    context: LabContext, run: TrainedRun, translator: Translator, pairs: list
) -> tuple[float | None, str]:
    """(test AER of the head mean, the valid-chosen head and its test AER); at quick size
    (the toy alignment accuracy, "")."""
    if context.quick:
        task = translator.config.data.source.task
        return toy_alignment_accuracy(translator.model, pairs, task, translator.device), ""
    gold = checkpoint_aer(run.checkpoint, context.device)
    if gold is None or gold.head_mean.aer is None:
        return None, ""
    best = "-" if gold.best.aer is None else f"{gold.best.aer:.3f}"
    return gold.head_mean.aer, f"{gold.best_name} ({best})"


def weight_statistics(attentions: list[torch.Tensor]) -> tuple[float, float]:
    """(mean row entropy in nats, share of exactly zero weights) of (tgt_len, src_len)
    matrices; each row is divided by its sum first (local-p rows sum to less than 1)."""
    if not attentions:
        return math.nan, math.nan
    entropies, zeros, cells = [], 0, 0
    for weights in attentions:  # (tgt_len, src_len)
        shares = weights / weights.sum(-1, keepdim=True).clamp_min(1e-12)
        entropies.append(-(shares * shares.clamp_min(1e-12).log()).sum(-1))  # (tgt_len,)
        zeros += int((weights == 0).sum())
        cells += weights.numel()
    return float(torch.cat(entropies).mean()), zeros / cells


def probe(context: LabContext, translator: Translator) -> tuple[str, str]:
    """The sentence drawn for every model and the reference it is teacher-forced on:
    我爱中国。 → I love China., or at quick size a toy test sentence and its reverse."""
    if not context.quick:
        return SENTENCE, REFERENCE
    lines = prepare(translator.config.data).test.src_lines
    distinct = [line for line in lines if len(set(line.split())) == len(line.split()) >= 4]
    sentence = (distinct or lines)[0]
    return sentence, " ".join(reversed(sentence.split()))


def greedy(translator: Translator, sentence: str) -> str:
    (translation,) = translator.translate([sentence], SearchSettings(beam_size=1))
    return translation.text


# ---------------------------------------------------------------- figures


def draw_alignments(context: LabContext, measured: list[Measured]) -> Path:
    """The probe's teacher-forced alignment in every model: the scores' models in a row,
    then the regions'."""
    sentence, reference = probe(context, measured[0].run.translator(context.device))
    checkpoints = [m.run.checkpoint for m in measured]
    panels = collect_panels(checkpoints, context.device, sentence, reference).attention
    for panel, m in zip(panels, measured, strict=True):  # every mechanism has weights
        panel.title = f"{m.mechanism.name}\n{metric_label(context)} {shown(m.alignment)}"
    title = f"{sentence} → {reference}  (teacher-forced; attention weights of each mechanism)"
    scores = sum(m.mechanism.region == SOFT for m in measured)  # a row of scores, then regions
    path = context.figure("alignments")
    draw_comparison(panels, title, per_row=max(scores, 1)).savefig(path, dpi=110)
    return path


def draw_bars(context: LabContext, measured: list[Measured]) -> Path:
    """Per mechanism: alignment quality, and the share of zero weights."""
    names = [m.mechanism.name for m in measured]
    figure = Figure(figsize=(9, 1.5 + 0.35 * len(names)), layout="constrained")
    quality, zeros = figure.subplots(1, 2, sharey=True)
    quality.barh(names, [nan_if_none(m.alignment) for m in measured], color="tab:blue")
    better = "higher" if context.quick else "lower"
    quality.set_xlabel(f"{metric_label(context)} ({better} is better)")
    quality.invert_yaxis()
    zeros.barh(names, [m.zero_share for m in measured], color="tab:orange")
    zeros.set_xlabel("share of attention weights exactly 0")
    data = "toy reverse test split" if context.quick else "gold test pairs"
    figure.suptitle(f"Alignment quality and sparsity per mechanism ({data}, teacher-forced)")
    path = context.figure("quality")
    figure.savefig(path, dpi=110)
    return path


def metric_label(context: LabContext) -> str:
    return "alignment accuracy" if context.quick else "test AER"


def nan_if_none(value: float | None) -> float:
    return math.nan if value is None else value


def shown(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


# ---------------------------------------------------------------- the finding


def table_rows(context: LabContext, measured: list[Measured]) -> list[dict]:
    rows = []
    for m in measured:
        row = {
            "mechanism": m.mechanism.name,
            "score": m.mechanism.score,
            "region": m.mechanism.region,
            "test BLEU": round(m.run.test_bleu, 2),
            metric_label(context): None if m.alignment is None else round(m.alignment, 3),
        }
        if not context.quick:
            row["best head on valid (test AER)"] = m.best_head
        row["row entropy (nats)"] = round(m.entropy, 3)
        row["zero weights"] = round(m.zero_share, 3)
        row["greedy output"] = m.translation
        rows.append(row)
    return rows


def ranked(context: LabContext, measured: list[Measured]) -> list[Measured]:
    """The models with a measured alignment, best first."""
    scored = [m for m in measured if m.alignment is not None]
    return sorted(scored, key=lambda m: m.alignment, reverse=context.quick)


def summary(context: LabContext, measured: list[Measured], agrees: bool) -> str:
    order = ranked(context, measured)
    label = metric_label(context)
    if not order:
        return f"No mechanism gave a {label}: the weights could not be scored as alignments."
    best, worst = order[0], order[-1]
    sparse = [m.zero_share for m in measured if m.mechanism.region != SOFT]
    soft = [m.zero_share for m in measured if m.mechanism.region == SOFT]
    sparsity = (
        f" The non-soft regions left {percent_range(sparse)} of the weights at exactly zero, "
        + (f"the softmax models at most {100 * max(soft):.1f}%." if max(soft) >= 0.001
           else "the softmax models under 0.1%." if max(soft) > 0
           else "the softmax models none.")
        if sparse and soft else ""
    )  # fmt: skip
    verdict = (
        "every mechanism's weighting could be read and scored as an alignment, as claimed"
        if agrees
        else "some mechanism's weighting gave no score, against the claim"
    )
    return (
        f"Of {len(measured)} mechanisms, {best.mechanism.name} aligned best ({label} "
        f"{best.alignment:.3f}) and {worst.mechanism.name} worst ({worst.alignment:.3f})."
        f"{sparsity} So {verdict}."
    )


def percent_range(shares: list[float]) -> str:
    """`12–39%`, or `39%` when the lowest and highest round alike."""
    low, high = f"{100 * min(shares):.0f}", f"{100 * max(shares):.0f}"
    return f"{high}%" if low == high else f"{low}–{high}%"


def finding_values(context: LabContext, measured: list[Measured]) -> dict:
    key = "accuracy" if context.quick else "aer"
    order = ranked(context, measured)
    values: dict = {
        "mechanisms": ",".join(m.mechanism.name for m in measured),
        "best": order[0].mechanism.name if order else "",
        "worst": order[-1].mechanism.name if order else "",
    }
    for m in measured:
        name = m.mechanism.name
        values[f"{key}.{name}"] = m.alignment
        values[f"bleu.{name}"] = m.run.test_bleu
        values[f"entropy.{name}"] = m.entropy
        values[f"zero_share.{name}"] = m.zero_share
    return values


def run(context: LabContext) -> Finding:
    measured = [measure(context, mechanism) for mechanism in mechanisms(context)]
    agrees = all(m.alignment is not None and math.isfinite(m.alignment) for m in measured)
    figures = [draw_alignments(context, measured), draw_bars(context, measured)]
    return Finding(
        summary=summary(context, measured, agrees),
        table=table_rows(context, measured),
        figures=figures,
        values=finding_values(context, measured),
        agrees=agrees,
    )


EXPERIMENT = Experiment(
    name="mechanisms",
    order=8,
    title="我爱中国 across mechanisms",
    claim=(
        "Every attention mechanism, whatever its score (dot, scaled dot, general, additive, "
        "cosine) or its region (soft, sparsemax, 1.5-entmax, hard, local-p, local-m), gives "
        "each target word a weighting over the source words. The mechanisms differ in how "
        "sharp, how sparse or how local that weighting is; read as a word alignment, the "
        "learned weighting can be scored against links made by hand (AER)."
    ),
    run=run,
    default_size=(
        f"Trains the lab's GRU model on Tatoeba zh→en ({TATOEBA_STEPS} updates) once per "
        "registered score (with softmax) and per other region (with the additive score; local "
        "in both modes): 10 runs with the built-ins, about 2 min each on 2 cores, 4 of them "
        "(additive, dot, scaled dot, hard) shared with the experiments before it; then scores "
        "each on the gold test pairs."
    ),
)
