"""How large the model of a config is, found before a byte of it is allocated.

A config value such as `encoder.num_layers=100000` or `encoder.max_positions=5000000`
describes a model of billions of numbers; building it would take the machine's memory
before any check could run. So the model is first built on PyTorch's `meta` device, whose
tensors have shapes and no storage, and measured there:

- `estimate_size(cfg, vocab)` counts its parameters, the entries of its state dict and
  its non-persistent buffers (tables recomputed at build time, such as the sinusoid
  positions), and finds its largest tensor. Stacks deeper than `EXACT_LAYERS` are not
  built layer by layer even on `meta` (a thousand Python modules take seconds): the model
  is built with 1 and 2 layers per stack and the count extrapolated,

      N(E, D) = N(1, 1) + (E - 1)·(N(2, 1) - N(1, 1)) + (D - 1)·(N(1, 2) - N(1, 1)),

  which is exact for stacks of equal layers (every family here: the first layer may differ
  from the rest, the second and later ones may not).
- `check_size_limit(cfg, vocab)` refuses a config whose parameters and recomputed buffers
  exceed `model.max_parameters`, naming the keys that make it large.
- `check_state_shapes(cfg, vocab, state)` compares the names and shapes of a meta model
  with a checkpoint's state dict and names the first that differs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from seq2seq import registry
from seq2seq.config.build import ConfigError, allowed_target, build_model, count_parameters
from seq2seq.config.schema import ModelConfig
from seq2seq.data.settings import DataConfig
from seq2seq.data.tokenizer import SymbolTokenizer

# Deeper stacks are measured by extrapolation from 1- and 2-layer builds (module docstring).
EXACT_LAYERS = 4
# Sections whose integer values change the model's size; the layer stacks among them.
SIZE_SECTIONS = ("model", "encoder", "decoder", "attention")
TOY_VOCAB_KEY = "data.source.vocab_size"  # the toy tasks' symbols
STACKS = ("encoder", "decoder")
BYTES_PER_ELEMENT = 4  # float32 weights
# A checkpoint's recomputed buffers may exceed its stored weights up to this many elements
# (64 MiB): a 1,024 x 256 sinusoid table is 262,144.
BUFFER_FLOOR = 2**24


@dataclass(frozen=True)
class Vocabulary:
    """The sizes of the two embedding tables, and the keys that set them."""

    src: int
    tgt: int
    src_key: str = "the source vocabulary"
    tgt_key: str = "the target vocabulary"


@dataclass(frozen=True)
class ModelSize:
    """What a config's model holds, counted on the meta device."""

    parameters: int  # trainable, tied weights once
    state_elements: int  # the entries of its state dict, as a checkpoint stores them
    buffer_elements: int  # non-persistent buffers, recomputed when the model is built
    largest_name: str
    largest_shape: tuple[int, ...]

    @property
    def elements(self) -> int:
        """Parameters plus recomputed buffers: what `model.max_parameters` bounds."""
        return self.parameters + self.buffer_elements

    def largest(self) -> str:
        numel = math.prod(self.largest_shape)
        shape = " x ".join(f"{size:,}" for size in self.largest_shape)
        return f"{self.largest_name} ({shape}, {_gib(numel)} in float32)"


def configured_vocabulary(data: DataConfig) -> Vocabulary:
    """The vocabulary sizes a run's data settings ask for, known before any data is read:
    the toy tasks' symbols, or the sentencepiece sizes (an upper bound of what is made)."""
    if data.source_name == "toy":
        size = SymbolTokenizer(data.source_options.vocab_size).vocab_size
        return Vocabulary(size, size, TOY_VOCAB_KEY, TOY_VOCAB_KEY)
    if data.joint_vocab:
        size = data.src_vocab_size
        return Vocabulary(size, size, "data.src_vocab_size", "data.src_vocab_size")
    return Vocabulary(
        data.src_vocab_size, data.tgt_vocab_size, "data.src_vocab_size", "data.tgt_vocab_size"
    )


# ---------------------------------------------------------------- measuring on meta


def meta_model(cfg: DictConfig, vocab: Vocabulary, layers: Mapping[str, int] | None = None):
    """The config's model on the meta device; `layers` overrides `<stack>.num_layers`."""
    config = cfg if not layers else _with_layers(cfg, layers)
    with torch.device("meta"):
        return build_model(config, vocab.src, vocab.tgt)


