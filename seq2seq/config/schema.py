"""Structured configs: the schema of every config group, registered with Hydra's ConfigStore.

Each YAML file in `configs/<group>/` starts with `defaults: [<schema>, _self_]`, so Hydra
checks it against one of the schemas: an unknown key, a value of the wrong type or a name
outside an enumeration fails at start-up and names the key
(`seq2seq-train encoder.cel=gru` → "Key 'cel' not in 'RNNEncoderConfig'").

The schemas of the parts (encoder, decoder, attention, schedule) are those of the
registered components (`seq2seq.registry`), each declared beside its class and stored as
`base_<name>`; the rest (data, model, optimiser, trainer, guided alignment, logging) are
below.

`attention.score` and `attention.region` hold a component's node, `{name, <its options>}`,
or just its name (`seq2seq.models.attention.options`). Hydra types them as `Any`: a
plugin's components register after Hydra composes the config, so their names and options
are checked at start-up (`seq2seq.config.value_checks`), not here. Each registered score and
region is also an option of the config groups `attention/score` and `attention/region`
(`option_node`: its options dataclass with a `name` field), so an attention preset chooses
them in its defaults list and `attention/score=cosine` replaces the node with cosine's
defaults, type-checked by Hydra.

Model parts are instantiated with `hydra.utils.instantiate` from their `_target_`, and the
builder passes the sizes that depend on other parts (embedding width, attention widths).
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Collection
from dataclasses import dataclass, field, fields, make_dataclass
from enum import Enum
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from seq2seq import registry
from seq2seq.config.search_settings import SearchSettings
from seq2seq.data.settings import DataConfig

# ---------------------------------------------------------------- model and optimiser


@dataclass
class ModelConfig:
    embed_dim: int = 256
    scale_embeddings: bool = True
    embed_dropout: float = 0.1
    word_dropout: float = 0.0  # a whole embedding zeroed per token (seq2seq.models.dropout)
    tie_embeddings: bool = True  # target embeddings shared with the output projection
    # What starts a recurrent decoder (seq2seq.models.model.Bridge): auto (the encoder's final
    # state when it has one, else the mean of its states), final, mean, or attention_pool (one
    # learned query weighs the states: seq2seq.models.attention.pooling)
    summary: str = "auto"
    # The most parameters (and recomputed buffer elements, such as the sinusoid position
    # table) a model may have: a larger config is refused before anything is allocated,
    # naming the values that make it large (seq2seq.config.sizing). Not part of the architecture.
    max_parameters: int = 500_000_000


@dataclass
class OptimConfig:
    _target_: str = "torch.optim.AdamW"
    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-9
    weight_decay: float = 0.01
    fused: bool | None = True  # one fused kernel per step (≈9× faster than the loop on CPU)


# ---------------------------------------------------------------- trainer and logging


@dataclass
class TrainerConfig:
    max_steps: int = 3000
    max_epochs: int = 1000
    max_minutes: float | None = None  # wall-clock budget for training (validation included)
    valid_every: int = 500
    log_every: int = 50
    # The validation metric that picks best.pt and drives the plateau schedule and early
    # stopping, in its direction: bleu, chrf, ter, loss, ppl, aer (a gold set's valid part),
    # alignment_accuracy (the toy tasks, probes) or a plugin's (seq2seq.metrics)
    select_metric: str = "bleu"
    patience: int = 0  # validations without a better trainer.select_metric before stopping; 0 = never
    # Stop once the best trainer.select_metric gained less than this over the last
    # converged_fraction of the updates so far, judged only when that part of the run holds
    # at least converged_validations validations (training/convergence.py); 0 = never
    converged_gain: float = 0.0
    converged_fraction: float = 0.25
    converged_validations: int = 3
    grad_clip: float = 1.0
    accumulate: int = 1
    label_smoothing: float = 0.1
    short_first_epochs: int = 0  # the first N epochs take their batches shortest first
    scheduled_sampling: float = 0.0  # recurrent decoders: final prob. of feeding back a prediction
    seed: int = 1234
    threads: int = 0  # torch intra-op threads; 0 = torch's default
    # glibc keeps freed memory for the next update instead of handing it back to the kernel:
    # no page faults on every update's large arrays, the peak memory kept (training/memory.py)
    keep_freed_memory: bool = True
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    precision: str = "auto"  # auto (bf16 autocast on CUDA, float32 on the CPU) | bf16 | fp32
    compile: bool = False  # torch.compile the training forward + loss (see BENCHMARKS.md)
    resume: str | None = None  # checkpoint file, run folder, "last", or "auto" (this run folder)
    average_last: int = 0  # average the weights of the last N validations; kept if select_metric improves
    ema_decay: float = 0.0  # d > 0: validate, select and test an exponential moving average of the weights
    subword_nbest: int = 0  # l >= 2: train on segmentations sampled from the l best (Kudo 2018)
    subword_alpha: float = 0.1  # the sampling's P(x)^alpha
    source_unk_rate: float = 0.0  # p > 0: each real source piece read as <unk> with probability p in training
    valid_max_sentences: int | None = None  # evenly spaced subset of the valid split
    max_nonfinite_steps: int = 10  # stop after N updates in a row with a NaN/inf loss or grad norm
    test_search: SearchSettings = field(default_factory=SearchSettings)


# ---------------------------------------------------------------- guided alignment

ALIGNMENT_LOSSES = ("ce", "mse")
AlignmentLoss = Enum("AlignmentLoss", {loss: loss for loss in ALIGNMENT_LOSSES})


LAYER_TRAININGS = ("guided", "unsupervised")
LayerTraining = Enum("LayerTraining", {name: name for name in LAYER_TRAININGS})
LayerQuery = Enum("LayerQuery", {name: name for name in ("next", "full_context")})
LAYER_LABELS = ("argmax", "soft")
LayerLabels = Enum("LayerLabels", {name: name for name in LAYER_LABELS})


@dataclass
class AlignmentConfig:
    """`alignment=guided`: one attention layer's heads learn word links (Garg et al. 2019);
    `alignment=layer`: a separate alignment layer learns them, beside the attention that
    translates (`seq2seq.models.alignment_layer`). The default, `alignment=none`, is an
    empty node: these keys are set with `alignment=guided` or `alignment=layer`.

    The loss adds λ·L_align to the translation loss, L_align summed over the linked target
    positions t in the normalisation of the NLL (÷ target tokens), with p*(t, ·) the links
    of t normalised to sum 1 and α_t the mean of the supervised heads
    (`seq2seq.training.guided_alignment`):

        ce:  L_align = −Σ_t Σ_s p*(t, s) log max(α_t(s), ε)
        mse: L_align =  Σ_t Σ_s (α_t(s) − p*(t, s))²

    The training links come from `data.alignments` (a Pharaoh file), the toy tasks' known
    alignment, or the statistical aligner (`seq2seq.align.training_links`)."""

    guided: bool = False
    # The supervised attention layer: counted from 0, negative from the end, clamped to the
    # decoder's stack, so the default (the penultimate, Garg et al.) is the only layer of a
    # one-layer stack (every RNN decoder).
    layer: int = -2
    heads: list[int] | None = field(default_factory=lambda: [0])  # averaged; null: every head
    weight: float = 0.5  # λ (Garg et al. 2019: 0.05; 0.5 chosen on the valid gold pairs)
    loss: AlignmentLoss = AlignmentLoss.ce
    # Transformer decoders: the supervised attention comes from a second decoder pass
    # without the future mask (every position sees the whole target; Garg et al. 2019).
    full_context: bool = False
    # The decoder step whose attention learns the links of target piece t: t + shift. At
    # step t a decoder has not read piece t; at step t + 1 a Transformer, CNN or Luong-style
    # RNN has, at t + 2 a Bahdanau-style RNN (it attends with the state before its input).
    # null: the decoder's own lag (`Decoder.target_read_lag`). Every reading of the model's
    # attention as word links reads the rows `shift` steps later.
    shift: int | None = 0
    # `alignment=layer` (`seq2seq.models.alignment_layer`): a separate attention, its own
    # parameters, learns the links from the decoder's output after it has read each target
    # piece; it predicts nothing. It uses `weight` (λ) and `loss` above.
    separate: bool = False
    training: LayerTraining = LayerTraining.guided  # the links (guided) | the model's own
    layer_heads: int = 1  # the layer's heads, read as their mean
    gradient: float = 0.0  # into the shared states: 0 stopped (translation untouched) .. 1
    query: LayerQuery = LayerQuery.next  # next | full_context (Transformer: no future mask)
    # the pieces' own embeddings join the query and the keys (the preset sets true; false
    # for a layer stored before the key existed)
    embeddings: bool = False
    # unsupervised: the translation attention that teaches, read `teacher_shift` steps on
    teacher_layer: int = -1  # counted from 0, negative from the end, clamped
    teacher_heads: list[int] | None = None  # averaged; null: every head
    teacher_shift: int | None = 0  # piece t learns from step t + this; null: the lag
    labels: LayerLabels = LayerLabels.argmax  # argmax (one link per piece) | soft


def is_guided(cfg: Any) -> bool:
    """Whether a run's config (a DictConfig or a mapping) trains with guided alignment: an
    `alignment` node with `guided: true` (`alignment=guided`)."""
    alignment = cfg.get("alignment")
    return alignment is not None and bool(alignment.get("guided"))


def has_alignment_layer(cfg: Any) -> bool:
    """Whether a run's config has a separate alignment layer (`alignment=layer`)."""
    alignment = cfg.get("alignment")
    return alignment is not None and bool(alignment.get("separate"))


