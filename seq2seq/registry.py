"""One identity per component: its name, schema, builder and FLOP formula, registered once.

A component is one choice of a config group: an attention score (`dot`, ...), an attention
region (`soft`, ...), an attention class, an encoder or decoder family or a learning-rate
schedule (every one, with its options and FLOP formula: the site's reference,
docs/reference/components.md, generated from this registry). Its class registers it with
a decorator (the fairseq pattern), and everything else (the model builder, the Hydra
schemas, the FLOP counts, run titles, the trainer, the tests) looks it up here instead of
matching strings::

    @registry.register("score", "dot")     # its FLOP formula: the static method `flops`
    class DotScore(DotProductScore): ...

    registry.get("score", "dot").builder   # DotScore
    registry.get("score", "additive").options   # AdditiveOptions: its node's keys, checked
    registry.names("score")                # ("dot", "scaled_dot", "general", ...)
    registry.of_node("encoder", cfg.encoder).name   # "rnn", by the node's exact `_target_`

What each group's `flops` formula takes (every count is matrix-product FLOPs, see
`seq2seq.flops`; `node` is a part's config as a plain mapping):

* score:     `flops(rows, queries, keys, width, **options)`: `rows` = batch·heads blocks of
  `queries` × `keys` pairs, per-head width `width`; `options` are the fields of its options
  dataclass, with the node's values.
* region:    `flops(query_rows, width, **options)`: products of its own over the scores.
* attention: `flops(node, batch, queries, keys, dim)`: one attention layer, all widths `dim`.
* encoder:   `flops(node, embed_dim, batch, src_len)`.
* decoder:   `flops(node, embed_dim, batch, tgt_len)` → (its own FLOPs, the number of
  attention layers over the source it runs).
* schedule:  none (a schedule computes no products).

This module imports nothing of seq2seq: it is the bottom layer, a plain table that goes
looking for nothing. The modules that register the built-ins are listed in one module near
the top, `seq2seq.built_ins`; importing it fills the table and opens it for lookups
(`built_ins_loaded`). The entry points import it first: the command lines, the contract
suite (`seq2seq.testing`) and the workshop (`tools`). A lookup before that is
`BuiltInsNotLoaded`, one line saying to import it, rather than an answer missing the
built-ins. A new class in a module listed there joins with no edit; a new registering
module is one line there (tests/test_built_ins.py checks that none is missing).

A user's classes join through a plugin (`seq2seq.plugins`): its modules are imported inside
`plugin_import(spec)`, so each component knows where it came from (`Component.plugin`:
None for a built-in) and an error or a checkpoint can name its plugin.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

# The model's parts and schedules, then the seams of a run: `source` (a data.source.name,
# seq2seq.data.sources), `metric` (a validation metric and its direction, seq2seq.metrics)
# and `hook` (a validation hook class, seq2seq.training.hooks); these three count no FLOPs.
GROUPS = (
    "score", "region", "attention", "encoder", "decoder", "schedule", "source", "metric", "hook"
)  # fmt: skip
# Groups whose components are whole config nodes, named by their `_target_`.
NODE_GROUPS = ("attention", "encoder", "decoder", "schedule")
# The module that imports every built-in component (module docstring).
BUILT_INS_MODULE = "seq2seq.built_ins"


@dataclass(frozen=True)
class Component:
    """One registered choice of a group."""

    group: str  # one of GROUPS
    name: str  # "additive", "local", "none", "rnn", "transformer", "cosine", ...
    builder: type  # the class that is built
    schema: type | None  # dataclass of its config node; None for score and region
    flops: Callable[..., Any] | None  # its FLOP formula (module docstring), None for schedules
    # Score and region: the dataclass of its options (`seq2seq.option_rules`), whose fields
    # are the keys of its node `attention.score` / `attention.region` beside `name` and the
    # keyword arguments of its builder; None for one without options.
    options: type | None = None
    # Where it came from: None for a built-in (its class's module is under `seq2seq.`), the
    # spec of the plugin whose import registered it (`seq2seq.plugins`), else its module.
    plugin: str | None = None

    @property
    def origin(self) -> str:
        """`built-in` or `plugin 'lab/scores.py'`, for messages."""
        return "built-in" if self.plugin is None else f"plugin {self.plugin!r}"

    @property
    def described(self) -> str:
        """`score 'dot' (built-in, seq2seq.models.attention.scores.DotScore)`."""
        where = f"{self.builder.__module__}.{self.builder.__qualname__}"
        return f"{self.group} {self.name!r} ({self.origin}, {where})"

    @property
    def target(self) -> str | None:
        """The `_target_` that names it in a config node (its schema's default), or None."""
        return getattr(self.schema, "_target_", None)


class UnknownComponent(ValueError):
    """A name or `_target_` that no component of the group has; the message lists them."""


class BuiltInsNotLoaded(RuntimeError):
    """A lookup before `seq2seq.built_ins` registered the built-ins."""


_registry: dict[str, dict[str, Component]] = {group: {} for group in GROUPS}
_state = {"loaded": False}  # True once `seq2seq.built_ins` has imported every built-in
_importing: list[str] = []  # the specs of the plugins being imported, innermost last


def register(
    group: str,
    name: str,
    *,
    schema: type | None = None,
    flops: Callable[..., Any] | None = None,
    options: type | None = None,
) -> Callable[[type], type]:
    """Class decorator: register the class as component `name` of `group`.

    A score or region gives the dataclass of its options (`options=LocalOptions`), if it
    has any. `flops` may be omitted when the class has a `flops` static method (or
    classmethod), which is then the formula. A name (or a schema `_target_`) taken in the group is a
    ValueError naming both components and where each came from (`Component.origin`).
    """

    def decorate(builder: type) -> type:
        _check_group(group)
        formula = flops if flops is not None else getattr(builder, "flops", None)
        component = Component(group, name, builder, schema, formula, options, _plugin_of(builder))
        _check_free(component)
        _registry[group][name] = component
        return builder

    return decorate


def _plugin_of(builder: type) -> str | None:
    """None for a class of the package; else the plugin being imported, or its module."""
    module = builder.__module__
    if module == "seq2seq" or module.startswith("seq2seq."):
        return None
    return _importing[-1] if _importing else module


def _check_free(component: Component) -> None:
    """ValueError when the group has the name, or (for a part) the `_target_`, already."""
    taken = _registry[component.group].get(component.name)
    if taken is None and component.target is not None:
        same = [c for c in _registry[component.group].values() if c.target == component.target]
        taken = same[0] if same else None
    if taken is not None:
        raise ValueError(
            f"{component.described} clashes with {taken.described}, registered already"
        )


@contextmanager
def plugin_import(spec: str) -> Iterator[None]:
    """Components registered inside are the plugin `spec`'s (`Component.plugin`). The
    built-ins must be in already (`seq2seq.built_ins`), so that a plugin reusing a name
    clashes with them."""
    _check_loaded()
    _importing.append(spec)
    try:
        yield
    finally:
        _importing.pop()


def unregister_plugin(spec: str) -> list[Component]:
    """Remove every component the plugin `spec` registered; returns them."""
    removed = [c for group in GROUPS for c in _registry[group].values() if c.plugin == spec]
    for component in removed:
        del _registry[component.group][component.name]
    return removed


def unregister(group: str, name: str) -> Component:
    """Remove a component (for tests that register a throwaway one); returns it."""
    _check_loaded()
    _check_group(group)
    if name not in _registry[group]:
        raise _unknown(group, name)
    return _registry[group].pop(name)


def get(group: str, name: str) -> Component:
    """The component `name` of `group`; UnknownComponent lists the group's names."""
    _check_loaded()
    _check_group(group)
    if name not in _registry[group]:
        raise _unknown(group, name)
    return _registry[group][name]


def names(group: str) -> tuple[str, ...]:
    """The names of a group, in registration order."""
    return tuple(component.name for component in components(group))


def components(group: str) -> tuple[Component, ...]:
    """The components of a group, in registration order."""
    _check_loaded()
    _check_group(group)
    return tuple(_registry[group].values())


def of_node(group: str, node: Mapping[str, Any]) -> Component:
    """The component whose `_target_` is exactly the node's (a mapping: a config node)."""
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


def built_ins_loaded(module_order: Mapping[str, Sequence[str]]) -> None:
    """Open the table for lookups: called by `seq2seq.built_ins` once it has imported
    every module that registers a built-in. `module_order` gives, per group, the modules'
    names in the order their components are offered (in messages and the reference), so
    that the order does not depend on the order of the imports; within a module, the
    order of its source."""
    for group, modules in module_order.items():
        rank = {module: place for place, module in enumerate(modules)}
        table = _registry[group]
        ordered = sorted(
            table.values(), key=lambda c: rank.get(c.builder.__module__, len(rank))
        )  # sorted() is stable: a module's components keep their order
        table.clear()
        table.update((component.name, component) for component in ordered)
    _state["loaded"] = True


def _check_loaded() -> None:
    if not _state["loaded"]:
        raise BuiltInsNotLoaded(
            f"no built-in component is registered yet: import {BUILT_INS_MODULE} first (the "
            "command lines and seq2seq.testing do) to register them before a lookup"
        )
