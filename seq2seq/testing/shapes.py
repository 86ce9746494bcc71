"""Check `shapes`: what comes out has the shape the interfaces promise (`seq2seq.models.base`).

* score:     `project_keys` `(batch, heads, src_len, *)`, scores `(batch, heads, tgt_len,
             src_len)`, finite, with 1 and 2 heads; different query and key widths either
             work or are refused with a ValueError at construction.
* region:    weights of the scores' shape, finite, in training and in evaluation.
* attention: context `(batch, tgt_len, output_dim)`, weights `(batch, heads, tgt_len,
             src_len)` or None.
* encoder:   memory `(batch, src_len, output_dim)`, `final` `(batch, final_dim)` or None,
             the widths its `widths(node)` states.
* decoder:   hidden `(batch, tgt_len, output_dim)`, attention `(batch, layers, heads,
             tgt_len, src_len)` or None, with as many layers as its FLOP formula counts.
* and, for every group, the tiny model's logits `(batch, tgt_len, vocab)`.
"""

from __future__ import annotations

import torch

from seq2seq.testing.alone import (
    HEADS,
    WIDTH,
    per_head,
    region_case,
    region_module,
    run_region,
    score_module,
)
from seq2seq.testing.dispatch import by_group
from seq2seq.testing.inputs import (
    BATCH,
    SRC_LEN,
    TGT_LEN,
    VOCAB,
    attention_inputs,
    decoder_inputs,
    model_batch,
    randn,
    source_mask,
)
from seq2seq.testing.results import Violation, expect
from seq2seq.testing.subject import CHECK_WIDTH, Subject


def shaped(tensor: torch.Tensor, expected: tuple[int, ...], what: str) -> None:
    """`tensor` has shape `expected` and is finite (a Violation naming `what` otherwise)."""
    expect(
        tuple(tensor.shape) == expected, f"{what}: shape {tuple(tensor.shape)}, expected {expected}"
    )
    expect(bool(torch.isfinite(tensor).all()), f"{what}: not finite")


@torch.no_grad()
def score_shapes(subject: Subject) -> str:
    node = subject.option_node()
    for heads in HEADS:
        score = score_module(node, heads)
        proj_keys = score.project_keys(per_head(heads, SRC_LEN, seed=2))
        expect(
            proj_keys.dim() == 4 and tuple(proj_keys.shape[:3]) == (BATCH, heads, SRC_LEN),
            f"project_keys: shape {tuple(proj_keys.shape)}, expected "
            f"({BATCH}, {heads}, {SRC_LEN}, *)",
        )
        scores = score(per_head(heads, TGT_LEN, seed=1), proj_keys)
        shaped(scores, (BATCH, heads, TGT_LEN, SRC_LEN), f"scores with {heads} head(s)")
    return "scores (batch, heads, tgt, src) with 1 and 2 heads; " + _other_widths(node)


def _other_widths(node: dict) -> str:
    """Query width 6 over keys of width 4: shapes as before, or a ValueError at once (a
    score that cannot compare different widths says so when it is built, not later)."""
    try:
        score = score_module(node, 2, key_width=WIDTH - 2)
    except ValueError:
        return "query width != key width refused at construction"
    try:
        keys = score.project_keys(per_head(2, SRC_LEN, 2, WIDTH - 2))
        scores = score(per_head(2, TGT_LEN, 1), keys)
    except Exception as error:  # noqa: BLE001 - the finding is that it fails only now
        raise Violation(
            f"built for query width {WIDTH} and key width {WIDTH - 2}, it fails when run "
            f"({type(error).__name__}: {error}); raise a ValueError in __init__ instead"
        ) from error
    shaped(scores, (BATCH, 2, TGT_LEN, SRC_LEN), "scores with query width 6, key width 4")
    return "query width 6 over key width 4 works"


