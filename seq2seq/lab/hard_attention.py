"""Hard attention by reinforcement learning: REINFORCE against straight-through and soft.

Hard attention gives one key weight 1 and every other key 0. Choosing that key is a draw
(in training, k ~ softmax(s)), and a draw has no derivative, so the loss says nothing
directly about how the scores s should move. Two estimators give the scores a gradient
anyway (`seq2seq.models.attention.regions.HardRegion`, `attention.region.estimator`):

* REINFORCE (Williams 1992; the "hard" attention of Xu et al. 2015): the likelihood-ratio
  identity ∇E_k[R] = E_k[(R − b) ∇log p(k)] gives an unbiased estimate from the sampled key
  alone; here R is the sentence's mean token log-likelihood of the reference and b a
  moving-average baseline (`seq2seq.training.reinforce`). One sample per query, a
  reward shared by a whole sentence: noisy.
* straight-through Gumbel-softmax (Jang et al. 2017): the forward pass uses the sampled
  one-hot, the backward pass the gradient of softmax((s + g)/τ): the gradient of a
  relaxation, so biased, but it carries per-query information and is much less noisy.

Soft attention (Bahdanau et al. 2015) is differentiable: its gradient is exact and, for a
fixed batch, the same every time.

Method. The lab's GRU model (bi-GRU encoder, GRU decoder, additive score) is trained three
times, changing only the region: soft (`attention=additive`), hard by straight-through
(`attention=additive attention/region=hard`, the same config as `attention=hard`, and the
run the `mechanisms` experiment trains) and hard by REINFORCE (the same with
`attention.region.estimator=reinforce`), on the toy reverse task (its own small model) and
on Tatoeba zh→en (`seq2seq.lab.lab_models.gru_model`; the quick size trains the toy task only).
For each model it reports:

* the learning curve: the training loss (label-smoothed cross-entropy per target token, the
  REINFORCE surrogate not included) at every logged update, read from `metrics.jsonl`
  (`seq2seq.runs.metrics_log`; it holds the training statistics, the validation scores
  go to TensorBoard only), and its mean over the run (lower = learned faster);
* the gradient noise of the attention score's parameters (W, U, v of the additive score):
  on a fixed batch of test pairs, with dropout off and only the region sampling, the
  training objective's gradient (NLL per token, plus the surrogate for REINFORCE) is
  computed `REPEATS` times with fresh samples; the mean per-parameter variance
  (1/P) Σ_p Var_r[g_p] and the noise-to-signal ratio Σ_p Var_r[g_p] / Σ_p ḡ_p², at
  initialisation (the same weights for all three, the ones training starts from) and for
  the trained model. Soft attention draws nothing, so its variance is exactly 0. With R
  repeats, a gradient whose true mean is 0 gives a ratio near R (ḡ² then holds only the
  noise, Var/R): a ratio near `REPEATS` means the average of the samples is still mostly
  noise;
* test BLEU (greedy) and alignment quality: on the toy task the share of target symbols
  whose argmax attention is on the anti-diagonal (`toy_alignment_accuracy`), on Tatoeba the
  test AER on the hand-aligned gold pairs (last layer, argmax links,
  `seq2seq.align.model_aer.checkpoint_aer`).

The claim holds here when, on every task, REINFORCE's noise-to-signal ratio exceeds
straight-through's at both measurements, soft's variance is 0, and soft has the lowest mean
training loss.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from matplotlib.figure import Figure

from seq2seq.align.model_aer import checkpoint_aer
from seq2seq.data.batching import Batch
from seq2seq.lab.attention_diagnostics import model_at_init
from seq2seq.lab.experiment import Experiment, Finding, LabContext
from seq2seq.lab.lab_models import TATOEBA_STEPS, gru_model
from seq2seq.lab.training import TrainedRun, run_overrides, trained
from seq2seq.models.attention import Attention
from seq2seq.runs.metrics_log import read_series
from seq2seq.training.label_smoothing import sentence_label_smoothed_nll
from seq2seq.training.reinforce import (
    recording,
    reinforce_surrogate,
    sentence_rewards,
)
from seq2seq.visualise.alignment import toy_alignment_accuracy

METHODS = ("soft", "straight_through", "reinforce")
LABELS = {"soft": "soft", "straight_through": "hard, straight-through",
          "reinforce": "hard, REINFORCE"}  # fmt: skip
SHORT = {"soft": "soft", "straight_through": "straight-through", "reinforce": "REINFORCE"}
COLOURS = {"soft": "C0", "straight_through": "C1", "reinforce": "C3"}
# The attention overrides of each method: the `mechanisms` experiment's for soft and
# straight-through, so the Tatoeba runs are shared.
ATTENTION = {
    "soft": ("attention=additive",),
    "straight_through": ("attention=additive", "attention/region=hard"),
    "reinforce": ("attention=additive", "attention/region=hard",
                  "attention.region.estimator=reinforce"),
}  # fmt: skip
RUN_LABELS = {"soft": "gru-additive", "straight_through": "gru-hard",
              "reinforce": "gru-hard-reinforce"}  # fmt: skip
TASKS = {"toy": "toy reverse", "tatoeba": "Tatoeba zh→en"}
REPEATS, QUICK_REPEATS = 20, 8  # forward + backward passes per gradient-noise measurement
SENTENCES, QUICK_SENTENCES = 32, 16  # the fixed batch's test pairs

TOY = [
    "data=toy_reverse",
    "data.source.train_size=4000",
    "data.source.valid_size=100",
    "data.source.test_size=200",
    "data.max_tokens=1024",
    "encoder=gru",
    "decoder=gru",
    "encoder.hidden_size=32",
    "decoder.hidden_size=64",
    "model.embed_dim=64",
    "trainer.max_steps=300",
    "trainer.valid_every=100",
    "trainer.log_every=10",
    "trainer.test_search.beam_size=1",
    "schedule.warmup_steps=30",
]
QUICK_TOY = [
    "data=toy_reverse",
    "data.source.train_size=256",
    "data.source.valid_size=16",
    "data.source.test_size=32",
    "data.source.max_len=8",
    "data.max_tokens=256",
    "encoder=gru",
    "decoder=gru",
    "encoder.hidden_size=16",
    "decoder.hidden_size=16",
    "model.embed_dim=16",
    "trainer.max_steps=12",
    "trainer.valid_every=12",
    "trainer.log_every=2",
    "trainer.test_search.beam_size=1",
    "schedule.warmup_steps=3",
]


@dataclass
class Result:
    """One task × method: its run, learning curve and measurements."""

    task: str
    method: str
    run: TrainedRun
    curve: dict[int, float]  # update -> training loss
    noise_init: tuple[float, float]  # (mean variance, noise-to-signal) at initialisation
    noise_trained: tuple[float, float]  # the same for the trained model
    alignment: float  # toy: alignment accuracy; Tatoeba: test AER (NaN: none)

    @property
    def mean_loss(self) -> float:
        return sum(self.curve.values()) / max(len(self.curve), 1)


# ------------------------------------------------------------------ runs


def task_names(context: LabContext) -> list[str]:
    return ["toy"] if context.quick else ["toy", "tatoeba"]


def overrides_of(context: LabContext, task: str, method: str) -> list[str]:
    """The training overrides of `method` on `task`."""
    if task == "tatoeba":
        return gru_model(context, *ATTENTION[method])
    toy = QUICK_TOY if context.quick else TOY
    return [*toy, *ATTENTION[method], f"trainer.seed={context.seed}"]


def trained_run(context: LabContext, task: str, method: str) -> TrainedRun:
    label = RUN_LABELS[method] if task == "tatoeba" else f"hard-toy-{method}"
    return trained(context, overrides_of(context, task, method), label)


def learning_curve(run: TrainedRun) -> dict[int, float]:
    """Update -> training loss, from the run's `metrics.jsonl`."""
    return read_series(run.run_dir, "train/loss").values


