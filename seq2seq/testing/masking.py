"""Check `masking`: padding in the source gets exactly zero weight and changes nothing else.

* score:     under the soft region, padded keys get weight exactly 0, what the padded keys
             hold changes no weight of a real key (a score that mixes keys, a norm over all
             of them say, fails here), and a query with no visible key gets zeros, with
             finite values and gradients.
* region:    hidden keys get exactly 0 in training and in evaluation, weights are >= 0 and
             sum to at most 1, the scores of hidden keys change nothing, and a row with no
             visible key is all zeros, with finite gradients.
* attention: padded keys get weight exactly 0, padded keys and values change no context,
             and a query with no visible key gets zero weights and a finite context that
             nothing it cannot see changes; a class that also promises that context is 0
             says so (`zero_without_keys = True`) and is held to it. (Multi-head
             `Attention` does not: its output projection's bias is what a query without
             keys gets.)
* encoder:   what the padded positions hold, and more padding at the end, change no output
             at a real position and no `final`.
* decoder:   padded memory changes no hidden state, and gets exactly zero attention.
* and, for every group, the tiny model's logits do not change with the tokens at padded
  source positions.
"""

from __future__ import annotations

import torch

from seq2seq.testing.alone import (
    HEADS,
    per_head,
    region_case,
    region_module,
    run_region,
    score_module,
    soft_weights,
)
from seq2seq.testing.dispatch import by_group
from seq2seq.testing.inputs import (
    BATCH,
    SRC_LEN,
    TGT_LEN,
    VOCAB,
    attention_inputs,
    close,
    largest_gap,
    model_batch,
    randn,
    refill_padding,
    source_mask,
    tokens,
)
from seq2seq.testing.results import expect
from seq2seq.testing.shapes import run_decoder
from seq2seq.testing.subject import CHECK_WIDTH, Subject

SUM_SLACK = 1e-5  # weights may sum to 1 + rounding


