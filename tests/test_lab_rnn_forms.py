"""The lab's four-RNN-forms experiment: the tasks' answers checked by hand, the scores against
counts done by hand, and the quick run's behaviour: N vs N learns to tag letters but stays
at chance where reversal needs an input it has not read."""

from __future__ import annotations

import statistics
from dataclasses import replace

import torch
from helpers import is_png, lab_quick_fixture

import seq2seq.cli.lab as lab_cli
from seq2seq.lab.catalogue import experiments
from seq2seq.lab.chinese.rnn_forms import CHINESE
from seq2seq.lab.rnn_forms import (
    DEFAULT,
    EXPERIMENT,
    FORMS,
    NEAR,
    PREDICTED_FITS,
    QUICK,
    RULES,
    SHAPES,
    TASKS,
    Score,
    built,
    chance,
    drawn,
    expresses,
    letter_ids,
    lexicon,
    predictions,
    scored,
    spelled,
    unread_positions,
)

quick = lab_quick_fixture(EXPERIMENT)


def answer(task: str, text: str) -> str:
    """The rule's answer to one hand-written input, as letters."""
    return spelled(RULES[task](letter_ids(text)))


def test_the_rules_give_the_answers_worked_out_by_hand():
    assert answer("tag", "abioc") == "VCVVC"
    assert answer("reverse", "abcde") == "edcba"
    assert answer("majority", "abcde") == "C"  # two vowels of five
    assert answer("majority", "aeibc") == "V"  # three of five
    assert answer("consonants", "bacfe") == "bcf"
    assert answer("consonants", "aeio") == ""  # the answer may be empty: M = 0


def test_the_examples_are_the_same_for_a_seed_and_hold_their_rules_answers():
    def batch(task, seed):
        return drawn(task, 16, QUICK, lexicon(QUICK, 7), torch.Generator().manual_seed(seed))

    for task in TASKS:
        first, again, other = batch(task, 3), batch(task, 3), batch(task, 4)
        assert torch.equal(first.sources, again.sources) and first.answers == again.answers
        assert not torch.equal(first.sources, other.sources)
    reverse = batch("reverse", 3)
    assert reverse.sources.shape == (16, QUICK.length)
    assert reverse.answers == reverse.sources.flip(1).tolist()
    tag = batch("tag", 3)
    for source, tags in zip(tag.sources.tolist(), tag.answers, strict=True):
        assert spelled(tags) == "".join("V" if c in "aeio" else "C" for c in spelled(source))
    spell = batch("spell", 3)
    words = lexicon(QUICK, 7)
    assert spell.sources.shape == (16, 1)
    assert spell.answers == [words[i] for i in spell.sources[:, 0].tolist()]


def test_the_lexicon_is_fixed_by_the_seed_its_words_distinct_and_of_3_to_n_letters():
    words = lexicon(QUICK, 7)
    assert words == lexicon(QUICK, 7) and words != lexicon(QUICK, 8)
    assert len(words) == QUICK.words == len({tuple(word) for word in words})
    assert all(3 <= len(word) <= QUICK.length for word in words)
    assert all(set(spelled(word)) <= set("abcdefio") for word in words)


def test_scores_and_the_chance_baseline_match_counts_by_hand():
    score = scored([[1, 2], [3]], [[1, 3], [3, 4]])  # position 0 right twice, 1 never
    assert (score.token, score.sequence, score.per_position) == (0.5, 0.0, [1.0, 0.0])
    assert scored([[5, 6, 7]], [[5, 6]]).sequence == 0.0  # a longer output is not exact
    baseline = chance([[5, 6], [5, 7], [8, 6]])  # guess 5 then 6: 4 of 6 tokens
    assert baseline.token == 4 / 6 and baseline.sequence == 1 / 3
    assert baseline.per_position == [2 / 3, 2 / 3]


def test_only_n_vs_m_expresses_every_task_and_the_others_only_their_own_shape():
    for task in TASKS:
        assert expresses("N vs M", task)
        assert [form for form in FORMS[:3] if expresses(form, task)] == (
            [SHAPES[task]] if SHAPES[task] != "N vs M" else []
        )
    assert list(unread_positions(5)) == [0, 1] and list(unread_positions(8)) == [0, 1, 2, 3]


def test_an_n_vs_n_output_does_not_change_when_later_inputs_do():
    model = built("N vs N", "reverse", QUICK, seed=0, device=torch.device("cpu"))
    sources = drawn("reverse", 4, QUICK, [], torch.Generator().manual_seed(1)).sources
    changed = sources.clone()
    changed[:, 3:] = (changed[:, 3:] - 3 + 1) % 8 + 3  # other letters after position 2
    with torch.no_grad():
        assert torch.allclose(model(sources)[:, :3], model(changed)[:, :3])
        assert not torch.allclose(model(sources)[:, 3:], model(changed)[:, 3:])


