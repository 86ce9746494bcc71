"""Analytic FLOPs of one forward (and forward + backward) pass of a configured model.

What is counted: every matrix product, with a multiply-add as 2 FLOPs, so a product of an
`(m, n)` by an `(n, p)` matrix costs `2·m·n·p`. Element-wise work (activations, gates'
sigmoids and tanhs, softmax, masks, layer norm, dropout, residual additions, biases) is
O(elements), not O(elements × width), and is left out; so are embedding look-ups, which
are copies. This is the convention of `torch.utils.flop_counter.FlopCounterMode`, which
`tests/test_flops.py` checks these formulas against.

Notation: B sentences, S source and T target positions (padded: the shapes that run),
E = `model.embed_dim`, H a hidden size, V the target vocabulary; `lin(n, a, b) = 2·n·a·b`,
the cost of a linear layer `a → b` applied to n rows.

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
                      vᵀ tanh(W q + U k), hidden width A (Bahdanau et al. 2015, eq. 6);
  - region: soft and hard add nothing, and are counted over the full source (the hard
    one-hot weights still multiply all values); local attention is counted like soft over
    the full source too (the scores of every key are computed, then masked to the window),
    plus, for local-p, the centre predictor `lin(B·h·Tq, w, w) + 2·B·h·Tq·w`
    (p_t = S·sigmoid(v_pᵀ tanh(W_p h_t)), Luong et al. 2015, eq. 9);
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

RNN_GATES = {"rnn": 1, "gru": 3, "lstm": 4}
BACKWARD_FACTOR = 2  # backward ≈ 2 × forward: gradients of both operands of every product
SELF_ATTENTION = {  # every Transformer block's self-attention
    "_target_": "seq2seq.models.attention.Attention",
    "score": "scaled_dot",
    "region": "soft",
    "head_dim": None,
}


@dataclass(frozen=True)
class Shapes:
    """The padded shapes of one batch."""

    batch: int
    src_len: int
    tgt_len: int


def linear(rows: int, in_dim: int, out_dim: int) -> int:
    """A linear map `in_dim → out_dim` on `rows` rows: 2·rows·in_dim·out_dim."""
    return 2 * rows * in_dim * out_dim


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
    attention (the decoder's attention over the source, every layer) and generator."""
    _check_sizes(
        batch_size=batch_size,
        src_len=src_len,
        tgt_len=tgt_len,
        src_vocab=src_vocab,
        tgt_vocab=tgt_vocab,
    )
    config, shapes = _plain(cfg), Shapes(batch_size, src_len, tgt_len)
    embed_dim = config["model"]["embed_dim"]
    encoder, decoder, attention = config["encoder"], config["decoder"], config["attention"]
    memory_dim, final_dim = encoder_widths(encoder)
    hidden = decoder["hidden_size"]
    decoder_own, cross = decoder_flops(decoder, attention, embed_dim, shapes)
    return {
        "encoder": encoder_flops(encoder, embed_dim, shapes),
        "bridge": bridge_flops(memory_dim, final_dim, hidden, shapes),
        "decoder": decoder_own,
        "attention": cross,
        "generator": linear(shapes.batch * shapes.tgt_len, hidden, tgt_vocab),
    }


# ---------------------------------------------------------------- encoders


def encoder_widths(encoder: dict[str, Any]) -> tuple[int, int | None]:
    """(memory width, final-state width or None), as the encoder classes set them."""
    if _family(encoder) == "RNN":
        width = encoder["hidden_size"] * (2 if encoder["bidirectional"] else 1)
        return width, width
    return encoder["hidden_size"], None


def encoder_flops(encoder: dict[str, Any], embed_dim: int, shapes: Shapes) -> int:
    """The encoder of any family over B·S source positions."""
    tokens, hidden = shapes.batch * shapes.src_len, encoder["hidden_size"]
    family = _family(encoder)
    if family == "RNN":
        directions = 2 if encoder["bidirectional"] else 1
        layers = encoder["num_layers"]
        return recurrent_flops(tokens, embed_dim, hidden, layers, directions, encoder["cell"])
    if family == "CNN":
        blocks = encoder["num_layers"] * linear(tokens, encoder["kernel_size"] * hidden, 2 * hidden)
        return linear(tokens, embed_dim, hidden) + blocks + linear(tokens, hidden, hidden)
    if family == "Transformer":
        layer = transformer_self_attention(encoder, shapes.batch, shapes.src_len)
        layer += feed_forward_flops(tokens, hidden, encoder["ff_size"])
        return _input_projection(tokens, embed_dim, hidden) + encoder["num_layers"] * layer
    raise ValueError(f"encoder._target_={encoder['_target_']!r}: no FLOP formula for it")


def recurrent_flops(
    steps: int, input_dim: int, hidden: int, layers: int, directions: int, cell: str
) -> int:
    """A stacked (bi)RNN over `steps` positions: per layer and direction lin(steps, I + H, g·H)."""
    if cell not in RNN_GATES:
        raise ValueError(f"cell must be one of {sorted(RNN_GATES)}, got {cell!r}")
    total = 0
    for layer in range(layers):
        width = input_dim if layer == 0 else hidden * directions
        total += directions * linear(steps, width + hidden, RNN_GATES[cell] * hidden)
    return total


def feed_forward_flops(tokens: int, hidden: int, ff_size: int) -> int:
    """FFN(x) = W₂ ReLU(W₁ x + b₁) + b₂ (Vaswani et al. 2017, eq. 2)."""
    return linear(tokens, hidden, ff_size) + linear(tokens, ff_size, hidden)