def measure(model: torch.nn.Module) -> ModelSize:
    """Counts of a (meta) model: parameters, state-dict entries, non-persistent buffers."""
    state = model.state_dict(keep_vars=True)
    persistent = set(state)
    buffers = [(name, b) for name, b in model.named_buffers() if name not in persistent]
    named = list(model.named_parameters()) + list(model.named_buffers())
    name, tensor = max(named, key=lambda item: item[1].numel())
    return ModelSize(
        parameters=count_parameters(model),
        state_elements=sum(value.numel() for value in state.values()),
        buffer_elements=sum(buffer.numel() for _, buffer in buffers),
        largest_name=name,
        largest_shape=tuple(tensor.shape),
    )


def estimate_size(cfg: DictConfig, vocab: Vocabulary) -> ModelSize:
    """The model's `ModelSize`, exact up to `EXACT_LAYERS` per stack, else extrapolated."""
    depth = {stack: _num_layers(cfg, stack) for stack in STACKS}
    if all(layers <= EXACT_LAYERS for layers in depth.values()):
        return measure(meta_model(cfg, vocab))
    base = {stack: 1 for stack in depth if depth[stack]}
    one = measure(meta_model(cfg, vocab, base))
    total = {key: getattr(one, key) for key in ("parameters", "state_elements", "buffer_elements")}
    largest = one
    for stack, layers in depth.items():
        if layers <= 1:
            continue
        two = measure(meta_model(cfg, vocab, {**base, stack: 2}))
        for key in total:
            total[key] += (layers - 1) * (getattr(two, key) - getattr(one, key))
        if math.prod(two.largest_shape) > math.prod(largest.largest_shape):
            largest = two
    return ModelSize(**total, largest_name=largest.largest_name, largest_shape=largest.largest_shape)


def _num_layers(cfg: DictConfig, stack: str) -> int:
    node = cfg.get(stack)
    value = node.get("num_layers") if node is not None else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _with_layers(cfg: DictConfig, layers: Mapping[str, int]) -> DictConfig:
    copy = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))
    for stack, count in layers.items():
        copy[stack]["num_layers"] = count
    return copy


# ---------------------------------------------------------------- the limit


def check_size_limit(cfg: DictConfig, vocab: Vocabulary) -> ModelSize:
    """Refuse a model above `model.max_parameters` (parameters and recomputed buffers),
    naming the values that make it large; returns the size when it fits. A config that
    cannot be built at all is a ConfigError from the builder, also before any allocation."""
    size = estimate_size(cfg, vocab)
    limit = int(cfg.model.get("max_parameters", ModelConfig.max_parameters))
    if size.elements <= limit:
        return size
    causes = ", ".join(large_values(cfg, vocab, size, limit)) or "its sizes"
    raise ConfigError(
        f"model.max_parameters: this model would hold {size.elements:,} parameters and "
        f"buffer elements ({_gib(size.elements)} in float32; largest tensor "
        f"{size.largest()}), above the limit of {limit:,}; the cause: {causes}. Lower "
        f"these, or raise model.max_parameters if the machine has the memory"
    )


def large_values(cfg: DictConfig, vocab: Vocabulary, size: ModelSize, limit: int) -> list[str]:
    """`key=value (default D)` for the values that make the model large: those whose
    default alone brings it under `limit`, else the two whose default shrinks it most."""
    shrunk = []
    for key, value, default in size_values(cfg, vocab):
        smaller = _size_with(cfg, vocab, key, default)
        if smaller is not None and smaller < size.elements:
            shrunk.append((smaller, f"{key}={value:,} (default {default:,})"))
    shrunk.sort()
    under = [text for elements, text in shrunk if elements <= limit]
    return under or [text for _, text in shrunk[:2]]


def size_values(cfg: DictConfig, vocab: Vocabulary) -> list[tuple[str, int, int]]:
    """(key, value, schema default) of every integer model setting above its default."""
    found = []
    for section in SIZE_SECTIONS:
        node = cfg.get(section)
        if node is None:
            continue
        defaults = _schema_defaults(section, node)
        for key, value in node.items():
            default = defaults.get(key)
            if _is_int(value) and _is_int(default) and value > default:
                found.append((f"{section}.{key}", value, default))
    for side in ("src", "tgt"):
        key, value = getattr(vocab, f"{side}_key"), getattr(vocab, side)
        default = _vocab_default(key)
        if key.startswith("data.") and default is not None and value > default:
            found.append((key, value, default))
    return found


def _size_with(cfg: DictConfig, vocab: Vocabulary, key: str, value: int) -> int | None:
    """The model's element count with `key` set to `value`; None when it cannot be built."""
    if key.startswith("data."):
        side = "src" if key == vocab.src_key else "tgt"
        smaller = Vocabulary(**{**vocab.__dict__, side: value})
        config = cfg
    else:
        section, name = key.split(".", 1)
        config = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True, enum_to_str=True))
        config[section][name] = value
        smaller = vocab
    try:
        return estimate_size(config, smaller).elements
    except (ConfigError, RuntimeError, ValueError, TypeError):
        return None


