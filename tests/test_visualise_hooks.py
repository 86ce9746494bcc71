"""The alignment hook (`seq2seq.visualise.alignment_images`) writes one image tag per sentence and the
accuracy to TensorBoard; the AER hook (`seq2seq.align.aer_hook`) writes AER, precision and
recall on the valid part of the gold set. Both are registered hooks (`validation_hooks`
makes a run's, the AER hook first) and report their metric."""

from __future__ import annotations

import logging
import random
import re
import unicodedata
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
from helpers import TINY_TOY, compose_config
from tensorboard.backend.event_processing.event_accumulator import IMAGES, EventAccumulator

from seq2seq.align.aer_hook import AER_TAGS, CHOSEN_TAGS, GUIDED_TAG, AerHook, aer_hooks
from seq2seq.align.defaults import HeadMark
from seq2seq.align.extract import AlignSettings, Sentence
from seq2seq.align.gold import as_in_corpus, gold_set
from seq2seq.align.model_aer import GoldExample
from seq2seq.align.pharaoh import Links
from seq2seq.align.words import piece_words, words
from seq2seq.config.build import build_model, plain
from seq2seq.data.batching import collate
from seq2seq.data.prepare import prepare
from seq2seq.data.tokenizer import SubwordTokenizer
from seq2seq.metrics.aer import corpus_counts
from seq2seq.search import Hypothesis
from seq2seq.special_tokens import EOS_PIECE
from seq2seq.training.hooks import ValidationContext, produced_metrics, validation_hooks
from seq2seq.training.logger import RunLogger
from seq2seq.visualise.alignment_images import (
    ACCURACY_TAG,
    SAMPLE_MAX_PIECES,
    SAMPLE_SHOWN,
    TOY_SHOWN,
    AlignmentHook,
    ShownSentence,
    heads_tag,
    image_tag,
    probe_hook,
)
from seq2seq.visualise.probes import probes_for

SPECIALS = ["<pad>", "<unk>", "<s>", EOS_PIECE]


def _context(cfg, data, run_dir, step: int = 1) -> ValidationContext:
    """What the trainer hands its hooks after a validation, for a fresh model."""
    torch.manual_seed(0)
    model = build_model(cfg, data.src_tokenizer.vocab_size, data.tgt_tokenizer.vocab_size)
    return ValidationContext(model, torch.device("cpu"), RunLogger(run_dir), step)


def _events(run_dir) -> EventAccumulator:
    events = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={IMAGES: 0})
    events.Reload()
    return events


def _reverse_accuracy_by_hand(model, examples) -> float:
    """Share of target symbols whose head-mean last-layer argmax is the mirrored source."""
    hits = total = 0
    model.eval()
    with torch.no_grad():
        for src, tgt in examples:
            batch = collate([(src, tgt)], [0])
            _, attention = model(batch.src, batch.src_mask, batch.tgt_in, need_weights=True)
            best = attention[0, -1].mean(dim=0).argmax(dim=-1)  # (tgt_len + 1,)
            n = len(src)
            hits += sum(int(best[j]) == n - 1 - j for j in range(n))
            total += n
    return hits / total


def test_toy_hook_logs_an_image_per_sentence_and_the_accuracy(tmp_path):
    cfg = compose_config(TINY_TOY)
    data = prepare(plain(cfg.data))
    context = _context(cfg, data, tmp_path)
    (hook,) = validation_hooks(plain(cfg), data)
    rng_before = torch.get_rng_state()
    hook(context)
    hook(replace(context, step=2))
    assert torch.equal(torch.get_rng_state(), rng_before)  # resuming stays exact
    context.logger.close()

    events = _events(tmp_path)
    lines = data.valid.src_lines[:TOY_SHOWN]
    expected_tags = [image_tag(i, line) for i, line in enumerate(lines)]
    assert sorted(events.Tags()["images"]) == expected_tags
    for tag in expected_tags:
        assert [image.step for image in events.Images(tag)] == [1, 2]
        assert events.Images(tag)[0].encoded_image_string[:4] == b"\x89PNG"
    accuracy = events.Scalars(ACCURACY_TAG)
    assert [point.step for point in accuracy] == [1, 2]
    by_hand = _reverse_accuracy_by_hand(context.model, data.valid.examples)
    assert accuracy[0].value == pytest.approx(by_hand, abs=1e-6)
    assert produced_metrics([hook]) == {"alignment_accuracy"}  # selectable, and reported:
    assert context.metrics == {"alignment_accuracy": pytest.approx(by_hand, abs=1e-6)}


