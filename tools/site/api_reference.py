"""The Python API's reference page (docs/reference/python-api.md), made from the code:
every name `import seq2seq` offers (`seq2seq.API_NAMES`), with its signature and its whole
docstring, and for a class its public methods and properties, so that the page cannot
drift from `seq2seq/api/`."""

from __future__ import annotations

import inspect
from typing import Any

import seq2seq
from seq2seq import api

PAGE = "reference/python-api.md"
SHOWN_DUNDERS = ("_repr_html_", "_repr_png_")  # what Jupyter calls: part of the contract


def signature(obj: Any, name: str) -> str:
    """`name(arguments) -> returns` as the code declares it, annotations as written."""
    try:
        declared = inspect.signature(obj)
    except (TypeError, ValueError):  # a builtin without a signature
        return name
    parameters = [
        parameter.replace(annotation=_plain(parameter.annotation))
        for parameter in declared.parameters.values()
    ]
    plain = declared.replace(
        parameters=parameters, return_annotation=_plain(declared.return_annotation)
    )
    return f"{name}{plain}"


class _Written(str):
    """An annotation shown as written (`str | Path`, not `'str | Path'`)."""

    def __repr__(self) -> str:
        return str(self)


def _plain(annotation: Any) -> Any:
    return _Written(annotation) if isinstance(annotation, str) else annotation


def docstring(obj: Any) -> list[str]:
    """The docstring, cleaned, as a block the page shows verbatim (its text wraps at
    ~90 columns, and lists and equations keep their layout)."""
    text = inspect.getdoc(obj) or "(no docstring)"
    return ["```text", *text.splitlines(), "```"]


def members(cls: type) -> list[tuple[str, Any]]:
    """The public methods and properties `cls` itself defines, in source order."""
    shown = []
    for name, value in vars(cls).items():
        if name.startswith("_") and name not in SHOWN_DUNDERS:
            continue
        if isinstance(value, property) or inspect.isfunction(value):
            shown.append((name, value))
    return shown


def member_section(cls: type, name: str, value: Any) -> list[str]:
    if isinstance(value, property):
        heading = f"#### `{cls.__name__}.{name}` (property)"
        return [heading, "", *docstring(value.fget), ""]
    return [f"#### `{cls.__name__}.{signature(value, name)}`", "", *docstring(value), ""]


def name_section(name: str) -> list[str]:
    obj = getattr(api, name)
    if inspect.isclass(obj):
        lines = [f"### `seq2seq.{name}` (class)", "", *docstring(obj), ""]
        for member, value in members(obj):
            lines += member_section(obj, member, value)
        return lines
    return [f"### `seq2seq.{signature(obj, name)}`", "", *docstring(obj), ""]


def python_api_page(generated_note: str) -> str:
    """The page: the module's docstring, then functions first, then classes."""
    functions = [name for name in seq2seq.API_NAMES if not inspect.isclass(getattr(api, name))]
    classes = [name for name in seq2seq.API_NAMES if inspect.isclass(getattr(api, name))]
    lines = [generated_note, "", "# Python API", "", *docstring(api), ""]
    lines += ["How to use it, with examples: [the Python API guide](../guides/python-api.md).", ""]
    lines += ["## Functions", ""]
    for name in functions:
        lines += name_section(name)
    lines += ["## Classes", ""]
    for name in classes:
        lines += name_section(name)
    return "\n".join(lines).rstrip() + "\n"
