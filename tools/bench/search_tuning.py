"""The test search chosen on valid: a checkpoint's valid split translated with each beam
size and GNMT length penalty α of a grid,

    score(y) = log P(y | x) / lp(y),      lp(y) = ((5 + |y|) / 6)^α      (Wu et al. 2016, §7)

scored with the BLEU of the validation (sacrebleu, 13a) and the length ratio (hypothesis
words / reference words). The test split is not read: the best valid setting is what a
run's `trainer.test_search` should be.

    python scripts/tune_search.py RUN/checkpoints/best.pt --beams 5 --alphas 0.6 1.0 1.4
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sacrebleu.metrics import BLEU

from seq2seq.config.build import plain
from seq2seq.config.data_presets import split_data_config
from seq2seq.config.search_settings import SearchSettings
from seq2seq.data.prepare import prepare
from seq2seq.search.translator import Translator


@dataclass(frozen=True)
class SearchScore:
    beam_size: int
    length_penalty: float
    bleu: float
    length_ratio: float


def tune(
    checkpoint: Path, data_root: Path, beams: Sequence[int], alphas: Sequence[float]
) -> list[SearchScore]:
    """Valid BLEU and length ratio of every (beam, α) of the grid, in grid order."""
    translator = Translator.load(checkpoint, "cpu")
    prepared = prepare(split_data_config(plain(translator.config.data), None, data_root))
    sources, references = prepared.valid.src_lines, prepared.valid.tgt_lines
    found = []
    for beam in beams:
        for alpha in alphas:
            settings = SearchSettings(beam_size=beam, length_penalty=alpha)
            texts = [t.text for t in translator.translate(list(sources), settings)]
            score = BLEU().corpus_score(texts, [list(references)])
            found.append(SearchScore(beam, alpha, score.score, score.sys_len / score.ref_len))
    return found
