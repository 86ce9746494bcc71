"""Check `learning`: a tiny model with the component learns the copy task, and attends on
the diagonal.

The copy task (`seq2seq.data.toy_tasks`): sources of 3-8 symbols out of 10, targets the same
symbols, so target position j translates source position j. The tiny model (`Subject.model`
at width 32, one layer per stack, no dropout) trains in cycles of `STEPS` AdamW steps on
batches of `BATCH_SIZE` (a one-cycle learning rate up to `PEAK_LR`, gradients clipped at
1), a few seconds a cycle on one CPU core. After each cycle it is scored on 200 held-out
sentences, teacher forced, and passes as soon as:

* token accuracy >= `ACCURACY` (EOS included);
* on the diagonal >= `DIAGONAL`: in some attention layer (the mean of its heads), for most
  target symbols the argmax over the source is the symbol it copies (EOS excluded: the
  toy task's alignment accuracy, `seq2seq.metrics.alignment_accuracy`, of the best layer:
  a decoder that keeps several layers often aligns in a lower one than the last, as
  guided alignment's default `alignment.layer=-2` assumes).

The loss is the cross-entropy; a model with hard attention trained by REINFORCE adds the
surrogate its scores learn from (`seq2seq.training.reinforce`), divided by the batch's
target tokens as the trainer divides it.

A model that has not passed after `CYCLES` cycles fails (a second cycle, a warm restart,
gives a component that learns more slowly, a one-layer ConvS2S decoder say, its chance).
A model that returns no attention weights (`attention=none`: one fixed context) has no
diagonal to show and is held to `WITHOUT_ATTENTION` instead: better than a guess, not as
good as attention on sequences this long.
"""

from __future__ import annotations

import json

import torch
import torch.nn.functional as F

from seq2seq.config.build import plain
from seq2seq.data.batching import Batch, collate
from seq2seq.data.tokenizer import SymbolTokenizer
from seq2seq.data.toy_tasks import ToySpec, toy_splits
from seq2seq.special_tokens import EOS_ID, PAD_ID
from seq2seq.testing.results import Violation
from seq2seq.testing.subject import Subject
from seq2seq.training.label_smoothing import sentence_label_smoothed_nll
from seq2seq.training.reinforce import recording

SYMBOLS, MIN_LEN, MAX_LEN = 10, 3, 8
TRAIN_SIZE, TEST_SIZE = 2000, 200
WIDTH, LAYERS = 32, 1
STEPS, BATCH_SIZE, PEAK_LR, CYCLES = 200, 32, 1e-2, 2
ACCURACY, DIAGONAL, WITHOUT_ATTENTION = 0.9, 0.75, 0.6

Example = tuple[list[int], list[int]]


def copy_task(seed: int = 0) -> tuple[list[Example], list[Example]]:
    """(train, test) examples of the copy task as symbol ids (no specials)."""
    spec = ToySpec("copy", SYMBOLS, MIN_LEN, MAX_LEN)
    splits = toy_splits(spec, {"train": TRAIN_SIZE, "valid": 1, "test": TEST_SIZE}, seed)
    tokenizer = SymbolTokenizer(SYMBOLS)
    encoded = {
        name: [(tokenizer.encode(src), tokenizer.encode(tgt)) for src, tgt in pairs]
        for name, pairs in splits.items()
    }
    return encoded["train"], encoded["test"]


def vocab_size() -> int:
    return SymbolTokenizer(SYMBOLS).vocab_size


def batches(examples: list[Example], cycle: int = 0) -> list[Batch]:
    """The `STEPS` batches of `BATCH_SIZE` of one cycle, going through the examples in order."""
    steps = range(cycle * STEPS, (cycle + 1) * STEPS)
    chosen = [
        [(step * BATCH_SIZE + i) % len(examples) for i in range(BATCH_SIZE)] for step in steps
    ]
    return [collate([examples[i] for i in indices], indices) for indices in chosen]


def loss_of(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
    """Mean cross-entropy per target token, plus the REINFORCE surrogate per token (if any)."""
    with recording(model) as choices:
        logits, _ = model(batch.src, batch.src_mask, batch.tgt_in)  # (batch, tgt_len, vocab)
    loss = F.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten(), ignore_index=PAD_ID)
    if not choices.regions:
        return loss
    nll = sentence_label_smoothed_nll(logits, batch.tgt_out)[1]  # (batch,)
    return loss + choices.surrogate(nll, batch.tgt_out) / batch.num_tgt_tokens


