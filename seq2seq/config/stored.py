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
  classes of that group (`seq2seq.config.schema.buildable_classes`), whose schema it is then
  merged into: a key the schema lacks or a value of the wrong type is refused;
- every other section merges into its schema (`DataConfig`, `ModelConfig`,
  `TrainerConfig`, `LoggingConfig`, `AlignmentConfig`; `plugins` is a short list of
  printable strings, shown but never imported), the data section passes
  `DataConfig.validate`, and the whole passes the range checks of training
  (`seq2seq.config.value_checks`), the attention's score and region nodes those of their
  options dataclasses. A checkpoint written before a section existed (`alignment`) gets
  that section's defaults.

Every migration of a config written by older code is here, applied to a checkpoint's
config, to a run folder's `.hydra/config.yaml` (`seq2seq.study.reading`) and to the old keys
of a command line (`seq2seq.cli.hydra_places`), before anything is checked:

- before each score and region had its own options, they were flat beside the names
  (`score: local`, `window: 3`, `local_mode`, ...): `migrate_flat_attention` moves the keys
  the chosen score and region read into their nodes (`region: {name: local, window: 3,
  mode: ...}`) and drops the others, which no component read;
- before each data source had its own options, they were flat in `data` (`kind: parallel`,
  `url`, `toy_task`, ...): `migrate_flat_data` moves the keys the chosen source reads into
  its node `data.source` under their new names (`seq2seq.data.settings.MOVED_KEYS`:
  `source: {name: tabular, url: ...}`, `toy_task` -> `source.task`) and drops the others,
  which no source read; `renamed_override` renames such a key on a command line.

`current_layout` applies them and completes the nodes (every option).

Every refusal is one `ConfigError` whose message starts with the offending key
(`encoder.dropout: ...`).
"""

from __future__ import annotations

import dataclasses
import difflib
import re
from collections.abc import Collection, Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

from seq2seq import registry
from seq2seq.checkpoint import MAX_PLUGIN_TEXT, MAX_PLUGINS
from seq2seq.config.build import ConfigError, allowed_target, plain
from seq2seq.config.schema import (
    BUILDABLE_GROUPS,
    HYDRA_KEYS,
    AlignmentConfig,
    LoggingConfig,
    ModelConfig,
    TrainerConfig,
    nested_build_key,
)
from seq2seq.config.value_checks import check_settings, option_nodes
from seq2seq.data.settings import MOVED_KEYS, RENAMED_SOURCES, DataConfig, source_node

# Sections merged into one fixed schema; the buildable groups choose theirs by `_target_`.
FIXED_SCHEMAS: dict[str, type] = {
    "data": DataConfig,
    "model": ModelConfig,
    "trainer": TrainerConfig,
    "logging": LoggingConfig,
    "alignment": AlignmentConfig,
}
# Sections added after checkpoints were first written: one that lacks them gets the default.
DEFAULTED_SECTIONS = ("alignment",)
PLUGINS_SECTION = "plugins"  # the specs the run was given (`TrainConfig.plugins`), or []
# What a model needs to be rebuilt and to translate: a checkpoint without them is refused.
REQUIRED_SECTIONS = ("data", "encoder", "decoder", "attention", "model")
SCALARS = (str, int, float, bool, type(None))
# The old layout's flat attention keys, and where each went: (group, name) -> {flat: option}.
FLAT_KEYS = ("hidden_dim", "window", "local_mode", "gumbel_tau", "cosine_scale")
FLAT_OPTIONS = {
    ("score", "additive"): {"hidden_dim": "hidden_dim"},
    ("score", "cosine"): {"cosine_scale": "scale"},
    ("region", "hard"): {"gumbel_tau": "gumbel_tau"},
    ("region", "local"): {"window": "window", "local_mode": "mode"},
}
# A command-line override of a key of `data`: `[+|++|~]data.<key>[=<value>]`.
OLD_OVERRIDE = re.compile(
    r"(?P<prefix>~|\+\+|\+)?data\.(?P<key>\w+)(?P<equals>=?)(?P<value>.*)", re.S
)


def validated_config(raw: Any) -> DictConfig:
    """The checkpoint's config merged into the project's schemas, or a ConfigError."""
    if not isinstance(raw, dict):
        raise ConfigError(f"config: a mapping was expected, got {type(raw).__name__}")
    check_sections(raw)
    refuse_unsafe_values(raw)
    missing = [section for section in REQUIRED_SECTIONS if section not in raw]
    if missing:
        raise ConfigError(f"{missing[0]}: missing from the checkpoint's config")
    raw = current_layout(raw)
    merged = {section: merged_section(section, value) for section, value in raw.items()}
    for section in DEFAULTED_SECTIONS:
        merged.setdefault(section, OmegaConf.structured(FIXED_SCHEMAS[section]))
    merged.setdefault(PLUGINS_SECTION, [])
    config = OmegaConf.create(merged)
    check_data(config.data)
    check_settings(config)
    OmegaConf.set_struct(config, True)
    return config


def config_as_data(config: DictConfig) -> dict[str, Any]:
    """A validated config as plain data (resolved, enums as their names): what the layers
    below the door (search, align, visualise, ...) read, never the DictConfig itself."""
    return plain(config)


def current_layout(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A config (plain data) in the current layout (`migrated_layout`), the attention's
    score and region nodes and the data's source node complete (`value_checks.option_nodes`,
    `seq2seq.data.settings.source_node`; a ConfigError names a bad one)."""
    config = migrated_layout(raw)
    attention = config.get("attention")
    if isinstance(attention, Mapping):
        config["attention"] = {**attention, **option_nodes(attention)}
    data = config.get("data")
    if isinstance(data, Mapping) and "source" in data:
        try:
            config["data"] = {**data, "source": source_node(data["source"])}
        except ValueError as error:  # OptionError
            raise ConfigError(str(error)) from error
    return config


