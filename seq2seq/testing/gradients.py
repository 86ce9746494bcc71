"""Check `gradients`: a training step's gradient reaches every parameter of the component.

The tiny model (`Subject.model`) takes one teacher-forced cross-entropy loss in training
mode; every parameter of every module of the component's class in it must then have a
finite gradient that is not all zero (a parameter the forward pass never uses, or one
behind a `detach`, fails), and so must every parameter of the encoder, which a score,
region, attention or decoder reaches only through the source it attends to.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from seq2seq.testing.inputs import BATCH, SRC_LEN, TGT_LEN, VOCAB, after_bos, source_mask, tokens
from seq2seq.testing.results import expect
from seq2seq.testing.subject import Subject


def reached(parameter: torch.nn.Parameter) -> bool:
    grad = parameter.grad
    return grad is not None and bool(torch.isfinite(grad).all()) and bool(grad.abs().sum() > 0)


def check(subject: Subject) -> str:
    torch.manual_seed(0)
    model = subject.model(VOCAB).train()
    src, mask = tokens(VOCAB, BATCH, SRC_LEN, seed=1), source_mask()
    tgt = tokens(VOCAB, BATCH, TGT_LEN, seed=2)
    tgt_in = after_bos(tgt[:, :-1])
    logits, _ = model(src, mask, tgt_in)  # (batch, tgt_len, vocab)
    F.cross_entropy(logits.reshape(-1, VOCAB), tgt.reshape(-1)).backward()
    modules = subject.modules(model)
    builder = subject.component.builder.__name__
    expect(bool(modules), f"the tiny model built from its config holds no {builder} module")
    own = {id(p) for module in modules for p in module.parameters() if p.requires_grad}
    named = dict(model.named_parameters())
    missed = [name for name, p in named.items() if id(p) in own and not reached(p)]
    expect(not missed, f"no gradient reaches {', '.join(missed)}")
    encoder = [f"encoder.{name}" for name, p in model.encoder.named_parameters() if not reached(p)]
    expect(not encoder, f"no gradient reaches the encoder through it: {', '.join(encoder)}")
    return f"{len(own)} parameter tensor(s) of {len(modules)} {builder} module(s) and the encoder's"
