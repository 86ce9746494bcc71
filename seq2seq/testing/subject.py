"""The component under test, put in place: its config nodes, its parts built alone, and a
tiny model around it.

Isolated checks build the component alone from its node (each preset that chooses it; for
a score or region, its node in the primary attention preset). Model-level checks build a
tiny `Seq2Seq` in which the other parts are fixed partners:

* encoder `gru`, one direction: the state at source position j holds symbol j and what
  came before, never what comes after, so a model that copies attends to position j
  itself (with two directions, the state at j - 1 also holds symbol j, and a decoder may
  learn to attend one position early: the copy is right, the diagonal is not);
* decoder `gru`, run Luong-style without input feeding: its teacher-forced pass attends
  with all target positions in one call and a step with one, so a score, region or
  attention whose result depends on how many queries it gets fails the incremental
  check; it is also the fastest recurrent decoder to train;
* attention `additive`.
* A score or region goes into its primary attention preset (or `additive`), in place of
  that preset's own score or region.

Sizes are tiny and odd where they can be (widths 12 for the checks, 32 for the learning
run): every `hidden_size` is the width, `ff_size` twice it, `num_layers` at most the
given depth, and every key ending in `dropout` 0, so that a run is deterministic. A
user's component with other size keys keeps its preset's values for them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from omegaconf import DictConfig, OmegaConf

from seq2seq import registry
from seq2seq.config.build import build_model, instantiate_part, plain
from seq2seq.models.attention.options import component_node
from seq2seq.models.model import Seq2Seq
from seq2seq.testing.component_presets import OPTION_GROUPS, Catalog, preset_group

# The tiny model of an attention that reads the source's sentences is trained on documents:
# its random sources hold the separator SEP_ID (a real token id of the checks' inputs), so
# every check also runs with several sentences per source.
DOCUMENTS = {"min_sentences": 1, "max_sentences": 6, "order": "consecutive"}

PARTNERS = {"encoder": "gru", "decoder": "gru", "attention": "additive"}  # preset names
PARTNER_ENCODER = {"bidirectional": False}
PARTNER_DECODER = {"style": "luong", "input_feeding": False}
CHECK_WIDTH = 12  # divisible by 1, 2, 3, 4 and 6 heads
CHECK_LAYERS = 2  # two layers: a cache or state kept per layer is exercised


@dataclass
class Subject:
    """One registered component, the options it is checked with, and where its presets are."""

    component: registry.Component
    catalog: Catalog
    options: dict[str, Any] = field(default_factory=dict)
    # Results that depend only on a model config, shared by the subjects of one run (a
    # score, a region and an attention class checked in the same tiny model train it once).
    memo: dict[str, Any] = field(default_factory=dict)

    @property
    def group(self) -> str:
        return self.component.group

    @property
    def name(self) -> str:
        return self.component.name

    @functools.cached_property
    def presets(self) -> list[str]:
        """The presets that choose the component (`Catalog.presets_of`)."""
        return self.catalog.presets_of(self.component)

    @functools.cached_property
    def primary(self) -> str | None:
        return self.catalog.primary(self.component)

    # ------------------------------------------------------------ config nodes

    def nodes(self) -> list[tuple[str, dict[str, Any]]]:
        """(where, node) for an encoder, decoder or attention class: each preset that
        builds it, the primary first, or its schema's defaults when there is none; the
        options are laid over each."""
        if self.group in OPTION_GROUPS:
            raise ValueError(f"a {self.group} has no node of its own: see option_node")
        ordered = sorted(self.presets, key=lambda preset: preset != self.primary)
        group = self.group
        found = [(f"{group}/{p}.yaml", self.catalog.node(group, p)) for p in ordered]
        if not found:
            found = [("its schema's defaults", schema_defaults(self.component.schema))]
        return [(where, {**node, **self.options}) for where, node in found]

    def option_node(self) -> dict[str, Any]:
        """A score's or region's full node `{name, **options}`: its options in the primary
        preset, with the given options laid over them, checked (OptionError otherwise)."""
        base = {} if self.primary is None else self._preset_attention()[self.group]
        given = base if isinstance(base, dict) else {}
        merged = {**given, **self.options, "name": self.name}
        return component_node(self.group, merged, f"attention.{self.group}")

    def attention_node(self) -> dict[str, Any]:
        """The attention node a score or region is checked in: its primary preset's (or the
        partner's), its own node in place."""
        node = self._preset_attention() if self.primary else self._partner("attention")
        return {**node, self.group: self.option_node()}

    def _preset_attention(self) -> dict[str, Any]:
        return self.catalog.node("attention", self.primary)

    def _partner(self, group: str) -> dict[str, Any]:
        return self.catalog.node(group, PARTNERS[group])

    def part_nodes(self) -> dict[str, dict[str, Any]]:
        """The encoder, decoder and attention nodes of the tiny model."""
        parts = {group: self._partner(group) for group in PARTNERS}
        parts["encoder"] = {**parts["encoder"], **PARTNER_ENCODER}
        parts["decoder"] = {**parts["decoder"], **PARTNER_DECODER}
        if self.group in OPTION_GROUPS:
            parts["attention"] = self.attention_node()
        else:
            parts[self.group] = self.nodes()[0][1]
        return parts

    # ------------------------------------------------------------ builds

    def model_config(self, width: int = CHECK_WIDTH, layers: int = CHECK_LAYERS) -> DictConfig:
        """The whole train config of the tiny model (module docstring)."""
        config = plain(self.catalog.config(preset_group("attention"), PARTNERS["attention"]))
        for group, node in self.part_nodes().items():
            config[group] = tiny(node, width, layers)
        config["model"].update(embed_dim=width, embed_dropout=0.0, tie_embeddings=False)
        if getattr(registry.of_node("attention", config["attention"]).builder,
                   "reads_sentences", False):  # fmt: skip
            config["data"]["documents"] = dict(DOCUMENTS)  # SEP_ID cuts the sources
        return OmegaConf.create(config)

    def model(self, vocab: int, width: int = CHECK_WIDTH, layers: int = CHECK_LAYERS) -> Seq2Seq:
        """The tiny model, built as `seq2seq-train` builds it, in eval mode."""
        return build_model(self.model_config(width, layers), vocab, vocab).eval()

    def parts(self) -> list[tuple[str, dict[str, Any], Any]]:
        """(where, node, module) for an encoder, decoder or attention class: the component
        built alone from each of its nodes at the check sizes (`tiny`), in eval mode."""
        built = []
        for where, node in self.nodes():
            node = tiny(node, CHECK_WIDTH, CHECK_LAYERS)
            built.append((where, node, self.build(node).eval()))
        return built

    def build(self, node: dict[str, Any]) -> Any:
        """The component alone from `node`, with the sizes the model builder would pass:
        an attention over keys and values of the check width, an encoder of embeddings of
        that width, a decoder with the partner attention."""
        width = CHECK_WIDTH
        if self.group == "attention":
            return build_part("attention", node, query_dim=width, key_dim=width, value_dim=width)
        if self.group == "encoder":
            return build_part("encoder", node, embed_dim=width)
        attention_node = tiny(self._partner("attention"), width, CHECK_LAYERS)
        attention = build_part("attention", attention_node, _partial_=True)
        return build_part("decoder", node, embed_dim=width, attention=attention)

    def modules(self, model: Seq2Seq) -> list[Any]:
        """The component's own modules inside a model (every instance of its class)."""
        return [module for module in model.modules() if type(module) is self.component.builder]


def tiny(node: dict[str, Any], width: int, layers: int) -> dict[str, Any]:
    """A part's node at tiny sizes and without dropout (module docstring)."""
    sized = dict(node)
    if "hidden_size" in sized:
        sized["hidden_size"] = width
    if "ff_size" in sized:
        sized["ff_size"] = 2 * width
    if isinstance(sized.get("num_layers"), int):
        sized["num_layers"] = min(sized["num_layers"], layers)
    for key in sized:
        if key.endswith("dropout"):
            sized[key] = 0.0
    return sized


def schema_defaults(schema: type) -> dict[str, Any]:
    """A part's schema as a node of its defaults (enums as names)."""
    return plain(OmegaConf.structured(schema))


def build_part(group: str, node: dict[str, Any], **sizes: Any) -> Any:
    """An encoder, decoder or attention class built from its node, as the model builder
    does (the allow-list, then the constructor with the sizes it passes)."""
    return instantiate_part(node, group, **sizes)
