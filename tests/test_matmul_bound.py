"""`make bench --matmul-bound` (tools.bench.matmul_bound): every matrix product of an
update is recorded with its layout, counted in FLOPs by hand, replayed alone on operands of
the same layout, and the table's rates follow from the figures."""

from __future__ import annotations

import pytest
import torch
from helpers import TINY_TOY, compose_config

from seq2seq.runs.assemble import assemble_trainer
from tools.bench.matmul_bound import (
    Product,
    ProductRecorder,
    bound_row,
    measure_bound,
    operands,
    seconds_alone,
)


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def test_flops_of_each_product_by_hand():
    mm = Product("mm", ((3, 4), (4, 5)), ((4, 1), (5, 1)))
    assert mm.flops == 2 * 3 * 4 * 5
    addmm = Product("addmm", ((5,), (3, 4), (4, 5)), ((1,), (4, 1), (5, 1)))
    assert addmm.flops == 2 * 3 * 4 * 5  # the bias is not counted
    bmm = Product("bmm", ((7, 3, 4), (7, 4, 5)), ((12, 4, 1), (20, 5, 1)))
    assert bmm.flops == 7 * 2 * 3 * 4 * 5
    baddbmm = Product("baddbmm", ((7, 3, 5), (7, 3, 4), (7, 4, 5)), ((15, 5, 1),) * 3)
    assert baddbmm.flops == 7 * 2 * 3 * 4 * 5


def test_a_linear_layer_forward_and_backward_records_its_three_products():
    """y = x Wᵀ + b: one addmm forward; backward, dL/dx = g W and dL/dW = gᵀ x, two mm."""
    layer = torch.nn.Linear(6, 9)
    x = torch.randn(4, 6, requires_grad=True)
    recorder = ProductRecorder()
    with recorder:
        layer(x).sum().backward()
    ops = sorted(product.op for product, _ in recorder.calls)
    assert ops == ["addmm", "mm", "mm"]
    assert sum(product.flops for product, _ in recorder.calls) == 3 * 2 * 4 * 6 * 9
    assert all(seconds >= 0 for _, seconds in recorder.calls)
    forward = next(p for p, _ in recorder.calls if p.op == "addmm")
    assert forward.sizes == ((9,), (4, 6), (6, 9))
    assert forward.strides[2] == (1, 6)  # Wᵀ: a transposed view of the (9, 6) weight
    assert forward.dtype == torch.float32


def test_other_operators_are_not_recorded():
    recorder = ProductRecorder()
    with recorder:
        torch.relu(torch.randn(3, 3)).softmax(-1)
    assert recorder.calls == []


@pytest.mark.parametrize(
    "product",
    [
        Product("mm", ((5, 3), (3, 4)), ((1, 5), (4, 1))),  # the left operand transposed
        Product("addmm", ((4,), (5, 3), (3, 4)), ((0,), (3, 1), (1, 3))),  # bias broadcast
        Product("bmm", ((2, 5, 3), (2, 3, 4)), ((15, 1, 5), (12, 4, 1))),
        Product("mm", ((5, 3), (3, 4)), ((3, 1), (4, 1)), torch.float64),
    ],
)
def test_replayed_operands_have_the_recorded_layout_and_compute_the_product(product):
    generator = torch.Generator().manual_seed(0)
    tensors = operands(product, generator)
    assert tuple(tuple(t.shape) for t in tensors) == product.sizes
    assert tuple(t.stride() for t in tensors) == product.strides
    assert all(t.dtype == product.dtype for t in tensors)
    expected = getattr(torch, product.op)(*(t.contiguous() for t in tensors))
    torch.testing.assert_close(getattr(torch, product.op)(*tensors), expected)
    assert seconds_alone(product, reps=3, generator=generator) > 0


def test_the_row_gives_mfu_and_its_bound_from_the_measured_seconds():
    bound = {"update_s": 0.5, "products": 100, "distinct": 13, "product_gflop": 20.0,
             "analytic_gflop": 25.0, "products_in_update_s": 0.4, "products_alone_s": 0.25}  # fmt: skip
    row = cells(bound_row("default_cpu", bound, ceiling=200.0))
    assert row[:4] == ["default_cpu", "100 (13 shapes)", "20.00 / 25.00", "0.500"]
    assert row[4] == "25.0%"  # 25 GFLOP / 0.5 s / 200 GFLOP/s
    assert row[5] == "80%"  # 0.4 of 0.5 s
    assert row[6:8] == ["50", "80"]  # 20 GFLOP in 0.4 s; in 0.25 s
    assert row[8] == "50.0%"  # 25 GFLOP / 0.25 s / 200 GFLOP/s
    assert row[9] == "31.2%"  # 25 GFLOP / 0.4 s / 200 GFLOP/s


def test_a_real_update_records_products_whose_flops_match_the_analytic_count(tmp_path):
    """On a toy GRU model: the recorded products carry about the FLOPs `seq2seq.flops`
    counts for the update (its few element-wise terms aside), and every figure is positive."""
    cfg = compose_config(TINY_TOY + [f"data.root={tmp_path / 'data'}", "logging.tensorboard=false"])
    trainer = assemble_trainer(cfg, tmp_path / "run", observe=False)
    indices = trainer.sampler.batches(0)[0]
    bound = measure_bound(trainer, indices, reps=2)
    assert bound["products"] >= bound["distinct"] > 0
    assert bound["product_gflop"] == pytest.approx(bound["analytic_gflop"], rel=0.25)
    assert bound["update_s"] > 0 and bound["products_alone_s"] > 0
    assert 0 < bound["products_in_update_s"]
