"""The statistical baseline aligner (`seq2seq.align.statistical`, `seq2seq-align-baseline`):
symmetrisation against hand-worked examples, tokens carried onto gold words, eflomal finding
the alignment of a synthetic language, and the command's one-line errors."""

from __future__ import annotations

import importlib.util
import json
import random
import sys

import pytest
from helpers import run_main

from seq2seq.align.gold import GoldPair, gold_set
from seq2seq.align.pharaoh import Links, check_links_fit, read_links
from seq2seq.align.statistical import (
    MISSING,
    SYMMETRISATIONS,
    BaselineError,
    EflomalSettings,
    evaluate_baseline,
    gold_tokens,
    grow_diag,
    run_eflomal,
    symmetrise,
    to_gold_words,
    tokens,
    word_owners,
)
from seq2seq.align.words import words
from seq2seq.cli import align_baseline
from seq2seq.metrics.aer import corpus_counts

needs_eflomal = pytest.mark.skipif(
    importlib.util.find_spec("eflomal") is None, reason="eflomal is not installed"
)

# --- symmetrisation, worked by hand -----------------------------------------------------
#
# 5 source words (i) × 6 target words (j). `forward` links each target word to one source
# word, `reverse` each source word to at most one target word (source 4 to none):
#
#   forward: 0-0 1-1 2-2 1-3 0-4 4-5        reverse: 0-0 1-1 3-2 2-3
#
# intersection: 0-0 1-1.
# grow-diag: visiting 1-1, its neighbour 2-2 (Δ = 1,1) is in the union with source 2 free:
# added. Visiting 2-2 (its turn comes in the same pass): 2-3 (Δ = 0,1; target 3 free) added,
# then 3-2 (Δ = 1,0; source 3 free) added, then 1-3 (Δ = -1,1) refused: source 1 and target 3
# are both aligned now. Nothing else touches the alignment: 0-0 1-1 2-2 2-3 3-2.
# final over forward, in order: 0-4 has target 4 free (source 0 is aligned): added by
# grow-diag-final, refused by grow-diag-final-and; 1-3 refused by both (both aligned); 4-5
# has both words free: added by both. Nothing of reverse is left to add.

FORWARD = {(0, 0), (1, 1), (2, 2), (1, 3), (0, 4), (4, 5)}
REVERSE = {(0, 0), (1, 1), (3, 2), (2, 3)}
GROW_DIAG = {(0, 0), (1, 1), (2, 2), (2, 3), (3, 2)}
WORKED = {
    "forward": FORWARD,
    "reverse": REVERSE,
    "intersection": {(0, 0), (1, 1)},
    "union": FORWARD | REVERSE,
    "grow-diag": GROW_DIAG,
    "grow-diag-final": GROW_DIAG | {(0, 4), (4, 5)},
    "grow-diag-final-and": GROW_DIAG | {(4, 5)},
}


@pytest.mark.parametrize("method", SYMMETRISATIONS)
def test_each_symmetrisation_gives_the_hand_worked_links(method):
    assert symmetrise(FORWARD, REVERSE, method) == WORKED[method]


def test_grow_diag_follows_a_diagonal_of_free_words():
    union = {(0, 0), (1, 1), (2, 2), (3, 3), (3, 0)}
    assert grow_diag({(0, 0)}, union) == {(0, 0), (1, 1), (2, 2), (3, 3)}  # 3-0: not a neighbour


def test_no_method_adds_a_link_whose_two_words_are_aligned():
    forward, reverse = {(0, 0), (1, 1)}, {(0, 0), (1, 1), (0, 1)}  # 0-1: beside 0-0 and 1-1
    for method in ("grow-diag", "grow-diag-final", "grow-diag-final-and"):
        assert symmetrise(forward, reverse, method) == {(0, 0), (1, 1)}