def test_the_verdict_fails_when_n_vs_n_beats_chance_where_it_has_not_read():
    fit, low = Score(0.95, 0.9, [0.95] * 5), Score(0.3, 0.0, [0.12, 0.13, 0.3, 0.4, 0.5])
    scores = {(form, task): fit for form in FORMS for task in TASKS if expresses(form, task)}
    baselines = {task: Score(0.13, 0.001, [0.125] * 5) for task in TASKS}
    held = predictions({**scores, ("N vs N", "reverse"): low}, baselines, 5)
    assert all(held.values())
    cheat = Score(0.5, 0.0, [0.125 + 2 * NEAR, 0.13, 0.3, 0.4, 0.5])
    held = predictions({**scores, ("N vs N", "reverse"): cheat}, baselines, 5)
    assert not held["N vs N at chance on reverse's unread half"]
    held = predictions({**scores, ("N vs M", "reverse"): low}, baselines, 5)
    assert not held["N vs M fits reverse"]


def test_the_quick_run_gives_the_form_by_task_matrix_with_a_dash_where_a_form_cannot(quick):
    assert [row["form"] for row in quick.table] == [*FORMS, "chance"]
    columns = [f"{task} ({SHAPES[task]})" for task in TASKS]
    assert list(quick.table[0]) == ["form", *columns]
    for row, form in zip(quick.table, FORMS, strict=False):
        for task, column in zip(TASKS, columns, strict=True):
            assert (row[column] == "—") == (not expresses(form, task))
            accuracy = quick.values["token_accuracy"][form][task]
            assert (accuracy is None) == (not expresses(form, task))
    assert quick.agrees in (True, False)
    assert [path.name for path in quick.figures] == [
        "form_task_matrix.png", "reverse_by_position.png"
    ]  # fmt: skip
    assert all(is_png(path) for path in quick.figures)


def test_n_vs_n_tags_well_above_chance_but_guesses_where_reversal_needs_the_unread(quick):
    values = quick.values
    tag = values["token_accuracy"]["N vs N"]["tag"]
    assert tag >= 0.9 and tag > values["chance_token"]["tag"] + 0.3
    by_position = values["reverse_by_position"]["N vs N"]
    chance_by_position = values["reverse_chance_by_position"]
    for position in values["unread_positions"]:  # 1 in 8 letters, whatever it learnt
        assert abs(by_position[position] - chance_by_position[position]) < 0.08
    assert values["token_accuracy"]["N vs 1"]["majority"] > values["chance_token"]["majority"]


def test_the_lab_lists_the_experiment(capsys):
    assert "rnn_forms" in experiments()
    lab_cli.main(["--list"])
    assert "rnn_forms" in capsys.readouterr().out


def test_the_chinese_summary_quotes_the_quick_run_s_numbers(quick):
    values = quick.values
    text = CHINESE.summary(quick, True)
    token, exact = values["token_accuracy"], values["sequence_accuracy"]
    for form, task in PREDICTED_FITS:
        assert f"{form} 做 {task} {token[form][task]:.2f}" in text
    assert f"达到 {values['fits']} 才算胜任" in text
    by_position = values["reverse_by_position"]["N vs N"]
    unread = statistics.fmean(by_position[i] for i in values["unread_positions"])
    assert f"还没读到的输出位置上只有 {unread:.2f}（随机水平" in text
    assert f"在 {QUICK.length} 个字母的倒序上，它整句写对的比例只有 " in text
    assert f"{exact['N vs N']['reverse']:.2f}，N vs M（编码器-解码器）则有 " in text
    assert f"则有 {exact['N vs M']['reverse']:.2f}。" in text
    cells = f"每一格是 {QUICK.seeds} 个模型的均值，每个模型训练 {QUICK.steps} 次更新，"
    assert cells + f"在 {QUICK.eval_examples} 个新抽取的样本上评分；" in text
    full = CHINESE.summary(quick, False)  # the count follows the run's size, as the English
    assert f"在 {DEFAULT.eval_examples} 个新抽取的样本上评分；" in full
    assert ("未成立的预测" in text) == (not quick.agrees)
    missed = {**values["predictions"], "N vs M fits reverse": False}
    text = CHINESE.summary(
        replace(quick, values={**values, "predictions": missed}, agrees=False), True
    )
    assert "未成立的预测：N vs M 胜任 reverse（逐词元准确率至少 0.9）" in text