@torch.no_grad()
def region_shapes(subject: Subject) -> str:
    node = subject.option_node()
    for heads in HEADS:
        region = region_module(node, heads)
        scores, query, mask = region_case(heads)
        for training in (True, False):
            weights = run_region(region.train(training), scores, query, mask)
            mode = "training" if training else "evaluation"
            shaped(weights, tuple(scores.shape), f"weights with {heads} head(s) in {mode}")
    return "weights of the scores' shape, with 1 and 2 heads, in training and evaluation"


@torch.no_grad()
def attention_shapes(subject: Subject) -> str:
    query, keys, values = attention_inputs(CHECK_WIDTH)
    mask, parts = source_mask(), subject.parts()
    for where, _, module in parts:
        context, weights = module(query, keys, values, mask)
        shaped(context, (BATCH, TGT_LEN, module.output_dim), f"{where}: context")
        if weights is not None:
            heads = getattr(module, "heads", weights.size(1))
            shaped(weights, (BATCH, heads, TGT_LEN, SRC_LEN), f"{where}: weights")
    return f"context and weights of {len(parts)} node(s)"


@torch.no_grad()
def encoder_shapes(subject: Subject) -> str:
    mask = source_mask()
    parts = subject.parts()
    for where, node, module in parts:
        encoded = module(randn(BATCH, SRC_LEN, CHECK_WIDTH, seed=1), mask)
        shaped(encoded.memory, (BATCH, SRC_LEN, module.output_dim), f"{where}: memory")
        expect(torch.equal(encoded.mask, mask), f"{where}: the output mask is not the source mask")
        if module.final_dim is None:
            expect(encoded.final is None, f"{where}: final_dim is None but final is not")
        else:
            shaped(encoded.final, (BATCH, module.final_dim), f"{where}: final")
        stated = type(module).widths(node)
        built = (module.output_dim, module.final_dim)
        expect(stated == built, f"{where}: widths(node) says {stated}, the module has {built}")
    return f"memory, final and widths(node) of {len(parts)} node(s)"


@torch.no_grad()
def decoder_shapes(subject: Subject) -> str:
    mask = source_mask()
    parts = subject.parts()
    for where, node, module in parts:
        hidden, attention = run_decoder(module, mask)
        shaped(hidden, (BATCH, TGT_LEN, module.output_dim), f"{where}: hidden")
        if attention is not None:
            layers = attention_layers(subject, node)
            expected = (BATCH, layers or attention.size(1), attention.size(2), TGT_LEN, SRC_LEN)
            shaped(attention, expected, f"{where}: attention (batch, layers, heads, tgt, src)")
    return f"hidden and attention of {len(parts)} node(s)"


def run_decoder(module, mask: torch.Tensor, padding_seed: int | None = None):
    """Teacher-forced hidden states and attention of a decoder built alone, on
    `decoder_inputs` (the memory random at padded positions with `padding_seed`)."""
    memory, init_hidden, target = decoder_inputs(mask, CHECK_WIDTH, padding_seed)
    return module(target, module.init_state(memory, mask, init_hidden))


def attention_layers(subject: Subject, node: dict) -> int | None:
    """The attention layers the decoder's FLOP formula counts, or None without a formula."""
    if subject.component.flops is None:
        return None
    return subject.component.flops(node, CHECK_WIDTH, BATCH, TGT_LEN)[1]


@torch.no_grad()
def model_shapes(subject: Subject) -> str:
    model, (src, mask, tgt_in) = subject.model(VOCAB), model_batch()
    logits, attention = model(src, mask, tgt_in, need_weights=True)
    shaped(logits, (BATCH, TGT_LEN, VOCAB), "the tiny model's logits")
    if attention is not None:
        expect(
            attention.dim() == 5 and attention.shape[-2:] == (TGT_LEN, SRC_LEN),
            f"the model's attention: shape {tuple(attention.shape)}, expected "
            f"(batch, layers, heads, {TGT_LEN}, {SRC_LEN})",
        )
    return "the tiny model's logits (batch, tgt, vocab)"


check = by_group(
    model_shapes, score_shapes, region_shapes, attention_shapes, encoder_shapes, decoder_shapes
)
