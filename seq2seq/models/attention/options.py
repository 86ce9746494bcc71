"""The score and the region of an attention node: a registered name and that component's options.

`attention.score` and `attention.region` each hold a node, the component's name and its
options (those of the dataclass it was registered with, `seq2seq.registry`):

    score:  {name: additive, hidden_dim: null}
    region: {name: local, window: 5, mode: predictive}

A bare name (`attention.score=dot`, `score: cosine` in a YAML) means that component with its
default options, and a node may leave options out. `component_node` is the one place that
turns either into the full node, checking it on the way (`seq2seq.option_rules.
checked_node`, which checks a data source's node `data.source` the same way): an
unknown name lists the registered ones, a key the chosen component does not read (the
`window` left behind by `attention.region.name=soft`) is an error, never ignored. It runs
at start-up (so the run's checkpoints store full nodes), on a checkpoint's config, and
wherever a node is read (the builders below, the FLOP formulas).

`component_name` and `attention_choice` give the chosen names without the registry, for
titles and tables of runs whose components may not be importable here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from seq2seq import registry
from seq2seq.option_rules import checked_node

OPTION_GROUPS = ("score", "region")  # the attention keys that hold a component node


def component_node(group: str, value: Any, path: str | None = None) -> dict[str, Any]:
    """`{name, **options}` of the score or region `value` (a name or a node), every option
    present and checked; OptionError naming `path` (default: the group) otherwise."""
    choices = {component.name: component.options for component in registry.components(group)}
    return checked_node(value, group if path is None else path, group, choices)


def component_name(value: Any) -> str:
    """The registered name a score or region entry chooses: the string, or its node's `name`."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("name"), str):
        return value["name"]
    raise ValueError(f"a score or region is a name or a node with a `name`, got {value!r}")


def attention_choice(node: Mapping[str, Any]) -> tuple[str, str] | None:
    """(score name, region name) of an attention node (`cfg.attention`); None for an
    attention without them (`attention=none`)."""
    if "score" not in node or "region" not in node:
        return None
    return component_name(node["score"]), component_name(node["region"])