# ------------------------------------------------------------------ gradient noise


def training_objective(model: torch.nn.Module, batch: Batch, smoothing: float) -> torch.Tensor:
    """What training differentiates, per target token: the label-smoothed NLL, plus the
    REINFORCE surrogate −Σ_i (R_i − b)·log π_i of each REINFORCE region (b left as it is)."""
    with recording(model) as choices:
        logits, _ = model(batch.src, batch.src_mask, batch.tgt_in)  # (batch, tgt_len, vocab)
    loss, nll = sentence_label_smoothed_nll(logits, batch.tgt_out, smoothing)  # (batch,) each
    total = loss.sum()
    rewards = sentence_rewards(nll, batch.tgt_out)  # (batch,)
    for region in choices.regions:
        log_probs = choices.log_probs(region, batch.tgt_out)  # (batch,)
        total = total + reinforce_surrogate(log_probs, rewards, region.baseline_value())
    return total / batch.num_tgt_tokens


@torch.no_grad()
def settle_baselines(model: torch.nn.Module, batch: Batch) -> None:
    """A REINFORCE region at initialisation has no baseline yet: give it the batch's mean
    reward, as training's first update does."""
    with recording(model) as choices:
        logits, _ = model(batch.src, batch.src_mask, batch.tgt_in)
    rewards = sentence_rewards(sentence_label_smoothed_nll(logits, batch.tgt_out)[1], batch.tgt_out)
    for region in choices.regions:
        if torch.isnan(region.baseline):
            region.update_baseline(rewards.mean())


