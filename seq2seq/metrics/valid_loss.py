"""The teacher-forced valid loss and its perplexity, as validation metrics.

With N the target tokens of the valid split (EOS included, padding not) and p the model's
probability of each reference token given the source and the reference prefix,

    loss = −(1/N) Σ log p(y_t | y_<t, x)        (nats per token, no label smoothing)
    ppl  = exp(loss)

The exponent is capped at PPL_CAP_NATS so that a diverging model gives a large finite
perplexity instead of an overflow. Both are lower-is-better.
"""

from __future__ import annotations

import math

from seq2seq.metrics.base import LossMetric, validation_metric

PPL_CAP_NATS = 50.0


def perplexity(loss: float) -> float:
    """exp(loss), the exponent capped at PPL_CAP_NATS."""
    return math.exp(min(loss, PPL_CAP_NATS))


@validation_metric("loss", higher_is_better=False, label="loss", default=True)
class Loss(LossMetric):
    """The mean NLL per target token."""

    digits = 3

    def from_loss(self, loss: float) -> float:
        return loss


@validation_metric("ppl", higher_is_better=False, label="ppl", default=True)
class Perplexity(LossMetric):
    """exp(mean NLL per target token)."""

    def from_loss(self, loss: float) -> float:
        return perplexity(loss)
