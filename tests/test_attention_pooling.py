"""Attention pooling (N vs 1, `seq2seq.models.attention.pooling`): its weights, the
concatenation score it equals, the summaries that start the decoder (`model.summary`) and
the pooled context of `attention=none`."""

from __future__ import annotations

import pytest
import torch
from helpers import compose_config

from seq2seq.checkpoint import architecture_differences
from seq2seq.config.build import ConfigError, build_model, plain
from seq2seq.config.value_checks import check_settings
from seq2seq.models.attention.pooling import AttentionPooling, linear_scores, masked_softmax
from seq2seq.models.base import EncoderOutput
from seq2seq.models.model import Bridge

VOCAB = 13
TINY = ["model.embed_dim=8", "encoder.hidden_size=8", "decoder.hidden_size=8"]
ENCODERS = {
    "rnn": ["encoder=rnn", "decoder=rnn", "attention=dot"],
    "lstm": ["encoder=lstm", "decoder=lstm", "attention=dot"],
    "gru": ["encoder=gru", "decoder=gru", "attention=additive"],
    "cnn": ["encoder=cnn", "decoder=cnn", "attention=dot"],
    "transformer": ["encoder=transformer", "decoder=transformer", "attention=scaled_dot",
                    "encoder.heads=2", "decoder.heads=2"],
}  # fmt: skip


def batch_with_padding(seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(4, VOCAB, (3, 6), generator=generator)
    mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2, [1] * 2 + [0] * 4], dtype=torch.bool)
    return src.masked_fill(~mask, 0), mask


# ---------------------------------------------------------------- the module


def test_weights_sum_to_one_over_real_positions_and_are_zero_on_padding():
    torch.manual_seed(0)
    pooling = AttentionPooling(5)
    values = torch.randn(3, 6, 5)
    mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2, [1] + [0] * 5], dtype=torch.bool)
    context, weights = pooling(values, mask)
    assert weights.shape == (3, 6) and context.shape == (3, 5)
    assert torch.allclose(weights.sum(-1), torch.ones(3))
    assert torch.all(weights[~mask] == 0)
    assert torch.allclose(weights[2, 0], torch.tensor(1.0))  # one real position takes it all
    assert torch.allclose(context[2], values[2, 0])


def test_pooling_matches_its_equations_computed_by_hand():
    """s_i = wᵀ tanh(U h_i + b), α = softmax(s), c = Σ α_i h_i, with numpy-free loops."""
    torch.manual_seed(1)
    pooling = AttentionPooling(4, attention_dim=3)
    values = torch.randn(1, 5, 4)
    mask = torch.ones(1, 5, dtype=torch.bool)
    U, b = pooling.project.weight.detach(), pooling.project.bias.detach()
    w = pooling.query.weight[0].detach()
    scores = [float(w @ torch.tanh(U @ values[0, i] + b)) for i in range(5)]
    exps = [pow(2.718281828459045, s - max(scores)) for s in scores]
    alphas = [e / sum(exps) for e in exps]
    context, weights = pooling(values, mask)
    assert weights[0].tolist() == pytest.approx(alphas, abs=1e-6)
    expected = sum(a * values[0, i] for i, a in enumerate(alphas))
    assert torch.allclose(context[0], expected, atol=1e-6)


def test_padding_values_change_nothing():
    torch.manual_seed(2)
    pooling = AttentionPooling(4)
    values = torch.randn(2, 5, 4)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 0]], dtype=torch.bool)
    noisy = values.clone()
    noisy[~mask] = 1e3 * torch.randn(int((~mask).sum()), 4)
    for left, right in zip(pooling(values, mask), pooling(noisy, mask), strict=True):
        assert torch.allclose(left, right)


def test_a_row_without_real_positions_gets_zero_weights_not_nan():
    weights = masked_softmax(torch.randn(2, 3), torch.tensor([[True, False, True], [False] * 3]))
    assert torch.all(weights[1] == 0) and torch.allclose(weights[0].sum(), torch.tensor(1.0))