def migrated_layout(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A config (plain data) with every section of an older layout migrated (module
    docstring), the nodes left as they are written; the other sections as they are."""
    return {section: migrated_section(str(section), value) for section, value in raw.items()}


def migrated_section(section: str, value: Any) -> Any:
    """One section migrated from an older layout, if it is one (`MIGRATIONS`)."""
    migrate = MIGRATIONS.get(section)
    return migrate(value) if migrate is not None and isinstance(value, Mapping) else value


def migrate_flat_attention(attention: Mapping[str, Any]) -> dict[str, Any]:
    """An attention section of the old layout (score and region names, their options flat
    beside them) in the current one; any other section as it is. The flat keys the chosen
    score and region read move into their nodes, under their current names; the others
    are dropped (they were ignored). A section with a node and flat keys is not the old
    layout: it is left for the schema to refuse."""
    attention = dict(attention)
    flat = {key: attention.pop(key) for key in FLAT_KEYS if key in attention}
    if not flat or any(isinstance(attention.get(group), Mapping) for group in ("score", "region")):
        return {**attention, **flat}
    for group in ("score", "region"):
        name = attention.get(group)
        if isinstance(name, str):
            moved = FLAT_OPTIONS.get((group, name), {})
            options = {option: flat[old] for old, option in moved.items() if old in flat}
            attention[group] = {"name": name, **options}
    return attention


def migrate_flat_data(data: Mapping[str, Any]) -> dict[str, Any]:
    """A data section of the layout before `data.source` (its source's keys flat beside the
    others: `kind`, `url`, `toy_task`, ...) in the current one; any other section as it is.
    The keys the chosen source reads move into its node under their new names
    (`MOVED_KEYS`), `kind: parallel` naming the source `tabular`; the others are dropped
    (no source read them). A section with a `source` is not the old layout: it is left for
    the schema to refuse."""
    data = dict(data)
    if "source" in data or not any(key in data for key in MOVED_KEYS):
        return data
    old = {key: data.pop(key) for key in MOVED_KEYS if key in data}
    kind = old.pop("kind", "parallel")
    name = RENAMED_SOURCES.get(kind, kind) if isinstance(kind, str) else kind
    options = _source_options(name)
    node = {"name": name}
    for key, value in old.items():
        option = MOVED_KEYS[key].removeprefix("source.")
        if option in options:
            node[option] = value
    return {**data, "source": node}


def _source_options(name: Any) -> set[str]:
    """The option names of the registered source `name`; none for an unknown one."""
    try:
        schema = registry.get("source", name).options if isinstance(name, str) else None
    except registry.UnknownComponent:
        return set()
    return {item.name for item in dataclasses.fields(schema)} if schema is not None else set()


# The migration of each section that had an older layout (module docstring).
MIGRATIONS = {"attention": migrate_flat_attention, "data": migrate_flat_data}


def renamed_override(override: str) -> tuple[str, str | None]:
    """A command-line override of an old data key in the current layout, and the line
    that says so (None, and the override as it is, for any other):
    `data.toy_train_size=512` -> `data.source.train_size=512`, `data.kind=parallel` ->
    `data.source.name=tabular` (a sweep's values each)."""
    match = OLD_OVERRIDE.fullmatch(override)
    if match is None or match["key"] not in MOVED_KEYS:
        return override, None
    key, value = match["key"], match["value"]
    new_key = f"data.{MOVED_KEYS[key]}"
    if key == "kind" and value:
        value = ",".join(RENAMED_SOURCES.get(item, item) for item in value.split(","))
    renamed = f"{match['prefix'] or ''}{new_key}{match['equals']}{value}"
    old_text, new_text = (override, renamed) if key == "kind" else (f"data.{key}", new_key)
    return renamed, f"{old_text.lstrip('+~')} is now {new_text.lstrip('+~')}; using it"


def known_sections() -> set[str]:
    return set(FIXED_SCHEMAS) | set(BUILDABLE_GROUPS) | {"name", PLUGINS_SECTION}


def check_sections(raw: Mapping[str, Any]) -> None:
    """Every top-level key is a section of a training config."""
    known = known_sections()
    for section in raw:
        if section not in known:
            raise ConfigError(
                f"{section!s}: not a section of a training config{closest(str(section), known)}"
            )


def check_known_keys(cfg: DictConfig) -> None:
    """Refuse a key that no schema knows, however it came in: Hydra accepts a new key given
    with `+` (`+trainer.typo=1`) and the run would silently ignore it. Each section is merged
    into its schema as a checkpoint's is; the error names the key and its closest known name.
    """
    raw = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    check_sections(raw)
    for section, value in raw.items():
        merged_section(str(section), value)


def closest(key: str, known: Collection[str]) -> str:
    """` (did you mean X?)` for a known name near `key`, else ` (closest known: X)`."""
    return _suggestion(key, {name: name for name in known})


def _suggestion(name: str, known: Mapping[str, str]) -> str:
    """The text naming the entry of `known` (compared by its key) nearest `name`."""
    if not known:
        return ""
    near = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    if near:
        return f" (did you mean {known[near[0]]}?)"
    scores = {key: difflib.SequenceMatcher(None, name, key).ratio() for key in known}
    return f" (closest known: {known[max(sorted(scores), key=scores.__getitem__)]})"


def closest_key(path: str, known: Collection[str]) -> str:
    """`closest` among the known keys beside `path` (same parent), compared by last name."""
    parent, _, name = path.rpartition(".")
    siblings = {k.rpartition(".")[2]: k for k in known if k.rpartition(".")[0] == parent}
    return _suggestion(name, siblings)


def schema_keys(schema: type, prefix: str = "") -> list[str]:
    """The dotted key paths of a dataclass schema, nested dataclasses included."""
    keys = []
    for item in dataclasses.fields(schema):
        path = f"{prefix}{item.name}"
        keys.append(path)
        kind = item.type if isinstance(item.type, type) else None
        default = item.default_factory() if item.default_factory is not dataclasses.MISSING else None
        nested = kind if kind is not None and dataclasses.is_dataclass(kind) else type(default)
        if dataclasses.is_dataclass(nested):
            keys += schema_keys(nested, f"{path}.")
    return keys


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
    if section == PLUGINS_SECTION:
        return checked_plugin_specs(value)
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
        if isinstance(error, ConfigKeyError) and key:
            message += closest_key(f"{section}.{key}", [f"{section}.{k}" for k in schema_keys(schema)])
        raise ConfigError(
            f"{section}.{key}: {message}" if key else f"{section}: {message}"
        ) from error


def checked_plugin_specs(value: Any) -> list[str]:
    """The `plugins` list: at most MAX_PLUGINS printable strings (only shown: a checkpoint's
    specs are never imported, `seq2seq.checkpoint.check_plugins`)."""
    if not isinstance(value, list) or len(value) > MAX_PLUGINS:
        raise ConfigError(
            f"{PLUGINS_SECTION}: a list of at most {MAX_PLUGINS} strings was expected"
        )
    for index, spec in enumerate(value):
        if not isinstance(spec, str) or not spec.isprintable() or len(spec) > MAX_PLUGIN_TEXT:
            raise ConfigError(
                f"{PLUGINS_SECTION}[{index}]: a printable string of at most "
                f"{MAX_PLUGIN_TEXT} characters was expected"
            )
    return list(value)


def check_data(node: DictConfig) -> None:
    """`DataConfig`'s own checks (names without separators, URL schemes, sizes)."""
    try:
        DataConfig.from_mapping(OmegaConf.to_container(node, resolve=False))
    except ValueError as error:
        raise ConfigError(str(error)) from error