def transformer_self_attention(part: dict[str, Any], batch: int, length: int) -> int:
    """Multi-head scaled dot-product self-attention of `length` positions."""
    config = {**SELF_ATTENTION, "heads": part["heads"]}
    return attention_flops(config, batch, length, length, part["hidden_size"])


def _input_projection(tokens: int, embed_dim: int, hidden: int) -> int:
    return 0 if embed_dim == hidden else linear(tokens, embed_dim, hidden)


# ---------------------------------------------------------------- bridge and decoders


def bridge_flops(memory_dim: int, final_dim: int | None, hidden: int, shapes: Shapes) -> int:
    """Memory projection (when widths differ) and the initial state h₀ = tanh(W s + b)."""
    tokens = shapes.batch * shapes.src_len
    memory = 0 if memory_dim == hidden else linear(tokens, memory_dim, hidden)
    return memory + linear(shapes.batch, final_dim or hidden, hidden)


def decoder_flops(
    decoder: dict[str, Any], attention: dict[str, Any], embed_dim: int, shapes: Shapes
) -> tuple[int, int]:
    """(the decoder's own FLOPs, those of its attention over the source, all layers)."""
    tokens, hidden = shapes.batch * shapes.tgt_len, decoder["hidden_size"]
    cross = attention_flops(attention, shapes.batch, shapes.tgt_len, shapes.src_len, hidden)
    family = _family(decoder)
    if family == "RNN":
        return recurrent_decoder_flops(decoder, embed_dim, tokens), cross
    layers = decoder["num_layers"]
    if family == "CNN":
        conv = linear(tokens, decoder["kernel_size"] * hidden, 2 * hidden)
        per_layer = conv + linear(tokens, hidden, hidden)  # + the attention query d_i
        return linear(tokens, embed_dim, hidden) + layers * per_layer, layers * cross
    if family == "Transformer":
        per_layer = transformer_self_attention(decoder, shapes.batch, shapes.tgt_len)
        per_layer += feed_forward_flops(tokens, hidden, decoder["ff_size"])
        return _input_projection(tokens, embed_dim, hidden) + layers * per_layer, layers * cross
    raise ValueError(f"decoder._target_={decoder['_target_']!r}: no FLOP formula for it")


def recurrent_decoder_flops(decoder: dict[str, Any], embed_dim: int, tokens: int) -> int:
    """The RNN stack (input: embedding plus the fed-back vector) and the output layer."""
    hidden, bahdanau = decoder["hidden_size"], decoder["style"] == "bahdanau"
    fed = hidden if decoder["input_feeding"] else 0  # c_t (Bahdanau) or h̃_{t-1} (Luong)
    rnn = recurrent_flops(
        tokens, embed_dim + fed, hidden, decoder["num_layers"], 1, decoder["cell"]
    )
    combined = 2 * hidden + (embed_dim if bahdanau else 0)  # [s; c; y] or [c; s]
    return rnn + linear(tokens, combined, hidden)


# ---------------------------------------------------------------- attention


def attention_flops(
    attention: dict[str, Any], batch: int, queries: int, keys: int, dim: int
) -> int:
    """One attention layer: `queries` positions over `keys` positions, all widths `dim`."""
    if attention["_target_"].endswith("NoAttention"):
        return 2 * batch * queries * keys * dim  # uniform weights @ values
    heads = attention["heads"]
    width = dim if heads == 1 else (attention["head_dim"] or dim // heads)
    projections = 0
    if heads > 1:
        inner = heads * width
        query_side = linear(batch * queries, dim, inner) + linear(batch * queries, inner, dim)
        projections = query_side + 2 * linear(batch * keys, dim, inner)  # W_Q, W_O; W_K, W_V
    pairs = batch * heads * queries * keys
    score = score_flops(attention, batch * heads, queries, keys, width)
    region = region_flops(attention, batch * heads * queries, width)
    return projections + score + region + 2 * pairs * width  # + context Σ α v


def score_flops(attention: dict[str, Any], rows: int, queries: int, keys: int, width: int) -> int:
    """Scores of `rows` = batch·heads query/key blocks with per-head width `width`."""
    score, pairs = attention["score"], rows * queries * keys
    if score in ("dot", "scaled_dot", "cosine"):
        return 2 * pairs * width
    if score == "general":
        return linear(rows * keys, width, width) + 2 * pairs * width
    if score == "additive":
        inner = attention.get("hidden_dim") or width
        mapped = linear(rows * queries, width, inner) + linear(rows * keys, width, inner)
        return mapped + 2 * pairs * inner
    raise ValueError(f"attention.score={score!r}: no FLOP formula for it")


def region_flops(attention: dict[str, Any], query_rows: int, width: int) -> int:
    """Only local-p has products of its own: the centre predictor v_pᵀ tanh(W_p h_t)."""
    if attention["region"] == "local" and attention.get("local_mode") == "predictive":
        return linear(query_rows, width, width) + 2 * query_rows * width
    return 0


# ---------------------------------------------------------------- helpers


def _plain(cfg: DictConfig | dict) -> dict[str, Any]:
    if isinstance(cfg, DictConfig):
        return OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)  # type: ignore[return-value]
    return cfg


def _family(part: dict[str, Any]) -> str:
    """`seq2seq.models.encoders.RNNEncoder` → "RNN"."""
    name = part["_target_"].rsplit(".", 1)[-1]
    return name.removesuffix("Encoder").removesuffix("Decoder")


def _check_sizes(**sizes: int) -> None:
    """Every size must be an int >= 1 (a ValueError names the argument otherwise)."""
    for name, value in sizes.items():
        if not (isinstance(value, int) and value >= 1):
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