def train(model: torch.nn.Module, examples: list[Example], cycle: int = 0) -> torch.nn.Module:
    """One training cycle of the module docstring; returns the model in eval mode."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=PEAK_LR, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=PEAK_LR, total_steps=STEPS)
    model.train()
    for batch in batches(examples, cycle):
        optimizer.zero_grad()
        loss_of(model, batch).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
    return model.eval()


@torch.no_grad()
def scores(model: torch.nn.Module, examples: list[Example]) -> tuple[float, list[float] | None]:
    """Teacher forced: the share of target tokens (EOS included) predicted exactly, and per
    attention layer the share of target symbols whose head-mean argmax is on the diagonal
    (None without attention weights)."""
    batch = collate(examples, list(range(len(examples))))
    logits, attention = model(batch.src, batch.src_mask, batch.tgt_in, need_weights=True)
    real = batch.tgt_out != PAD_ID  # (batch, tgt_len)
    accuracy = float(((logits.argmax(-1) == batch.tgt_out) & real).sum() / real.sum())
    if attention is None:
        return accuracy, None
    symbols = real & (batch.tgt_out != EOS_ID)  # target j copies source j
    diagonal = torch.arange(batch.tgt_out.size(1)).unsqueeze(0)  # (1, tgt_len)
    per_layer = []
    for layer in range(attention.size(1)):
        argmax = attention[:, layer].float().mean(dim=1).argmax(dim=-1)  # (batch, tgt_len)
        per_layer.append(float(((argmax == diagonal) & symbols).sum() / symbols.sum()))
    return accuracy, per_layer


def trained_copy_model(subject: Subject, seed: int = 0) -> tuple[torch.nn.Module, list[Example]]:
    """The subject's tiny model trained one cycle on the copy task, and the held-out examples."""
    train_examples, test_examples = copy_task(seed)
    torch.manual_seed(seed)
    model = subject.model(vocab_size(), width=WIDTH, layers=LAYERS)
    return train(model, train_examples), test_examples


def shortfall(accuracy: float, per_layer: list[float] | None) -> str | None:
    """What the scores lack (module docstring), or None when they pass."""
    if per_layer is None:
        if accuracy < WITHOUT_ATTENTION:
            return f"token accuracy {accuracy:.3f} < {WITHOUT_ATTENTION} (no attention weights)"
        return None
    if accuracy < ACCURACY:
        return f"token accuracy {accuracy:.3f} < {ACCURACY} on the copy task"
    if max(per_layer) < DIAGONAL:
        layers = ", ".join(f"{share:.3f}" for share in per_layer)
        return (
            f"the attention argmax is on the diagonal for at most {max(per_layer):.3f} < "
            f"{DIAGONAL} of the target symbols (per layer: {layers})"
        )
    return None


def check(subject: Subject) -> str:
    """The learning run, once per tiny-model config in a run (`Subject.memo`)."""
    key = "learning " + json.dumps(plain(subject.model_config(WIDTH, LAYERS)), sort_keys=True)
    if key not in subject.memo:
        try:
            subject.memo[key] = learn(subject)
        except Violation as failure:
            subject.memo[key] = failure
    outcome = subject.memo[key]
    if isinstance(outcome, Violation):
        raise Violation(str(outcome))
    return outcome


def learn(subject: Subject) -> str:
    """Train cycle by cycle until the scores pass (module docstring); Violation if they never do."""
    train_examples, test = copy_task()
    torch.manual_seed(0)
    model = subject.model(vocab_size(), width=WIDTH, layers=LAYERS)
    for cycle in range(CYCLES):
        accuracy, per_layer = scores(train(model, train_examples, cycle), test)
        missing = shortfall(accuracy, per_layer)
        if missing is None:
            return passed(accuracy, per_layer, (cycle + 1) * STEPS)
    raise Violation(f"{missing} after {CYCLES * STEPS} steps")


def passed(accuracy: float, per_layer: list[float] | None, steps: int) -> str:
    if per_layer is None:
        return (
            f"token accuracy {accuracy:.3f} after {steps} steps (no attention weights: no diagonal)"
        )
    best = max(per_layer)
    where = f"layer {per_layer.index(best) + 1} of {len(per_layer)}"
    return (
        f"token accuracy {accuracy:.3f}, on the diagonal {best:.3f} ({where}) after {steps} steps"
    )
