"""Greedy and beam search against small models whose behaviour the tests control."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from torch import nn

from seq2seq.models.base import EncoderOutput
from seq2seq.search import Hypothesis, beam_search, gnmt_length_penalty, greedy_search
from seq2seq.special_tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID

LAYERS, HEADS = 2, 3


class TinyAttentionModel(nn.Module):
    """A random GRU decoder with dot-product attention, implementing the search interface.

    The attention is returned for LAYERS × HEADS "heads" that differ by a temperature, so
    shapes with every dimension distinct can be checked.
    """

    def __init__(self, seed: int, vocab_size: int = 9, dim: int = 8, sharpness: float = 2.0):
        super().__init__()
        torch.manual_seed(seed)
        self.embed = nn.Embedding(vocab_size, dim)
        self.init_proj = nn.Linear(dim, dim)
        self.cell = nn.GRUCell(2 * dim, dim)
        self.generator = nn.Linear(2 * dim, vocab_size)
        self.sharpness = sharpness
        self.register_buffer(
            "head_scales", torch.linspace(0.5, 2.0, LAYERS * HEADS).view(LAYERS, HEADS)
        )

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor) -> EncoderOutput:
        memory = torch.tanh(self.embed(src))  # (batch, src_len, dim)
        weights = src_mask.unsqueeze(-1).float()  # (batch, src_len, 1)
        final = (memory * weights).sum(1) / weights.sum(1)  # (batch, dim)
        return EncoderOutput(memory, src_mask, final)

    def init_decoder_state(self, encoded: EncoderOutput) -> dict:
        hidden = torch.tanh(self.init_proj(encoded.final))  # (batch, dim)
        return {"hidden": hidden, "memory": encoded.memory, "mask": encoded.mask}

    def decode_step(self, prev_tokens: torch.Tensor, state: dict, need_weights: bool = True):
        memory, mask, hidden = state["memory"], state["mask"], state["hidden"]
        scores = torch.einsum("bsd,bd->bs", memory, hidden).masked_fill(~mask, float("-inf"))
        weights = scores.softmax(dim=-1)  # (batch, src_len)
        context = torch.einsum("bs,bsd->bd", weights, memory)  # (batch, dim)
        hidden = self.cell(torch.cat([self.embed(prev_tokens), context], dim=-1), hidden)
        logits = self.generator(torch.cat([hidden, context], dim=-1)) * self.sharpness
        attention = None
        if need_weights:
            scaled = scores[:, None, None, None, :] * self.head_scales[None, :, :, None, None]
            attention = scaled.softmax(dim=-1)  # (batch, layers, heads, 1, src_len)
        return logits.log_softmax(dim=-1), attention, {**state, "hidden": hidden}


class BigramModel:
    """log P(y_t | y_<t, X) = table[y_{t-1}, y_t]: a language model whose best output is known.

    Its attention is uniform over the real source positions, shape (batch, 1, 1, 1, src_len).
    """

    def __init__(self, probs: dict[int, dict[int, float]], vocab_size: int = 6):
        table = torch.full((vocab_size, vocab_size), 1e-6)
        for prev, row in probs.items():
            for token, prob in row.items():
                table[prev, token] = prob
        self.log_table = (table / table.sum(1, keepdim=True)).log()  # (vocab, vocab)

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor) -> EncoderOutput:
        return EncoderOutput(src_mask.float().unsqueeze(-1), src_mask, None)

    def init_decoder_state(self, encoded: EncoderOutput) -> dict:
        return {"mask": encoded.mask}

    def decode_step(self, prev_tokens: torch.Tensor, state: dict, need_weights: bool = True):
        mask = state["mask"].float()  # (batch, src_len)
        attention = (mask / mask.sum(1, keepdim=True))[:, None, None, None, :]
        return self.log_table[prev_tokens], attention if need_weights else None, state


A, B = 4, 5  # the two ordinary tokens of the bigram models' vocabulary


def padded_batch(
    lengths: list[int], vocab_size: int, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random sources of the given real lengths, right-padded: (batch, max_len) ids and mask."""
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(EOS_ID + 1, vocab_size, (len(lengths), max(lengths)), generator=generator)
    src_mask = torch.arange(max(lengths)).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    return src.masked_fill(~src_mask, PAD_ID), src_mask


