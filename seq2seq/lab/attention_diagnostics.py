"""How attention and recurrent gates look on real sentences: entropy, saturation, score scale.

Each model is either built at initialisation from `train` overrides (seeded with its
`trainer.seed`, as `seq2seq-train` seeds it) or loaded from a checkpoint with
`Translator.load` (the checked way every tool loads one). The first `pairs` valid pairs
of the model's own data config, teacher-forced in eval mode, give per model:

* attention entropy H = -Σ_j α_j log α_j in nats over the real source positions, averaged
  over real target positions (and heads, layers); also H / log(source length), rows with
  a one-token source left out of that mean;
* saturation: the share of rows whose largest weight exceeds 0.9;
* the mean and std of the raw scores before the region (softmax, ...) over real pairs;
* the mean L2 norm of queries and keys as the score module receives them (after the
  score's own key map: `W k` for general, `U k + b` for additive, unit keys for cosine;
  with several heads, per head after W_Q / W_K);
* the mean L2 norm of the encoder states (the encoder's memory, real positions);
* for LSTM / GRU layers, the per-gate statistics of bias_ih + bias_hh (LSTM: input,
  forget, cell, output; GRU: reset, update, new), per layer and direction.
"""

from __future__ import annotations

import math
import shlex
import sys
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from seq2seq.config.build import build_model, plain
from seq2seq.data.prepare import PreparedData, prepare
from seq2seq.models.attention import Attention, attention_choice
from seq2seq.runs.assemble import data_config, seed_everything
from seq2seq.runs.compose import compose_train
from seq2seq.search.translator import Translator

SATURATION = 0.9  # a row is saturated when its largest weight exceeds this
GATES = {nn.LSTM: ("input", "forget", "cell", "output"), nn.GRU: ("reset", "update", "new")}


# ------------------------------------------------------------------ row statistics


