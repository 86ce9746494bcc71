"""`seq2seq-align` on Chinese and English, with two tiny GRU models of opposite directions
trained for seconds on a toy lexicon corpus (`helpers.toy_corpus_lines`: `I like cats.` ↔
`我喜欢猫。`): pre-segmented input read as the model was trained, and `--reverse`.

The models align poorly; what is checked is what they read and how the links are made."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
import torch
from helpers import compose_config, run_main, toy_corpus_lines

from seq2seq.align import extract
from seq2seq.align.extract import (
    AlignSettings,
    Sentence,
    align_pairs,
    links_from_attention,
    pair_weights,
)
from seq2seq.align.gold import gold_set
from seq2seq.align.model_aer import GoldAttention, aligned_gold, encoded_gold
from seq2seq.align.pharaoh import Links, format_links, parse_links
from seq2seq.align.statistical import symmetrise
from seq2seq.align.symmetric import SYMMETRISATIONS, harmonic_mean
from seq2seq.align.teacher_forced import teacher_forced_weights
from seq2seq.align.words import words
from seq2seq.cli import align
from seq2seq.data.fetch import MIRROR_ENV
from seq2seq.runs.assemble import train_and_test
from seq2seq.search.translator import Translator
from seq2seq.special_tokens import EOS_PIECE

LEXICON_DATA = [
    "data.name=lexicon", "data.source.url=https://example.org/anki/toy-eng.zip", "data.source.member=toy.txt",
    "data.source.sha256=null", "data.valid_size=20", "data.test_size=20", "data.src_vocab_size=30",
    "data.tgt_vocab_size=30", "data.max_len=20", "data.max_tokens=256",
]  # fmt: skip
TINY_GRU = [
    "encoder=gru", "decoder=gru", "attention=additive", "encoder.hidden_size=16",
    "decoder.hidden_size=32", "model.embed_dim=32", "trainer.max_steps=60",
    "trainer.valid_every=60", "trainer.threads=1", "trainer.log_every=60",
    "trainer.test_search.beam_size=1", "logging.progress_bar=false", "logging.tensorboard=false",
]  # fmt: skip
# (zh, en) pairs of the lexicon's words: unsegmented, segmented into words, segmented into
# single characters (the words of the unsegmented form); English as the corpus writes it and
# with its full stop split off.
UNSEGMENTED = ["我喜欢猫。", "汤姆吃米饭。", "你看大狗。", "我喜欢红茶。"]
SEGMENTED = ["我 喜欢 猫 。", "汤姆 吃 米饭 。", "你 看 大 狗 。", "我 喜欢 红 茶 。"]
CHARACTERS = [" ".join(text) for text in UNSEGMENTED]
ENGLISH = ["I like cats.", "Tom eat rice.", "you see big dogs.", "I like red tea."]
SPLIT_ENGLISH = [text[:-1] + " ." for text in ENGLISH]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory) -> dict[str, Path]:
    """best.pt of a zh→en and of an en→zh model, trained on the same toy corpus."""
    root = tmp_path_factory.mktemp("lexicon")
    mirror = root / "mirror"
    mirror.mkdir()
    with zipfile.ZipFile(mirror / "toy-eng.zip", "w") as archive:
        archive.writestr("toy.txt", "\n".join(toy_corpus_lines(400, seed=0)) + "\n")
    found = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(MIRROR_ENV, str(mirror))
        for direction in ("zh_en", "en_zh"):
            overrides = [f"data=tatoeba_{direction}", *LEXICON_DATA, *TINY_GRU]
            overrides += [f"data.root={root / 'data'}", f"data.name=lexicon_{direction}"]
            run = root / direction
            train_and_test(compose_config(overrides), run, outputs_root=root)
            found[direction] = run / "checkpoints" / "best.pt"
    return found


@pytest.fixture(scope="module")
def zh_en(checkpoints) -> Translator:
    return Translator.load(checkpoints["zh_en"])


@pytest.fixture(scope="module")
def en_zh(checkpoints) -> Translator:
    return Translator.load(checkpoints["en_zh"])


@pytest.fixture
def fed(monkeypatch) -> list:
    """The (source ids, target ids) examples the models are fed, as they are fed."""
    examples: list = []

    def recording(model, batch, device, source="attention"):
        examples.extend(batch)
        return teacher_forced_weights(model, batch, device, source)

    monkeypatch.setattr(extract, "teacher_forced_weights", recording)
    return examples


def fed_ids(fed: list, translator: Translator, sources: list[str], targets: list[str]) -> list:
    """The (source ids, target ids) the model is fed to align the pairs."""
    fed.clear()
    align_pairs(translator, sources, targets, AlignSettings())
    return list(fed)


def test_presegmented_chinese_is_read_without_its_spaces(zh_en, en_zh, fed):
    for segmented in (SEGMENTED, CHARACTERS):
        unsegmented = fed_ids(fed, zh_en, UNSEGMENTED, ENGLISH)
        assert fed_ids(fed, zh_en, segmented, ENGLISH) == unsegmented  # Chinese the source
        unsegmented = fed_ids(fed, en_zh, ENGLISH, UNSEGMENTED)
        assert fed_ids(fed, en_zh, ENGLISH, segmented) == unsegmented  # Chinese the target


def test_character_segmented_and_unsegmented_chinese_link_alike(zh_en, en_zh):
    # `我 喜 欢 猫 。` has the words of `我喜欢猫。`: one per character.
    for settings in (AlignSettings(), AlignSettings(extract="threshold", threshold=0.2)):
        assert align_pairs(zh_en, CHARACTERS, ENGLISH, settings) == align_pairs(
            zh_en, UNSEGMENTED, ENGLISH, settings
        )
        assert align_pairs(en_zh, ENGLISH, CHARACTERS, settings) == align_pairs(
            en_zh, ENGLISH, UNSEGMENTED, settings
        )


def character_owners(segmented: str) -> list[int]:
    """For each character of a segmented text's unsegmented form, its word."""
    return [index for index, word in enumerate(segmented.split()) for _ in word]


