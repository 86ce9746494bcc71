"""What the trainer hands to the hooks it runs after each validation.

A hook is any callable `hook(context)`; it gets the model, where it runs, where to log and
the step, and nothing else of the trainer. What a hook needs beyond that (tokenisers,
sentences, a title) it is given when it is made (see `seq2seq.visualise.hooks`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from seq2seq.models.model import Seq2Seq
from seq2seq.training.logger import RunLogger


@dataclass(frozen=True)
class ValidationContext:
    """The state a validation hook may read, at one validation."""

    model: Seq2Seq  # in eval mode is the hook's business: it is called after validation
    device: torch.device
    logger: RunLogger
    step: int


ValidationHook = Callable[[ValidationContext], None]
