"""Argument checks, small tensor helpers and the cached-decoder base shared by the decoders."""

from __future__ import annotations

import torch

from seq2seq.models.base import Decoder, DecoderState


def check_memory(memory: torch.Tensor, src_mask: torch.Tensor, hidden_size: int) -> None:
    """Raise ValueError unless `memory (B, S, hidden_size)` and `src_mask (B, S)` bool fit."""
    if memory.dim() != 3 or memory.size(-1) != hidden_size:
        raise ValueError(
            f"memory must be (batch, src_len, {hidden_size}) (the bridge projects it to the "
            f"decoder's hidden_size), got {tuple(memory.shape)}"
        )
    if src_mask.dtype != torch.bool or src_mask.shape != memory.shape[:2]:
        raise ValueError(
            f"src_mask must be a bool tensor of shape {tuple(memory.shape[:2])}, "
            f"got {src_mask.dtype} {tuple(src_mask.shape)}"
        )


def segment_keyword(segments: torch.Tensor | None) -> dict[str, torch.Tensor]:
    """`{"segments": segments}` for an attention that reads the source's sentences
    (`seq2seq.models.attention.hierarchical`), `{}` without: the keyword arguments a decoder
    adds to `init_state` and `attend`, so that every other attention is called as before."""
    return {} if segments is None else {"segments": segments}


def with_segments(state: DecoderState, segments: torch.Tensor | None) -> DecoderState:
    """The state with the source's sentence index per position `(B, S)` long, when given."""
    return state if segments is None else {**state, "segments": segments}


def check_target(tgt_embedded: torch.Tensor, embed_dim: int, *, single_step: bool) -> None:
    """Raise ValueError unless `tgt_embedded` is `(B, T, embed_dim)`, with T == 1 for a step."""
    if tgt_embedded.dim() != 3 or tgt_embedded.size(-1) != embed_dim:
        raise ValueError(
            f"tgt_embedded must be (batch, tgt_len, {embed_dim}), got {tuple(tgt_embedded.shape)}"
        )
    if single_step and tgt_embedded.size(1) != 1:
        raise ValueError(
            f"step() takes one position: tgt_embedded (batch, 1, {embed_dim}), "
            f"got {tuple(tgt_embedded.shape)}"
        )
    if tgt_embedded.size(1) == 0:
        raise ValueError("tgt_embedded has no positions (tgt_len == 0)")


def target_positions(offset: int, length: int, device: torch.device) -> torch.Tensor:
    """Absolute target positions `offset .. offset + length - 1` as a `(length,)` long tensor.

    Passed to attention as `query_positions` (local-m attention centres its window there).
    """
    return torch.arange(offset, offset + length, device=device)


def stack_layers(weights: list[torch.Tensor | None]) -> torch.Tensor | None:
    """Per-layer `(B, H, T, S)` attention weights -> `(B, layers, H, T, S)`, or None.

    None when any layer returned None (NoAttention, or the fused path with
    `need_weights=False`).
    """
    if not weights or any(layer is None for layer in weights):
        return None
    return torch.stack(weights, dim=1)  # (batch, layers, heads, tgt_len, src_len)


def concat_steps(weights: list[torch.Tensor | None]) -> torch.Tensor | None:
    """Per-step `(B, H, 1, S)` weights -> `(B, H, T, S)` (concatenated on time), or None."""
    if not weights or any(step is None for step in weights):
        return None
    return torch.cat(weights, dim=2)  # (batch, heads, tgt_len, src_len)


class CachedDecoder(Decoder):
    """A decoder whose teacher-forced pass and single step are one computation, `_run`:
    T positions after those already in the state (the Transformer's key/value cache, the
    ConvS2S input window), returning the state advanced by T."""

    embed_dim: int

    def forward(
        self, tgt_embedded: torch.Tensor, state: DecoderState, need_weights: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Teacher forcing: `(B, T, embed_dim)` -> `(B, T, hidden)`, attn `(B, layers, H, T, S)`."""
        check_target(tgt_embedded, self.embed_dim, single_step=False)
        hidden, attn, _ = self._run(tgt_embedded, state, need_weights)
        return hidden, attn

    def step(
        self, tgt_embedded: torch.Tensor, state: DecoderState, need_weights: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor | None, DecoderState]:
        """One position: `(B, 1, embed_dim)` -> `(B, 1, hidden)`, `(B, layers, H, 1, S)`, state."""
        check_target(tgt_embedded, self.embed_dim, single_step=True)
        return self._run(tgt_embedded, state, need_weights)

    def _run(
        self, tgt_embedded: torch.Tensor, state: DecoderState, need_weights: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None, DecoderState]:
        raise NotImplementedError
