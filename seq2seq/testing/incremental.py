"""Check `incremental`: every way a decoder may call the component gives the same result.

A decoder runs its teacher-forced pass over all target positions at once and, when it
translates, one position at a time; the two must agree (within `ATOL`), or what a model
learns is not what it translates with.

* score:     the scores of all queries at once equal those of each query alone.
* region:    the weights of all queries at once equal those of each query alone, given its
             position (local-m centres its window on it).
* attention: `attend` with all queries equals one query at a time (`query_positions` = its
             position), and the fast path (`need_weights=False`, a fused kernel) gives the
             context of the explicit one, also for a query with no visible key.
* decoder:   `step` over the target equals `forward` on it (hidden states and attention),
             and the entries it declares in `source_state` exist and no step changes them
             (beam search leaves them in place, `seq2seq.search.beam`).
* and, in the tiny model: the log-probabilities of `decode_step`, step by step, equal the
  teacher-forced pass's, and so do the attention weights.
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
)
from seq2seq.testing.dispatch import by_group
from seq2seq.testing.inputs import (
    SRC_LEN,
    TGT_LEN,
    VOCAB,
    attention_inputs,
    close,
    decoder_inputs,
    largest_gap,
    model_batch,
    source_mask,
)
from seq2seq.testing.masking import without_keys
from seq2seq.testing.results import expect
from seq2seq.testing.subject import CHECK_WIDTH, Subject


def same(actual, expected, what: str) -> None:
    """Both None, or equal within ATOL (a Violation naming `what` otherwise)."""
    expect((actual is None) == (expected is None), f"{what}: one of the two gives no weights")
    if expected is not None:
        expect(
            close(actual, expected), f"{what}: differ by up to {largest_gap(actual, expected):.3g}"
        )


def stepped(step, inputs: list[torch.Tensor], state) -> tuple[list, torch.Tensor | None]:
    """`step(input, state) -> (output, attention, state)` run over `inputs` in turn, as
    decoding runs it: the outputs, and the steps' attention joined along the target axis
    (None when the steps give none)."""
    outputs, weights = [], []
    for one in inputs:
        output, attention, state = step(one, state)
        outputs.append(output)
        weights.append(attention)
    return outputs, (None if weights[0] is None else torch.cat(weights, dim=3))


@torch.no_grad()
def score_incremental(subject: Subject) -> str:
    for heads in HEADS:
        score = score_module(subject.option_node(), heads)
        query = per_head(heads, TGT_LEN, 1)
        proj_keys = score.project_keys(per_head(heads, SRC_LEN, 2))
        together = score(query, proj_keys)
        alone = torch.cat([score(query[:, :, t : t + 1], proj_keys) for t in range(TGT_LEN)], dim=2)
        same(alone, together, f"{heads} head(s): scores of one query at a time and of all at once")
    return "one query at a time = all at once"


@torch.no_grad()
def region_incremental(subject: Subject) -> str:
    for heads in HEADS:
        region = region_module(subject.option_node(), heads).eval()
        scores, query, mask = region_case(heads)
        together = run_region(region, scores, query, mask)
        alone = [
            run_region(
                region, scores[:, :, t : t + 1], query[:, :, t : t + 1], mask, torch.tensor([[t]])
            )
            for t in range(TGT_LEN)
        ]
        same(
            torch.cat(alone, dim=2),
            together,
            f"{heads} head(s): weights of one query at a time and of all at once",
        )
    return "one query at a time (given its position) = all at once"


@torch.no_grad()
def attention_incremental(subject: Subject) -> str:
    query, keys, values = attention_inputs(CHECK_WIDTH)
    mask = source_mask()
    for where, _, module in subject.parts():
        proj_keys, proj_values = module.project_memory(keys, values)
        context, weights = module.attend(query, proj_keys, proj_values, mask)
        steps = [
            module.attend(
                query[:, t : t + 1], proj_keys, proj_values, mask, query_positions=torch.tensor([t])
            )
            for t in range(TGT_LEN)
        ]
        same(
            torch.cat([c for c, _ in steps], dim=1),
            context,
            f"{where}: contexts one query at a time and all at once",
        )
        if weights is not None:
            same(
                torch.cat([w for _, w in steps], dim=2),
                weights,
                f"{where}: weights one query at a time and all at once",
            )
        for how, visible in (("", mask), (", a query without keys", without_keys(mask))):
            fast, _ = module(query, keys, values, visible, need_weights=False)
            explicit, _ = module(query, keys, values, visible)
            same(fast, explicit, f"{where}: contexts with need_weights=False and True{how}")
    return "one query at a time = all at once; need_weights=False = True (also without keys)"


@torch.no_grad()
def decoder_incremental(subject: Subject) -> str:
    mask = source_mask()
    memory, init_hidden, target = decoder_inputs(mask, CHECK_WIDTH)
    steps = [target[:, t : t + 1] for t in range(TGT_LEN)]
    for where, _, module in subject.parts():
        state = module.init_state(memory, mask, init_hidden)
        hidden, attention = module(target, state)
        outputs, weights = stepped(module.step, steps, state)
        same(torch.cat(outputs, dim=1), hidden, f"{where}: hidden states of step and forward")
        same(weights, attention, f"{where}: attention of step and forward")
        source_entries_unchanged(module, state, steps, where)
    return "step = forward"


def source_entries_unchanged(module, state, steps: list[torch.Tensor], where: str) -> None:
    """The `source_state` entries a decoder declares are in its state and equal after steps."""
    declared = sorted(getattr(module, "source_state", ()))
    missing = [key for key in declared if key not in state]
    expect(not missing, f"{where}: source_state names {missing}, which its state lacks")
    after = state
    for step_input in steps:
        after = module.step(step_input, after)[2]
    for key in declared:
        expect(
            _equal(after[key], state[key]), f"{where}: a step changed source_state entry {key!r}"
        )


def _equal(one, other) -> bool:
    if isinstance(one, torch.Tensor):
        return isinstance(other, torch.Tensor) and torch.equal(one, other)
    if isinstance(one, (list, tuple)):
        return len(one) == len(other) and all(_equal(a, b) for a, b in zip(one, other))
    return one == other


@torch.no_grad()
def model_incremental(subject: Subject) -> str:
    model, (src, mask, tgt_in) = subject.model(VOCAB), model_batch()
    logits, attention = model(src, mask, tgt_in, need_weights=True)
    state = model.init_decoder_state(model.encode(src, mask))
    steps = [tgt_in[:, t] for t in range(TGT_LEN)]
    log_probs, weights = stepped(model.decode_step, steps, state)
    full = torch.log_softmax(logits.float(), dim=-1)
    same(
        torch.stack(log_probs, dim=1),
        full,
        "the tiny model's log-probabilities step by step and teacher-forced",
    )
    same(weights, attention, "the tiny model's attention step by step and teacher-forced")
    return "the tiny model's decode_step = its teacher-forced pass"


check = by_group(model_incremental, score_incremental, region_incremental,
                 attention_incremental, decoder_incremental)  # fmt: skip
