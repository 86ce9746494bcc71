"""Hierarchical attention trained on pseudo-documents from the command line's config: the
model cuts each source at the separator (SEP_ID is the separator's id in the prepared
vocabulary), the alignment hook logs the sentence level beside the words, the viewer
shows it as its own view, and the scores of a document never count the separator."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import compose_config
from hook_fixtures import hooks_run
from test_documents import SIZES, numbered_pair

from seq2seq.config.build import plain
from seq2seq.config.search_settings import SearchSettings
from seq2seq.data.documents import separator_id, split_document
from seq2seq.data.prepare import prepare
from seq2seq.lab.lab_models import TINY_GRU_MODEL
from seq2seq.metrics.sacrebleu_scores import corpus_scores
from seq2seq.models.attention.hierarchical import sentence_weights
from seq2seq.models.model import document_segments
from seq2seq.runs.assemble import train_and_test
from seq2seq.search.translator import Translator
from seq2seq.special_tokens import EOS_ID, SEP_ID, SEP_PIECE
from seq2seq.visualise.viewer import viewer_data


def overrides(root: Path) -> list[str]:
    corpus = root / "corpus"
    prefixes = [f"data.source.{split}_prefix={corpus / split}" for split in SIZES]
    return [*TINY_GRU_MODEL, "data=text_pair", *prefixes, "data.src_lang=en",
            "data.tgt_lang=zh", "data.src_vocab_size=48", "data.tgt_vocab_size=40",
            "data.max_len=400", "data.max_tokens=2000", "data.name=given_docs",
            "data.documents={min_sentences:2,max_sentences:4,order:consecutive}",
            f"data.root={root / 'data'}", "attention=hierarchical", "trainer.max_steps=3",
            "trainer.valid_every=3", "trainer.threads=1", "trainer.test_search.beam_size=1",
            "logging.progress_bar=false", "logging.tensorboard=false"]  # fmt: skip


@pytest.fixture(scope="module")
def documents_run(tmp_path_factory) -> Path:
    """A corpus of numbered pairs in train / valid / test files; its config (English to
    Chinese documents of 2-4 sentences, hierarchical attention)."""
    root = tmp_path_factory.mktemp("hierarchical_documents")
    (root / "corpus").mkdir()
    start = 0
    for split, count in SIZES.items():
        pairs = [numbered_pair(number) for number in range(start, start + count)]
        start += count
        for side, lang in enumerate(("en", "zh")):
            text = "".join(pair[side] + "\n" for pair in pairs)
            (root / "corpus" / f"{split}.{lang}").write_text(text, encoding="utf-8")
    return root


def test_the_separator_has_the_id_the_model_looks_for(documents_run):
    data = prepare(plain(compose_config(overrides(documents_run)).data))
    assert separator_id(data.src_tokenizer) == SEP_ID == separator_id(data.tgt_tokenizer)
    src, _ = data.valid.examples[0]
    assert SEP_ID in src  # documents of at least two sentences


def test_the_hook_logs_the_sentence_level_of_each_document(documents_run, monkeypatch):
    logger, _, model, _, _ = hooks_run(monkeypatch, compose_config(overrides(documents_run)), 3)
    assert model.separator_id == SEP_ID
    words = [tag for tag in logger.images if tag.startswith("alignment/")]
    sentences = [tag for tag in logger.images if tag.startswith("alignment_sentences/")]
    assert words and sorted(sentences) == sorted(
        tag.replace("alignment/", "alignment_sentences/") for tag in words
    )


def test_a_trained_model_shows_the_sentence_level_in_the_viewer(documents_run):
    run = documents_run / "run"
    train_and_test(compose_config(overrides(documents_run)), run, outputs_root=documents_run)
    translator = Translator.load(run / "checkpoints" / "best.pt")
    line = f"{numbered_pair(1)[0]}{SEP_PIECE} {numbered_pair(2)[0]}"
    [translation] = translator.translate([line], SearchSettings(), need_weights=True)
    data = viewer_data(translator, [translation])
    views = {view["name"]: view for view in data["sentences"][0]["views"]}
    assert views["sentences"]["columns"] == ["sentence 1", "sentence 2"]
    source = torch.tensor([translator.src_tokenizer.encode(line) + [EOS_ID]])
    expected = sentence_weights(translation.hypotheses[0].attention.float(),
                                document_segments(source, SEP_ID))  # fmt: skip
    for row, want in zip(views["sentences"]["layers"][0]["mean"],
                         expected[0].mean(0).tolist(), strict=True):  # fmt: skip
        assert row == pytest.approx(want, abs=1e-4)
        assert sum(row) == pytest.approx(1.0, abs=1e-3)


def test_a_documents_score_does_not_count_the_separator():
    """Left in, `<sep>` is three tokens for sacrebleu that every output matches: a wrong
    translation of a long document would score well."""
    references = [f"Hello there.{SEP_PIECE} I see a red bird.{SEP_PIECE} It runs."]
    wrong = [f"Fish.{SEP_PIECE} Fish.{SEP_PIECE} Fish."]
    scores = corpus_scores(wrong, references, "en")
    words_only = corpus_scores(["Fish. Fish. Fish."], [" ".join(split_document(references[0]))],
                               "en")  # fmt: skip
    assert scores["bleu"] == words_only["bleu"] < 5
    assert scores["chrf"] == words_only["chrf"]
