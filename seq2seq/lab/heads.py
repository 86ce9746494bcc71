"""What the heads of multi-head attention do, and how many of them the model needs.

Multi-head attention runs H attentions side by side, each with its own projections
(Vaswani et al. 2017, §3.2.2):

    MultiHead(Q, K, V) = Concat(head_1, …, head_H) W_O
    head_h = Attention(Q W_Q^h, K W_K^h, V W_V^h)

so each head may learn to look at something else. Michel et al. (2019, "Are sixteen heads
really better than one?") found that many heads can be removed from a trained model, one at
a time, for little loss. This experiment trains a small Transformer and, for every layer of
each kind of attention (encoder self-attention, decoder self-attention, decoder
cross-attention), measures

* each head's entropy, H(α_t) = −Σ_s α_t(s) ln α_t(s), averaged over the query positions of
  valid sentences under teacher forcing: 0 when a head looks at one key, ln(keys) when it
  spreads evenly;
* how much the heads of a layer differ: the Jensen–Shannon divergence of two heads' weights,
  JS(P, Q) = ½ KL(P ‖ M) + ½ KL(Q ‖ M) with M = ½ (P + Q) (0 to ln 2 nats), per query row,
  averaged over rows and over every pair of heads of the layer;
* what each head is worth: the valid BLEU lost (greedy search) when that head alone is
  removed. Removing head h is Michel et al.'s mask ξ_h = 0 in
  `MultiHead = Σ_h ξ_h head_h W_O^h`, where W_O^h are the columns of W_O that read head h;
  here those columns of the attention's `output_proj` are zeroed, and restored afterwards.

Layers and heads are numbered from 0 in the rows, labels and figures (`decoder cross L1 H0`),
as everywhere in the project.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from seq2seq.config.search_settings import SearchSettings
from seq2seq.data.batching import collate
from seq2seq.data.prepare import prepare
from seq2seq.lab.experiment import Experiment, Finding, LabContext
from seq2seq.lab.training import trained
from seq2seq.metrics import corpus_scores
from seq2seq.models.attention import Attention, recording_weights
from seq2seq.runs.assemble import data_config
from seq2seq.search.batched import translate_ids
from seq2seq.search.translator import Translator
from seq2seq.visualise.viewer import self_attention_modules

# The default: the project's `make train` Transformer (2 + 2 layers, width 256, 4 heads in
# every attention) on Tatoeba zh→en, for a quarter of its updates.
TATOEBA_TRANSFORMER = [
    "+experiment=default_cpu",
    "trainer.max_steps=500",
    "trainer.valid_every=250",
    "trainer.valid_max_sentences=300",
    "trainer.log_every=25",
    "trainer.test_search.beam_size=1",
    "schedule.warmup_steps=100",
]
# Quick: a 1 + 1-layer, width-32 Transformer with 2 heads everywhere, on the toy reverse task.
QUICK_TRANSFORMER = [
    "data=toy_reverse",
    "data.source.train_size=512",
    "data.source.valid_size=32",
    "data.source.test_size=32",
    "data.max_tokens=512",
    "encoder=transformer",
    "decoder=transformer",
    "attention=multihead",
    "attention.heads=2",
    "encoder.num_layers=1",
    "decoder.num_layers=1",
    "encoder.heads=2",
    "decoder.heads=2",
    "encoder.hidden_size=32",
    "decoder.hidden_size=32",
    "encoder.ff_size=64",
    "decoder.ff_size=64",
    "model.embed_dim=32",
    "optim.lr=3e-3",
    "trainer.max_steps=30",
    "trainer.valid_every=30",
    "trainer.log_every=10",
    "trainer.test_search.beam_size=1",
    "schedule.warmup_steps=5",
]
SCORED_SENTENCES = {"default": 300, "quick": 16}  # valid sentences measured and translated
KINDS = ("encoder self", "decoder self", "decoder cross")
CAN_GO = 0.5  # BLEU: a head whose removal costs less than this can go
MATTERS = 1.0  # BLEU: a head whose removal costs at least this clearly matters
RECORD_BATCH = 64  # sentences per recorded teacher-forced pass


# ---------------------------------------------------------------- the model's attentions


def attention_layers(model: torch.nn.Module) -> dict[str, list[Attention]]:
    """Every multi-head attention of a Transformer model, by kind, one per layer."""
    layers = {
        "encoder self": self_attention_modules(model.encoder),
        "decoder self": self_attention_modules(model.decoder),
        "decoder cross": [layer.cross_attention for layer in getattr(model.decoder, "layers", [])],
    }
    for kind, modules in layers.items():
        if not modules or any(getattr(module, "heads", 1) < 2 for module in modules):
            raise ValueError(f"the heads experiment needs a Transformer with several heads "
                             f"in every attention; its {kind} attention has not")  # fmt: skip
    return layers


@torch.no_grad()
def recorded_weights(
    model: torch.nn.Module, examples: Sequence[tuple[list[int], list[int]]], device
) -> dict[str, list[list[torch.Tensor]]]:
    """Every attention's weights under teacher forcing: kind -> layer -> one
    `(heads, queries, keys)` tensor per sentence, padding cut off, EOS / BOS kept."""
    layers = attention_layers(model)
    slots = [(kind, layer) for kind in KINDS for layer in range(len(layers[kind]))]
    found: dict[str, list[list[torch.Tensor]]] = {
        kind: [[] for _ in layers[kind]] for kind in KINDS
    }
    model.eval()
    for start in range(0, len(examples), RECORD_BATCH):
        chunk = list(examples[start : start + RECORD_BATCH])
        batch = collate(chunk, list(range(len(chunk)))).to(device)
        with recording_weights(layers[kind][layer] for kind, layer in slots) as records:
            model(batch.src, batch.src_mask, batch.tgt_in)  # one attend call per module
        for (kind, layer), record in zip(slots, records):
            weights = record[0].float().cpu()  # (batch, heads, queries, keys)
            found[kind][layer].extend(_cut_padding(weights, chunk, kind))
    return found


def _cut_padding(weights: torch.Tensor, chunk, kind: str) -> list[torch.Tensor]:
    """`(batch, heads, queries, keys)` -> each sentence's real rows and columns."""
    sentences = []
    for row, (src, tgt) in enumerate(chunk):
        queries = len(src) + 1 if kind == "encoder self" else len(tgt) + 1  # + EOS / BOS
        keys = len(tgt) + 1 if kind == "decoder self" else len(src) + 1
        sentences.append(weights[row, :, :queries, :keys])  # (heads, queries, keys)
    return sentences


