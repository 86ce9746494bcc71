"""What greedy and beam search share: the hypothesis record, the length rules, the output buffer.

Search needs only the model's decoding interface:

* `model.encode(src, src_mask) -> EncoderOutput`
* `model.init_decoder_state(encoded) -> DecoderState`
* `model.decode_step(prev_tokens (rows,), state, need_weights) ->
  (log_probs (rows, vocab), attention (rows, layers, heads, 1, src_len) | None, state)`

Every hypothesis ends with EOS. When a hypothesis reaches its maximum length the next step
may only emit EOS (as fairseq does), so `score` is always the model's log-probability of
`tokens + [EOS]` and the attention always has one row per output token plus the EOS row.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from seq2seq.special_tokens import BOS_ID, EOS_ID, PAD_ID

# Ids a decoder may never emit: padding, and the start symbol it was fed.
NEVER_EMITTED = (PAD_ID, BOS_ID)


def gnmt_length_penalty(length: int, alpha: float) -> float:
    """lp(Y) = ((5 + |Y|) / 6) ** α   (Wu et al. 2016, eq. 14).

    Hypotheses are ranked by log P(Y|X) / lp(Y); |Y| counts the output tokens and the EOS.
    Log-probabilities are negative, so α > 0 favours longer outputs and α = 0 ranks by
    the raw log-probability.
    """
    return ((5.0 + length) / 6.0) ** alpha


@dataclass
class Hypothesis:
    """One finished output of a search.

    tokens: output ids without BOS and EOS.
    score: sum of the model's log-probabilities of `tokens` and the final EOS.
    attention: (layers, heads, len(tokens) + 1, real_src_len), one row per output token
        and one for the EOS, columns only for the real (unpadded) source positions; None
        when the model has no attention or weights were not asked for.
    """

    tokens: list[int]
    score: float
    attention: torch.Tensor | None = None

    def normalised_score(self, length_penalty: float) -> float:
        """score / lp(Y), the quantity beam search ranks finished hypotheses by."""
        return self.score / gnmt_length_penalty(len(self.tokens) + 1, length_penalty)


def check_search_inputs(
    src: torch.Tensor, src_mask: torch.Tensor, max_len_a: float, max_len_b: float
) -> None:
    """Raise ValueError for inputs search would otherwise turn into a silent wrong result."""
    if src.dim() != 2 or src.dtype != torch.long:
        raise ValueError(
            f"src must be a (batch, src_len) long tensor, got {tuple(src.shape)} {src.dtype}"
        )
    if src_mask.shape != src.shape or src_mask.dtype != torch.bool:
        raise ValueError(
            f"src_mask must be a bool tensor shaped like src {tuple(src.shape)}, "
            f"got {tuple(src_mask.shape)} {src_mask.dtype}"
        )
    empty_rows = (~src_mask.any(dim=1)).nonzero().flatten().tolist()
    if empty_rows:
        raise ValueError(f"src_mask has no real token in rows {empty_rows}")
    if max_len_a < 0 or max_len_b < 0:
        raise ValueError(f"max_len_a and max_len_b must be >= 0, got {max_len_a}, {max_len_b}")


def max_output_lengths(
    src_mask: torch.Tensor, max_len_a: float, max_len_b: float, positions: int | None = None
) -> torch.Tensor:
    """Most output tokens (EOS not counted) per sentence: floor(a · real_src_len + b), (batch,),
    and at most `positions - 1` when the decoder has a position table of `positions` rows
    (step t reads position t: BOS and the tokens before the forced EOS)."""
    src_lengths = src_mask.sum(dim=1).to(torch.float64)  # (batch,)
    lengths = torch.floor(max_len_a * src_lengths + max_len_b).long()
    return lengths if positions is None else lengths.clamp(max=positions - 1)


def decoder_positions(model) -> int | None:
    """The rows of the decoder's position table (Transformer, ConvS2S), or None (RNNs)."""
    table = getattr(getattr(model, "decoder", None), "positions", None)
    rows = getattr(table, "max_positions", None)
    return rows if isinstance(rows, int) else None


def restrict_choices(log_probs: torch.Tensor, at_max_len: torch.Tensor) -> torch.Tensor:
    """A copy of log_probs (rows, vocab) with -inf for what a row may not emit: PAD and BOS
    always, everything but EOS in the rows at their maximum length (at_max_len (rows,) bool).

    The allowed entries keep the model's values, so scores stay its log-probabilities.
    """
    restricted = log_probs.masked_fill(at_max_len.unsqueeze(1), float("-inf"))  # (rows, vocab)
    restricted[:, EOS_ID] = log_probs[:, EOS_ID]  # EOS is always allowed
    restricted[:, list(NEVER_EMITTED)] = float("-inf")
    return restricted


@dataclass
class PartialOutputs:
    """The outputs produced so far by each row of a search (a sentence or one beam of one).

    tokens: (rows, steps) long, without BOS.
    scores: (rows,) summed log-probabilities of `tokens`.
    attention: (rows, layers, heads, steps, src_len), or None without attention weights.
    """

    tokens: torch.Tensor
    scores: torch.Tensor
    attention: torch.Tensor | None = None

    @classmethod
    def start(cls, scores: torch.Tensor) -> PartialOutputs:
        """Empty outputs with the given starting scores (rows,)."""
        tokens = torch.empty(scores.size(0), 0, dtype=torch.long, device=scores.device)
        return cls(tokens, scores)

    def last_tokens(self) -> torch.Tensor:
        """The token each row feeds to the next decoder step: (rows,), BOS before the first."""
        if self.tokens.size(1) == 0:
            return torch.full_like(self.scores, BOS_ID, dtype=torch.long)
        return self.tokens[:, -1]

    def select(self, index: torch.Tensor) -> PartialOutputs:
        """Rows `index` (1-D long), in that order; rows may repeat."""
        attention = None if self.attention is None else self.attention.index_select(0, index)
        return PartialOutputs(
            self.tokens.index_select(0, index), self.scores.index_select(0, index), attention
        )

    def extend(
        self, next_tokens: torch.Tensor, scores: torch.Tensor, step_attention: torch.Tensor | None
    ) -> PartialOutputs:
        """Append one step: next_tokens (rows,), new total scores (rows,), attention
        (rows, layers, heads, 1, src_len) or None. Attention is kept only if every step has it."""
        tokens = torch.cat([self.tokens, next_tokens.unsqueeze(1)], dim=1)  # (rows, steps + 1)
        if step_attention is None or (self.attention is None and self.tokens.size(1) > 0):
            attention = None
        elif self.attention is None:
            attention = step_attention
        else:
            attention = torch.cat([self.attention, step_attention], dim=3)
        return PartialOutputs(tokens, scores, attention)


def ended_hypotheses(ended: PartialOutputs, src_mask: torch.Tensor) -> list[Hypothesis]:
    """Hypotheses from rows whose last token is EOS; src_mask (rows, src_len) of their sources."""
    tokens = ended.tokens[:, :-1].tolist()  # drop the EOS
    scores = ended.scores.tolist()
    hypotheses = []
    for row, (row_tokens, score) in enumerate(zip(tokens, scores, strict=True)):
        attention = None
        if ended.attention is not None:
            real_columns = src_mask[row]  # (src_len,) bool
            attention = ended.attention[row][..., real_columns]  # (layers, heads, steps, real_len)
        hypotheses.append(Hypothesis(row_tokens, score, attention))
    return hypotheses
