"""A dataclass schema as text: each field's type, default and the comment written beside it.

`field_rows(TrainerConfig)` gives one `FieldRow` per field, in declaration order, with the
comment on the field's line or the comment lines right above it (the schemas keep their
explanations there, so the reference repeats nothing by hand). Inherited fields take the
comment of the class that declares them.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import textwrap
import tokenize
import types
import typing
from dataclasses import dataclass
from enum import Enum
from typing import Any

from omegaconf import MISSING


@dataclass(frozen=True)
class FieldRow:
    """One key of a schema, as the reference shows it."""

    name: str
    type: str  # "int", "float | None", "one of ce, mse"
    default: str  # "3000", "null", "required"
    comment: str  # the words beside the field in the source, or ""
    field: dataclasses.Field


def field_rows(schema: type) -> list[FieldRow]:
    """The public fields of a dataclass schema (`_target_` and other `_` keys left out)."""
    hints = typing.get_type_hints(schema)
    comments = inherited_comments(schema)
    return [
        FieldRow(item.name, type_text(hints[item.name]), default_text(item),
                 comments.get(item.name, ""), item)
        for item in dataclasses.fields(schema)
        if not item.name.startswith("_")
    ]  # fmt: skip


def inherited_comments(schema: type) -> dict[str, str]:
    """Field name → comment, the nearest class in the MRO that has one winning."""
    comments: dict[str, str] = {}
    for cls in reversed(schema.__mro__):
        if dataclasses.is_dataclass(cls):
            comments.update(class_comments(cls))
    return comments


def class_comments(cls: type) -> dict[str, str]:
    """The comments of the fields a class declares itself ({} when its source is unknown,
    as for a dataclass made with `make_dataclass`)."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    by_line = comments_by_line(source)
    alone = {n for n, line in enumerate(source.splitlines(), 1) if line.strip().startswith("#")}
    (node,) = ast.parse(source).body
    found = {}
    for statement in node.body:
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            lines = (statement.lineno, statement.end_lineno or statement.lineno)
            text = field_comment(by_line, alone, *lines)
            if text:
                found[statement.target.id] = text
    return found


def comments_by_line(source: str) -> dict[int, str]:
    """Line number (from 1) → the comment's text on that line, without `#`."""
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return {
        token.start[0]: token.string.lstrip("#").strip()
        for token in tokens
        if token.type == tokenize.COMMENT
    }


def field_comment(by_line: dict[int, str], alone: set[int], first: int, last: int) -> str:
    """The comment-only lines (`alone`) right above a field, then the comments on its own
    lines, as one text."""
    above = []
    line = first - 1
    while line in alone:
        above.insert(0, by_line[line])
        line -= 1
    if above and is_heading(above[0]):
        above = above[1:]
    beside = [by_line[n] for n in range(first, last + 1) if n in by_line]
    return " ".join(part for part in [*above, *beside] if part and part != "fmt: skip")


def is_heading(comment: str) -> bool:
    """A label over a run of fields (`# corpus`, `# subwords (sentencepiece)`), not a
    description: three words at most, no sentence punctuation."""
    return len(comment.split()) <= 3 and not any(mark in comment for mark in ".:;=")


def type_text(hint: Any) -> str:
    """`int`, `float | None`, `list[int] | None`, `one of ce, mse`."""
    if isinstance(hint, type) and issubclass(hint, Enum):
        return "one of " + ", ".join(hint.__members__)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " | ".join(type_text(arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return "None"
    if hint is Any:
        return "any"
    if isinstance(hint, type) and not typing.get_args(hint):
        return hint.__name__
    return str(hint).replace("typing.", "")


def default_text(item: dataclasses.Field) -> str:
    """The default as it is written in YAML: `null`, `true`, `[0]`; `required` for `???`."""
    if item.default_factory is not dataclasses.MISSING:
        return value_text(item.default_factory())
    if item.default is dataclasses.MISSING or item.default == MISSING:
        return "required"
    return value_text(item.default)


def value_text(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, Enum):
        return value.name
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(value_text(item) for item in value) + "]"
    if dataclasses.is_dataclass(value):
        return "(the keys below)"
    return str(value)
