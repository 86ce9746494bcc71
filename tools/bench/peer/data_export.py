"""Our prepared split and sentencepiece models, written as JoeyNMT reads them (plain text).

The same training pairs (after our length filter), `DEV_PAIRS` dev pairs (JoeyNMT needs a dev
set to start; it is never validated) and the first test sentences, with the test references
under another name so that JoeyNMT decodes the sources alone, as our Translator does. A
time-to-quality run adds the first valid pairs as `quality.<src>` and
`quality-reference.<tgt>`: every framework's checkpoints are scored on them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from seq2seq.config.build import plain
from seq2seq.data.prepare import prepare
from tools.bench.peer.ours import our_config
from tools.bench.peer.shared_settings import DEV_PAIRS

# The splits whose references lie under another name (decoded from their sources alone).
REFERENCE_NAMES = {"test": "reference", "quality": "quality-reference"}


def write_export(
    prepared: Any,
    src_lang: str,
    tgt_lang: str,
    sentences: int,
    folder: Path,
    quality_sentences: int = 0,
) -> dict:
    """Write `prepared` (our PreparedData) as JoeyNMT reads it: `train|dev.<lang>` and
    `test.<src>` text (`reference.<tgt>` beside it), `spm.<lang>.model` and `vocab.<lang>`
    (the pieces in id order), and `languages.json` (`{"src": ..., "tgt": ...}`); with
    `quality_sentences`, the first that many valid pairs as `quality.<src>` (its references
    `quality-reference.<tgt>`). Returns the pairs per split."""
    folder.mkdir(parents=True, exist_ok=True)
    splits = {
        "train": (prepared.train.src_lines, prepared.train.tgt_lines),
        "dev": (
            _first(prepared.valid.src_lines, DEV_PAIRS),
            _first(prepared.valid.tgt_lines, DEV_PAIRS),
        ),
        "test": (
            _first(prepared.test.src_lines, sentences),
            _first(prepared.test.tgt_lines, sentences),
        ),
    }
    if quality_sentences:
        splits["quality"] = (
            _first(prepared.valid.src_lines, quality_sentences),
            _first(prepared.valid.tgt_lines, quality_sentences),
        )
    for split, (sources, targets) in splits.items():
        _write_lines(folder / f"{split}.{src_lang}", sources)
        # Test references under another name: JoeyNMT then decodes the sources alone, as
        # our Translator does, without tokenising references inside the timed call.
        _write_lines(folder / f"{REFERENCE_NAMES.get(split, split)}.{tgt_lang}", targets)
    for lang, tokenizer in ((src_lang, prepared.src_tokenizer), (tgt_lang, prepared.tgt_tokenizer)):
        (folder / f"spm.{lang}.model").write_bytes(tokenizer.to_bytes())
        pieces = [tokenizer.id_to_piece(i) for i in range(tokenizer.vocab_size)]
        _write_lines(folder / f"vocab.{lang}", pieces)
    languages = json.dumps({"src": src_lang, "tgt": tgt_lang})
    (folder / "languages.json").write_text(languages, encoding="utf-8")
    return {split: len(pair[0]) for split, pair in splits.items()}


def _first(lines: Sequence[str], n: int) -> list[str]:
    """The first `n` lines of any sequence (a list, or our lazily read text lines)."""
    return [lines[i] for i in range(min(n, len(lines)))]


def _write_lines(path: Path, lines: Sequence[str]) -> None:
    """One line each; a line that another reader would split (JoeyNMT uses splitlines)
    is an error rather than a silent misalignment."""
    for number, line in enumerate(lines, 1):
        if not line or line.splitlines() != [line]:
            raise ValueError(f"{path.name}: line {number} is empty or holds a line break")
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def export_data(
    shape: str, sentences: int, folder: Path, quality_sentences: int = 0
) -> dict[str, int]:
    """Prepare the data config of preset `shape` (as its training does) and export it to
    `folder` (`write_export`); the pairs per split."""
    data_cfg = plain(our_config(shape).data)
    prepared = prepare(data_cfg)
    src, tgt = data_cfg["src_lang"], data_cfg["tgt_lang"]
    return write_export(prepared, src, tgt, sentences, folder, quality_sentences)
