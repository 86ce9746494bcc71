"""The built-in components, declared: importing this module registers every one of them.

`seq2seq.registry` is a plain table at the bottom of the package; it imports nothing and
looks for nothing. The modules whose classes register a built-in component (the scores,
regions and attention classes, the encoders and decoders, the schedules, the data sources,
the validation metrics and hooks) are imported here, in one place near the top, which then
opens the table for lookups (`registry.built_ins_loaded`). The entry points import this
module before any lookup: the command lines (`seq2seq.cli`, and so `python -m seq2seq.lab`),
the contract suite and its pytest plugin (`seq2seq.testing`) and the workshop (`tools`). A
library user who builds a model, prepares data or loads a checkpoint imports it first:

    import seq2seq.built_ins  # noqa: F401  (registers the built-in components)

A new class in a module listed here joins with no edit; a new module that registers one is
a line below (tests/test_built_ins.py checks the list against a scan of the package's
decorators). Within a group the registry lists components in the order their modules are
imported, the order below, each module's in the order of its source.
"""

from __future__ import annotations

import sys
from types import ModuleType

from seq2seq import registry
from seq2seq.align import aer_hook
from seq2seq.data.sources import huggingface, tabular, text_pair, toy
from seq2seq.metrics import aer
from seq2seq.metrics import sacrebleu_scores as text
from seq2seq.metrics import valid_loss as loss
from seq2seq.metrics.alignment_accuracy import AlignmentAccuracy
from seq2seq.models.attention import attention, hierarchical, none, regions, scores
from seq2seq.models.decoders import cnn as cnn_decoder
from seq2seq.models.decoders import rnn as rnn_decoder
from seq2seq.models.decoders import transformer as transformer_decoder
from seq2seq.models.encoders import cnn as cnn_encoder
from seq2seq.models.encoders import rnn as rnn_encoder
from seq2seq.models.encoders import transformer as transformer_encoder
from seq2seq.training import schedules
from seq2seq.visualise import alignment_images as image_hooks
from seq2seq.visualise import pooling_images as pooling_hooks

# `seq2seq.metrics.alignment_accuracy` is also the function the package exports by that name.
alignment_accuracy = sys.modules[AlignmentAccuracy.__module__]

# Every module that registers a built-in component, by group (`registry.GROUPS`).
BUILT_IN_MODULES: dict[str, tuple[ModuleType, ...]] = {
    "score": (scores,),
    "region": (regions,),
    "attention": (attention, none, hierarchical),
    "encoder": (cnn_encoder, rnn_encoder, transformer_encoder),
    "decoder": (cnn_decoder, rnn_decoder, transformer_decoder),
    "schedule": (schedules,),
    "source": (tabular, text_pair, toy, huggingface),
    "metric": (aer, alignment_accuracy, loss, text),
    # the AER hook before the alignment images, which mark the head it chooses
    "hook": (aer_hook, image_hooks, pooling_hooks),
}

registry.built_ins_loaded(
    {group: [module.__name__ for module in modules] for group, modules in BUILT_IN_MODULES.items()}
)