def score_gradients(
    model: torch.nn.Module, batch: Batch, repeats: int, seed: int, smoothing: float
) -> torch.Tensor:
    """(repeats, P): the gradient of the attention scores' P parameters, `repeats` times on
    the same batch, dropout off and the regions sampling as in training."""
    attentions = [module for module in model.modules() if isinstance(module, Attention)]
    parameters = [p for attention in attentions for p in attention.score.parameters()]
    model.eval()
    for attention in attentions:
        attention.region.train()  # sampling on (hard), nothing else changes
    settle_baselines(model, batch)
    torch.manual_seed(seed)
    rows = []
    for _ in range(repeats):
        model.zero_grad(set_to_none=True)
        training_objective(model, batch, smoothing).backward()
        rows.append(torch.cat([
            (p.grad if p.grad is not None else torch.zeros_like(p)).flatten() for p in parameters
        ]))  # fmt: skip
    model.eval()
    return torch.stack(rows).cpu()


def gradient_noise(gradients: torch.Tensor) -> tuple[float, float]:
    """(mean per-parameter variance, Σ variance / Σ squared mean) of `(repeats, P)`
    gradients. Taken about the first repeat (the variance does not change with a shift),
    so identical repeats give exactly 0."""
    variance = (gradients - gradients[0]).var(dim=0)  # (P,)
    signal = gradients.mean(dim=0).square().sum().item()
    total = variance.sum().item()
    return variance.mean().item(), (total / signal if signal > 0 else math.nan)


def fixed_batch(data: Any, sentences: int, device: str) -> Batch:
    """`sentences` test pairs spread over the test split (it may be ordered by length)."""
    count = len(data.test)
    chosen = sorted({round(i * (count - 1) / max(sentences - 1, 1)) for i in range(sentences)})
    return data.test.batch(chosen).to(torch.device(device))


def noise_pair(
    context: LabContext, task: str, method: str, trained_model: torch.nn.Module
) -> tuple[tuple[float, float], tuple[float, float], Any]:
    """Gradient noise at initialisation (the weights training started from) and of the
    trained model, and the prepared data."""
    sentences = QUICK_SENTENCES if context.quick else SENTENCES
    repeats = QUICK_REPEATS if context.quick else REPEATS
    initial, cfg, data = model_at_init(run_overrides(context, overrides_of(context, task, method)))
    batch = fixed_batch(data, sentences, context.device)
    smoothing = float(cfg.trainer.label_smoothing)
    noise = [
        gradient_noise(score_gradients(model, batch, repeats, context.seed, smoothing))
        for model in (initial.to(context.device), trained_model)
    ]
    return noise[0], noise[1], data


# ------------------------------------------------------------------ alignment


def alignment_of(
    context: LabContext, task: str, run: TrainedRun, model: torch.nn.Module, data: Any
) -> float:
    """Toy: the test split's alignment accuracy; Tatoeba: the gold test AER (NaN: none)."""
    if task == "toy":
        device = torch.device(context.device)
        accuracy = toy_alignment_accuracy(model, data.test.examples, "reverse", device)
        return math.nan if accuracy is None else accuracy
    found = checkpoint_aer(run.checkpoint, context.device)
    aer = None if found is None else found.head_mean.aer
    return math.nan if aer is None else aer


