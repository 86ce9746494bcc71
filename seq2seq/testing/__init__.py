"""The contract suite: the checks every component must pass, built-in or a user's plugin.

scikit-learn's `check_estimator` for this project: the checks a new score, region,
attention class, encoder or decoder owes are one public function, the user runs it on
their own component, and the project's tests run it on every built-in (parametrized over
the registry, so there is no list of components to keep).

    from seq2seq.testing import check_component
    results = check_component("score", "my_score", config_dir="lab/configs")
    # or:  seq2seq-check score my_score --plugins lab/scores.py --config-dir lab/configs

The checks (one module each; each says exactly what it verifies):

* `shapes`       outputs have the shapes of the interfaces (`seq2seq.testing.shapes`);
* `masking`      padded keys get exactly zero weight and change nothing (`.masking`);
* `incremental`  one position at a time equals all at once, in the component and in a
                 tiny model's step-by-step decoding (`.incremental`; not for encoders);
* `gradients`    a training step reaches every parameter (`.gradients`);
* `flops`        its FLOP formula equals torch's `FlopCounterMode` count (`.flops`);
* `config`       its YAML presets compose, its class defaults are its schema's, and a
                 preset differs from the schema only where it says so (`.config_rules`);
* `learning`     a tiny model with it learns the copy task and attends on the diagonal, a
                 few seconds (`.learning`; left out by `quick`).

Each check runs the component alone, on small odd-sized tensors, and in a tiny model whose
other parts are fixed partners (`seq2seq.testing.subject`). A failed check is a
`CheckResult` with `passed=False` and what went wrong; `assert_component`, the pytest
plugin (`-p seq2seq.testing.pytest_plugin`) and `Runner.require` raise `ContractFailure`,
which names the check and the component. Schedules have no contract here.
"""

import seq2seq.built_ins  # noqa: F401  (the built-ins the checks look up and run with)
from seq2seq.testing.results import CheckResult, ContractFailure
from seq2seq.testing.suite import (
    CHECKS,
    ContractCase,
    Runner,
    assert_component,
    check_component,
    checks_of,
    contract_cases,
)

__all__ = [
    "CHECKS",
    "CheckResult",
    "ContractCase",
    "ContractFailure",
    "Runner",
    "assert_component",
    "check_component",
    "checks_of",
    "contract_cases",
]
