"""Beam search, batched over sentences, with the GNMT length penalty.

Every active sentence keeps `beam_size` live hypotheses as rows of one batch
(sentence-major: rows s·k … s·k + k - 1 belong to sentence s). Each step:

1. step:     one decoder call for all rows; a candidate's score is its parent's score plus
             log P(y | prefix, X);
2. score:    the 2·k best candidates per sentence over beam × vocab (twice the beam, so k
             non-EOS candidates remain however many of them end);
3. finalise: candidates ending in EOS that rank within the top k are set aside as finished;
4. prune:    the k best candidates that did not end become the new beam;
5. drop:     a sentence leaves the batch once it is done (see `FinishedHypotheses.is_done`)
             or at its maximum length, where only EOS may be emitted so that all its live
             hypotheses end.

Finished hypotheses are ranked by score / lp(Y) (see `gnmt_length_penalty`). All candidates
of one step have the same length, so the penalty never changes the pruning, and with k = 1
the search returns exactly what greedy search does, for every length penalty.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from seq2seq.models.base import DecoderState, reorder_state, source_state
from seq2seq.search.common import (
    Hypothesis,
    PartialOutputs,
    asked_attention,
    check_search_inputs,
    decoder_positions,
    ended_hypotheses,
    gnmt_length_penalty,
    max_output_lengths,
    restrict_choices,
    top_k,
)
from seq2seq.special_tokens import EOS_ID


@torch.no_grad()
def beam_search(
    model,
    src: torch.Tensor,
    src_mask: torch.Tensor,
    *,
    beam_size: int = 5,
    length_penalty: float = 1.0,
    max_len_a: float = 1.5,
    max_len_b: float = 10,
    n_best: int = 1,
    need_weights: bool = True,
) -> list[list[Hypothesis]]:
    """The `n_best` best hypotheses of every sentence of `src` (batch, src_len), best first.

    Ranking is by score / ((5 + |Y|) / 6) ** length_penalty (Wu et al. 2016, eq. 14), |Y|
    counting the EOS. At most floor(max_len_a · real_src_len + max_len_b) tokens are
    emitted before EOS is forced. Call `model.eval()` first: search does not change the
    model's mode.
    """
    check_search_inputs(src, src_mask, max_len_a, max_len_b)
    if beam_size < 1:
        raise ValueError(f"beam_size must be >= 1, got {beam_size}")
    if not 1 <= n_best <= beam_size:
        raise ValueError(f"n_best must be between 1 and beam_size={beam_size}, got {n_best}")
    max_lens = max_output_lengths(src_mask, max_len_a, max_len_b, decoder_positions(model))
    beams = _start(model, src, src_mask, beam_size, max_lens)
    finished = FinishedHypotheses(src.size(0), beam_size, length_penalty)
    for step in range(int(max_lens.max()) + 1):
        beams = _advance(model, beams, step, finished, src_mask, need_weights)
        if beams is None:
            break
    return finished.best(n_best)


class FinishedHypotheses:
    """The hypotheses that ended, per input sentence, and the rule that says when to stop.

    A sentence is done when it has `beam_size` finished hypotheses and its best live one
    cannot beat the best of them: live_score / lp(live_length) <= best score / lp, with
    live_length the number of tokens the live hypotheses have now (|Y| of those that ended
    at this step). Scores only fall as a hypothesis grows, so for length_penalty <= 0 the
    best hypothesis is then final. For length_penalty > 0 a longer output earns a larger
    lp; not waiting for that is the usual heuristic, and comparing at equal length is
    what makes beam_size = 1 stop exactly where greedy search stops.
    """

    def __init__(self, batch: int, beam_size: int, length_penalty: float):
        self.per_sentence: list[list[Hypothesis]] = [[] for _ in range(batch)]
        self.beam_size = beam_size
        self.length_penalty = length_penalty

    def add(self, sentence: int, hypothesis: Hypothesis) -> None:
        self.per_sentence[sentence].append(hypothesis)

    def is_done(self, sentence: int, best_live_score: float, live_length: int) -> bool:
        hypotheses = self.per_sentence[sentence]
        if len(hypotheses) < self.beam_size:
            return False
        best = max(h.normalised_score(self.length_penalty) for h in hypotheses)
        return best_live_score / gnmt_length_penalty(live_length, self.length_penalty) <= best

    def best(self, n_best: int) -> list[list[Hypothesis]]:
        """The `n_best` hypotheses of each sentence with the highest score / lp, best first."""
        return [
            sorted(hypotheses, key=self._rank_key, reverse=True)[:n_best]
            for hypotheses in self.per_sentence
        ]

    def _rank_key(self, hypothesis: Hypothesis) -> float:
        return hypothesis.normalised_score(self.length_penalty)


@dataclass
class _ActiveBeams:
    """The sentences still searched, `beam_size` rows each, best row first."""

    sentence_ids: torch.Tensor  # (sentences,) input row of each active sentence
    max_lens: torch.Tensor  # (sentences,) most output tokens before EOS is forced
    outputs: PartialOutputs  # (sentences * beam, ...) live hypotheses
    state: DecoderState  # batch = sentences * beam
    beam_size: int

    def select_sentences(self, keep: torch.Tensor) -> _ActiveBeams:
        """Only the sentences at positions `keep` (1-D long), with all their rows."""
        offsets = torch.arange(self.beam_size, device=keep.device)
        rows = (keep.unsqueeze(1) * self.beam_size + offsets).view(-1)  # (kept * beam,)
        return _ActiveBeams(
            self.sentence_ids[keep],
            self.max_lens[keep],
            self.outputs.select(rows),
            reorder_state(self.state, rows),
            self.beam_size,
        )


@dataclass
class _Candidates:
    """The best one-token extensions of each active sentence, best first."""

    scores: torch.Tensor  # (sentences, 2 * beam) total log-probability
    rows: torch.Tensor  # (sentences, 2 * beam) the live row each one extends
    tokens: torch.Tensor  # (sentences, 2 * beam) the token it appends


def _start(
    model, src: torch.Tensor, src_mask: torch.Tensor, beam_size: int, max_lens: torch.Tensor
) -> _ActiveBeams:
    """Encode once, then copy each sentence's decoder state `beam_size` times."""
    batch = src.size(0)
    state = model.init_decoder_state(model.encode(src, src_mask))
    copies = torch.arange(batch, device=src.device).repeat_interleave(beam_size)  # (batch * beam,)
    # The copies are identical: only the first may live, or the first step would fill
    # the beam with `beam_size` copies of the same best token.
    scores = torch.full((batch, beam_size), float("-inf"), device=src.device)
    scores[:, 0] = 0.0
    return _ActiveBeams(
        torch.arange(batch, device=src.device),
        max_lens,
        PartialOutputs.start(scores.view(-1)),
        reorder_state(state, copies),
        beam_size,
    )