def test_wrong_shapes_are_refused_naming_the_tensor():
    pooling = AttentionPooling(4)
    with pytest.raises(ValueError, match="values must be"):
        pooling(torch.randn(2, 5, 3), torch.ones(2, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="mask must be"):
        pooling(torch.randn(2, 5, 4), torch.ones(2, 4, dtype=torch.bool))


def test_a_linear_concatenation_score_ignores_the_query_and_is_attention_pooling():
    """s(q, k_i) = vᵀ[q; k_i]: the query adds the same term to every key's score, so the
    weights are the same for every query, those of pooling with a linear scorer v_kᵀ k_i."""
    torch.manual_seed(3)
    keys = torch.randn(2, 7, 5)
    mask = torch.tensor([[1] * 7, [1] * 5 + [0] * 2], dtype=torch.bool)
    v = torch.randn(4 + 5)
    per_query = [masked_softmax(linear_scores(torch.randn(2, 4), keys, v), mask) for _ in range(3)]
    pooled = masked_softmax(keys @ v[4:], mask)  # one learned vector scoring each key alone
    for weights in per_query:
        assert torch.allclose(weights, pooled, atol=1e-6)
    # the scores themselves do differ between queries: only softmax erases the difference
    scores = [linear_scores(torch.full((2, 4), fill), keys, v) for fill in (0.0, 1.0)]
    assert not torch.allclose(scores[0], scores[1])


def test_pooling_learns_to_find_the_marked_position():
    """N vs 1 on a task whose right weights are known: each sequence has one marked
    position (feature 0 is 1 there, 0 elsewhere) and the target is that position's other
    features. Trained, the pooling puts nearly all its weight on the mark; untrained it
    spreads it (about 1/8 at the mark)."""
    generator = torch.Generator().manual_seed(4)
    batch, time, dim = 64, 8, 6

    def task():
        values = torch.randn(batch, time, dim, generator=generator)
        values[..., 0] = 0.0
        marked = torch.randint(0, time, (batch,), generator=generator)
        values[torch.arange(batch), marked, 0] = 1.0
        return values, marked, values[torch.arange(batch), marked, 1:]

    torch.manual_seed(4)
    pooling = AttentionPooling(dim, attention_dim=8)
    mask = torch.ones(batch, time, dtype=torch.bool)
    values, marked, _ = task()
    before = pooling(values, mask)[1][torch.arange(batch), marked].mean()
    optimiser = torch.optim.Adam(pooling.parameters(), lr=0.05)
    for _ in range(300):
        values, _, target = task()
        context, _ = pooling(values, mask)
        loss = torch.nn.functional.mse_loss(context[:, 1:], target)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    values, marked, _ = task()
    after = pooling(values, mask)[1][torch.arange(batch), marked].mean()
    assert before < 0.3
    assert after > 0.9


# ---------------------------------------------------------------- the summaries


def encoded_output(final: bool) -> EncoderOutput:
    torch.manual_seed(5)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]], dtype=torch.bool)
    memory = torch.randn(2, 3, 4) * mask.unsqueeze(-1)
    return EncoderOutput(memory, mask, torch.randn(2, 6) if final else None)


def test_auto_keeps_the_final_state_of_recurrent_encoders_and_the_mean_of_others():
    assert Bridge(4, 6, 4).summary == "final"
    assert Bridge(4, None, 4).summary == "mean"
    torch.manual_seed(6)
    bridge = Bridge(4, None, 4, "mean")
    encoded = encoded_output(final=False)
    expected = torch.tanh(bridge.init_proj(encoded.memory[1, :2].mean(0)))
    assert torch.allclose(bridge(encoded)[1][1], expected, atol=1e-6)


def test_the_pooled_summary_starts_the_decoder_from_the_pooled_memory():
    torch.manual_seed(7)
    bridge = Bridge(4, 6, 4, "attention_pool")
    encoded = encoded_output(final=True)
    memory, start = bridge(encoded)
    weights = bridge.pooling_weights(encoded)
    assert torch.all(weights[1, 2] == 0)
    expected = torch.tanh(bridge.init_proj((weights.unsqueeze(-1) * memory).sum(1)))
    assert torch.allclose(start, expected, atol=1e-6)


def test_a_bridge_with_the_default_summary_draws_the_same_parameters_as_before():
    """auto adds nothing: an older checkpoint's state dict has exactly these keys."""
    assert sorted(Bridge(16, 16, 8).state_dict()) == [
        "init_proj.bias", "init_proj.weight", "memory_proj.bias", "memory_proj.weight",
    ]  # fmt: skip


