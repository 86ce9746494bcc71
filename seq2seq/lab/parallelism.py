"""Parallelism: which families can compute the positions of a sentence at once?

A recurrent layer computes h_t = f(x_t, h_{t-1}): position t needs position t − 1 first,
so a layer over n positions is n operations one after another however many cores there
are. A convolution computes every output position of a layer from a fixed window of the
layer below, and self-attention every position from all positions of the layer below:
the n positions of a layer are independent, one parallel operation (Vaswani et al. 2017,
Table 1; Gehring et al. 2017, §1). The price is the path between distant words: n − 1
recurrent steps, about n / ((k − 1) / 2) stacked convolutions of width k, one
self-attention layer. Generation is sequential in every family: token t + 1 is chosen
from token t, so a sentence of n tokens takes n decoder passes.

The experiment builds the three `compare_<family>` presets (`+experiment=compare_gru`,
`compare_cnn`, `compare_transformer`: kept within ±10 % of each other's parameters) with
scaled dot-product cross-attention in all three (`CROSS_ATTENTION`, see there) through
`seq2seq.config.build.build_model` and the presets' vocabularies (`data.src_vocab_size`,
`data.tgt_vocab_size`), and times them on random token ids of the ordinary pieces:

* a training step: the teacher-forced forward pass, cross-entropy and backward pass over a
  batch of `batch` sentences whose source and target both have n tokens;
* greedy decoding of the same batch to exactly n tokens through the model's public
  decoding interface (`encode`, `init_decoder_state`, `decode_step`), end-of-sentence
  forbidden so that every sentence runs all n steps;

each the median of `reps` repetitions after one warm-up, at every n of `lengths`. The
sequential operations are counted from each config (`sequential_operations`): per layer,
per training step, per decoded sentence, and the longest path between the first and the
last source position. On a machine that runs the positions of a layer in parallel (a GPU)
a CNN or Transformer step should stay nearly flat as n grows while the RNN's grows with n;
on a few CPU cores, which parallelise little, every family's time grows with the work.
"""

from __future__ import annotations

import functools
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from matplotlib.figure import Figure
from omegaconf import DictConfig

from seq2seq import registry
from seq2seq.config.build import build_model, count_parameters
from seq2seq.lab.experiment import Experiment, Finding, LabContext
from seq2seq.lab.matmul_ceiling import MATMUL_SHAPES, matmul_gflops, synchronize
from seq2seq.lab.training import compose_config
from seq2seq.models.model import Seq2Seq
from seq2seq.runs.assemble import select_device
from seq2seq.special_tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID

FAMILIES = ("gru", "cnn", "transformer")  # the `compare_<family>` presets
COLOURS = {"gru": "C3", "cnn": "C2", "transformer": "C0"}
# The presets' additive cross-attention builds a (B, n, n, width) tensor per attention layer,
# the CNN and the Transformer have two such layers and the GRU one: at n = 128 it would
# dominate every family's time. Scaled dot-product cross-attention in all three keeps the
# comparison about the encoder and decoder layers (parameters stay within ±6 %).
CROSS_ATTENTION = "scaled_dot"
FIRST_ORDINARY = max(PAD_ID, UNK_ID, BOS_ID, EOS_ID) + 1  # random ids are ordinary pieces


@dataclass(frozen=True)
class Size:
    lengths: tuple[int, ...]  # n: source and target tokens per sentence
    batch: int  # sentences per training step and per decoded batch
    reps: int  # timed repetitions (median), after one warm-up
    ceiling_reps: int  # repetitions of each matmul of the ceiling


DEFAULT = Size(lengths=(8, 16, 32, 64, 128), batch=32, reps=7, ceiling_reps=5)
QUICK = Size(lengths=(8, 16), batch=4, reps=2, ceiling_reps=1)


@dataclass(frozen=True)
class TokenBatch:
    """Random sentences: `src`, `tgt_in` (BOS first), `tgt_out` `(B, n)`; `src_mask` all True."""

    src: torch.Tensor
    src_mask: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor


def family_config(family: str) -> DictConfig:
    """The `compare_<family>` preset with the cross-attention `CROSS_ATTENTION`."""
    return compose_config([f"+experiment=compare_{family}", f"attention={CROSS_ATTENTION}"])


def family_model(cfg: DictConfig, seed: int, device: torch.device) -> Seq2Seq:
    torch.manual_seed(seed)
    return build_model(cfg, cfg.data.src_vocab_size, cfg.data.tgt_vocab_size).to(device)


def random_batch(
    cfg: DictConfig, batch: int, length: int, generator: torch.Generator, device: torch.device
) -> TokenBatch:
    """`batch` sentences of `length` random ordinary source and target pieces."""
    src_ids, tgt_ids = cfg.data.src_vocab_size, cfg.data.tgt_vocab_size
    src = torch.randint(FIRST_ORDINARY, src_ids, (batch, length), generator=generator)
    tgt = torch.randint(FIRST_ORDINARY, tgt_ids, (batch, length + 1), generator=generator)
    tgt[:, 0] = BOS_ID
    src_mask = torch.ones(batch, length, dtype=torch.bool)
    tensors = (src, src_mask, tgt[:, :-1], tgt[:, 1:])
    return TokenBatch(*(tensor.to(device) for tensor in tensors))


