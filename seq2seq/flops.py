"""Analytic FLOPs of one forward (and forward + backward) pass of a configured model.

What is counted: every matrix product, with a multiply-add as 2 FLOPs, so a product of an
`(m, n)` by an `(n, p)` matrix costs `2·m·n·p`. Element-wise work (activations, gates'
sigmoids and tanhs, softmax, masks, layer norm, dropout, residual additions, biases) is
O(elements), not O(elements × width), and is left out; so are embedding look-ups, which
are copies. This is the convention of `torch.utils.flop_counter.FlopCounterMode`, which
the contract suite checks every component's formula against (`seq2seq.testing.flops`), and
`tests/test_flops.py` whole models.

Notation: B sentences, S source and T target positions (padded: the shapes that run),
E = `model.embed_dim`, H a hidden size, V the target vocabulary; `lin(n, a, b) = 2·n·a·b`,
the cost of a linear layer `a → b` applied to n rows.

Each formula below is carried by its component (the static method `flops` of the encoder,
decoder, attention, score or region class, registered in `seq2seq.registry`); this module
looks the parts of a config up there and adds the bridge and the generator.

* Generator (output projection): `lin(B·T, H_dec, V)`.
* Bridge: `lin(B·S, M, H_dec)` when the memory width M differs from the decoder's
  (a bi-RNN's 2·H) plus `lin(B, F, H_dec)` for the initial state, F the encoder's final
  width (H_dec for encoders without one).
* Recurrent layer (Elman RNN g=1, GRU g=3, LSTM g=4 gate blocks), per direction:
  `lin(N, I + H, g·H)` for N steps with input width I (input and recurrent products).
  The encoder runs N = B·S per direction and layer, input E at layer 1 and D·H above it
  (D = 2 when bidirectional). Sources are packed, so only real tokens run: with padding
  the count over padded shapes is an upper bound, by the padding share.
* CNN encoder (Gehring et al. 2017): `lin(B·S, E, H) + L·lin(B·S, k·H, 2H) + lin(B·S, H, H)`,
  a width-k convolution to 2H channels (the gated linear unit's A and B) per layer.
* Transformer encoder (Vaswani et al. 2017): `lin(B·S, E, H)` if E ≠ H, then per layer
  self-attention (below, S queries over S keys) and the feed-forward network
  `lin(B·S, H, F) + lin(B·S, F, H)`.
* Attention of Tq queries over Sk keys, all widths H (what every decoder builds), h heads:
  - projections, only when h > 1 (width w per head, h·w = inner):
    `lin(B·Tq, H, inner) + 2·lin(B·Sk, H, inner) + lin(B·Tq, inner, H)`;
    with one head w = H and there are no projections;
  - scores over the B·h·Tq·Sk pairs:
    dot, scaled_dot:  `2·B·h·Tq·Sk·w`                        qᵀk (Luong et al. 2015; Vaswani)
    general:          `lin(B·h·Sk, w, w) + 2·B·h·Tq·Sk·w`     qᵀ(W k), W k once per sentence
    cosine:           `2·B·h·Tq·Sk·w`                        normalised qᵀk
    additive:         `lin(B·h·Tq, w, A) + lin(B·h·Sk, w, A) + 2·B·h·Tq·Sk·A`
                      vᵀ tanh(W q + U k), hidden width A = `attention.score.hidden_dim`
                      (default w; Bahdanau et al. 2015, eq. 6);
  - region: soft and hard add nothing, and are counted over the full source (the hard
    one-hot weights still multiply all values); local attention is counted like soft over
    the full source too (the scores of every key are computed, then masked to the window),
    plus, for local-p (`attention.region.mode=predictive`), the centre predictor
    `lin(B·h·Tq, w, w) + 2·B·h·Tq·w` (p_t = S·sigmoid(v_pᵀ tanh(W_p h_t)), Luong et al.
    2015, eq. 9);
  - context Σ_j α_j v_j: `2·B·h·Tq·Sk·w`.
  - `attention=none` (the masked mean of the memory): `2·B·Tq·Sk·H`, a uniform-weights product.
* Recurrent decoder (Bahdanau / Luong): one recurrent layer stack over B·T steps with input
  width E + fed (fed = the context for Bahdanau, h̃ for Luong, H either way, 0 without
  input feeding), attention with Tq = T over Sk = S, and the output layer
  `lin(B·T, 2H + E, H)` (Bahdanau: [s_t; c_t; y_{t-1}]) or `lin(B·T, 2H, H)` (Luong:
  [c_t; s_t]).
* CNN decoder: `lin(B·T, E, H)`, then per layer a causal convolution `lin(B·T, k·H, 2H)`,
  the attention query `lin(B·T, H, H)` and its own attention (Tq = T, Sk = S).
* Transformer decoder: `lin(B·T, E, H)` if E ≠ H, then per layer causal self-attention
  (T over T, counted over the full T×T square as the kernels compute it), the
  cross-attention of the config (T over S) and the feed-forward network.

Training: forward + backward ≈ 3 × forward, since the backward pass of every product
computes two products of the same size (the gradients of both operands). Products whose
operand needs no gradient (an RNN's zero initial state) make the true backward slightly
cheaper.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from seq2seq import registry
from seq2seq.models.costs import linear, width_change

BACKWARD_FACTOR = 2  # backward ≈ 2 × forward: gradients of both operands of every product


@dataclass(frozen=True)
class Shapes:
    """The padded shapes of one batch and the two vocabularies."""

    batch_size: int
    src_len: int
    tgt_len: int
    src_vocab: int
    tgt_vocab: int

    def __post_init__(self) -> None:
        """Every size must be an int >= 1 (a ValueError names the argument otherwise)."""
        for name, value in vars(self).items():
            if not (isinstance(value, int) and value >= 1):
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")


def forward_flops(
    cfg: DictConfig | dict,
    batch_size: int,
    src_len: int,
    tgt_len: int,
    src_vocab: int,
    tgt_vocab: int,
) -> int:
    """Matrix-product FLOPs of one forward pass over a padded batch (module docstring).

    `src_vocab` costs nothing (embedding look-ups are copies); it is taken for symmetry.
    """
    return sum(flops_breakdown(cfg, batch_size, src_len, tgt_len, src_vocab, tgt_vocab).values())


def training_flops(
    cfg: DictConfig | dict,
    batch_size: int,
    src_len: int,
    tgt_len: int,
    src_vocab: int,
    tgt_vocab: int,
) -> int:
    """FLOPs of one forward + backward pass: 3 × `forward_flops`."""
    forward = forward_flops(cfg, batch_size, src_len, tgt_len, src_vocab, tgt_vocab)
    return (1 + BACKWARD_FACTOR) * forward


def flops_breakdown(
    cfg: DictConfig | dict,
    batch_size: int,
    src_len: int,
    tgt_len: int,
    src_vocab: int,
    tgt_vocab: int,
) -> dict[str, int]:
    """Forward FLOPs per part: encoder, bridge, decoder (without its cross-attention),
    attention (the decoder's attention over the source, every layer) and generator.
    Each part's formula is the one registered with its component (`seq2seq.registry`)."""
    shapes = Shapes(batch_size, src_len, tgt_len, src_vocab, tgt_vocab)
    config = _plain(cfg)
    embed_dim, hidden = config["model"]["embed_dim"], config["decoder"]["hidden_size"]
    encoder, decoder, attention = config["encoder"], config["decoder"], config["attention"]
    encoder_part = _component("encoder", encoder)
    decoder_formula = _component("decoder", decoder).flops
    decoder_own, attention_layers = decoder_formula(decoder, embed_dim, batch_size, tgt_len)
    cross = _component("attention", attention).flops(
        attention, batch_size, tgt_len, src_len, hidden
    )
    return {
        "encoder": encoder_part.flops(encoder, embed_dim, batch_size, src_len),
        "bridge": bridge_flops(*encoder_part.builder.widths(encoder), hidden, shapes),
        "decoder": decoder_own,
        "attention": attention_layers * cross,
        "generator": linear(batch_size * tgt_len, hidden, tgt_vocab),
    }


def bridge_flops(memory_dim: int, final_dim: int | None, hidden: int, shapes: Shapes) -> int:
    """Memory projection (when widths differ) and the initial state h₀ = tanh(W s + b)."""
    memory = width_change(shapes.batch_size * shapes.src_len, memory_dim, hidden)
    return memory + linear(shapes.batch_size, final_dim or hidden, hidden)


def _component(group: str, node: dict[str, Any]) -> registry.Component:
    """The component a part's node names by its exact `_target_` (an unknown one is a
    ValueError naming it), provided it has a FLOP formula."""
    component = registry.of_node(group, node)
    if component.flops is None:
        raise ValueError(f"{group} {component.name!r}: no FLOP formula is registered for it")
    return component


def _plain(cfg: DictConfig | dict) -> dict[str, Any]:
    if isinstance(cfg, DictConfig):
        return OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)  # type: ignore[return-value]
    return cfg