def test_symmetrisation_of_empty_and_one_sided_alignments():
    for method in SYMMETRISATIONS:
        assert symmetrise(set(), set(), method) == set()
    assert symmetrise({(0, 1)}, set(), "grow-diag-final-and") == {(0, 1)}  # both words free
    assert symmetrise({(0, 1)}, set(), "grow-diag") == set()
    with pytest.raises(ValueError, match="grow-diag-final-and"):
        symmetrise(FORWARD, REVERSE, "grow")


# --- tokens and gold words --------------------------------------------------------------


def test_the_aligner_reads_unsegmented_chinese_by_character_and_english_by_whitespace():
    assert tokens("东京是1899年的城市。") == [
        "东",
        "京",
        "是",
        "1899",
        "年",
        "的",
        "城",
        "市",
        "。",
    ]
    assert tokens("Tokyo is a city.") == ["Tokyo", "is", "a", "city."]


def test_punctuation_split_cuts_marks_off_words_and_keeps_them_in_their_gold_word():
    text = """He said "Hi," to Tom's friend. I don't know..."""
    split = tokens(text, split_punctuation=True)
    assert split == ["He", "said", '"', "Hi", ",", '"', "to", "Tom's", "friend", ".", "I",
                     "don't", "know", ".", ".", "."]  # fmt: skip
    assert word_owners(text, split) == [0, 1, 2, 2, 2, 2, 3, 4, 5, 5, 6, 7, 8, 8, 8, 8]
    assert tokens("东京是1899年的城市。", split_punctuation=True) == tokens("东京是1899年的城市。")


def test_tokens_are_carried_onto_the_gold_words_by_their_characters():
    gold = "东京 是 第30 个 城市 。"
    assert word_owners(gold, tokens("东京是第30个城市。")) == [0, 0, 1, 2, 2, 3, 4, 4, 5]
    assert word_owners("ab cd", ["abc", "d"]) == [0, 1]  # a token over two words: the first


def test_token_links_become_word_links_once_each():
    owners_source, owners_target = [0, 0, 1, None], [0, 1, 1]
    links = {(0, 0), (1, 0), (1, 1), (2, 2), (3, 1)}
    assert to_gold_words(links, owners_source, owners_target) == Links.of({(0, 0), (0, 1), (1, 1)})


def test_a_gold_pair_is_read_as_the_corpus_writes_it():
    pair = gold_set("zh", "en", "valid")[0]
    read = gold_tokens(pair, "zh", "en")
    assert "".join(read.source) == "".join(pair.source.split())
    assert read.target == pair.target.split() and read.target_owners == list(
        range(len(read.target))
    )
    assert len(set(read.source_owners)) == len(words(pair.source))
    swapped = gold_tokens(gold_set("en", "zh", "valid")[0], "en", "zh")  # the other direction
    assert swapped.source == read.target and swapped.target == read.source


# --- eflomal on synthetic languages ----------------------------------------------------
#
# An "English" of 24 words and a "Chinese" of 24 words written without spaces, translated
# word for word through a fixed one-to-one lexicon: every word meets its translation in every
# pair it is in (about 100 times in 600 pairs) and nothing else consistently, so the right
# alignment is the only consistent one and a correct aligner scores AER 0. Two languages:
#
# * `swapped`: one-character words, each adjacent pair of words swapped (local reordering);
# * `spelled`: two-character words in the same order, so each English word stands for two
#   characters of one gold word (the way an English word meets a Chinese word read by
#   character), which tests the way token links are carried onto gold words.
#
# eflomal samples with a clock-seeded generator. In 25 runs of each (2 samplers, the same
# corpus) the worst AER of any symmetrisation was 0.032 (swapped) and 0.038 (spelled); the
# bound is 0.1, while the diagonal alignment, which knows no words, scores about 0.9 on the
# swapped language. (Two-character words *and* swaps together make eflomal's forward
# direction unstable on a corpus this small: AER from 0.00 to 0.28 over 8 runs.)

HAN = "".join(chr(0x5C71 + k) for k in range(48))  # 48 distinct Han characters, from 山
LEXICON = 24
PAIRS, GOLD_PAIRS = 600, 60
BOUND = 0.1


