"""Checkpoints: written atomically, loaded safely, checked against the config.

A checkpoint is a plain dict of tensors, numbers, strings and bytes, loaded with
`torch.load(weights_only=True)`, so opening one never runs code. It carries everything
a run needs to continue (model, optimiser, schedule, progress, RNG states) and everything
a user needs to translate (the config and the sentencepiece models as bytes).

Optional keys that validation hooks add (`HOOK_KEYS`, see `seq2seq.training.hooks`) are kept
across a resume. `alignment_choice` is the attention layer and head that aligned best on the
valid gold pairs (`AlignmentChoice`); like all of a checkpoint it is untrusted data, so it is
read only through `checked_alignment_choice`.
"""

from __future__ import annotations

import io
import logging
import os
import random
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

FORMAT_VERSION = 1
REQUIRED_KEYS = ("format", "model", "config", "tokenizers", "progress")
# Config sections that define the architecture or its vocabulary: a checkpoint whose
# values differ here cannot be loaded into the configured model.
ARCHITECTURE_SECTIONS = ("encoder", "decoder", "attention", "model")
# Keys of those sections that do not shape the model: a resume may change them.
NOT_ARCHITECTURE = ("model.max_parameters",)
ALIGNMENT_CHOICE_KEY = "alignment_choice"
# Payload keys a validation hook may add; the trainer keeps them across a resume.
HOOK_KEYS = (ALIGNMENT_CHOICE_KEY,)
MAX_STEP = 2**62  # a step beyond this is not one a run reached
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
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    # Serialised in memory first: torch.save's zip writer turns a failed file write into a
    # RuntimeError without the system's reason, a plain write reports ENOSPC or EFBIG.
    try:
        buffer = io.BytesIO()
        torch.save(payload, buffer)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as handle:
            handle.write(buffer.getbuffer())
            handle.flush()
            os.fsync(handle.fileno())
        if keep_previous and path.is_file():
            os.replace(path, previous_path(path))
        os.replace(tmp, path)
    except OSError as error:
        _remove_quietly(tmp)
        reason = error.strerror or str(error)
        raise CheckpointError(f"cannot write checkpoint {path}: {reason}") from error
    except BaseException:  # Ctrl-C or another error mid-write: no half-written file stays
        _remove_quietly(tmp)
        raise


def _remove_quietly(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass


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


def tokenizer_payload(data: Any) -> dict[str, Any]:
    """Both tokenisers as bytes, so that a checkpoint alone can translate."""
    return {
        side: {"lang": tok.lang, "kind": tok.kind, "model": tok.to_bytes()}
        for side, tok in (("src", data.src_tokenizer), ("tgt", data.tgt_tokenizer))
    }
