"""Check `config`: its presets compose, and its defaults are its schema's, in one place.

The rules, for a component of group G named N:

1. Presets. At least one YAML preset chooses it: `configs/G/N.yaml` (for a score or
   region: an `attention/*.yaml` whose `score` or `region` names it), in the package or
   in the user's config folder. Every preset that chooses it composes as `seq2seq-train`
   composes it (the schema checks it), and a preset named N chooses N.
2. One set of defaults. The constructor's keyword defaults equal the schema's: every field
   of its config schema (a score's or region's options dataclass) is a keyword of its class
   with the same default, and every other keyword of the class is one the model builder
   passes (`embed_dim`, the decoder's `attention`, the attention's widths).
3. No silent override. A preset states only what it is for: every value of its composed
   node that differs from the schema's default is written in that preset file itself, in
   its body or as a group choice in its defaults list (`- score: scaled_dot`). A value can
   then differ from the schema only where a reader of the preset sees it; one that comes
   from anywhere else (another preset it pulls in, a schema registered under the same name)
   fails. Restating a default is allowed. For a score or region, the rule holds for its
   options in each attention preset that chooses it (written under `score:` / `region:`).
"""

from __future__ import annotations

import dataclasses
import inspect
from enum import Enum
from typing import Any

from seq2seq.bounded_files import read_yaml
from seq2seq.models.attention.options import component_node
from seq2seq.option_rules import checked_options
from seq2seq.testing.component_presets import OPTION_GROUPS, preset_group
from seq2seq.testing.results import Violation, expect
from seq2seq.testing.subject import Subject, schema_defaults

# Keywords the model builder passes to each group's class, beside the config's.
PASSED_BY_THE_BUILDER = {
    "attention": {"query_dim", "key_dim", "value_dim"},
    "encoder": {"embed_dim"},
    "decoder": {"embed_dim", "attention"},
}
# A score is built as `cls(query_width, key_width, heads, **options)`, a region as
# `cls(query_width, heads, **options)`: their first arguments are passed by position.
POSITIONAL = {"score": 3, "region": 2}


def check(subject: Subject) -> str:
    presets = composed_presets(subject)
    same_defaults(subject)
    for preset in presets:
        written_where_it_differs(subject, preset)
    folder = preset_group(subject.group)
    names = ", ".join(f"{folder}/{preset}.yaml" for preset in presets)
    return f"{names} compose; class defaults = schema defaults; differences written in the preset"


# ------------------------------------------------------------ 1. presets


def composed_presets(subject: Subject) -> list[str]:
    """The presets that choose the component, each composed; a Violation otherwise."""
    folder = preset_group(subject.group)
    files = subject.catalog.files(folder)
    presets = sorted(set(subject.presets) | ({subject.name} & set(files)))
    expect(
        bool(presets), f"no preset chooses it: write {folder}/{subject.name}.yaml" + _where(subject)
    )
    for preset in presets:
        try:
            node = subject.catalog.node(folder, preset)
        except Exception as error:  # noqa: BLE001 - the composition error is the finding
            raise Violation(
                f"{files[preset]} does not compose: {' '.join(str(error).split())}"
            ) from error
        expect(
            preset in subject.presets,
            f"{files[preset]} is named after it but chooses {_chosen(subject, node)!r}",
        )
    return presets


def _where(subject: Subject) -> str:
    config_dir = subject.catalog.config_dir
    where = "the package's configs" if config_dir is None else f"{config_dir}"
    return f" (looked in {where})"


def _chosen(subject: Subject, node: dict[str, Any]) -> Any:
    return node.get(subject.group) if subject.group in OPTION_GROUPS else node.get("_target_")


# ------------------------------------------------------------ 2. one set of defaults


def same_defaults(subject: Subject) -> None:
    """Rule 2: the class's keyword defaults are the schema's (module docstring)."""
    component = subject.component
    schema = component.options if subject.group in OPTION_GROUPS else component.schema
    declared = {} if schema is None else field_defaults(schema)
    declared.pop("_target_", None)
    parameters = keywords(component.builder, POSITIONAL.get(subject.group, 0))
    builder = component.builder.__name__
    missing = sorted(set(declared) - set(parameters))
    expect(not missing, f"{builder} takes no keyword {', '.join(missing)} that its schema has")
    extra = sorted(
        set(parameters) - set(declared) - PASSED_BY_THE_BUILDER.get(subject.group, set())
    )
    expect(
        not extra, f"{builder} takes {', '.join(extra)}, which no config sets (not in its schema)"
    )
    for key, default in declared.items():
        own = plain(parameters[key].default)
        expect(own == default, f"{builder}({key}={own!r}) but its schema's default is {default!r}")


def keywords(builder: type, positional: int) -> dict[str, inspect.Parameter]:
    """The class's named parameters after the first `positional` (no `*args`, `**kwargs`)."""
    named = [
        parameter
        for parameter in inspect.signature(builder).parameters.values()
        if parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)
    ]
    return {parameter.name: parameter for parameter in named[positional:]}


def field_defaults(schema: type) -> dict[str, Any]:
    """A dataclass's fields and their defaults as plain data (enums as names)."""
    defaults = {}
    for item in dataclasses.fields(schema):
        if item.default is not dataclasses.MISSING:
            defaults[item.name] = plain(item.default)
        elif item.default_factory is not dataclasses.MISSING:
            defaults[item.name] = plain(item.default_factory())
        else:
            defaults[item.name] = inspect.Parameter.empty  # required: no default either side
    return defaults


def plain(value: Any) -> Any:
    return value.name if isinstance(value, Enum) else value


# ------------------------------------------------------------ 3. no silent override


def written_where_it_differs(subject: Subject, preset: str) -> None:
    """Rule 3 for one preset (module docstring)."""
    folder = preset_group(subject.group)
    file = subject.catalog.files(folder)[preset]
    written = written_keys(file)
    node = subject.catalog.node(folder, preset)
    if subject.group in OPTION_GROUPS:
        composed = component_node(subject.group, node[subject.group])
        composed.pop("name")
        defaults = checked_options(subject.component.options, {}, subject.group, subject.name)
        written = written.get(subject.group, set())
        where = f"{subject.group}.%s"
    else:
        composed = {key: _normal(key, value) for key, value in node.items()}
        defaults = {
            key: _normal(key, value)
            for key, value in schema_defaults(subject.component.schema).items()
        }
        where = "%s"
    for key, value in composed.items():
        if key in defaults and value != defaults[key] and key not in written:
            raise Violation(
                f"{file} gives {where % key} = {value!r}, not the schema's default "
                f"{defaults[key]!r}, but does not write it"
            )


def _normal(key: str, value: Any) -> Any:
    """A score's or region's entry as its full node (a bare name = its defaults)."""
    if key in OPTION_GROUPS and value is not None:
        return component_node(key, value)
    return value


def written_keys(file: str) -> dict[str, Any]:
    """The keys a preset writes: its body's, and the group choices of its defaults list.
    A key whose value is a mapping maps to the set of that mapping's keys."""
    loaded = read_yaml(file) or {}  # a user's preset too: bounded, no aliases
    written: dict[str, Any] = {}
    for entry in loaded.pop("defaults", None) or []:
        if isinstance(entry, dict):
            written.update({str(key).lstrip("/").split("/")[-1]: set() for key in entry})
    for key, value in loaded.items():
        written[key] = set(value) if isinstance(value, dict) else set()
    return written
