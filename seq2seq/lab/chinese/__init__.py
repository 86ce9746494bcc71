"""The lab's pages in Chinese: one module per experiment, named as its experiment, each
with its `CHINESE` text (`seq2seq.lab.experiment.ChineseText`), which the catalogue attaches
to the experiment (`Experiment.zh`).

A module here writes the summary from what the experiment's finding recorded (its `values`
and `table`, those of `docs/lab/NAME/finding.json`), so the page is written from the same
record as the English one; it may import its experiment's constants and helpers (the
experiment module never imports it). The helpers below format what every summary quotes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def p_value(p: float) -> str:
    """A bootstrap p-value as the English pages print it (`p = 0.042`, `p < 0.001`)."""
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def outcome(agrees: bool | None, yes: str, no: str, undecided: str = "尚无定论") -> str:
    """The clause that says how the measurement stands to the claim."""
    return {True: yes, False: no, None: undecided}[agrees]


def nested(values: Mapping[str, Any], *keys: str) -> Any:
    """`values[k1][k2]...`, with a KeyError naming the whole path when one is missing."""
    found: Any = values
    for depth, key in enumerate(keys):
        if not isinstance(found, Mapping) or key not in found:
            raise KeyError(f"the finding's values have no {'.'.join(keys[: depth + 1])}")
        found = found[key]
    return found