def test_segmented_words_get_the_weight_of_their_characters(zh_en):
    # A source word's weight is the sum over its pieces (seq2seq.align.extract), so the
    # weight of 喜欢 is that of 喜 plus that of 欢, and its links are those of the characters'
    # weights gathered onto the words.
    by_words = pair_weights(zh_en, SEGMENTED, ENGLISH, AlignSettings())
    by_characters = pair_weights(zh_en, UNSEGMENTED, ENGLISH, AlignSettings())
    for segmented, found, characters in zip(SEGMENTED, by_words, by_characters):
        owners = character_owners(segmented)
        gather = torch.zeros(len(owners), len(segmented.split()))  # (characters, words)
        gather[range(len(owners)), owners] = 1.0
        gathered = characters.weights @ gather  # (target_words, source_words)
        torch.testing.assert_close(found.weights, gathered)
        assert torch.equal(found.covered, characters.covered)
        assert extract.extract_links(found.weights, found.covered, AlignSettings()) == (
            extract.extract_links(gathered, characters.covered, AlignSettings())
        )


def test_the_gold_set_is_aligned_as_valid_aer_aligns_it(zh_en):
    pairs = gold_set("zh", "en", "valid")[:20]
    sources, targets = [pair.source for pair in pairs], [pair.target for pair in pairs]
    settings = AlignSettings()
    expected = []
    limit = zh_en.max_source_len
    for (
        pair
    ) in pairs:  # the corpus's writing (the gold's Chinese without spaces), cut as validation cuts
        read = [
            ("".join(pair.source.split()), zh_en.src_tokenizer),
            (pair.target, zh_en.tgt_tokenizer),
        ]
        ids = [tokenizer.encode(text)[:limit] for text, tokenizer in read]
        source, target = (
            Sentence(given, tokenizer.pieces(text)[: len(side)] + [EOS_PIECE])
            for given, (text, tokenizer), side in zip((pair.source, pair.target), read, ids)
        )
        (attention,) = teacher_forced_weights(zh_en.model, [tuple(ids)], zh_en.device)
        expected.append(links_from_attention(attention, source, target, settings))
    assert align_pairs(zh_en, sources, targets, settings) == expected
    links, counts = aligned_gold(zh_en, pairs, settings)  # seq2seq-align --gold's reading
    assert links == expected
    hook = GoldAttention.of(
        zh_en.model, encoded_gold(pairs, ("zh", "en"), zh_en, limit), zh_en.device
    )
    assert counts == hook.counts(settings)  # and the valid/aer hook's counts


