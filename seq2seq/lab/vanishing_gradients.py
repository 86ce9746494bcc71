"""Vanishing gradients: how far back can a recurrent cell carry a gradient?

A recurrent encoder computes h_t = f(x_t, h_{t-1}), so the gradient that reaches an input
K steps before the loss passes through K Jacobians (Bengio et al. 1994; Hochreiter &
Schmidhuber 1997):

    ∂L/∂x_{t-K} = ∂L/∂h_t · (∏_{j=t-K+1..t} ∂h_j/∂h_{j-1}) · ∂h_{t-K}/∂x_{t-K}

For an Elman RNN, ∂h_j/∂h_{j-1} = diag(1 - h_j²) U: when its largest singular value is
below 1 the product shrinks geometrically with K. An LSTM's cell state is updated by
addition, c_j = f_j ⊙ c_{j-1} + i_j ⊙ g_j, so along c the factor is the forget gate f_j
(near 1 when it learns to remember, and σ(1) ≈ 0.73 at the start with the project's
forget bias of 1, `encoder.forget_bias`); a GRU interpolates, h_j = (1 - z_j) ⊙ n_j +
z_j ⊙ h_{j-1}, with the update gate z_j as the factor.

The task (`recall_batch`): a sequence of K + 1 symbols drawn uniformly from `VOCAB`, and
the answer is the FIRST symbol, read out of the final state after the whole sequence.
The other K symbols are distractors from the same alphabet, so nothing but what the
state keeps from step 0 tells the answer; chance accuracy is 1 / `VOCAB`.

The model (`RecallModel`): an embedding, the project's own `RNNEncoder` (registry group
"encoder", name "rnn"; one unidirectional layer of width `HIDDEN`, cell rnn, gru or lstm,
the schema's default forget bias) and a linear read-out of its final state.

Measured, for each cell and each distance K:

* ‖∂L/∂x_{t-K}‖, the gradient of the summed cross-entropy with respect to the embedded
  first symbol, averaged over a batch and `init_seeds` initialisations;
* after `steps` Adam updates at that K, for each of `train_seeds` seeds (a seed fixes the
  initial weights and the data stream, the same at every K): the accuracy on fresh
  sequences (mean over the seeds: whether a run escapes chance is partly luck), and the
  share of the gradient that reaches back, ‖∂L/∂x_{t-K}‖ / ‖∂L/∂x_t‖ (median over the
  seeds; a model that solved the task has a near-zero loss, so its raw gradient is small
  at every position; the ratio does not depend on the loss's size).

A distance counts as learned when the mean accuracy reaches `LEARNED`; the claim predicts
that the RNN's gradient at initialisation falls fastest with K and that its longest learned
distance is the shortest.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from matplotlib.figure import Figure
from torch import nn

from seq2seq import registry
from seq2seq.lab.experiment import Experiment, Finding, LabContext
from seq2seq.models.encoders.rnn import RNNEncoderConfig
from seq2seq.runs.assemble import select_device

CELLS = ("rnn", "gru", "lstm")
COLOURS = {"rnn": "C3", "gru": "C2", "lstm": "C0"}
VOCAB = 8  # symbols; chance accuracy 1/8
EMBED_DIM = 16
HIDDEN = 32
LEARNING_RATE = 1e-2  # Adam
CLIP_NORM = 1.0  # gradient norm clipping, as RNN training usually has
GRADIENT_BATCH = 256  # sequences per gradient measurement
EVAL_BATCH = 1024  # fresh sequences per accuracy
LEARNED = 0.9  # accuracy at which a distance counts as learned
FORGET_BIAS = RNNEncoderConfig().forget_bias  # the project's default (1.0)
EVAL_SEED_OFFSET = 1_000_003  # evaluation sequences: a stream no training seed draws


@dataclass(frozen=True)
class Size:
    distances: tuple[int, ...]  # K: symbols between the one to recall and the read-out
    init_seeds: int  # initialisations averaged at init
    train_seeds: int  # models trained per cell and distance (accuracy: their mean)
    steps: int  # Adam updates per model
    batch: int  # sequences per update


DEFAULT = Size((2, 5, 10, 20, 40, 80), init_seeds=3, train_seeds=3, steps=600, batch=64)
QUICK = Size((2, 8), init_seeds=2, train_seeds=1, steps=40, batch=32)


class RecallModel(nn.Module):
    """Symbols `(B, K+1)` -> logits `(B, VOCAB)` for the first symbol: embedding, the
    project's one-layer unidirectional recurrent encoder, a linear read-out of its final
    state."""

    def __init__(self, cell: str) -> None:
        super().__init__()
        encoder_class = registry.get("encoder", "rnn").builder
        self.embedding = nn.Embedding(VOCAB, EMBED_DIM)
        self.encoder = encoder_class(
            EMBED_DIM, cell=cell, hidden_size=HIDDEN, num_layers=1, bidirectional=False,
            forget_bias=FORGET_BIAS,
        )  # fmt: skip
        self.readout = nn.Linear(HIDDEN, VOCAB)

    def read(self, embedded: torch.Tensor) -> torch.Tensor:
        """Embedded symbols `(B, K+1, EMBED_DIM)` -> logits `(B, VOCAB)`."""
        mask = torch.ones(embedded.shape[:2], dtype=torch.bool, device=embedded.device)
        final = self.encoder(embedded, mask).final  # (B, HIDDEN): h after the last symbol
        return self.readout(final)

    def forward(self, symbols: torch.Tensor) -> torch.Tensor:
        return self.read(self.embedding(symbols))


def recall_batch(distance: int, batch: int, generator: torch.Generator) -> torch.Tensor:
    """`(batch, distance + 1)` uniform symbols; the answer is column 0."""
    return torch.randint(0, VOCAB, (batch, distance + 1), generator=generator)


def built(cell: str, seed: int, device: torch.device) -> RecallModel:
    torch.manual_seed(seed)
    return RecallModel(cell).to(device)


def gradient_norms(model: RecallModel, symbols: torch.Tensor) -> tuple[float, float]:
    """Mean ‖∂L/∂x‖ at the first and at the last position, L the summed cross-entropy
    (each sequence's gradient is that of its own loss)."""
    embedded = model.embedding(symbols).detach().requires_grad_(True)  # (B, K+1, EMBED_DIM)
    loss = F.cross_entropy(model.read(embedded), symbols[:, 0], reduction="sum")
    (gradient,) = torch.autograd.grad(loss, embedded)  # (B, K+1, EMBED_DIM)
    norms = gradient.norm(dim=-1)  # (B, K+1)
    return norms[:, 0].mean().item(), norms[:, -1].mean().item()


def init_gradient(cell: str, distance: int, seeds: list[int], device: torch.device) -> float:
    """‖∂L/∂x_{t-K}‖ at initialisation, averaged over the seeds' models and batches."""
    norms = []
    for seed in seeds:
        generator = torch.Generator().manual_seed(seed)
        symbols = recall_batch(distance, GRADIENT_BATCH, generator).to(device)
        norms.append(gradient_norms(built(cell, seed, device), symbols)[0])
    return statistics.fmean(norms)


def trained_model(
    cell: str, distance: int, size: Size, seed: int, device: torch.device
) -> RecallModel:
    """`size.steps` Adam updates on fresh batches; for a seed, the same start and data
    stream at every K."""
    model = built(cell, seed, device)
    generator = torch.Generator().manual_seed(seed)
    optimiser = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    for _ in range(size.steps):
        symbols = recall_batch(distance, size.batch, generator).to(device)
        loss = F.cross_entropy(model(symbols), symbols[:, 0])
        optimiser.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), CLIP_NORM)
        optimiser.step()
    return model


