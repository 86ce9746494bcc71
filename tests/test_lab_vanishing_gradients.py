"""The lab's vanishing-gradient experiment: the gradients at initialisation are deterministic
(fixed seeds), so its quick run must show the RNN's fading fastest; training only has to run."""

from __future__ import annotations

import itertools

import torch
from helpers import is_png, lab_quick_fixture

from seq2seq.lab.chinese.vanishing_gradients import CHINESE
from seq2seq.lab.vanishing_gradients import (
    CELLS,
    DEFAULT,
    EXPERIMENT,
    FORGET_BIAS,
    HIDDEN,
    LEARNED,
    QUICK,
    VOCAB,
    RecallModel,
    gradient_norms,
    longest_learned,
    recall_batch,
    verdict,
)

quick = lab_quick_fixture(EXPERIMENT)


def test_at_init_the_rnn_gradient_fades_faster_than_the_lstm_one(quick):
    values = quick.values
    assert values["rnn_init_grad"][-1] < values["lstm_init_grad"][-1]
    assert values["rnn_init_decay"] < values["lstm_init_decay"]
    for cell in CELLS:  # K steps back is further than 2 steps back for every cell
        assert values[f"{cell}_init_grad"][-1] < values[f"{cell}_init_grad"][0]


def test_the_table_has_a_row_per_cell_and_distance(quick):
    assert [(row["cell"], row["K"]) for row in quick.table] == list(
        itertools.product(CELLS, QUICK.distances)
    )
    for row in quick.table:
        assert 0.0 <= row["accuracy"] <= 1.0 and row["grad init"] > 0
    assert quick.values["forget_bias"] == FORGET_BIAS == 1.0
    assert quick.agrees in (True, False, None) and "forget bias 1.0" in quick.summary


def test_both_figures_are_written_as_png(quick):
    assert [path.name for path in quick.figures] == [
        "gradient_vs_distance.png", "accuracy_vs_distance.png"
    ]  # fmt: skip
    for path in quick.figures:
        assert is_png(path)


def test_a_recall_sequence_holds_k_plus_one_symbols_and_the_model_reads_the_first():
    symbols = recall_batch(5, 7, torch.Generator().manual_seed(0))
    assert symbols.shape == (7, 6) and 0 <= int(symbols.min()) and int(symbols.max()) < VOCAB
    model = RecallModel("lstm")
    assert model(symbols).shape == (7, VOCAB)
    forget = model.encoder.rnn.bias_ih_l0[HIDDEN : 2 * HIDDEN]  # the forget gate's chunk
    assert torch.all(forget == FORGET_BIAS)


def test_the_gradient_of_the_first_symbol_is_exactly_zero_when_the_readout_ignores_it():
    torch.manual_seed(0)
    model = RecallModel("rnn")
    with torch.no_grad():  # a zero recurrent matrix: the final state sees the last symbol only
        model.encoder.rnn.weight_hh_l0.zero_()
    first, last = gradient_norms(model, recall_batch(3, 5, torch.Generator().manual_seed(1)))
    assert first == 0.0 and last > 0.0


def rows_of(accuracies: dict[str, list[float]], distances=(2, 5, 10)) -> list[dict]:
    pairs = {cell: zip(distances, accuracies[cell], strict=True) for cell in CELLS}
    return [{"cell": cell, "K": k, "accuracy": a} for cell in CELLS for k, a in pairs[cell]]


def test_the_longest_distance_learned_stops_at_the_first_failure():
    rows = rows_of({"rnn": [0.95, 0.5, 0.99], "gru": [1.0, 1.0, 0.2], "lstm": [0.1, 1.0, 1.0]})
    assert longest_learned(rows) == {"rnn": 2, "gru": 5, "lstm": 0}


def test_the_verdict_needs_both_a_faster_fading_gradient_and_a_shorter_reach():
    fading = {"rnn": 1e-9, "gru": 1e-5, "lstm": 1e-3}
    assert verdict(fading, {"rnn": 5, "gru": 10, "lstm": 20}) is True
    assert verdict(fading, {"rnn": 5, "gru": 5, "lstm": 20}) is None
    assert verdict(fading, {"rnn": 10, "gru": 5, "lstm": 20}) is False
    assert verdict({**fading, "gru": 1e-10}, {"rnn": 5, "gru": 10, "lstm": 20}) is False


def test_the_chinese_summary_quotes_the_quick_run_s_numbers(quick):
    values = quick.values
    text = CHINESE.summary(quick, True)
    low, high = QUICK.distances[0], QUICK.distances[-1]
    assert f"K = {high} 处的 ‖∂L/∂x_{{t−K}}‖ 分别只有它在 K = {low} 处的值的" in text
    assert f"LSTM 的遗忘门偏置为 {FORGET_BIAS}" in text
    for cell in CELLS:
        assert f"{values[f'{cell}_init_decay']:.1e} 倍（{cell.upper()}）" in text
        assert f"{values[f'{cell}_accuracy'][-1]:.0%}（{cell.upper()}）" in text
    learned = "、".join(f"{values[f'{cell}_longest_learned']}（{cell.upper()}）" for cell in CELLS)
    assert "最长距离" in text and f"是 K = {learned}，" in text
    assert f"次 Adam 更新之后（准确率取 {QUICK.train_seeds} 个种子的均值）" in text
    assert f"所有更短的距离上准确率都达到 {LEARNED:.0%}；0 表示一个也没学会" in text
    assert f"，随机水平是 {1 / VOCAB:.1%}，其中 RNN 的" in text
    full = CHINESE.summary(quick, False)  # the seeds follow the run's size, as the English
    assert f"准确率取 {DEFAULT.train_seeds} 个种子的均值" in full
    fastest = "RNN 的梯度衰减得最快" in text
    shorter = "RNN 能学会的距离比两种门控单元都短" in text
    assert (fastest and shorter) == (quick.agrees is True)
    if quick.agrees is None:
        assert fastest and "并不比两种门控单元都短" in text