def teacher_forced(model, src: torch.Tensor, src_mask: torch.Tensor, tokens: list[int]):
    """Score and attention of tokens + [EOS] for one sentence (1, src_len), step by step."""
    state = model.init_decoder_state(model.encode(src, src_mask))
    inputs, targets = [BOS_ID, *tokens], [*tokens, EOS_ID]
    score, rows = 0.0, []
    for prev, target in zip(inputs, targets, strict=True):
        log_probs, attention, state = model.decode_step(torch.tensor([prev]), state)
        score += log_probs[0, target].item()
        rows.append(attention[0])  # (layers, heads, 1, src_len)
    return score, torch.cat(rows, dim=2)[..., src_mask[0]]


def random_case(seed: int, lengths=(5, 2, 7, 3)):
    model = TinyAttentionModel(seed).eval()
    src, src_mask = padded_batch(list(lengths), vocab_size=9, seed=seed + 100)
    return model, src, src_mask


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_beam_size_one_equals_greedy(seed, alpha):
    model, src, src_mask = random_case(seed)
    greedy = greedy_search(model, src, src_mask, max_len_b=6)
    beam = beam_search(model, src, src_mask, beam_size=1, length_penalty=alpha, max_len_b=6)
    for greedy_hyp, (beam_hyp,) in zip(greedy, beam, strict=True):
        assert beam_hyp.tokens == greedy_hyp.tokens
        assert beam_hyp.score == greedy_hyp.score
        assert torch.equal(beam_hyp.attention, greedy_hyp.attention)


@pytest.mark.parametrize("seed", [3, 4])
def test_batched_beam_equals_each_sentence_alone(seed):
    model, src, src_mask = random_case(seed)
    batched = beam_search(model, src, src_mask, beam_size=4, n_best=3, max_len_b=6)
    for row, nbest in enumerate(batched):
        real = src_mask[row]
        alone = beam_search(
            model,
            src[row : row + 1, real],
            src_mask[row : row + 1, real],
            beam_size=4,
            n_best=3,
            max_len_b=6,
        )[0]
        assert [h.tokens for h in nbest] == [h.tokens for h in alone]
        assert [h.score for h in nbest] == pytest.approx([h.score for h in alone], abs=1e-5)


def test_batched_greedy_equals_each_sentence_alone():
    model, src, src_mask = random_case(seed=19)
    batched = greedy_search(model, src, src_mask, max_len_b=6)
    for row, hypothesis in enumerate(batched):
        real = src_mask[row]
        alone = greedy_search(
            model, src[row : row + 1, real], src_mask[row : row + 1, real], max_len_b=6
        )[0]
        assert hypothesis.tokens == alone.tokens
        assert hypothesis.score == pytest.approx(alone.score, abs=1e-5)


@pytest.mark.parametrize("seed", range(5, 11))
def test_beam_never_scores_below_greedy(seed):
    """Not a theorem: a beam can prune greedy's prefix (8 of 1500 sentences of these random
    models, seeds 0-299, score lower). On these seeds it holds, and a search that ranks or
    prunes wrongly breaks it."""
    model, src, src_mask = random_case(seed, lengths=(4, 6, 1, 3, 5))
    greedy = greedy_search(model, src, src_mask, max_len_b=8)
    beam = beam_search(model, src, src_mask, beam_size=4, length_penalty=0.0, max_len_b=8)
    for greedy_hyp, (beam_hyp,) in zip(greedy, beam, strict=True):
        assert beam_hyp.score >= greedy_hyp.score - 1e-5  # batch sizes differ: float noise


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_wide_beam_finds_exhaustive_best(alpha):
    """With a beam wider than all prefixes, beam search ranks every possible output exactly."""
    model = TinyAttentionModel(seed=11, vocab_size=6)
    src, src_mask = padded_batch([3], vocab_size=6, seed=12)
    max_len = 3  # outputs over {UNK, A, B}: 1 + 3 + 9 + 27 = 40 of them
    outputs = [
        list(t) for n in range(max_len + 1) for t in itertools.product([UNK_ID, A, B], repeat=n)
    ]
    scored = sorted(
        (
            (teacher_forced(model, src, src_mask, t)[0] / gnmt_length_penalty(len(t) + 1, alpha), t)
            for t in outputs
        ),
        reverse=True,
    )
    found = beam_search(
        model,
        src,
        src_mask,
        beam_size=64,
        n_best=10,
        length_penalty=alpha,
        max_len_a=0,
        max_len_b=max_len,
    )[0]
    assert [h.tokens for h in found] == [tokens for _, tokens in scored[:10]]
    assert [h.normalised_score(alpha) for h in found] == pytest.approx(
        [s for s, _ in scored[:10]], abs=1e-5
    )


