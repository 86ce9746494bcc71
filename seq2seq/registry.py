"""One identity per component: its name, schema, builder and FLOP formula, registered once.

A component is one choice of a config group: an attention score (`dot`, `additive`, ...),
an attention region (`soft`, `sparsemax`, `entmax15`, `hard`, `local`), an attention class
(`attention`, `none`), an encoder or decoder family (`rnn`, `cnn`, `transformer`) or a
learning-rate schedule (`inverse_sqrt`, `cosine`, `plateau`). Its class registers it with a decorator (the
fairseq pattern), and everything else (the model builder, the Hydra schemas, the FLOP
counts, run titles, the trainer, the tests) looks it up here instead of matching strings::

    @registry.register("score", "dot")     # its FLOP formula: the static method `flops`
    class DotScore(DotProductScore): ...

    registry.get("score", "dot").builder   # DotScore
    registry.names("score")                # ("dot", "scaled_dot", "general", ...)
    registry.of_node("encoder", cfg.encoder).name   # "rnn", by the node's exact `_target_`

What each group's `flops` formula takes (every count is matrix-product FLOPs, see
`seq2seq.flops`; `node` is a part's config as a plain mapping):

* score:     `flops(rows, queries, keys, width, **options)`: `rows` = batch·heads blocks of
  `queries` × `keys` pairs, per-head width `width`; `options` are its `options` keys.
* region:    `flops(query_rows, width, **options)`: products of its own over the scores.
* attention: `flops(node, batch, queries, keys, dim)`: one attention layer, all widths `dim`.
* encoder:   `flops(node, embed_dim, batch, src_len)`.
* decoder:   `flops(node, embed_dim, batch, tgt_len)` → (its own FLOPs, the number of
  attention layers over the source it runs).
* schedule:  none (a schedule computes no products).

This module imports nothing of seq2seq at the top: it is the bottom layer. The modules
that register (every module of `seq2seq.models` and `seq2seq.training.schedules`) are
imported on the first lookup, so a lookup always sees every component; a new class in any
of them is found with no list to edit.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

GROUPS = ("score", "region", "attention", "encoder", "decoder", "schedule")
# Groups whose components are whole config nodes, named by their `_target_`.
NODE_GROUPS = ("attention", "encoder", "decoder", "schedule")
# Imported before the first lookup: packages with every module below them, or modules.
REGISTERING = ("seq2seq.models", "seq2seq.training.schedules")


@dataclass(frozen=True)
class Component:
    """One registered choice of a group."""

    group: str  # one of GROUPS
    name: str  # "additive", "local", "none", "rnn", "transformer", "cosine", ...
    builder: type  # the class that is built
    schema: type | None  # dataclass of its config node; None for score and region
    flops: Callable[..., Any] | None  # its FLOP formula (module docstring), None for schedules
    options: tuple[str, ...] = ()  # score and region: the AttentionConfig keys it reads

    @property
    def target(self) -> str | None:
        """The `_target_` that names it in a config node (its schema's default), or None."""
        return getattr(self.schema, "_target_", None)

    def chosen(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """The entries of `options` (AttentionConfig keys and values) that it reads."""
        return {key: options[key] for key in self.options if key in options}


class UnknownComponent(ValueError):
    """A name or `_target_` that no component of the group has; the message lists them."""


_registry: dict[str, dict[str, Component]] = {group: {} for group in GROUPS}
_state = {"loaded": False, "loading": False}


def register(
    group: str,
    name: str,
    *,
    schema: type | None = None,
    flops: Callable[..., Any] | None = None,
    options: tuple[str, ...] = (),
) -> Callable[[type], type]:
    """Class decorator: register the class as component `name` of `group`.

    `flops` may be omitted when the class has a `flops` static method (or classmethod),
    which is then the formula. A name taken in the group is a ValueError.
    """

    def decorate(builder: type) -> type:
        _check_group(group)
        if name in _registry[group]:
            raise ValueError(f"{group} {name!r} is registered already")
        formula = flops if flops is not None else getattr(builder, "flops", None)
        _registry[group][name] = Component(group, name, builder, schema, formula, tuple(options))
        return builder

    return decorate


def unregister(group: str, name: str) -> Component:
    """Remove a component (for tests that register a throwaway one); returns it."""
    _load()
    _check_group(group)
    if name not in _registry[group]:
        raise _unknown(group, name)
    return _registry[group].pop(name)


def get(group: str, name: str) -> Component:
    """The component `name` of `group`; UnknownComponent lists the group's names."""
    _load()
    _check_group(group)
    if name not in _registry[group]:
        raise _unknown(group, name)
    return _registry[group][name]


def names(group: str) -> tuple[str, ...]:
    """The names of a group, in registration order."""
    return tuple(component.name for component in components(group))


def components(group: str) -> tuple[Component, ...]:
    """The components of a group, in registration order."""
    _load()
    _check_group(group)
    return tuple(_registry[group].values())


def of_node(group: str, node: Mapping[str, Any]) -> Component:
    """The component whose `_target_` is exactly the node's (a DictConfig or a plain dict)."""
    if group not in NODE_GROUPS:
        raise ValueError(f"{group} components have no config node of their own")
    target = node.get("_target_")
    for component in components(group):
        if component.target == target:
            return component
    known = ", ".join(str(component.target) for component in components(group))
    raise UnknownComponent(f"{group}._target_ must be one of ({known}), got {target!r}")


def _check_group(group: str) -> None:
    if group not in GROUPS:
        raise UnknownComponent(f"group must be one of {GROUPS}, got {group!r}")


def _unknown(group: str, name: str) -> UnknownComponent:
    return UnknownComponent(f"{group} must be one of {tuple(_registry[group])}, got {name!r}")


def _load() -> None:
    """Import every registering module, once (a lookup made while they are being imported
    sees what is registered so far)."""
    if _state["loaded"] or _state["loading"]:
        return
    _state["loading"] = True
    try:
        for name in REGISTERING:
            module = importlib.import_module(name)
            for info in pkgutil.walk_packages(getattr(module, "__path__", []), f"{name}."):
                importlib.import_module(info.name)
    finally:
        _state["loading"] = False
    _state["loaded"] = True
