"""One training run: composed, assembled, trained and tested, in a folder of its own.

* `compose`: a preset's training config, composed as `seq2seq-train +experiment=NAME` does;
* `folder`: the run folder (its lock, stale temporaries, which checkpoint a resume uses);
* `assemble`: data, model, trainer, resume, training, test and averaging, for the train
  CLI, the lab and the tests alike;
* `metrics_log`: a run's `metrics.jsonl` read back;
* `cluster`: running under a job launcher (submitit through Hydra).

Reading many finished runs back and comparing them is the study pipeline, `seq2seq.study`.
"""
