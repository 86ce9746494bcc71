"""Checkpoints: written atomically, loaded safely, checked against the config.

A checkpoint is a plain dict of tensors, numbers, strings and bytes, loaded with
`torch.load(weights_only=True)`, so opening one never runs code. It carries everything
a run needs to continue (model, optimiser, schedule, progress, RNG states) and everything
a user needs to translate (the config and the sentencepiece models as bytes).
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

FORMAT_VERSION = 1
REQUIRED_KEYS = ("format", "model", "config", "tokenizers", "progress")
# Config sections that define the architecture or its vocabulary: a checkpoint whose
# values differ here cannot be loaded into the configured model.
ARCHITECTURE_SECTIONS = ("encoder", "decoder", "attention", "model")


class CheckpointError(RuntimeError):
    """A checkpoint that is missing, unreadable or does not fit the configuration."""


def save_checkpoint(path: Path, payload: dict[str, Any]) -> None:
    """Write to a temporary file in the same folder, then rename over `path`.

    A crash during the write leaves the previous checkpoint at `path` intact.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as handle:
        torch.save(payload, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


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
        if saved_flat.get(key) != current_flat.get(key)
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
