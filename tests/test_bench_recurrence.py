"""`tools.bench.recurrence_speed`: both ways are timed over the same work in every rep."""

from __future__ import annotations

import torch

from tools.bench.recurrence_speed import measure, passes


def test_measure_times_both_ways_in_every_rep() -> None:
    times = measure("lstm", batch=3, steps=5, reps=2, count=1)
    assert set(times) == {"packed module", "recur"}
    assert all(len(seconds) == 2 and min(seconds) > 0 for seconds in times.values())


def test_both_ways_compute_the_same_input_gradient() -> None:
    """The benchmark compares equal work: the gradients the two passes leave agree."""
    ways, inputs = passes("gru", batch=4, steps=6)
    gradients = []
    for run in ways.values():
        inputs.grad = None
        run()
        gradients.append(inputs.grad.clone())
    torch.testing.assert_close(gradients[0], gradients[1], rtol=1e-4, atol=1e-5)
