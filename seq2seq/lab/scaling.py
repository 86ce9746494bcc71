"""Why scaled dot-product attention divides by √d_k.

If the components of a query q and a key k are independent with mean 0 and variance 1,

    Var(qᵀk) = Σ_{i=1..d_k} Var(q_i k_i) = d_k,

so the dot-product score grows with the width d_k. A softmax over scores with a standard
deviation of √d_k puts nearly all its weight on the best key once d_k is large, and there
its Jacobian ∂α/∂s = diag(α) − ααᵀ is nearly 0: little gradient reaches the scores.
Dividing by √d_k, `s = qᵀk / √d_k` (Vaswani et al. 2017, §3.2.1, eq. 1), keeps the
variance at 1 at every width.

Part A measures this at initialisation, with no training: for each d_k it draws
unit-variance queries, `KEYS` keys each (a fixed generator), scores them with the
project's own `dot` and `scaled_dot` score modules (the registry's "score" group) and
normalises them with the soft region's `masked_softmax`; it reports the variance of the
scores, the softmax entropy in nats (at most log `KEYS`, the uniform), the share of rows
whose largest weight exceeds `SATURATION` (`seq2seq.lab.attention_diagnostics`'
threshold) and the mean Frobenius norm of ∂α/∂s per row.

Part B trains the lab's GRU model (`seq2seq.lab.lab_models.gru_model`) with `attention=dot`
and with `attention=scaled_dot` at three widths (encoder, decoder and embeddings all W:
the tied embeddings need the decoder's width to equal the embedding width) and compares
their valid BLEU: if unscaled scores hurt more as the model widens, the gap should grow
with W. One head of width W attends here, but the GRU's queries and keys are not
unit-variance vectors, so it also reports the score variance the model's attention really
produced on a few valid pairs (`seq2seq.lab.attention_diagnostics.diagnose`), at
initialisation and after training.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

import torch
from matplotlib.figure import Figure

from seq2seq import registry
from seq2seq.lab.attention_diagnostics import (
    SATURATION,
    diagnose,
    model_at_init,
    valid_batches,
)
from seq2seq.lab.experiment import Experiment, Finding, LabContext
from seq2seq.lab.lab_models import TATOEBA_STEPS, gru_model
from seq2seq.lab.training import TrainedRun, run_overrides, trained
from seq2seq.models.attention.regions import masked_softmax

SCORES = ("dot", "scaled_dot")
LABELS = {"dot": "dot  qᵀk", "scaled_dot": "scaled dot  qᵀk / √d_k"}
COLOURS = {"dot": "C3", "scaled_dot": "C0"}
INIT_WIDTHS = (8, 16, 32, 64, 128, 256, 512)  # d_k of part A
KEYS = 20  # keys per query in part A
QUERIES = 2000  # queries per width in part A
VARIANCE_BAND = (0.8, 1.25)  # "near 1": scaled variance, and unscaled variance / d_k
PRESET_WIDTH = 96  # the lab's GRU model: no width override, so its runs are shared
TRAIN_WIDTHS, QUICK_TRAIN_WIDTHS = (32, 96, 160), (8, 32)
DIAGNOSED_PAIRS, QUICK_DIAGNOSED_PAIRS = 64, 16  # valid pairs for the real model's scores
# One seed per run: a BLEU gap must widen by more than this to count as growing.
GAP_MARGIN = 0.5


# ------------------------------------------------------------------ part A: at initialisation


def unit_draws(width: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Standard normal queries `(QUERIES, 1, 1, width)` and keys `(QUERIES, 1, KEYS, width)`:
    one head, one query position and `KEYS` key positions per "sentence"."""
    queries = torch.randn(QUERIES, 1, 1, width, generator=generator)
    keys = torch.randn(QUERIES, 1, KEYS, width, generator=generator)
    return queries, keys


