"""On a CUDA device: a bf16 training step, incremental decoding equal to full decoding, and
a checkpoint written on the GPU that loads and translates on the CPU. Skipped without CUDA
(scripts/gpu_check.sh runs them on a GPU machine)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import TINY_TOY, compose_config

from seq2seq.checkpoint import load_checkpoint
from seq2seq.config.search_settings import SearchSettings
from seq2seq.data.batching import collate
from seq2seq.runs.assemble import assemble_trainer
from seq2seq.search.translator import Translator
from seq2seq.special_tokens import PAD_ID

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

TRANSFORMER = [
    "encoder=transformer", "decoder=transformer", "attention=multihead",
    "encoder.hidden_size=32", "decoder.hidden_size=32", "encoder.ff_size=64",
    "decoder.ff_size=64", "encoder.heads=2", "decoder.heads=2", "attention.heads=2",
    "model.embed_dim=32",
]  # fmt: skip


def _trainer(tmp_path: Path, *overrides: str):
    cfg = compose_config(
        TINY_TOY
        + [f"data.root={tmp_path / 'data'}", "trainer.device=cuda", "logging.tensorboard=false"]
        + list(overrides)
    )
    return assemble_trainer(cfg, tmp_path / "run", observe=False)


def _first_batches(trainer, count: int):
    for indices in trainer.sampler.batches(0)[:count]:
        yield collate([trainer.data.train.examples[i] for i in indices], indices).to(trainer.device)


@pytest.mark.parametrize("model", [[], TRANSFORMER], ids=["gru", "transformer"])
def test_a_training_step_under_bf16_autocast(tmp_path, model):
    trainer = _trainer(tmp_path, *model)  # trainer.precision=auto: bf16 autocast on CUDA
    batch = next(_first_batches(trainer, 1))
    with trainer.autocast():
        logits, _ = trainer.model(batch.src, batch.src_mask, batch.tgt_in)
    assert logits.dtype == torch.bfloat16
    before = [p.detach().clone() for p in trainer.model.parameters()]
    losses = []
    for batch in _first_batches(trainer, 8):
        loss_sum = trainer.train_step(batch).loss
        applied, grad_norm = trainer.update()
        assert applied and torch.isfinite(grad_norm)
        losses.append(float(loss_sum) / batch.num_tgt_tokens)
    assert all(torch.isfinite(torch.tensor(losses)))
    params = list(trainer.model.parameters())
    assert all(p.dtype == torch.float32 and p.device.type == "cuda" for p in params)
    assert any(not torch.equal(p, q) for p, q in zip(params, before))


@pytest.mark.parametrize("model", [[], TRANSFORMER], ids=["gru", "transformer"])
@torch.no_grad()
def test_incremental_decoding_equals_full_decoding(tmp_path, model):
    """Step by step (`decode_step`, with the decoder's cached state) gives the teacher-forced
    forward pass's log-probabilities on CUDA, in float32."""
    trainer = _trainer(tmp_path, *model)
    model_ = trainer.model.eval()
    batch = next(_first_batches(trainer, 1))
    logits, _ = model_(batch.src, batch.src_mask, batch.tgt_in)
    full = torch.log_softmax(logits.float(), dim=-1)
    state = model_.init_decoder_state(model_.encode(batch.src, batch.src_mask))
    for position in range(batch.tgt_in.size(1)):
        step, _, state = model_.decode_step(batch.tgt_in[:, position], state)
        real = batch.tgt_in[:, position] != PAD_ID  # rows whose sentence has ended: skip
        torch.testing.assert_close(step[real], full[real, position], atol=1e-4, rtol=1e-4)


def test_a_checkpoint_written_on_cuda_loads_and_translates_on_the_cpu(tmp_path):
    trainer = _trainer(tmp_path, *TRANSFORMER)
    for batch in _first_batches(trainer, 3):
        trainer.train_step(batch)
        trainer.update()
    path = trainer.save("last")
    payload = load_checkpoint(path, "cpu")
    for name, tensor in trainer.model.state_dict().items():
        assert payload["model"][name].device.type == "cpu"
        torch.testing.assert_close(payload["model"][name], tensor.cpu(), atol=0, rtol=0)
    translator = Translator.load(path, "cpu")
    assert next(translator.model.parameters()).device.type == "cpu"
    translations = translator.translate(["a b c", "d e"], SearchSettings(beam_size=2))
    assert len(translations) == 2 and all(t.hypotheses for t in translations)
