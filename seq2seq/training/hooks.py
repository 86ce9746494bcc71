"""What the trainer hands to the hooks it runs after each validation.

A hook is any callable `hook(context)`; it gets the model, where it runs, where to log and
the step, and nothing else of the trainer. What a hook needs beyond that (tokenisers,
sentences, a title) it is given when it is made (see `seq2seq.visualise.hooks`).

A hook may return entries for the checkpoints (a dict whose keys are among
`seq2seq.checkpoint.HOOK_KEYS`, values plain data), or None. The trainer runs the hooks
before it saves, so `best.pt` holds what the hooks returned at the validation that made it
and `last.pt` the latest; a resume keeps them until a hook returns new ones.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

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


# hook(context) -> checkpoint entries (e.g. {"alignment_choice": {...}}) or None
ValidationHook = Callable[[ValidationContext], Mapping[str, Any] | None]