@pytest.mark.parametrize("summary", ["mean", "attention_pool"])
@pytest.mark.parametrize("family", sorted(ENCODERS))
def test_every_encoder_takes_every_summary_and_padding_changes_nothing(family, summary):
    """Each encoder under a GRU decoder, which starts from the summary."""
    encoder = [o for o in ENCODERS[family] if o.startswith("encoder")]
    overrides = [*TINY, *encoder, "decoder=gru", "attention=additive", f"model.summary={summary}"]
    cfg = compose_config(overrides)
    check_settings(cfg)
    torch.manual_seed(8)
    model = build_model(cfg, VOCAB, VOCAB).eval()
    src, mask = batch_with_padding()
    tgt = torch.randint(4, VOCAB, (3, 4))
    logits = model(src, mask, tgt)[0]
    padded = torch.cat([src, torch.zeros(3, 2, dtype=torch.long)], dim=1)
    padded_mask = torch.cat([mask, torch.zeros(3, 2, dtype=torch.bool)], dim=1)
    assert torch.allclose(model(padded, padded_mask, tgt)[0], logits, atol=1e-5)
    weights = model.pooling_weights(src, mask)
    if summary == "mean":
        assert weights == {}
        return
    assert sorted(weights) == ["summary"]
    assert torch.allclose(weights["summary"].sum(-1), torch.ones(3))
    assert torch.all(weights["summary"][~mask] == 0)


def test_summary_final_is_refused_for_an_encoder_without_a_final_state():
    encoder = [o for o in ENCODERS["transformer"] if o.startswith("encoder")]
    cfg = compose_config(TINY + encoder + ["decoder=gru", "model.summary=final"])
    with pytest.raises(ConfigError, match="model.summary=final needs an encoder with a final"):
        check_settings(cfg)
    with pytest.raises(ConfigError, match="model.summary"):
        build_model(cfg, VOCAB, VOCAB)


@pytest.mark.parametrize("family", ["cnn", "transformer"])
def test_a_summary_is_refused_for_a_decoder_that_does_not_start_from_one(family):
    cfg = compose_config(TINY + ENCODERS[family] + ["model.summary=attention_pool"])
    with pytest.raises(ConfigError, match=f"the {family} decoder does not start from a summary"):
        check_settings(cfg)


def test_an_unknown_summary_and_context_are_refused_naming_the_key():
    with pytest.raises(ConfigError, match="model.summary must be one of"):
        check_settings(compose_config(TINY + ["model.summary=last"]))
    cfg = compose_config(TINY + ["attention=none", "attention.context=max"])
    with pytest.raises(ConfigError, match="attention.context must be one of"):
        check_settings(cfg)


# ---------------------------------------------------------------- attention=none, pooled


@pytest.mark.parametrize("family", sorted(ENCODERS))
def test_the_pooled_context_of_attention_none_decodes_step_by_step_as_in_one_pass(family):
    overrides = [o for o in ENCODERS[family] if not o.startswith("attention=")]
    cfg = compose_config(TINY + overrides + ["attention=none", "attention.context=attention_pool"])
    torch.manual_seed(9)
    model = build_model(cfg, VOCAB, VOCAB).eval()
    src, mask = batch_with_padding()
    tgt = torch.randint(4, VOCAB, (3, 5))
    full = torch.log_softmax(model(src, mask, tgt)[0].float(), dim=-1)
    state = model.init_decoder_state(model.encode(src, mask))
    for t in range(tgt.size(1)):
        step, _, state = model.decode_step(tgt[:, t], state)
        assert torch.allclose(step, full[:, t], atol=1e-5)
    weights = model.pooling_weights(src, mask)
    names = sorted(weights)
    assert names and all(name.startswith("context") for name in names)
    for name in names:
        assert torch.allclose(weights[name].sum(-1), torch.ones(3))
        assert torch.all(weights[name][~mask] == 0)


# ---------------------------------------------------------------- older checkpoints


def test_a_checkpoint_written_before_the_keys_matches_their_defaults_only():
    """A resume compares architectures: a config stored without `model.summary` (or
    `attention.context`) was built as `auto` (`mean`) builds, and as nothing else."""
    current = plain(compose_config(TINY + ["attention=none"]))
    saved = {
        section: dict(current[section]) for section in ("encoder", "decoder", "attention", "model")
    }
    del saved["model"]["summary"], saved["attention"]["context"]
    assert architecture_differences(saved, current) == []
    pooled = plain(compose_config(TINY + ["attention=none", "model.summary=attention_pool",
                                          "attention.context=attention_pool"]))  # fmt: skip
    assert sorted(line.split(":")[0] for line in architecture_differences(saved, pooled)) == [
        "attention.context", "model.summary",
    ]  # fmt: skip
