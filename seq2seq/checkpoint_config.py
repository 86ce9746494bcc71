"""Validate the config stored in a checkpoint before anything is built from it.

A checkpoint is a file someone else may have written. Its config is plain data, but Hydra's
`instantiate` would build any `_target_` in it, at any depth, and OmegaConf would evaluate
an interpolation such as `${oc.env:HOME}` when a value is read. So a checkpoint's config is
accepted only when:

- it holds plain values (strings, numbers, booleans, null, lists, mappings with string
  keys) and no string, key or value, contains `${`: nothing is interpolated or resolved;
- no mapping below the top of a section holds `_target_` or another of Hydra's keys
  (`_args_`, `_partial_`, ...), and no section holds any of them but `_target_`;
- each buildable part names its class (`_target_`) exactly as one of the project's
  classes of that group (`seq2seq.config.buildable_classes`), whose schema it is then
  merged into: a key the schema lacks or a value of the wrong type is refused;
- every other section merges into its schema (`DataConfig`, `ModelConfig`,
  `TrainerConfig`, `LoggingConfig`), the data section passes `DataConfig.validate`, and
  the whole passes the range checks of training (`seq2seq.settings_checks`).

Every refusal is one `ConfigError` whose message starts with the offending key
(`encoder.dropout: ...`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from seq2seq.build import ConfigError, allowed_target
from seq2seq.config import (
    BUILDABLE_GROUPS,
    HYDRA_KEYS,
    LoggingConfig,
    ModelConfig,
    TrainerConfig,
    nested_build_key,
)
from seq2seq.data.config import DataConfig
from seq2seq.settings_checks import check_settings

# Sections merged into one fixed schema; the buildable groups choose theirs by `_target_`.
FIXED_SCHEMAS: dict[str, type] = {
    "data": DataConfig,
    "model": ModelConfig,
    "trainer": TrainerConfig,
    "logging": LoggingConfig,
}
# What a model needs to be rebuilt and to translate: a checkpoint without them is refused.
REQUIRED_SECTIONS = ("data", "encoder", "decoder", "attention", "model")
SCALARS = (str, int, float, bool, type(None))


def validated_config(raw: Any) -> DictConfig:
    """The checkpoint's config merged into the project's schemas, or a ConfigError."""
    if not isinstance(raw, dict):
        raise ConfigError(f"config: a mapping was expected, got {type(raw).__name__}")
    known = set(FIXED_SCHEMAS) | set(BUILDABLE_GROUPS) | {"name"}
    for section in raw:
        if section not in known:
            raise ConfigError(f"{section!s}: not a section of a training config")
    refuse_unsafe_values(raw)
    missing = [section for section in REQUIRED_SECTIONS if section not in raw]
    if missing:
        raise ConfigError(f"{missing[0]}: missing from the checkpoint's config")
    merged = {section: merged_section(section, value) for section, value in raw.items()}
    config = OmegaConf.create(merged)
    check_data(config.data)
    check_settings(config)
    OmegaConf.set_struct(config, True)
    return config


def refuse_unsafe_values(raw: Mapping[str, Any]) -> None:
    """Plain values only, no interpolation anywhere, Hydra's keys only as a part's top
    `_target_`; ConfigError naming the first offending key."""
    for section, value in raw.items():
        check_plain(value, str(section))
        if not isinstance(value, dict):
            continue
        for key in value:
            if key in HYDRA_KEYS and key != "_target_":
                raise ConfigError(f"{section}.{key}: Hydra's instantiate keys are not allowed")
        nested = nested_build_key(value, str(section))
        if nested is not None:
            raise ConfigError(f"{nested}: a nested _target_ (or another Hydra key) is not allowed")


def check_plain(value: Any, path: str) -> None:
    """Strings, numbers, booleans, null, lists and string-keyed mappings, without `${`."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str) or "${" in key:
                raise ConfigError(f"{path}: key {key!r} is not a plain name")
            check_plain(item, f"{path}.{key}")
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            check_plain(item, f"{path}[{index}]")
    elif not isinstance(value, SCALARS):
        raise ConfigError(f"{path}: a value of type {type(value).__name__} is not allowed")
    elif isinstance(value, str) and "${" in value:
        raise ConfigError(f"{path}: interpolations (${{...}}) are not allowed in a checkpoint")


def schema_for(section: str, value: Any) -> type | None:
    """The dataclass a section merges into; None for the top-level `name` string."""
    if section in FIXED_SCHEMAS:
        return FIXED_SCHEMAS[section]
    if section == "name":
        return None
    _, schema = allowed_target(value, section)
    return schema


def merged_section(section: str, value: Any) -> Any:
    """`value` merged into the section's schema: unknown keys and wrong types refused."""
    schema = schema_for(section, value)
    if schema is None:
        if not isinstance(value, str):
            raise ConfigError(f"{section}: a string was expected, got {value!r}")
        return value
    if not isinstance(value, dict):
        raise ConfigError(f"{section}: a mapping was expected, got {type(value).__name__}")
    try:
        return OmegaConf.merge(OmegaConf.structured(schema), OmegaConf.create(value))
    except OmegaConfBaseException as error:
        key = getattr(error, "full_key", "") or ""
        message = getattr(error, "msg", str(error)).splitlines()[0]
        raise ConfigError(
            f"{section}.{key}: {message}" if key else f"{section}: {message}"
        ) from error


def check_data(node: DictConfig) -> None:
    """`DataConfig`'s own checks (names without separators, URL schemes, sizes)."""
    try:
        DataConfig.from_mapping(OmegaConf.to_container(node, resolve=False))
    except ValueError as error:
        raise ConfigError(str(error)) from error
