"""What a contract check reports: one `CheckResult`, and the `ContractFailure` it raises.

A check function (`seq2seq.testing.shapes`, `.masking`, ...) returns a short line on what
it verified, or raises `Violation` with what it found instead; `seq2seq.testing.suite` turns
either into a `CheckResult`, so that one broken check never stops the others.
"""

from __future__ import annotations

from dataclasses import dataclass


class Violation(AssertionError):
    """Raised inside a check: the component does not keep the contract (the message says how)."""


@dataclass(frozen=True)
class CheckResult:
    """The outcome of one check of one component."""

    group: str  # "score", "region", "attention", "encoder", "decoder"
    name: str  # the registered name
    check: str  # "shapes", "masking", ...
    passed: bool
    detail: str  # what was verified, or what went wrong
    seconds: float

    @property
    def subject(self) -> str:
        """`score 'dot'`."""
        return f"{self.group} {self.name!r}"


class ContractFailure(AssertionError):
    """A component failed a check; the message names the check and the component."""

    def __init__(self, result: CheckResult):
        super().__init__(f"{result.subject} fails the {result.check!r} check: {result.detail}")
        self.result = result


def expect(condition: bool, message: str) -> None:
    """Raise `Violation(message)` unless `condition` holds."""
    if not condition:
        raise Violation(message)
