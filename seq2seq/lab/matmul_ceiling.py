"""The float32 matmul ceiling: the best GFLOP/s this machine reaches at the shapes the models
multiply, the denominator of MFU (model FLOP utilisation) in `make bench`.

A `(m, k) @ (k, n)` product is m·n dot products of length k: 2·m·k·n FLOPs (a multiply-add
counts 2), the same convention as `seq2seq.flops`.
"""

from __future__ import annotations

import statistics
import time

import torch

MATMUL_SHAPES = ((4096, 256, 1024), (4096, 256, 4000), (2048, 512, 512))  # (m, k, n)


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued kernels (CUDA runs asynchronously), so a timing is real."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_gflops(m: int, k: int, n: int, reps: int, device: torch.device) -> float:
    """Median GFLOP/s of a float32 `(m, k) @ (k, n)` product (2·m·k·n FLOPs)."""
    left = torch.randn(m, k, device=device)
    right = torch.randn(k, n, device=device)
    out = torch.empty(m, n, device=device)
    torch.mm(left, right, out=out)  # warm-up: allocations, kernel selection
    synchronize(device)
    seconds = []
    for _ in range(reps):
        started = time.perf_counter()
        torch.mm(left, right, out=out)
        synchronize(device)
        seconds.append(time.perf_counter() - started)
    return 2 * m * k * n / statistics.median(seconds) / 1e9


def ceiling_section(reps: int, device: torch.device) -> tuple[list[str], float]:
    """The matmul table and the best of its medians (the MFU denominator)."""
    lines = ["| (m×k)·(k×n) | GFLOP/s (median) |", "|---|---|"]
    rates = []
    for m, k, n in MATMUL_SHAPES:
        rates.append(matmul_gflops(m, k, n, reps, device))
        lines.append(f"| ({m}×{k})·({k}×{n}) | {rates[-1]:.1f} |")
    return lines, max(rates)
