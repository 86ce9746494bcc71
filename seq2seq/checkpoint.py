"""Checkpoints: written atomically, loaded safely, checked against the config.

A checkpoint is a plain dict of tensors, numbers, strings and bytes, loaded with
`torch.load(weights_only=True)`, so opening one never runs code. It carries everything
a run needs to continue (model, optimiser, schedule, progress, RNG states) and everything
a user needs to translate (the config and the sentencepiece models as bytes).

Optional keys that validation hooks add (`HOOK_KEYS`, see `seq2seq.training.hooks`) are kept
across a resume. `alignment_choice` is the attention layer and head that aligned best on the
valid gold pairs (`AlignmentChoice`); like all of a checkpoint it is untrusted data, so it is
read only through `checked_alignment_choice`.

`plugins` records the plugins a run was trained with (`seq2seq.plugins`: spec, path, modules,
sha256 of the source). `check_plugins` refuses a checkpoint whose plugins this process has not
imported, in one line naming them, and warns when a passed plugin's source differs from the
recorded one; a checkpoint never causes an import.
"""

from __future__ import annotations

import io
import logging
import random
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from seq2seq import plugins
from seq2seq.bounded_files import StructuredFileError, check_plain_bounds
from seq2seq.files import write_atomically
from seq2seq.plugins import DOTTED_NAME, Plugin

