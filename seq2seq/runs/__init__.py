"""Runs: assembling one training run, and reading finished runs back.

* `folder`: the run folder (its lock, stale temporaries, which checkpoint a resume uses);
* `assemble`: data, model, trainer, resume, training, test and averaging, for the train
  CLI, the benchmark and the tests alike;
* `reading`: run discovery, `results.json`, TensorBoard scalars, naming runs by what differs;
* `metrics_log`: a run's `metrics.jsonl` read back; `loss_curves`: two runs' losses compared;
* the comparison (`seq2seq-compare`): `comparison` (its settings and stages), `launch`
  (training sweeps as `seq2seq-train -m`), `sweep` (configurations, seeds pooled,
  convergence), `significance` (paired bootstrap seed by seed), `aer_rows` (test AER and
  word aligners' rows), `alignments` (images), `report` (COMPARISON.md and comparison.csv).
"""