# ---------------------------------------------------------------- entropy and divergence


def row_entropy(weights: torch.Tensor) -> torch.Tensor:
    """`(..., keys)` rows of weights -> `(...)` entropies in nats, −Σ α ln α (0 ln 0 = 0)."""
    return -torch.special.xlogy(weights, weights).sum(dim=-1)


def js_divergence(first: torch.Tensor, second: torch.Tensor) -> torch.Tensor:
    """Jensen–Shannon divergence of matching rows, `(..., keys)` twice -> `(...)` nats:
    H(M) − ½ H(P) − ½ H(Q) with M = ½ (P + Q), which equals ½ KL(P‖M) + ½ KL(Q‖M)."""
    middle = (first + second) / 2
    return row_entropy(middle) - (row_entropy(first) + row_entropy(second)) / 2


def visible_keys(kind: str, weights: torch.Tensor) -> torch.Tensor:
    """`(heads, queries, keys)` -> `(queries,)`: how many keys each query may see (the
    decoder's self-attention is causal: query t sees t + 1 keys)."""
    queries, keys = weights.shape[-2:]
    if kind == "decoder self":
        return torch.arange(1, queries + 1)
    return torch.full((queries,), keys)


def layer_rows(kind: str, layer: int, sentences: list[torch.Tensor]) -> list[dict[str, Any]]:
    """One row per head of one layer: its mean entropy over every query row of the
    sentences; the mean entropy uniform weights would have over the same rows (the most
    possible); ln of the most keys any row has; the layer's mean pairwise JS divergence."""
    entropies = torch.cat([row_entropy(weights) for weights in sentences], dim=1)  # (H, rows)
    visible = torch.cat([visible_keys(kind, weights) for weights in sentences])  # (rows,)
    uniform = float(torch.log(visible.double()).mean())
    divergence = layer_divergence(sentences)
    return [
        {"kind": kind, "layer": layer, "head": head,
         "entropy": round(float(entropies[head].mean()), 4), "uniform_entropy": round(uniform, 4),
         "max_entropy": round(math.log(int(visible.max())), 4), "layer_js": round(divergence, 4)}
        for head in range(entropies.size(0))
    ]  # fmt: skip


