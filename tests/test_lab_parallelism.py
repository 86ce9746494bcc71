"""The lab's parallelism experiment: the sequential-operation counts follow from each config
exactly; the times only have to be measured (they depend on the machine)."""

from __future__ import annotations

import math

import torch
from helpers import is_png, lab_quick_fixture

from seq2seq.lab.chinese.parallelism import CHINESE
from seq2seq.lab.parallelism import (
    EXPERIMENT,
    FAMILIES,
    FIRST_ORDINARY,
    QUICK,
    decode_fixed_length,
    family_config,
    family_model,
    random_batch,
    sequential_operations,
)
from seq2seq.lab.training import compose_config

quick = lab_quick_fixture(EXPERIMENT)


def rows_of(finding, family: str) -> list[dict]:
    return [row for row in finding.table if row["family"] == family]


def test_each_family_has_a_row_per_length_with_positive_times(quick):
    for family in FAMILIES:
        rows = rows_of(quick, family)
        assert [row["n"] for row in rows] == list(QUICK.lengths)
        assert all(row["train step ms"] > 0 and row["decode ms per sentence"] > 0 for row in rows)
        assert quick.values[f"{family}_train_growth"] > 0
    assert quick.values["ceiling_gflops"] > 0
    assert quick.agrees == (
        quick.values["gru_train_growth"]
        > max(quick.values["cnn_train_growth"], quick.values["transformer_train_growth"])
    )


def test_the_presets_stay_within_ten_percent_of_the_gru_parameters(quick):
    reference = quick.values["gru_parameters"]
    for family in FAMILIES:
        assert abs(quick.values[f"{family}_parameters"] / reference - 1) <= 0.10


def test_only_the_rnn_needs_one_sequential_step_per_position(quick):
    for row in quick.table:
        n = row["n"]
        assert row["sequential per decoded sentence"] >= n  # generation is sequential in all
        if row["family"] == "gru":
            assert row["sequential per layer"] == n and row["longest path"] == n - 1
            assert row["sequential per training step"] == 2 * n  # 1 encoder + 1 decoder layer
        else:
            assert row["sequential per layer"] == 1
    for row in rows_of(quick, "transformer"):
        assert row["longest path"] == 1 and row["sequential per training step"] == 4
    for row in rows_of(quick, "cnn"):  # kernel 3: one position further each way per layer
        assert row["longest path"] == row["n"] - 1 and row["sequential per training step"] == 5


def test_the_counts_are_read_from_the_config():
    cnn = compose_config(["+experiment=compare_cnn", "encoder.kernel_size=5"])
    assert sequential_operations(cnn, 32)["longest path"] == math.ceil(31 / 2)
    gru = compose_config(["+experiment=compare_gru", "encoder.num_layers=2",
                          "decoder.num_layers=3"])  # fmt: skip
    counted = sequential_operations(gru, 10)
    assert counted["sequential per training step"] == 10 * (2 + 3)
    assert counted["sequential per decoded sentence"] == 10 * 3


def test_fixed_length_decoding_emits_exactly_n_ordinary_pieces():
    cfg = family_config("transformer")
    model = family_model(cfg, 0, torch.device("cpu")).eval()
    batch = random_batch(cfg, 3, 5, torch.Generator().manual_seed(0), torch.device("cpu"))
    assert batch.src.shape == batch.tgt_in.shape == batch.tgt_out.shape == (3, 5)
    tokens = decode_fixed_length(model, batch, 7)
    assert tokens.shape == (3, 7) and int(tokens.min()) >= FIRST_ORDINARY


def test_both_figures_are_written_as_png(quick):
    assert [path.name for path in quick.figures] == [
        "training_step_vs_length.png", "decoding_vs_length.png"
    ]  # fmt: skip
    for path in quick.figures:
        assert is_png(path)


def test_the_chinese_summary_quotes_the_quick_run_s_numbers(quick):
    values = quick.values
    text = CHINESE.summary(quick, True)
    for family in FAMILIES:
        assert f"{values[f'{family}_train_growth']:.1f} 倍（{family}）" in text
        assert f"{values[f'{family}_decode_growth']:.1f} 倍（{family}）" in text
        assert f"{values[f'{family}_train_ms'][-1]:.0f} ms（{family}）" in text
    low, high = QUICK.lengths[0], QUICK.lengths[-1]
    assert f"从 n = {low} 到 n = {high} 个词元（句长是原来的 {high // low} 倍）" in text
    longest = "、".join(
        f"{values[f'{family}_train_ms'][-1]:.0f} ms（{family}）" for family in FAMILIES
    )
    assert f"在 n = {high} 时达到 {longest}；" in text
    assert f"矩阵乘法上限是 {values['ceiling_gflops']:.0f} GFLOP/s" in text
    assert ("与论断的预测一致" in text) == quick.agrees
    assert ("并没有增长得最快，与论断相反" in text) == (not quick.agrees)