def test_english_with_split_punctuation_is_read_as_written(zh_en, en_zh, fed):
    assert fed_ids(fed, zh_en, UNSEGMENTED, SPLIT_ENGLISH) == fed_ids(
        fed, zh_en, UNSEGMENTED, ENGLISH
    )
    assert fed_ids(fed, en_zh, SPLIT_ENGLISH, UNSEGMENTED) == fed_ids(
        fed, en_zh, ENGLISH, UNSEGMENTED
    )
    # English as the source: `cats` and `.` share the weight `cats.` gets.
    split = pair_weights(en_zh, SPLIT_ENGLISH, UNSEGMENTED, AlignSettings())
    joined = pair_weights(en_zh, ENGLISH, UNSEGMENTED, AlignSettings())
    for found, whole in zip(split, joined):
        torch.testing.assert_close(
            found.weights[:, -2] + found.weights[:, -1], whole.weights[:, -1]
        )
        torch.testing.assert_close(found.weights[:, :-2], whole.weights[:, :-1])
    # English as the target: every word, the split-off `.` too, gets its argmax link.
    for links, text in zip(
        align_pairs(zh_en, UNSEGMENTED, SPLIT_ENGLISH, AlignSettings()), SPLIT_ENGLISH
    ):
        assert sorted({target for _, target in links.sure}) == list(range(len(text.split())))


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_reverse_symmetrises_the_two_directions_end_to_end(
    checkpoints, zh_en, en_zh, capsys, tmp_path
):
    source = write_lines(tmp_path / "pairs.zh", SEGMENTED)
    target = write_lines(tmp_path / "pairs.en", SPLIT_ENGLISH)
    forward = pair_weights(zh_en, SEGMENTED, SPLIT_ENGLISH, AlignSettings())
    reverse = pair_weights(en_zh, SPLIT_ENGLISH, SEGMENTED, AlignSettings())
    ahead = [extract.extract_links(w, c, AlignSettings()).sure for w, c in forward]
    back = [
        {(i, j) for j, i in extract.extract_links(w, c, AlignSettings()).sure} for w, c in reverse
    ]
    found = {}
    for method in SYMMETRISATIONS:
        code, out, err = run_main(align.main, capsys, checkpoints["zh_en"], "--reverse", checkpoints["en_zh"],
                                   "--src", source, "--tgt", target, "--symmetrise", method)  # fmt: skip
        assert code == 0, err
        found[method] = [parse_links(line) for line in out.splitlines()]
        assert len(found[method]) == len(SEGMENTED)
        for links, zh, en in zip(found[method], SEGMENTED, SPLIT_ENGLISH):
            assert all(i < len(words(zh)) and j < len(words(en)) for i, j in links.sure)
    for method in ("intersection", "union", "grow-diag", "grow-diag-final", "grow-diag-final-and"):
        assert found[method] == [Links.of(symmetrise(f, r, method)) for f, r in zip(ahead, back)]
    harmonic = [
        extract.extract_links(harmonic_mean(f.weights, r.weights.T), f.covered, AlignSettings())
        for f, r in zip(forward, reverse)
    ]
    assert found["harmonic"] == harmonic
    code, out, _ = run_main(align.main, capsys, checkpoints["zh_en"], "--reverse", checkpoints["en_zh"],
                             "--src", source, "--tgt", target)  # fmt: skip
    assert (
        code == 0
        and [parse_links(line) for line in out.splitlines()] == found[align.DEFAULT_SYMMETRISATION]
    )


def test_symmetrised_links_are_scored_against_gold(checkpoints, capsys, tmp_path):
    source = write_lines(tmp_path / "pairs.zh", SEGMENTED)
    target = write_lines(tmp_path / "pairs.en", ENGLISH)
    gold = write_lines(tmp_path / "pairs.gold", [format_links(Links.of({(0, 0)}))] * len(ENGLISH))
    code, out, err = run_main(align.main, capsys, checkpoints["zh_en"], "--reverse", checkpoints["en_zh"],
                               "--src", source, "--tgt", target, "--gold", gold,
                               "--symmetrise", "harmonic")  # fmt: skip
    assert code == 0 and out.startswith("precision ") and f"{len(ENGLISH)} pairs" in out, err


def test_a_reverse_model_of_the_wrong_direction_is_one_line(checkpoints, capsys, tmp_path):
    source = write_lines(tmp_path / "pairs.zh", SEGMENTED)
    target = write_lines(tmp_path / "pairs.en", ENGLISH)
    code, out, err = run_main(align.main, capsys, checkpoints["zh_en"], "--reverse", checkpoints["zh_en"],
                               "--src", source, "--tgt", target)  # fmt: skip
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "must translate en→zh" in err and "Traceback" not in err
    code, _, err = run_main(align.main, capsys, checkpoints["zh_en"], "--reverse", tmp_path / "absent.pt",
                             "--src", source, "--tgt", target)  # fmt: skip
    assert code == 2 and len(err.strip().splitlines()) == 1 and "absent.pt" in err
