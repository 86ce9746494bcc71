"""The encoder-decoder model: embeddings, encoder, bridge, decoder, generator.

`Seq2Seq` is composed from parts that know nothing of each other's internals: any encoder
works with any decoder because the bridge adapts the encoder's output to the decoder's
width and initial state. `build_model` (in `seq2seq.config.build`) makes one from config.
"""

from __future__ import annotations

import math
from dataclasses import replace

import torch
from torch import nn

from seq2seq.models.alignment_layer import AlignmentLayer
from seq2seq.models.attention.pooling import AttentionPooling
from seq2seq.models.base import Decoder, DecoderState, Encoder, EncoderOutput
from seq2seq.models.decoders.common import segment_keyword
from seq2seq.models.dropout import ElementDropout, TokenDropout
from seq2seq.special_tokens import PAD_ID


class TokenEmbedding(nn.Module):
    """Token embeddings, optionally scaled by √d (Vaswani et al. 2017 §3.4), then word dropout
    (whole embeddings zeroed, one draw per token: `seq2seq.models.dropout`) and dropout."""

    def __init__(
        self,
        vocab_size: int,
        dim: int,
        *,
        scale: bool = True,
        dropout: float = 0.0,
        word_dropout: float = 0.0,
    ):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, dim, padding_idx=PAD_ID)
        nn.init.normal_(self.embedding.weight, mean=0.0, std=dim**-0.5)
        with torch.no_grad():
            self.embedding.weight[PAD_ID].zero_()
        self.scale = math.sqrt(dim) if scale else 1.0
        self.word_dropout = TokenDropout(word_dropout)
        self.dropout = ElementDropout(dropout)
        self.dim = dim

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        # (batch, time) -> (batch, time, dim)
        return self.dropout(self.word_dropout(self.embedding(tokens) * self.scale))


def document_segments(src: torch.Tensor, separator_id: int) -> torch.Tensor:
    """The sentence of each source position in a document whose sentences are separated by
    the piece `separator_id`: `(batch, src_len)` long, 0 for the first sentence; a separator
    belongs to the sentence it ends, the EOS (and padding) to the last.

    `[a b <sep> c </s>]` -> `[0 0 0 1 1]`."""
    separators = (src == separator_id).long()  # (batch, src_len)
    return separators.cumsum(dim=1) - separators


