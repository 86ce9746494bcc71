"""How far a checkpoint's quality reaches beyond its training data, measured without the
test split's help in choosing anything:

* valid and test BLEU (beam 5) and their gap, test − valid: a model chosen on valid should
  score about the same on test. With 1,000 sentences a split, part of any gap is the
  choice of the sentences alone: the gap's 95% interval under the unpaired bootstrap
  (`seq2seq.metrics.gap_interval`) says how much; a gap whose interval holds 0 is within
  that noise;
* BLEU on the rare-word slice of the valid split: the valid pairs whose reference holds a
  word that the training references hold at most `RARE_COUNT` times (words: lower-cased
  runs of letters, or single characters for a language written without spaces). The slice
  comes from the training split's own counts and the valid split, never from the test split;
* BLEU on the rare-character slices of the valid and test splits: the pairs whose source
  holds a character that the training sources hold at most `RARE_COUNT` times (none at
  all included). The slices are reported, never used to choose;
* unseen characters: the valid and test pairs whose source holds a character the training
  sources never hold, translated as they are and with those characters deleted, both
  scored against the same reference: a model that handles an unknown character scores
  the first at least as high as the second (the character carries meaning the reference
  has), one it derails scores it lower;
* constructed pairs: every valid and test pair whose source holds no unseen character,
  translated as it is and with one character that no split holds put in at a seeded place
  (`with_unseen_character`), both scored against the same reference: with the character in
  should score no lower;
* the built-in probe sentences (`seq2seq.visualise.probes`) and their translations.

`python scripts/generalisation.py CKPT ...` prints one row per checkpoint.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from seq2seq.config.build import plain
from seq2seq.config.data_presets import split_data_config
from seq2seq.config.search_settings import SearchSettings
from seq2seq.data.prepare import prepare
from seq2seq.data.tokenizer import is_unspaced_cjk
from seq2seq.metrics import GapInterval, corpus_scores, gap_interval
from seq2seq.search.translator import Translator
from seq2seq.visualise.probes import probes_for

RARE_COUNT = 2  # a word seen at most this often in the training references is rare
INSERTED_CHOICES = 20  # unseen characters the constructed pairs draw from
SEED = 1234  # of the constructed pairs' characters and places
LETTER_RUN = re.compile(r"[^\W\d_]+")


@dataclass
class Generalisation:
    valid_bleu: float
    test_bleu: float
    rare_bleu: float
    rare_sentences: int
    probes: list[tuple[str, str, str]]  # (source, reference, translation)
    gap_interval: GapInterval  # test − valid BLEU and its 95% bootstrap interval
    rare_chars: dict[str, Slice]  # split -> the rare-character slice
    unseen_chars: dict[str, UnseenCharacters]  # split -> with and without unseen characters
    inserted: dict[str, UnseenCharacters]  # split -> constructed pairs: one unseen character put in

    @property
    def gap(self) -> float:
        """test − valid BLEU."""
        return self.test_bleu - self.valid_bleu


@dataclass(frozen=True)
class Slice:
    """BLEU on some pairs of a split and how many they are."""

    bleu: float
    sentences: int


@dataclass(frozen=True)
class UnseenCharacters:
    """The pairs of a split whose source holds a character never seen in training: BLEU of
    their translations as they are and with those characters deleted from the source."""

    with_them: float
    without_them: float
    sentences: int


def words(line: str, lang: str) -> list[str]:
    """The words rarity is counted on: characters of an unspaced language (zh, ja), else
    lower-cased runs of letters."""
    if is_unspaced_cjk(lang):
        return [char for char in line if char.isalpha()]
    return LETTER_RUN.findall(line.lower())


def word_counts(lines: Iterable[str], lang: str) -> Counter:
    counts: Counter = Counter()
    for line in lines:
        counts.update(words(line, lang))
    return counts


def rare_rows(references: Sequence[str], counts: Counter, lang: str, most: int) -> list[int]:
    """The rows of `references` holding a word seen at most `most` times in `counts`."""
    return [
        row
        for row, line in enumerate(references)
        if any(counts[word] <= most for word in words(line, lang))
    ]


def rare_char_rows(sources: Sequence[str], counts: Counter, most: int) -> list[int]:
    """The rows of `sources` holding a (non-space) character seen at most `most` times."""
    return [row for row, line in enumerate(sources)
            if any(counts[char] <= most for char in line if not char.isspace())]  # fmt: skip


def without_unseen(line: str, counts: Counter) -> str:
    """`line` without the characters `counts` never saw."""
    return "".join(char for char in line if char.isspace() or counts[char] > 0)


def unseen_characters(counts: Counter, lines: Iterable[str], how_many: int) -> list[str]:
    """The first `how_many` CJK ideographs (from U+4E00) that neither `counts` nor `lines`
    hold: characters every split lacks."""
    present = set("".join(lines))
    found = []
    for code in range(0x4E00, 0xA000):
        if counts[chr(code)] == 0 and chr(code) not in present:
            found.append(chr(code))
            if len(found) == how_many:
                return found
    raise ValueError(f"fewer than {how_many} CJK ideographs are absent from the data")


def with_unseen_character(lines: Sequence[str], unseen: Sequence[str], seed: int) -> list[str]:
    """Each line with one of `unseen` put in before a seeded position among its characters
    (never after the last, so a closing stop stays last)."""
    rng = np.random.default_rng(seed)
    out = []
    for line in lines:
        at = int(rng.integers(0, max(len(line), 1)))
        out.append(line[:at] + unseen[int(rng.integers(len(unseen)))] + line[at:])
    return out


def measure(checkpoint: Path, data_root: Path, rare_count: int = RARE_COUNT) -> Generalisation:
    """Translate the valid and test splits and the probes with beam 5 (module docstring)."""
    translator = Translator.load(checkpoint, "cpu")
    data = plain(translator.config.data)
    prepared = prepare(split_data_config(data, None, data_root))
    lang = translator.tgt_tokenizer.lang
    settings = SearchSettings(beam_size=5)

    def bleu(sources: Sequence[str], references: Sequence[str]) -> tuple[float, list[str]]:
        texts = [t.text for t in translator.translate(list(sources), settings)]
        return float(corpus_scores(texts, list(references), lang)["bleu"]), texts

    valid_bleu, valid_texts = bleu(prepared.valid.src_lines, prepared.valid.tgt_lines)
    test_bleu, test_texts = bleu(prepared.test.src_lines, prepared.test.tgt_lines)
    gap = gap_interval((valid_texts, prepared.valid.tgt_lines),
                       (test_texts, prepared.test.tgt_lines), lang)  # fmt: skip
    counts = word_counts(prepared.train.tgt_lines, lang)
    rare_word_rows = rare_rows(prepared.valid.tgt_lines, counts, lang, rare_count)
    if not rare_word_rows:
        raise ValueError(f"no valid reference holds a word seen at most {rare_count} times")
    rare = corpus_scores([valid_texts[row] for row in rare_word_rows],
                         [prepared.valid.tgt_lines[row] for row in rare_word_rows], lang)  # fmt: skip
    char_counts = Counter("".join(prepared.train.src_lines))
    splits = {"valid": (prepared.valid, valid_texts), "test": (prepared.test, test_texts)}
    rare_chars, unseen_chars, inserted = {}, {}, {}
    unseen = unseen_characters(
        char_counts, [*prepared.valid.src_lines, *prepared.test.src_lines], INSERTED_CHOICES
    )
    for name, (split, texts) in splits.items():
        rows = rare_char_rows(split.src_lines, char_counts, rare_count)
        picked = corpus_scores([texts[row] for row in rows],
                               [split.tgt_lines[row] for row in rows], lang) if rows else None  # fmt: skip
        rare_chars[name] = Slice(float(picked["bleu"]) if picked else float("nan"), len(rows))
        rows = rare_char_rows(split.src_lines, char_counts, 0)
        references = [split.tgt_lines[row] for row in rows]
        cut = [without_unseen(split.src_lines[row], char_counts) for row in rows]
        unseen_chars[name] = UnseenCharacters(
            bleu([split.src_lines[row] for row in rows], references)[0] if rows else float("nan"),
            bleu(cut, references)[0] if rows else float("nan"),
            len(rows),
        )
        kept = sorted(set(range(len(split.src_lines))) - set(rows))  # no unseen character
        references = [split.tgt_lines[row] for row in kept]
        put_in = with_unseen_character([split.src_lines[row] for row in kept], unseen, SEED)
        inserted[name] = UnseenCharacters(
            bleu(put_in, references)[0],
            float(corpus_scores([texts[row] for row in kept], references, lang)["bleu"]),
            len(kept),
        )
    probes = probes_for(data["src_lang"], data["tgt_lang"])
    outputs = translator.translate([probe.source for probe in probes], settings)
    return Generalisation(
        valid_bleu,
        test_bleu,
        float(rare["bleu"]),
        len(rare_word_rows),
        [(p.source, p.reference, out.text) for p, out in zip(probes, outputs, strict=True)],
        gap,
        rare_chars,
        unseen_chars,
        inserted,
    )