def layer_divergence(sentences: list[torch.Tensor]) -> float:
    """Mean JS divergence over every pair of heads and every query row of the sentences."""
    heads = sentences[0].size(0)
    pairs = list(itertools.combinations(range(heads), 2))
    per_row = [
        js_divergence(weights[first], weights[second])  # (queries,)
        for weights in sentences  # (heads, queries, keys)
        for first, second in pairs
    ]
    return float(torch.cat(per_row).mean())


def entropy_rows(weights: dict[str, list[list[torch.Tensor]]]) -> list[dict[str, Any]]:
    """`layer_rows` of every layer of every kind."""
    return [
        row
        for kind in KINDS
        for layer, sentences in enumerate(weights[kind])
        for row in layer_rows(kind, layer, sentences)
    ]


# ---------------------------------------------------------------- pruning


@contextmanager
def head_removed(attention: Attention, head: int) -> Iterator[None]:
    """Within the block `attention` works without `head`: the columns of W_O that read it
    (`output_proj.weight[:, h·w : (h+1)·w]`, w the head width) are zero; restored after."""
    projection = attention.output_proj.weight  # (value_dim, heads * head_width)
    width = projection.size(1) // attention.heads
    columns = slice(head * width, (head + 1) * width)
    saved = projection[:, columns].clone()
    with torch.no_grad():
        projection[:, columns] = 0.0
    try:
        yield
    finally:
        with torch.no_grad():
            projection[:, columns] = saved


def greedy_bleu(translator: Translator, sources, references: list[str]) -> float:
    """Corpus BLEU of the greedy translations of `sources` (id lists) against `references`."""
    nbest = translate_ids(translator.model, sources, SearchSettings(beam_size=1), translator.device)
    outputs = [translator.tgt_tokenizer.decode(hypotheses[0].tokens) for hypotheses in nbest]
    return float(corpus_scores(outputs, references, translator.config.data.tgt_lang)["bleu"])


def pruning_rows(
    translator: Translator, sources, references: list[str]
) -> tuple[float, list[dict]]:
    """The full model's BLEU, and one row per head: the BLEU without it and the loss."""
    full = greedy_bleu(translator, sources, references)
    rows = []
    for kind, modules in attention_layers(translator.model).items():
        for layer, module in enumerate(modules):
            for head in range(module.heads):
                with head_removed(module, head):
                    bleu = greedy_bleu(translator, sources, references)
                rows.append({"kind": kind, "layer": layer, "head": head,
                             "bleu_without": round(bleu, 2),
                             "bleu_lost": round(full - bleu, 2)})  # fmt: skip
    return full, rows


def head_label(row: dict[str, Any]) -> str:
    """A head by its kind, layer and index (both from 0): "decoder cross L1 H0"."""
    return f"{row['kind']} L{row['layer']} H{row['head']}"


# ---------------------------------------------------------------- figures


