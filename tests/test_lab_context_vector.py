"""The lab's context-vector experiment: its quick run (the toy reverse task's sentences and a
generated corpus's pseudo-documents), its length buckets and its verdict."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from helpers import is_png, lab_quick_fixture

from seq2seq.lab.chinese.context_vector import CHINESE, NAMES
from seq2seq.lab.context_vector import (
    ATTENTIONS,
    DOC_ARMS,
    EXPERIMENT,
    MECHANISMS,
    ONE_VECTOR,
    QUICK_BUCKETS,
    QUICK_SPLITS,
    GreedyOutput,
    arm_scores,
    document_length,
    gain_over,
    growth_verdict,
    length_buckets,
    sentence_table_rows,
    source_length,
    write_quick_corpus,
)
from seq2seq.metrics.sacrebleu_scores import corpus_scores

quick = lab_quick_fixture(EXPERIMENT)


def rows_of(finding, study: str) -> list[dict]:
    return [row for row in finding.table if row["study"] == study]


def test_every_mechanism_is_scored_in_every_length_bucket(quick):
    buckets = quick.values["buckets"]
    assert 2 <= len(buckets) <= QUICK_BUCKETS
    sentences = rows_of(quick, "sentences")
    assert [(row["arm"], row["source length"]) for row in sentences] == [
        (mechanism, bucket) for mechanism in MECHANISMS for bucket in buckets
    ]
    for row in quick.table:
        assert 0.0 <= row["band low"] <= row["bleu"] + 1e-6
        assert row["bleu"] <= row["band high"] + 1e-6 <= 100.0 + 1e-6
        assert row["seed min"] == row["seed max"] == pytest.approx(row["bleu"])  # one seed
    # the toy test split (32 sequences) is shared out over the buckets, once each
    assert sum(row["texts"] for row in sentences if row["arm"] == "none") == 32


def test_the_plain_model_is_the_baseline_of_the_sentence_gaps(quick):
    for row in rows_of(quick, "sentences"):
        assert all(math.isnan(row[key]) for key in ("gain vs mean", "p vs pool"))
        if row["arm"] == "none":
            assert row["gain vs last"] == 0.0 and math.isnan(row["p vs last"])
        else:
            assert 0.0 <= row["p vs last"] <= 1.0
    additive = [row for row in rows_of(quick, "sentences") if row["arm"] == "additive"]
    assert quick.values["gap_longest_additive"] == additive[-1]["gain vs last"]
    assert quick.values["agrees_sentences"] in (True, False, None)


def test_every_documents_arm_is_scored_against_each_one_vector_arm(quick):
    documents = quick.values["documents"]
    buckets = documents["buckets"]
    assert 2 <= len(buckets) <= QUICK_BUCKETS
    rows = rows_of(quick, "documents")
    assert [(row["arm"], row["source length"]) for row in rows] == [
        (arm, bucket) for arm in DOC_ARMS for bucket in buckets
    ]
    # each test document once per arm; at least one joins several sentences
    assert sum(row["texts"] for row in rows if row["arm"] == "final") == documents["documents"]
    assert documents["sentences_per_document"] > 1.0
    assert documents["documents"] * documents["sentences_per_document"] == pytest.approx(
        QUICK_SPLITS["test"]
    )
    for row in rows:  # an arm against itself has no gain and no test
        for column, baseline in (("last", "final"), ("mean", "mean"), ("pool", "attention_pool")):
            if row["arm"] == baseline:
                assert row[f"gain vs {column}"] == 0.0 and math.isnan(row[f"p vs {column}"])
            else:
                assert 0.0 <= row[f"p vs {column}"] <= 1.0
    for attention in ATTENTIONS:
        mine = [row for row in rows if row["arm"] == attention]
        assert documents["gain_longest"][attention]["mean"] == mine[-1]["gain vs mean"]
        assert documents["gain_shortest"][attention]["final"] == mine[0]["gain vs last"]


def test_a_documents_gain_is_the_difference_of_the_two_arms_bleu(quick):
    rows = rows_of(quick, "documents")
    bleu = {(row["arm"], row["source length"]): row["bleu"] for row in rows}
    for row in rows:
        expected = row["bleu"] - bleu["attention_pool", row["source length"]]
        assert row["gain vs pool"] == pytest.approx(expected)


def test_the_overall_verdict_is_the_documents_study(quick):
    documents = quick.values["documents"]
    endpoints = [
        (documents["gain_shortest"][a][b], documents["gain_longest"][a][b])
        for a in ATTENTIONS
        for b in ("final", "mean", "attention_pool")
    ]
    assert quick.agrees == quick.values["agrees_documents"] == growth_verdict(endpoints)
    assert "Short sentences" in quick.summary and "Documents" in quick.summary


def test_the_figures_are_pngs(quick):
    sentences, documents = quick.figures
    assert sentences.name == "bleu_by_length.png" and is_png(sentences)
    assert documents.name == "documents_bleu_by_length.png" and is_png(documents)
    assert "bucket" in quick.summary and "fixed context vector" in quick.summary


def test_source_length_counts_characters_but_not_spaces():
    assert source_length("c a d") == 3
    assert source_length("我爱中国。") == 5


def test_document_length_leaves_out_the_separators():
    assert document_length("我爱你。<sep>你好。<sep>谢谢。") == 4 + 3 + 3
    assert document_length("Hello.<sep> Thank you.") == 6 + 9
    assert document_length("c a d") == 3  # one sentence: its source length


def test_buckets_are_whole_length_ranges_of_about_equal_size():
    lengths = [1] * 3 + [2] * 3 + [3] * 3 + [4] * 3 + [9]
    buckets = length_buckets(lengths, 4)
    assert [(b.shortest, b.longest) for b in buckets] == [(1, 1), (2, 2), (3, 3), (4, 9)]
    assert sorted(i for b in buckets for i in b.members) == list(range(len(lengths)))
    assert [b.label for b in buckets] == ["1", "2", "3", "4–9"]
    one_length = length_buckets([5] * 7, 3)
    assert len(one_length) == 1 and one_length[0].members == list(range(7))


def test_the_verdict_needs_every_gain_to_grow():
    assert growth_verdict([(1.0, 2.0), (0.0, 0.5)]) is True
    assert growth_verdict([(1.0, 1.0), (3.0, -1.0)]) is False  # equal is no growth
    assert growth_verdict([(1.0, 2.0), (3.0, -1.0)]) is None


def test_sentence_rows_keep_their_numbers_under_the_tables_columns():
    row = {"mechanism": "additive", "source length": "3–7", "sentences": 241, "bleu": 12.8,
           "seed min": 11.8, "seed max": 13.8, "band low": 8.96, "band high": 16.6,
           "gap vs none": 3.62, "p vs none": 0.047}  # fmt: skip
    (converted,) = sentence_table_rows([row])
    assert converted["study"] == "sentences" and converted["arm"] == "additive"
    assert (converted["texts"], converted["gain vs last"], converted["p vs last"]) == (
        241,
        3.62,
        0.047,
    )
    assert math.isnan(converted["gain vs mean"]) and math.isnan(converted["p vs pool"])


def test_the_quick_corpus_is_the_same_for_a_seed(tmp_path):
    first = write_quick_corpus(tmp_path / "a", seed=7)
    again = write_quick_corpus(tmp_path / "b", seed=7)
    other = write_quick_corpus(tmp_path / "c", seed=8)
    for name in ("train.zh", "test.en"):
        assert (first / name).read_text("utf-8") == (again / name).read_text("utf-8")
        assert (first / name).read_text("utf-8") != (other / name).read_text("utf-8")
    assert len((first / "test.zh").read_text("utf-8").splitlines()) == QUICK_SPLITS["test"]


def test_arm_scores_score_documents_without_their_separators():
    references = ["Cat sees dog.<sep> Big fish.", "Red bird runs.<sep> Small cat eats fish."]
    outputs = {
        "final": GreedyOutput(["", ""], ["Dog sees cat.<sep> Big fish.", "Red bird eats."],
                              references, "en"),
        "additive": GreedyOutput(["", ""], ["Cat sees dog. Big fish.", references[1]],
                                 references, "en"),
    }  # fmt: skip
    scores = arm_scores(outputs, [0, 1], "final", ("final", "additive"))
    assert scores["additive"].bleu == pytest.approx(100.0)  # the words are the reference's
    plain = ["Dog sees cat. Big fish.", "Red bird eats."]
    expected = corpus_scores(plain, [r.replace("<sep>", "") for r in references], "en")["bleu"]
    assert scores["final"].bleu == pytest.approx(expected) and scores["final"].p_value is None
    gain, p_value = gain_over("additive", "final", [{"final": scores}])
    assert gain == pytest.approx(100.0 - expected) and 0.0 <= p_value <= 1.0


def test_the_chinese_summary_quotes_the_quick_run_s_numbers(quick):
    values, documents = quick.values, quick.values["documents"]
    text = CHINESE.summary(quick, True)
    sentences, docs, note = text.split("\n\n")
    assert sentences.startswith("**短句。** 在玩具倒序任务的测试集上")
    buckets = values["buckets"]
    assert f"分成 {len(buckets)} 个区间，从 {buckets[0]} 到 {buckets[-1]} 个符号" in sentences
    assert f"每种模型 {values['seeds']} 个种子" in sentences
    for arm in ATTENTIONS:
        gap = f"{values[f'gap_shortest_{arm}']:+.1f} → {values[f'gap_longest_{arm}']:+.1f}"
        assert gap in sentences
        for base in ONE_VECTOR:
            shortest, longest = documents["gain_shortest"][arm], documents["gain_longest"][arm]
            assert f"{shortest[base]:+.1f} → {longest[base]:+.1f}" in docs
    assert docs.startswith("**文档。** 在生成的中→英文档的测试集上")
    assert f"（{documents['documents']} 篇文档，平均每篇 " in docs
    assert f"{documents['sentences_per_document']:.1f} 个句子" in docs
    assert f"最长 {documents['max_length']} 个字符；每组 {documents['seeds']} 个种子" in docs
    assert ("与论断一致" in sentences) == (values["agrees_sentences"] is True)
    assert ("与论断一致" in docs) == (quick.agrees is True)
    assert ("不能判定" in docs) == (quick.agrees is None)
    on_sentences = {True: "与论断一致", False: "与论断不一致", None: "不能判定这条论断"}
    assert f"在短句上，测量{on_sentences[values['agrees_sentences']]}。" in note
    bleu = {(row["study"], row["arm"]): [] for row in quick.table}
    for row in quick.table:
        bleu[row["study"], row["arm"]].append(row["bleu"])
    falls = all(bleu["sentences", m][-1] < bleu["sentences", m][0] for m in MECHANISMS)
    assert ("每个模型的 BLEU 都随长度下降；" in sentences) == falls
    plain = bleu["sentences", "none"]
    for arm in ATTENTIONS:  # BLEU over the plain model's, in the shortest and longest bucket
        mine = bleu["sentences", arm]
        relative = f"{NAMES[arm]} {mine[0] / plain[0]:.2f} 倍 → {mine[-1] / plain[-1]:.2f} 倍"
        assert relative in sentences
    assert "（这个度量是在运行之后才选的，所以只是提示，不是检验）" in sentences
    for arm in DOC_ARMS:  # each documents arm's BLEU, the shortest bucket to the longest
        mine = bleu["documents", arm]
        assert f"{NAMES[arm]} {mine[0]:.1f} → {mine[-1]:.1f}" in docs


def test_the_chinese_summary_says_where_bleu_does_not_fall_or_a_ratio_is_undefined(quick):
    zeroed = [
        {**row, "bleu": 0.0}
        if (row["study"], row["arm"]) == ("sentences", "none")
        and row["source length"] == quick.values["buckets"][0]
        else row
        for row in quick.table
    ]
    sentences = CHINESE.summary(replace(quick, table=zeroed), True).split("\n\n")[0]
    assert "并非每个模型的 BLEU 都随长度下降（不用注意力的模型" in sentences  # 0, then more
    assert "在最长的区间不低于最短的区间）" in sentences
    for arm in ATTENTIONS:
        assert f"{NAMES[arm]} — → " in sentences
    assert "；“—”表示不用注意力的模型在那个区间得 0 分）" in sentences
