"""The score and the region of an attention node: a registered name and that component's options.

`attention.score` and `attention.region` each hold a node, the component's name and its
options (those of the dataclass it was registered with, `seq2seq.registry`):

    score:  {name: additive, hidden_dim: null}
    region: {name: local, window: 5, mode: predictive}

A bare name (`attention.score=dot`, `score: cosine` in a YAML) means that component with its
default options, and a node may leave options out. `component_node` is the one place that
turns either into the full node, checking it on the way (`seq2seq.option_rules`): an
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
from seq2seq.option_rules import OptionError, UnknownOption, checked_options

OPTION_GROUPS = ("score", "region")  # the attention keys that hold a component node


def component_node(group: str, value: Any, path: str | None = None) -> dict[str, Any]:
    """`{name, **options}` of the score or region `value` (a name or a node), every option
    present and checked; OptionError naming `path` (default: the group) otherwise."""
    path = group if path is None else path
    name, given = _name_and_options(group, value, path)
    try:
        component = registry.get(group, name)
    except registry.UnknownComponent:
        key = path if isinstance(value, str) else f"{path}.name"
        known = ", ".join(registry.names(group))
        raise OptionError(
            f"{key} must be one of the registered {group}s ({known}), got {name!r}"
        ) from None
    try:
        options = checked_options(component.options, given, path, f"{group} {name!r}")
    except UnknownOption as error:
        if error.near is not None:  # a misspelt option
            raise
        # An option of another component, as a switch of `name` alone leaves behind.
        hint = f"; `{path}={name}` chooses {group} {name!r} with its defaults alone"
        raise UnknownOption(f"{error}{hint}") from None
    return {"name": name, **options}


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


def _name_and_options(group: str, value: Any, path: str) -> tuple[str, dict[str, Any]]:
    if isinstance(value, str):
        return value, {}
    if not isinstance(value, Mapping):
        raise OptionError(
            f"{path} must be a registered {group}'s name or a node {{name: ..., <its "
            f"options>}}, got {value!r}"
        )
    options = {str(key): item for key, item in value.items() if key != "name"}
    name = value.get("name")
    if not isinstance(name, str):
        known = ", ".join(registry.names(group))
        raise OptionError(f"{path}.name must name a registered {group} ({known}), got {name!r}")
    return name, options
