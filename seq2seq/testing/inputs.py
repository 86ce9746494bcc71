"""Small fixed inputs for the checks: odd sizes, so that a transposed dimension fails loudly.

Three right-padded sentences with 7, 4 and 1 real source positions, 5 target positions;
every tensor comes from its own seeded generator, so each check sees the same numbers. The
inputs that several checks give the same part (an attention's queries, keys and values, a
decoder's memory and targets, the tiny model's batch) are built here once.
"""

from __future__ import annotations

import torch

from seq2seq.special_tokens import BOS_ID

BATCH, SRC_LEN, TGT_LEN = 3, 7, 5
VOCAB = 11  # the tiny model's source and target vocabulary
LENGTHS = (7, 4, 1)  # real source positions per sentence
ATOL = 1e-5  # the tolerance of "equal" for two computations of the same float32 result


def randn(*shape: int, seed: int) -> torch.Tensor:
    """A standard normal tensor of `shape` from generator `seed`."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def source_mask(lengths: tuple[int, ...] = LENGTHS, src_len: int = SRC_LEN) -> torch.Tensor:
    """`(batch, src_len)` bool, True at the first `lengths[b]` positions of row b."""
    return torch.arange(src_len).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)


def refill_padding(
    tensor: torch.Tensor, mask: torch.Tensor, seed: int, dim: int = 1
) -> torch.Tensor:
    """`tensor` (batch first, source positions on `dim`) with new random values, ten times
    larger, at the positions `mask (batch, src_len)` marks as padding."""
    shape = [1] * tensor.dim()
    shape[0], shape[dim] = mask.shape
    padded = ~mask.reshape(shape)  # (batch, 1, ..., src_len, 1, ...)
    return torch.where(padded, 10 * randn(*tensor.shape, seed=seed), tensor)


def tokens(vocab: int, *shape: int, seed: int) -> torch.Tensor:
    """Random ids of real tokens (4 .. vocab - 1: no special token) of `shape`."""
    return torch.randint(4, vocab, shape, generator=torch.Generator().manual_seed(seed))


def close(actual: torch.Tensor, expected: torch.Tensor, atol: float = ATOL) -> bool:
    """Same shape, and equal within `atol` everywhere."""
    return actual.shape == expected.shape and bool(
        torch.allclose(actual, expected, atol=atol, rtol=0)
    )


def largest_gap(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """The largest absolute difference, for messages."""
    return float((actual - expected).abs().max())


def after_bos(ids: torch.Tensor) -> torch.Tensor:
    """`ids (batch, n)` with BOS in front: a decoder's teacher-forced input `(batch, n + 1)`."""
    return torch.cat([torch.full((ids.size(0), 1), BOS_ID), ids], dim=1)


def model_batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The tiny model's source ids `(batch, src_len)`, their mask, and its decoder input
    `(batch, tgt_len)`: BOS and random tokens (the same in every check that runs it)."""
    src = tokens(VOCAB, BATCH, SRC_LEN, seed=1)
    return src, source_mask(), after_bos(tokens(VOCAB, BATCH, TGT_LEN - 1, seed=2))


def attention_inputs(width: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """An attention's queries `(batch, tgt_len, width)`, keys and values `(batch, src_len,
    width)`."""
    query = randn(BATCH, TGT_LEN, width, seed=1)
    return query, randn(BATCH, SRC_LEN, width, seed=2), randn(BATCH, SRC_LEN, width, seed=3)


def decoder_inputs(
    mask: torch.Tensor, width: int, padding_seed: int | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A decoder's memory `(batch, src_len, width)`, initial hidden state `(batch, width)`
    and target embeddings `(batch, tgt_len, width)`. The memory is zero where `mask` marks
    padding, or random there (`refill_padding`) with `padding_seed`."""
    memory = randn(BATCH, SRC_LEN, width, seed=1) * mask.unsqueeze(-1)
    if padding_seed is not None:
        memory = refill_padding(memory, mask, padding_seed)
    init_hidden = torch.tanh(randn(BATCH, width, seed=4))
    return memory, init_hidden, randn(BATCH, TGT_LEN, width, seed=5)