def needs_training_links(cfg: Any) -> bool:
    """Whether a run trains on the links of its training split: guided alignment, or an
    alignment layer trained on them (`alignment=layer`, `training: guided`)."""
    if is_guided(cfg):
        return True
    alignment = cfg.get("alignment")
    training = alignment.get("training", "guided") if alignment is not None else None
    return has_alignment_layer(cfg) and getattr(training, "name", training) == "guided"


@dataclass
class LoggingConfig:
    tensorboard: bool = True
    text_samples: int = 3
    probe_file: str | None = None
    progress_bar: bool = True


@dataclass
class TrainConfig:
    data: Any = MISSING
    encoder: Any = MISSING
    decoder: Any = MISSING
    attention: Any = MISSING
    optim: OptimConfig = MISSING
    schedule: Any = MISSING
    trainer: TrainerConfig = MISSING
    logging: LoggingConfig = MISSING
    alignment: Any = None  # alignment=none: {} (unguided); alignment=guided: AlignmentConfig
    model: ModelConfig = field(default_factory=ModelConfig)
    name: str = "default"
    # The user's modules to import before anything is built (`seq2seq.plugins`): dotted
    # names, `.py` files or folders, relative to the folder seq2seq-train was started in.
    plugins: list[str] = field(default_factory=list)


