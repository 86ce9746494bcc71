"""Subword regularisation (`trainer.subword_nbest`): draws that follow P(x)^α over the n best
(against sentencepiece's own segmentation scores), that keep the text and the length limit,
the same draw for the same batch, a run that is reproducible and resumes exactly, and the
refusals that name the option."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import compose_config
from test_data_sources import corpus_pairs, write_pairs
from test_train import _train

from seq2seq.config.build import ConfigError
from seq2seq.config.value_checks import check_settings
from seq2seq.data.batching import ParallelData
from seq2seq.data.subword_sampling import SideSampler, SubwordSampling
from seq2seq.data.tokenizer import SubwordTokenizer
from seq2seq.lab.lab_models import TINY_GRU_MODEL
from seq2seq.special_tokens import EOS_ID

TEXTS = [pair[0] for pair in corpus_pairs(300, seed=0)]  # English sentences of the toy lexicon


@pytest.fixture(scope="module")
def unigram(tmp_path_factory) -> SubwordTokenizer:
    folder = tmp_path_factory.mktemp("unigram")
    return SubwordTokenizer.train(TEXTS, vocab_size=60, lang="en", folder=folder, vocab_cap=True)


def reference_probabilities(tokenizer: SubwordTokenizer, text: str, nbest: int, alpha: float):
    """The n best of `text` with P(x)^α / Σ P(x')^α, from sentencepiece's own scores of whole
    segmentations (log P(x)), not from the sums of piece scores the sampler uses."""
    proto = tokenizer.processor.nbest_encode_as_proto(text, nbest_size=nbest)
    candidates = [tuple(piece.id for piece in best.pieces) for best in proto.nbests]
    scores = np.array([best.score for best in proto.nbests])
    weights = np.exp(alpha * (scores - scores.max()))
    return dict(zip(candidates, weights / weights.sum(), strict=True))


def a_text_with_candidates(tokenizer: SubwordTokenizer, least: int) -> str:
    return next(t for t in TEXTS if len(tokenizer.processor.nbest_encode(t, nbest_size=8)) >= least)


@pytest.mark.parametrize("alpha", [0.0, 0.3])
def test_the_draws_follow_p_to_the_alpha_over_the_n_best(unigram, alpha):
    text = a_text_with_candidates(unigram, 4)
    expected = reference_probabilities(unigram, text, 4, alpha)
    sampler, rng = SideSampler.of(unigram, "source"), np.random.default_rng(7)
    draws = sampler.sample([text] * 4000, 4, alpha, 100, rng)
    for candidate, share in expected.items():
        seen = sum(tuple(draw) == candidate for draw in draws) / len(draws)
        assert seen == pytest.approx(share, abs=0.03), candidate
    assert {tuple(draw) for draw in draws} <= set(expected)


def test_a_large_alpha_gives_the_best_and_every_draw_keeps_the_text(unigram):
    sampler, rng = SideSampler.of(unigram, "source"), np.random.default_rng(0)
    texts = TEXTS[:50]
    assert sampler.sample(texts, 8, 1000.0, 100, rng) == [unigram.encode(t) for t in texts]
    draws = sampler.sample(texts, 8, 0.0, 100, rng)
    assert [unigram.decode(ids) for ids in draws] == [
        unigram.decode(unigram.encode(t)) for t in texts
    ]
    assert any(draw != unigram.encode(t) for draw, t in zip(draws, texts, strict=True))


def test_a_candidate_longer_than_max_len_is_never_drawn(unigram):
    text = a_text_with_candidates(unigram, 4)
    limit = len(unigram.encode(text))  # the best fits; the longer candidates do not
    draws = SideSampler.of(unigram, "source").sample(
        [text] * 200, 8, 0.0, limit, np.random.default_rng(1)
    )
    assert all(len(draw) <= limit for draw in draws)
    assert {tuple(draw) for draw in draws} == {
        c for c in reference_probabilities(unigram, text, 8, 0.0) if len(c) <= limit
    }


def test_a_batch_is_drawn_the_same_for_the_same_key_and_otherwise_anew(unigram):
    texts = TEXTS[:40]
    data = ParallelData([(unigram.encode(t), unigram.encode(t)) for t in texts], texts, texts)
    sampling = SubwordSampling.of(unigram, unigram, 8, 0.0, 100, seed=3)
    indices = list(range(0, 40, 2))
    first = sampling.batch(data, indices, (0, 0, 5))
    assert first.src.equal(sampling.batch(data, indices, (0, 0, 5)).src)
    assert not first.src.equal(sampling.batch(data, indices, (0, 1, 5)).src)
    assert first.indices == indices
    eos = (first.src == EOS_ID).nonzero()[:, 1]  # (batch,) each row's EOS, after its pieces
    assert [
        unigram.decode(row[:end].tolist()) for row, end in zip(first.src, eos, strict=True)
    ] == [unigram.decode(unigram.encode(texts[i])) for i in indices]


def test_off_below_two_and_refused_for_a_model_without_n_best(unigram, tmp_path):
    assert SubwordSampling.of(unigram, unigram, 1, 0.1, 100, seed=0) is None
    bpe = SubwordTokenizer.train(TEXTS, vocab_size=60, lang="en", folder=tmp_path,
                                 model_type="bpe", vocab_cap=True)  # fmt: skip
    with pytest.raises(
        ValueError, match=r"trainer\.subword_nbest needs unigram .* the target model"
    ):
        SubwordSampling.of(unigram, bpe, 8, 0.1, 100, seed=0)


def corpus_overrides(tmp_path) -> list[str]:
    """A tiny English → Chinese text_pair corpus with unigram subword models, and a GRU."""
    folder = tmp_path / "corpus"
    for seed, (split, count) in enumerate((("train", 240), ("valid", 8), ("test", 8))):
        write_pairs(folder, split, corpus_pairs(count, seed))
    return [
        "data=text_pair", "data.name=given", "data.src_lang=en", "data.tgt_lang=zh",
        *(f"data.source.{split}_prefix={folder / split}" for split in ("train", "valid", "test")),
        "data.src_vocab_size=60", "data.tgt_vocab_size=40", "data.vocab_cap=true",
        "data.max_tokens=400", *TINY_GRU_MODEL,
        "trainer.threads=1", "trainer.log_every=1", "trainer.valid_every=3",
        "trainer.test_search.beam_size=1", "logging.progress_bar=false", "logging.tensorboard=false",
    ]  # fmt: skip


def test_a_run_is_reproducible_differs_from_best_segmentation_and_resumes_exactly(tmp_path):
    common = corpus_overrides(tmp_path)
    sampled = ["trainer.subword_nbest=8", "trainer.subword_alpha=0.2"]

    def train(name: str, *overrides: str) -> list[float]:
        return _train(tmp_path, name, list(overrides), base=common)[1]

    straight = train("straight", *sampled, "trainer.max_steps=6")
    assert train("again", *sampled, "trainer.max_steps=6") == straight
    assert train("best", "trainer.max_steps=6") != straight
    first = train("halves", *sampled, "trainer.max_steps=3")
    second = train(
        "resume", *sampled, "trainer.max_steps=6", f"trainer.resume={tmp_path / 'halves'}"
    )
    assert first + second == pytest.approx(straight, rel=1e-6)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["trainer.subword_nbest=5000"], r"trainer\.subword_nbest"),
        (["trainer.subword_alpha=-1"], r"trainer\.subword_alpha"),
        (["data.model_type=bpe"], r"data\.model_type=bpe has no n-best"),
        (["alignment=guided"], r"changes the pieces that guided alignment's links"),
        (["alignment=layer"], r"changes the pieces that guided alignment's links"),
    ],
)
def test_refusals_name_the_keys(tmp_path, overrides, message):
    cfg = compose_config([*corpus_overrides(tmp_path), "trainer.subword_nbest=8", *overrides])
    with pytest.raises(ConfigError, match=message):
        check_settings(cfg)


def test_the_unsupervised_layer_needs_no_links_and_is_allowed(tmp_path):
    cfg = compose_config([*corpus_overrides(tmp_path), "trainer.subword_nbest=8",
                          "alignment=layer", "alignment.training=unsupervised"])  # fmt: skip
    check_settings(cfg)


def test_a_toy_run_with_sampling_stops_with_one_line_naming_the_key(tmp_path):
    with pytest.raises(ConfigError, match=r"cut by SymbolTokenizer: set trainer\.subword_nbest=0"):
        _train(tmp_path, "toy", ["trainer.subword_nbest=8", "trainer.max_steps=2"])