def _advance(
    model,
    beams: _ActiveBeams,
    step: int,
    finished: FinishedHypotheses,
    src_mask: torch.Tensor,
    need_weights: bool,
) -> _ActiveBeams | None:
    """One step for every live hypothesis; None once every sentence is done."""
    log_probs, attention, state = model.decode_step(
        beams.outputs.last_tokens(), beams.state, need_weights=need_weights
    )  # (rows, vocab), (rows, layers, heads, 1, src_len) | None
    attention = asked_attention(attention, need_weights)
    at_max_len = (beams.max_lens <= step).repeat_interleave(beams.beam_size)  # (rows,)
    log_probs = restrict_choices(log_probs, at_max_len)
    candidates = _top_candidates(beams.outputs.scores, log_probs, beams.beam_size)
    _finalise(candidates, beams, attention, finished, src_mask)
    beams = _prune(candidates, beams, attention, state, source_state(model))
    return _drop_done(beams, step, finished)


def _top_candidates(scores: torch.Tensor, log_probs: torch.Tensor, beam_size: int) -> _Candidates:
    """The 2·beam best extensions of each sentence over all its rows × the vocabulary.

    In two stages that find the same set: each row's 2·beam best tokens (a row cannot place
    more than that among its sentence's 2·beam best), then the 2·beam best of the
    sentence's beam × 2·beam. Only the small first-stage table gets the rows' scores
    added, instead of a (rows, vocab) array of totals.
    """
    width = 2 * beam_size
    per_row = min(width, log_probs.size(1))
    row_log_probs, row_tokens = top_k(log_probs, per_row)  # (rows, per_row)
    totals = (scores.unsqueeze(1) + row_log_probs).view(-1, beam_size * per_row)
    top_scores, flat_ids = totals.topk(width, dim=1)  # (sentences, 2 * beam)
    first_rows = torch.arange(totals.size(0), device=totals.device) * beam_size  # (sentences,)
    rows = first_rows.unsqueeze(1) + torch.div(flat_ids, per_row, rounding_mode="floor")
    tokens = row_tokens.view(-1, beam_size * per_row).gather(1, flat_ids)  # (sentences, 2 * beam)
    return _Candidates(top_scores, rows, tokens)


