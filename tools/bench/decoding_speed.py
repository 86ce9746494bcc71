"""Decoding speed: sentences/s of `Translator.translate`, greedy and beam 5, on the test split.

The checkpoint is loaded through `Translator.load` (its config validated, only the project's
own classes built). The test sentences come from the project's own data config named as the
checkpoint's corpus, below ./data, never from the checkpoint's URL or root. After a warm-up
on 16 sentences, each search makes `DECODE_REPS` passes; the median is reported, with the
BLEU of the last pass.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import torch

from seq2seq.config.build import plain
from seq2seq.config.data_presets import split_data_config
from seq2seq.config.search_settings import SearchSettings
from seq2seq.data.prepare import prepare
from seq2seq.metrics import corpus_scores
from seq2seq.search.translator import Translator
from tools.bench.entry import shown_path

DECODE_REPS = 3  # passes over the test sentences per search; the median is reported


def timed_translations(translator: Translator, sources: list[str], beam: int) -> tuple:
    """(median seconds of DECODE_REPS passes, the last pass's translations)."""
    timings = []
    for _ in range(DECODE_REPS):
        started = time.perf_counter()
        translations = translator.translate(sources, SearchSettings(beam_size=beam))
        timings.append(time.perf_counter() - started)
    return statistics.median(timings), translations


def decoding_rows(checkpoint: Path, sentences: int, device: torch.device) -> list[str]:
    """Greedy and beam-5 rows for one checkpoint, on the first `sentences` test pairs."""
    translator = Translator.load(checkpoint, device)  # validates the checkpoint's config
    test = prepare(split_data_config(plain(translator.config.data), None, Path("data"))).test
    sources, references = test.src_lines[:sentences], test.tgt_lines[:sentences]
    translator.translate(sources[:16], SearchSettings(beam_size=1))  # warm-up
    rows = []
    for beam in (1, 5):
        seconds, translations = timed_translations(translator, sources, beam)
        hypotheses = [translation.text for translation in translations]
        bleu = corpus_scores(hypotheses, references, translator.tgt_tokenizer.lang)["bleu"]
        search = "greedy" if beam == 1 else f"beam {beam}"
        rate = len(sources) / seconds
        rows.append(
            f"| {shown_path(checkpoint)} | {search} | {len(sources)} | {rate:.1f} | {bleu:.2f} |"
        )
    return rows


def decoding_section(checkpoints: list[Path], sentences: int, device: torch.device) -> list[str]:
    """The decoding table; a checkpoint that fails to load or decode gets a `failed:` row."""
    lines = ["| checkpoint | search | sentences | sentences/s | BLEU |", "|---|---|---|---|---|"]
    for checkpoint in checkpoints:
        try:
            lines += decoding_rows(checkpoint, sentences, device)
        except (OSError, RuntimeError, ValueError) as error:  # CheckpointError is a RuntimeError
            message = str(error).splitlines()[0]
            print(f"{checkpoint}: {error}", file=sys.stderr)
            lines.append(f"| {shown_path(checkpoint)} | failed: {message} | — | — | — |")
    return lines + [
        "",
        f"Batches of 128 sentences sorted by length (`SearchSettings` defaults); median of "
        f"{DECODE_REPS} passes.",
    ]
