"""Label-smoothed cross-entropy over real target tokens (Szegedy et al. 2016)."""

from __future__ import annotations

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
    log_probs = F.log_softmax(logits.float(), dim=-1).flatten(0, 1)  # (batch*tgt_len, vocab)
    flat_targets = targets.flatten()  # (batch*tgt_len,)
    real = flat_targets != PAD_ID
    nll = -log_probs.gather(1, flat_targets.unsqueeze(1)).squeeze(1)  # (batch*tgt_len,)
    nll = nll.masked_fill(~real, 0.0).sum()
    if smoothing == 0.0:
        return nll, nll
    uniform = -log_probs.mean(dim=-1).masked_fill(~real, 0.0).sum()
    return (1.0 - smoothing) * nll + smoothing * uniform, nll