# The groups whose schemas are those of the registered components (attention, encoder,
# decoder, schedule), and the others.
PART_GROUPS = registry.NODE_GROUPS
FIXED_GROUPS: dict[str, dict[str, type]] = {
    "data": {"base_data": DataConfig},
    "optim": {"base_optim": OptimConfig},
    "trainer": {"base_trainer": TrainerConfig},
    "logging": {"base_logging": LoggingConfig},
    "alignment": {"base_alignment": AlignmentConfig},
}


def schemas(groups: Collection[str] | None = None) -> dict[str, dict[str, type]]:
    """Every group's schemas (or those of `groups`) by their ConfigStore name, `base_<name>`
    for the registered parts, as the registry holds them now."""
    wanted = set(FIXED_GROUPS) | set(PART_GROUPS) if groups is None else set(groups)
    named = {group: FIXED_GROUPS[group] for group in FIXED_GROUPS if group in wanted}
    for group in PART_GROUPS:
        if group in wanted:
            components = registry.components(group)
            named[group] = {f"base_{c.name}": c.schema for c in components}
    return named


# The config groups of the attention's score and region nodes, and their registry groups.
OPTION_GROUPS = {"attention/score": "score", "attention/region": "region"}


def option_schemas() -> dict[str, dict[str, type]]:
    """`attention/score` and `attention/region`: each registered component's node schema
    (`option_node`) by its name, as the registry holds them now."""
    return {
        config_group: {c.name: option_node(c) for c in registry.components(group)}
        for config_group, group in OPTION_GROUPS.items()
    }


