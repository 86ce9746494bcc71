"""The config fields that an encoder and a decoder of one family share, written once.

Each encoder, decoder, attention class and schedule declares the dataclass of its config
node beside it and registers both (`seq2seq.registry`); Hydra checks every YAML preset
against it (`seq2seq.config.schema`). The defaults here are the constructors' defaults. `_target_`,
the exact name the class is built by, is set by each subclass.
"""

from __future__ import annotations

from dataclasses import dataclass

from seq2seq.models.dropout import DropoutUnit
from seq2seq.models.positional import Positional


@dataclass
class LayerStackConfig:
    """What every stacked encoder or decoder states first: the class, width and depth."""

    _target_: str
    hidden_size: int = 256
    num_layers: int = 3


@dataclass
class ConvS2SConfig(LayerStackConfig):
    """A ConvS2S encoder or decoder (Gehring et al. 2017); four layers by default."""

    num_layers: int = 4  # keeps its place after hidden_size, as in the base
    kernel_size: int = 3
    dropout: float = 0.1
    max_positions: int = 1024


@dataclass
class TransformerConfig(LayerStackConfig):
    """A pre-LN Transformer encoder or decoder (Vaswani et al. 2017)."""

    heads: int = 4
    ff_size: int = 1024
    dropout: float = 0.1  # on the input and on each sublayer's output (Vaswani et al. §5.4)
    dropout_unit: DropoutUnit = DropoutUnit.element  # token: one draw per token (dropout.py)
    ff_dropout: float = 0.1  # inside the FFN, after ReLU; 0 skips the widest dropout mask
    attention_dropout: float = 0.0  # > 0 keeps CPU attention off torch's flash kernel
    positional: Positional = Positional.sinusoidal
    max_positions: int = 1024