def median_seconds(action: Callable[[], None], reps: int, device: torch.device) -> float:
    """The median wall time of `action` over `reps` calls, after one warm-up call."""
    action()
    synchronize(device)
    seconds = []
    for _ in range(reps):
        started = time.perf_counter()
        action()
        synchronize(device)
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def training_step(model: Seq2Seq, batch: TokenBatch) -> None:
    """Teacher-forced forward pass, cross-entropy and backward pass (gradients dropped)."""
    logits, _ = model(batch.src, batch.src_mask, batch.tgt_in)  # (B, n, vocab)
    loss = F.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten())
    loss.backward()
    model.zero_grad(set_to_none=True)


@torch.no_grad()
def decode_fixed_length(model: Seq2Seq, batch: TokenBatch, length: int) -> torch.Tensor:
    """Greedy decoding of exactly `length` tokens per sentence: `(B, length)`, one
    `decode_step` per token, the best ordinary piece each time (EOS never chosen)."""
    state = model.init_decoder_state(model.encode(batch.src, batch.src_mask))
    tokens = torch.full((batch.src.size(0),), BOS_ID, dtype=torch.long, device=batch.src.device)
    outputs = []
    for _ in range(length):
        log_probs, _, state = model.decode_step(tokens, state, need_weights=False)  # (B, vocab)
        tokens = log_probs[:, FIRST_ORDINARY:].argmax(dim=-1) + FIRST_ORDINARY  # (B,)
        outputs.append(tokens)
    return torch.stack(outputs, dim=1)


# ------------------------------------------------------------------ sequential operations


def family_of(cfg: DictConfig) -> str:
    """The registered encoder family of a config: rnn, cnn or transformer."""
    return registry.of_node("encoder", cfg.encoder).name


