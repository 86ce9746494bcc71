"""Structured configs: the schema of every config group, registered with Hydra's ConfigStore.

Each YAML file in `configs/<group>/` starts with `defaults: [<schema>, _self_]`, so Hydra
checks it against one of the dataclasses below: an unknown key, a value of the wrong type
or a name outside an enumeration fails at start-up and names the key
(`seq2seq-train encoder.cel=gru` → "Key 'cel' not in 'RNNEncoderConfig'").

Model parts are instantiated with `hydra.utils.instantiate` from their `_target_`, and the
builder passes the sizes that depend on other parts (embedding width, attention widths).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from seq2seq.data.config import DataConfig

# ---------------------------------------------------------------- enumerations


class Cell(Enum):
    rnn = "rnn"
    lstm = "lstm"
    gru = "gru"


class Positional(Enum):
    sinusoidal = "sinusoidal"
    learned = "learned"


class Score(Enum):
    dot = "dot"
    scaled_dot = "scaled_dot"
    general = "general"
    additive = "additive"
    cosine = "cosine"


class Region(Enum):
    soft = "soft"
    hard = "hard"
    local = "local"


class LocalMode(Enum):
    predictive = "predictive"
    monotonic = "monotonic"


class RNNStyle(Enum):
    bahdanau = "bahdanau"
    luong = "luong"


# ---------------------------------------------------------------- encoders


@dataclass
class RNNEncoderConfig:
    _target_: str = "seq2seq.models.encoders.RNNEncoder"
    cell: Cell = Cell.gru
    hidden_size: int = 256
    num_layers: int = 1
    bidirectional: bool = True
    dropout: float = 0.1


@dataclass
class CNNEncoderConfig:
    _target_: str = "seq2seq.models.encoders.CNNEncoder"
    hidden_size: int = 256
    num_layers: int = 4
    kernel_size: int = 3
    dropout: float = 0.1
    max_positions: int = 1024


@dataclass
class TransformerEncoderConfig:
    _target_: str = "seq2seq.models.encoders.TransformerEncoder"
    hidden_size: int = 256
    num_layers: int = 3
    heads: int = 4
    ff_size: int = 1024
    dropout: float = 0.1
    attention_dropout: float = 0.0  # > 0 keeps CPU attention off torch's flash kernel
    positional: Positional = Positional.sinusoidal
    max_positions: int = 1024


# ---------------------------------------------------------------- decoders


@dataclass
class RNNDecoderConfig:
    _target_: str = "seq2seq.models.decoders.RNNDecoder"
    cell: Cell = Cell.gru
    hidden_size: int = 256
    num_layers: int = 1
    dropout: float = 0.1
    style: RNNStyle = RNNStyle.bahdanau
    input_feeding: bool = True


@dataclass
class CNNDecoderConfig:
    _target_: str = "seq2seq.models.decoders.CNNDecoder"
    hidden_size: int = 256
    num_layers: int = 4
    kernel_size: int = 3
    dropout: float = 0.1
    max_positions: int = 1024


@dataclass
class TransformerDecoderConfig:
    _target_: str = "seq2seq.models.decoders.TransformerDecoder"
    hidden_size: int = 256
    num_layers: int = 3
    heads: int = 4
    ff_size: int = 1024
    dropout: float = 0.1
    attention_dropout: float = 0.0  # > 0 keeps CPU attention off torch's flash kernel
    positional: Positional = Positional.sinusoidal
    max_positions: int = 1024


# ---------------------------------------------------------------- attention


@dataclass
class AttentionConfig:
    _target_: str = "seq2seq.models.attention.Attention"
    score: Score = Score.additive
    region: Region = Region.soft
    heads: int = 1
    head_dim: int | None = None
    hidden_dim: int | None = None
    window: int = 5
    local_mode: LocalMode = LocalMode.predictive
    gumbel_tau: float = 1.0
    cosine_scale: float | None = None
    dropout: float = 0.0


@dataclass
class NoAttentionConfig:
    _target_: str = "seq2seq.models.attention.NoAttention"


# ---------------------------------------------------------------- model, optimiser, schedule


@dataclass
class ModelConfig:
    embed_dim: int = 256
    scale_embeddings: bool = True
    embed_dropout: float = 0.1
    tie_embeddings: bool = True  # target embeddings shared with the output projection


@dataclass
class OptimConfig:
    _target_: str = "torch.optim.AdamW"
    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.98)
    eps: float = 1e-9
    weight_decay: float = 0.01
    fused: bool | None = True  # one fused kernel per step (≈9× faster than the loop on CPU)


@dataclass
class InverseSqrtConfig:
    _target_: str = "seq2seq.training.schedules.InverseSqrtSchedule"
    warmup_steps: int = 300


@dataclass
class CosineConfig:
    _target_: str = "seq2seq.training.schedules.CosineSchedule"
    warmup_steps: int = 300
    min_lr_ratio: float = 0.05


@dataclass
class PlateauConfig:
    _target_: str = "seq2seq.training.schedules.PlateauSchedule"
    warmup_steps: int = 0
    factor: float = 0.5
    patience: int = 2
    min_lr_ratio: float = 0.01


# ---------------------------------------------------------------- trainer and logging


@dataclass
class SearchConfig:
    beam_size: int = 5
    length_penalty: float = 1.0
    max_len_a: float = 1.5
    max_len_b: int = 10
    batch_size: int = 128  # sentences per decoding batch


@dataclass
class TrainerConfig:
    max_steps: int = 3000
    max_epochs: int = 1000
    max_minutes: float | None = None  # wall-clock budget for training (validation included)
    valid_every: int = 500
    log_every: int = 50
    patience: int = 0  # validations without a better valid BLEU before stopping; 0 = never
    grad_clip: float = 1.0
    accumulate: int = 1
    label_smoothing: float = 0.1
    scheduled_sampling: float = 0.0  # recurrent decoders: final prob. of feeding back a prediction
    seed: int = 1234
    threads: int = 0  # torch intra-op threads; 0 = torch's default
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    compile: bool = False  # torch.compile the training forward + loss (see BENCHMARKS.md)
    resume: str | None = None  # checkpoint file, run folder, or "last"
    average_last: int = 0  # average the weights of the last N validations; kept if valid BLEU rises
    valid_max_sentences: int | None = None  # evenly spaced subset of the valid split
    max_nonfinite_steps: int = 10  # stop after N updates in a row with a NaN/inf loss or grad norm
    test_search: SearchConfig = field(default_factory=SearchConfig)


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
    model: ModelConfig = field(default_factory=ModelConfig)
    name: str = "default"


SCHEMAS: dict[str, dict[str, type]] = {
    "data": {"base_data": DataConfig},
    "encoder": {
        "base_rnn": RNNEncoderConfig,
        "base_cnn": CNNEncoderConfig,
        "base_transformer": TransformerEncoderConfig,
    },
    "decoder": {
        "base_rnn": RNNDecoderConfig,
        "base_cnn": CNNDecoderConfig,
        "base_transformer": TransformerDecoderConfig,
    },
    "attention": {"base_attention": AttentionConfig, "base_none": NoAttentionConfig},
    "optim": {"base_optim": OptimConfig},
    "schedule": {
        "base_inverse_sqrt": InverseSqrtConfig,
        "base_cosine": CosineConfig,
        "base_plateau": PlateauConfig,
    },
    "trainer": {"base_trainer": TrainerConfig},
    "logging": {"base_logging": LoggingConfig},
}


def register_configs() -> None:
    """Store the schemas in Hydra's ConfigStore (idempotent)."""
    store = ConfigStore.instance()
    store.store(name="train_schema", node=TrainConfig)
    for group, schemas in SCHEMAS.items():
        for name, node in schemas.items():
            store.store(group=group, name=name, node=node)


# ---------------------------------------------------------------- what may be built

# The config groups whose nodes name a class with `_target_`; only the classes of their
# schemas above may be built (see `buildable_classes`).
BUILDABLE_GROUPS = ("encoder", "decoder", "attention", "optim", "schedule")
# Hydra's instantiate keys: never accepted below the top of a part, and only `_target_` there.
HYDRA_KEYS = ("_target_", "_args_", "_partial_", "_recursive_", "_convert_")


def buildable_classes(group: str) -> dict[str, type]:
    """The allow-list of one group: exact `_target_` name → the schema of its config.

    `buildable_classes("encoder")["seq2seq.models.encoders.RNNEncoder"] is RNNEncoderConfig`.
    Raises KeyError for a group that builds nothing (`data`, `trainer`, ...).
    """
    if group not in BUILDABLE_GROUPS:
        raise KeyError(f"the {group!r} config group builds no class")
    return {schema._target_: schema for schema in SCHEMAS[group].values()}


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
