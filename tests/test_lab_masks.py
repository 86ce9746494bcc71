"""The lab's masks experiment (`seq2seq.lab.masks`) and the model's pass without the
future mask it trains with (`Seq2Seq.forward(..., future_mask=False)`)."""

from __future__ import annotations

import pytest
import torch
from helpers import is_png, lab_quick_fixture

from seq2seq.config.build import build_model
from seq2seq.lab.chinese.masks import CHINESE
from seq2seq.lab.masks import EXPERIMENT, FAR_BELOW
from seq2seq.special_tokens import BOS_ID, EOS_ID, PAD_ID
from tests.helpers import compose_config

VOCAB = 11

quick = lab_quick_fixture(EXPERIMENT)



def test_without_the_future_mask_the_teacher_forced_loss_collapses(quick):
    values = quick.values
    assert values["unmasked_loss"] < FAR_BELOW * values["masked_loss"]
    masked, unmasked = (quick.values["curves"][key] for key in ("True", "False"))
    assert masked[0][0] == unmasked[0][0] == 0  # both measured before the first update
    assert masked[0][1] == pytest.approx(unmasked[0][1], rel=0.05)  # same initial weights


def test_with_the_padding_mask_no_output_changes(quick):
    rows = quick.values["padding"]
    assert [row["pads"] for row in rows] == [0, 5, 20]
    assert all(row["changed_with_mask"] == 0 for row in rows)
    assert rows[0]["changed_without_mask"] == 0  # no pads, nothing to read
    assert quick.values["changed_with_mask"] == 0


def test_the_table_has_one_row_per_measurement(quick):
    assert len(quick.table) == 3 + len(quick.values["padding"])
    assert {tuple(row) for row in quick.table} == {("measure", "with the mask", "without it")}


def test_figures_are_written_as_png(quick):
    assert [path.name for path in quick.figures] == ["masks_future.png", "masks_padding.png"]
    for path in quick.figures:
        assert is_png(path)


def tiny_model(decoder: str = "transformer"):
    cfg = compose_config([
        "encoder=transformer", f"decoder={decoder}", "attention=multihead", "attention.heads=2",
        "encoder.num_layers=1", "encoder.hidden_size=8", "encoder.heads=2", "encoder.ff_size=16",
        "decoder.hidden_size=8", "model.embed_dim=8", "model.tie_embeddings=false",
        *(["decoder.num_layers=2", "decoder.heads=2", "decoder.ff_size=16"]
          if decoder == "transformer" else []),
    ])  # fmt: skip
    torch.manual_seed(0)
    return build_model(cfg, VOCAB, VOCAB).eval()


def source_and_target():
    src = torch.tensor([[5, 6, 7, EOS_ID], [8, 9, EOS_ID, PAD_ID]])  # (2, 4)
    tgt_in = torch.tensor([[BOS_ID, 7, 6, 5, 9], [BOS_ID, 9, 8, PAD_ID, PAD_ID]])  # (2, 5)
    return src, src != PAD_ID, tgt_in


@pytest.mark.parametrize("future_mask", [True, False])
def test_a_later_target_changes_earlier_logits_only_without_the_future_mask(future_mask):
    model = tiny_model()
    src, src_mask, tgt_in = source_and_target()
    changed = tgt_in.clone()
    changed[0, 3] = 10  # a later token of the first sentence
    with torch.no_grad():
        before, _ = model(src, src_mask, tgt_in, future_mask=future_mask)
        after, _ = model(src, src_mask, changed, future_mask=future_mask)
    earlier_same = torch.allclose(before[0, :3], after[0, :3], atol=1e-6)
    assert earlier_same is future_mask
    torch.testing.assert_close(before[1], after[1])  # the other sentence is untouched


def test_without_the_future_mask_padding_is_still_masked():
    model = tiny_model()
    src, src_mask, tgt_in = source_and_target()
    with torch.no_grad():
        batched, _ = model(src, src_mask, tgt_in, future_mask=False)
        alone, _ = model(src[1:, :3], src_mask[1:, :3], tgt_in[1:, :3], future_mask=False)
    torch.testing.assert_close(batched[1, :3], alone[0], atol=1e-5, rtol=1e-5)


def test_the_default_pass_is_unchanged_by_the_new_keyword():
    model = tiny_model()
    src, src_mask, tgt_in = source_and_target()
    with torch.no_grad():
        plain, _ = model(src, src_mask, tgt_in)
        masked, _ = model(src, src_mask, tgt_in, future_mask=True)
    assert torch.equal(plain, masked)


def test_a_decoder_without_such_a_pass_refuses_future_mask_false():
    model = tiny_model("gru")
    src, src_mask, tgt_in = source_and_target()
    with pytest.raises(ValueError, match="future_mask=False needs a decoder"):
        model(src, src_mask, tgt_in, future_mask=False)


def test_the_chinese_summary_quotes_the_quick_run_s_numbers(quick):
    values = quick.values
    text = CHINESE.summary(quick, True)
    losses = f"每个词元 {values['unmasked_loss']:.3f} 奈特，带掩码时是 {values['masked_loss']:.3f}"
    exact = f"只占 {values['unmasked_exact']:.0%}，带掩码的模型占 {values['masked_exact']:.0%}"
    assert losses in text and exact in text
    assert f"BLEU {values['unmasked_bleu']:.1f} 对 {values['masked_bleu']:.1f}" in text
    assert f"至多 {values['most_pads']} 个填充词元" in text
    assert f"{values['sentences']} 个测试输出中有 {values['changed_with_mask']} 个改变" in text
    assert f"至多有 {values['changed_without_mask']} 个改变" in text
    assert ("论断的两部分都成立" in text) == bool(quick.agrees)
