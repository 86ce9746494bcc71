"""Flat against hierarchical attention on pseudo-documents: quality by length, cost, and
whether the sentence level looks at the right sentence.

A pseudo-document (`data=tatoeba_zh_en_docs data.documents.order=random`: 1 to 6 Tatoeba
pairs joined by the piece `<sep>` on both sides, `seq2seq.data.documents`) is a long source
made of sentences whose translations come in the same order, so target sentence i is the
translation of source sentence i: the block structure of its alignment is known.

The lab's GRU model (`gru_model`) is trained on it three times per seed, with the same
budget:

* flat (the verdict's): `attention=general`, Luong's `e_tj = q_tᵀ W h_j`, one softmax over
  the whole document;
* hierarchical: `attention=hierarchical` (`seq2seq.models.attention.hierarchical`), the same
  bilinear score within each sentence, `e_tj = (W q_t)ᵀ h_j / √d`, then a softmax over
  the sentences, β_tk = softmax_k((U q_t)ᵀ s_tk / √d), `s_tk = Σ_{j ∈ k} α_tkj h_j`;
* flat, scaled: `attention=scaled_dot`, `e_tj = q_tᵀ h_j / √d`, one softmax.

The word scores of general and hierarchical differ only by the constant 1/√d, which W can
absorb, so in what the model can express the difference is the second level; but the scale
changes how training starts, and on the first run the unscaled general model learned more
slowly than a scaled one. Scaled dot (the scale, no W) was added then, as a second flat
arm: the verdict stays the one fixed before against general, and the same test against
scaled dot is reported beside it.

Measured on the test documents:

1. quality: each run's greedy `test.hyp` scored whole (separators not scored,
   `seq2seq.metrics.base.without_separators`), overall and in source-length buckets
   (`seq2seq.lab.context_vector.length_buckets` over the characters of the source,
   separators not counted), with the paired bootstrap of hierarchical against flat;
2. per sentence: hypotheses and references cut at the separator (`split_document`); the
   documents whose hypothesis has the reference's sentence count are counted for each arm,
   and the sentences of the documents where both arms have it are scored with the
   paired bootstrap;
3. cost: forward FLOPs of one update (`seq2seq.flops.forward_flops`, both configs at the
   same shapes) and the median wall time of a training step (forward and backward) of
   the trained models, on batches of random documents of K = `CostSize.sentences`
   sentences, beside the machine's float32 matmul ceiling;
4. sentence accuracy: under teacher forcing on the references
   (`seq2seq.align.teacher_forced.teacher_forced_attention`), for every target piece of
   target sentence i (the separators and EOS left out) the source sentence with the
   largest sentence weight β_tk = Σ_{j ∈ k} γ_tj (`sentence_weights` over
   `document_segments`: the hierarchical model's own β; for flat attention the same sum of
   its weights), right when it is source sentence i. Documents of one sentence are left
   out (there is nothing to choose). Baselines from the ids alone: chance (1/K on
   average), the longest source sentence, and the sentence at the same relative position
   (piece t of a target of m pieces → source position ⌊(t + ½)·n/m⌋ of n).

The claim is taken to agree (fixed before the run) when, for every seed, the hierarchical
model's sentence accuracy is above the flat general model's and its document BLEU is not
significantly lower (not both lower and p < 0.05); to disagree when that holds for no
seed; undecided otherwise. The same test against scaled dot, the gap in the longest
bucket and the cost ratios are reported beside it and do not change the verdict.

Quick mode: a generated toy corpus of documents (`toy_corpus`: Chinese words and their
English words, 2-4 a sentence), written into the context's data root, with the tiny GRU.
"""

from __future__ import annotations

import functools
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from matplotlib.figure import Figure

from seq2seq.align.teacher_forced import teacher_forced_attention
from seq2seq.data.documents import split_document
from seq2seq.data.prepare import PreparedData, prepare
from seq2seq.flops import flops_breakdown
from seq2seq.lab.context_vector import (
    BUCKETS,
    QUICK_BUCKETS,
    GreedyOutput,
    LengthBucket,
    greedy_output,
    length_buckets,
    source_length,
)
from seq2seq.lab.experiment import Experiment, Finding, LabContext
from seq2seq.lab.lab_models import QUICK_GRU, TATOEBA_STEPS, gru_model
from seq2seq.lab.matmul_ceiling import MATMUL_SHAPES, matmul_gflops
from seq2seq.lab.parallelism import TokenBatch, median_seconds, training_step
from seq2seq.lab.training import TrainedRun, compose_config, run_overrides, trained
from seq2seq.metrics import BootstrapResult, paired_bootstrap
from seq2seq.metrics.base import without_separators
from seq2seq.models.attention.hierarchical import sentence_weights
from seq2seq.models.model import document_segments
from seq2seq.runs.assemble import data_config, select_device
from seq2seq.special_tokens import BOS_ID, EOS_ID, SEP_ID, SEP_PIECE