def longest_path(cfg: DictConfig, length: int) -> int:
    """Operations between the first and last of `length` source positions in the encoder
    (Vaswani et al. 2017, Table 1, "maximum path length"): recurrent steps for an RNN,
    convolution layers for a CNN (a centred kernel of width k reaches (k − 1) / 2 positions
    each way), one layer for self-attention."""
    family = family_of(cfg)
    if family == "rnn":
        return length - 1
    if family == "cnn":
        return math.ceil((length - 1) / ((cfg.encoder.kernel_size - 1) // 2))
    return 1


def sequential_operations(cfg: DictConfig, length: int) -> dict[str, int]:
    """Operations that must run one after another at sentence length n = `length`: per
    layer (n for a recurrent layer, 1 for a convolution or self-attention), per training
    step (every encoder and decoder layer), per decoded sentence (n tokens, each through
    every decoder layer), and the longest path (`longest_path`)."""
    per_layer = length if family_of(cfg) == "rnn" else 1
    layers = cfg.encoder.num_layers + cfg.decoder.num_layers
    return {
        "sequential per layer": per_layer,
        "sequential per training step": per_layer * layers,
        "sequential per decoded sentence": length * cfg.decoder.num_layers,
        "longest path": longest_path(cfg, length),
    }


# ------------------------------------------------------------------ measurement


def timed(model: Seq2Seq, batch: TokenBatch, size: Size, device: torch.device) -> dict:
    """Median milliseconds of a training step on `batch` and of decoding it to its length."""
    length = batch.src.size(1)
    model.train()
    step = median_seconds(functools.partial(training_step, model, batch), size.reps, device)
    model.eval()
    decode = functools.partial(decode_fixed_length, model, batch, length)
    per_batch = median_seconds(decode, size.reps, device)
    return {"train step ms": 1e3 * step, "decode ms per sentence": 1e3 * per_batch / size.batch}


def family_rows(family: str, size: Size, context: LabContext) -> tuple[list[dict], int]:
    """One row per length for one family, and its parameter count."""
    device = select_device(context.device)
    cfg = family_config(family)
    model = family_model(cfg, context.seed, device)
    generator = torch.Generator().manual_seed(context.seed)
    rows = []
    for length in size.lengths:
        batch = random_batch(cfg, size.batch, length, generator, device)
        rows.append({"family": family, "n": length, **timed(model, batch, size, device),
                     **sequential_operations(cfg, length)})  # fmt: skip
    return rows, count_parameters(model)


def ceiling(size: Size, context: LabContext) -> float:
    """The float32 matmul ceiling of the device, GFLOP/s (`seq2seq.lab.matmul_ceiling`)."""
    device = select_device(context.device)
    return max(matmul_gflops(m, k, n, size.ceiling_reps, device) for m, k, n in MATMUL_SHAPES)


def growth(rows: list[dict[str, Any]], family: str, key: str) -> float:
    """`key` at the longest length over `key` at the shortest, for one family."""
    mine = [row[key] for row in rows if row["family"] == family]
    return mine[-1] / mine[0]


# ------------------------------------------------------------------ figures


def of_family(rows: list[dict[str, Any]], family: str, key: str) -> tuple[list, list]:
    mine = [row for row in rows if row["family"] == family]
    return [row["n"] for row in mine], [row[key] for row in mine]


def draw(context: LabContext, rows: list[dict], key: str, stem: str, labels: tuple) -> Path:
    """`key` against the length, log-log, one line per family; `labels` = (y label, title)."""
    figure = Figure(figsize=(5.5, 4), layout="constrained")
    axes = figure.subplots()
    for family in FAMILIES:
        axes.plot(*of_family(rows, family, key), marker="o", color=COLOURS[family], label=family)
    lengths, first = of_family(rows, FAMILIES[0], key)
    linear = [first[0] * length / lengths[0] for length in lengths]
    axes.plot(lengths, linear, linestyle=":", color="grey", label="∝ n (from the GRU's first)")
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set_xlabel("n: source and target tokens per sentence")
    axes.set_ylabel(labels[0])
    axes.set_title(labels[1])
    axes.legend(fontsize="small")
    path = context.figure(stem)
    figure.savefig(path, dpi=110)
    return path


def figures(context: LabContext, rows: list[dict], size: Size) -> list[Path]:
    step = ("training step, median (ms)",
            f"Training step (forward + backward), {size.batch} sentences of n tokens")  # fmt: skip
    decode = ("greedy decoding per sentence, median (ms)",
              f"Greedy decoding to exactly n tokens, batches of {size.batch}")  # fmt: skip
    return [
        draw(context, rows, "train step ms", "training_step_vs_length", step),
        draw(context, rows, "decode ms per sentence", "decoding_vs_length", decode),
    ]


# ------------------------------------------------------------------ finding


def summary(rows: list[dict], growths: dict, size: Size, gflops: float, agrees: bool) -> str:
    low, high = size.lengths[0], size.lengths[-1]
    train = ", ".join(f"{growths[f]['train']:.1f}× ({f})" for f in FAMILIES)
    longest = ", ".join(f"{of_family(rows, f, 'train step ms')[1][-1]:.0f} ms ({f})"
                        for f in FAMILIES)  # fmt: skip
    decode = ", ".join(f"{growths[f]['decode']:.1f}× ({f})" for f in FAMILIES)
    verdict = ("grows fastest, as the claim predicts" if agrees else
               "does NOT grow fastest here, against the claim (a CPU with few cores runs "
               "the positions of a layer little in parallel)")  # fmt: skip
    return (
        f"From n = {low} to n = {high} tokens (a {high // low}× longer sentence) the training "
        f"step's time grows {train}, to {longest} at n = {high}, on a device whose float32 "
        f"matmul ceiling is {gflops:.0f} GFLOP/s: the RNN's {verdict}. The RNN runs n "
        f"sequential steps per layer where the CNN and the Transformer run one, but greedy "
        f"decoding is sequential in all three, and its time per sentence grows {decode}."
    )


def values_of(rows: list[dict], growths: dict, parameters: dict, gflops: float) -> dict:
    values: dict[str, Any] = {"ceiling_gflops": gflops}
    for family in FAMILIES:
        values[f"{family}_parameters"] = parameters[family]
        values[f"{family}_train_growth"] = growths[family]["train"]
        values[f"{family}_decode_growth"] = growths[family]["decode"]
        values[f"{family}_train_ms"] = of_family(rows, family, "train step ms")[1]
        values[f"{family}_decode_ms"] = of_family(rows, family, "decode ms per sentence")[1]
    return values


def run(context: LabContext) -> Finding:
    if context.threads > 0:
        torch.set_num_threads(context.threads)
    size = QUICK if context.quick else DEFAULT
    gflops = ceiling(size, context)
    rows, parameters = [], {}
    for family in FAMILIES:
        measured, parameters[family] = family_rows(family, size, context)
        rows += measured
    growths = {family: {"train": growth(rows, family, "train step ms"),
                        "decode": growth(rows, family, "decode ms per sentence")}
               for family in FAMILIES}  # fmt: skip
    agrees = all(growths["gru"]["train"] > growths[f]["train"] for f in ("cnn", "transformer"))
    return Finding(
        summary=summary(rows, growths, size, gflops, agrees),
        table=rows,
        figures=figures(context, rows, size),
        values=values_of(rows, growths, parameters, gflops),
        agrees=agrees,
    )


EXPERIMENT = Experiment(
    name="parallelism",
    order=3,
    title="Parallelism: RNN, CNN and Transformer against sentence length",
    claim=(
        "A recurrent layer must compute its states one position after another, because each "
        "state needs the one before it. A convolutional layer and a self-attention layer "
        "compute every position from the layer below at once, so on hardware that runs many "
        "operations in parallel their training step slows down less as sentences get longer. "
        "At generation time no family escapes the order: each new token depends on the "
        "previous one."
    ),
    run=run,
    default_size=(
        "Times the compare_gru, compare_cnn and compare_transformer models (0.84 to 0.89 M "
        "parameters, scaled dot-product cross-attention in all three) on random tokens: a "
        "training step and greedy decoding of 32 sentences of n = 8 to 128 tokens, medians "
        "of 7 repetitions; no training, no Tatoeba."
    ),
)