def length_trade_off_model() -> BigramModel:
    """Best under α = 0: the empty output (log 0.5 = -0.69); the longer [A, B] has
    log(0.5 · 0.95 · 0.99) = -0.75, which wins once divided by lp = 8/6 (α = 1): -0.57."""
    return BigramModel(
        {BOS_ID: {EOS_ID: 0.5, A: 0.5}, A: {B: 0.95, EOS_ID: 0.05}, B: {EOS_ID: 0.99, A: 0.01}}
    )


@pytest.mark.parametrize(("alpha", "expected"), [(0.0, []), (1.0, [A, B])])
def test_length_penalty_favours_longer_outputs(alpha, expected):
    src, src_mask = padded_batch([4], vocab_size=6, seed=0)
    (best,) = beam_search(
        length_trade_off_model(), src, src_mask, beam_size=3, length_penalty=alpha
    )[0]
    assert best.tokens == expected


@pytest.mark.parametrize("search", ["greedy", "beam"])
def test_score_and_attention_equal_teacher_forcing(search):
    model, src, src_mask = random_case(seed=13)
    if search == "greedy":
        hypotheses = greedy_search(model, src, src_mask, max_len_b=6)
    else:
        nbests = beam_search(model, src, src_mask, beam_size=3, n_best=3, max_len_b=6)
        hypotheses = [h for nbest in nbests for h in nbest]
        src, src_mask = src.repeat_interleave(3, dim=0), src_mask.repeat_interleave(3, dim=0)
    for row, hypothesis in enumerate(hypotheses):
        real = src_mask[row]
        score, attention = teacher_forced(
            model, src[row : row + 1, real], src_mask[row : row + 1, real], hypothesis.tokens
        )
        assert hypothesis.score == pytest.approx(score, abs=1e-5)
        assert torch.allclose(hypothesis.attention, attention, atol=1e-6)


def test_greedy_takes_the_most_probable_token_at_every_step():
    model, src, src_mask = random_case(seed=14)
    for row, hypothesis in enumerate(greedy_search(model, src, src_mask, max_len_b=6)):
        max_len = math.floor(1.5 * src_mask[row].sum().item() + 6)
        state = model.init_decoder_state(model.encode(src[row : row + 1], src_mask[row : row + 1]))
        inputs, chosen = [BOS_ID, *hypothesis.tokens], [*hypothesis.tokens, EOS_ID]
        for step, (prev, token) in enumerate(zip(inputs, chosen, strict=True)):
            log_probs, _, state = model.decode_step(torch.tensor([prev]), state)
            log_probs[0, [PAD_ID, BOS_ID]] = float("-inf")
            expected = EOS_ID if step == max_len else log_probs[0].argmax().item()
            assert token == expected


def never_ending_model() -> BigramModel:
    """Emits A for ever: EOS has probability 1e-6 at every step, so it is paid once by every
    output, and with α = 1 the longest output has the best normalised score."""
    return BigramModel({BOS_ID: {A: 1.0}, A: {A: 1.0}})


@pytest.mark.parametrize(("max_len_a", "max_len_b"), [(1.5, 2), (0.5, 0), (0.0, 3)])
def test_max_length_respected_and_eos_forced(max_len_a, max_len_b):
    lengths = [5, 2, 7]
    src, src_mask = padded_batch(lengths, vocab_size=6, seed=1)
    model = never_ending_model()
    limits = {"max_len_a": max_len_a, "max_len_b": max_len_b}
    greedy = greedy_search(model, src, src_mask, **limits)
    beam = beam_search(model, src, src_mask, beam_size=3, n_best=3, length_penalty=1.0, **limits)
    for row, (greedy_hyp, nbest) in enumerate(zip(greedy, beam, strict=True)):
        max_len = math.floor(max_len_a * lengths[row] + max_len_b)
        assert greedy_hyp.tokens == nbest[0].tokens == [A] * max_len
        for hypothesis in [greedy_hyp, *nbest]:
            assert len(hypothesis.tokens) <= max_len
            real = src_mask[row]
            score, _ = teacher_forced(
                model, src[row : row + 1, real], src_mask[row : row + 1, real], hypothesis.tokens
            )
            assert hypothesis.score == pytest.approx(score, abs=1e-4)  # includes the EOS


def test_eos_first_gives_empty_hypothesis():
    src, src_mask = padded_batch([3, 1], vocab_size=6, seed=2)
    model = BigramModel({BOS_ID: {EOS_ID: 0.9, A: 0.1}})
    for hypothesis in [
        *greedy_search(model, src, src_mask),
        beam_search(model, src, src_mask, beam_size=2)[0][0],
    ]:
        assert hypothesis.tokens == []
        assert hypothesis.score == pytest.approx(math.log(0.9), abs=1e-5)
        assert hypothesis.attention.shape[2] == 1


