"""The lab's pages in Chinese: one module per experiment, each with its `CHINESE` text
(`seq2seq.lab.experiment.ChineseText`), which the experiment's `EXPERIMENT` carries.

A module here reads only the numbers its experiment's finding recorded (`Finding.values`,
the `values` of `docs/lab/NAME/finding.json`), never the experiment's code, so the page is
written from the same record as the English one. The helpers below format what every
summary quotes.
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