def _finalise(
    candidates: _Candidates,
    beams: _ActiveBeams,
    attention: torch.Tensor | None,
    finished: FinishedHypotheses,
    src_mask: torch.Tensor,
) -> None:
    """Set aside, as finished hypotheses, the EOS candidates among the top `beam_size`."""
    ranks = torch.arange(candidates.tokens.size(1), device=candidates.tokens.device)
    ends = (candidates.tokens == EOS_ID) & (ranks < beams.beam_size) & candidates.scores.isfinite()
    sentence_pos, rank = ends.nonzero(as_tuple=True)  # (n_ended,), (n_ended,)
    if sentence_pos.numel() == 0:
        return
    rows = candidates.rows[sentence_pos, rank]  # (n_ended,)
    step_attention = None if attention is None else attention.index_select(0, rows)
    ended = beams.outputs.select(rows).extend(
        candidates.tokens[sentence_pos, rank], candidates.scores[sentence_pos, rank], step_attention
    )
    sentence_ids = beams.sentence_ids[sentence_pos]  # (n_ended,)
    hypotheses = ended_hypotheses(ended, src_mask[sentence_ids])
    for sentence, hypothesis in zip(sentence_ids.tolist(), hypotheses, strict=True):
        finished.add(sentence, hypothesis)


def _prune(
    candidates: _Candidates,
    beams: _ActiveBeams,
    attention: torch.Tensor | None,
    state: DecoderState,
    unchanged: frozenset[str],
) -> _ActiveBeams:
    """The new beam: the `beam_size` best candidates that did not end in EOS, best first.

    Every new row extends a row of the same sentence, so the state entries that depend
    only on the source (`unchanged`, the decoder's `source_state`) stay where they are."""
    ended = (candidates.tokens == EOS_ID).to(torch.uint8)  # (sentences, 2 * beam)
    # A stable sort moves the non-EOS candidates to the front and keeps them best first.
    keep = ended.sort(dim=1, stable=True).indices[:, : beams.beam_size]  # (sentences, beam)
    rows = candidates.rows.gather(1, keep).view(-1)  # (sentences * beam,)
    tokens = candidates.tokens.gather(1, keep).view(-1)
    scores = candidates.scores.gather(1, keep).view(-1)
    step_attention = None if attention is None else attention.index_select(0, rows)
    outputs = beams.outputs.select(rows).extend(tokens, scores, step_attention)
    state = reorder_state(state, rows, keep=unchanged)
    return _ActiveBeams(beams.sentence_ids, beams.max_lens, outputs, state, beams.beam_size)


def _drop_done(beams: _ActiveBeams, step: int, finished: FinishedHypotheses) -> _ActiveBeams | None:
    """Remove the sentences that are done or at their maximum length; None if none is left."""
    # Each sentence's rows are best first, so its first row holds its best live score.
    best_live = beams.outputs.scores.view(-1, beams.beam_size)[:, 0]  # (sentences,)
    done = [
        max_len <= step or finished.is_done(sentence, live_score, live_length=step + 1)
        for sentence, max_len, live_score in zip(
            beams.sentence_ids.tolist(), beams.max_lens.tolist(), best_live.tolist(), strict=True
        )
    ]
    if not any(done):
        return beams
    if all(done):
        return None
    keep = [position for position, is_done in enumerate(done) if not is_done]
    return beams.select_sentences(torch.tensor(keep, device=beams.max_lens.device))
