"""Every experiment of the lab: the `EXPERIMENT` of each module of `seq2seq.lab`."""

from __future__ import annotations

import importlib
import pkgutil

import seq2seq.lab as lab_package
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
            found.append(experiment)
    return {experiment.name: experiment for experiment in sorted(found, key=lambda e: e.order)}


def experiment(name: str) -> Experiment:
    """The experiment `name`; a KeyError listing the names otherwise."""
    known = experiments()
    if name not in known:
        raise KeyError(f"no lab experiment {name!r}; the experiments: {', '.join(known)}")
    return known[name]