def measured(context: LabContext, task: str, method: str) -> Result:
    run = trained_run(context, task, method)
    model = run.translator(context.device).model
    noise_init, noise_trained, data = noise_pair(context, task, method, model)
    alignment = alignment_of(context, task, run, model, data)
    return Result(task, method, run, learning_curve(run), noise_init, noise_trained, alignment)


# ------------------------------------------------------------------ figures


def draw_curves(context: LabContext, results: list[Result]) -> Path:
    """One panel per task: training loss against the update, one line per method."""
    tasks = task_names(context)
    figure = Figure(figsize=(5.5 * len(tasks), 4), layout="constrained")
    for axes, task in zip(figure.subplots(1, len(tasks), squeeze=False)[0], tasks, strict=True):
        for result in (r for r in results if r.task == task):
            steps = sorted(result.curve)
            axes.plot(steps, [result.curve[s] for s in steps], color=COLOURS[result.method],
                      label=LABELS[result.method])  # fmt: skip
        axes.set_title(TASKS[task])
        axes.set_xlabel("update")
        axes.set_ylabel("training loss (label-smoothed CE per token)")
        axes.legend(fontsize="small")
    path = context.figure("hard_attention_curves")
    figure.savefig(path, dpi=110)
    return path


def draw_noise(context: LabContext, results: list[Result]) -> Path:
    """Bars of the score gradient's noise-to-signal ratio (log scale), per task, at
    initialisation and after training; soft's exact 0 is written where its bar would be,
    and the ratio of pure noise (≈ the number of repeats) is a dotted line."""
    tasks, repeats = task_names(context), QUICK_REPEATS if context.quick else REPEATS
    figure = Figure(figsize=(5.5 * len(tasks), 4), layout="constrained")
    width = 0.25
    for axes, task in zip(figure.subplots(1, len(tasks), squeeze=False)[0], tasks, strict=True):
        mine = {r.method: r for r in results if r.task == task}
        for offset, method in enumerate(METHODS):
            ratios = [mine[method].noise_init[1], mine[method].noise_trained[1]]
            places = [index + (offset - 1) * width for index in range(2)]
            shown = [ratio if ratio > 0 else math.nan for ratio in ratios]
            axes.bar(places, shown, width, color=COLOURS[method], label=LABELS[method])
            for place, ratio in zip(places, ratios, strict=True):
                if not ratio > 0:
                    axes.annotate("0", (place, 0.02), xycoords=("data", "axes fraction"),
                                  ha="center", va="bottom", color=COLOURS[method])  # fmt: skip
        axes.axhline(repeats, linestyle=":", color="grey",
                     label=f"mean 0, pure noise ({repeats} samples)")  # fmt: skip
        axes.set_yscale("log")
        axes.set_xlim(-0.6, 1.6)
        ratios = [repeats, *(r.noise_init[1] for r in mine.values()),
                  *(r.noise_trained[1] for r in mine.values())]  # fmt: skip
        positive = [ratio for ratio in ratios if ratio > 0]
        axes.set_ylim(min(positive) / 10, max(positive) * 300)  # room for the legend on top
        axes.set_xticks([0, 1], ["at initialisation", "trained"])
        axes.set_ylabel("Σ Var[g] / Σ mean(g)²  (score parameters)")
        axes.set_title(f"{TASKS[task]}: gradient noise of the attention score")
        axes.legend(fontsize="small", loc="upper left")
    path = context.figure("hard_attention_gradient_noise")
    figure.savefig(path, dpi=110)
    return path


# ------------------------------------------------------------------ finding


def row_of(result: Result) -> dict[str, Any]:
    toy = result.task == "toy"
    return {
        "task": TASKS[result.task],
        "attention": LABELS[result.method],
        "mean train loss": result.mean_loss,
        "final train loss": result.curve[max(result.curve)],
        "grad variance (init)": result.noise_init[0],
        "noise/signal (init)": result.noise_init[1],
        "grad variance (trained)": result.noise_trained[0],
        "noise/signal (trained)": result.noise_trained[1],
        "test BLEU": result.run.test_bleu,
        "alignment accuracy": result.alignment if toy else math.nan,
        "test AER": math.nan if toy else result.alignment,
    }