FORMAT_VERSION = 1
REQUIRED_KEYS = ("format", "model", "config", "tokenizers", "progress")
# Config sections that define the architecture or its vocabulary: a checkpoint whose
# values differ here cannot be loaded into the configured model.
ARCHITECTURE_SECTIONS = ("encoder", "decoder", "attention", "model")
# Keys of those sections that do not shape the model: a resume may change them.
NOT_ARCHITECTURE = ("model.max_parameters",)
# Keys added after checkpoints were first written, with the value that builds what a
# checkpoint without them was built as: such a checkpoint matches a config holding it.
ADDED_KEYS = {"model.summary": "auto", "attention.context": "mean"}
ALIGNMENT_CHOICE_KEY = "alignment_choice"
# Payload keys a validation hook may add; the trainer keeps them across a resume.
HOOK_KEYS = (ALIGNMENT_CHOICE_KEY,)
MAX_STEP = 2**62  # a step beyond this is not one a run reached
# The plugins a run was trained with (`seq2seq.plugins.Plugin.record`), read only through
# `check_plugins`; limits on what a record may hold, so that a hostile one stays small.
PLUGINS_KEY = "plugins"
MAX_PLUGINS = 64
MAX_PLUGIN_MODULES = 1000
MAX_PLUGIN_TEXT = 4096
SHA256 = re.compile(r"[0-9a-f]{64}")
log = logging.getLogger(__name__)


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, unreadable or does not fit the configuration."""


@dataclass(frozen=True)
class AlignmentChoice:
    """The attention that aligned best on the valid gold pairs at one validation: `layer`
    and `head` counted from 0 (head None: the layer's head mean), its AER and the step."""

    layer: int
    head: int | None
    aer: float
    step: int

    def as_payload(self) -> dict[str, Any]:
        """Plain data for the checkpoint (`checked_alignment_choice` reads it back)."""
        return asdict(self)


def checked_alignment_choice(value: Any, shape: tuple[int, int] | None) -> AlignmentChoice:
    """A stored `alignment_choice` as an AlignmentChoice, for a model whose cross-attention
    has `shape` = (layers, heads) (None: no attention). CheckpointError, one line naming the
    key, for anything else: not a dict of exactly layer, head, aer and step; a layer or head
    that is not a plain int the model has; an AER outside [0, 1]; a step outside 0..2^62."""
    key = ALIGNMENT_CHOICE_KEY
    if not isinstance(value, dict):
        raise CheckpointError(f"{key}: expected a dict, got {_shown(value)}")
    names = {"layer", "head", "aer", "step"}
    if set(value) != names:
        missing = ", ".join(sorted(names - set(value))) or "none"
        raise CheckpointError(
            f"{key}: expected exactly the entries aer, head, layer and step "
            f"(missing: {missing}; {len(set(value) - names)} other entries)"
        )
    if shape is None:
        raise CheckpointError(f"{key}: the model has no attention weights (attention=none)")
    layers, heads = shape
    head = value["head"]
    return AlignmentChoice(
        layer=_int_in(value["layer"], layers - 1, f"{key}.layer", " (the model's layers)"),
        head=None if head is None else _int_in(head, heads - 1, f"{key}.head", " (its heads)"),
        aer=_aer(value["aer"], f"{key}.aer"),
        step=_int_in(value["step"], MAX_STEP, f"{key}.step"),
    )


def _int_in(value: Any, high: int, key: str, meaning: str = "") -> int:
    """A plain int (not a bool) in 0..high; else CheckpointError naming `key`."""
    if type(value) is not int or not 0 <= value <= high:
        raise CheckpointError(f"{key}: expected an int in 0..{high}{meaning}, got {_shown(value)}")
    return value


def _aer(value: Any, key: str) -> float:
    """A plain number in [0, 1] (NaN is not); else CheckpointError naming `key`."""
    if type(value) not in (int, float) or not 0 <= value <= 1:
        raise CheckpointError(f"{key}: expected a number in [0, 1], got {_shown(value)}")
    return float(value)


def _shown(value: Any) -> str:
    """A short, one-line account of an untrusted value: its type, or a small number."""
    if type(value) in (int, float) and abs(value) < 1e9:
        return repr(value)
    if type(value) is int:
        return "an int of more than 9 digits"
    return f"a {type(value).__name__}"


# ---------------------------------------------------------------- plugins


def check_plugins(
    payload: dict, path: str | Path, hint: Callable[[Sequence[str]], str]
) -> list[Plugin]:
    """The checkpoint's plugin records, when this process imported every one of them
    (`seq2seq.plugins.provider`: a plugin with the same modules); a warning naming both
    hashes for one whose source differs from the recorded one, which is loaded anyway.

    Else one CheckpointError line naming the plugins and, through `hint(specs)`, how to
    pass them. Nothing is imported here: what may be built grows only by the user's own
    `import_plugins`, never because a checkpoint names a module."""
    try:
        recorded = checked_plugin_records(payload.get(PLUGINS_KEY, []))
    except CheckpointError as error:
        raise CheckpointError(f"{path}: {error}") from error
    missing = [record for record in recorded if plugins.provider(record.modules) is None]
    if missing:
        raise CheckpointError(
            f"checkpoint {path} was trained with {_named_plugins(missing)}; "
            f"{hint([record.spec for record in missing])} to load it; a plugin runs its "
            "code, so pass only plugins you trust"
        )
    for record in recorded:
        passed = plugins.provider(record.modules)
        if passed is not None and passed.sha256 != record.sha256:
            log.warning(
                "plugin %r (%s, sha256 %s) differs from the plugin %r (%s, sha256 %s) that %s "
                "was trained with; loading it anyway",
                passed.spec, passed.path, passed.sha256, record.spec, record.path, record.sha256,
                path,
            )  # fmt: skip
    return recorded


def _named_plugins(records: Sequence[Plugin]) -> str:
    """`plugin 'lab/scores.py' (module scores)`, or `plugins 'a.py' (module a), 'b' (...)`."""
    named = []
    for record in records:
        shown = ", ".join(record.modules[:3]) + (", ..." if len(record.modules) > 3 else "")
        named.append(f"{record.spec!r} (module{'s' * (len(record.modules) > 1)} {shown})")
    return f"plugin{'s' * (len(records) > 1)} {', '.join(named)}"


def checked_plugin_records(value: Any) -> list[Plugin]:
    """A stored `plugins` entry as records. CheckpointError, one line naming the key, for
    anything else: not a list of at most MAX_PLUGINS dicts of exactly spec, path, modules
    and sha256; a spec or path that is not a printable string of at most MAX_PLUGIN_TEXT
    characters; modules that are not 1 to MAX_PLUGIN_MODULES dotted names; a sha256 that
    is not 64 lower-case hex digits."""
    key = PLUGINS_KEY
    if not isinstance(value, list) or len(value) > MAX_PLUGINS:
        count = f"{len(value)} entries" if isinstance(value, list) else _shown(value)
        raise CheckpointError(
            f"{key}: expected a list of at most {MAX_PLUGINS} records, got {count}"
        )
    return [_plugin_record(entry, f"{key}[{index}]") for index, entry in enumerate(value)]


def _plugin_record(entry: Any, key: str) -> Plugin:
    if not isinstance(entry, dict) or set(entry) != {"spec", "path", "modules", "sha256"}:
        raise CheckpointError(f"{key}: expected a dict of exactly modules, path, sha256 and spec")
    modules = entry["modules"]
    if not isinstance(modules, list) or not 1 <= len(modules) <= MAX_PLUGIN_MODULES:
        count = f"{len(modules)} entries" if isinstance(modules, list) else _shown(modules)
        raise CheckpointError(
            f"{key}.modules: expected a list of 1 to {MAX_PLUGIN_MODULES} names, got {count}"
        )
    for index, module in enumerate(modules):
        if not _text_ok(module) or not DOTTED_NAME.fullmatch(module):
            raise CheckpointError(f"{key}.modules[{index}]: expected a dotted module name")
    sha256 = entry["sha256"]
    if not isinstance(sha256, str) or not SHA256.fullmatch(sha256):
        raise CheckpointError(f"{key}.sha256: expected 64 hex digits, got {_shown(sha256)}")
    for name in ("spec", "path"):
        if not _text_ok(entry[name]) or not entry[name]:
            raise CheckpointError(
                f"{key}.{name}: expected a printable string of at most {MAX_PLUGIN_TEXT} characters"
            )
    return Plugin(entry["spec"], entry["path"], tuple(modules), sha256)


def _text_ok(value: Any) -> bool:
    """A str of at most MAX_PLUGIN_TEXT printable characters (no line breaks)."""
    return isinstance(value, str) and len(value) <= MAX_PLUGIN_TEXT and value.isprintable()


def plugins_hint(option: str) -> Callable[[Sequence[str]], str]:
    """How to pass plugins: `--plugins` (`pass --plugins a.py --plugins b`) for the
    commands that load a checkpoint, `plugins=` (`pass 'plugins=[a.py,b]'`) for training."""
    if option == "--plugins":
        return lambda specs: "pass " + " ".join(f"--plugins {shlex.quote(s)}" for s in specs)
    return lambda specs: "pass " + shlex.quote(f"{option}[{','.join(specs)}]")


def previous_path(path: Path) -> Path:
    """Where the previous generation of `path` is kept: `last.pt` -> `last.prev.pt`."""
    return path.with_name(f"{path.stem}.prev{path.suffix}")


def save_checkpoint(path: Path, payload: dict[str, Any], keep_previous: bool = False) -> None:
    """Write to a temporary file in the same folder, then rename over `path`.

    A crash during the write leaves the previous checkpoint at `path` intact. The temporary
    file is named after this process, so two writers never share one. With `keep_previous`
    the checkpoint being replaced is kept as `<name>.prev.pt` (see `load_resumable`). A
    failed write (a full disk, a file size limit) removes the temporary file and raises one
    CheckpointError naming `path` and the system's reason.
    """
    path = Path(path)
    previous = previous_path(path) if keep_previous else None
    # Serialised in memory first: torch.save's zip writer turns a failed file write into a
    # RuntimeError without the system's reason, a plain write reports ENOSPC or EFBIG.
    try:
        buffer = io.BytesIO()
        torch.save(payload, buffer)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, buffer.getbuffer(), durable=True, previous=previous,
                         hidden=True, suffix=".tmp")  # fmt: skip
    except OSError as error:
        reason = error.strerror or str(error)
        raise CheckpointError(f"cannot write checkpoint {path}: {reason}") from error


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> dict:
    """Load a checkpoint safely; one clear error if it is missing, corrupt or foreign."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        payload = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as error:  # truncated files raise several different errors
        raise CheckpointError(
            f"cannot read checkpoint {path} (corrupt or truncated?): {error}"
        ) from error
    try:  # nested 100 000 deep, a 100 MB string or key: one line, never a RecursionError
        check_plain_bounds(payload, source=str(path))
    except StructuredFileError as error:
        raise CheckpointError(str(error)) from None
    missing = [key for key in REQUIRED_KEYS if not isinstance(payload, dict) or key not in payload]
    if missing:
        raise CheckpointError(f"{path} is not a seq2seq checkpoint: missing {missing}")
    if payload["format"] != FORMAT_VERSION:
        raise CheckpointError(
            f"{path} has checkpoint format {payload['format']}, this version reads {FORMAT_VERSION}"
        )
    return payload


def load_resumable(path: str | Path, map_location: str | torch.device = "cpu") -> tuple[dict, Path]:
    """Load a checkpoint to continue a run from; returns (payload, the file used).

    When `path` is missing or unreadable (a crash or a full disk tore it), the newest
    readable of its previous generation (`last.prev.pt`) and, for `last.pt`, the run's
    `best.pt` and `best.prev.pt` is used instead, with a warning naming both files. Only
    when none is readable does it raise the CheckpointError of `path`.
    """
    path = Path(path)
    try:
        return load_checkpoint(path, map_location), path
    except CheckpointError as error:
        first_error = error
    candidates = [previous_path(path)]
    if path.name == "last.pt":
        best = path.with_name("best.pt")
        candidates += [best, previous_path(best)]
    readable = []
    for candidate in candidates:
        if candidate.is_file():
            try:
                readable.append((load_checkpoint(candidate, map_location), candidate))
            except CheckpointError as error:
                log.warning("%s", error)
    if not readable:
        raise first_error
    payload, used = max(readable, key=lambda item: item[0]["progress"].get("step", 0))
    log.warning(
        "%s; continuing from %s (step %d) instead",
        first_error, used, payload["progress"].get("step", 0),
    )  # fmt: skip
    return payload, used


def _flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, dict):
        flat: dict[str, Any] = {}
        for key, value in node.items():
            flat.update(_flatten(value, f"{prefix}{key}."))
        return flat
    return {prefix.rstrip("."): node}


def architecture_differences(
    saved: dict[str, Any], current: dict[str, Any], sections=ARCHITECTURE_SECTIONS
) -> list[str]:
    """Lines `key: checkpoint X, config Y` for every architecture value that differs."""
    saved_flat = _flatten({key: saved.get(key) for key in sections})
    current_flat = _flatten({key: current.get(key) for key in sections})
    for key, value in ADDED_KEYS.items():
        if key not in saved_flat and current_flat.get(key) == value:
            saved_flat[key] = value  # written before the key: built as its default builds
    return [
        f"{key}: checkpoint {saved_flat.get(key)!r}, config {current_flat.get(key)!r}"
        for key in sorted(set(saved_flat) | set(current_flat))
        if saved_flat.get(key) != current_flat.get(key) and key not in NOT_ARCHITECTURE
    ]


def capture_rng_states() -> dict[str, Any]:
    """Python, NumPy and torch generator states, in types that weights_only can load."""
    numpy_state = np.random.get_state()
    states: dict[str, Any] = {
        "python": random.getstate(),
        "numpy": (numpy_state[0], torch.from_numpy(numpy_state[1].copy()), *numpy_state[2:]),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def restore_rng_states(states: dict[str, Any]) -> None:
    random.setstate(states["python"])
    kind, keys, *rest = states["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), *rest))
    torch.set_rng_state(states["torch"].cpu())
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([state.cpu() for state in states["cuda"]])


def plugin_payload(cfg: Any) -> dict[str, Any]:
    """`{"plugins": [record, ...]}` of the config's `plugins`, each imported in this process
    (`seq2seq.plugins.records`; PluginError for one that was not)."""
    return {PLUGINS_KEY: plugins.records(list(cfg.get(PLUGINS_KEY) or []))}


def tokenizer_payload(data: Any) -> dict[str, Any]:
    """Both tokenisers as bytes, so that a checkpoint alone can translate."""
    return {
        side: {"lang": tok.lang, "kind": tok.kind, "model": tok.to_bytes()}
        for side, tok in (("src", data.src_tokenizer), ("tgt", data.tgt_tokenizer))
    }
