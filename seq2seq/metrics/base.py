"""A validation metric: its name, its direction, and where its value comes from.

Every metric that `trainer.select_metric` may name is registered in the registry's
"metric" group with `validation_metric`, which also states its direction:

    @validation_metric("bleu", higher_is_better=True, label="BLEU", default=True)
    class Bleu(TranslationMetric):
        def scorer(self, tgt_lang): return BLEU(tokenize=bleu_tokenizer(tgt_lang))

The value of a metric comes from one of three places (its base class says which):

* `TranslationMetric`: a corpus score of the valid split's greedy translations against
  their references, `score(hypotheses, references, tgt_lang)` (BLEU, chrF, TER).
* `LossMetric`: a function of the teacher-forced valid loss, the mean negative
  log-likelihood per target token, `from_loss(loss)` (the loss itself, perplexity).
* `HookMetric`: reported by a validation hook through `ValidationContext.report`
  (`seq2seq.training.hooks`), e.g. AER on a hand-aligned gold set.

Selection compares values in the metric's direction (`improves`): a run selecting a
lower-is-better metric keeps the checkpoint with the lowest value. `default` metrics are
computed at every validation; another translation metric only when it is selected.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from seq2seq import registry
from seq2seq.special_tokens import SEP_PIECE

SELECT_KEY = "trainer.select_metric"
TRANSLATIONS, LOSS, HOOK = "translations", "loss", "hook"


class Metric:
    """Base class; `validation_metric` sets `name`, `label` and `higher_is_better`."""

    name: str = ""
    label: str = ""  # how logs and tables print it ("BLEU", "chrF2")
    higher_is_better: bool | None = None  # stated when registered
    source: str = ""  # TRANSLATIONS | LOSS | HOOK (the base classes below)
    default: bool = False  # computed at every validation, selected or not
    digits: int = 2  # decimals in the log lines

    def improves(self, value: float, best: float | None) -> bool:
        """Whether `value` beats `best` (None: nothing yet) in the metric's direction."""
        return improves(value, best, bool(self.higher_is_better))

    @property
    def direction(self) -> str:
        """Optuna's word for it: `maximize` or `minimize` (`hydra.sweeper.direction`)."""
        return "maximize" if self.higher_is_better else "minimize"


class TranslationMetric(Metric):
    """A corpus score of detokenised translations against one reference each."""

    source = TRANSLATIONS

    def scorer(self, tgt_lang: str) -> Any:
        """The sacrebleu metric object that scores a corpus in `tgt_lang`."""
        raise NotImplementedError

    def score(self, hypotheses: list[str], references: list[str], tgt_lang: str) -> float:
        hypotheses, references = without_separators(hypotheses), without_separators(references)
        return float(self.scorer(tgt_lang).corpus_score(hypotheses, [references]).score)


def without_separators(texts: list[str]) -> list[str]:
    """The texts with the separator of pseudo-documents (SEP_PIECE, `seq2seq.data.documents`)
    replaced by a space: a document is scored on its words. Left in, sacrebleu's tokeniser
    would count `< sep >` as three tokens that every output matches, and BLEU would rise
    with the number of sentences, not with the translation. Texts without it are returned
    as they are."""
    return [" ".join(text.replace(SEP_PIECE, " ").split()) if SEP_PIECE in text else text
            for text in texts]  # fmt: skip


class LossMetric(Metric):
    """A function of the teacher-forced valid loss (mean NLL per target token, nats)."""

    source = LOSS

    def from_loss(self, loss: float) -> float:
        raise NotImplementedError


class HookMetric(Metric):
    """Reported by a validation hook; the hook that produces it lists its name in its
    `produces` (`seq2seq.training.hooks`)."""

    source = HOOK


def improves(value: float, best: float | None, higher_is_better: bool) -> bool:
    """Whether `value` beats `best` (None: nothing yet): higher, or lower for a
    lower-is-better metric; a tie does not improve, and NaN never does."""
    if math.isnan(value):
        return False
    if best is None:
        return True
    return value > best if higher_is_better else value < best


def validation_metric(
    name: str, *, higher_is_better: bool, label: str | None = None, default: bool = False
) -> Callable[[type[Metric]], type[Metric]]:
    """Class decorator: register a Metric subclass as the metric `name`, with its direction."""
    if not isinstance(higher_is_better, bool):
        raise TypeError(f"metric {name!r}: higher_is_better must be True or False")

    def decorate(cls: type[Metric]) -> type[Metric]:
        if not (isinstance(cls, type) and issubclass(cls, Metric)) or not cls.source:
            raise TypeError(
                f"metric {name!r}: {cls!r} must subclass TranslationMetric, LossMetric or "
                "HookMetric (seq2seq.metrics.base)"
            )
        cls.name, cls.label, cls.higher_is_better = name, label or name, higher_is_better
        cls.default = default
        return registry.register("metric", name)(cls)

    return decorate


def metric(name: str, key: str = SELECT_KEY) -> Metric:
    """The registered metric `name`; a ValueError names `key` and the registered names."""
    try:
        return registry.get("metric", name).builder()
    except registry.UnknownComponent:
        known = ", ".join(registry.names("metric"))
        raise ValueError(f"{key} must be one of ({known}), got {name!r}") from None


def metrics_of(source: str) -> list[Metric]:
    """Every registered metric whose value comes from `source`, in registration order."""
    built = (component.builder() for component in registry.components("metric"))
    return [item for item in built if item.source == source]
