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
* the built-in probe sentences (`seq2seq.visualise.probes`) and their translations.

`python scripts/generalisation.py CKPT ...` prints one row per checkpoint.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from seq2seq.config.build import plain
from seq2seq.config.data_presets import split_data_config
from seq2seq.config.search_settings import SearchSettings
from seq2seq.data.prepare import prepare
from seq2seq.data.tokenizer import is_unspaced_cjk
from seq2seq.metrics import GapInterval, corpus_scores, gap_interval
from seq2seq.search.translator import Translator
from seq2seq.visualise.probes import probes_for

RARE_COUNT = 2  # a word seen at most this often in the training references is rare
LETTER_RUN = re.compile(r"[^\W\d_]+")


@dataclass
class Generalisation:
    valid_bleu: float
    test_bleu: float
    rare_bleu: float
    rare_sentences: int
    probes: list[tuple[str, str, str]]  # (source, reference, translation)
    gap_interval: GapInterval  # test − valid BLEU and its 95% bootstrap interval

    @property
    def gap(self) -> float:
        """test − valid BLEU."""
        return self.test_bleu - self.valid_bleu


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
    rows = rare_rows(prepared.valid.tgt_lines, counts, lang, rare_count)
    if not rows:
        raise ValueError(f"no valid reference holds a word seen at most {rare_count} times")
    rare = corpus_scores([valid_texts[row] for row in rows],
                         [prepared.valid.tgt_lines[row] for row in rows], lang)  # fmt: skip
    probes = probes_for(data["src_lang"], data["tgt_lang"])
    outputs = translator.translate([probe.source for probe in probes], settings)
    return Generalisation(
        valid_bleu,
        test_bleu,
        float(rare["bleu"]),
        len(rows),
        [(p.source, p.reference, out.text) for p, out in zip(probes, outputs, strict=True)],
        gap,
    )