def masked_mean(values: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean over the real positions: (batch, time, dim), (batch, time) -> (batch, dim)."""
    weights = mask.unsqueeze(-1).to(values.dtype)  # (batch, time, 1)
    total = (values * weights).sum(dim=1)
    count = weights.sum(dim=1).clamp_min(1.0)
    return total / count


SUMMARIES = ("auto", "final", "mean", "attention_pool")


class Bridge(nn.Module):
    """Adapts an encoder's output to a decoder.

    * memory: projected to the decoder's width when the widths differ (a bi-RNN's 2·h, say);
    * initial hidden state: h₀ = tanh(W s + b), where s summarises the source
      (`model.summary`): the encoder's final state (`final`), the mean of the (projected)
      memory (`mean`), their attention pooling `s = Σ_j α_j m_j`, α from one learned query
      (`attention_pool`, `seq2seq.models.attention.pooling`), or `auto`: the final state
      when the encoder has one (RNN, LSTM, GRU), else the mean (CNN, Transformer).
    """

    def __init__(
        self, memory_dim: int, final_dim: int | None, hidden_size: int, summary: str = "auto"
    ):
        super().__init__()
        self.summary = resolved_summary(summary, final_dim)
        self.memory_proj = (
            nn.Linear(memory_dim, hidden_size) if memory_dim != hidden_size else nn.Identity()
        )
        summary_dim = final_dim if self.summary == "final" else hidden_size
        self.init_proj = nn.Linear(summary_dim, hidden_size)
        # registered after init_proj, so that the other summaries keep their parameters' order
        self.pooling = AttentionPooling(hidden_size) if self.summary == "attention_pool" else None

    def forward(self, encoded: EncoderOutput) -> tuple[torch.Tensor, torch.Tensor]:
        memory = self.memory_proj(encoded.memory)  # (batch, src_len, hidden)
        memory = memory * encoded.mask.unsqueeze(-1).to(memory.dtype)
        if self.summary == "final":
            summary = encoded.final  # (batch, final_dim)
        elif self.pooling is not None:
            summary = self.pooling(memory, encoded.mask)[0]  # (batch, hidden)
        else:
            summary = masked_mean(memory, encoded.mask)  # (batch, hidden)
        init_hidden = torch.tanh(self.init_proj(summary))  # (batch, hidden)
        return memory, init_hidden

    def pooling_weights(self, encoded: EncoderOutput) -> torch.Tensor:
        """α of `summary="attention_pool"`: `(batch, src_len)`, 0 on padding."""
        if self.pooling is None:
            raise ValueError(f"model.summary={self.summary} has no pooling weights")
        memory = self.memory_proj(encoded.memory)
        memory = memory * encoded.mask.unsqueeze(-1).to(memory.dtype)
        return self.pooling.weights(memory, encoded.mask)


def resolved_summary(summary: str, final_dim: int | None) -> str:
    """The summary `Bridge` uses: `auto` resolved by the encoder (final state or mean);
    ValueError naming `model.summary` for an unknown one, or `final` for an encoder
    without a final state."""
    if summary not in SUMMARIES:
        raise ValueError(f"model.summary must be one of {', '.join(SUMMARIES)}, not {summary!r}")
    if summary == "auto":
        return "mean" if final_dim is None else "final"
    if summary == "final" and final_dim is None:
        raise ValueError(
            "model.summary=final needs an encoder with a final state (rnn, lstm, gru); "
            "this encoder has none: use mean or attention_pool"
        )
    return summary


class Seq2Seq(nn.Module):
    """Embeddings → encoder → bridge → decoder → generator (a linear layer to the vocabulary).

    The interface that search and training use:
    * `forward(src, src_mask, tgt_in)` → logits `(batch, tgt_len, vocab)`, attention;
    * `encode`, `init_decoder_state`, `decode_step` for step-by-step decoding.
    """

    def __init__(
        self,
        src_embed: TokenEmbedding,
        tgt_embed: TokenEmbedding,
        encoder: Encoder,
        bridge: Bridge,
        decoder: Decoder,
        generator: nn.Linear,
        alignment_shift: int = 0,
        alignment_layer: AlignmentLayer | None = None,
        separator_id: int | None = None,
    ):
        super().__init__()
        # The piece between the sentences of a document: with it, `encode` gives the
        # decoder's attention each source position's sentence (`document_segments`)
        self.separator_id = separator_id
        # Where the model's attention is read as word links: the row of target piece t is
        # the decoder step t + alignment_shift (`alignment.shift` of a guided model)
        self.alignment_shift = alignment_shift
        self.src_embed = src_embed
        self.tgt_embed = tgt_embed
        self.encoder = encoder
        self.bridge = bridge
        self.decoder = decoder
        self.generator = generator
        # `alignment=layer`: the attention that learns word links and predicts nothing
        # (`seq2seq.models.alignment_layer`); registered last, so that the translation
        # model's parameters keep their order
        self.alignment_layer = alignment_layer

    def encode(self, src: torch.Tensor, src_mask: torch.Tensor) -> EncoderOutput:
        encoded = self.encoder(self.src_embed(src), src_mask)
        if self.separator_id is None:
            return encoded
        return replace(encoded, segments=document_segments(src, self.separator_id))

    def init_decoder_state(self, encoded: EncoderOutput) -> DecoderState:
        memory, init_hidden = self.bridge(encoded)
        return self._decoder_state(memory, encoded, init_hidden)

    def _decoder_state(self, memory, encoded: EncoderOutput, init_hidden) -> DecoderState:
        """The decoder's first state; the source's sentences passed on when there are any."""
        return self.decoder.init_state(
            memory, encoded.mask, init_hidden, **segment_keyword(encoded.segments)
        )

    def forward(
        self,
        src: torch.Tensor,  # (batch, src_len)
        src_mask: torch.Tensor,  # (batch, src_len)
        tgt_in: torch.Tensor,  # (batch, tgt_len), starts with BOS
        need_weights: bool = False,
        full_context: bool = False,
        future_mask: bool = True,
        alignment_layer: bool = False,
    ) -> tuple[torch.Tensor, ...]:
        """Teacher forcing: logits (batch, tgt_len, vocab) and the attention weights
        (batch, layers, heads, tgt_len, src_len), or None without `need_weights` where the
        fused kernel ran. `full_context` (a decoder with a `full_context` pass, the
        Transformer's): the weights are those of a second decoder pass without the future
        mask (Garg et al. 2019), the logits still those of the causal pass.

        `future_mask=False` (such a decoder only) runs the one pass without the future
        mask, so position t sees the targets after it, the very tokens it is to predict:
        no model should train so; it exists for the lab's experiment on masks
        (`seq2seq.lab.masks`), which shows what goes wrong.

        `alignment_layer=True` returns `forward_aligned`'s three tensors, the alignment
        layer's weights third (through `__call__`, so that a DDP wrapper sees the pass)."""
        if alignment_layer:
            return self.forward_aligned(src, src_mask, tgt_in, need_weights)
        state = self.init_decoder_state(self.encode(src, src_mask))
        tgt_embedded = self.tgt_embed(tgt_in)  # (batch, tgt_len, embed)
        if future_mask:
            hidden, attention = self.decoder(tgt_embedded, state, need_weights=need_weights)
        else:
            hidden, attention = self._unmasked_pass(tgt_embedded, state, tgt_in, need_weights)
        if full_context:
            attention = self.decoder.full_context(tgt_embedded, state, tgt_in != PAD_ID)
        return self.generator(hidden), attention  # (batch, tgt_len, vocab)

    def forward_aligned(
        self,
        src: torch.Tensor,  # (batch, src_len)
        src_mask: torch.Tensor,  # (batch, src_len)
        tgt_in: torch.Tensor,  # (batch, tgt_len), starts with BOS
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """Teacher forcing with the alignment layer: the logits and attention of `forward`
        and the layer's weights (batch, layer heads, tgt_len, src_len), row t that of
        target piece t (`tgt_out[:, t]`), in float32. ValueError without a layer."""
        hidden, attention, aligned = self._decoded(src, src_mask, tgt_in, need_weights)
        return self.generator(hidden), attention, aligned

    @torch.no_grad()
    def alignment_weights(
        self, src: torch.Tensor, src_mask: torch.Tensor, tgt_in: torch.Tensor
    ) -> torch.Tensor:
        """The alignment layer's weights (batch, heads, tgt_len, src_len) of `forward_aligned`,
        without the generator."""
        return self._decoded(src, src_mask, tgt_in, need_weights=False)[2]

    def _decoded(self, src, src_mask, tgt_in, need_weights: bool):
        """(decoder outputs, attention, alignment layer weights) of a teacher-forced pass."""
        layer = self.alignment_layer
        if layer is None:
            raise ValueError("the model has no alignment layer (alignment=layer adds one)")
        encoded = self.encode(src, src_mask)
        memory, init_hidden = self.bridge(encoded)
        state = self._decoder_state(memory, encoded, init_hidden)
        tgt_embedded = self.tgt_embed(tgt_in)  # (batch, tgt_len, embed)
        hidden, attention = self.decoder(tgt_embedded, state, need_weights=need_weights)
        queries = hidden
        if layer.query == "full_context":  # a second pass without the future mask
            queries = self._unmasked_pass(tgt_embedded, state, tgt_in, need_weights=False)[0]
        embedded = None
        if layer.embedding_query is not None:  # the pieces' embeddings, without dropout
            embedded = (self.tgt_embed.embedding(tgt_in), self.src_embed.embedding(src))
        return hidden, attention, layer(queries, memory, encoded.mask, embedded)

    @torch.no_grad()
    def pooling_weights(
        self, src: torch.Tensor, src_mask: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        """The weights of every attention pooling over the source (N vs 1,
        `seq2seq.models.attention.pooling`), each `(batch, src_len)`, 0 on padding:
        `summary` for `model.summary=attention_pool` (what starts the decoder), and the one
        context of `attention=none attention.context=attention_pool`, named by its module
        (`context` for a decoder with one attention, `context.<layer>` for one per layer).
        Empty for a model without one."""
        encoded = self.encode(src, src_mask)
        found: dict[str, torch.Tensor] = {}
        if self.bridge.pooling is not None:
            found["summary"] = self.bridge.pooling_weights(encoded)
        memory = self.bridge(encoded)[0]  # what the decoder's attention reads
        pooled = [module for module in self.decoder.modules()
                  if getattr(module, "pooling", None) is not None
                  and hasattr(module, "pooling_weights")]  # fmt: skip
        for index, module in enumerate(pooled):
            name = "context" if len(pooled) == 1 else f"context.{index}"
            found[name] = module.pooling_weights(memory, encoded.mask)
        return found

    def parameter_groups(self) -> list[list[nn.Parameter]]:
        """The parameters clipped together: the translation model's, then the alignment
        layer's on their own (so that a layer whose gradient is stopped leaves the
        translation model's updates as they would be without it)."""
        layer = self.alignment_layer
        own = set() if layer is None else {id(p) for p in layer.parameters()}
        groups = [[p for p in self.parameters() if id(p) not in own]]
        return groups if layer is None else [*groups, list(layer.parameters())]

    def _unmasked_pass(self, tgt_embedded, state, tgt_in, need_weights: bool):
        """The decoder's teacher-forced pass without the future mask (padding still masked)."""
        if not hasattr(self.decoder, "full_context"):
            raise ValueError(
                "future_mask=False needs a decoder with a pass without the future mask (the "
                f"Transformer's); {type(self.decoder).__name__} has none"
            )
        target_mask = tgt_in != PAD_ID  # (batch, tgt_len)
        return self.decoder(tgt_embedded, state, need_weights=need_weights, target_mask=target_mask)

    def decode_step(
        self, prev_tokens: torch.Tensor, state: DecoderState, need_weights: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor | None, DecoderState]:
        """One decoding step: (batch,) previous tokens -> (batch, vocab) log-probabilities."""
        embedded = self.tgt_embed(prev_tokens.unsqueeze(1))  # (batch, 1, embed)
        hidden, attention, state = self.decoder.step(embedded, state, need_weights=need_weights)
        logits = self.generator(hidden.squeeze(1)).float()  # (batch, vocab)
        return torch.log_softmax(logits, dim=-1), attention, state
