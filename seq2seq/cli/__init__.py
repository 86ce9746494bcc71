"""The command-line programs, thin shells over the library.

* `seq2seq-train` (`train`): Hydra app over `seq2seq.runs.assemble.train_and_test`;
* `seq2seq-data` (`data`): Hydra app over `seq2seq.data.prepare.prepare`;
* `seq2seq-translate` (`translate`) and `seq2seq-evaluate` (`evaluate`): a checkpoint
  through `seq2seq.search.translator.Translator`.
"""

# Every command looks components up (a model, a data source, a metric): the built-ins are
# registered before any of its modules runs.
import seq2seq.built_ins  # noqa: F401  (registers the built-in components)