# The flat arm of the verdict (the baseline of every test), a second flat arm that controls
# for the 1/√d scale, and the hierarchical arm.
FLAT, SCALED, HIERARCHICAL = "general", "scaled_dot", "hierarchical"
ATTENTIONS = (FLAT, SCALED, HIERARCHICAL)
LABELS = {FLAT: "flat (general)", SCALED: "flat (scaled dot)", HIERARCHICAL: "hierarchical"}
COLOURS = {FLAT: "C0", SCALED: "C2", HIERARCHICAL: "C3"}
SEEDS, QUICK_SEEDS = 2, 1
DOCUMENTS = ("data=tatoeba_zh_en_docs", "data.documents.order=random")
SIGNIFICANT = 0.05  # a p-value under this is a significant BLEU difference
FIRST_PIECE = SEP_ID + 1  # random ids of the timed batches: ordinary pieces, never a separator


@dataclass(frozen=True)
class CostSize:
    """The timed batches: `batch` random documents of K sentences of `pieces` pieces each."""

    sentences: tuple[int, ...]  # the K timed
    pieces: int
    batch: int
    reps: int  # timed training steps (median), after one warm-up
    ceiling_reps: int


COST = CostSize(sentences=(2, 4, 6), pieces=10, batch=32, reps=9, ceiling_reps=5)
QUICK_COST = CostSize(sentences=(2, 3), pieces=4, batch=4, reps=2, ceiling_reps=1)


# ------------------------------------------------------------------ the quick corpus

TOY_WORDS = {"猫": "cat", "狗": "dog", "鸟": "bird", "鱼": "fish", "看": "sees", "吃": "eats",
             "跑": "runs", "大": "big", "小": "small", "红": "red"}  # fmt: skip
TOY_SIZES = {"train": 600, "valid": 40, "test": 60}  # sentence pairs before the documents
TOY_SEED = 7
TOY_FOLDER = "lab_hierarchical_toy"


def toy_pair(rng: random.Random) -> tuple[str, str]:
    """A toy sentence pair: 2-4 words, Chinese (no spaces, "。") and English ("... .")."""
    words = rng.choices(list(TOY_WORDS), k=rng.randint(2, 4))
    return "".join(words) + "。", " ".join(TOY_WORDS[word] for word in words) + "."


def toy_corpus(folder: Path) -> Path:
    """Train / valid / test files `folder/{split}.{zh,en}` of toy pairs (the same every
    time: files that hold it already are not rewritten). Returns the folder."""
    rng = random.Random(TOY_SEED)
    folder.mkdir(parents=True, exist_ok=True)
    for split, count in TOY_SIZES.items():
        pairs = [toy_pair(rng) for _ in range(count)]
        for side, lang in enumerate(("zh", "en")):
            path = folder / f"{split}.{lang}"
            text = "".join(pair[side] + "\n" for pair in pairs)
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                path.write_text(text, encoding="utf-8")
    return folder


def toy_data(context: LabContext) -> list[str]:
    """The data overrides of the quick size: the toy corpus as text_pair documents."""
    folder = toy_corpus(context.data_root / TOY_FOLDER)
    prefixes = [f"data.source.{split}_prefix={folder / split}" for split in TOY_SIZES]
    return ["data=text_pair", *prefixes, "data.name=lab_hierarchical_toy", "data.src_lang=zh",
            "data.tgt_lang=en", "data.src_vocab_size=24", "data.tgt_vocab_size=24",
            "data.max_len=200", "data.max_tokens=1024",
            "data.documents={min_sentences:1,max_sentences:6,order:random}"]  # fmt: skip


# ------------------------------------------------------------------ runs


def model_overrides(context: LabContext, attention: str, seed: int) -> list[str]:
    """The lab's GRU model on Tatoeba documents with `attention`; at the quick size the tiny
    GRU of `QUICK_GRU` (its toy data left out) on the toy documents."""
    if not context.quick:
        return gru_model(context, *DOCUMENTS, f"attention={attention}", seed=seed)
    model_and_trainer = [item for item in QUICK_GRU if not item.startswith("data")]
    return [*model_and_trainer, *toy_data(context), f"attention={attention}",
            f"trainer.seed={seed}"]  # fmt: skip


def attention_runs(context: LabContext) -> dict[str, list[tuple[TrainedRun, list[str]]]]:
    """Each attention's runs, one per seed (both arms of a seed before the next seed)."""
    runs: dict[str, list[tuple[TrainedRun, list[str]]]] = {}
    for seed in context.seeds(QUICK_SEEDS if context.quick else SEEDS):
        for attention in ATTENTIONS:
            overrides = model_overrides(context, attention, seed)
            run = trained(context, overrides, f"gru-docs-{attention}")
            runs.setdefault(attention, []).append((run, overrides))
    return runs


def prepared_data(context: LabContext, overrides: list[str]) -> PreparedData:
    """The prepared corpus of a run (prepared once: the arms share it)."""
    return prepare(data_config(compose_config(run_overrides(context, overrides))))


