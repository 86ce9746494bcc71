"""Every experiment of the lab: the `EXPERIMENT` of each module of `seq2seq.lab`, with its
Chinese page (`Experiment.zh`) from the module of the same name in `seq2seq.lab.chinese`,
which may read the experiment's module (its constants), never the other way round."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import pkgutil

import seq2seq.lab as lab_package
import seq2seq.lab.chinese as chinese_package
from seq2seq.lab.experiment import Experiment


def experiments() -> dict[str, Experiment]:
    """The experiments by name, in their order (each module's `EXPERIMENT`)."""
    found = []
    for module_info in pkgutil.iter_modules(lab_package.__path__):
        if module_info.name.startswith("_"):  # __main__ runs the command line
            continue
        module = importlib.import_module(f"{lab_package.__name__}.{module_info.name}")
        experiment = getattr(module, "EXPERIMENT", None)
        if isinstance(experiment, Experiment):
            found.append(with_chinese(experiment))
    return {experiment.name: experiment for experiment in sorted(found, key=lambda e: e.order)}


def with_chinese(experiment: Experiment) -> Experiment:
    """`experiment` with the `CHINESE` of `seq2seq.lab.chinese.<name>` as its `zh`, when that
    module exists and the experiment has none of its own."""
    if experiment.zh is not None:
        return experiment
    name = f"{chinese_package.__name__}.{experiment.name}"
    if importlib.util.find_spec(name) is None:
        return experiment
    return dataclasses.replace(experiment, zh=importlib.import_module(name).CHINESE)


def experiment(name: str) -> Experiment:
    """The experiment `name`; a KeyError listing the names otherwise."""
    known = experiments()
    if name not in known:
        raise KeyError(f"no lab experiment {name!r}; the experiments: {', '.join(known)}")
    return known[name]
