"""Check `flops`: the component's FLOP formula against torch's own count.

`FlopCounterMode` counts the matrix products it sees at the dispatcher, with the project's
convention (a multiply-add = 2 FLOPs, `seq2seq.flops`). Two CPU kernels hide their products
from it, the oneDNN RNN and the flash-attention kernel behind
`F.scaled_dot_product_attention`, so everything is counted with oneDNN off and the MATH
attention backend, which compute the same products as visible `mm` / `bmm` calls.

Two counts must agree:

* the component alone on a small case: its formula (`registry.Component.flops`, in the
  signature of its group, `seq2seq.registry`) gives the counted forward FLOPs exactly (a
  decoder's count includes its attention layers, by the partner attention's formula);
* the tiny model with it: `seq2seq.flops.forward_flops` of its config gives the counted
  forward FLOPs exactly, and `training_flops`, 3 × that, is within 10% of the counted
  forward + backward (`BACKWARD_FACTOR`: the backward of a product computes two of the
  same size; products whose operand needs no gradient make it a little cheaper, which is
  why only the whole model, not a part, is held to the ratio). A model with hard attention
  trained by REINFORCE is differentiated as training differentiates it: its scores learn
  through the surrogate (`seq2seq.training.reinforce`), not through the weights.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from seq2seq import registry
from seq2seq.config.build import build_model, plain
from seq2seq.flops import forward_flops, training_flops
from seq2seq.testing.alone import (
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
    randn,
    tokens,
)
from seq2seq.testing.results import Violation, expect
from seq2seq.testing.subject import CHECK_LAYERS, CHECK_WIDTH, PARTNERS, Subject, tiny
from seq2seq.training.label_smoothing import sentence_label_smoothed_nll
from seq2seq.training.reinforce import recording

TRAINING_TOLERANCE = 0.10  # relative: training_flops against the counted forward + backward
HEADS = 2


def counted_flops(run: Callable[[], torch.Tensor]) -> tuple[int, int]:
    """(forward, forward + backward) FLOPs that `FlopCounterMode` sees when `run()` computes
    a tensor and the sum of it, times fixed random weights, is differentiated."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # oneDNN's note about TF32 on Intel GPUs
        with torch.backends.mkldnn.flags(enabled=False), sdpa_kernel(SDPBackend.MATH):
            with FlopCounterMode(display=False) as counter:
                output = run()
                forward = counter.get_total_flops()
                if output.requires_grad:
                    (output * randn(*output.shape, seed=99)).sum().backward()
    return forward, counter.get_total_flops()


def compare(formula: int, counted: tuple[int, int], what: str) -> None:
    """The formula's forward FLOPs are exactly the counted ones."""
    expect(
        formula == counted[0],
        f"{what}: the formula gives {formula:,} forward FLOPs, torch counts {counted[0]:,}",
    )


def compare_training(training: int, counted: tuple[int, int], what: str) -> None:
    """Forward + backward within `TRAINING_TOLERANCE` of the counted."""
    total = counted[1]
    expect(
        abs(training - total) <= TRAINING_TOLERANCE * total,
        f"{what}: training_flops gives {training:,}, not within 10% of the {total:,} "
        "counted forward + backward",
    )


def formula_of(subject: Subject) -> Callable:
    if subject.component.flops is None:
        raise Violation(
            f"no FLOP formula: give {subject.component.builder.__name__} a static method "
            "`flops` (seq2seq.registry)"
        )
    return subject.component.flops


