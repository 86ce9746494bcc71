"""Label-smoothed cross-entropy over real target tokens (Szegedy et al. 2016).

Per real target position t with logits z (V entries) and target y:

    NLL_t     = logsumexp(z) − z_y                      = −log p_y
    uniform_t = logsumexp(z) − mean_v z_v               = −mean_v log p_v
    loss_t    = (1 − ε)·NLL_t + ε·uniform_t

and their gradients, with p = softmax(z),

    ∂NLL_t/∂z_v     = p_v − 1[v = y]
    ∂uniform_t/∂z_v = p_v − 1/V

`SmoothedTerms` computes both terms from one log-softmax and their gradient in one backward
pass over the (positions, vocabulary) log-probabilities, instead of letting autograd
materialise the gradients of the gather, the mean and the log-softmax one after another: the
vocabulary-wide arrays are the largest of a small model's update (BENCHMARKS.md, "Faster
updates"). The forward pass is torch's fused `log_softmax` (one kernel, a row at a time
while it is in cache) and keeps log p for the backward pass, which needs p = exp(log p)
and no second normalisation.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from seq2seq.special_tokens import PAD_ID


class SmoothedTerms(torch.autograd.Function):
    """`logits (N, V) float, targets (N,) long -> nll (N,), uniform (N,)`, both 0 where the
    target is PAD_ID; the backward pass is the closed form above, masked the same way."""

    @staticmethod
    def forward(ctx, logits: torch.Tensor, targets: torch.Tensor, with_uniform: bool):
        ctx.set_materialize_grads(False)
        real = targets != PAD_ID  # (N,)
        log_probs = torch.log_softmax(logits, dim=-1)  # (N, V)
        nll = log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1).neg_().mul_(real)
        uniform = log_probs.mean(dim=-1).neg_().mul_(real) if with_uniform else None
        ctx.save_for_backward(log_probs, targets, real)
        return nll, uniform

    @staticmethod
    def backward(ctx, grad_nll: torch.Tensor | None, grad_uniform: torch.Tensor | None):
        log_probs, targets, real = ctx.saved_tensors
        zeros = torch.zeros_like(real, dtype=log_probs.dtype)
        grad_nll = zeros if grad_nll is None else grad_nll * real  # (N,)
        grad_uniform = zeros if grad_uniform is None else grad_uniform * real  # (N,)
        grad = torch.exp(log_probs)  # p, (N, V)
        grad.mul_((grad_nll + grad_uniform).unsqueeze(-1))
        grad.scatter_add_(-1, targets.unsqueeze(-1), -grad_nll.unsqueeze(-1))
        grad.sub_((grad_uniform / log_probs.size(-1)).unsqueeze(-1))
        return grad, None, None


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
    batch, tgt_len, vocab = logits.shape
    nll, uniform = SmoothedTerms.apply(
        logits.float().reshape(-1, vocab), targets.reshape(-1), smoothing != 0.0
    )  # (batch · tgt_len,) each
    nll = reduce(nll.view(batch, tgt_len))
    if smoothing == 0.0:
        return nll, nll
    uniform = reduce(uniform.view(batch, tgt_len))
    return (1.0 - smoothing) * nll + smoothing * uniform, nll
