"""Hierarchical attention (`seq2seq.models.attention.hierarchical`): words within each
sentence, then the sentences. Against a reference written with loops, its masks at both
levels, step-by-step decoding equal to one pass in every decoder family, the sentences
of a document found at its separator, and a toy task where it must pick the marked
sentence and learns to."""

from __future__ import annotations

import math

import pytest
import torch
from helpers import compose_config

from seq2seq.config.build import build_model
from seq2seq.models.attention.hierarchical import HierarchicalAttention, sentence_weights
from seq2seq.models.model import document_segments
from seq2seq.special_tokens import EOS_ID, SEP_ID

WIDTH, VOCAB = 8, 15
DOCUMENTS = "data.documents={min_sentences:1,max_sentences:6,order:consecutive}"
TINY = [f"model.embed_dim={WIDTH}", f"encoder.hidden_size={WIDTH}",
        f"decoder.hidden_size={WIDTH}", "attention=hierarchical", DOCUMENTS]  # fmt: skip
FAMILIES = {
    "gru_bahdanau": ["encoder=gru", "decoder=gru"],
    "lstm_luong": ["encoder=lstm", "decoder=lstm", "decoder.style=luong"],
    "rnn": ["encoder=rnn", "decoder=rnn"],
    "cnn": ["encoder=cnn", "decoder=cnn"],
    "transformer": ["encoder=transformer", "decoder=transformer", "encoder.heads=2",
                    "decoder.heads=2", "decoder.num_layers=2"],
}  # fmt: skip


def reference(attention, query, memory, mask, segments):
    """The module docstring's equations with loops over queries, sentences and positions:
    (context (B, T, d), γ (B, T, S), β (B, T, K))."""
    W, U = attention.word_query.weight.detach(), attention.sentence_query.weight.detach()
    batch, tgt_len, src_len, width = query.size(0), query.size(1), memory.size(1), memory.size(2)
    count = int(segments.max()) + 1
    contexts = torch.zeros(batch, tgt_len, width)
    gammas = torch.zeros(batch, tgt_len, src_len)
    betas = torch.zeros(batch, tgt_len, count)
    for b in range(batch):
        for t in range(tgt_len):
            q = query[b, t]
            vectors, scores, alphas = {}, {}, {}
            for k in range(count):
                positions = [j for j in range(src_len) if segments[b, j] == k and mask[b, j]]
                if not positions:
                    continue
                e = [float((W @ q) @ memory[b, j]) / math.sqrt(width) for j in positions]
                top = max(e)
                weights = [math.exp(x - top) for x in e]
                alphas[k] = {j: w / sum(weights) for j, w in zip(positions, weights, strict=True)}
                vectors[k] = sum(a * memory[b, j] for j, a in alphas[k].items())
                scores[k] = float((U @ q) @ vectors[k]) / math.sqrt(width)
            top = max(scores.values())
            total = sum(math.exp(u - top) for u in scores.values())
            for k, u in scores.items():
                beta = math.exp(u - top) / total
                betas[b, t, k] = beta
                contexts[b, t] += beta * vectors[k]
                for j, a in alphas[k].items():
                    gammas[b, t, j] = beta * a
    return contexts, gammas, betas


