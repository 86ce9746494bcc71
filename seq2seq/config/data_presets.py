"""The installed data configs (`configs/data/*.yaml`) as values, and the data config
that evaluates a checkpoint's split.

A checkpoint may come from someone else: its data section could name any URL to download
and any folder to write to. So a split is described by a data config of the user's
choosing (one of the installed ones, or a YAML file of their own), its files go below a
root the user gives, and from the checkpoint only the numbers and choices that decide the
split and the subwords are taken (`CHECKPOINT_DATA_FIELDS`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from seq2seq.bounded_files import StructuredFileError, parse_yaml_text, read_text_bounded
from seq2seq.configs import config_files
from seq2seq.data.settings import DataConfig, moved_key

CONFIG_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
# Taken from the checkpoint in split mode: they decide which pairs fall in which split and
# how the subwords are cut. Everything else in the data section is the user's.
CHECKPOINT_DATA_FIELDS = (
    "traditional_to_simplified",
    "max_pairs",
    "seed",
    "valid_size",
    "test_size",
    "joint_vocab",
    "src_vocab_size",
    "tgt_vocab_size",
    "model_type",
    "vocab_cap",
    "byte_fallback",
    "character_coverage",
    "spm_sample_size",
    "max_tokens",
    "max_len",
    "documents",
)
# The same of the source's options, taken when the user's config chooses the checkpoint's
# source: the reading limits of the corpus sources, the toy tasks' symbols, lengths, sizes.
CHECKPOINT_SOURCE_OPTIONS = (
    "max_malformed_share",
    "max_line_bytes",
    "vocab_size",
    "min_len",
    "max_len",
    "train_size",
    "valid_size",
    "test_size",
)


class PresetError(ValueError):
    """A data config that cannot be found or read, or does not fit the checkpoint."""


def data_preset(name: str) -> dict[str, Any]:
    """The values of a data config: a YAML file of the user's (`--data my/corpus.yaml`), or
    one of the installed `configs/data/*.yaml` called `name` (file stem, or its `name:`)."""
    if name.endswith(".yaml") and Path(name).is_file():
        return _load_preset(Path(name))
    if not CONFIG_NAME.fullmatch(name):
        raise PresetError(f"--data: {name!r} is not a data config name")
    for entry in config_files("data"):
        values = _load_preset(entry)
        if Path(entry.name).stem == name or values.get("name") == name:
            return values
    raise PresetError(
        f"--data: no data config named {name!r} among the installed configs/data/*.yaml; "
        "name one with --data NAME or --data FILE.yaml, or evaluate files with --src and --ref"
    )


def _load_preset(path: Path | Traversable) -> dict[str, Any]:
    try:
        text = read_text_bounded(path) if isinstance(path, Path) else path.read_text("utf-8")
        values = parse_yaml_text(text, source=str(path))
        if not isinstance(values, dict):
            raise PresetError(f"--data: {path}: not a YAML mapping of data settings")
        node = OmegaConf.create(values)
        node.pop("defaults", None)
        _refuse_moved_keys(path, node)
        merged = OmegaConf.merge(OmegaConf.structured(DataConfig), node)
        return OmegaConf.to_container(merged, resolve=True)
    except StructuredFileError as error:  # too big, an alias, not YAML: it names the file
        raise PresetError(f"--data: {error}") from None
    except OmegaConfBaseException as error:
        raise PresetError(f"--data: {path}: {one_line(error)}") from error


def split_data_config(stored: Mapping[str, Any], name: str | None, root: Path) -> DataConfig:
    """The user's data config for evaluating a split of the checkpoint's corpus."""
    values = data_preset(name or str(stored["name"]))
    for key in ("src_lang", "tgt_lang"):
        if values[key] != stored[key]:
            raise PresetError(
                f"--data: the config's {key} is {values[key]!r}, the checkpoint's is "
                f"{stored[key]!r}"
            )
    values.update({key: stored[key] for key in CHECKPOINT_DATA_FIELDS if key in stored})
    values["source"] = _split_source(values["source"], stored.get("source"))
    values["root"] = str(root)
    try:
        return DataConfig.from_mapping(values)
    except ValueError as error:
        raise PresetError(str(error)) from error


def _split_source(chosen: Any, stored: Any) -> Any:
    """The user's source node, with the checkpoint's CHECKPOINT_SOURCE_OPTIONS when both
    choose the same source."""
    chosen = {"name": chosen} if isinstance(chosen, str) else chosen
    if not isinstance(chosen, Mapping) or not isinstance(stored, Mapping):
        return chosen
    if chosen.get("name") != stored.get("name"):
        return chosen
    taken = {key: stored[key] for key in CHECKPOINT_SOURCE_OPTIONS if key in stored}
    return {**chosen, **taken}


def _refuse_moved_keys(path: Path | Traversable, node: Any) -> None:
    """PresetError naming the new key for a key of the layout before `data.source`."""
    for key in node:
        if moved_key(str(key)) is not None:
            raise PresetError(
                f"--data: {path}: data.{key} is a key of the data config before data.source; "
                f"it is now {moved_key(str(key))} (see configs/data/*.yaml)"
            )


def one_line(error: Exception) -> str:
    """An error message on one line (a multi-line cause joined with '; ')."""
    return "; ".join(line.strip() for line in str(error).splitlines() if line.strip())