def entropy_figure(rows: list[dict[str, Any]], path) -> None:
    """One heatmap per kind of attention: layers × heads, coloured by mean entropy; each
    layer's mean pairwise JS divergence beside its label."""
    figure = Figure(figsize=(4.2 * len(KINDS), 3.4), layout="constrained")
    axes = figure.subplots(1, len(KINDS))
    top = max(row["uniform_entropy"] for row in rows)
    for axis, kind in zip(axes, KINDS):
        mine = [row for row in rows if row["kind"] == kind]
        layers, heads = 1 + max(r["layer"] for r in mine), 1 + max(r["head"] for r in mine)
        grid = torch.zeros(layers, heads)  # layer and head numbers are the indices
        for row in mine:
            grid[row["layer"], row["head"]] = row["entropy"]
        image = axis.imshow(grid.numpy(), cmap="viridis", vmin=0.0, vmax=top, aspect="auto")
        _annotate(axis, grid)
        js = {row["layer"]: row["layer_js"] for row in mine}
        axis.set_yticks(range(layers), [f"layer {n}\nJS {js[n]:.2f}" for n in range(layers)])
        axis.set_xticks(range(heads), [f"head {n}" for n in range(heads)])
        axis.set_title(f"{kind}-attention")
    figure.colorbar(image, ax=axes, label="mean entropy of a head's weights (nats)")
    figure.suptitle("Entropy per head (low: focused) and mean pairwise JS divergence per layer")
    figure.savefig(path, dpi=110)


def _annotate(axis, grid: torch.Tensor) -> None:
    middle = float(grid.max()) / 2
    for (layer, head), value in zip(itertools.product(*map(range, grid.shape)), grid.flatten()):
        colour = "black" if float(value) > middle else "white"
        axis.text(head, layer, f"{float(value):.2f}", ha="center", va="center", color=colour)


def pruning_figure(rows: list[dict[str, Any]], full_bleu: float, path) -> None:
    """Horizontal bars: the BLEU each head's removal costs, the costliest at the top."""
    ordered = sorted(rows, key=lambda row: row["bleu_lost"])
    colours = dict(zip(KINDS, ("tab:blue", "tab:orange", "tab:green")))
    figure = Figure(figsize=(7.0, 1.5 + 0.28 * len(ordered)), layout="constrained")
    axis = figure.subplots()
    axis.barh(range(len(ordered)), [row["bleu_lost"] for row in ordered],
              color=[colours[row["kind"]] for row in ordered])  # fmt: skip
    axis.set_yticks(range(len(ordered)), [head_label(row) for row in ordered], fontsize=8)
    threshold = axis.axvline(CAN_GO, color="grey", linestyle="--", label=f"{CAN_GO} BLEU")
    axis.axvline(0.0, color="black", linewidth=0.8)
    kinds = [Patch(color=colour, label=f"{kind}-attention") for kind, colour in colours.items()]
    axis.set_xlabel(f"valid BLEU lost when this head alone is removed (full model {full_bleu:.2f})")
    axis.set_title("Removing one head at a time (Michel et al. 2019)")
    axis.legend(handles=[*kinds, threshold], loc="lower right", fontsize=8)
    figure.savefig(path, dpi=110)


# ---------------------------------------------------------------- the experiment


def scored_examples(translator: Translator, count: int):
    """The first `count` valid pairs of the model's data: (examples, source ids, references)."""
    valid = prepare(data_config(translator.config)).valid
    chosen = valid.select(range(min(count, len(valid))))
    return list(chosen.examples), [src for src, _ in chosen.examples], list(chosen.tgt_lines)


def head_table(entropies, pruned) -> list[dict[str, Any]]:
    """One row per head: its label, mean entropy, the BLEU without it and the BLEU lost."""
    entropy = {head_label(row): row["entropy"] for row in entropies}
    return [{"head": head_label(row), "entropy": entropy[head_label(row)],
             "bleu_without": row["bleu_without"], "bleu_lost": row["bleu_lost"]}
            for row in pruned]  # fmt: skip


def mean_js(entropies: list[dict[str, Any]], kind: str) -> float:
    """The mean over the layers of `kind` of their mean pairwise JS divergence."""
    per_layer = {row["layer"]: row["layer_js"] for row in entropies if row["kind"] == kind}
    return round(sum(per_layer.values()) / len(per_layer), 3)