def inputs(seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    query = torch.randn(2, 3, WIDTH, generator=generator)
    memory = torch.randn(2, 7, WIDTH, generator=generator)
    mask = torch.tensor([[1] * 7, [1] * 5 + [0] * 2], dtype=torch.bool)
    # sentence 2 of the second row lies wholly in its padding: no weight at either level
    segments = torch.tensor([[0, 0, 1, 1, 1, 2, 2], [0, 1, 1, 1, 1, 2, 2]])
    return query, memory, mask, segments


def test_the_weights_and_context_equal_the_loops_of_the_equations():
    torch.manual_seed(1)
    attention = HierarchicalAttention(WIDTH, WIDTH, WIDTH).eval()
    query, memory, mask, segments = inputs()
    context, weights = attention(query, memory, memory, mask, segments=segments)
    expected_context, expected_gamma, expected_beta = reference(
        attention, query, memory, mask, segments
    )
    torch.testing.assert_close(context, expected_context, atol=1e-5, rtol=0)
    torch.testing.assert_close(weights[:, 0], expected_gamma, atol=1e-6, rtol=0)
    beta = sentence_weights(weights, segments)[:, 0]  # (B, T, K) from γ
    torch.testing.assert_close(beta, expected_beta, atol=1e-6, rtol=0)


def test_masks_at_both_levels():
    torch.manual_seed(2)
    attention = HierarchicalAttention(WIDTH, WIDTH, WIDTH).eval()
    query, memory, mask, segments = inputs(3)
    _, weights = attention(query, memory, memory, mask, segments=segments)
    gamma = weights[:, 0]  # (B, T, S)
    torch.testing.assert_close(gamma.sum(-1), torch.ones(2, 3))
    assert torch.all(gamma[1, :, 5:] == 0)  # padding: no word weight
    beta = sentence_weights(weights, segments)[:, 0]
    assert torch.all(beta[1, :, 2] == 0)  # a sentence of padding only: no sentence weight
    torch.testing.assert_close(beta.sum(-1), torch.ones(2, 3))
    # changing what lies under the padding changes nothing
    noisy = memory.clone()
    noisy[1, 5:] = 100 * torch.randn(2, WIDTH)
    for left, right in zip(attention(query, memory, memory, mask, segments=segments),
                           attention(query, noisy, noisy, mask, segments=segments)):  # fmt: skip
        torch.testing.assert_close(left, right)


def test_each_sentence_weighs_its_own_words_alone():
    """Within a sentence, the word weights γ_tj / β_tk are a softmax over that sentence:
    a word's score moved changes the weights of its own sentence's words, not the shares
    of the words of another sentence (their sentence's weight may change)."""
    torch.manual_seed(4)
    attention = HierarchicalAttention(WIDTH, WIDTH, WIDTH).eval()
    query, memory, mask, segments = inputs(5)
    moved = memory.clone()
    moved[0, 0] *= 3.0  # a word of sentence 0
    shares = []
    for keys in (memory, moved):
        gamma = attention(query, keys, keys, mask, segments=segments)[1][0, 0]  # (T, S)
        shares.append(gamma[:, 2:5] / gamma[:, 2:5].sum(-1, keepdim=True))  # sentence 1's words
    torch.testing.assert_close(shares[0][:, 0:2], shares[1][:, 0:2])


def test_without_sentences_it_is_scaled_general_attention():
    torch.manual_seed(6)
    attention = HierarchicalAttention(WIDTH, WIDTH, WIDTH).eval()
    query, memory, mask, _ = inputs(7)
    context, weights = attention(query, memory, memory, mask)
    scores = attention.word_query(query) @ memory.transpose(1, 2) / math.sqrt(WIDTH)
    expected = torch.softmax(scores.masked_fill(~mask[:, None, :], float("-inf")), dim=-1)
    torch.testing.assert_close(weights[:, 0], expected, atol=1e-6, rtol=0)
    torch.testing.assert_close(context, expected @ memory, atol=1e-6, rtol=0)


def test_bad_segments_are_refused_naming_them():
    attention = HierarchicalAttention(WIDTH, WIDTH, WIDTH)
    query, memory, mask, segments = inputs()
    with pytest.raises(ValueError, match="segments must be"):
        attention(query, memory, memory, mask, segments=segments[:, :3])
    with pytest.raises(ValueError, match="segments must be sentence indices >= 0"):
        attention(query, memory, memory, mask, segments=segments - 1)


def test_a_documents_sentences_are_cut_at_the_separator():
    src = torch.tensor([[7, 8, SEP_ID, 9, EOS_ID, 0], [7, SEP_ID, 8, SEP_ID, 9, EOS_ID]])
    assert document_segments(src, SEP_ID).tolist() == [[0, 0, 0, 1, 1, 1], [0, 0, 1, 1, 2, 2]]


def test_the_model_reads_sentences_only_on_pseudo_documents():
    assert build_model(compose_config(TINY), VOCAB, VOCAB).separator_id == SEP_ID
    plain_data = [o for o in TINY if o != DOCUMENTS]
    assert build_model(compose_config(plain_data), VOCAB, VOCAB).separator_id is None
    other = [o for o in TINY if o != "attention=hierarchical"] + ["attention=additive"]
    assert build_model(compose_config(other), VOCAB, VOCAB).separator_id is None


def documents_batch(seed: int = 8):
    """Three sources of two or three sentences (SEP_ID between them), padded."""
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(5, VOCAB, (3, 9), generator=generator)
    src[:, 2] = SEP_ID
    src[0, 5] = SEP_ID
    lengths = torch.tensor([9, 7, 5])
    mask = torch.arange(9)[None, :] < lengths[:, None]
    src[torch.arange(3), lengths - 1] = EOS_ID
    return src.masked_fill(~mask, 0), mask


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_step_by_step_decoding_equals_one_pass_with_sentences(family):
    torch.manual_seed(9)
    model = build_model(compose_config(TINY + FAMILIES[family]), VOCAB, VOCAB).eval()
    src, mask = documents_batch()
    tgt = torch.randint(5, VOCAB, (3, 5), generator=torch.Generator().manual_seed(10))
    logits, attention = model(src, mask, tgt, need_weights=True)
    full = torch.log_softmax(logits.float(), dim=-1)
    state = model.init_decoder_state(model.encode(src, mask))
    assert "segments" in state
    for t in range(tgt.size(1)):
        step, weights, state = model.decode_step(tgt[:, t], state)
        torch.testing.assert_close(step, full[:, t], atol=1e-5, rtol=0)
        torch.testing.assert_close(weights[..., 0, :], attention[:, :, :, t], atol=1e-5, rtol=0)
    segments = document_segments(src, SEP_ID)
    beta = sentence_weights(attention[:, -1], segments)  # (B, 1, T, K)
    assert torch.all(beta[2, ..., 2] == 0)  # the third row has two sentences only
    torch.testing.assert_close(beta.sum(-1), torch.ones_like(beta.sum(-1)))


def test_it_learns_to_pick_the_marked_sentence():
    """Documents of 4 sentences of 3 positions; every position of sentence k carries that
    sentence's marker m_k; the query is the marker of one sentence (plus noise) and the
    target the mean of that sentence's vectors. Trained, the sentence weights pick the
    marked sentence; untrained they are near 1/4 of the time right by chance."""
    generator = torch.Generator().manual_seed(11)
    batch, sentences, per, width = 64, 4, 3, 16
    segments = torch.arange(sentences).repeat_interleave(per).expand(batch, -1)  # (B, 12)
    mask = torch.ones(batch, sentences * per, dtype=torch.bool)

    def task():
        markers = torch.randn(batch, sentences, width, generator=generator)
        memory = torch.randn(batch, sentences * per, width, generator=generator)
        memory = memory + markers.repeat_interleave(per, dim=1)
        chosen = torch.randint(0, sentences, (batch,), generator=generator)
        query = markers[torch.arange(batch), chosen].unsqueeze(1)  # (B, 1, width)
        query = query + 0.1 * torch.randn(query.shape, generator=generator)
        target = memory.view(batch, sentences, per, width)[torch.arange(batch), chosen].mean(1)
        return query, memory, chosen, target

    def accuracy(attention) -> float:
        query, memory, chosen, _ = task()
        weights = attention(query, memory, memory, mask, segments=segments)[1]
        picked = sentence_weights(weights, segments)[:, 0, 0].argmax(-1)  # (B,)
        return float((picked == chosen).float().mean())

    torch.manual_seed(12)
    attention = HierarchicalAttention(width, width, width)
    before = accuracy(attention)
    optimiser = torch.optim.Adam(attention.parameters(), lr=0.03)
    for _ in range(250):
        query, memory, _, target = task()
        context = attention(query, memory, memory, mask, segments=segments)[0][:, 0]
        loss = torch.nn.functional.mse_loss(context, target)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    assert before < 0.5
    assert accuracy(attention) > 0.9