def swap_order(length: int) -> list[int]:
    """Each adjacent pair of positions swapped; an odd last one stays."""
    return [i + 1 if i % 2 == 0 and i + 1 < length else i - i % 2 for i in range(length)]


def synthetic_pairs(
    count: int, seed: int, characters: int = 1, swap: bool = True
) -> list[GoldPair]:
    """`count` gold pairs of a synthetic language (above): Chinese words of `characters`
    Han characters, the English order swapped pairwise when `swap`."""
    rng = random.Random(seed)
    chinese = [HAN[characters * k : characters * (k + 1)] for k in range(LEXICON)]
    english = [f"w{k:02d}" for k in range(LEXICON)]
    translation = list(range(LEXICON))
    rng.shuffle(translation)
    pairs = []
    for _ in range(count):
        source = [rng.randrange(LEXICON) for _ in range(rng.randint(3, 8))]
        order = swap_order(len(source)) if swap else list(range(len(source)))  # target → source
        target = [english[translation[source[i]]] for i in order]
        links = Links.of((i, position) for position, i in enumerate(order))
        pairs.append(GoldPair(" ".join(chinese[k] for k in source), " ".join(target), links))
    return pairs


def test_the_synthetic_languages_are_as_described():
    assert swap_order(5) == [1, 0, 3, 2, 4] and swap_order(4) == [1, 0, 3, 2]
    pair = synthetic_pairs(1, seed=3)[0]
    assert pair.links.sure == {(i, j) for j, i in enumerate(swap_order(len(pair.source.split())))}
    spelled = synthetic_pairs(1, seed=3, characters=2, swap=False)[0]
    assert {len(word) for word in spelled.source.split()} == {2}
    assert spelled.links.sure == {(i, i) for i in range(len(spelled.target.split()))}
    pairs = synthetic_pairs(PAIRS, seed=7)
    diagonal = [Links.of((i, i) for i in range(len(p.target.split()))) for p in pairs]
    assert corpus_counts(diagonal, [p.links for p in pairs]).aer > 0.8


def aligned_synthetic(characters: int, swap: bool):
    pairs = synthetic_pairs(PAIRS, seed=7, characters=characters, swap=swap)
    train, gold = pairs[:-GOLD_PAIRS], pairs[-GOLD_PAIRS:]
    result = evaluate_baseline(
        ["".join(pair.source.split()) for pair in train],  # as a corpus writes it
        [pair.target for pair in train],
        {"synthetic": gold},
        "zh",
        "en",
        SYMMETRISATIONS,
        EflomalSettings(samplers=2),
    )
    assert result.train_pairs == PAIRS - GOLD_PAIRS and result.gold_pairs == GOLD_PAIRS
    return result, gold


@needs_eflomal
@pytest.mark.parametrize(
    ("characters", "swap"), [(1, True), (2, False)], ids=["swapped", "spelled"]
)
def test_eflomal_finds_the_alignment_of_a_synthetic_language(characters, swap):
    result, gold = aligned_synthetic(characters, swap)
    for method, counts in result.counts["synthetic"].items():
        assert counts.sentences == GOLD_PAIRS
        assert counts.aer < BOUND, (method, counts)
    for links, pair in zip(result.links["synthetic"]["grow-diag-final-and"], gold):
        check_links_fit(links, len(pair.source.split()), len(pair.target.split()), "synthetic")


@needs_eflomal
def test_eflomal_aligns_both_directions_and_refuses_mismatched_input():
    found = run_eflomal([["a", "b"], [], ["b", "a"]] * 5, [["x", "y"], ["x"], ["y", "x"]] * 5)
    assert len(found) == 15 and found.forward[1] == found.reverse[1] == frozenset()
    with pytest.raises(BaselineError, match="2 source sentences but 1"):
        run_eflomal([["a"], ["b"]], [["x"]])
    with pytest.raises(BaselineError, match="whitespace"):
        run_eflomal([["a b"]], [["x"]])