def trained_measures(
    cell: str, distance: int, size: Size, seed: int, device: torch.device
) -> tuple[float, float, float]:
    """(accuracy, ‖∂L/∂x_{t-K}‖, share reaching back) of one model trained at K."""
    model = trained_model(cell, distance, size, seed, device)
    generator = torch.Generator().manual_seed(seed + EVAL_SEED_OFFSET)  # unseen sequences
    symbols = recall_batch(distance, EVAL_BATCH, generator).to(device)
    with torch.no_grad():
        accuracy = (model(symbols).argmax(dim=-1) == symbols[:, 0]).float().mean().item()
    first, last = gradient_norms(model, symbols[:GRADIENT_BATCH])
    return accuracy, first, first / last if last > 0 else math.nan


def trained_row(cell: str, distance: int, size: Size, context: LabContext) -> dict:
    """The mean accuracy and the median gradients over the training seeds at K."""
    device = select_device(context.device)
    seeds = context.seeds(size.train_seeds)
    measured = [trained_measures(cell, distance, size, seed, device) for seed in seeds]
    accuracy, first, share = zip(*measured, strict=True)
    return {"grad trained": statistics.median(first),
            "reach-back share trained": statistics.median(share),
            "accuracy": statistics.fmean(accuracy)}  # fmt: skip


