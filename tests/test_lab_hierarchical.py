"""The lab's hierarchical-attention experiment: the sentence accuracy against weights whose
answer is known, and its quick run on toy documents."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
from helpers import is_png, lab_quick_fixture

from seq2seq.lab.catalogue import experiments
from seq2seq.lab.chinese.hierarchical import CHINESE
from seq2seq.lab.hierarchical import (
    ATTENTIONS,
    EXPERIMENT,
    HIERARCHICAL,
    accuracy,
    chance,
    longest_sentence_choices,
    position_choices,
    sentence_choices,
    target_rows,
)
from seq2seq.special_tokens import SEP_ID

quick = lab_quick_fixture(EXPERIMENT)

# A document of 3 sentences on each side (ids > SEP_ID are ordinary pieces):
# source 7 8 <sep> | 9 <sep> | 10 11 12 (+ EOS), positions 0-1, 2 (sep), 3, 4 (sep), 5-7, 8 EOS
SRC = [7, 8, SEP_ID, 9, SEP_ID, 10, 11, 12]
SRC_SENTENCES = [0, 0, 0, 1, 1, 2, 2, 2, 2]  # document_segments, EOS in the last
# target 20 <sep> | 21 22 <sep> | 23 (+ EOS): pieces of sentences 0, 1, 1, 2 at rows 0, 2, 3, 5
TGT = [20, SEP_ID, 21, 22, SEP_ID, 23]


def block_weights(sentence_of_row: dict[int, int]) -> torch.Tensor:
    """(len(TGT) + 1, len(SRC) + 1) weights: row t spread evenly over the source positions
    of sentence `sentence_of_row[t]` (rows not listed: uniform over the source)."""
    weights = torch.full((len(TGT) + 1, len(SRC) + 1), 1.0 / (len(SRC) + 1))
    for row, sentence in sentence_of_row.items():
        cells = [j for j, k in enumerate(SRC_SENTENCES) if k == sentence]
        weights[row] = 0.0
        weights[row, cells] = 1.0 / len(cells)
    return weights


def test_target_rows_skip_the_separators_and_the_end():
    assert target_rows(TGT) == [(0, 0), (2, 1), (3, 1), (5, 2)]


def test_a_block_diagonal_picks_every_sentence_right():
    choices = sentence_choices(block_weights({0: 0, 2: 1, 3: 1, 5: 2}), SRC, TGT)
    assert choices.sentences == 3 and choices.right == [0, 1, 1, 2]
    assert choices.picked == [0, 1, 1, 2] and accuracy([choices]) == 1.0


def test_swapped_blocks_pick_every_sentence_wrong():
    swapped = block_weights({0: 2, 2: 0, 3: 0, 5: 1})
    assert accuracy([sentence_choices(swapped, SRC, TGT)]) == 0.0


def test_the_sentence_weight_is_the_sum_not_the_largest_word():
    # row 0: the single largest word weight is in sentence 1 (0.4 on position 3), but
    # sentence 0 holds 0.45 in all (0.15 on each of its three positions)
    weights = block_weights({2: 1, 3: 1, 5: 2})
    weights[0] = torch.tensor([0.15, 0.15, 0.15, 0.4, 0.0, 0.05, 0.05, 0.05, 0.0])
    assert sentence_choices(weights, SRC, TGT).picked == [0, 1, 1, 2]


def test_documents_of_one_sentence_or_unequal_counts_are_not_counted():
    one = [7, 8, 9]
    assert sentence_choices(torch.full((3, 4), 0.25), one, [20, 21]) is None
    assert sentence_choices(torch.full((3, 9), 1 / 9), SRC, [20, 21]) is None
    assert math.isnan(accuracy([None]))
    with pytest.raises(ValueError, match="weights must be"):
        sentence_choices(torch.zeros(3, 3), SRC, TGT)


def test_the_baselines_and_chance():
    # longest source sentence: sentence 2 (10 11 12 and EOS: 4 positions)
    assert longest_sentence_choices(SRC, TGT).picked == [2, 2, 2, 2]
    # relative position: rows 0, 2, 3, 5 of 6 -> source positions 0, 3, 4, 7 of 8
    assert position_choices(SRC, TGT).picked == [0, 1, 1, 2]
    diagonal = sentence_choices(block_weights({0: 0, 2: 1, 3: 1, 5: 2}), SRC, TGT)
    assert chance([diagonal, None]) == pytest.approx(1 / 3)


def test_the_quick_run_compares_both_attentions(quick):
    arms = len(ATTENTIONS)
    assert [row["attention"] for row in quick.table[:arms]] == list(ATTENTIONS)
    assert {row["source length"] for row in quick.table[:arms]} == {"all"}
    assert len(quick.table) % arms == 0
    for row in quick.table:
        assert 0.0 <= row["sentence accuracy"] <= 1.0 and 0.0 < row["chance"] <= 1.0
        assert 0.0 <= row["band low"] <= row["bleu"] + 1e-6 <= row["band high"] + 2e-6
    for attention in ATTENTIONS:
        assert 0.0 <= quick.values[f"sentence_accuracy_{attention}"] <= 1.0
    assert quick.agrees in (True, False, None)
    assert quick.values["holds_per_seed"] and len(quick.values["sentence_level"]) == 1
    assert len(quick.values["holds_against_scaled_dot_per_seed"]) == 1


def test_the_quick_run_counts_more_flops_for_the_hierarchical_step(quick):
    cost = {(row["attention"], row["sentences"]): row for row in quick.values["cost"]}
    for (attention, sentences), row in cost.items():
        assert row["step ms"] > 0.0
        if attention == "hierarchical":
            for flat in ("general", "scaled_dot"):
                assert row["forward GFLOP"] > cost[flat, sentences]["forward GFLOP"]
                assert row["attention GFLOP"] > cost[flat, sentences]["attention GFLOP"]
    assert quick.values["cost_ratios"]["flops"] > 1.0


def test_the_figures_are_pngs(quick):
    names = [figure.name for figure in quick.figures]
    assert names == ["quality_by_length.png", "sentence_accuracy.png", "cost.png"]
    assert all(is_png(figure) for figure in quick.figures)


def test_the_catalogue_lists_it():
    assert experiments()["hierarchical"] == replace(EXPERIMENT, zh=CHINESE)  # its Chinese page added


def test_the_chinese_summary_quotes_the_quick_run_s_numbers(quick):
    values = quick.values
    text = CHINESE.summary(quick, True)
    assert text.startswith(f"在玩具文档上（每组 {values['seeds']} 个种子）")
    assert f"扁平 general 注意力的文档 BLEU 是 {values['test_bleu_general']:.1f}" in text
    assert f"层次注意力是 {values['test_bleu_hierarchical']:.1f}" in text
    assert f"p = {max(values['p_hierarchical_vs_flat']):.3f}" in text
    general, hierarchical = (values[f"sentence_accuracy_{a}"] for a in ("general", "hierarchical"))
    assert f"扁平 {general:.2f}，层次 {hierarchical:.2f}" in text
    assert f"随机猜测 {values['chance']:.2f}" in text
    assert f"在 K = {values['cost_ratios']['sentences']} 时" in text
    assert f"general 的 {values['cost_ratios']['flops']:.2f} 倍" in text
    assert f"上限 {values['ceiling_gflops']:.0f} GFLOP/s" in text
    verdict = {True: "与论断一致", False: "与论断相反", None: "不能判定论断"}[quick.agrees]
    assert verdict in text
    # The longest source-length bucket, as the English summary takes it: the last
    # hierarchical row of the table, its gap against flat general.
    longest = [row for row in quick.table if row["attention"] == HIERARCHICAL][-1]
    assert longest["source length"] != "all"
    bucket = f"在最长的一档源文（{longest['source length']} 个字符）上，"
    assert f"{bucket}层次注意力与扁平 general 注意力的 BLEU 之差为 {longest['gap vs flat']:+.1f}。" in text
    table = [dict(row) for row in quick.table]
    table[quick.table.index(longest)]["gap vs flat"] = -12.34
    assert "BLEU 之差为 -12.3。" in CHINESE.summary(replace(quick, table=table), True)