def scores_of(name: str, queries: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """The registered score `name` of every query against its keys: `(QUERIES, 1, 1, KEYS)`."""
    width = queries.size(-1)
    score = registry.get("score", name).builder(width, width, 1)
    return score(queries, score.project_keys(keys))


def softmax_jacobian_norms(scores: torch.Tensor) -> torch.Tensor:
    """`(rows..., KEYS)` scores -> `(rows...)`: the Frobenius norm of each row's softmax
    Jacobian ∂α/∂s, one backward pass per key (row j of every Jacobian at once)."""
    scores = scores.detach().requires_grad_(True)
    weights = masked_softmax(scores, torch.ones_like(scores, dtype=torch.bool))
    squares = torch.zeros(scores.shape[:-1])
    for key in range(scores.size(-1)):
        (row,) = torch.autograd.grad(weights[..., key].sum(), scores, retain_graph=True)
        squares += (row**2).sum(dim=-1)  # ∂α_key/∂s_j over j
    return squares.sqrt()


def softmax_statistics(scores: torch.Tensor) -> dict[str, float]:
    """The score variance, and the softmax's mean entropy (nats), saturated share and
    Jacobian norm over the rows of `scores (rows..., KEYS)`."""
    with torch.no_grad():
        weights = masked_softmax(scores, torch.ones_like(scores, dtype=torch.bool))
        entropy = -(weights * weights.clamp_min(1e-30).log()).sum(dim=-1)
        saturated = (weights.amax(dim=-1) > SATURATION).float()
    return {
        "score variance": scores.var().item(),
        "entropy": entropy.mean().item(),
        "saturated": saturated.mean().item(),
        "softmax grad norm": softmax_jacobian_norms(scores).mean().item(),
    }


def init_rows(seed: int) -> list[dict[str, Any]]:
    """Part A: one row per score and d_k; both scores see the same draws at each width."""
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for width in INIT_WIDTHS:
        queries, keys = unit_draws(width, generator)
        for name in SCORES:
            measured = softmax_statistics(scores_of(name, queries, keys))
            rows.append({"part": "A init", "score": name, "d_k": width, **measured})
    return rows


def uniform_reference() -> dict[str, float]:
    """What a softmax over `KEYS` equal scores gives: entropy log KEYS, and its Jacobian norm."""
    return softmax_statistics(torch.zeros(1, KEYS))


# ------------------------------------------------------------------ part B: training


def width_overrides(context: LabContext, width: int) -> list[str]:
    """Encoder, decoder and embeddings `width` wide; none at the preset's own width."""
    if width == PRESET_WIDTH and not context.quick:
        return []
    return [f"encoder.hidden_size={width}", f"decoder.hidden_size={width}",
            f"model.embed_dim={width}"]  # fmt: skip


def score_variance(context: LabContext, model: torch.nn.Module, data: Any) -> float:
    """The variance of the attention scores `model` gives on the first valid pairs."""
    pairs = QUICK_DIAGNOSED_PAIRS if context.quick else DIAGNOSED_PAIRS
    found = diagnose(model, valid_batches(data, pairs, batch_size=32))
    return found["score_std"] ** 2


def trained_row(context: LabContext, name: str, width: int) -> dict[str, Any]:
    """Part B: the score's run at `width`, its valid BLEU and its real score variance."""
    overrides = gru_model(context, f"attention={name}", *width_overrides(context, width))
    suffix = "" if not width_overrides(context, width) else f"-w{width}"
    run: TrainedRun = trained(context, overrides, f"gru-{name}{suffix}")
    model, _, data = model_at_init(run_overrides(context, overrides))
    at_init = score_variance(context, model, data)
    after = score_variance(context, run.translator(context.device).model.cpu(), data)
    return {"part": "B trained", "score": name, "d_k": width, "score variance": at_init,
            "variance trained": after, "valid BLEU": run.valid_bleu}  # fmt: skip


def training_rows(context: LabContext) -> list[dict[str, Any]]:
    widths = QUICK_TRAIN_WIDTHS if context.quick else TRAIN_WIDTHS
    return [trained_row(context, name, width) for width in widths for name in SCORES]


# ------------------------------------------------------------------ figures


def of_score(rows: list[dict[str, Any]], name: str, key: str) -> tuple[list[int], list[float]]:
    """The widths and the `key` column of the rows of score `name`."""
    mine = [row for row in rows if row["score"] == name]
    return [row["d_k"] for row in mine], [row[key] for row in mine]


def draw_init(context: LabContext, rows: list[dict[str, Any]], uniform: dict) -> Path:
    """Part A: four panels against d_k, dot and scaled dot in each."""
    figure = Figure(figsize=(10, 7), layout="constrained")
    panels = [
        ("score variance", "variance of the scores (log)", None),
        ("saturated", f"share of rows with max weight > {SATURATION}", None),
        ("entropy", "softmax entropy (nats)", uniform["entropy"]),
        ("softmax grad norm", "mean ‖∂α/∂s‖ (Frobenius)", uniform["softmax grad norm"]),
    ]
    for axes, (key, ylabel, reference) in zip(figure.subplots(2, 2).flat, panels, strict=True):
        for name in SCORES:
            widths, values = of_score(rows, name, key)
            axes.plot(widths, values, marker="o", color=COLOURS[name], label=LABELS[name])
        if key == "score variance":
            axes.plot(INIT_WIDTHS, INIT_WIDTHS, linestyle=":", color="grey", label="d_k")
            axes.set_yscale("log")
        if reference is not None:
            axes.axhline(reference, linestyle="--", color="grey", label=f"uniform over {KEYS}")
        axes.set_xscale("log", base=2)
        axes.set_xlabel("d_k (width of query and key)")
        axes.set_ylabel(ylabel)
        axes.legend(fontsize="small")
    figure.suptitle(f"Unit-variance queries and keys at initialisation ({QUERIES} queries × "
                    f"{KEYS} keys per width)")  # fmt: skip
    path = context.figure("scaling_init")
    figure.savefig(path, dpi=110)
    return path


def draw_training(context: LabContext, rows: list[dict[str, Any]]) -> Path:
    """Part B: valid BLEU against the width (left); the trained model's real score
    variance, at initialisation (dashed) and after training (solid) (right)."""
    figure = Figure(figsize=(10, 4), layout="constrained")
    bleu_axes, variance_axes = figure.subplots(1, 2)
    for name in SCORES:
        style = {"marker": "o", "color": COLOURS[name]}
        bleu_axes.plot(*of_score(rows, name, "valid BLEU"), label=LABELS[name], **style)
        variance_axes.plot(*of_score(rows, name, "variance trained"), label=f"{name}, trained",
                           **style)  # fmt: skip
        variance_axes.plot(*of_score(rows, name, "score variance"), linestyle="--",
                           label=f"{name}, at init", **style)  # fmt: skip
    bleu_axes.set_ylabel("valid BLEU (best checkpoint)")
    bleu_axes.set_title("GRU model, one attention head of width W")
    variance_axes.set_ylabel("variance of the attention scores (log)")
    variance_axes.set_yscale("log")
    variance_axes.set_title("scores on valid pairs")
    for axes in (bleu_axes, variance_axes):
        axes.set_xticks(of_score(rows, SCORES[0], "d_k")[0])
        axes.set_xlabel("width W (encoder, decoder, embeddings; = d_k)")
        axes.legend(fontsize="small")
    path = context.figure("scaling_training")
    figure.savefig(path, dpi=110)
    return path


# ------------------------------------------------------------------ finding


def init_holds(rows: list[dict[str, Any]]) -> bool:
    """Part A as the claim predicts: the scaled variance in VARIANCE_BAND at every width,
    and the unscaled variance / d_k in it too (linear growth)."""
    low, high = VARIANCE_BAND
    scaled = of_score(rows, "scaled_dot", "score variance")[1]
    widths, unscaled = of_score(rows, "dot", "score variance")
    ratios = [variance / width for variance, width in zip(unscaled, widths, strict=True)]
    return all(low <= value <= high for value in [*scaled, *ratios])


def bleu_gaps(rows: list[dict[str, Any]]) -> dict[int, float]:
    """Part B: valid BLEU of scaled dot minus dot, per width."""
    widths, scaled = of_score(rows, "scaled_dot", "valid BLEU")
    dot = of_score(rows, "dot", "valid BLEU")[1]
    return {width: s - d for width, s, d in zip(widths, scaled, dot, strict=True)}


def gap_grows(gaps: dict[int, float]) -> bool:
    """Does the widest model's gap exceed the narrowest's by more than GAP_MARGIN BLEU?"""
    widths = sorted(gaps)
    return gaps[widths[-1]] - gaps[widths[0]] > GAP_MARGIN


def verdict(holds: bool, gaps: dict[int, float]) -> bool | None:
    """False when part A fails; True when it holds and the BLEU gap grows from the narrowest
    to the widest model; None when A holds but training does not show the gap growing."""
    if not holds:
        return False
    return True if gap_grows(gaps) else None


def summary(
    init: list[dict[str, Any]], training: list[dict[str, Any]], gaps: dict[int, float], holds: bool
) -> str:
    by = {(row["score"], row["d_k"]): row for row in init}
    low, high = INIT_WIDTHS[0], INIT_WIDTHS[-1]
    scaled = [by[("scaled_dot", w)]["score variance"] for w in INIT_WIDTHS]
    grows = gap_grows(gaps)
    gap_text = ", ".join(f"{gaps[w]:+.1f} at W = {w}" for w in sorted(gaps))
    real_widths, real = of_score(training, "dot", "score variance")
    real_text = ", ".join(f"{v:.2g} at W = {w}" for w, v in zip(real_widths, real, strict=True))
    return (
        f"At initialisation the unscaled score variance goes from "
        f"{by[('dot', low)]['score variance']:.1f} at d_k = {low} to "
        f"{by[('dot', high)]['score variance']:.0f} at d_k = {high}, and the share of "
        f"rows with a weight over {SATURATION} from {by[('dot', low)]['saturated']:.0%} to "
        f"{by[('dot', high)]['saturated']:.0%}, while the scaled variance stays between "
        f"{min(scaled):.2f} and {max(scaled):.2f}"
        f"{' as claimed' if holds else ', which is not what the claim predicts'}. "
        f"The GRU model's own unscaled scores have variance {real_text} at initialisation "
        f"(unit-variance vectors would give d_k = W), and after training scaled dot's valid "
        f"BLEU minus dot's is {gap_text}: the gap "
        f"{'grows' if grows else 'does not grow'} with the width here (by more than "
        f"{GAP_MARGIN} BLEU)"
        f"{'' if grows else ', so the benefit of scaling is not seen in BLEU at these sizes'}."
    )


def values_of(init: list[dict[str, Any]], training: list[dict[str, Any]]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for row in init:
        prefix = f"{row['score']}_{row['d_k']}"
        values[f"{prefix}_variance"] = row["score variance"]
        values[f"{prefix}_saturated"] = row["saturated"]
    for row in training:
        values[f"{row['score']}_w{row['d_k']}_valid_bleu"] = row["valid BLEU"]
        values[f"{row['score']}_w{row['d_k']}_init_variance"] = row["score variance"]
        values[f"{row['score']}_w{row['d_k']}_trained_variance"] = row["variance trained"]
    values["saturation_threshold"] = SATURATION
    return values


def table_of(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Parts A and B in one table (the same keys in every row; what a part lacks is NaN).
    "score variance" is at initialisation in both: unit draws (A), the model's scores (B)."""
    columns = ("part", "score", "d_k", "score variance", "entropy", "saturated",
               "softmax grad norm", "variance trained", "valid BLEU")  # fmt: skip
    return [{column: row.get(column, math.nan) for column in columns} for row in rows]


def run(context: LabContext) -> Finding:
    init = init_rows(context.seed)
    training = training_rows(context)
    holds, gaps = init_holds(init), bleu_gaps(training)
    values = values_of(init, training)
    values["mean_bleu_gap"] = statistics.fmean(gaps.values())
    return Finding(
        summary=summary(init, training, gaps, holds),
        table=table_of([*init, *training]),
        figures=[draw_init(context, init, uniform_reference()), draw_training(context, training)],
        values=values,
        agrees=verdict(holds, gaps),
    )


EXPERIMENT = Experiment(
    name="scaling",
    order=4,
    title="Why divide by √d_k",
    claim=(
        "A dot product of two vectors whose entries are independent with variance 1 has "
        "variance equal to their width d_k. Unscaled dot-product scores therefore spread "
        "wider as the model widens, the softmax over them gives almost all its weight to "
        "one key, and almost no gradient flows back through it. Dividing the scores by "
        "√d_k brings their variance back to about 1 whatever the width, so the softmax "
        "stays soft and trainable (Vaswani et al. 2017, §3.2.1)."
    ),
    run=run,
    default_size=(
        "Measures unit-variance scores at d_k = 8 to 512 at initialisation (seconds), then "
        "trains the lab's GRU model on Tatoeba zh→en with dot and with scaled dot attention "
        f"at widths 32, 96 and 160 (6 runs of {TATOEBA_STEPS} updates, the two at width 96 "
        "shared with "
        "other experiments)."
    ),
)
