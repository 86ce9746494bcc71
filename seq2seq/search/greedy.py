"""Greedy search: at every step emit the single most probable token, batched over sentences."""

from __future__ import annotations

import torch

from seq2seq.models.base import reorder_state
from seq2seq.search.common import (
    Hypothesis,
    PartialOutputs,
    asked_attention,
    check_search_inputs,
    decoder_positions,
    ended_hypotheses,
    max_output_lengths,
    restrict_choices,
    top_k,
)
from seq2seq.special_tokens import EOS_ID


@torch.no_grad()
def greedy_search(
    model,
    src: torch.Tensor,
    src_mask: torch.Tensor,
    *,
    max_len_a: float = 1.5,
    max_len_b: float = 10,
    need_weights: bool = True,
) -> list[Hypothesis]:
    """One hypothesis per sentence of `src` (batch, src_len), in input order.

    y_t = argmax_y log P(y | y_<t, X). A sentence stops at EOS, or is made to emit EOS
    after floor(max_len_a · real_src_len + max_len_b) tokens; finished sentences leave the
    batch. Call `model.eval()` first: search does not change the model's mode.
    """
    check_search_inputs(src, src_mask, max_len_a, max_len_b)
    state = model.init_decoder_state(model.encode(src, src_mask))
    max_lens = max_output_lengths(src_mask, max_len_a, max_len_b, decoder_positions(model))
    sentence_ids = torch.arange(
        src.size(0), device=src.device
    )  # (rows,) input row of each active row
    outputs = PartialOutputs.start(torch.zeros(src.size(0), device=src.device))
    results: list[Hypothesis | None] = [None] * src.size(0)
    for step in range(int(max_lens.max()) + 1):
        log_probs, attention, state = model.decode_step(
            outputs.last_tokens(), state, need_weights=need_weights
        )  # (rows, vocab), (rows, layers, heads, 1, src_len) | None
        attention = asked_attention(attention, need_weights)
        log_probs = restrict_choices(log_probs, at_max_len=max_lens[sentence_ids] <= step)
        best_log_probs, best_tokens = (best.squeeze(1) for best in top_k(log_probs, 1))  # (rows,)
        outputs = outputs.extend(best_tokens, outputs.scores + best_log_probs, attention)
        finished = best_tokens == EOS_ID  # (rows,)
        if not finished.any():
            continue
        _store_finished(results, outputs, sentence_ids, finished, src_mask)
        alive = (~finished).nonzero().squeeze(1)  # (still_active,)
        if alive.numel() == 0:
            break
        outputs, sentence_ids = outputs.select(alive), sentence_ids[alive]
        state = reorder_state(state, alive)
    return results  # type: ignore[return-value]  # every sentence has ended by now


def _store_finished(
    results: list[Hypothesis | None],
    outputs: PartialOutputs,
    sentence_ids: torch.Tensor,
    finished: torch.Tensor,
    src_mask: torch.Tensor,
) -> None:
    """Turn the rows that just emitted EOS into hypotheses at their input positions."""
    rows = finished.nonzero().squeeze(1)  # (n_finished,)
    ended_ids = sentence_ids[rows]
    hypotheses = ended_hypotheses(outputs.select(rows), src_mask[ended_ids])
    for sentence, hypothesis in zip(ended_ids.tolist(), hypotheses, strict=True):
        results[sentence] = hypothesis