def measured_rows(size: Size, context: LabContext) -> list[dict[str, Any]]:
    """One row per cell and distance."""
    seeds = context.seeds(size.init_seeds)
    rows = []
    for cell in CELLS:
        for distance in size.distances:
            at_init = init_gradient(cell, distance, seeds, select_device(context.device))
            row = {"cell": cell, "K": distance, "grad init": at_init}
            rows.append({**row, **trained_row(cell, distance, size, context)})
    return rows


# ------------------------------------------------------------------ figures


def of_cell(rows: list[dict[str, Any]], cell: str, key: str) -> tuple[list[int], list[float]]:
    mine = [row for row in rows if row["cell"] == cell]
    return [row["K"] for row in mine], [row[key] for row in mine]


def counted(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("s" if count != 1 else "")


def positive(values: list[float]) -> list[float]:
    """Values for a log axis: a gradient that underflowed to 0 is left out (NaN)."""
    return [value if value > 0 else math.nan for value in values]


def draw_gradients(context: LabContext, rows: list[dict[str, Any]], size: Size) -> Path:
    """‖∂L/∂x_{t-K}‖ at initialisation (left) and the share reaching back after training
    (right), against K, log scale."""
    figure = Figure(figsize=(10, 4), layout="constrained")
    init_axes, trained_axes = figure.subplots(1, 2)
    for cell in CELLS:
        style = {"marker": "o", "color": COLOURS[cell], "label": cell}
        distances, at_init = of_cell(rows, cell, "grad init")
        init_axes.plot(distances, positive(at_init), **style)
        shares = of_cell(rows, cell, "reach-back share trained")[1]
        trained_axes.plot(distances, positive(shares), **style)
    init_axes.set_title(f"at initialisation (mean of {size.init_seeds} seeds)")
    init_axes.set_ylabel(r"$\|\partial L/\partial x_{t-K}\|$ (log scale)")
    trained_axes.set_title(f"after {size.steps} updates at each K (median of "
                           f"{counted(size.train_seeds, 'model')})")  # fmt: skip
    trained_axes.set_ylabel(
        r"$\|\partial L/\partial x_{t-K}\| \;/\; \|\partial L/\partial x_t\|$ (log scale)"
    )
    for axes in (init_axes, trained_axes):
        axes.set_yscale("log")
        axes.set_xlabel("K (steps between the recalled symbol and the read-out)")
        axes.legend(fontsize="small")
    figure.suptitle(f"Gradient reaching the first symbol (width {HIDDEN}, LSTM forget bias "
                    f"{FORGET_BIAS})")  # fmt: skip
    path = context.figure("gradient_vs_distance")
    figure.savefig(path, dpi=110)
    return path


def draw_accuracy(context: LabContext, rows: list[dict[str, Any]], size: Size) -> Path:
    figure = Figure(figsize=(5.5, 4), layout="constrained")
    axes = figure.subplots()
    for cell in CELLS:
        axes.plot(*of_cell(rows, cell, "accuracy"), marker="o", color=COLOURS[cell], label=cell)
    axes.axhline(1 / VOCAB, linestyle=":", color="grey", label=f"chance (1/{VOCAB})")
    axes.set_xscale("log")
    axes.set_xticks(size.distances, labels=[str(k) for k in size.distances])
    axes.set_xticks([], minor=True)
    axes.set_ylim(0, 1.05)
    axes.set_xlabel("K (steps between the recalled symbol and the read-out)")
    axes.set_ylabel(f"accuracy on {EVAL_BATCH} fresh sequences")
    axes.set_title(f"Recall the first symbol after {size.steps} updates "
                   f"(mean of {counted(size.train_seeds, 'model')})")  # fmt: skip
    axes.legend(fontsize="small")
    path = context.figure("accuracy_vs_distance")
    figure.savefig(path, dpi=110)
    return path


# ------------------------------------------------------------------ finding


def init_decay(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Per cell: ‖∂L/∂x_{t-K}‖ at init at the largest K over that at the smallest K."""
    decay = {}
    for cell in CELLS:
        _, norms = of_cell(rows, cell, "grad init")
        decay[cell] = norms[-1] / norms[0]
    return decay


def longest_learned(rows: list[dict[str, Any]]) -> dict[str, int]:
    """Per cell: the largest K up to which every distance reached `LEARNED` accuracy (0: none)."""
    longest = {}
    for cell in CELLS:
        longest[cell] = 0
        for distance, accuracy in zip(*of_cell(rows, cell, "accuracy"), strict=True):
            if accuracy < LEARNED:
                break
            longest[cell] = distance
    return longest


def verdict(decay: dict[str, float], longest: dict[str, int]) -> bool | None:
    """False when the RNN's gradient decays no faster than a gated cell's, or a gated cell
    learns a shorter distance than the RNN; True when the RNN's gradient decays fastest and
    it learns the shortest distance; None when all three learn the same distances."""
    gated = ("gru", "lstm")
    if any(decay["rnn"] >= decay[cell] for cell in gated):
        return False
    if any(longest[cell] < longest["rnn"] for cell in gated):
        return False
    if all(longest[cell] > longest["rnn"] for cell in gated):
        return True
    return None


def summary(rows: list[dict[str, Any]], decay: dict, longest: dict, size: Size) -> str:
    low, high = size.distances[0], size.distances[-1]
    accuracy = {cell: of_cell(rows, cell, "accuracy")[1][-1] for cell in CELLS}
    decays = ", ".join(f"{decay[cell]:.1e} ({cell.upper()})" for cell in CELLS)
    learned = ", ".join(f"{longest[cell]} ({cell.upper()})" for cell in CELLS)
    accuracies = ", ".join(f"{accuracy[cell]:.0%} ({cell.upper()})" for cell in CELLS)
    lowest = accuracy["rnn"] < min(accuracy["gru"], accuracy["lstm"])
    fastest = all(decay["rnn"] < decay[cell] for cell in ("gru", "lstm"))
    first = "the RNN's falls fastest" if fastest else "the RNN's does NOT fall fastest"
    shortest = all(longest[cell] > longest["rnn"] for cell in ("gru", "lstm"))
    reach = "shorter than both gated cells'" if shortest else "not shorter than both gated cells'"
    seeds = counted(size.train_seeds, "seed")
    return (
        f"At initialisation ‖∂L/∂x_{{t−K}}‖ at K = {high} is {decays} of its value at "
        f"K = {low} (LSTM forget bias {FORGET_BIAS}): {first}. After {size.steps} Adam "
        f"updates at each K (accuracy: the mean of {seeds}), the longest distance learned "
        f"to {LEARNED:.0%} accuracy (every shorter one too; 0: none) is K = {learned}, so the "
        f"RNN's reach is {reach}; at K = {high} the accuracy is {accuracies}, chance "
        f"{1 / VOCAB:.1%} (the RNN's {'is the lowest' if lowest else 'is not the lowest'})."
    )


def values_of(rows: list[dict[str, Any]], decay: dict, longest: dict, size: Size) -> dict:
    values: dict[str, Any] = {"forget_bias": FORGET_BIAS, "steps": size.steps,
                              "distances": list(size.distances), "hidden": HIDDEN}  # fmt: skip
    for cell in CELLS:
        values[f"{cell}_init_decay"] = decay[cell]
        values[f"{cell}_longest_learned"] = longest[cell]
        for key, name in (("grad init", "init_grad"), ("accuracy", "accuracy"),
                          ("reach-back share trained", "trained_share")):  # fmt: skip
            values[f"{cell}_{name}"] = of_cell(rows, cell, key)[1]
    return values


def run(context: LabContext) -> Finding:
    if context.threads > 0:  # small recurrent steps: spare threads only wait on each other
        torch.set_num_threads(context.threads)
    size = QUICK if context.quick else DEFAULT
    rows = measured_rows(size, context)
    decay, longest = init_decay(rows), longest_learned(rows)
    return Finding(
        summary=summary(rows, decay, longest, size),
        table=rows,
        figures=[draw_gradients(context, rows, size), draw_accuracy(context, rows, size)],
        values=values_of(rows, decay, longest, size),
        agrees=verdict(decay, longest),
    )


EXPERIMENT = Experiment(
    name="vanishing_gradients",
    order=1,
    title="Vanishing gradients: RNN, GRU and LSTM",
    claim=(
        "In a plain recurrent network the gradient that reaches an input K steps back is a "
        "product of K Jacobians, so it shrinks roughly geometrically with K, and the network "
        "cannot learn to use information from far back. The LSTM's cell state and the GRU's "
        "interpolated state are updated by gated addition, which gives the gradient a path "
        "whose factor per step is a gate that can stay near 1, so they learn dependencies over "
        "longer distances."
    ),
    run=run,
    default_size=(
        "Measures the gradient at initialisation for K = 2 to 80 (3 seeds), then trains a "
        "width-32 RNN, GRU and LSTM for 600 Adam updates at each of the six distances with 3 "
        "seeds on random symbol sequences (54 small runs on the CPU, no Tatoeba)."
    ),
)
