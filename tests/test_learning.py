"""Models must learn toy tasks whose alignment we know, and attention must find it.

On `toy_reverse` target position j copies source position n-1-j: an attention model
should translate held-out sequences exactly and put its argmax on the anti-diagonal.
Without attention the decoder sees one fixed vector, which must do clearly worse on long
sequences: that is the point of attention.
"""

from __future__ import annotations

import pytest
from helpers import compose_config

from seq2seq.decoding import SearchSettings, translate_ids
from seq2seq.runs.assemble import Placement, assemble_trainer
from seq2seq.training.trainer import Trainer
from seq2seq.visualise.alignment import toy_alignment_accuracy

COMMON = [
    "data=toy_reverse",
    "data.max_tokens=1024",
    "trainer.threads=1",
    "trainer.log_every=100",
    "trainer.label_smoothing=0.0",
    "logging.progress_bar=false",
    "logging.tensorboard=false",
    "schedule=inverse_sqrt",
    "schedule.warmup_steps=50",
    "optim.lr=3e-3",
]
RNN = ["encoder=gru", "decoder=gru", "encoder.hidden_size=32", "decoder.hidden_size=64",
       "model.embed_dim=64", "encoder.dropout=0.0", "decoder.dropout=0.0"]  # fmt: skip
TRANSFORMER = ["encoder=transformer", "decoder=transformer", "attention=multihead",
               "encoder.hidden_size=64", "decoder.hidden_size=64", "model.embed_dim=64",
               "encoder.num_layers=2", "decoder.num_layers=2", "encoder.heads=4",
               "decoder.heads=4", "attention.heads=4", "encoder.ff_size=128",
               "decoder.ff_size=128", "encoder.dropout=0.0", "decoder.dropout=0.0"]  # fmt: skip


def train_toy(tmp_path, overrides: list[str]) -> tuple[Trainer, object]:
    cfg = compose_config(COMMON + overrides + [f"data.root={tmp_path}"])
    placement = Placement.single("cpu")
    trainer = assemble_trainer(cfg, tmp_path, placement=placement, observe=False)
    trainer.fit()
    return trainer, trainer.data


def exact_match(trainer: Trainer, data) -> float:
    sources = [src for src, _ in data.test.examples]
    nbest = translate_ids(trainer.model, sources, SearchSettings(beam_size=1), trainer.device)
    hits = [hyps[0].tokens == list(tgt) for hyps, (_, tgt) in zip(nbest, data.test.examples)]
    return sum(hits) / len(hits)


def alignment(trainer: Trainer, data, task: str = "reverse") -> float:
    return toy_alignment_accuracy(trainer.model, data.test.examples, task, trainer.device)


@pytest.fixture(scope="module")
def gru_additive(tmp_path_factory):
    overrides = RNN + ["attention=additive", "trainer.max_steps=500", "trainer.valid_every=500",
                       "data.toy_train_size=4000"]  # fmt: skip
    return train_toy(tmp_path_factory.mktemp("gru"), overrides)


def test_gru_with_additive_attention_learns_to_reverse(gru_additive):
    trainer, data = gru_additive
    assert exact_match(trainer, data) >= 0.95
    assert alignment(trainer, data) >= 0.90


def test_transformer_with_multihead_attention_learns_to_reverse(tmp_path):
    overrides = TRANSFORMER + ["trainer.max_steps=1200", "trainer.valid_every=1200",
                               "data.toy_train_size=4000"]  # fmt: skip
    trainer, data = train_toy(tmp_path, overrides)
    assert exact_match(trainer, data) >= 0.95
    assert alignment(trainer, data) >= 0.90


@pytest.mark.slow  # about 70 s; the attention models' own learning tests stay in `make test`
def test_without_attention_long_sequences_are_clearly_worse(tmp_path):
    long = ["data.toy_min_len=14", "data.toy_max_len=20", "data.toy_train_size=4000",
            "trainer.max_steps=400", "trainer.valid_every=400"]  # fmt: skip
    with_attention, data = train_toy(tmp_path / "additive", RNN + long + ["attention=additive"])
    without, data_none = train_toy(tmp_path / "none", RNN + long + ["attention=none"])
    attended, plain_score = exact_match(with_attention, data), exact_match(without, data_none)
    assert attended >= 0.5
    assert plain_score <= attended - 0.4


def test_beam_search_never_scores_below_greedy_on_a_trained_model(gru_additive):
    trainer, data = gru_additive
    sources = [src for src, _ in data.test.examples[:200]]
    greedy = translate_ids(trainer.model, sources, SearchSettings(beam_size=1), trainer.device)
    beam = translate_ids(
        trainer.model, sources, SearchSettings(beam_size=5, length_penalty=0.0), trainer.device
    )
    for greedy_nbest, beam_nbest in zip(greedy, beam):
        assert beam_nbest[0].score >= greedy_nbest[0].score - 1e-5