def attention_entropy(weights: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
    """`weights (B, ..., T, S)`, `src_mask (B, S)` (True = real) -> entropy `(B, ..., T)` in
    nats over the real source positions (0 · log 0 counts as 0)."""
    real = _source_mask(src_mask, weights.dim())
    w = weights.float().masked_fill(~real, 0.0)
    return -(w * torch.log(w.clamp_min(1e-30))).sum(dim=-1)


def row_statistics(
    weights: torch.Tensor, src_mask: torch.Tensor, tgt_mask: torch.Tensor
) -> dict[str, float]:
    """Means over real target rows of `weights (B, ..., T, S)`: entropy (nats), entropy /
    log(source length) (rows with one real source position left out), and the share of
    rows whose largest weight over the real positions exceeds SATURATION."""
    entropy = attention_entropy(weights, src_mask)  # (B, ..., T)
    rows = tgt_mask.view(tgt_mask.size(0), *[1] * (weights.dim() - 3), tgt_mask.size(1))
    rows = rows.expand_as(entropy)
    lengths = src_mask.sum(dim=-1).float().view(-1, *[1] * (entropy.dim() - 1))
    log_len = torch.log(lengths).expand_as(entropy)
    real = _source_mask(src_mask, weights.dim())
    largest = weights.float().masked_fill(~real, 0.0).amax(dim=-1)
    normalisable = rows & (log_len > 0)
    return {
        "entropy": entropy[rows].mean().item(),
        "entropy_norm": (entropy[normalisable] / log_len[normalisable]).mean().item(),
        "saturated": (largest[rows] > SATURATION).float().mean().item(),
        "rows": int(rows.sum().item()),
        "normalisable_rows": int(normalisable.sum().item()),
    }


def _source_mask(src_mask: torch.Tensor, dims: int) -> torch.Tensor:
    """`(B, S)` -> `(B, 1, ..., 1, S)` broadcastable against a `dims`-dimensional tensor."""
    return src_mask.view(src_mask.size(0), *[1] * (dims - 2), src_mask.size(1)).bool()


# ------------------------------------------------------------------ gates


def gate_bias_statistics(model: nn.Module) -> list[dict[str, Any]]:
    """One row per LSTM / GRU layer and direction and gate: mean, std, min, max of
    bias_ih + bias_hh (PyTorch's gate order: LSTM i, f, g, o; GRU r, z, n)."""
    rows = []
    for name, module in model.named_modules():
        gates = next((g for kind, g in GATES.items() if isinstance(module, kind)), None)
        if gates is None or not module.bias:
            continue
        for layer in range(module.num_layers):
            for suffix in ("", "_reverse")[: 2 if module.bidirectional else 1]:
                bias = getattr(module, f"bias_ih_l{layer}{suffix}").detach()
                bias = bias + getattr(module, f"bias_hh_l{layer}{suffix}").detach()
                for gate, chunk in zip(gates, bias.chunk(len(gates))):
                    rows.append({
                        "module": name, "layer": layer, "direction": suffix.lstrip("_") or "forward",
                        "gate": gate, "mean": chunk.mean().item(), "std": chunk.std().item(),
                        "min": chunk.min().item(), "max": chunk.max().item(),
                    })  # fmt: skip
    return rows


# ------------------------------------------------------------------ one model


def cross_attentions(model: nn.Module) -> list[Attention]:
    """The decoder's attention over the source (a Transformer's self-attention excluded)."""
    return [
        module
        for name, module in model.decoder.named_modules()
        if isinstance(module, Attention) and not name.endswith("self_attention")
    ]


@contextmanager
def score_calls(model: nn.Module) -> Iterator[dict[int, list]]:
    """Record (queries, keys, scores) of every score call of each cross-attention module,
    keyed by the module's position, while the block runs."""
    calls: dict[int, list] = defaultdict(list)
    handles = [
        module.score.register_forward_hook(
            lambda _m, inputs, output, i=i: calls[i].append((inputs[0], inputs[1], output))
        )
        for i, module in enumerate(cross_attentions(model))
    ]
    try:
        yield calls
    finally:
        for handle in handles:
            handle.remove()


@torch.no_grad()
def diagnose(model: nn.Module, batches: list) -> dict[str, Any]:
    """Teacher-force `batches` (seq2seq Batch objects) through `model` in eval mode."""
    model.eval()
    totals: dict[str, list] = defaultdict(list)  # (value, weight) pairs per key
    with score_calls(model) as calls:
        for batch in batches:
            calls.clear()
            _batch_statistics(model, batch, totals)
            for records in calls.values():
                _score_statistics(records, batch.src_mask, batch.tgt_mask, totals)
    result = {key: _weighted_mean(values) for key, values in totals.items() if key != "score_sq"}
    if "score_mean" in result:  # std² = E[s²] - E[s]²
        result["score_std"] = math.sqrt(
            max(_weighted_mean(totals["score_sq"]) - result["score_mean"] ** 2, 0.0)
        )
    result["gates"] = gate_bias_statistics(model)
    return result


def _batch_statistics(model: nn.Module, batch: Any, totals: dict[str, list]) -> None:
    """Encoder-state norms and the attention rows of one teacher-forced batch."""
    src_mask, tgt_mask = batch.src_mask, batch.tgt_mask
    encoded = model.encode(batch.src, src_mask)
    memory_norms = encoded.memory.norm(dim=-1)[src_mask]  # (real source positions,)
    totals["encoder_norm"].append((memory_norms.mean().item(), len(memory_norms)))
    state = model.init_decoder_state(encoded)
    _, weights = model.decoder(model.tgt_embed(batch.tgt_in), state, need_weights=True)
    if weights is None:
        return
    stats = row_statistics(weights, src_mask, tgt_mask)
    for key in ("entropy", "saturated"):
        totals[key].append((stats[key], stats["rows"]))
    if stats["normalisable_rows"]:
        totals["entropy_norm"].append((stats["entropy_norm"], stats["normalisable_rows"]))


def _score_statistics(records, src_mask, tgt_mask, totals) -> None:
    """One attention module's score calls of one batch (one per step, or one for all
    steps) joined along the target axis: scores (B, H, T, S), queries (B, H, T, q)."""
    queries = torch.cat([query for query, _, _ in records], dim=2)
    scores = torch.cat([score for _, _, score in records], dim=2).float()
    keys = records[0][1]  # (B, H, S, k): the same keys at every step
    pairs = tgt_mask[:, None, :, None] & src_mask[:, None, None, :]
    real_scores = scores.masked_select(pairs.expand_as(scores))
    query_norms = queries.norm(dim=-1).masked_select(tgt_mask[:, None, :].expand(queries.shape[:3]))
    key_norms = keys.norm(dim=-1).masked_select(src_mask[:, None, :].expand(keys.shape[:3]))
    count = real_scores.numel()
    totals["score_mean"].append((real_scores.mean().item(), count))
    totals["score_sq"].append(((real_scores**2).mean().item(), count))
    totals["query_norm"].append((query_norms.mean().item(), query_norms.numel()))
    totals["key_norm"].append((key_norms.mean().item(), key_norms.numel()))


def _weighted_mean(values: list[tuple[float, int]]) -> float:
    weight = sum(count for _, count in values)
    return sum(value * count for value, count in values) / weight if weight else float("nan")


# ------------------------------------------------------------------ models and data


def model_at_init(overrides: list[str]) -> tuple[nn.Module, Any, PreparedData]:
    """The model `seq2seq-train <overrides>` starts from, and its prepared data."""
    cfg = compose_train(overrides)
    seed_everything(cfg.trainer.seed)
    data = prepare(data_config(cfg))  # seed, data, model: the order of assemble_trainer
    model = build_model(cfg, data.src_tokenizer.vocab_size, data.tgt_tokenizer.vocab_size)
    return model, cfg, data


def model_from_checkpoint(path: str) -> tuple[nn.Module, Any, PreparedData]:
    translator = Translator.load(path, "cpu")
    return translator.model, translator.config, prepare(data_config(translator.config))


def valid_batches(data: PreparedData, pairs: int, batch_size: int) -> list:
    """The first `pairs` valid pairs, sorted by source length, in batches of `batch_size`."""
    valid = data.valid
    chosen = sorted(range(min(pairs, len(valid))), key=lambda i: valid.src_lengths[i])
    return [valid.batch(chosen[i : i + batch_size]) for i in range(0, len(chosen), batch_size)]


def describe(cfg) -> str:
    encoder, decoder = plain(cfg.encoder), plain(cfg.decoder)
    attention = plain(cfg.attention)
    choice = attention_choice(attention) if attention else None
    score = choice[0] if choice else "none"
    return (
        f"{encoder.get('cell', encoder['_target_'].rsplit('.', 1)[-1])}"
        f"-{decoder.get('cell', decoder['_target_'].rsplit('.', 1)[-1])} {score}"
    )


# ------------------------------------------------------------------ output


COLUMNS = (
    ("entropy", "entropy (nats)"), ("entropy_norm", "H / log S"), ("saturated", "max α > 0.9"),
    ("score_mean", "score mean"), ("score_std", "score std"), ("query_norm", "‖q‖"),
    ("key_norm", "‖k‖"), ("encoder_norm", "‖encoder state‖"),
)  # fmt: skip


def markdown(results: list[dict[str, Any]]) -> str:
    header = ["model", *[title for _, title in COLUMNS]]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for result in results:
        cells = [result["name"]] + [_cell(result.get(key)) for key, _ in COLUMNS]
        lines.append("| " + " | ".join(cells) + " |")
    gate_rows = [(r["name"], g) for r in results for g in r["gates"]]
    if gate_rows:
        lines += ["", "Gate biases (bias_ih + bias_hh), per layer and direction:", ""]
        lines += ["| model | module | layer | direction | gate | mean | std | min | max |",
                  "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
        for name, g in gate_rows:
            lines.append(
                f"| {name} | {g['module']} | {g['layer']} | {g['direction']} | {g['gate']} | "
                f"{g['mean']:.3f} | {g['std']:.3f} | {g['min']:.3f} | {g['max']:.3f} |"
            )
    return "\n".join(lines)


def _cell(value: float | None) -> str:
    return "–" if value is None or math.isnan(value) else f"{value:.3f}"


def diagnose_sources(
    inits: list[str], checkpoints: list[str], pairs: int, batch_size: int
) -> list[dict[str, Any]]:
    """One result per model: `inits` are quoted train overrides (a model at initialisation),
    `checkpoints` checkpoint files; each named by its families, score, kind and seed."""
    sources = [("init", spec) for spec in inits] + [("ckpt", path) for path in checkpoints]
    results = []
    for kind, spec in sources:
        if kind == "init":
            model, cfg, data = model_at_init(shlex.split(spec))
        else:
            model, cfg, data = model_from_checkpoint(spec)
        result = diagnose(model, valid_batches(data, pairs, batch_size))
        result["name"] = f"{describe(cfg)} ({kind}, seed {cfg.trainer.seed})"
        result["source"] = spec
        results.append(result)
        print(f"done: {result['name']} <- {spec}", file=sys.stderr)
    return results
