"""Models must learn toy tasks, and attention is what makes long ones learnable.

That every registered component learns the copy task and attends on its diagonal is the
contract suite's learning check (`seq2seq.testing.learning`, tests/test_contracts.py).
Here: without attention the decoder sees one fixed vector, which must do clearly worse on
long sequences, trained by the project's Trainer (that is the point of attention); and
beam search never scores below greedy on a trained model.
"""

from __future__ import annotations

import pytest
import torch
from helpers import compose_config

from seq2seq.config.search_settings import SearchSettings
from seq2seq.runs.assemble import Placement, assemble_trainer
from seq2seq.search.batched import translate_ids
from seq2seq.testing import Runner
from seq2seq.testing.learning import trained_copy_model
from seq2seq.testing.suite import one_thread
from seq2seq.training.trainer import Trainer

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


@pytest.fixture(scope="module")
def copy_model():
    """The contract suite's tiny GRU model with additive attention, trained on the copy
    task (a few seconds), and its held-out examples."""
    with one_thread():
        return trained_copy_model(Runner().subject("score", "additive"))


@pytest.mark.slow  # about 70 s; the attention models' own learning tests stay in `make test`
def test_without_attention_long_sequences_are_clearly_worse(tmp_path):
    long = ["data.source.min_len=14", "data.source.max_len=20", "data.source.train_size=4000",
            "trainer.max_steps=400", "trainer.valid_every=400"]  # fmt: skip
    with_attention, data = train_toy(tmp_path / "additive", RNN + long + ["attention=additive"])
    without, data_none = train_toy(tmp_path / "none", RNN + long + ["attention=none"])
    attended, plain_score = exact_match(with_attention, data), exact_match(without, data_none)
    assert attended >= 0.5
    assert plain_score <= attended - 0.4


def test_beam_search_never_scores_below_greedy_on_a_trained_model(copy_model):
    model, examples = copy_model
    sources, cpu = [src for src, _ in examples], torch.device("cpu")
    greedy = translate_ids(model, sources, SearchSettings(beam_size=1), cpu)
    beam = translate_ids(model, sources, SearchSettings(beam_size=5, length_penalty=0.0), cpu)
    for greedy_nbest, beam_nbest in zip(greedy, beam):
        assert beam_nbest[0].score >= greedy_nbest[0].score - 1e-5