def test_no_hook_without_attention():
    cfg = compose_config(TINY_TOY + ["attention=none"])
    assert validation_hooks(plain(cfg), data=None) == []


class _WordTokenizer:
    """Pieces: single CJK characters, ▁-prefixed words, punctuation; a fixed vocabulary."""

    kind = "test"

    def __init__(self, texts: list[str], lang: str):
        self.lang = lang
        pieces = sorted({piece for text in texts for piece in self.pieces(text)})
        self.vocabulary = SPECIALS + pieces
        self.ids = {piece: index for index, piece in enumerate(self.vocabulary)}

    @property
    def vocab_size(self) -> int:
        return len(self.vocabulary)

    def pieces(self, text: str) -> list[str]:
        text = unicodedata.normalize("NFKC", text)  # as sentencepiece does
        return [
            ("▁" if match.start() == 0 or text[match.start() - 1] == " " else "") + match.group()
            for match in re.finditer(r"[A-Za-z]+|[^\sA-Za-z]", text)
        ]

    def encode(self, text: str) -> list[int]:
        return [self.ids[piece] for piece in self.pieces(text)]

    def id_to_piece(self, index: int) -> str:
        return self.vocabulary[int(index)]

    def decode(self, ids) -> str:
        return "".join(self.id_to_piece(i) for i in ids).replace("▁", " ").strip()


def gold_texts(lang: str) -> list[str]:
    """Each side of the zh–en gold set's valid part as the corpus writes it."""
    side = 0 if lang == "zh" else 1
    return [as_in_corpus(pair[side], lang) for pair in gold_set("zh", "en", "valid")]


def test_probe_hook_logs_every_probe_under_its_chinese_tag(tmp_path):
    probes = probes_for("zh", "en")
    src_tokenizer = _WordTokenizer([probe.source for probe in probes] + gold_texts("zh"), "zh")
    tgt_tokenizer = _WordTokenizer([probe.reference for probe in probes] + gold_texts("en"), "en")
    data = SimpleNamespace(src_tokenizer=src_tokenizer, tgt_tokenizer=tgt_tokenizer)
    overrides = ["data=tatoeba_zh_en", "logging.probe_file=null"]
    cfg = compose_config([o for o in TINY_TOY if not o.startswith("data")] + overrides)
    context = _context(cfg, data, tmp_path, step=5)
    run_config = plain(cfg)
    aer_hook, hook = validation_hooks(run_config, data)  # AER first: the images mark its choice
    assert isinstance(hook, AlignmentHook) and isinstance(aer_hook, AerHook)
    assert hook.marks.aer_hook is aer_hook and hook.marks.config is run_config
    hook(context)
    context.logger.close()

    events = _events(tmp_path)
    expected = [image_tag(i, probe.source) for i, probe in enumerate(probes)]
    assert expected[0] == "alignment/00_我爱中国"
    assert sorted(events.Tags()["images"]) == expected
    (accuracy,) = events.Scalars(ACCURACY_TAG)
    assert accuracy.step == 5 and 0.0 <= accuracy.value <= 1.0


def test_multihead_probes_get_a_head_mean_image_and_an_every_head_image(tmp_path):
    probes = probes_for("zh", "en")[:2]
    src_tokenizer = _WordTokenizer([probe.source for probe in probes], "zh")
    tgt_tokenizer = _WordTokenizer([probe.reference for probe in probes], "en")
    data = SimpleNamespace(src_tokenizer=src_tokenizer, tgt_tokenizer=tgt_tokenizer)
    overrides = ["data=tatoeba_zh_en", "attention=multihead", "attention.heads=2"]
    cfg = compose_config([o for o in TINY_TOY if not o.startswith("data")] + overrides)
    context = _context(cfg, data, tmp_path, step=3)
    shown = probe_hook(probes, data, plain(cfg)).shown
    hook = AlignmentHook(shown, [], [], tgt_tokenizer, plain(cfg))
    hook(context)
    context.logger.close()

    tags = sorted(_events(tmp_path).Tags()["images"])
    mean_tags = [image_tag(i, probe.source) for i, probe in enumerate(probes)]
    assert tags == sorted(mean_tags + [heads_tag(tag) for tag in mean_tags])
    assert heads_tag(mean_tags[0]) == "alignment_heads/00_我爱中国"


