"""Compose configs the way `seq2seq-train` does, for tests."""

from __future__ import annotations

from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from seq2seq.config import register_configs

CONFIG_DIR = str(Path(__file__).resolve().parent.parent / "configs")

# A model small enough to train on the toy tasks in seconds on one CPU core.
TINY_TOY = [
    "data=toy_reverse",
    "data.toy_train_size=512",
    "data.toy_valid_size=32",
    "data.toy_test_size=32",
    "data.max_tokens=512",
    "encoder=gru",
    "decoder=gru",
    "attention=additive",
    "encoder.hidden_size=16",
    "decoder.hidden_size=32",
    "model.embed_dim=32",
    "trainer.threads=1",
    "trainer.log_every=1",
    "logging.progress_bar=false",
]


def compose_config(overrides: list[str]) -> DictConfig:
    register_configs()
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        return compose(config_name="train", overrides=overrides)
