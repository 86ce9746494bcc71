"""Masks: what stops attention from reading the future and the padding.

Attention reads every key it is shown, so what it must not read has to be hidden from it
(Vaswani et al. 2017, §3.2.3): a masked key gets the score −∞ before the softmax, so

    α_ij = exp(s_ij) / Σ_{k visible to i} exp(s_ik),   α_ij = 0 for a masked key j.

* The future mask: in training the decoder reads the whole reference at once (teacher
  forcing), `<s> y₁ … y_{T−1}`, and position t must predict y_t. Without the mask, position
  t also sees the input at t + 1, which is y_t itself: the model can copy the answer, its
  teacher-forced loss falls far lower than a real model's, and it has learnt nothing it
  can use when it generates, where the next token is not there to be read.
* The padding mask: a batch pads its shorter sentences with PAD up to the longest. Without
  the mask, the encoder's self-attention and the decoder's cross-attention read the pads
  as if they were words, so a sentence's translation depends on how much padding its batch
  happened to need.

The experiment, on the toy reverse task ("c a d" -> "d a c"):

(a) trains the same small Transformer twice, from the same initial weights and batches,
    with the future mask and without it (`Seq2Seq.forward(..., future_mask=False)`), and
    compares their teacher-forced valid loss (as trained) and what greedy generation makes
    of the valid sources (exact sequences, BLEU);
(b) with the masked model, translates every test sentence alone, then followed by k pad
    tokens (as in a batch whose longest sentence is k tokens longer), once with the real
    source mask and once with a mask that calls the pads real tokens, and counts the
    translations that change. (The reverse task starts its output at the end of the
    source, right where the pads are, so it shows the effect at its plainest.)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from matplotlib.figure import Figure

from seq2seq.config.build import build_model
from seq2seq.config.search_settings import SearchSettings
from seq2seq.data.batching import Batch, ParallelData
from seq2seq.data.prepare import PreparedData, prepare
from seq2seq.lab.experiment import Experiment, Finding, LabContext
from seq2seq.lab.training import compose_config
from seq2seq.metrics import corpus_scores
from seq2seq.models.model import Seq2Seq
from seq2seq.runs.assemble import data_config
from seq2seq.search import greedy_search
from seq2seq.search.batched import translate_ids
from seq2seq.special_tokens import EOS_ID, PAD_ID


@dataclass(frozen=True)
class Size:
    """How big the experiment is: the data, the model and its training."""

    train_pairs: int
    valid_pairs: int
    test_pairs: int
    longest: int  # toy sequences have 3 to `longest` symbols
    layers: int  # encoder and decoder layers each
    width: int  # embeddings and hidden states
    heads: int
    steps: int  # AdamW updates per model
    max_tokens: int  # per batch (padded)
    learning_rate: float
    pad_counts: tuple[int, ...]  # pads after each test sentence in (b)
    curve_points: int = 10  # teacher-forced valid losses measured along training


DEFAULT = Size(
    train_pairs=4000, valid_pairs=300, test_pairs=300, longest=12, layers=2, width=64,
    heads=4, steps=400, max_tokens=2048, learning_rate=3e-3, pad_counts=(0, 1, 2, 5, 10, 20),
)  # fmt: skip
QUICK = Size(
    train_pairs=512, valid_pairs=32, test_pairs=32, longest=8, layers=1, width=64, heads=2,
    steps=60, max_tokens=2048, learning_rate=1e-2, pad_counts=(0, 5, 20), curve_points=3,
)  # fmt: skip
FAR_BELOW = 0.5  # the unmasked loss "collapses": below this share of the masked one
FAILS = 0.5  # generation "fails": its BLEU below this share of the masked model's


def toy_config(size: Size, context: LabContext):
    """The composed train config of the toy reverse task and the model (no dropout)."""
    model = [f"{part}.{key}={value}" for part in ("encoder", "decoder") for key, value in (
        ("num_layers", size.layers), ("hidden_size", size.width), ("heads", size.heads),
        ("ff_size", 2 * size.width), ("dropout", 0.0), ("ff_dropout", 0.0))]  # fmt: skip
    return compose_config([
        "data=toy_reverse", f"data.source.train_size={size.train_pairs}",
        f"data.source.valid_size={size.valid_pairs}", f"data.source.test_size={size.test_pairs}",
        f"data.source.max_len={size.longest}",
        f"data.max_tokens={size.max_tokens}", f"data.root={context.data_root}",
        "encoder=transformer", "decoder=transformer", "attention=multihead",
        f"attention.heads={size.heads}", f"model.embed_dim={size.width}",
        "model.embed_dropout=0.0", *model,
    ])  # fmt: skip


# ---------------------------------------------------------------- (a) the future mask


@dataclass
class TrainedModel:
    """One of the two models of (a) and what was measured along its training."""

    future_mask: bool
    model: Seq2Seq
    curve: list[tuple[int, float]]  # (update, teacher-forced valid loss)


def token_loss(model: Seq2Seq, batch: Batch, future_mask: bool) -> torch.Tensor:
    """Mean cross-entropy of the reference tokens under teacher forcing."""
    logits, _ = model(batch.src, batch.src_mask, batch.tgt_in, future_mask=future_mask)
    # logits (batch, tgt_len, vocab), tgt_out (batch, tgt_len)
    return F.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=PAD_ID)


def training_batches(data: ParallelData, max_tokens: int, seed: int, device) -> Iterator[Batch]:
    """Shuffled token-budget batches of `data` on `device`, epoch after epoch, without end."""
    sampler = data.sampler(max_tokens, shuffle=True, seed=seed)
    epoch = 0
    while True:
        for indices in sampler.batches(epoch):
            yield data.batch(indices).to(device)
        epoch += 1


@torch.no_grad()
def valid_loss(model: Seq2Seq, data: ParallelData, future_mask: bool, device) -> float:
    """Teacher-forced cross-entropy per reference token over all of `data`, in eval mode."""
    model.eval()
    total, tokens = 0.0, 0
    for indices in data.sampler(4096, shuffle=False, seed=0).batches(0):
        batch = data.batch(indices).to(device)
        total += float(token_loss(model, batch, future_mask)) * batch.num_tgt_tokens
        tokens += batch.num_tgt_tokens
    model.train()
    return total / tokens


def train(model, data: PreparedData, size: Size, future_mask: bool, seed: int) -> TrainedModel:
    """`size.steps` AdamW updates at a constant learning rate (gradients clipped to norm 1,
    no label smoothing, no dropout); the teacher-forced valid loss along them."""
    device = next(model.parameters()).device
    optimiser = torch.optim.AdamW(model.parameters(), lr=size.learning_rate)
    every = max(1, size.steps // size.curve_points)
    curve = [(0, valid_loss(model, data.valid, future_mask, device))]
    model.train()
    batches = training_batches(data.train, size.max_tokens, seed, device)
    for step in range(1, size.steps + 1):
        loss = token_loss(model, next(batches), future_mask)
        optimiser.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        if step % every == 0 or step == size.steps:
            curve.append((step, valid_loss(model, data.valid, future_mask, device)))
    model.eval()
    return TrainedModel(future_mask, model, curve)


def twin_models(config, data: PreparedData, size: Size, seed: int, device) -> list[TrainedModel]:
    """The masked and the unmasked model, from the same initial weights and batches."""
    torch.manual_seed(seed)
    vocab = (data.src_tokenizer.vocab_size, data.tgt_tokenizer.vocab_size)
    start = build_model(config, *vocab).state_dict()
    trained = []
    for future_mask in (True, False):
        model = build_model(config, *vocab)
        model.load_state_dict(start)
        model.to(device)
        trained.append(train(model, data, size, future_mask, seed))
    return trained


def generation_scores(model: Seq2Seq, split: ParallelData, data: PreparedData) -> dict[str, float]:
    """What greedy generation makes of `split`: the share of exact outputs and BLEU."""
    sources = [src for src, _ in split.examples]
    device = next(model.parameters()).device
    nbest = translate_ids(model, sources, SearchSettings(beam_size=1), device)
    outputs = [hypotheses[0].tokens for hypotheses in nbest]
    exact = sum(out == tgt for out, (_, tgt) in zip(outputs, split.examples)) / len(outputs)
    texts = [data.tgt_tokenizer.decode(out) for out in outputs]
    bleu = float(corpus_scores(texts, list(split.tgt_lines), "en")["bleu"])  # toy: "c a d"
    return {"exact": exact, "bleu": bleu}


# ---------------------------------------------------------------- (b) the padding mask


@torch.no_grad()
def padded_outputs(
    model: Seq2Seq, sources: Sequence[Sequence[int]], pads: int, real_mask: bool
) -> list[list[int]]:
    """Greedy outputs of equally long `sources`, each followed by EOS and `pads` PADs.

    `real_mask`: the source mask marks the pads (True = real token); otherwise it is all
    True, so attention takes the pads for words. The output length limit is the one the
    sentence gets alone (`SearchSettings`' a · length + b) however many pads follow it, so
    only attention can change an output."""
    length = len(sources[0]) + 1 + pads
    src = torch.full((len(sources), length), PAD_ID, dtype=torch.long)  # (batch, src_len)
    for row, ids in enumerate(sources):
        src[row, : len(ids) + 1] = torch.tensor([*ids, EOS_ID])
    src = src.to(next(model.parameters()).device)
    src_mask = src != PAD_ID if real_mask else torch.ones_like(src, dtype=torch.bool)
    model.eval()
    limit = SearchSettings(beam_size=1)
    max_len = int(limit.max_len_a * (len(sources[0]) + 1) + limit.max_len_b)
    found = greedy_search(model, src, src_mask, max_len_a=0.0, max_len_b=max_len)
    return [hypothesis.tokens for hypothesis in found]


def batched_outputs(
    model: Seq2Seq, sources: Sequence[Sequence[int]], pads: int = 0, real_mask: bool = True
) -> list[list[int]]:
    """`padded_outputs` of every source, in input order, batching sources of one length."""
    outputs: list[list[int] | None] = [None] * len(sources)
    for length in sorted({len(source) for source in sources}):
        rows = [index for index, source in enumerate(sources) if len(source) == length]
        found = padded_outputs(model, [sources[row] for row in rows], pads, real_mask)
        for row, tokens in zip(rows, found):
            outputs[row] = tokens
    return outputs  # type: ignore[return-value]


def padding_rows(model: Seq2Seq, sources, pad_counts: Sequence[int]) -> list[dict[str, Any]]:
    """Per pad count, how many outputs differ from the sentence's translation alone
    (no pads), with the padding mask and without it."""
    alone = batched_outputs(model, sources)
    rows = []
    for pads in pad_counts:
        changed = {}
        for mask in (True, False):
            outputs = batched_outputs(model, sources, pads, mask)
            changed[mask] = sum(output != own for output, own in zip(outputs, alone))
        rows.append({"pads": pads, "sentences": len(sources),
                     "changed_with_mask": changed[True],
                     "changed_without_mask": changed[False]})  # fmt: skip
    return rows


# ---------------------------------------------------------------- figures


def curves_figure(models: list[TrainedModel], scores: dict[bool, dict[str, float]], path) -> None:
    """Teacher-forced valid loss along training, masked and unmasked, with each model's
    greedy generation (exact sequences, BLEU) in the legend."""
    figure = Figure(figsize=(6.4, 4.2), layout="constrained")
    axis = figure.subplots()
    for trained in models:
        steps, losses = zip(*trained.curve)
        score = scores[trained.future_mask]
        name = "with the future mask" if trained.future_mask else "without the future mask"
        label = f"{name}: generates {score['exact']:.0%} exactly, BLEU {score['bleu']:.1f}"
        axis.plot(steps, losses, marker="o", label=label)
    axis.set_yscale("log")
    axis.set_xlabel("update")
    axis.set_ylabel("teacher-forced valid loss (nats per token, log scale)")
    axis.set_title("Toy reverse task: training with and without the future mask")
    axis.legend(fontsize=8)
    figure.savefig(path, dpi=110)


def padding_figure(rows: list[dict[str, Any]], path) -> None:
    """Outputs changed against the pads after each sentence, with and without the mask."""
    figure = Figure(figsize=(6.4, 4.0), layout="constrained")
    axis = figure.subplots()
    pads = [row["pads"] for row in rows]
    for key, label in (("changed_with_mask", "with the padding mask"),
                       ("changed_without_mask", "without it (pads read as tokens)")):  # fmt: skip
        axis.plot(pads, [row[key] for row in rows], marker="o", label=label)
    axis.set_xticks(pads)
    axis.set_xlabel("pad tokens after each test sentence")
    axis.set_ylabel(f"greedy outputs that change (of {rows[0]['sentences']})")
    axis.set_title("Does a translation depend on its batch's padding?")
    axis.legend()
    figure.savefig(path, dpi=110)


# ---------------------------------------------------------------- the experiment


def summary_values(models, scores, rows) -> dict[str, Any]:
    masked, unmasked = (next(m for m in models if m.future_mask is flag) for flag in (True, False))
    return {
        "masked_loss": round(masked.curve[-1][1], 4),
        "unmasked_loss": round(unmasked.curve[-1][1], 4),
        "masked_exact": round(scores[True]["exact"], 4),
        "unmasked_exact": round(scores[False]["exact"], 4),
        "masked_bleu": round(scores[True]["bleu"], 2),
        "unmasked_bleu": round(scores[False]["bleu"], 2),
        "changed_with_mask": max(row["changed_with_mask"] for row in rows),
        "changed_without_mask": max(row["changed_without_mask"] for row in rows),
        "most_pads": max(row["pads"] for row in rows),
        "sentences": rows[0]["sentences"],
        "curves": {str(m.future_mask): m.curve for m in models},
        "padding": rows,
    }


def finding_table(values: dict[str, Any]) -> list[dict[str, Any]]:
    """Each measurement with the mask in question and without it."""
    rows = [
        ("teacher-forced valid loss (nats per token)", "masked_loss", "unmasked_loss"),
        ("valid sequences generated exactly (share)", "masked_exact", "unmasked_exact"),
        ("valid BLEU, greedy", "masked_bleu", "unmasked_bleu"),
    ]
    table = [{"measure": name, "with the mask": values[masked], "without it": values[unmasked]}
             for name, masked, unmasked in rows]  # fmt: skip
    for row in values["padding"]:
        name = f"test outputs changed by {row['pads']} pads (of {row['sentences']})"
        table.append({"measure": name, "with the mask": row["changed_with_mask"],
                      "without it": row["changed_without_mask"]})  # fmt: skip
    return table


def verdicts(values: dict[str, Any]) -> dict[str, bool]:
    """Each part of the claim, measured (the keys say what it predicts)."""
    return {
        "the loss without the future mask collapses":
            values["unmasked_loss"] < FAR_BELOW * values["masked_loss"],
        "generation without it fails": values["unmasked_bleu"] < FAILS * values["masked_bleu"],
        "no output changes with the padding mask": values["changed_with_mask"] == 0,
        "outputs change without it": values["changed_without_mask"] > 0,
    }  # fmt: skip


def summary_text(values: dict[str, Any], checks: dict[str, bool]) -> str:
    future = (
        f"Without the future mask the teacher-forced valid loss fell to "
        f"{values['unmasked_loss']:.3f} nats per token against {values['masked_loss']:.3f} "
        f"with it, yet greedy generation got {values['unmasked_exact']:.0%} of the valid "
        f"sequences exactly right against {values['masked_exact']:.0%} (BLEU "
        f"{values['unmasked_bleu']:.1f} against {values['masked_bleu']:.1f})"
    )
    padding = (
        f"With the padding mask {values['changed_with_mask']} of the masked model's "
        f"{values['sentences']} test outputs changed when up to {values['most_pads']} pads "
        f"followed the sentence; with the pads read as tokens up to "
        f"{values['changed_without_mask']} changed"
    )
    failed = [claim for claim, holds in checks.items() if not holds]
    verdict = (
        "both parts of the claim hold"
        if not failed
        else f"the claim does not fully hold here; not found: {'; '.join(failed)}"
    )
    return f"{future}. {padding}: {verdict}."


def run(context: LabContext) -> Finding:
    if context.threads > 0:  # small models: spare threads only wait on each other
        torch.set_num_threads(context.threads)
    size = QUICK if context.quick else DEFAULT
    config = toy_config(size, context)
    data = prepare(data_config(config))
    models = twin_models(config, data, size, context.seed, torch.device(context.device))
    scores = {m.future_mask: generation_scores(m.model, data.valid, data) for m in models}
    masked = next(m.model for m in models if m.future_mask)
    rows = padding_rows(masked, [src for src, _ in data.test.examples], size.pad_counts)
    values = summary_values(models, scores, rows)
    checks = verdicts(values)
    figures = [context.figure("masks_future"), context.figure("masks_padding")]
    curves_figure(models, scores, figures[0])
    padding_figure(rows, figures[1])
    values["checks"] = checks
    table = finding_table(values)
    return Finding(summary_text(values, checks), table, figures, values, all(checks.values()))


EXPERIMENT = Experiment(
    name="masks",
    order=7,
    title="Masks: the future and the padding",
    claim=(
        "Attention reads whatever it is shown, so masks decide what it may not read. The "
        "future mask hides the later target tokens from each decoder position; a decoder "
        "trained without it reads the answer it is asked to predict, so its teacher-forced "
        "loss drops far below an honest model's, and it cannot generate, because when it "
        "generates there is no next token to read. The padding mask hides the pad tokens "
        "that fill out a batch; without it a sentence's translation changes with the "
        "padding its neighbours in the batch happened to need."
    ),
    run=run,
    default_size=(
        "Trains a 2 + 2-layer, width-64, 4-head Transformer on the toy reverse task twice "
        "(400 updates each, with and without the future mask; about a minute on one core), "
        "then decodes the 300 test sentences followed by 0 to 20 pads, with and without the "
        "padding mask."
    ),
)
