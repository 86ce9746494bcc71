"""Bounded reading of the YAML and JSON files that come with an artefact.

A run folder's `.hydra/config.yaml`, an export's metadata, a lab record, a cache's
`meta.json`: these come with something a user hands the project, so they are untrusted
data, read with three bounds before anything is built from them:

* size: the file's size is checked with `stat` before it is opened, and at most
  `limit + 1` bytes are read (a file that grows meanwhile is still refused);
* aliases: a YAML alias (`*name`) is refused where it is met, before it is expanded, so a
  few hundred bytes of nested aliases (a "billion laughs") cannot grow to gigabytes;
  anchors alone are harmless and allowed;
* nesting: a YAML or JSON value nested deeper than `MAX_DEPTH` is refused (and never
  reaches a recursion limit).

Every refusal is a `StructuredFileError`, one line starting with the file's path (and the
line, for YAML): `runs/3/.hydra/config.yaml: line 2: a YAML alias (*a) is refused ...`.

    meta = read_json(folder / "meta.json")                 # a JSON object or list
    config = read_yaml(run / ".hydra/config.yaml")         # plain dicts, lists, scalars
    config = parse_yaml_text(text, source="override")     # text read elsewhere

`checked_size` checks a number read from such a file that sizes memory against the bound
the artefact itself fixes (a model's position table, a vocabulary's size).

The project's own configs (`configs/`) and the output of its own worker processes are
trusted and read as before.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml

from seq2seq.text_encoding import TextEncodingError, decoded_text

STRUCTURED_LIMIT = 4 * 1024 * 1024  # bytes: a run's config is a few kB, results a few hundred
MAX_DEPTH = 64  # nesting of mappings and lists; a run's config is about 5 deep
MAX_TEXT = 64 * 1024  # characters of one string held in plain data (a path, a URL, a name)
MAX_KEY = 1024  # characters of one mapping key (a config key, a weight's dotted name)
MAX_INT_BITS = 128  # an integer wider than this sizes nothing and prints as thousands of digits
SHOWN = 60  # characters of an untrusted key path shown in a message
YAML_FLOAT = re.compile(  # YAML 1.2 floats (`1e-3`), as OmegaConf reads them
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
    |\.[0-9_]+(?:[eE][-+][0-9]+)?
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)


class StructuredFileError(ValueError):
    """A structured file that is too big, not text, not valid, holds an alias or nests too
    deep; the message is one line starting with the file's path."""


# ---------------------------------------------------------------- bytes


def read_bounded(path: str | Path, *, limit: int = STRUCTURED_LIMIT) -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them: its size is checked
    with stat first, then at most `limit + 1` bytes are read. StructuredFileError for a
    file too big, not a regular file (a FIFO would block), or that cannot be read."""
    path = Path(path)
    try:
        with open(path, "rb", opener=_nonblocking) as stream:
            status = os.fstat(stream.fileno())
            if not stat.S_ISREG(status.st_mode):
                raise StructuredFileError(f"{path}: not a regular file")
            if status.st_size > limit:
                raise StructuredFileError(_too_big(path, status.st_size, limit))
            data = stream.read(limit + 1)
    except OSError as error:
        raise StructuredFileError(f"{path}: cannot be read ({error.strerror or error})") from None
    if len(data) > limit:
        raise StructuredFileError(_too_big(path, len(data), limit))
    return data


def _nonblocking(path: str, flags: int) -> int:
    """Open without blocking on a FIFO or device (the type is checked once it is open)."""
    return os.open(path, flags | getattr(os, "O_NONBLOCK", 0))


def _too_big(path: Path, size: int, limit: int) -> str:
    return f"{path}: {size:,} bytes or more, over the limit of {limit:,} for this file"


def read_text_bounded(path: str | Path, *, limit: int = STRUCTURED_LIMIT) -> str:
    """`read_bounded` decoded as UTF-8 (a byte-order mark is dropped); a file saved as
    UTF-16 or UTF-32 is refused naming its encoding and how to convert it."""
    data = read_bounded(path, limit=limit)
    try:
        return decoded_text(data, str(path))
    except TextEncodingError as error:
        raise StructuredFileError(str(error)) from None
    except UnicodeDecodeError as error:
        raise StructuredFileError(f"{path}: not UTF-8 text (byte {error.start})") from None


# ---------------------------------------------------------------- JSON


def read_json(path: str | Path, *, limit: int = STRUCTURED_LIMIT) -> Any:
    """The JSON value of the file `path`, read within `limit` bytes and `MAX_DEPTH` levels;
    StructuredFileError naming the file otherwise."""
    return parse_json_text(read_text_bounded(path, limit=limit), source=str(path))


def parse_json_text(text: str, *, source: str) -> Any:
    """The JSON value of `text` (read from `source`, named in errors), nested at most
    `MAX_DEPTH` levels; the depth is checked before parsing."""
    deepest = json_depth(text)
    if deepest > MAX_DEPTH:
        raise StructuredFileError(f"{source}: nested {deepest} levels deep, over {MAX_DEPTH}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise StructuredFileError(
            f"{source}: line {error.lineno}: not valid JSON ({error.msg})"
        ) from None
    except (ValueError, RecursionError) as error:  # a number of over 4300 digits
        raise StructuredFileError(f"{source}: not valid JSON ({_first_line(error)})") from None


def json_depth(text: str) -> int:
    """The deepest nesting of `[` and `{` in JSON text, strings skipped (a linear scan)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


# ---------------------------------------------------------------- YAML


class BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses aliases before expanding them, nodes nested deeper
    than `MAX_DEPTH`, and a key given twice in one mapping; floats as in YAML 1.2 (`1e-3`)."""

    def __init__(self, stream: str, source: str):
        super().__init__(stream)
        self.source = source
        self.depth = 0

    def where(self, mark: Any) -> str:
        return f"{self.source}: line {mark.line + 1}" if mark is not None else self.source

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise StructuredFileError(
                f"{self.where(event.start_mark)}: a YAML alias (*{event.anchor}) is refused "
                "(aliases can expand a small file into gigabytes); write the value out"
            )
        self.depth += 1
        if self.depth > MAX_DEPTH:
            mark = self.peek_event().start_mark
            raise StructuredFileError(f"{self.where(mark)}: nested deeper than {MAX_DEPTH} levels")
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        keys = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, (str, int, float, bool)) or key is None:
                if key in keys:
                    raise StructuredFileError(
                        f"{self.where(key_node.start_mark)}: the key {key!r} is given twice"
                    )
                keys.add(key)
        return super().construct_mapping(node, deep=deep)


BoundedLoader.add_implicit_resolver("tag:yaml.org,2002:float", YAML_FLOAT, list("-+0123456789."))


def parse_yaml_text(text: str, *, source: str) -> Any:
    """The YAML value of `text` (from `source`, named in errors) as plain data, with aliases
    refused and nesting bounded (`BoundedLoader`); one line for invalid YAML."""
    loader = BoundedLoader(text, source)
    try:
        return loader.get_single_data()
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        problem = getattr(error, "problem", None) or _first_line(error)
        raise StructuredFileError(f"{loader.where(mark)}: not valid YAML ({problem})") from None
    except RecursionError:
        raise StructuredFileError(f"{source}: nested too deep") from None
    finally:
        loader.dispose()


def read_yaml(path: str | Path, *, limit: int = STRUCTURED_LIMIT) -> Any:
    """The YAML value of the file `path` as plain data, read within `limit` bytes, aliases
    refused and nesting bounded; StructuredFileError naming the file otherwise."""
    return parse_yaml_text(read_text_bounded(path, limit=limit), source=str(path))


# ---------------------------------------------------------------- plain data


def check_plain_bounds(value: Any, *, source: str, max_depth: int = MAX_DEPTH) -> None:
    """Plain data that came unparsed (a checkpoint's pickled dict) within the bounds a parsed
    file gets: mappings and lists nested at most `max_depth` levels, strings of at most
    `MAX_TEXT` characters, keys of at most `MAX_KEY`, integers of at most `MAX_INT_BITS`
    bits. Walked with a stack (never a RecursionError); other leaves (tensors, bytes) are
    not looked into. StructuredFileError, one line starting with `source` and the key path,
    otherwise."""
    stack: list[_Entry] = [_Entry(value, None, "")]
    while stack:
        entry = stack.pop()
        problem = _plain_problem(entry, max_depth)
        if problem:
            raise StructuredFileError(f"{source}: {entry.path()}: {problem}")
        if isinstance(entry.value, dict):
            stack.extend(_Entry(child, entry, key) for key, child in entry.value.items())
        elif isinstance(entry.value, (list, tuple)):
            stack.extend(_Entry(child, entry, index) for index, child in enumerate(entry.value))


class _Entry:
    """A value met by `check_plain_bounds`, its parent entry and its key there (a chain,
    so that no key path is built unless a message needs it)."""

    __slots__ = ("value", "parent", "key", "depth")

    def __init__(self, value: Any, parent: _Entry | None, key: Any):
        self.value, self.parent, self.key = value, parent, key
        self.depth = 1 if parent is None else parent.depth + 1

    def path(self) -> str:
        """The key path (`encoder.x[0]`), its ends only when long; `the top level` at the top."""
        names, entry = [], self
        while entry is not None and entry.parent is not None:
            names.append(_key_name(entry.key, entry.parent.value))
            entry = entry.parent
        path = "".join(reversed(names)).lstrip(".") or "the top level"
        return path if len(path) <= 2 * SHOWN else f"{path[:SHOWN]}...{path[-SHOWN:]}"


def _key_name(key: Any, container: Any) -> str:
    if not isinstance(container, dict):
        return f"[{key}]"
    if isinstance(key, str):
        return f".{key[:SHOWN]}" + ("..." if len(key) > SHOWN else "")
    return f".<a {type(key).__name__} key>"


def _plain_problem(entry: _Entry, max_depth: int) -> str:
    """What is out of bounds in the entry itself (its value, its own key), or ""."""
    value, key = entry.value, entry.key
    if isinstance(key, str) and len(key) > MAX_KEY:
        return f"a key of {len(key):,} characters, over {MAX_KEY:,}"
    if isinstance(value, (dict, list, tuple)) and entry.depth > max_depth:
        return f"nested deeper than {max_depth} levels"
    if isinstance(value, str) and len(value) > MAX_TEXT:
        return f"a string of {len(value):,} characters, over {MAX_TEXT:,}"
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        return f"an integer of {value.bit_length():,} bits, over {MAX_INT_BITS}"
    return ""


def _shown_value(value: Any) -> str:
    """A short, one-line account of an untrusted value (a huge int has no repr)."""
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        return f"an integer of {value.bit_length():,} bits"
    text = repr(value)
    return text if len(text) <= 2 * SHOWN else f"{text[:SHOWN]}...{text[-SHOWN:]}"


# ---------------------------------------------------------------- numbers that size memory


def checked_size(value: Any, *, key: str, source: str, low: int = 1, high: int) -> int:
    """`value`, a number read from `source` at `key` that sizes memory, as an int within
    [low, high] (`high` is what the artefact itself fixes); StructuredFileError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise StructuredFileError(f"{source}: {key} must be an integer, got {_shown_value(value)}")
    if not low <= value <= high:
        raise StructuredFileError(
            f"{source}: {key} = {_shown_value(value)} is outside {low}..{high} "
            "(what this artefact allows)"
        )
    return value


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]