def hidden_keys(mask: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """`mask (batch, src_len)` -> True at padded keys, broadcast to `like (batch, ..., src_len)`."""
    return (~mask).reshape(mask.size(0), *([1] * (like.dim() - 2)), mask.size(1)).expand_as(like)


def zero_at_padding(weights: torch.Tensor, mask: torch.Tensor, what: str) -> None:
    leaked = weights[hidden_keys(mask, weights)]
    expect(
        bool((leaked == 0).all()),
        f"{what}: padded keys get weight up to {float(leaked.abs().max()):.3g}",
    )


def without_keys(mask: torch.Tensor, row: int = BATCH - 1) -> torch.Tensor:
    """The mask with every key of one row hidden."""
    empty = mask.clone()
    empty[row] = False
    return empty


def claims_zeros(subject: Subject) -> bool:
    """Whether an attention class promises a zero context for a query without keys."""
    return bool(getattr(subject.component.builder, "zero_without_keys", False))


# ------------------------------------------------------------ scores and regions


def score_masking(subject: Subject) -> str:
    node, mask = subject.option_node(), source_mask()
    for heads in HEADS:
        torch.manual_seed(0)
        score = score_module(node, heads)
        query, keys = per_head(heads, TGT_LEN, 1), per_head(heads, SRC_LEN, 2)
        with torch.no_grad():
            weights = soft_weights(score, query, keys, mask)
            zero_at_padding(weights, mask, f"{heads} head(s)")
            refilled = soft_weights(score, query, refill_padding(keys, mask, 3, dim=2), mask)
        real = ~hidden_keys(mask, weights)
        expect(
            close(refilled[real], weights[real]),
            f"{heads} head(s): what padded keys hold changes the weights of real keys by up "
            f"to {largest_gap(refilled[real], weights[real]):.3g}",
        )
        _empty_row_is_zero_and_finite(score, query, keys, mask, heads)
    return "padded keys get 0 and change no weight; a query without keys gets 0, finite gradients"


def _empty_row_is_zero_and_finite(score, query, keys, mask, heads: int) -> None:
    query, keys = query.clone().requires_grad_(), keys.clone().requires_grad_()
    weights = soft_weights(score, query, keys, without_keys(mask))
    expect(
        bool(torch.isfinite(weights).all()),
        f"{heads} head(s): a query without keys gives non-finite weights",
    )
    expect(bool((weights[-1] == 0).all()), f"{heads} head(s): a query without keys gets weight")
    (weights * randn(*weights.shape, seed=9)).sum().backward()
    tensors = [query.grad, keys.grad, *(p.grad for p in score.parameters() if p.grad is not None)]
    expect(
        all(bool(torch.isfinite(g).all()) for g in tensors),
        f"{heads} head(s): non-finite gradients",
    )


def region_masking(subject: Subject) -> str:
    node = subject.option_node()
    for heads in HEADS:
        region = region_module(node, heads)
        for training in (True, False):
            region.train(training)
            _region_rows(region, heads, "training" if training else "evaluation")
    return "hidden keys get 0 and change nothing; weights >= 0, summing to <= 1; empty rows are 0"


@torch.no_grad()
def _region_rows(region, heads: int, mode: str) -> None:
    what = f"{heads} head(s), {mode}"
    scores, query, mask = region_case(heads)
    torch.manual_seed(7)  # the same noise for a sampling region (hard, in training)
    weights = run_region(region, scores, query, mask)
    zero_at_padding(weights, mask, what)
    expect(bool((weights >= 0).all()), f"{what}: negative weights")
    largest = float(weights.sum(-1).max())
    expect(largest <= 1 + SUM_SLACK, f"{what}: weights of a query sum to {largest:.6g} > 1")
    torch.manual_seed(7)
    changed = run_region(region, refill_padding(scores, mask, 3, dim=3), query, mask)
    expect(
        close(changed, weights),
        f"{what}: the scores of hidden keys change the weights by up to "
        f"{largest_gap(changed, weights):.3g}",
    )
    _empty_region_row(region, scores, query, without_keys(mask), what)


def _empty_region_row(region, scores, query, empty_mask, what: str) -> None:
    """A row without visible keys: all zeros, finite, and finite gradients."""
    scores, query = scores.clone().requires_grad_(), query.clone().requires_grad_()
    with torch.enable_grad():
        empty = run_region(region, scores, query, empty_mask)
        expect(
            bool(torch.isfinite(empty).all()), f"{what}: a row without visible keys is not finite"
        )
        expect(bool((empty[-1] == 0).all()), f"{what}: a row without visible keys gets weight")
        if empty.requires_grad:
            (empty * randn(*empty.shape, seed=9)).sum().backward()
    grads = [g for g in (scores.grad, query.grad) if g is not None]
    expect(
        all(bool(torch.isfinite(g).all()) for g in grads),
        f"{what}: non-finite gradients with a row without visible keys",
    )


# ------------------------------------------------------------ parts


@torch.no_grad()
def attention_masking(subject: Subject) -> str:
    query, keys, values = attention_inputs(CHECK_WIDTH)
    mask = source_mask()
    for where, _, module in subject.parts():
        context, weights = module(query, keys, values, mask)
        if weights is not None:
            zero_at_padding(weights, mask, where)
        moved, _ = module(
            query, refill_padding(keys, mask, 4), refill_padding(values, mask, 5), mask
        )
        expect(
            close(moved, context),
            f"{where}: padded keys and values change the context by up to "
            f"{largest_gap(moved, context):.3g}",
        )
        _query_without_keys(subject, where, module, query, keys, values, without_keys(mask))
    zero = "0" if claims_zeros(subject) else "a context nothing hidden changes"
    return (
        f"padded keys get 0 and change no context; a query without keys gets 0 weights and {zero}"
    )


def _query_without_keys(subject, where, module, query, keys, values, empty_mask) -> None:
    context, weights = module(query, keys, values, empty_mask)
    expect(
        bool(torch.isfinite(context).all()),
        f"{where}: a query without keys gets a non-finite context",
    )
    if weights is not None:
        expect(bool((weights[-1] == 0).all()), f"{where}: a query without keys gets weight")
    moved, _ = module(
        query,
        refill_padding(keys, empty_mask, 6),
        refill_padding(values, empty_mask, 7),
        empty_mask,
    )
    expect(
        close(moved[-1], context[-1]),
        f"{where}: the context of a query without keys changes with the keys it cannot see",
    )
    if claims_zeros(subject):
        expect(
            bool((context[-1] == 0).all()),
            f"{where}: a query without keys gets a context other than 0, though the class "
            "says zero_without_keys",
        )


@torch.no_grad()
def encoder_masking(subject: Subject) -> str:
    mask = source_mask()
    embedded = randn(BATCH, SRC_LEN, CHECK_WIDTH, seed=1)
    longer_mask = torch.cat([mask, torch.zeros(BATCH, 2, dtype=torch.bool)], dim=1)
    longer = torch.cat([embedded, randn(BATCH, 2, CHECK_WIDTH, seed=2)], dim=1)
    for where, _, module in subject.parts():
        encoded = module(embedded, mask)
        for how, other in (
            ("what the padded positions hold", module(refill_padding(embedded, mask, 3), mask)),
            ("two more padded positions", module(longer, longer_mask)),
        ):
            memory = other.memory[:, :SRC_LEN][mask]
            expect(
                close(memory, encoded.memory[mask]),
                f"{where}: {how} changes the memory of real positions by up to "
                f"{largest_gap(memory, encoded.memory[mask]):.3g}",
            )
            if encoded.final is not None:
                expect(close(other.final, encoded.final), f"{where}: {how} changes `final`")
    return "padding (its content, its length) changes no real output"


@torch.no_grad()
def decoder_masking(subject: Subject) -> str:
    mask = source_mask()
    for where, _, module in subject.parts():
        hidden, attention = run_decoder(module, mask)
        moved, _ = run_decoder(module, mask, padding_seed=6)
        expect(
            close(moved, hidden),
            f"{where}: padded memory changes the hidden states by up to "
            f"{largest_gap(moved, hidden):.3g}",
        )
        if attention is not None:
            zero_at_padding(attention, mask, where)
    return "padded memory gets 0 attention and changes no hidden state"


@torch.no_grad()
def model_masking(subject: Subject) -> str:
    model, (src, mask, tgt_in) = subject.model(VOCAB), model_batch()
    logits, _ = model(src, mask, tgt_in)
    other = torch.where(mask, src, tokens(VOCAB, BATCH, SRC_LEN, seed=3))
    moved, _ = model(other, mask, tgt_in)
    expect(
        close(moved, logits),
        "the tiny model's logits change with the tokens at padded source positions, by up "
        f"to {largest_gap(moved, logits):.3g}",
    )
    return "the tiny model ignores padded source tokens"


check = by_group(model_masking, score_masking, region_masking, attention_masking,
                 encoder_masking, decoder_masking)  # fmt: skip