def summary_values(entropies, pruned, full_bleu: float) -> dict[str, Any]:
    losses = [row["bleu_lost"] for row in pruned]
    worst = max(pruned, key=lambda row: row["bleu_lost"])
    values = [row["entropy"] for row in entropies]
    return {
        "full_bleu": round(full_bleu, 2),
        "heads": len(pruned),
        "heads_under_threshold": sum(loss < CAN_GO for loss in losses),
        "smallest_loss": min(losses),
        "largest_loss": worst["bleu_lost"],
        "most_important_head": head_label(worst),
        "mean_js": {kind: mean_js(entropies, kind) for kind in KINDS},
        "entropy_range": [min(values), max(values)],
    }


def summary_text(values: dict[str, Any], agrees: bool) -> str:
    """Two or three sentences: the pruning, whether it supports the claim, the divergences."""
    js = ", ".join(f"{value:.2f} ({kind})" for kind, value in values["mean_js"].items())
    low, high = values["entropy_range"]
    pruning = (
        f"Of the model's {values['heads']} heads (valid BLEU {values['full_bleu']:.2f}, greedy), "
        f"{values['heads_under_threshold']} can each be removed for less than {CAN_GO} BLEU; "
        f"the costliest to remove is {values['most_important_head']} "
        f"({values['largest_loss']:.2f} BLEU)"
    )
    verdict = (
        f"some heads can go while another clearly matters (≥ {MATTERS} BLEU), as the claim says"
        if agrees
        else f"this does not support the claim, which needs a head under {CAN_GO} BLEU "
        f"and another of at least {MATTERS} BLEU"
    )
    return (
        f"{pruning}: {verdict}. Within a layer the heads' weights differ by a mean pairwise "
        f"Jensen–Shannon divergence of {js} nats (0: the same weights, ln 2 = 0.69: no "
        f"overlap), and the heads' mean entropies range from {low:.2f} to {high:.2f} nats."
    )


def run(context: LabContext) -> Finding:
    if context.threads > 0:  # small models: spare threads only wait on each other
        torch.set_num_threads(context.threads)
    base = QUICK_TRANSFORMER if context.quick else TATOEBA_TRANSFORMER
    model_run = trained(context, [*base, f"trainer.seed={context.seed}"], "heads-transformer")
    translator = model_run.translator(context.device)
    count = SCORED_SENTENCES["quick" if context.quick else "default"]
    examples, sources, references = scored_examples(translator, count)
    entropies = entropy_rows(recorded_weights(translator.model, examples, translator.device))
    full_bleu, pruned = pruning_rows(translator, sources, references)
    values = summary_values(entropies, pruned, full_bleu)
    agrees = values["smallest_loss"] < CAN_GO and values["largest_loss"] >= MATTERS
    figures = [context.figure("heads_entropy"), context.figure("heads_pruning")]
    entropy_figure(entropies, figures[0])
    pruning_figure(pruned, full_bleu, figures[1])
    values.update(entropies=entropies, pruning=pruned)
    table = head_table(entropies, pruned)
    return Finding(summary_text(values, agrees), table, figures, values, agrees)


EXPERIMENT = Experiment(
    name="heads",
    order=6,
    title="What the heads do",
    claim=(
        "Multi-head attention gives every layer several attentions with their own "
        "projections, so each head is free to look at something different: one at the "
        "previous word, one at the aligned source word, one spread over the whole sentence. "
        "But a trained model does not need all of them: Michel et al. (2019) removed heads "
        "one at a time and found that most could go for a small loss, while a few carry "
        "much of the translation."
    ),
    run=run,
    default_size=(
        "Trains the `make train` Transformer (2 + 2 layers, width 256, six attention "
        "layers of 4 heads: 24 heads, 4.75 M parameters) on Tatoeba zh→en for 500 updates, then "
        "measures every head on 300 valid sentences and translates them greedily 25 times "
        "(the full model, then once without each head)."
    ),
)
