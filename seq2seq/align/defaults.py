"""Which attention a checkpoint aligns with when the user names none, and why.

In this order:

0. layer: a model with a separate alignment layer (`alignment=layer`,
   `seq2seq.models.alignment_layer`) aligns with it, its heads' mean (`source=LAYER`);
1. guided: a model trained with guided alignment (config section `alignment`, with
   `guided: true`, its `layer` and `heads`; `seq2seq.training.guided_alignment`) aligns with the
   head it was taught to;
2. chosen: else the layer and head that training found to have the lowest AER on the
   valid gold pairs at the validation that wrote the checkpoint (`alignment_choice`, see
   `seq2seq.align.aer_hook.AerHook`);
3. else the last layer's head mean (`AlignSettings()`).

Layers and heads are counted from 0, as `seq2seq-align --layer L --head H` takes them.
`head_marks` names the guided and the chosen head, for drawings that mark them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from seq2seq.align.extract import LAYER, NO_ATTENTION, AlignmentError, AlignSettings
from seq2seq.align.teacher_forced import has_alignment_layer
from seq2seq.checkpoint import AlignmentChoice
from seq2seq.search.translator import Translator
from seq2seq.training.guided_alignment import Guidance, resolve_layer

GUIDED, CHOSEN, DEFAULT = "guided", "chosen", "default"  # and LAYER: the alignment layer


@dataclass(frozen=True)
class HeadMark:
    """A head a drawing marks: `layer` from 0 (never negative), `head` from 0 or None for
    the layer's head mean, `label` GUIDED or CHOSEN, and `reason` in words."""

    layer: int
    head: int | None
    label: str
    reason: str


class DefaultSettings(NamedTuple):
    """The settings to align with, where they come from (GUIDED, CHOSEN or DEFAULT) and
    why, in words."""

    settings: AlignSettings
    source: str
    reason: str

    @property
    def description(self) -> str:
        """One line: `layer 1, head 3 (chosen on the valid gold: AER 0.4100 at step 1900)`,
        or `the alignment layer (trained ...)`."""
        if self.settings.source == LAYER:
            return f"the alignment layer, head mean ({self.reason})"
        return f"{head_name(self.settings.layer, self.settings.head)} ({self.reason})"


def head_name(layer: int, head: int | None) -> str:
    """`layer 1, head 3`, or `layer -1, head mean`."""
    return f"layer {layer}, head {'mean' if head is None else head}"


def _section(config: Any, name: str) -> Any:
    """config[name] of a mapping (the run's config as plain data) or an object with
    attributes; None if absent."""
    if isinstance(config, Mapping) or hasattr(config, "get"):
        return config.get(name)
    return getattr(config, name, None)


def guided_mark(config: Any, layers: int, heads: int) -> HeadMark | None:
    """The guided head of a model whose attention has `layers` × `heads`; None when the
    config does not guide (no `alignment` section in an older config, or guided false).

    The layer is read as training reads it (`resolve_layer`: negative from the end,
    clamped). One guided head is read alone; every head (`heads: null`) as the head mean,
    and so are several of them, which training averages but `AlignSettings` cannot
    select. AlignmentError for a guided head the model lacks."""
    section = _section(config, "alignment")
    if section is None or not _section(section, "guided"):
        return None
    guidance = Guidance.from_config(section)
    listed = sorted(set(guidance.heads)) if guidance.heads is not None else None
    for head in listed or []:
        if not 0 <= head < heads:
            raise AlignmentError(f"alignment.heads: head {head}: the model has {heads} head(s)")
    layer = resolve_layer(guidance.layer, layers)
    if listed is None or listed == list(range(heads)) or heads == 1:
        return HeadMark(layer, None, GUIDED, "the guided heads: every head, trained on alignments")
    if len(listed) == 1:
        return HeadMark(layer, listed[0], GUIDED, "the guided head, trained on alignments")
    names = ", ".join(map(str, listed))
    reason = f"the guided layer; its heads {names} are trained together, read as the head mean"
    return HeadMark(layer, None, GUIDED, reason)


def chosen_mark(choice: AlignmentChoice | None, heads: int) -> HeadMark | None:
    """The stored valid-gold choice as a mark (already checked to fit the model)."""
    if choice is None:
        return None
    reason = f"chosen on the valid gold: AER {choice.aer:.4f} at step {choice.step}"
    return HeadMark(choice.layer, None if heads == 1 else choice.head, CHOSEN, reason)


def head_marks(translator: Translator) -> list[HeadMark]:
    """The guided head, then the chosen head, of the translator's model (those it has)."""
    shape = translator.attention_shape()
    return [] if shape is None else model_marks(translator, *shape)


def model_marks(translator: Translator, layers: int, heads: int) -> list[HeadMark]:
    """`head_marks` of a model whose attention has `layers` × `heads`."""
    marks = [
        guided_mark(translator.run_config, layers, heads),
        chosen_mark(translator.alignment_choice, heads),
    ]
    return [mark for mark in marks if mark is not None]


def layer_settings(translator: Translator) -> DefaultSettings:
    """The alignment layer's settings (its heads' mean, argmax), and how it learned."""
    section = _section(translator.run_config, "alignment") or {}
    training = _section(section, "training") or "guided"
    how = ("guided by the links of the training pairs" if training == "guided"
           else "unsupervised, from the model's own attention")  # fmt: skip
    settings = replace(AlignSettings(), layer=0, head=None, source=LAYER)
    return DefaultSettings(settings, LAYER, f"trained {how}")


def default_settings(translator: Translator, use_layer: bool = True) -> DefaultSettings:
    """The settings (argmax extraction) a tool aligns with when the user names no layer or
    head (module docstring); AlignmentError for a model without attention weights, or a
    guided head it lacks. `use_layer=False` passes over an alignment layer (a reader of
    the translation attention alone: the export, `seq2seq-align --attention`). A tool with
    its own extraction options applies them with
    `dataclasses.replace(found.settings, extract=..., threshold=...)`."""
    if use_layer and has_alignment_layer(translator.model):
        return layer_settings(translator)
    shape = translator.attention_shape()
    if shape is None:
        raise AlignmentError(NO_ATTENTION)
    marks = model_marks(translator, *shape)
    if not marks:
        return DefaultSettings(
            AlignSettings(), DEFAULT, "the default: the checkpoint stores no choice"
        )
    first = marks[0]  # the guided head before the chosen one
    settings = replace(AlignSettings(), layer=first.layer, head=first.head)
    return DefaultSettings(settings, first.label, first.reason)