def test_pad_and_bos_are_never_emitted():
    src, src_mask = padded_batch([3], vocab_size=6, seed=3)
    model = BigramModel(
        {BOS_ID: {PAD_ID: 0.5, BOS_ID: 0.3, A: 0.2}, A: {PAD_ID: 0.6, BOS_ID: 0.3, EOS_ID: 0.1}}
    )
    assert greedy_search(model, src, src_mask)[0].tokens == [A]
    for hypothesis in beam_search(model, src, src_mask, beam_size=3, n_best=3)[0]:
        assert PAD_ID not in hypothesis.tokens and BOS_ID not in hypothesis.tokens


def test_attention_shape_has_token_rows_and_real_source_columns():
    model, src, src_mask = random_case(seed=15, lengths=(5, 2, 7))
    greedy = greedy_search(model, src, src_mask, max_len_b=6)
    beam = [
        h
        for nbest in beam_search(model, src, src_mask, beam_size=2, n_best=2, max_len_b=6)
        for h in nbest
    ]
    for hypothesis, length in [
        *zip(greedy, (5, 2, 7), strict=True),
        *zip(beam, (5, 5, 2, 2, 7, 7), strict=True),
    ]:
        assert hypothesis.attention.shape == (LAYERS, HEADS, len(hypothesis.tokens) + 1, length)
        assert torch.allclose(hypothesis.attention.sum(-1), torch.ones(()))  # no weight was cut off


def test_attention_columns_follow_the_mask_not_the_position():
    model, src, src_mask = random_case(seed=18, lengths=(3, 5))
    left_padded = torch.cat(
        [src[:1, 3:], src[:1, :3]], dim=1
    )  # (1, 5): two pads, then the sentence
    left_mask = torch.cat([src_mask[:1, 3:], src_mask[:1, :3]], dim=1)
    right = greedy_search(model, src[:1], src_mask[:1], max_len_b=6)[0]
    left = greedy_search(model, left_padded, left_mask, max_len_b=6)[0]
    assert left.tokens == right.tokens
    assert torch.allclose(left.attention, right.attention, atol=1e-6)


def test_no_attention_when_not_needed():
    model, src, src_mask = random_case(seed=16)
    with_weights = greedy_search(model, src, src_mask, max_len_b=6)
    without = greedy_search(model, src, src_mask, max_len_b=6, need_weights=False)
    assert all(h.attention is None for h in without)
    assert [h.tokens for h in without] == [h.tokens for h in with_weights]
    assert all(
        h.attention is None
        for h in beam_search(model, src, src_mask, beam_size=2, need_weights=False)[0]
    )


def test_n_best_is_sorted_and_distinct():
    model, src, src_mask = random_case(seed=17)
    for nbest in beam_search(
        model, src, src_mask, beam_size=5, n_best=5, length_penalty=0.6, max_len_b=6
    ):
        scores = [h.normalised_score(0.6) for h in nbest]
        assert len(nbest) == 5 and scores == sorted(scores, reverse=True)
        assert len({tuple(h.tokens) for h in nbest}) == 5


def test_length_penalty_formula():
    assert gnmt_length_penalty(7, 0.0) == 1.0
    assert gnmt_length_penalty(1, 1.0) == 1.0
    assert gnmt_length_penalty(7, 2.0) == pytest.approx(4.0)
    assert Hypothesis([A, B], -2.0).normalised_score(1.0) == pytest.approx(-2.0 / (8 / 6))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"src_mask": torch.ones(2, 4, dtype=torch.long)}, "src_mask"),
        ({"src_mask": torch.tensor([[True, True, False, False], [False] * 4])}, "no real token"),
        ({"src": torch.ones(2, 4)}, "src must"),
        ({"beam_size": 0}, "beam_size"),
        ({"n_best": 3, "beam_size": 2}, "n_best"),
        ({"max_len_a": -1.0}, "max_len_a"),
    ],
)
def test_bad_arguments_raise(change, message):
    arguments = {
        "src": torch.full((2, 4), A),
        "src_mask": torch.ones(2, 4, dtype=torch.bool),
        **change,
    }
    with pytest.raises(ValueError, match=message):
        beam_search(length_trade_off_model(), **arguments)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_gives_the_cpu_result():
    model, src, src_mask = random_case(seed=20)
    on_cpu = beam_search(model, src, src_mask, beam_size=3, n_best=2, max_len_b=6)
    on_gpu = beam_search(
        model.cuda(), src.cuda(), src_mask.cuda(), beam_size=3, n_best=2, max_len_b=6
    )
    for cpu_nbest, gpu_nbest in zip(on_cpu, on_gpu, strict=True):
        assert [h.tokens for h in gpu_nbest] == [h.tokens for h in cpu_nbest]
        assert all(h.attention.is_cuda for h in gpu_nbest)


