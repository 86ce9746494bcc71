"""The options of a component, declared as a dataclass, and the one check of a node against it.

A score, a region or a data source declares its options in a small dataclass beside its
class. A field's
type says what kind of value it takes (an integer, a number, a choice of an `Enum`, each
optionally `| None`), and its metadata, written with the words below, the range:

    @dataclass
    class LocalOptions:
        window: int = field(default=5, metadata=at_least(1))   # half-width D
        mode: LocalMode = LocalMode.predictive

`checked_options(LocalOptions, {"window": 0}, "attention.region", "region 'local'")` raises
`OptionError("attention.region.window must be an integer of at least 1, got 0")`; given
`{"windw": 3}` it names the key and the closest option (`attention.region.windw: not an
option of region 'local' (did you mean window?); its options: window, mode`). A valid node
comes back complete: every option, the missing ones at their defaults, choices by name.

A component chosen in a config is a node, its name and its options (`attention.region:
{name: local, window: 5}`, `data.source: {name: toy, task: copy}`), or just its name:
`checked_node` completes and checks either against the options of the component it names.

The same check runs at start-up (`seq2seq.config.value_checks`), on every config read from a
checkpoint (`seq2seq.config.stored`) and when a component is built, so a value is
refused with the same words wherever it comes from. This module imports nothing of seq2seq:
it is the bottom layer, beside `seq2seq.registry`.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any

RANGE = "range"  # the metadata key of a field's `Range`


class OptionError(ValueError):
    """An option node that its component's dataclass does not accept; the message starts
    with the full key (`attention.region.window`)."""


class UnknownOption(OptionError):
    """A key that is not one of the component's options; `near` is the option it is
    closest to (a misspelling), or None (a key of another component, say)."""

    def __init__(self, message: str, near: str | None = None):
        super().__init__(message)
        self.near = near


@dataclasses.dataclass(frozen=True)
class Range:
    """What a value must also be, beyond its type: `text` completes "must be ..."."""

    text: str  # "of at least 1", "> 0"
    accepts: Callable[[Any], bool]


def at_least(minimum: int) -> dict[str, Range]:
    """Field metadata: a whole number >= minimum."""
    return {RANGE: Range(f"of at least {minimum}", lambda value: value >= minimum)}


def greater_than(bound: float) -> dict[str, Range]:
    """Field metadata: a number > bound."""
    return {RANGE: Range(f"> {bound:g}", lambda value: value > bound)}


# ---------------------------------------------------------------- the check


def checked_options(
    schema: type | None, values: Mapping[str, Any], path: str, owner: str
) -> dict[str, Any]:
    """`values` checked against the dataclass `schema` (None: a component without
    options) and completed with its defaults, enums as their names. OptionError names
    the first bad key as `<path>.<key>`; `owner` ("region 'local'") says whose options."""
    option_fields = dataclasses.fields(schema) if schema is not None else ()
    known = [item.name for item in option_fields]
    for key in values:
        if key not in known:
            near = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
            message = f"{path}.{key}: {unknown_option(near[0] if near else None, known, owner)}"
            raise UnknownOption(message, near[0] if near else None)
    hints = typing.get_type_hints(schema) if schema is not None else {}
    complete = {}
    for item in option_fields:
        key = f"{path}.{item.name}"
        if item.name in values:
            complete[item.name] = checked_value(values[item.name], hints[item.name], item, key)
        else:
            complete[item.name] = plain_value(default_of(item, key))
    return complete


def checked_node(
    value: Any, path: str, group: str, choices: Mapping[str, type | None]
) -> dict[str, Any]:
    """`{name, **options}` of a component node: `value` is a name or a mapping with a
    `name` among `choices` (component name -> its options dataclass, or None) and that
    component's options, here completed and checked (`checked_options`). OptionError
    names `path` (`attention.region`, `data.source`) and lists the choices otherwise; an
    option of another component (what a switch of `<path>.name` alone leaves behind) says
    how to choose the component with its defaults alone."""
    name, given = _name_and_options(value, path, group, choices)
    if name not in choices:
        key = path if isinstance(value, str) else f"{path}.name"
        raise OptionError(
            f"{key} must be one of the registered {group}s ({', '.join(choices)}), got {name!r}"
        )
    try:
        options = checked_options(choices[name], given, path, f"{group} {name!r}")
    except UnknownOption as error:
        if error.near is not None:  # a misspelt option
            raise
        hint = f"; `{path}={name}` chooses {group} {name!r} with its defaults alone"
        raise UnknownOption(f"{error}{hint}") from None
    return {"name": name, **options}


def _name_and_options(
    value: Any, path: str, group: str, choices: Mapping[str, type | None]
) -> tuple[str, dict[str, Any]]:
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
        known = ", ".join(choices)
        raise OptionError(f"{path}.name must name a registered {group} ({known}), got {name!r}")
    return name, options


def unknown_option(near: str | None, known: list[str], owner: str) -> str:
    """What to say of a key `owner` does not have: the option `near` it, and all of them."""
    if not known:
        return f"not an option of {owner}, which has none"
    hint = f" (did you mean {near}?)" if near else ""
    return f"not an option of {owner}{hint}; its options: {', '.join(known)}"


def checked_value(value: Any, kind: Any, item: dataclasses.Field, key: str) -> Any:
    """The value as plain data if it has the field's type and range, else OptionError
    `<key> must be <what> , got <value>`."""
    base, nullable = _without_none(kind)
    extent: Range | None = item.metadata.get(RANGE)
    wanted = describe(base, extent) + (" (or null)" if nullable else "")
    if value is None:
        if nullable:
            return None
        raise OptionError(f"{key} must be {wanted}, got None")
    if isinstance(value, Enum):
        value = value.name
    if not has_type(value, base) or (extent is not None and not extent.accepts(value)):
        raise OptionError(f"{key} must be {wanted}, got {value!r}")
    return value


def describe(kind: Any, extent: Range | None) -> str:
    """What a value must be, in words: `an integer of at least 1`, `one of predictive, monotonic`."""
    if isinstance(kind, type) and issubclass(kind, Enum):
        return f"one of {', '.join(kind.__members__)}"
    words = {bool: "true or false", int: "an integer", float: "a finite number", str: "a string"}
    if kind not in words:
        raise TypeError(f"an option of type {kind!r} cannot be checked: use {tuple(words)}")
    return words[kind] + ("" if extent is None else f" {extent.text}")


def has_type(value: Any, kind: type) -> bool:
    """Exactly the kinds a YAML value can have: an int is a number, a bool is not."""
    if isinstance(kind, type) and issubclass(kind, Enum):
        return isinstance(value, str) and value in kind.__members__
    if kind is bool or isinstance(value, bool):
        return kind is bool and isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float)) and math.isfinite(value)
    return isinstance(value, kind)


def default_of(item: dataclasses.Field, key: str) -> Any:
    if item.default is not dataclasses.MISSING:
        return item.default
    if item.default_factory is not dataclasses.MISSING:
        return item.default_factory()
    raise OptionError(f"{key} is required: it has no default")


def plain_value(value: Any) -> Any:
    """A default as plain data: an enum member as its name."""
    return value.name if isinstance(value, Enum) else value


def _without_none(kind: Any) -> tuple[Any, bool]:
    """(`X`, True) for `X | None`; (kind, False) otherwise."""
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        others = [arg for arg in typing.get_args(kind) if arg is not type(None)]
        if len(others) == 1:
            return others[0], len(others) < len(typing.get_args(kind))
    return kind, False