# ------------------------------------------------------------------ quality


def document_length(source: str) -> int:
    """Characters of a source document, spaces and separators not counted."""
    return source_length(source.replace(SEP_PIECE, ""))


def bleu_results(
    outputs: dict[str, GreedyOutput], members: list[int], arms: Sequence[str] = ATTENTIONS
) -> dict[str, BootstrapResult]:
    """Each of `arms`' BLEU on the documents `members` (separators not scored), with its 95%
    interval and its p-value against the first arm."""
    first = outputs[arms[0]]
    references = without_separators([first.references[i] for i in members])
    systems = [(arm, without_separators([outputs[arm].hypotheses[i] for i in members]))
               for arm in arms]  # fmt: skip
    return dict(zip(arms, paired_bootstrap(systems, references, first.tgt_lang), strict=True))


@dataclass(frozen=True)
class SentenceLevel:
    """Per-sentence quality of one seed's two runs."""

    matched: dict[str, int]  # documents whose hypothesis has the reference's sentence count
    documents: int  # test documents
    both: int  # documents matched by both arms
    scores: dict[str, BootstrapResult] | None  # BLEU over the sentences of those; None if none


def sentence_counts_match(hypothesis: str, reference: str) -> bool:
    return len(split_document(hypothesis)) == len(split_document(reference))


def sentence_level(outputs: dict[str, GreedyOutput]) -> SentenceLevel:
    """The matched documents of each arm; the sentences of the documents both match,
    scored one by one with the paired bootstrap (hierarchical against flat)."""
    flat = outputs[FLAT]
    matched = {a: [sentence_counts_match(h, r) for h, r in
                   zip(outputs[a].hypotheses, flat.references, strict=True)]
               for a in ATTENTIONS}  # fmt: skip
    both = [i for i in range(len(flat.references)) if all(matched[a][i] for a in ATTENTIONS)]
    counts = {attention: sum(flags) for attention, flags in matched.items()}
    if not both:
        return SentenceLevel(counts, len(flat.references), 0, None)
    references = [s for i in both for s in split_document(flat.references[i])]
    systems = [(a, [s for i in both for s in split_document(outputs[a].hypotheses[i])])
               for a in ATTENTIONS]  # fmt: skip
    results = paired_bootstrap(systems, references, flat.tgt_lang)
    return SentenceLevel(counts, len(flat.references), len(both),
                         dict(zip(ATTENTIONS, results, strict=True)))  # fmt: skip


# ------------------------------------------------------------------ sentence accuracy


@dataclass(frozen=True)
class SentenceChoices:
    """One document of K ≥ 2 sentences: for each target piece counted (row t of the
    teacher-forced weights; separators and EOS left out), the source sentence chosen and
    the right one (its own target sentence's index)."""

    picked: list[int]
    right: list[int]
    sentences: int  # K

    @property
    def hits(self) -> int:
        return sum(p == r for p, r in zip(self.picked, self.right, strict=True))


def target_rows(tgt_ids: Sequence[int]) -> list[tuple[int, int]]:
    """(row t, sentence i) for each target piece that is not a separator: row t of the
    teacher-forced weights predicts piece t; the EOS row (t = len(tgt_ids)) is not listed."""
    rows, sentence = [], 0
    for row, piece in enumerate(tgt_ids):
        if piece == SEP_ID:
            sentence += 1
        else:
            rows.append((row, sentence))
    return rows


def source_segments(src_ids: Sequence[int]) -> torch.Tensor:
    """`(len(src) + 1,)` the sentence of each source position, EOS included, as the model
    cuts it (`document_segments`: a separator ends its sentence, EOS is in the last)."""
    return document_segments(torch.tensor([[*src_ids, EOS_ID]]), SEP_ID)[0]


def sentence_choices(
    weights: torch.Tensor, src_ids: Sequence[int], tgt_ids: Sequence[int]
) -> SentenceChoices | None:
    """`weights (len(tgt) + 1, len(src) + 1)` (teacher-forced, EOS row and column) -> the
    source sentence of largest β_tk = Σ_{j ∈ k} w_tj for each counted target piece; None for
    a document of one sentence, or whose two sides differ in sentence count."""
    segments = source_segments(src_ids)  # (S + 1,)
    count = int(segments.max()) + 1
    if count < 2 or list(tgt_ids).count(SEP_ID) + 1 != count:
        return None
    if weights.shape != (len(tgt_ids) + 1, len(src_ids) + 1):
        raise ValueError(f"weights must be ({len(tgt_ids) + 1}, {len(src_ids) + 1}), got "
                         f"{tuple(weights.shape)}")  # fmt: skip
    beta = sentence_weights(weights.float()[None, None], segments[None])[0, 0]  # (T + 1, K)
    rows = target_rows(tgt_ids)
    picked = beta[[row for row, _ in rows]].argmax(dim=-1).tolist()
    return SentenceChoices(picked, [sentence for _, sentence in rows], count)


