"""An update's own matrix products, timed alone: the highest MFU that update could reach.

MFU divides an update's analytic FLOPs (`seq2seq.flops`) by the matmul ceiling, the best
rate of three large products (`seq2seq.lab.matmul_ceiling`). The products a model really runs
are other shapes: rows of one batch, the decoder's one step at a time, transposed operands
in the backward pass. This module records every matrix product of one update, forward and
backward (`aten.mm`, `aten.addmm`, `aten.bmm`, `aten.baddbmm`, with the sizes and strides of
their operands), times each again alone on operands of the same layout, and reports

    alone rate = Σ product FLOPs / Σ product seconds alone
    bound MFU  = analytic update FLOPs / Σ product seconds alone / ceiling

and the same bound with the products' seconds inside the update instead (each call timed
where it ran): products can run faster or slower there than alone (the cache holds other
data, or the operands a previous kernel just wrote), so the two bounds bracket the figure.

An update also normalises, applies softmax, computes its loss and steps its optimiser; were
all of that free and its products as fast as alone, it would reach the bound MFU, and no
change outside the products lifts it higher. To go above it the products themselves must
grow (more rows per batch, wider layers) or the work move into fewer, larger products.

A product of an (m × k) and a (k × n) matrix is 2·m·k·n FLOPs (`ceiling`'s convention); a
batched product multiplies that by the batch; addmm's and baddbmm's additions are left out.
"""

from __future__ import annotations

import math
import statistics
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from seq2seq.data.batching import collate
from seq2seq.flops import training_flops
from seq2seq.training.trainer import Trainer

# The operator, and which positional arguments are its two matrices.
PRODUCT_OPERANDS = {"mm": (0, 1), "addmm": (1, 2), "bmm": (0, 1), "baddbmm": (1, 2)}


@dataclass(frozen=True)
class Product:
    """One matrix product as the update ran it: the operator, its operands' sizes and strides."""

    op: str
    sizes: tuple[tuple[int, ...], ...]  # every tensor argument, in order
    strides: tuple[tuple[int, ...], ...]
    dtype: torch.dtype = torch.float32

    @property
    def flops(self) -> int:
        """2·m·k·n, times the batch of a batched product."""
        left, right = (self.sizes[i] for i in PRODUCT_OPERANDS[self.op])
        batch = left[0] if len(left) == 3 else 1
        return 2 * batch * left[-2] * left[-1] * right[-1]


class ProductRecorder(TorchDispatchMode):
    """Records each matrix product dispatched under it and the seconds the call took."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[Product, float]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name not in PRODUCT_OPERANDS:
            return func(*args, **(kwargs or {}))
        tensors = [arg for arg in args if isinstance(arg, torch.Tensor)]
        started = time.perf_counter()
        result = func(*args, **(kwargs or {}))
        seconds = time.perf_counter() - started
        sizes = tuple(tuple(t.shape) for t in tensors)
        strides = tuple(tuple(t.stride()) for t in tensors)
        self.calls.append((Product(name, sizes, strides, tensors[0].dtype), seconds))
        return result


def operands(product: Product, generator: torch.Generator) -> list[torch.Tensor]:
    """Fresh random tensors with the product's sizes, strides and dtype (CPU)."""
    tensors = []
    for size, stride in zip(product.sizes, product.strides, strict=True):
        storage = 1 + sum((s - 1) * st for s, st in zip(size, stride, strict=True) if s > 0)
        flat = torch.randn(storage, generator=generator).to(product.dtype)
        tensors.append(torch.as_strided(flat, size, stride))
    return tensors


def seconds_alone(product: Product, reps: int, generator: torch.Generator) -> float:
    """The median seconds of the product alone, its operands warm in the cache."""
    call = getattr(torch, product.op)
    args = operands(product, generator)
    call(*args)  # warm-up: allocation, kernel choice
    seconds = []
    for _ in range(reps):
        started = time.perf_counter()
        call(*args)
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def one_update(trainer: Trainer, indices: list[int]) -> None:
    batch = collate([trainer.data.train.examples[i] for i in indices], indices)
    trainer.train_step(batch.to(trainer.device))
    trainer.update()


def update_seconds(trainer: Trainer, indices: list[int], reps: int) -> float:
    """The median seconds of an update on this batch (nothing recorded)."""
    one_update(trainer, indices)
    seconds = []
    for _ in range(reps):
        started = time.perf_counter()
        one_update(trainer, indices)
        seconds.append(time.perf_counter() - started)
    return statistics.median(seconds)


def analytic_flops(trainer: Trainer, indices: list[int]) -> int:
    """The update's FLOPs as MFU counts them (`seq2seq.flops.training_flops`)."""
    data = trainer.data
    batch = collate([data.train.examples[i] for i in indices], indices)
    shape = (len(batch), batch.src.size(1), batch.tgt_in.size(1))  # (batch, src, tgt)
    vocab = (data.src_tokenizer.vocab_size, data.tgt_tokenizer.vocab_size)
    return training_flops(trainer.settings.run_config, *shape, *vocab)


def measure_bound(trainer: Trainer, indices: list[int], reps: int, seed: int = 0) -> dict[str, Any]:
    """One CPU update on the batch `indices`: its time, its products in it and alone, the bound.

    Returns counts and seconds (see the module docstring for the two rates)."""
    if trainer.device.type != "cpu":
        raise ValueError("the matmul bound times products on the CPU; run it with device cpu")
    seconds = update_seconds(trainer, indices, reps)
    recorder = ProductRecorder()
    with recorder:
        one_update(trainer, indices)
    generator = torch.Generator().manual_seed(seed)
    counts = Counter(product for product, _ in recorder.calls)
    alone = sum(n * seconds_alone(p, reps, generator) for p, n in counts.items())
    return {
        "update_s": seconds,
        "products": len(recorder.calls),
        "distinct": len(counts),
        "product_gflop": sum(p.flops for p, _ in recorder.calls) / 1e9,
        "analytic_gflop": analytic_flops(trainer, indices) / 1e9,
        "products_in_update_s": math.fsum(s for _, s in recorder.calls),
        "products_alone_s": alone,
    }


def bound_row(preset: str, bound: dict[str, Any], ceiling: float) -> str:
    """A table row: the update, its products in it and alone, MFU and its bound."""
    gflop, analytic = bound["product_gflop"], bound["analytic_gflop"]
    cells = [
        preset,
        f"{bound['products']:,} ({bound['distinct']} shapes)",
        f"{gflop:.2f} / {analytic:.2f}",
        f"{bound['update_s']:.3f}",
        f"{100 * analytic / bound['update_s'] / ceiling:.1f}%",
        f"{100 * bound['products_in_update_s'] / bound['update_s']:.0f}%",
        f"{gflop / bound['products_in_update_s']:.0f}",
        f"{gflop / bound['products_alone_s']:.0f}",
        f"{100 * analytic / bound['products_alone_s'] / ceiling:.1f}%",
        f"{100 * analytic / bound['products_in_update_s'] / ceiling:.1f}%",
    ]
    return "| " + " | ".join(cells) + " |"


BOUND_HEAD = [
    "| preset | products per update | product / analytic GFLOP | update s | MFU "
    "| products' share of the update | products in the update GFLOP/s "
    "| products alone GFLOP/s | bound MFU | bound MFU at the in-update rate |",
    "|---|---|---|---|---|---|---|---|---|---|",
]