def _schema_defaults(section: str, node: Any) -> dict[str, Any]:
    if section == "model":
        schema: type = ModelConfig
    else:
        _, schema = allowed_target(OmegaConf.to_container(node, resolve=True), section)
    return {item.name: item.default for item in fields(schema) if item.default is not MISSING}


def _vocab_default(key: str) -> int | None:
    """The default of a key that sets a vocabulary size (`data.src_vocab_size`, ...)."""
    if key == TOY_VOCAB_KEY:
        return registry.get("source", "toy").options.vocab_size
    return getattr(DataConfig, key.removeprefix("data."), None)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _gib(elements: int) -> str:
    """Float32 bytes of `elements`, in GiB (MiB below one GiB)."""
    size = elements * BYTES_PER_ELEMENT
    return f"{size / 2**30:,.1f} GiB" if size >= 2**30 else f"{size / 2**20:,.1f} MiB"


# ---------------------------------------------------------------- a checkpoint's weights


def check_state_shapes(cfg: DictConfig, vocab: Vocabulary, state: Mapping[str, Any]) -> None:
    """Refuse a state dict that is not exactly the config's model: ConfigError naming the
    first parameter (in the model's order) that is missing, extra or of another shape.

    The stored tensors are already in memory (they are bounded by the file); what the config
    would add is not. The model is measured first (`estimate_size`): a count that differs
    from the stored one is refused without building every layer, and only then is the meta
    model built whole and its names and shapes compared. Its recomputed buffers (the
    sinusoid tables, not stored) may hold no more numbers than the stored weights, or
    `BUFFER_FLOOR`: what a checkpoint makes the loader allocate is bounded by what it
    carries, and its own `model.max_parameters` is not trusted."""
    if not isinstance(state, Mapping) or not all(isinstance(k, str) for k in state):
        raise ConfigError("model: the stored weights are not a mapping of names to tensors")
    stored = {name: tuple(value.shape) for name, value in state.items() if hasattr(value, "shape")}
    if len(stored) != len(state):
        bad = next(name for name, value in state.items() if not hasattr(value, "shape"))
        raise ConfigError(f"parameter {bad}: the stored value is not a tensor")
    size = estimate_size(cfg, vocab)
    stored_elements = sum(math.prod(shape) for shape in stored.values())
    limit = max(stored_elements, BUFFER_FLOOR)
    if size.buffer_elements > limit:
        causes = ", ".join(large_values(cfg, vocab, size, limit)) or "its sizes"
        raise ConfigError(
            f"model: the config's recomputed buffers would hold {size.buffer_elements:,} "
            f"elements (largest tensor {size.largest()}), more than the {stored_elements:,} "
            f"stored weights (or {BUFFER_FLOOR:,}); the cause: {causes}"
        )
    if size.state_elements != stored_elements and _deeper_than_exact(cfg):
        # Compare the first layers only: a stored model with fewer layers lacks one of them.
        capped = {stack: min(_num_layers(cfg, stack), EXACT_LAYERS + 1) for stack in STACKS}
        expected = _shapes(meta_model(cfg, vocab, {k: v for k, v in capped.items() if v}))
        raise ConfigError(
            first_difference(expected, stored, extra=False)
            or f"model: the config describes {size.state_elements:,} stored numbers, the "
            f"checkpoint holds {stored_elements:,}"
        )
    difference = first_difference(_shapes(meta_model(cfg, vocab)), stored)
    if difference is not None:
        raise ConfigError(difference)


def _shapes(model: torch.nn.Module) -> dict[str, tuple[int, ...]]:
    return {name: tuple(tensor.shape) for name, tensor in model.state_dict().items()}


def _deeper_than_exact(cfg: DictConfig) -> bool:
    return any(_num_layers(cfg, stack) > EXACT_LAYERS for stack in STACKS)


def first_difference(
    expected: Mapping[str, tuple[int, ...]],
    stored: Mapping[str, tuple[int, ...]],
    extra: bool = True,
) -> str | None:
    """One line naming the first parameter that differs between the config's model and the
    stored weights (the model's order first, then, with `extra`, the names only the
    checkpoint has)."""
    for name, shape in expected.items():
        if name not in stored:
            return f"parameter {name}: missing from the checkpoint's weights (config: {shape})"
        if stored[name] != shape:
            return (
                f"parameter {name}: shape {stored[name]} in the checkpoint's weights, "
                f"{shape} in its config's model"
            )
    for name, shape in stored.items() if extra else ():
        if name not in expected:
            return f"parameter {name}: in the checkpoint's weights {shape}, not in its config's model"
    return None
