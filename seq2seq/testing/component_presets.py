"""The YAML presets a component is checked with: the package's and the user's, composed once.

A preset is a file `<group>/<preset>.yaml` of the package's configs (`seq2seq.configs`) or
of the user's config folder (`--config-dir`, searched after the package's, as
`hydra.searchpath` does for `seq2seq-train`). Every preset is composed as `seq2seq-train`
composes it (`train.yaml` with `<group>=<preset>`), so the schema checks it; a `Catalog`
keeps each composed config, or the error composing it raised, for the checks that follow.

Which presets belong to a component:

* an encoder, decoder or attention class: the presets of its group whose node's `_target_`
  is the component's (its schema's default);
* a score or a region: the `attention` presets whose `attention.score` (or `.region`) names
  it (a bare name or a node `{name, ...}`).

Its primary preset, used for the model-level checks, is the one named after the component
if that is among them (`attention/cosine.yaml` for the score `cosine`), else the first by
name.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_module
from omegaconf import DictConfig

from seq2seq import registry
from seq2seq.bounded_files import read_yaml
from seq2seq.config.build import plain
from seq2seq.config.schema import register_configs
from seq2seq.configs import config_files
from seq2seq.folder_walk import walk_folders
from seq2seq.models.attention.options import component_name

log = logging.getLogger(__name__)
CONFIG_MODULE = "seq2seq.configs"
OPTION_GROUPS = ("score", "region")  # chosen inside an attention node, not by a group of their own


def preset_group(group: str) -> str:
    """The config group whose presets choose a component of `group`."""
    return "attention" if group in OPTION_GROUPS else group


def check_user_presets(config_dir: Path) -> None:
    """Read every YAML file of the user's config folder within bounds before Hydra composes
    any (Hydra's loader expands aliases): StructuredFileError naming the first that is too
    big, holds an alias, nests too deep or is not YAML (`seq2seq.bounded_files`)."""
    walk = walk_folders(config_dir)
    if walk.skipped:
        log.warning("%s: %s", config_dir, walk.summary())
    for file in walk.files:
        if file.suffix in (".yaml", ".yml"):
            read_yaml(file)


class Catalog:
    """The presets of the package and of `config_dir`, each composed at most once."""

    def __init__(self, config_dir: str | Path | None = None):
        # realpath, not Path.resolve: a folder that is a link loop must not raise RuntimeError
        self.config_dir = None if config_dir is None else Path(os.path.realpath(config_dir))
        if self.config_dir is not None and not self.config_dir.is_dir():
            raise FileNotFoundError(f"config folder {self.config_dir} does not exist")
        if self.config_dir is not None:
            check_user_presets(self.config_dir)
        self._composed: dict[tuple[str, str], DictConfig | Exception] = {}
        register_configs()  # the schemas of every component registered by now

    def compose(self, overrides: list[str]) -> DictConfig:
        """`train.yaml` with `overrides`, the user's folder on the search path."""
        search = [] if self.config_dir is None else [f"hydra.searchpath=[file://{self.config_dir}]"]
        with initialize_config_module(config_module=CONFIG_MODULE, version_base="1.3"):
            return compose(config_name="train", overrides=[*overrides, *search])

    def files(self, group: str) -> dict[str, str]:
        """Preset name -> the file that defines it (the package's first, as Hydra finds them)."""
        found = {entry.name.removesuffix(".yaml"): str(entry) for entry in config_files(group)}
        if self.config_dir is not None:
            for path in sorted((self.config_dir / group).glob("*.yaml")):
                found.setdefault(path.stem, str(path))
        return found

    def config(self, group: str, preset: str) -> DictConfig:
        """The whole train config composed with `<group>=<preset>` (the composition error
        is raised again on every call)."""
        key = (group, preset)
        if key not in self._composed:
            try:
                self._composed[key] = self.compose([f"{group}={preset}"])
            except Exception as error:  # noqa: BLE001 - kept, and raised to each caller
                self._composed[key] = error
        composed = self._composed[key]
        if isinstance(composed, Exception):
            raise composed
        return composed

    def node(self, group: str, preset: str) -> dict[str, Any]:
        """The preset's node of `group`, as plain Python (enums as names)."""
        return plain(self.config(group, preset)[group])

    def presets_of(self, component: registry.Component) -> list[str]:
        """The presets that choose `component` (module docstring), by name; presets that do
        not compose are left out here (the config check reports them)."""
        group = preset_group(component.group)
        chosen = []
        for preset in sorted(self.files(group)):
            try:
                node = self.node(group, preset)
            except Exception:  # noqa: BLE001 - not composable: not this component's
                continue
            if chooses(node, component):
                chosen.append(preset)
        return chosen

    def primary(self, component: registry.Component) -> str | None:
        """The preset named after the component if it chooses it, else the first that does."""
        presets = self.presets_of(component)
        if component.name in presets:
            return component.name
        return presets[0] if presets else None


def chooses(node: dict[str, Any], component: registry.Component) -> bool:
    """Whether a composed node of the component's preset group chooses the component."""
    if component.group in OPTION_GROUPS:
        value = node.get(component.group)
        try:
            return value is not None and component_name(value) == component.name
        except ValueError:
            return False
    return node.get("_target_") == component.target
