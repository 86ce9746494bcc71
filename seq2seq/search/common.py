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
    """log_probs (rows, vocab), changed in place, with -inf for what a row may not emit: PAD
    and BOS always, everything but EOS in the rows at their maximum length (at_max_len
    (rows,) bool). Returns the same tensor.

    The allowed entries keep the model's values, so scores stay its log-probabilities. In
    place: the search owns the fresh tensor `decode_step` returned, and a copy of a
    (rows, vocab) array per step was a tenth of a beam search's time.
    """
    if at_max_len.any():
        eos = log_probs[:, EOS_ID].clone()  # (rows,)
        log_probs.masked_fill_(at_max_len.unsqueeze(1), float("-inf"))
        log_probs[:, EOS_ID] = eos  # EOS is always allowed
    log_probs[:, list(NEVER_EMITTED)] = float("-inf")
    return log_probs


TOP_K_BLOCK = 64  # columns per block of `top_k`
TOP_K_MIN_BLOCKS = 8  # per k: narrower rows use `topk` itself, which was faster there


def top_k(values: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The k largest entries of each row of `values` (rows, width) and their columns, largest
    first: `values.topk(k, dim=1)`, found in fewer passes over a wide row.

    The row is cut into blocks of `TOP_K_BLOCK` columns. A row's k largest entries lie in
    its k blocks with the largest maxima: an entry x in any other block is exceeded by those
    k maxima, k distinct entries larger than x (ties aside, which any top-k may break either
    way). So one vectorised `amax` per block, a top-k over the block maxima and a top-k
    over the k chosen blocks replace the top-k over the whole row. On one CPU thread, for
    640 rows of 8,000, `topk` took 9.4 ms for k = 10 and 7.8 ms for k = 1, this 6.4 and
    1.3 ms; for rows of 2,000 and k = 10 it was slower (5.6 against 3.9 ms), so rows of
    fewer than `TOP_K_MIN_BLOCKS` · k blocks use `topk` itself.
    """
    rows, width = values.shape
    blocks = width // TOP_K_BLOCK
    if blocks < TOP_K_MIN_BLOCKS * k:
        return values.topk(k, dim=1)
    whole = blocks * TOP_K_BLOCK
    tiled = values[:, :whole].unflatten(1, (blocks, TOP_K_BLOCK))  # (rows, blocks, block)
    maxima = tiled.amax(dim=2)  # (rows, blocks)
    if whole < width:  # the last, shorter block
        maxima = torch.cat([maxima, values[:, whole:].amax(dim=1, keepdim=True)], dim=1)
    chosen = maxima.topk(k, dim=1, sorted=False).indices  # (rows, k)
    offsets = torch.arange(TOP_K_BLOCK, device=values.device)
    columns = (chosen.unsqueeze(2) * TOP_K_BLOCK + offsets).flatten(1)  # (rows, k · block)
    inside = columns < width  # the last block's columns past the row's end
    candidates = values.gather(1, columns.clamp(max=width - 1)).masked_fill(~inside, float("-inf"))
    top, where = candidates.topk(k, dim=1)  # (rows, k)
    return top, columns.gather(1, where)


def asked_attention(attention: torch.Tensor | None, need_weights: bool) -> torch.Tensor | None:
    """The step's attention if the caller asked for weights, else None: a decoder may
    return weights it computes anyway (an RNN's additive attention), and carrying them
    through the search costs a copy per step and a gather per finished hypothesis."""
    return attention if need_weights else None


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