def longest_sentence_choices(src_ids: Sequence[int], tgt_ids: Sequence[int]) -> SentenceChoices:
    """Baseline: always the source sentence of most pieces (the first of the longest)."""
    sizes = torch.bincount(source_segments(src_ids)).tolist()
    rows = target_rows(tgt_ids)
    longest = sizes.index(max(sizes))
    return SentenceChoices([longest] * len(rows), [s for _, s in rows], len(sizes))


def position_choices(src_ids: Sequence[int], tgt_ids: Sequence[int]) -> SentenceChoices:
    """Baseline: the source sentence at the same relative position, piece t of m target
    pieces → source position ⌊(t + ½)·n/m⌋ of the n source pieces (a diagonal)."""
    segments = source_segments(src_ids).tolist()
    rows = target_rows(tgt_ids)
    n, m = len(src_ids), len(tgt_ids)
    picked = [segments[min(n - 1, int((row + 0.5) * n / m))] for row, _ in rows]
    return SentenceChoices(picked, [s for _, s in rows], max(segments) + 1)


def accuracy(choices: Sequence[SentenceChoices | None]) -> float:
    """Right choices over the pieces counted (NaN when there are none)."""
    counted = [c for c in choices if c is not None]
    pieces = sum(len(c.right) for c in counted)
    return sum(c.hits for c in counted) / pieces if pieces else float("nan")


def chance(choices: Sequence[SentenceChoices | None]) -> float:
    """The accuracy of a uniform guess among the K sentences: 1/K averaged over the pieces."""
    counted = [c for c in choices if c is not None]
    pieces = sum(len(c.right) for c in counted)
    return sum(len(c.right) / c.sentences for c in counted) / pieces if pieces else float("nan")


def model_choices(
    context: LabContext, run: TrainedRun, data: PreparedData
) -> list[SentenceChoices | None]:
    """The run's best model's sentence choices on each test document, teacher-forced."""
    examples = [(list(src), list(tgt)) for src, tgt in data.test.examples]
    translator = run.translator(context.device)
    weights = teacher_forced_attention(translator.model, examples, select_device(context.device))
    if weights is None:
        raise ValueError(f"{run.run_dir}: the model has no attention weights to read")
    return [sentence_choices(w, src, tgt) for w, (src, tgt) in zip(weights, examples, strict=True)]


def baseline_choices(data: PreparedData) -> dict[str, list[SentenceChoices | None]]:
    """The longest-sentence and relative-position baselines on each test document (None
    where the models' choices are None too)."""
    baselines: dict[str, list[SentenceChoices | None]] = {"longest": [], "position": []}
    for src, tgt in data.test.examples:
        src, tgt = list(src), list(tgt)
        usable = sentence_choices(torch.zeros(len(tgt) + 1, len(src) + 1), src, tgt)
        baselines["longest"].append(longest_sentence_choices(src, tgt) if usable else None)
        baselines["position"].append(position_choices(src, tgt) if usable else None)
    return baselines


# ------------------------------------------------------------------ one seed, measured


@dataclass(frozen=True)
class SeedMeasures:
    """Everything measured on one seed's pair of runs."""

    outputs: dict[str, GreedyOutput]
    overall: dict[str, BootstrapResult]  # p-values against FLAT
    versus_scaled: BootstrapResult  # hierarchical, its p-value against SCALED
    buckets: list[dict[str, BootstrapResult]]  # one per length bucket
    sentences: SentenceLevel
    choices: dict[str, list[SentenceChoices | None]]  # per attention, per test document


def seed_measures(
    context: LabContext,
    pair: dict[str, tuple[TrainedRun, list[str]]],
    data: PreparedData,
    buckets: list[LengthBucket] | None,
) -> tuple[SeedMeasures, list[LengthBucket]]:
    """One seed's measures; the buckets are made from the first seed's sources."""
    outputs = {attention: greedy_output(context, *pair[attention]) for attention in ATTENTIONS}
    if buckets is None:
        lengths = [document_length(line) for line in outputs[FLAT].sources]
        buckets = length_buckets(lengths, QUICK_BUCKETS if context.quick else BUCKETS)
    everything = list(range(len(outputs[FLAT].references)))
    measures = SeedMeasures(
        outputs=outputs,
        overall=bleu_results(outputs, everything),
        versus_scaled=bleu_results(outputs, everything, (SCALED, HIERARCHICAL))[HIERARCHICAL],
        buckets=[bleu_results(outputs, bucket.members) for bucket in buckets],
        sentences=sentence_level(outputs),
        choices={a: model_choices(context, pair[a][0], data) for a in ATTENTIONS},
    )
    return measures, buckets


# ------------------------------------------------------------------ cost


