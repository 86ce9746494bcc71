"""The Python API for notebooks and scripts: load a checkpoint, translate, look, train, score.

    import seq2seq

    model = seq2seq.load("outputs/default_cpu/<date_time>/checkpoints/best.pt")
    result = model.translate("我爱中国。")        # a Result; a list of texts gives a list
    result.text, result.attention, result.links  # the output, its weights, its word links
    result                                       # in Jupyter: the attention viewer, inline
    run = seq2seq.train(["data=toy_reverse", "trainer.max_steps=200"])
    scores = seq2seq.evaluate(model, "test.zh", "test.en")

Each function is a thin user of what the commands use, so that the API and the commands
cannot drift apart: `load` goes through `Translator.load` with the plugins imported first
(`seq2seq-translate --plugins`) and the device and thread checks of the command lines;
`Model.translate` builds its `SearchSettings` with the commands' `settings_from` and reads
the links as `seq2seq-translate --alignments` does (`all_links`: the checkpoint's guided or
chosen head, else the last layer's head mean); `train` composes the config as
`seq2seq-train` does (`compose_train`, old data keys renamed, Hydra's errors as one line),
imports the config's plugins, checks the config at the door and runs `train_and_test` in a
run folder named as Hydra names it; `evaluate` scores through seq2seq-evaluate's
`scored_translations`. Errors are the commands' one-line messages, raised: a CheckpointError
(a RuntimeError), ConfigError, PluginError, SearchSettingsError or InputError (ValueErrors).

Its modules: `models` (`load`, `Model`, `evaluate`), `results` (`Result`, `compare`),
`training` (`train`).

The pictures (`Result._repr_html_`, `_repr_png_`, `plot`, `to_bertviz`, `compare`) come
from `seq2seq.visualise.notebook`, imported when first drawn. `import seq2seq` imports this
module only when one of its names is first used (`seq2seq.__getattr__`).
"""

from __future__ import annotations

import seq2seq.built_ins  # noqa: F401  (registers the built-in components, as every entry point)
from seq2seq.api.models import Model, evaluate, load
from seq2seq.api.results import Comparison, Result, compare
from seq2seq.api.training import TrainResult, train

__all__ = ["Comparison", "Model", "Result", "TrainResult", "compare", "evaluate", "load", "train"]