def test_a_missing_eflomal_is_one_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "eflomal", None)  # import eflomal raises ImportError
    with pytest.raises(BaselineError, match="eflomal is not installed"):
        run_eflomal([["a"]], [["x"]])


def test_eflomal_settings_are_checked():
    with pytest.raises(ValueError, match="model must be one of 1"):
        EflomalSettings(model=4)
    with pytest.raises(ValueError, match="samplers"):
        EflomalSettings(samplers=0)


# --- the command ------------------------------------------------------------------------


@pytest.fixture
def data_dir(tmp_path):
    """A tiny 'prepared corpus': 200 synthetic training pairs as train.zh and train.en."""
    pairs = synthetic_pairs(200, seed=5)
    (tmp_path / "train.zh").write_text(
        "".join("".join(p.source.split()) + "\n" for p in pairs), encoding="utf-8"
    )
    (tmp_path / "train.en").write_text("".join(p.target + "\n" for p in pairs), encoding="utf-8")
    return tmp_path


@needs_eflomal
def test_the_command_scores_a_gold_part_and_writes_its_links(data_dir, capsys, tmp_path):
    out, scores = tmp_path / "valid.align", tmp_path / "scores.json"
    code, stdout, err = run_main(align_baseline.main, capsys, "--data-dir", data_dir, "--src", "zh", "--tgt", "en",
                                 "--part", "valid", "--out", out, "--json", scores,
                                 "--samplers", "1", "--iterations", "0.5")  # fmt: skip
    assert code == 0, err
    assert "200 training pairs + 100 gold pairs" in stdout
    assert "valid  grow-diag-final-and  precision" in stdout
    written = json.loads(scores.read_text(encoding="utf-8"))
    assert set(written["scores"]) == {"valid"} and written["train_pairs"] == 200
    gold = gold_set("zh", "en", "valid")
    links = read_links(out)
    assert len(links) == len(gold)
    for number, (mine, pair) in enumerate(zip(links, gold), 1):
        check_links_fit(mine, len(pair.source.split()), len(pair.target.split()), f"line {number}")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--src", "de"], "there is no hand-aligned gold set for de→en"),
        (
            ["--symmetrise", "all", "--out", "x.align"],
            "--out writes one part and one symmetrisation",
        ),
        (["--part", "valid", "test", "--out", "x.align"], "--out writes one part"),
        (["--max-train", "0"], "argument --max-train: must be an integer from 1"),
        (["--model", "5"], "argument --model: invalid choice"),
        (["--samplers", "0"], "argument --samplers: must be an integer from 1"),
        (["--symmetrise", "grow"], "argument --symmetrise: invalid choice"),
    ],
)
def test_the_command_refuses_bad_options_in_one_line(data_dir, capsys, extra, message):
    code, out, err = run_main(
        align_baseline.main, capsys, "--data-dir", data_dir, "--src", "zh", "--tgt", "en", *extra
    )
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("seq2seq-align-baseline: error: ")
    assert message in err


def test_the_command_refuses_missing_or_uneven_training_files(data_dir, capsys, tmp_path):
    code, _, err = run_main(
        align_baseline.main, capsys, "--data-dir", tmp_path / "none", "--src", "zh", "--tgt", "en"
    )
    assert code == 2 and err.count("\n") == 1 and "train.zh: No such file" in err
    (data_dir / "train.en").write_text("one line\n", encoding="utf-8")
    code, _, err = run_main(
        align_baseline.main, capsys, "--data-dir", data_dir, "--src", "zh", "--tgt", "en"
    )
    assert code == 2 and err.count("\n") == 1 and "has 200 lines but" in err


def test_the_command_says_in_one_line_that_eflomal_is_missing(data_dir, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "eflomal", None)
    code, _, err = run_main(
        align_baseline.main, capsys, "--data-dir", data_dir, "--src", "zh", "--tgt", "en"
    )
    assert code == 2 and err == f"seq2seq-align-baseline: error: {MISSING}\n"
