"""Label-smoothed cross-entropy over real target tokens (Szegedy et al. 2016)."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from seq2seq.special_tokens import PAD_ID


def label_smoothed_nll(
    logits: torch.Tensor,  # (batch, tgt_len, vocab)
    targets: torch.Tensor,  # (batch, tgt_len)
    smoothing: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed losses over non-padding positions: (smoothed loss, plain NLL).

    The smoothed loss is (1 − ε)·NLL + ε·mean_v(−log p_v), the plain NLL gives perplexity.
    Padding positions contribute exactly nothing to either.
    """
    return _smoothed(logits, targets, smoothing, torch.sum)


def sentence_label_smoothed_nll(
    logits: torch.Tensor,  # (batch, tgt_len, vocab)
    targets: torch.Tensor,  # (batch, tgt_len)
    smoothing: float = 0.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`label_smoothed_nll` summed per sentence instead: (smoothed loss, plain NLL), each
    (batch,). The REINFORCE reward of hard attention is the per-sentence NLL
    (`seq2seq.training.reinforce`)."""
    return _smoothed(logits, targets, smoothing, lambda losses: losses.sum(dim=1))


def _smoothed(
    logits: torch.Tensor,
    targets: torch.Tensor,
    smoothing: float,
    reduce: Callable[[torch.Tensor], torch.Tensor],  # (batch, tgt_len) -> sums
) -> tuple[torch.Tensor, torch.Tensor]:
    """(smoothed loss, NLL), each the `reduce` of its per-position values (0 at padding)."""
    log_probs = F.log_softmax(logits.float(), dim=-1)  # (batch, tgt_len, vocab)
    real = targets != PAD_ID  # (batch, tgt_len)
    nll = -log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (batch, tgt_len)
    nll = reduce(nll.masked_fill(~real, 0.0))
    if smoothing == 0.0:
        return nll, nll
    uniform = reduce(-log_probs.mean(dim=-1).masked_fill(~real, 0.0))
    return (1.0 - smoothing) * nll + smoothing * uniform, nll