def document_batch(
    vocabularies: tuple[int, int],
    size: CostSize,
    sentences: int,
    generator: torch.Generator,
    device: torch.device,
) -> TokenBatch:
    """`size.batch` random documents of `sentences` sentences of `size.pieces` ordinary
    pieces, separated by SEP_ID, on both sides (target: BOS first in `tgt_in`)."""

    def documents(vocabulary: int) -> torch.Tensor:
        pieces = torch.randint(FIRST_PIECE, vocabulary, (size.batch, sentences, size.pieces),
                               generator=generator)  # fmt: skip
        ends = torch.full((size.batch, sentences, 1), SEP_ID)
        return torch.cat([pieces, ends], dim=-1).flatten(1)[:, :-1]  # (B, K·(pieces+1) − 1)

    src, tgt = documents(vocabularies[0]), documents(vocabularies[1])
    tgt_in = torch.cat([torch.full((size.batch, 1), BOS_ID), tgt[:, :-1]], dim=1)
    src_mask = torch.ones_like(src, dtype=torch.bool)
    return TokenBatch(*(t.to(device) for t in (src, src_mask, tgt_in, tgt)))


def cost_rows(
    context: LabContext, runs: dict[str, list[tuple[TrainedRun, list[str]]]], size: CostSize
) -> list[dict[str, Any]]:
    """For each K and arm (the first seed's trained models): forward FLOPs of a training
    step on the batch (`flops_breakdown`, its attention part apart) and the median
    milliseconds of the step (forward and backward)."""
    device = select_device(context.device)
    translators = {a: runs[a][0][0].translator(context.device) for a in ATTENTIONS}
    vocabularies = (translators[FLAT].src_tokenizer.vocab_size,
                    translators[FLAT].tgt_tokenizer.vocab_size)  # fmt: skip
    rows = []
    for sentences in size.sentences:
        generator = torch.Generator().manual_seed(context.seed + sentences)
        batch = document_batch(vocabularies, size, sentences, generator, device)
        shape = (size.batch, batch.src.size(1), batch.tgt_in.size(1), *vocabularies)
        for attention, translator in translators.items():
            parts = flops_breakdown(translator.run_config, *shape)
            model = translator.model.train()
            step = median_seconds(functools.partial(training_step, model, batch), size.reps, device)
            model.eval()
            rows.append({
                "attention": attention, "sentences": sentences,
                "source pieces": batch.src.size(1), "forward GFLOP": sum(parts.values()) / 1e9,
                "attention GFLOP": parts["attention"] / 1e9, "step ms": 1e3 * step,
            })  # fmt: skip
    return rows


def ceiling(context: LabContext, size: CostSize) -> float:
    """The float32 matmul ceiling, GFLOP/s (`seq2seq.lab.matmul_ceiling`)."""
    device = select_device(context.device)
    return max(matmul_gflops(m, k, n, size.ceiling_reps, device) for m, k, n in MATMUL_SHAPES)


def cost_ratios(rows: list[dict[str, Any]], baseline: str = FLAT) -> dict[str, float]:
    """Hierarchical over the flat arm `baseline`, at the largest K timed: forward FLOPs and
    step time."""
    largest = max(row["sentences"] for row in rows)
    at = {row["attention"]: row for row in rows if row["sentences"] == largest}
    flat, hierarchical = at[baseline], at[HIERARCHICAL]
    return {"flops": hierarchical["forward GFLOP"] / flat["forward GFLOP"],
            "time": hierarchical["step ms"] / flat["step ms"], "sentences": largest}  # fmt: skip


def run_pace(runs: dict[str, list[tuple[TrainedRun, list[str]]]]) -> dict[str, float]:
    """Each arm's seconds per update over its whole runs (validation included: the runs'
    `train_minutes` over their updates), the mean over seeds."""
    return {
        attention: mean_of([60.0 * r.results["train_minutes"] / r.results["steps"]
                            for r, _ in runs[attention]])
        for attention in ATTENTIONS
    }  # fmt: skip


@dataclass(frozen=True)
class Cost:
    rows: list[dict[str, Any]]  # `cost_rows`
    ceiling_gflops: float
    run_pace: dict[str, float]  # seconds per update of the trained runs (`run_pace`)


def measured_cost(
    context: LabContext, runs: dict[str, list[tuple[TrainedRun, list[str]]]], size: CostSize
) -> Cost:
    return Cost(cost_rows(context, runs, size), ceiling(context, size), run_pace(runs))


# ------------------------------------------------------------------ table


