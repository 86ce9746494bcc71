"""REINFORCE for hard attention: the score function's surrogate loss (Williams 1992; Xu et al.
2015).

A hard region with `attention.region.estimator=reinforce` (`seq2seq.models.attention.
regions.HardRegion`) samples one key k per query and head in training, gives it weight 1
and lets no gradient through the weights to the scores. The scores learn from the
surrogate this module forms, added to the summed translation loss:

    L_RL = −Σ_i (R_i − b) · log π_i,     log π_i = Σ_{q ∈ real queries of i} log p(k_q),

    R_i = −NLL_i / T_i    (sentence i's mean token log-likelihood of the reference,
                           detached; T_i its real target tokens),

b the region's moving-average baseline (`HardRegion.update_baseline`, updated after L_RL is
formed, so that b never depends on this batch's samples). Its gradient
−Σ_i (R_i − b) ∇log π_i estimates −∇ Σ_i E_k[R_i] without bias. The queries of padding
target positions are left out of log π_i: their keys change no reward.

    with recording(model) as choices:           # every REINFORCE region records
        logits, _ = model(src, src_mask, tgt_in)
    loss, nll = sentence_label_smoothed_nll(logits, tgt_out)   # (batch,) each
    surrogate = choices.surrogate(nll, tgt_out)                 # and the baselines move on

The objective (`seq2seq.training.objectives.Reinforce`) adds `surrogate − surrogate.detach()`:
the same gradient with the value 0, so `train/loss` stays the translation loss.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from seq2seq.models.attention.regions import HardRegion
from seq2seq.special_tokens import PAD_ID

# One call's (log p(k) (batch, tgt_len), query positions (batch or 1, tgt_len)).
Record = tuple[torch.Tensor, torch.Tensor]


def reinforce_regions(model: nn.Module) -> list[HardRegion]:
    """The hard regions of `model` (itself included) that learn by REINFORCE."""
    return [
        module
        for module in model.modules()
        if isinstance(module, HardRegion) and module.estimator == "reinforce"
    ]


def sentence_rewards(sentence_nll: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """R_i = −NLL_i / T_i, detached, (batch,): each sentence's mean token log-likelihood of
    its reference. `sentence_nll` (batch,) summed over real tokens, `targets` (batch, tgt_len)."""
    tokens = (targets != PAD_ID).sum(dim=1).clamp(min=1)  # (batch,)
    return -(sentence_nll.detach().float() / tokens)


def reinforce_surrogate(
    log_probs: torch.Tensor,  # (batch,) log π_i, with its graph
    rewards: torch.Tensor,  # (batch,) R_i
    baseline: torch.Tensor | float = 0.0,  # b
) -> torch.Tensor:
    """`L_RL = −Σ_i (R_i − b) · log π_i` (module docstring), a scalar whose gradient is the
    REINFORCE estimate of −∇ Σ_i E[R_i]; R and b carry no gradient."""
    advantage = (rewards - baseline).detach()  # (batch,)
    return -(advantage * log_probs).sum()


class Choices:
    """What the REINFORCE regions recorded during one forward pass (`recording`)."""

    def __init__(self, regions: list[HardRegion]):
        self.regions = regions
        self.records: dict[int, list[Record]] = {id(region): [] for region in regions}
        self.rewards: torch.Tensor | None = None  # (batch,) of the last `surrogate`

    def log_probs(self, region: HardRegion, targets: torch.Tensor | None = None) -> torch.Tensor:
        """log π_i of one region, (batch,): Σ log p(k) over its calls, heads and queries,
        the queries at padding positions of `targets` (batch, tgt_len) left out (None: all
        counted). A region that recorded nothing gives 0."""
        total = torch.zeros(())
        for taken, positions in self.records[id(region)]:  # (batch, tgt_len) each
            if targets is not None:
                real = targets != PAD_ID  # (batch, target positions)
                index = positions.expand_as(taken).clamp(max=real.size(1) - 1)
                taken = taken * real.gather(1, index)
            total = total + taken.sum(dim=1)
        return total

    def surrogate(self, sentence_nll: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Σ over regions of `reinforce_surrogate(log π, R, b)` for per-sentence NLLs
        (batch,) of `targets`; then each region's baseline moves towards the batch's mean R."""
        rewards = sentence_rewards(sentence_nll, targets)  # (batch,)
        total = torch.zeros((), device=rewards.device)
        for region in self.regions:
            log_probs = self.log_probs(region, targets)
            total = total + reinforce_surrogate(log_probs, rewards, region.baseline_value())
            region.update_baseline(rewards.mean())
        self.rewards = rewards
        return total


@contextmanager
def recording(model: nn.Module) -> Iterator[Choices]:
    """Switch recording on in every REINFORCE region of `model` (training mode only records:
    evaluation takes the argmax) and yield what they record; off again on exit."""
    choices = Choices(reinforce_regions(model))
    for region in choices.regions:
        region.choices = choices.records[id(region)]
    try:
        yield choices
    finally:
        for region in choices.regions:
            region.choices = None
