"""The models the lab trains, as config overrides shared by every experiment.

Experiments that train the same model pass the same overrides, so `seq2seq.lab.training`
trains it once and the others reuse it. Two sizes:

* default: Tatoeba zh→en with the comparison's GRU model (`+experiment=compare_gru`: bi-GRU
  encoder, GRU decoder, width 96, 0.84 M parameters) for `TATOEBA_STEPS` updates (about 6
  epochs; about 1.5 minutes of training on 2 cores), validated on 300 valid pairs, tested
  greedily on the 1,000 test pairs. At 400 updates the models scored 2–5 test BLEU and
  one seed of the additive model stopped improving after 200: too early to tell the
  mechanisms apart, so the budget is twice that;
* quick (`LabContext.quick`): the toy reverse task with a width-16/32 GRU model and
  `QUICK_STEPS` updates on one thread, so that a whole experiment runs in seconds.
"""

from __future__ import annotations

from seq2seq.lab.experiment import LabContext

TATOEBA_STEPS = 800
QUICK_STEPS = 30

TATOEBA_GRU = [
    "+experiment=compare_gru",
    f"trainer.max_steps={TATOEBA_STEPS}",
    "trainer.valid_every=400",
    "trainer.valid_max_sentences=300",
    "trainer.log_every=50",
    "trainer.test_search.beam_size=1",
    "schedule.warmup_steps=60",
]

# A GRU model small enough to train on a toy task in seconds on one core, and the toy
# reverse task with it (also the base of the tests' tiny runs, tests/helpers.py).
TINY_GRU_MODEL = [
    "encoder=gru",
    "decoder=gru",
    "attention=additive",
    "encoder.hidden_size=16",
    "decoder.hidden_size=32",
    "model.embed_dim=32",
]
TOY_GRU = [
    "data=toy_reverse",
    "data.source.train_size=512",
    "data.source.valid_size=32",
    "data.source.test_size=32",
    "data.max_tokens=512",
    *TINY_GRU_MODEL,
]

QUICK_GRU = [
    *TOY_GRU,
    f"trainer.max_steps={QUICK_STEPS}",
    "trainer.valid_every=15",
    "trainer.log_every=5",
    "trainer.test_search.beam_size=1",
    "schedule.warmup_steps=5",
]


def gru_model(context: LabContext, *overrides: str, seed: int | None = None) -> list[str]:
    """The lab's GRU model at the context's size, with `overrides` (e.g. `attention=dot`)
    and a training seed (default: the context's)."""
    base = QUICK_GRU if context.quick else TATOEBA_GRU
    return [*base, *overrides, f"trainer.seed={context.seed if seed is None else seed}"]
