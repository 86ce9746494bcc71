"""A check module's `check`, put together: the component alone, then the tiny model with it.

`shapes`, `masking`, `incremental` and `flops` each have one function per group that runs
the component alone, named `<group>_<check>` (`score_shapes`, `decoder_masking`), and one
that runs the tiny model. `by_group` makes the module's `check` of them, taking each
function's group from its name, so that no module spells out the same table again.
"""

from __future__ import annotations

from collections.abc import Callable

from seq2seq import registry
from seq2seq.testing.subject import Subject

Check = Callable[[Subject], str]  # a subject -> a line on what was verified


def by_group(model_check: Check, *alone: Check, label: str = "") -> Check:
    """The check that runs the one of `alone` for the subject's group, then `model_check`,
    and reports both lines: `{label}{alone}; {model}`."""
    table = {group_of(function): function for function in alone}

    def check(subject: Subject) -> str:
        return f"{label}{table[subject.group](subject)}; {model_check(subject)}"

    return check


def group_of(function: Check) -> str:
    """The group a `<group>_<check>` function checks; a ValueError, at import, for a
    function named otherwise (it would never be run)."""
    group = function.__name__.split("_")[0]
    if group not in registry.GROUPS:
        raise ValueError(f"{function.__name__} is not named <group>_<check>")
    return group
