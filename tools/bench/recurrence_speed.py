"""The RNN encoder's recurrence in training on the CPU, timed two ways in one process:
PyTorch's module over packed sentences, and `seq2seq.models.stacked_rnn.recur`.

A shape is B sentences × S positions, lengths drawn from S−3 .. S with one sentence of S,
embeddings and hidden size 256, one bidirectional layer (the encoders of `gru_additive`
and `lstm_general`). The two ways take turns within every rep, so a slow minute of a
shared machine hits both alike; a rep is the mean of `count` forward+backward passes.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from seq2seq.models.stacked_rnn import recur

MODULES = {"gru": nn.GRU, "lstm": nn.LSTM, "rnn": nn.RNN}
WIDTH = 256


def passes(cell: str, batch: int, steps: int) -> tuple[dict[str, Callable[[], None]], torch.Tensor]:
    """One forward+backward of each way over the same module, inputs and output gradient;
    and those inputs (B, S, 256), whose `.grad` the passes accumulate into."""
    generator = torch.Generator().manual_seed(0)
    rnn = MODULES[cell](WIDTH, WIDTH, batch_first=True, bidirectional=True)
    lengths = torch.randint(steps - 3, steps + 1, (batch,), generator=generator)
    lengths[0] = steps
    inputs = torch.randn(batch, steps, WIDTH, generator=generator, requires_grad=True)
    mask = (torch.arange(steps).unsqueeze(0) < lengths.unsqueeze(1)).unsqueeze(-1)
    out_grad = torch.randn(batch, steps, 2 * WIDTH, generator=generator)

    def packed() -> None:
        sentences = pack_padded_sequence(inputs, lengths, batch_first=True, enforce_sorted=False)
        outputs, _ = rnn(sentences)
        outputs, _ = pad_packed_sequence(outputs, batch_first=True, total_length=steps)
        outputs.backward(out_grad)

    def recurred() -> None:
        outputs, _ = recur(rnn, inputs, lengths, nn.Identity())
        (outputs * mask).backward(out_grad)

    return {"packed module": packed, "recur": recurred}, inputs


def seconds_per_pass(run: Callable[[], None], count: int) -> float:
    started = time.perf_counter()
    for _ in range(count):
        run()
    return (time.perf_counter() - started) / count


def measure(cell: str, batch: int, steps: int, reps: int, count: int) -> dict[str, list[float]]:
    ways, _ = passes(cell, batch, steps)
    for run in ways.values():
        seconds_per_pass(run, 1)  # warm-up: allocations, kernel selection
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(reps):
        for name, run in ways.items():
            times[name].append(seconds_per_pass(run, count))
    return times