def mean_of(values: list[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


def table_row(
    attention: str,
    label: str,
    members: list[int],
    per_seed: list[dict[str, BootstrapResult]],
    choices: list[dict[str, list[SentenceChoices | None]]],
) -> dict[str, Any]:
    """One row: the arm's mean BLEU over seeds on `members`, seeds' range and band, gap and
    largest p against flat, and its sentence accuracy on the same documents beside chance."""
    mine = [scores[attention] for scores in per_seed]
    flat = [scores[FLAT] for scores in per_seed]
    p_values = [result.p_value for result in mine if result.p_value is not None]
    picked = [[seed[attention][i] for i in members] for seed in choices]
    return {
        "attention": attention, "source length": label, "documents": len(members),
        "bleu": mean_of([r.bleu for r in mine]),
        "seed min": min(r.bleu for r in mine), "seed max": max(r.bleu for r in mine),
        "band low": max(0.0, min(r.ci_low for r in mine)),
        "band high": min(100.0, max(r.ci_high for r in mine)),
        "gap vs flat": mean_of([a.bleu - b.bleu for a, b in zip(mine, flat, strict=True)]),
        "p vs flat": max(p_values) if p_values else float("nan"),
        "sentence accuracy": mean_of([accuracy(seed) for seed in picked]),
        "chance": chance(picked[0]),
    }  # fmt: skip


def table(measures: list[SeedMeasures], buckets: list[LengthBucket]) -> list[dict[str, Any]]:
    """One row per arm for all the test documents, then one per arm and length bucket."""
    choices = [m.choices for m in measures]
    everything = list(range(sum(len(b.members) for b in buckets)))
    rows = [table_row(a, "all", everything, [m.overall for m in measures], choices)
            for a in ATTENTIONS]  # fmt: skip
    for index, bucket in enumerate(buckets):
        per_seed = [m.buckets[index] for m in measures]
        rows += [table_row(a, bucket.label, bucket.members, per_seed, choices) for a in ATTENTIONS]
    return rows


# ------------------------------------------------------------------ figures


def draw_quality(context: LabContext, buckets: list[LengthBucket], rows: list[dict]) -> Path:
    """BLEU per length bucket with its band (left) and sentence accuracy per bucket (right)."""
    positions = list(range(len(buckets)))
    ticks = [f"{b.label}\n({len(b.members)})" for b in buckets]
    figure = Figure(figsize=(10, 4), layout="constrained")
    bleu_axes, accuracy_axes = figure.subplots(1, 2)
    for attention in ATTENTIONS:
        mine = [row for row in rows if row["attention"] == attention][1:]  # not "all"
        style = {"color": COLOURS[attention], "label": LABELS[attention], "marker": "o"}
        bleu_axes.plot(positions, [row["bleu"] for row in mine], **style)
        bleu_axes.fill_between(positions, [r["band low"] for r in mine],
                               [r["band high"] for r in mine], color=COLOURS[attention],
                               alpha=0.2)  # fmt: skip
        accuracy_axes.plot(positions, [row["sentence accuracy"] for row in mine], **style)
    chances = [row["chance"] for row in rows if row["attention"] == FLAT][1:]
    accuracy_axes.plot(positions, chances, linestyle=":", color="grey", label="chance (1/K)")
    for axes, ylabel in ((bleu_axes, "test BLEU (document)"),
                         (accuracy_axes, "sentence accuracy (teacher-forced)")):  # fmt: skip
        axes.set_xticks(positions, ticks)
        axes.set_xlabel("source length in characters (documents)")
        axes.set_ylabel(ylabel)
        axes.legend(fontsize="small")
    bleu_axes.set_title("BLEU by source length (band: 95% intervals)")
    accuracy_axes.set_title("right source sentence by source length")
    path = context.figure("quality_by_length")
    figure.savefig(path, dpi=110)
    return path


def by_sentence_count(choices: Sequence[SentenceChoices | None]) -> dict[int, float]:
    """Accuracy over the documents of each sentence count K."""
    counts = sorted({c.sentences for c in choices if c is not None})
    return {k: accuracy([c for c in choices if c is not None and c.sentences == k]) for k in counts}


def draw_accuracy(
    context: LabContext, measures: list[SeedMeasures], baselines: dict[str, list]
) -> Path:
    """Sentence accuracy against the number of sentences K, both arms (mean over seeds),
    with chance 1/K and the two baselines."""
    figure = Figure(figsize=(6, 4), layout="constrained")
    axes = figure.subplots()
    for attention in ATTENTIONS:
        per_seed = [by_sentence_count(m.choices[attention]) for m in measures]
        counts = sorted(per_seed[0])
        means = [mean_of([seed[k] for seed in per_seed]) for k in counts]
        axes.plot(counts, means, marker="o", color=COLOURS[attention], label=LABELS[attention])
    for name, style in (("position", "--"), ("longest", "-.")):
        found = by_sentence_count(baselines[name])
        axes.plot(list(found), list(found.values()), linestyle=style, color="grey",
                  label=f"baseline: {name}")  # fmt: skip
    axes.plot(counts, [1 / k for k in counts], linestyle=":", color="black", label="chance 1/K")
    axes.set_xticks(counts)
    axes.set_ylim(0, 1.02)
    axes.set_xlabel("sentences in the document (K)")
    axes.set_ylabel("share of target pieces on the right sentence")
    axes.set_title("Largest sentence weight β on the right source sentence")
    axes.legend(fontsize="small")
    path = context.figure("sentence_accuracy")
    figure.savefig(path, dpi=110)
    return path


def draw_cost(context: LabContext, rows: list[dict[str, Any]], size: CostSize) -> Path:
    """Forward GFLOP of a step (left) and its measured milliseconds (right) against K."""
    figure = Figure(figsize=(10, 4), layout="constrained")
    flops_axes, time_axes = figure.subplots(1, 2)
    for attention in ATTENTIONS:
        mine = [row for row in rows if row["attention"] == attention]
        counts = [row["sentences"] for row in mine]
        style = {"color": COLOURS[attention], "label": LABELS[attention], "marker": "o"}
        flops_axes.plot(counts, [row["forward GFLOP"] for row in mine], **style)
        time_axes.plot(counts, [row["step ms"] for row in mine], **style)
    for axes, ylabel in ((flops_axes, "forward GFLOP per step"),
                         (time_axes, "training step, median ms")):  # fmt: skip
        axes.set_xticks(size.sentences)
        axes.set_xlabel(f"K sentences of {size.pieces} pieces, {size.batch} documents a batch")
        axes.set_ylabel(ylabel)
        axes.legend(fontsize="small")
    flops_axes.set_title("matrix-product FLOPs (seq2seq.flops)")
    time_axes.set_title("forward + backward, measured")
    path = context.figure("cost")
    figure.savefig(path, dpi=110)
    return path


# ------------------------------------------------------------------ verdict and finding


def holds(measures: SeedMeasures, baseline: str = FLAT) -> bool:
    """This seed supports the claim against the flat arm `baseline`: hierarchical sentence
    accuracy above the baseline's, and its BLEU not significantly lower (lower with
    p < SIGNIFICANT). The verdict uses FLAT; SCALED is reported."""
    hierarchical = measures.overall[HIERARCHICAL]
    if baseline == SCALED:
        hierarchical = measures.versus_scaled
    lower = hierarchical.bleu < measures.overall[baseline].bleu and (
        (hierarchical.p_value or 1.0) < SIGNIFICANT
    )
    choices = measures.choices
    return accuracy(choices[HIERARCHICAL]) > accuracy(choices[baseline]) and not lower


def verdict(measures: list[SeedMeasures]) -> bool | None:
    results = [holds(m) for m in measures]
    return True if all(results) else False if not any(results) else None


def sentence_note(measures: list[SeedMeasures]) -> str:
    """The per-sentence scores of the first seed, in a sentence."""
    level = measures[0].sentences
    counts = ", ".join(f"{LABELS[a]} {level.matched[a]}" for a in ATTENTIONS)
    if level.scores is None:
        return (
            f"Documents whose output has the reference's sentence count (of "
            f"{level.documents}): {counts}; none in common, so no per-sentence BLEU."
        )
    bleus = ", ".join(f"{LABELS[a]} {level.scores[a].bleu:.1f}" for a in ATTENTIONS)
    return (f"Per sentence (first seed): the outputs have the reference's sentence count in "
            f"{counts} of {level.documents} documents; on the {level.both} all arms match, "
            f"sentence BLEU is {bleus} (hierarchical against general: p = "
            f"{level.scores[HIERARCHICAL].p_value:.3f}).")  # fmt: skip


def control_note(measures: list[SeedMeasures], overall: dict[str, dict]) -> str:
    """The same test against the second flat arm, scaled dot (not the verdict's)."""
    scaled = overall[SCALED]
    p_value = max((m.versus_scaled.p_value or 1.0) for m in measures)
    held = sum(holds(m, SCALED) for m in measures)
    return (
        f"Against flat scaled dot-product attention (the 1/√d scale without W): BLEU "
        f"{scaled['bleu']:.1f} (hierarchical against it: p = {p_value:.3f}), sentence "
        f"accuracy {scaled['sentence accuracy']:.2f}; the test of the verdict holds against it "
        f"for {held} of {len(measures)} seed(s)."
    )


def summary(rows, measures, baselines, cost: Cost, agrees, where) -> str:
    overall = {row["attention"]: row for row in rows if row["source length"] == "all"}
    flat, hierarchical = overall[FLAT], overall[HIERARCHICAL]
    longest = [row for row in rows if row["attention"] == HIERARCHICAL][-1]
    ratios, versus_scaled = cost_ratios(cost.rows), cost_ratios(cost.rows, SCALED)
    pace = ", ".join(f"{LABELS[a]} {cost.run_pace[a]:.2f} s" for a in ATTENTIONS)
    largest_p = ", the largest over the seeds" if len(measures) > 1 else ""
    outcome = {True: "as claimed", False: "against the claim",
               None: "the seeds disagree, so this does not decide the claim"}[agrees]  # fmt: skip
    return (
        f"On {where} ({len(measures)} seed(s) per arm), document BLEU is {flat['bleu']:.1f} with "
        f"flat general attention and {hierarchical['bleu']:.1f} hierarchical (p = "
        f"{hierarchical['p vs flat']:.3f}{largest_p}); in the longest bucket "
        f"({longest['source length']} characters) the gap is {longest['gap vs flat']:+.1f}. "
        f"Teacher-forced on the references, the largest "
        f"sentence weight falls on the right source sentence for {flat['sentence accuracy']:.2f} "
        f"of the target pieces flat and {hierarchical['sentence accuracy']:.2f} hierarchical "
        f"(chance {flat['chance']:.2f}, same relative position "
        f"{accuracy(baselines['position']):.2f}, longest sentence "
        f"{accuracy(baselines['longest']):.2f}; documents of 2+ sentences): {outcome}. "
        f"{control_note(measures, overall)} {sentence_note(measures)} At K = "
        f"{ratios['sentences']} the hierarchical step costs {ratios['flops']:.2f}× general's "
        f"forward FLOPs ({versus_scaled['flops']:.2f}× scaled dot's) and {ratios['time']:.2f}× "
        f"its measured time ({versus_scaled['time']:.2f}×; float32 matmul ceiling "
        f"{cost.ceiling_gflops:.0f} GFLOP/s); the training runs took {pace} per update "
        f"(validation included)."
    )


def values_of(rows, measures, baselines, cost: Cost) -> dict[str, Any]:
    values: dict[str, Any] = {"seeds": len(measures), "ceiling_gflops": cost.ceiling_gflops,
                              "cost": cost.rows, "cost_ratios": cost_ratios(cost.rows),
                              "run_seconds_per_update": cost.run_pace}  # fmt: skip
    for row in rows:
        if row["source length"] == "all":
            values[f"test_bleu_{row['attention']}"] = row["bleu"]
            values[f"sentence_accuracy_{row['attention']}"] = row["sentence accuracy"]
    values["p_hierarchical_vs_flat"] = [m.overall[HIERARCHICAL].p_value for m in measures]
    values["chance"] = chance(measures[0].choices[FLAT])
    values.update({f"baseline_{name}": accuracy(found) for name, found in baselines.items()})
    values["sentence_level"] = [{"matched": m.sentences.matched, "both": m.sentences.both,
                                 "documents": m.sentences.documents,
                                 "bleu": None if m.sentences.scores is None else
                                 {a: r.bleu for a, r in m.sentences.scores.items()}}
                                for m in measures]  # fmt: skip
    values["holds_per_seed"] = [holds(m) for m in measures]
    values["holds_against_scaled_dot_per_seed"] = [holds(m, SCALED) for m in measures]
    values["p_hierarchical_vs_scaled_dot"] = [m.versus_scaled.p_value for m in measures]
    values["cost_ratios_vs_scaled_dot"] = cost_ratios(cost.rows, SCALED)
    return values


def run(context: LabContext) -> Finding:
    runs = attention_runs(context)
    data = prepared_data(context, runs[FLAT][0][1])
    measures, buckets = [], None
    for seed in range(len(runs[FLAT])):
        pair = {attention: runs[attention][seed] for attention in ATTENTIONS}
        found, buckets = seed_measures(context, pair, data, buckets)
        measures.append(found)
    baselines = baseline_choices(data)
    rows = table(measures, buckets)
    size = QUICK_COST if context.quick else COST
    cost = measured_cost(context, runs, size)
    agrees = verdict(measures)
    where = "toy documents" if context.quick else "Tatoeba zh→en test pseudo-documents"
    return Finding(
        summary=summary(rows, measures, baselines, cost, agrees, where),
        table=rows,
        figures=[
            draw_quality(context, buckets, rows),
            draw_accuracy(context, measures, baselines),
            draw_cost(context, cost.rows, size),
        ],  # fmt: skip
        values=values_of(rows, measures, baselines, cost),
        agrees=agrees,
    )


EXPERIMENT = Experiment(
    name="hierarchical",
    order=10,
    title="Hierarchical attention on documents: words, then sentences",
    claim=(
        "On a long input made of sentences, attention in two levels (多层 attention) first "
        "weighs the words within each sentence and then the sentences themselves, both "
        "queried by the decoder (Yang et al. 2016; Miculicchio et al. 2018). The sentence "
        "level should make the model look at the right sentence of the source, help it on "
        "long inputs, and cost little more than one flat softmax over every word."
    ),
    run=run,
    default_size=(
        "Trains the lab's GRU model on Tatoeba zh→en pseudo-documents (1-6 sentences, joined "
        "in random order) with flat `general` attention, with `hierarchical` attention and, "
        "as a second flat arm, with `scaled_dot` attention, "
        f"{SEEDS} seeds each ({3 * SEEDS} runs of {TATOEBA_STEPS} updates), scores the greedy "
        "test translations whole, by source length and per sentence, measures on the "
        "references (teacher-forced) how often the largest sentence weight falls on the right "
        "source sentence, and times a training step on random documents of 2, 4 and 6 "
        "sentences. The claim is taken to agree when, for every seed, the hierarchical "
        "model's sentence accuracy is higher than the general model's and its BLEU not "
        "significantly lower (p < 0.05); the same test against scaled dot is reported."
    ),
)
