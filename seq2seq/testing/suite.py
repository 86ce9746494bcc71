"""The contract suite: which checks each group owes, and running them on a component.

    results = check_component("score", "my_score", config_dir="lab/configs")
    failed = [result for result in results if not result.passed]

    for case in contract_cases():          # every registered component x its checks
        run_case(case)                     # raises ContractFailure naming both

A `Runner` keeps the composed presets (`Catalog`) and the subjects between checks, so a
test session that runs every case composes each preset once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from seq2seq import registry
from seq2seq.testing import config_rules, flops, gradients, incremental, learning, masking, shapes
from seq2seq.testing.component_presets import Catalog
from seq2seq.testing.results import CheckResult, ContractFailure, Violation
from seq2seq.testing.subject import Subject

# Each check: Subject -> a line on what it verified; raises Violation (or any error) if not.
CHECK_FUNCTIONS: dict[str, Callable[[Subject], str]] = {
    "shapes": shapes.check,
    "masking": masking.check,
    "incremental": incremental.check,
    "gradients": gradients.check,
    "flops": flops.check,
    "config": config_rules.check,
    "learning": learning.check,
}
ATTENDING = ("shapes", "masking", "incremental", "gradients", "flops", "config", "learning")
CHECKS: dict[str, tuple[str, ...]] = {
    "score": ATTENDING,
    "region": ATTENDING,
    "attention": ATTENDING,
    "encoder": ("shapes", "masking", "gradients", "flops", "config", "learning"),  # runs once
    "decoder": ATTENDING,
}
SLOW = ("learning",)  # left out by `quick`


@dataclass(frozen=True)
class ContractCase:
    """One check of one registered component."""

    group: str
    name: str
    check: str

    def __str__(self) -> str:
        return f"{self.group}-{self.name}-{self.check}"


def contract_cases(group: str | None = None, *, quick: bool = False) -> list[ContractCase]:
    """Every (group, name, check) of the registered components of `group` (or of every
    checked group), in registration order: what a test suite parametrizes over."""
    groups = CHECKS if group is None else (group,)
    return [
        ContractCase(component.group, component.name, check)
        for name in groups
        for component in _components(name)
        for check in checks_of(name, quick=quick)
    ]


def checks_of(group: str, *, quick: bool = False) -> tuple[str, ...]:
    """The checks a component of `group` owes (without the slow ones when `quick`)."""
    if group not in CHECKS:
        raise ValueError(f"the contract suite checks {', '.join(CHECKS)}; got group {group!r}")
    return tuple(check for check in CHECKS[group] if not (quick and check in SLOW))


def _components(group: str) -> tuple[registry.Component, ...]:
    checks_of(group)
    return registry.components(group)


class Runner:
    """Runs checks, keeping the presets composed and the subjects prepared."""

    def __init__(self, config_dir: str | Path | None = None):
        self.catalog = Catalog(config_dir)
        self._subjects: dict[tuple[str, str, str], Subject] = {}
        self._memo: dict[str, Any] = {}  # shared by the subjects (`Subject.memo`)

    def subject(self, group: str, name: str, options: dict[str, Any] | None = None) -> Subject:
        key = (group, name, repr(sorted((options or {}).items())))
        if key not in self._subjects:
            component = registry.get(group, name)
            self._subjects[key] = Subject(component, self.catalog, dict(options or {}), self._memo)
        return self._subjects[key]

    def run(
        self, group: str, name: str, check: str, options: dict[str, Any] | None = None
    ) -> CheckResult:
        """One check as a `CheckResult`; whatever the check raises is its failure."""
        if check not in checks_of(group):
            raise ValueError(
                f"a {group} owes the checks {', '.join(checks_of(group))}; got {check!r}"
            )
        started = time.perf_counter()
        try:
            with one_thread():
                detail, passed = CHECK_FUNCTIONS[check](self.subject(group, name, options)), True
        except Exception as error:  # noqa: BLE001 - a check's error is its verdict
            detail, passed = describe(error), False
        return CheckResult(group, name, check, passed, detail, time.perf_counter() - started)

    def require(self, case: ContractCase, options: dict[str, Any] | None = None) -> CheckResult:
        """Run one case; ContractFailure (an AssertionError) when it fails."""
        result = self.run(case.group, case.name, case.check, options)
        if not result.passed:
            raise ContractFailure(result)
        return result


@contextmanager
def one_thread() -> Iterator[None]:
    """Torch on one thread inside: the checks' tensors are tiny, so more threads gain nothing,
    and on a busy machine their synchronisation costs many times the work."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def describe(error: Exception) -> str:
    """A check's failure in one line: a Violation's message, or the error's type and text."""
    if isinstance(error, Violation):
        return str(error)
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def check_component(
    group: str,
    name: str,
    *,
    options: dict[str, Any] | None = None,
    config_dir: str | Path | None = None,
    checks: Iterable[str] | None = None,
    quick: bool = False,
) -> list[CheckResult]:
    """Every check `group` owes (or those named in `checks`) on the registered component
    `name`, with its `options` (a score's or region's options; for a part, keys laid over
    its nodes) and the user's presets in `config_dir`. Never raises for a failed check:
    see `CheckResult.passed`, or `assert_component`."""
    runner = Runner(config_dir)
    chosen = checks_of(group, quick=quick) if checks is None else tuple(checks)
    return [runner.run(group, name, check, options) for check in chosen]


def assert_component(group: str, name: str, **settings: Any) -> list[CheckResult]:
    """`check_component`, raising ContractFailure for the first check that failed."""
    results = check_component(group, name, **settings)
    for result in results:
        if not result.passed:
            raise ContractFailure(result)
    return results
