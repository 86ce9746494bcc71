"""Source `<unk>` dropout (`trainer.source_unk_rate`): about p of the real source pieces
become `<unk>`, never EOS or padding, nothing on the target side; the same draw for the same
batch; a run that is reproducible and resumes exactly; the rate checked at start-up."""

from __future__ import annotations

import pytest
import torch
from helpers import compose_config
from test_train import _train

from seq2seq.config.build import ConfigError
from seq2seq.config.value_checks import check_settings
from seq2seq.data.batching import collate
from seq2seq.data.unknown_dropout import with_unknown_source_pieces
from seq2seq.special_tokens import EOS_ID, PAD_ID, UNK_ID


def a_batch(rows: int = 400):
    """Rows of 5 to 24 source pieces (ids 4 and up, none of them <unk>), padded."""
    examples = [(list(range(4, 9 + row % 20)), [4, 5, 6]) for row in range(rows)]
    return collate(examples, list(range(rows)))


def test_about_p_of_the_real_pieces_become_unk_and_nothing_else_changes():
    batch = a_batch()
    dropped = with_unknown_source_pieces(batch, 0.2, seed=3, key=(0, 1, 7))
    real = batch.src_mask & (batch.src != EOS_ID)  # (batch, src_len)
    changed = dropped.src != batch.src
    assert torch.equal(dropped.src[changed], torch.full_like(dropped.src[changed], UNK_ID))
    assert not changed[~real].any()  # EOS and padding kept
    assert torch.equal(dropped.src[batch.src == PAD_ID], batch.src[batch.src == PAD_ID])
    share = changed.sum().item() / real.sum().item()  # ~5,800 pieces: sd of the share 0.005
    assert 0.18 < share < 0.22
    for name in ("tgt_in", "tgt_out", "src_mask", "tgt_mask"):
        assert torch.equal(getattr(dropped, name), getattr(batch, name))


def test_a_batch_is_dropped_the_same_for_the_same_key_and_otherwise_anew():
    batch = a_batch(50)
    first = with_unknown_source_pieces(batch, 0.3, seed=3, key=(0, 1, 7))
    assert torch.equal(with_unknown_source_pieces(batch, 0.3, 3, (0, 1, 7)).src, first.src)
    for seed, key in ((4, (0, 1, 7)), (3, (1, 1, 7)), (3, (0, 2, 7)), (3, (0, 1, 8))):
        assert not torch.equal(with_unknown_source_pieces(batch, 0.3, seed, key).src, first.src)


def test_a_run_is_reproducible_differs_from_the_plain_run_and_resumes_exactly(tmp_path):
    def train(name: str, *overrides: str) -> list[float]:
        return _train(tmp_path, name, ["trainer.source_unk_rate=0.2", *overrides])[1]

    straight = train("straight", "trainer.max_steps=6")
    assert train("again", "trainer.max_steps=6") == straight
    plain = _train(tmp_path, "plain", ["trainer.max_steps=6"])[1]
    assert plain != straight
    first = train("halves", "trainer.max_steps=3")
    second = train("resume", "trainer.max_steps=6", f"trainer.resume={tmp_path / 'halves'}")
    assert first + second == pytest.approx(straight, rel=1e-6)


@pytest.mark.parametrize("rate", ["1.0", "-0.1", "nan"])
def test_a_rate_outside_zero_to_one_is_refused_naming_the_key(rate):
    cfg = compose_config([f"trainer.source_unk_rate={rate}"])
    with pytest.raises(ConfigError, match=r"trainer\.source_unk_rate"):
        check_settings(cfg)