def grad(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.requires_grad_()


def score_flops(subject: Subject) -> str:
    formula, node = formula_of(subject), subject.option_node()
    options = {key: value for key, value in node.items() if key != "name"}
    score = score_module(node, HEADS)
    query, keys = grad(per_head(HEADS, TGT_LEN, 1)), grad(per_head(HEADS, SRC_LEN, 2))
    counted = counted_flops(lambda: score(query, score.project_keys(keys)))
    compare(formula(BATCH * HEADS, TGT_LEN, SRC_LEN, WIDTH, **options), counted, "scores")
    return f"{counted[0]:,} forward FLOPs"


def region_flops(subject: Subject) -> str:
    formula, node = formula_of(subject), subject.option_node()
    options = {key: value for key, value in node.items() if key != "name"}
    region = region_module(node, HEADS)
    scores, query, mask = region_case(HEADS)
    scores, query = grad(scores), grad(query)
    counted = counted_flops(lambda: run_region(region, scores, query, mask))
    compare(formula(BATCH * HEADS * TGT_LEN, WIDTH, **options), counted, "weights")
    return f"{counted[0]:,} forward FLOPs"


def attention_flops(subject: Subject) -> str:
    formula, width, parts = formula_of(subject), CHECK_WIDTH, subject.parts()
    for where, node, module in parts:
        query, keys, values = map(grad, attention_inputs(width))
        counted = counted_flops(functools.partial(_context, module, query, keys, values))
        compare(formula(node, BATCH, TGT_LEN, SRC_LEN, width), counted, where)
    return f"{len(parts)} node(s)"


def encoder_flops(subject: Subject) -> str:
    formula, width = formula_of(subject), CHECK_WIDTH
    mask = torch.ones(BATCH, SRC_LEN, dtype=torch.bool)  # no padding: packed == padded
    parts = subject.parts()
    for where, node, module in parts:
        embedded = grad(randn(BATCH, SRC_LEN, width, seed=1))
        counted = counted_flops(functools.partial(_memory, module, embedded, mask))
        compare(formula(node, width, BATCH, SRC_LEN), counted, where)
    return f"{len(parts)} node(s)"


def decoder_flops(subject: Subject) -> str:
    formula, width = formula_of(subject), CHECK_WIDTH
    attention = tiny(subject.catalog.node("attention", PARTNERS["attention"]), width, CHECK_LAYERS)
    per_layer = registry.of_node("attention", attention).flops(
        attention, BATCH, TGT_LEN, SRC_LEN, width
    )
    mask, parts = torch.ones(BATCH, SRC_LEN, dtype=torch.bool), subject.parts()
    for where, node, module in parts:
        memory, init_hidden, target = map(grad, decoder_inputs(mask, width))
        state = functools.partial(module.init_state, memory, mask, init_hidden)
        counted = counted_flops(functools.partial(_hidden, module, target, state))
        own, layers = formula(node, width, BATCH, TGT_LEN)
        compare(own + layers * per_layer, counted, f"{where} (with {layers} attention layer(s))")
    return f"{len(parts)} node(s)"


def model_flops(subject: Subject) -> str:
    """`forward_flops` and `training_flops` of the tiny model against the count (module
    docstring)."""
    config = subject.model_config()
    torch.manual_seed(0)
    model = build_model(config, VOCAB, VOCAB)  # training mode, as it is counted for training
    src, tgt = tokens(VOCAB, BATCH, SRC_LEN, seed=1), tokens(VOCAB, BATCH, TGT_LEN, seed=2)
    mask = torch.ones(BATCH, SRC_LEN, dtype=torch.bool)  # no padding: packed == padded
    counted = counted_flops(lambda: training_logits(model, src, mask, tgt))
    shape = (BATCH, SRC_LEN, TGT_LEN, VOCAB, VOCAB)
    compare(forward_flops(plain(config), *shape), counted, "the tiny model")
    compare_training(training_flops(plain(config), *shape), counted, "the tiny model")
    return f"the tiny model: {counted[0]:,} forward FLOPs, training within 10%"


def training_logits(model, src, mask, tgt) -> torch.Tensor:
    """The model's logits (batch, tgt_len, vocab); with REINFORCE regions plus their
    surrogate for `tgt` as `s − s.detach()`, which adds no value and the scores' backward."""
    with recording(model) as choices:
        logits = model(src, mask, tgt)[0]  # (batch, tgt_len, vocab)
    if not choices.regions:
        return logits
    surrogate = choices.surrogate(sentence_label_smoothed_nll(logits, tgt)[1], tgt)
    return logits + (surrogate - surrogate.detach())


def _context(module, query, keys, values) -> torch.Tensor:
    return module(query, keys, values)[0]  # (batch, tgt_len, width)


def _memory(module, embedded, mask) -> torch.Tensor:
    return module(embedded, mask).memory  # (batch, src_len, output_dim)


def _hidden(module, target, state: Callable) -> torch.Tensor:
    return module(target, state())[0]  # init_state counted too: the keys' projections


check = by_group(model_flops, score_flops, region_flops, attention_flops, encoder_flops,
                 decoder_flops, label="alone: ")  # fmt: skip
