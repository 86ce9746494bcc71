"""Every metric in one place: one module per metric family, each registered with its direction.

* `seq2seq.metrics.sacrebleu_scores`: corpus BLEU, chrF and TER (sacrebleu), the one scoring path for
  validation, test and the command lines (`corpus_scores`).
* `seq2seq.metrics.valid_loss`: the teacher-forced valid loss and perplexity.
* `seq2seq.metrics.aer`: precision, recall and AER of word links (Och & Ney 2003).
* `seq2seq.metrics.alignment_accuracy`: the share of target tokens whose attention argmax
  falls on their gold source positions.
* `seq2seq.metrics.significance`: bootstrap resampling of BLEU (Koehn 2004): paired, of
  systems on the same sentences, and unpaired, of one model's valid/test gap.

The registered validation metrics (`seq2seq.metrics.base`; the registry's "metric" group,
`registry.names("metric")`) are what `trainer.select_metric` may name: it picks the best
checkpoint, drives the plateau schedule and early stopping (`trainer.patience`), each in
the metric's direction. A user's metric registers the same way from a plugin.
"""

from seq2seq.metrics.aer import AlignmentCounts, corpus_counts, pair_counts
from seq2seq.metrics.alignment_accuracy import Link, alignment_accuracy, toy_links
from seq2seq.metrics.base import (
    HookMetric,
    LossMetric,
    Metric,
    TranslationMetric,
    metric,
    metrics_of,
    validation_metric,
)
from seq2seq.metrics.sacrebleu_scores import (
    bleu_tokenizer,
    corpus_scores,
    format_score,
    format_scores,
)
from seq2seq.metrics.significance import (
    BOOTSTRAP_RESAMPLES,
    SIGNIFICANCE_LEVEL,
    BootstrapResult,
    GapInterval,
    gap_interval,
    paired_bootstrap,
)
from seq2seq.metrics.valid_loss import perplexity

__all__ = [
    "BOOTSTRAP_RESAMPLES",
    "SIGNIFICANCE_LEVEL",
    "AlignmentCounts",
    "BootstrapResult",
    "GapInterval",
    "HookMetric",
    "Link",
    "LossMetric",
    "Metric",
    "TranslationMetric",
    "alignment_accuracy",
    "bleu_tokenizer",
    "corpus_counts",
    "corpus_scores",
    "format_score",
    "format_scores",
    "gap_interval",
    "metric",
    "metrics_of",
    "pair_counts",
    "paired_bootstrap",
    "perplexity",
    "toy_links",
    "validation_metric",
]