def test_image_tags_keep_letters_of_any_script_and_drop_the_rest():
    assert image_tag(3, "我爱中国。") == "alignment/03_我爱中国"
    assert image_tag(12, "Do you like cats?") == "alignment/12_Do_you_like"
    assert image_tag(0, "c a d") == "alignment/00_c_a_d"


KOREAN = {"I": "나는", "you": "너를", "see": "본다", "like": "좋아한다", "cats": "고양이를",
          "dogs": "개를", "tea": "차를", "Tom": "톰은", "eat": "먹는다", "rice": "밥을"}  # fmt: skip


def korean_corpus(path, count: int = 240) -> None:
    """A Tatoeba-format file (English<TAB>Korean<TAB>attribution); every fourth pair long."""
    rng = random.Random(0)
    lines = []
    for index in range(count):
        words = rng.choices(list(KOREAN), k=rng.randint(14, 18) if index % 4 == 0 else 3)
        korean = " ".join(KOREAN[word] for word in words)
        lines.append(f"{' '.join(words)}.\t{korean}.\tCC-BY 2.0 (France) #{index}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_a_pair_without_probes_shows_short_valid_sentences_without_accuracy(tmp_path, caplog):
    korean_corpus(tmp_path / "kor.txt")
    overrides = ["data=tatoeba_zh_en", "data.name=tatoeba_ko_en", "data.src_lang=ko",
                 f"data.source.url={(tmp_path / 'kor.txt').as_uri()}", "data.source.member=''",
                 "data.source.sha256=null", f"data.root={tmp_path / 'data'}", "data.valid_size=30",
                 "data.test_size=30", "data.vocab_cap=true"]  # fmt: skip
    cfg = compose_config([o for o in TINY_TOY if not o.startswith("data")] + overrides)
    assert probes_for("ko", "en") == [] and cfg.logging.probe_file is None
    data = prepare(plain(cfg.data))
    with caplog.at_level(logging.INFO, logger="seq2seq.visualise.alignment_images"):
        (hook,) = validation_hooks(plain(cfg), data)
    messages = [
        r.getMessage() for r in caplog.records if r.name == "seq2seq.visualise.alignment_images"
    ]
    context = _context(cfg, data, tmp_path, step=4)
    hook(context)
    context.logger.close()

    short = [
        line
        for line in data.valid.src_lines
        if len(data.src_tokenizer.encode(line)) <= SAMPLE_MAX_PIECES
    ][:SAMPLE_SHOWN]
    assert len(short) == SAMPLE_SHOWN and short != data.valid.src_lines[:SAMPLE_SHOWN]
    assert [sentence.text for sentence in hook.shown] == short  # in split order
    assert [sentence.text for sentence in validation_hooks(plain(cfg), data)[0].shown] == short
    events = _events(tmp_path)
    assert sorted(events.Tags()["images"]) == [image_tag(i, line) for i, line in enumerate(short)]
    assert ACCURACY_TAG not in events.Tags()["scalars"]
    (message,) = messages  # one line when the hook is made
    assert message.startswith("no alignment probes for ko→en")
    assert f"no {ACCURACY_TAG}" in message and message.endswith(" | ".join(short))


def _links_by_hand(
    attention, source_words: str, source_pieces, target_words: str, target_pieces
) -> Links:
    """Argmax links of one pair: (tgt_len, src_len) weights, source pieces summed and target
    pieces averaged into words, each target word linked to its heaviest source word."""
    source_owner = piece_words(source_words, source_pieces)
    target_owner = piece_words(target_words, target_pieces)
    links = set()
    for word in range(len(words(target_words))):
        rows = [t for t, owner in enumerate(target_owner) if owner == word]
        if not rows:
            continue
        row = attention[rows].mean(dim=0)  # (src_len,)
        per_word = [float(sum(row[s] for s, owner in enumerate(source_owner) if owner == i))
                    for i in range(len(words(source_words)))]  # fmt: skip
        links.add((per_word.index(max(per_word)), word))
    return Links.of(links)


def _aer_by_hand(model, gold, src_tokenizer, tgt_tokenizer, max_len: int):
    """AER counts of the model's last-layer head-mean attention, all pairs in one batch."""
    sources = [as_in_corpus(source_words, "zh") for source_words, *_ in gold]
    targets = [target_words for _, target_words, _ in gold]
    examples = [(src_tokenizer.encode(source)[:max_len], tgt_tokenizer.encode(target)[:max_len])
                for source, target in zip(sources, targets)]  # fmt: skip
    batch = collate(examples, list(range(len(examples))))
    model.eval()
    with torch.no_grad():
        _, attention = model(batch.src, batch.src_mask, batch.tgt_in, need_weights=True)
    proposed = []
    for row, ((source_words, target_words, _), source, target) in enumerate(
        zip(gold, sources, targets)
    ):
        source_pieces = src_tokenizer.pieces(source)[:max_len] + [EOS_PIECE]
        target_pieces = tgt_tokenizer.pieces(target)[:max_len] + [EOS_PIECE]
        weights = attention[row, -1].mean(dim=0)  # (tgt_len + 1, src_len + 1), padded
        weights = weights[: len(target_pieces), : len(source_pieces)]
        proposed.append(
            _links_by_hand(weights, source_words, source_pieces, target_words, target_pieces)
        )
    return corpus_counts(proposed, [links for *_, links in gold])


@pytest.mark.parametrize("max_len", [100, 4])
def test_aer_hook_logs_aer_precision_and_recall_of_the_valid_gold_pairs(tmp_path, max_len):
    corpus = {lang: gold_texts(lang) for lang in ("zh", "en")}
    tokenizers = {
        lang: SubwordTokenizer.train(
            texts, lang=lang, vocab_size=1000, folder=tmp_path, vocab_cap=True
        )
        for lang, texts in corpus.items()
    }
    data = SimpleNamespace(src_tokenizer=tokenizers["zh"], tgt_tokenizer=tokenizers["en"])
    overrides = ["data=tatoeba_zh_en", f"data.max_len={max_len}", "attention=multihead",
                 "attention.heads=2"]  # fmt: skip
    cfg = compose_config([o for o in TINY_TOY if not o.startswith("data")] + overrides)
    context = _context(cfg, data, tmp_path, step=7)
    (hook,) = [hook for hook in validation_hooks(plain(cfg), data) if isinstance(hook, AerHook)]
    assert len(hook.examples) == 100
    assert max(len(example.source_ids) for example in hook.examples) <= max_len
    context.model.train()
    rng_before = torch.get_rng_state()
    hook(context)
    assert torch.equal(torch.get_rng_state(), rng_before) and context.model.training
    context.logger.close()

    events = _events(tmp_path)
    gold = gold_set("zh", "en", "valid")
    counts = _aer_by_hand(context.model, gold, data.src_tokenizer, data.tgt_tokenizer, max_len)
    by_hand = {"aer": counts.aer, "precision": counts.precision, "recall": counts.recall}
    for name, tag in AER_TAGS.items():
        (point,) = events.Scalars(tag)
        assert point.step == 7 and 0.0 <= point.value <= 1.0
        assert point.value == pytest.approx(by_hand[name], abs=1e-6)
    assert context.metrics == {"aer": pytest.approx(by_hand["aer"], abs=1e-6)}  # selectable


def test_english_to_chinese_scores_the_swapped_gold_set():
    tokenizer = _WordTokenizer(gold_texts("zh") + gold_texts("en"), "xx")
    data = SimpleNamespace(src_tokenizer=tokenizer, tgt_tokenizer=tokenizer)
    cfg = compose_config([o for o in TINY_TOY if not o.startswith("data")] + ["data=tatoeba_en_zh"])
    (hook,) = aer_hooks(plain(cfg), data)
    first = hook.examples[0]
    assert first.source.text == "Are we done?" and first.target.text == "我们 完成 了 吗 ?"
    assert first.target_ids == tokenizer.encode("我们完成了吗?")  # fed unsegmented


def test_no_aer_hook_without_attention_or_for_toy_data():
    overrides = ["data=tatoeba_zh_en", "attention=none"]
    model = [o for o in TINY_TOY if not o.startswith("data")]  # the toy source's options aside
    assert validation_hooks(plain(compose_config(model + overrides)), data=None) == []
    toy = compose_config(TINY_TOY + ["data.src_lang=zh", "data.tgt_lang=en"])
    (hook,) = validation_hooks(plain(toy), prepare(plain(toy.data)))  # its own accuracy only
    assert isinstance(hook, AlignmentHook)


# ---------------------------------------------------------------- the chosen head


class DiagonalHeadModel(torch.nn.Module):
    """Teacher-forced attention (batch, 2 layers, 3 heads, T, S) whose layer 0 head 2 is
    the diagonal (position t on position t); the other heads look at the first source
    position or spread evenly."""

    def forward(self, src, src_mask, tgt_in, need_weights=False):
        batch, src_len = src.shape
        tgt_len = tgt_in.size(1)
        attention = torch.full((batch, 2, 3, tgt_len, src_len), 1.0 / src_len)
        attention[:, :, 0] = 0.0
        attention[:, :, 0, :, 0] = 1.0  # every row on the first column
        attention[:, 0, 2] = torch.eye(tgt_len, src_len)
        return torch.zeros(batch, tgt_len, 8), attention if need_weights else None


def diagonal_example(words_count: int) -> GoldExample:
    """A pair of `words_count` one-piece words a side, linked on the diagonal."""
    source = " ".join("abcdefgh"[:words_count])
    target = " ".join("stuvwxyz"[:words_count])
    pieces = lambda text: [f"▁{word}" for word in text.split()] + [EOS_PIECE]  # noqa: E731
    ids = list(range(4, 4 + words_count))
    links = Links.of((j, j) for j in range(words_count))
    return GoldExample(ids, ids, Sentence(source, pieces(source)), Sentence(target, pieces(target)), links)  # fmt: skip


class ScalarLog:
    """A stand-in for the run logger that keeps the scalars it is given."""

    def __init__(self):
        self.logged: list[tuple[int, dict[str, float]]] = []

    def scalars(self, values: dict[str, float], step: int) -> None:
        self.logged.append((step, dict(values)))


def test_aer_hook_chooses_the_gold_diagonal_head_logs_it_and_returns_it():
    examples = [diagonal_example(n) for n in (3, 5, 2)]
    guided = {"alignment": {"guided": True, "layer": -1, "heads": [1]}}
    hook, logger, model = AerHook(examples, config=guided), ScalarLog(), DiagonalHeadModel()
    entries = hook(ValidationContext(model, torch.device("cpu"), logger, 40))
    assert entries == {"alignment_choice": {"layer": 0, "head": 2, "aer": 0.0, "step": 40}}
    assert hook.choice.layer == 0 and hook.choice.head == 2
    ((step, scalars),) = logger.logged
    assert step == 40
    assert [scalars[CHOSEN_TAGS[name]] for name in ("aer", "layer", "head")] == [0.0, 0.0, 2.0]
    mean = hook.counts(model, torch.device("cpu"))  # last layer, head mean: the old valid/aer
    assert scalars[AER_TAGS["aer"]] == mean.aer and mean.aer > 0.5
    guided_counts = AerHook(examples, AlignSettings(layer=1, head=1)).counts(model, torch.device("cpu"))  # fmt: skip
    assert scalars[GUIDED_TAG] == guided_counts.aer


def test_aer_hook_without_attention_logs_and_returns_nothing():
    class NoAttention(DiagonalHeadModel):
        def forward(self, *args, **kwargs):
            return super().forward(*args)[0], None

    hook, logger = AerHook([diagonal_example(2)]), ScalarLog()
    assert hook(ValidationContext(NoAttention(), torch.device("cpu"), logger, 1)) is None
    assert logger.logged == [] and hook.choice is None


def test_images_mark_the_chosen_and_the_guided_head_and_draw_their_layers():
    cfg = compose_config(TINY_TOY + ["attention=multihead", "attention.heads=3"])
    tokenizer = _WordTokenizer(["x y"], "en")
    marks = [HeadMark(0, 2, "chosen", "lowest valid AER"), HeadMark(2, None, "guided", "")]
    hook = AlignmentHook([], [], [], tokenizer, plain(cfg), marks=lambda layers, heads: marks)
    sentence = ShownSentence("alignment/00_a_b", "a b", [4, 5], ["▁a", "▁b", EOS_PIECE])
    attention = torch.full((3, 3, 3, 3), 1.0 / 3)  # (layers, heads, tgt_len, src_len)
    (tag, summary), (every_tag, every) = hook.draw(sentence, Hypothesis(tokenizer.encode("x y"), -1.0, attention), 5)  # fmt: skip
    assert (tag, every_tag) == ("alignment/00_a_b", "alignment_heads/00_a_b")
    assert summary.get_suptitle().endswith(" · mean of 3 heads · guided")
    titles = [axes.get_title() for axes in every.axes if axes.get_title()]
    # the chosen head's layer 0 is drawn beside the last, numbered from 0 as the marks are
    assert titles == [
        "layer 0 · head 0", "layer 0 · head 1", "layer 0 · head 2 · chosen",
        "layer 0 · mean of 3 heads", "layer 2 · head 0", "layer 2 · head 1", "layer 2 · head 2",
        "layer 2 · mean of 3 heads · guided",
    ]  # fmt: skip
