"""Source `<unk>` dropout: training batches whose source pieces are now and then unreadable.

A character never seen in training reaches the model as `<unk>`, a piece it has hardly ever
read, and the rest of the sentence can derail around it. Replacing each real source piece
(EOS kept) by `<unk>` with probability p while training, the word dropout of Gal and
Ghahramani (2016) and Sennrich et al. (2016) aimed at the unknown piece, teaches the model to
translate around a piece it cannot read:

    x̃_i = <unk>  with probability p,   x_i  otherwise       (i < |x|, EOS kept)

The draw of a batch comes from a generator seeded by (`trainer.seed`, rank, epoch, position
of the batch), a stream of its own beside subword sampling's, so a run is the same every
time and a resumed run reads what the uninterrupted run read. Positions are unchanged, so
guided alignment's links still hold. Validation, the test and translation read the source
as it is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import torch

from seq2seq.data.batching import Batch
from seq2seq.special_tokens import EOS_ID, UNK_ID

STREAM = 1  # the last word of the generator's seed: apart from subword sampling's draws


def with_unknown_source_pieces(batch: Batch, rate: float, seed: int, key: Sequence[int]) -> Batch:
    """`batch` with each real source piece but EOS replaced by `<unk>` with probability
    `rate` (module docstring); `key` (rank, epoch, position) names the batch."""
    rng = np.random.default_rng([seed, *key, STREAM])
    drawn = torch.from_numpy(rng.random(tuple(batch.src.shape)) < rate)  # (batch, src_len)
    dropped = drawn.to(batch.src.device) & batch.src_mask & (batch.src != EOS_ID)
    return replace(batch, src=batch.src.masked_fill(dropped, UNK_ID))
