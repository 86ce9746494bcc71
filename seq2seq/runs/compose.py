"""A preset's training config, composed as `seq2seq-train +experiment=<preset> ...` composes it.

Benchmark workers are fresh processes: they register the schemas themselves (nothing else in
them does), so the presets are checked against the same dataclasses as a training run.
"""

from __future__ import annotations

from collections.abc import Sequence

from hydra import compose, initialize_config_module
from omegaconf import DictConfig

from seq2seq.config.schema import register_configs


def compose_train(overrides: Sequence[str]) -> DictConfig:
    """The `train` config with Hydra `overrides`, the schemas registered first."""
    register_configs()
    with initialize_config_module(config_module="seq2seq.configs", version_base="1.3"):
        return compose(config_name="train", overrides=list(overrides))


def preset_config(
    preset: str,
    threads: int,
    device: str,
    max_tokens: int | None = None,
    compiled: bool = False,
    extra: Sequence[str] = (),
) -> DictConfig:
    """`+experiment=<preset>` on `device` with `threads` torch threads (0: torch's default),
    `extra` overrides, `trainer.compile=true` when `compiled`, and `data.max_tokens` when
    given (None: the preset's)."""
    overrides = [f"+experiment={preset}", f"trainer.threads={threads}", f"trainer.device={device}"]
    overrides += list(extra)
    if compiled:
        overrides.append("trainer.compile=true")
    if max_tokens is not None:
        overrides.append(f"data.max_tokens={max_tokens}")
    return compose_train(overrides)
