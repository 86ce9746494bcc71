"""`seq2seq.data.script_check`: a sentence is flagged when under a fifth of its letters are in
its language's script. The expected counts are read off the sentences by hand (which
characters are letters, which are Han or Latin), not computed by the module."""

from __future__ import annotations

import pytest

from seq2seq.data.script_check import language_script, script_counts, script_problem


@pytest.mark.parametrize(
    ("text", "lang", "counts"),
    [("我爱中国。", "zh", (4, 4)),               # 4 Han letters, a full stop
     ("Hello world.", "zh", (0, 10)),           # 10 Latin letters
     ("Hello world.", "en", (10, 10)),
     ("我用Python写代码。", "zh", (5, 11)),      # 5 Han + 6 Latin
     ("I love 中国.", "en", (5, 7)),             # 5 Latin + 2 Han
     ("2024年", "zh", (1, 1)),                   # digits are no letters
     ("こんにちは", "zh", (0, 5)),               # hiragana is not Han
     ("こんにちは", "ja", (5, 5)),
     ("日本語のテキストです", "ja", (10, 10)),   # 3 kanji, 7 kana
     ("ＡＢＣ", "en", (3, 3)),                   # full-width Latin is Latin
     ("我爱中国。", "zh-Hant", (4, 4)),          # any form of Chinese
     ("我爱中国。", "cmn", (4, 4))],
)  # fmt: skip
def test_letters_in_the_languages_script_are_counted(text, lang, counts):
    assert script_counts(text, language_script(lang)) == counts


@pytest.mark.parametrize(
    ("text", "lang"),
    [("Hello world.", "zh"), ("我爱中国。", "en"), ("こんにちは", "zh"), ("Привет, мир!", "en"),
     ("我 is a word.", "zh")],  # 1 Han of 8 letters: under a fifth
)  # fmt: skip
def test_a_sentence_mostly_in_another_script_is_flagged(text, lang):
    problem = script_problem(text, lang)
    assert problem is not None and f"source language {lang}:" in problem
    assert problem.endswith("Translated anyway")


def test_the_message_gives_the_counts_and_the_script():
    assert script_problem("Hello world.", "zh") == (
        "0 of its 10 letters are Chinese characters, the script of the model's source "
        "language zh: is it in another language? Translated anyway"
    )


@pytest.mark.parametrize(
    ("text", "lang"),
    [("我爱中国。", "zh"), ("Hello world.", "en"),
     ("我用Python写代码。", "zh"), ("I love 中国.", "en"),    # mixed, mostly the right script
     ("我爱 iPod", "zh"),                                      # 2 Han of 6 letters: a third
     ("2024-01-01 12:30", "zh"), ("3.14 + 2 = 5.14 !!!", "en"), ("", "zh"), ("   ", "en"),
     ("日本語のテキストです", "zh"),                            # 3 Han of 10: over a fifth
     ("Hello world.", "toy"), ("Hello world.", "xx")],         # a language of unknown script
)  # fmt: skip
def test_the_right_script_digits_only_and_unknown_languages_are_not_flagged(text, lang):
    assert script_problem(text, lang) is None


def test_the_threshold_is_a_fifth_of_the_letters():
    """One Han letter among 5 letters is a fifth (not flagged); among 6, less (flagged)."""
    assert script_problem("我abcd", "zh") is None
    assert script_problem("我abcde", "zh") is not None