@functools.cache
def option_node(component: registry.Component) -> type:
    """The schema of a score's or region's node: `name` (the component's, by default),
    then the fields of its options dataclass, with their types, defaults and ranges."""
    options = component.options
    if options is None:
        return make_dataclass(f"{component.builder.__name__}Options", [_name_field(component)])
    hints = typing.get_type_hints(options)
    declared = [(item.name, hints[item.name], _copied_field(item)) for item in fields(options)]
    return make_dataclass(options.__name__, [_name_field(component), *declared])


def _name_field(component: registry.Component) -> tuple[str, type, Any]:
    return ("name", str, field(default=component.name))


def _copied_field(item: Any) -> Any:
    """A dataclass field's default (or factory) and metadata; a required one is `???`."""
    if item.default_factory is not dataclasses.MISSING:
        return field(default_factory=item.default_factory, metadata=item.metadata)
    default = MISSING if item.default is dataclasses.MISSING else item.default
    return field(default=default, metadata=item.metadata)


def __getattr__(name: str) -> Any:
    """`SCHEMAS`, computed from the registry when it is read (PEP 562)."""
    if name == "SCHEMAS":
        return schemas()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register_configs(groups: Collection[str] | None = None) -> None:
    """Store the schemas in Hydra's ConfigStore (idempotent). `groups` stores only those
    groups' schemas: `register_configs(["data"])` imports no model."""
    store = ConfigStore.instance()
    store.store(name="train_schema", node=TrainConfig)
    named_groups = schemas(groups)
    if "attention" in named_groups:
        named_groups.update(option_schemas())
    for group, named in named_groups.items():
        for name, node in named.items():
            store.store(group=group, name=name, node=node)


# ---------------------------------------------------------------- what may be built

# The config groups whose nodes name a class with `_target_`; only the classes of their
# schemas may be built (see `buildable_classes`).
BUILDABLE_GROUPS = (*PART_GROUPS, "optim")
# Hydra's instantiate keys: never accepted below the top of a part, and only `_target_` there.
HYDRA_KEYS = ("_target_", "_args_", "_partial_", "_recursive_", "_convert_")


def buildable_classes(group: str) -> dict[str, type]:
    """The allow-list of one group: exact `_target_` name → the schema of its config.

    `buildable_classes("encoder")["seq2seq.models.encoders.RNNEncoder"] is RNNEncoderConfig`.
    Raises KeyError for a group that builds nothing (`data`, `trainer`, ...).
    """
    if group not in BUILDABLE_GROUPS:
        raise KeyError(f"the {group!r} config group builds no class")
    return {schema._target_: schema for schema in schemas([group])[group].values()}


def nested_build_key(node: Any, path: str) -> str | None:
    """The key path of the first value below `node` that would make Hydra build or call
    something (a mapping holding `_target_` or another of Hydra's keys); None if there is
    none. `node` is one part's values as plain Python, `path` the part's name."""
    for child, value in _children(node, path):
        if isinstance(value, dict) and any(hydra_key in value for hydra_key in HYDRA_KEYS):
            return child
        found = nested_build_key(value, child)
        if found is not None:
            return found
    return None


def _children(node: Any, path: str) -> list[tuple[str, Any]]:
    """(key path, value) of each entry of a mapping or a list; [] for a scalar."""
    if isinstance(node, dict):
        return [(f"{path}.{key}", value) for key, value in node.items()]
    if isinstance(node, (list, tuple)):
        return [(f"{path}[{index}]", value) for index, value in enumerate(node)]
    return []