def task_holds(results: list[Result], task: str) -> dict[str, bool]:
    """The claim's three parts on one task (module docstring)."""
    mine = {r.method: r for r in results if r.task == task}
    reinforce, straight, soft = mine["reinforce"], mine["straight_through"], mine["soft"]
    noisier = all(
        getattr(reinforce, when)[1] > getattr(straight, when)[1]
        for when in ("noise_init", "noise_trained")
    )
    exact = soft.noise_init[0] == 0 and soft.noise_trained[0] == 0
    fastest = soft.mean_loss < min(reinforce.mean_loss, straight.mean_loss)
    return {"noisier": noisier, "exact": exact, "fastest": fastest}


def summary(results: list[Result], holds: dict[str, dict[str, bool]]) -> str:
    parts = []
    for task, checks in holds.items():
        mine = {r.method: r for r in results if r.task == task}
        ratios = ", ".join(f"{SHORT[m]} {mine[m].noise_init[1]:.3g}" for m in METHODS[1:])
        losses = ", ".join(f"{SHORT[m]} {mine[m].mean_loss:.3f}" for m in METHODS)
        bleu = ", ".join(f"{mine[m].run.test_bleu:.1f}" for m in METHODS)
        parts.append(
            f"On {TASKS[task]} the score gradient's noise-to-signal ratio at initialisation is "
            f"{ratios} (soft: exactly 0); REINFORCE is "
            f"{'noisier' if checks['noisier'] else 'not noisier'} than straight-through at "
            f"initialisation and after training; mean training loss {losses}, so soft "
            f"{'learned fastest' if checks['fastest'] else 'did not learn fastest'}; "
            f"test BLEU (soft, ST, REINFORCE) {bleu}."
        )
    agrees = all(all(checks.values()) for checks in holds.values())
    verdict = ("This supports the claim." if agrees
               else "This does not fully support the claim (see which part above).")  # fmt: skip
    return " ".join([*parts, verdict])


def values_of(results: list[Result]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for result in results:
        key = f"{result.task}_{result.method}"
        values[f"{key}_variance_init"] = result.noise_init[0]
        values[f"{key}_noise_ratio_init"] = result.noise_init[1]
        values[f"{key}_variance_trained"] = result.noise_trained[0]
        values[f"{key}_noise_ratio_trained"] = result.noise_trained[1]
        values[f"{key}_mean_loss"] = result.mean_loss
        values[f"{key}_test_bleu"] = result.run.test_bleu
        values[f"{key}_{'alignment_accuracy' if result.task == 'toy' else 'aer'}"] = (
            result.alignment
        )
    return values


def run(context: LabContext) -> Finding:
    results = [
        measured(context, task, method) for task in task_names(context) for method in METHODS
    ]
    holds = {task: task_holds(results, task) for task in task_names(context)}
    return Finding(
        summary=summary(results, holds),
        table=[row_of(result) for result in results],
        figures=[draw_curves(context, results), draw_noise(context, results)],
        values=values_of(results),
        agrees=all(all(checks.values()) for checks in holds.values()),
    )


EXPERIMENT = Experiment(
    name="hard_attention",
    order=5,
    title="Hard attention by reinforcement learning",
    claim=(
        "Hard attention reads exactly one source position. Which one is a random choice, and "
        "a choice has no derivative, so the usual backpropagation cannot tell the scores how "
        "to change. The textbook answer is reinforcement learning: REINFORCE scores each "
        "sampled choice by how well the sentence was then predicted, which gives an unbiased "
        "but noisy gradient. The straight-through estimator instead pretends the choice was "
        "a softmax on the way back: biased, but far less noisy. Soft attention needs neither "
        "trick, since it is differentiable, and usually learns fastest."
    ),
    run=run,
    default_size=(
        "Trains soft, straight-through and REINFORCE attention on the toy reverse task (300 "
        f"updates each) and on Tatoeba zh→en (the lab's GRU model, {TATOEBA_STEPS} updates each; "
        "soft and "
        "straight-through are shared with the mechanisms experiment), then measures the score "
        "gradient's noise over 20 samples, test BLEU, and alignment accuracy or gold AER."
    ),
)
