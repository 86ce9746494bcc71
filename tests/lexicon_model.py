"""A tiny zh→en Transformer (2 layers, 2 heads, sentencepiece vocabularies of 30 pieces, at
most `MAX_PIECES` source pieces) trained in seconds on the toy lexicon corpus
(`helpers.toy_corpus_lines`), for the tests that need a real language pair: the served
page, the warnings about the source. Its translations are rough."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest
from helpers import compose_config, toy_corpus_lines

from seq2seq.data.fetch import MIRROR_ENV
from seq2seq.runs.assemble import train_and_test

MAX_PIECES = 20  # data.max_len: the most source pieces the model reads
LEXICON_TRANSFORMER = [
    "data=tatoeba_zh_en", "data.name=lexicon", "data.source.url=https://example.org/anki/toy-eng.zip",
    "data.source.member=toy.txt", "data.source.sha256=null", "data.valid_size=20", "data.test_size=20",
    "data.src_vocab_size=30", "data.tgt_vocab_size=30", f"data.max_len={MAX_PIECES}", "data.max_tokens=256",
    "encoder=transformer", "decoder=transformer", "attention=multihead", "model.embed_dim=16",
    "encoder.hidden_size=16", "decoder.hidden_size=16", "encoder.num_layers=2",
    "decoder.num_layers=2", "encoder.heads=2", "decoder.heads=2", "attention.heads=2",
    "encoder.ff_size=32", "decoder.ff_size=32", "trainer.max_steps=30", "trainer.valid_every=30",
    "trainer.threads=1", "trainer.log_every=30", "trainer.test_search.beam_size=1",
    "logging.progress_bar=false", "logging.tensorboard=false",
]  # fmt: skip


def lexicon_checkpoint(root: Path) -> Path:
    """Train the model under `root` (its corpus served from a mirror folder there, nothing
    downloaded); its `best.pt`."""
    (root / "mirror").mkdir()
    with zipfile.ZipFile(root / "mirror" / "toy-eng.zip", "w") as archive:
        archive.writestr("toy.txt", "\n".join(toy_corpus_lines(400, seed=0)) + "\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(MIRROR_ENV, str(root / "mirror"))
        overrides = LEXICON_TRANSFORMER + [f"data.root={root / 'data'}"]
        train_and_test(compose_config(overrides), root / "run", outputs_root=root)
    return root / "run" / "checkpoints" / "best.pt"
