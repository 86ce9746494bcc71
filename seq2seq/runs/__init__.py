"""Runs: assembling one training run, and reading finished runs back.

* `folder`: the run folder (its lock, stale temporaries, which checkpoint a resume uses);
* `assemble`: data, model, trainer, resume, training, test and averaging, for the train
  CLI, the benchmark and the tests alike;
* `reading`: run discovery, `results.json`, TensorBoard scalars, naming runs by what differs.
"""