@pytest.mark.parametrize("search", [greedy_search, beam_search])
@pytest.mark.parametrize("family", ["transformer", "cnn"])
def test_output_is_capped_at_the_decoder_position_table(search, family):
    """A length budget beyond the decoder's position table (here 8 rows) stops at its last
    row instead of failing there: at most 7 tokens, then the forced EOS."""
    from helpers import TINY_TOY, compose_config

    from seq2seq.config.build import build_model

    cfg = compose_config(TINY_TOY + [f"encoder={family}", f"decoder={family}",
                                     "attention=dot", "encoder.hidden_size=32",
                                     "decoder.hidden_size=32", "decoder.max_positions=8"])  # fmt: skip
    torch.manual_seed(0)
    model = build_model(cfg, 14, 14).eval()
    src = torch.tensor([[5, 6, 7, 8, EOS_ID]])
    with torch.no_grad():
        found = search(model, src, src != PAD_ID, max_len_a=0.0, max_len_b=1000)
    hypotheses = [h for item in found for h in (item if isinstance(item, list) else [item])]
    assert hypotheses and all(len(h.tokens) <= 7 for h in hypotheses)


class AlwaysAttending(TinyAttentionModel):
    """Returns its attention even when not asked, as an RNN's additive attention does."""

    def decode_step(self, prev_tokens, state, need_weights=True):
        return super().decode_step(prev_tokens, state, need_weights=True)


@pytest.mark.parametrize("search", [greedy_search, beam_search])
def test_attention_a_model_returns_unasked_is_dropped(search):
    model = AlwaysAttending(seed=21)
    _, src, src_mask = random_case(seed=21)
    found = search(model, src, src_mask, max_len_b=6, need_weights=False)
    hypotheses = [h for item in found for h in (item if isinstance(item, list) else [item])]
    assert hypotheses and all(h.attention is None for h in hypotheses)


@pytest.mark.parametrize("family", ["gru", "cnn", "transformer"])
def test_beam_leaves_source_state_in_place_and_finds_the_same(family, monkeypatch):
    """Beam search does not reorder a decoder's `source_state` within a sentence; reordering
    every entry, as for a decoder that declares none, gives the same hypotheses."""
    from helpers import TINY_TOY, compose_config

    from seq2seq.config.build import build_model

    cfg = compose_config(TINY_TOY + [f"encoder={family}", f"decoder={family}", "attention=dot",
                                     "encoder.hidden_size=32", "decoder.hidden_size=32"])  # fmt: skip
    torch.manual_seed(3)
    model = build_model(cfg, 14, 14).eval()
    assert model.decoder.source_state  # each family declares its source entries
    src = torch.tensor([[5, 6, 7, 8, EOS_ID], [9, 10, EOS_ID, PAD_ID, PAD_ID]])
    with torch.no_grad():
        kept = beam_search(model, src, src != PAD_ID, beam_size=4, n_best=4, max_len_b=8)
        monkeypatch.setattr(type(model.decoder), "source_state", frozenset())
        reordered = beam_search(model, src, src != PAD_ID, beam_size=4, n_best=4, max_len_b=8)
    for one, other in zip(kept, reordered, strict=True):
        assert [h.tokens for h in one] == [h.tokens for h in other]
        assert [h.score for h in one] == pytest.approx([h.score for h in other], abs=1e-6)


@pytest.mark.parametrize("width", [7, 64 * 20, 64 * 20 + 1, 8000, 8001])
@pytest.mark.parametrize("k", [1, 3, 10])
def test_top_k_equals_torch_topk(width, k):
    from seq2seq.search.common import top_k

    generator = torch.Generator().manual_seed(width * 31 + k)
    values = torch.randn(37, width, generator=generator)
    values[0] = float("-inf")  # a row that may emit nothing but its one allowed token
    values[0, width // 2] = -3.0
    values[1, -1] = 50.0  # the largest entry in the last, shorter block
    k = min(k, width)
    expected, found = values.topk(k, dim=1), top_k(values, k)
    assert torch.equal(found[0], expected.values)
    assert torch.equal(found[1][1:], expected.indices[1:])  # row 0: ties among -inf
    assert found[1][0, 0] == width // 2 and found[1][1, 0] == width - 1
