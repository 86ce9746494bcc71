"""`tools.bench.search_tuning`: the valid split translated per beam and length penalty."""

from __future__ import annotations

import pytest
from test_train import _train

from tools.bench.search_tuning import tune


def test_greedy_valid_bleu_is_the_trainers_and_the_grid_is_in_order(tmp_path):
    results, _ = _train(tmp_path, "run", ["trainer.max_steps=40", "trainer.valid_every=40",
                                          "trainer.test_search.beam_size=1"])  # fmt: skip
    found = tune(tmp_path / "run" / "checkpoints" / "best.pt", tmp_path / "data", [1, 2], [0.0, 2.0])
    assert [(row.beam_size, row.length_penalty) for row in found] == [
        (1, 0.0), (1, 2.0), (2, 0.0), (2, 2.0)
    ]
    # greedy search ignores α, and is what the trainer validated best.pt with
    assert found[0].bleu == found[1].bleu == pytest.approx(results["valid_best_bleu"], abs=1e-6)
    assert all(row.length_ratio > 0 for row in found)
