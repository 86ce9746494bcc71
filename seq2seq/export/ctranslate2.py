"""A Transformer checkpoint as a CTranslate2 model (`ctranslate2.specs.TransformerSpec`).

The project's pre-LN Transformer is the block CTranslate2 runs with `pre_norm=True`::

    encoder  h⁰ = √d·E[x] + P          hˡ = hˡ⁻¹ + SelfAttn(LN(hˡ⁻¹)); hˡ += FFN(LN(hˡ))
             memory = LN(hᴸ)
    decoder  like the encoder, with CrossAttn(LN(y), memory) between the two sublayers,
             then LN and the output projection W_out y + b_out

so the export is a renaming of weights (`MAPPING` below), with the multi-head projections
fused the way CTranslate2 stores them (self-attention: [W_Q; W_K; W_V] and W_O;
cross-attention: W_Q, [W_K; W_V] and W_O). What it writes explicitly, so that nothing is left
to CTranslate2's defaults: the position table (the sinusoids of `sinusoid_table`, or the
learned table), √d embedding scaling only when the model scales (`model.scale_embeddings`),
the LayerNorm epsilon, ReLU, and the output projection with its bias (tied or not to the
target embeddings, it is written as a matrix of its own). A single-head attention, which in
this project has no projections, is written with identity projections.

Anything else CTranslate2 raises while the model is converted, optimised (quantised) or
saved, a ValueError or RuntimeError of its own, is one ExportError line naming the stage
(`conversion_stage`); the earlier export, if any, is kept.

What CTranslate2 cannot run is refused with one ExportError line naming why: a
non-Transformer encoder or decoder, a cross-attention score other than scaled_dot or a
region other than soft, cross-attention heads that differ from the decoder's self-attention
heads, or a width change (embed_dim ≠ hidden_size, encoder width ≠ decoder width) that needs
a projection CTranslate2 has no place for.

The folder holds, beside CTranslate2's `model.bin`, `config.json` and vocabularies, the
checkpoint's tokenisers (`source.model` / `target.model` for sentencepiece) and
`seq2seq_export.json`, which `seq2seq.export.ctranslate2_translator` reads to tokenise and to bound lengths:
the longest source it keeps (`data.max_len`, at most the encoder's positions less EOS), the
decoder's positions, the two vocabulary sizes and the sha256 of every file but the weights,
which the engine checks at load (`seq2seq.export.parts`). The folder is written through
`seq2seq.output_folders`: checked before the conversion, written beside OUT and swapped in
when complete, and an earlier folder replaced (`--force`) only when it is an export this
command wrote (its `.seq2seq-output.json` lists every file in it).

Alignment: the caller (`seq2seq-export`) names the cross-attention layer and head the
checkpoint aligns with (`seq2seq.align.defaults`; head None for the layer's head mean), as
an `AlignmentHead`. The spec makes CTranslate2 return that attention: `alignment_layer`
is the layer, and `alignment_heads` is 1 with that head moved first (its rows of W_Q, W_K,
W_V and its columns of W_O moved together, which changes no output) or every head for the
mean, which CTranslate2 averages. `seq2seq_export.json` records it under `alignment`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import nn

from seq2seq.models.attention import Attention
from seq2seq.models.decoders.transformer import TransformerDecoder
from seq2seq.models.encoders.transformer import TransformerEncoder
from seq2seq.output_folders import claim_output_folder
from seq2seq.search.translator import Translator
from seq2seq.special_tokens import BOS_PIECE, EOS_PIECE, UNK_PIECE

QUANTIZATIONS = ("float32", "int8", "int16")
EXPORT_FORMAT = 1
META_FILE = "seq2seq_export.json"
WEIGHTS_FILE = "model.bin"
COMMAND = "seq2seq-export"
TOKENIZER_SUFFIX = {"sentencepiece": "model", "symbols": "json"}
INSTALL_HINT = "pip install 'seq2seq-attention[export]' (the ctranslate2 package)"


class ExportError(ValueError):
    """A checkpoint, option or folder the export cannot use; the message is one line."""


class AlignmentHead(NamedTuple):
    """The cross-attention to align with: `layer` (from 0, or negative from the end),
    `head` (from 0, or None for the layer's head mean), and where it comes from, in words."""

    layer: int
    head: int | None
    description: str


def import_ctranslate2():
    """The `ctranslate2` module, or ExportError saying how to install it."""
    try:
        import ctranslate2
    except ImportError as error:
        raise ExportError(f"ctranslate2 is not installed: {INSTALL_HINT}") from error
    return ctranslate2


# ---------------------------------------------------------------- what can be exported


@contextlib.contextmanager
def conversion_stage(stage: str) -> Iterator[None]:
    """Any error CTranslate2 raises in the block, as one ExportError line naming `stage`;
    an ExportError of ours and an OSError (the folder's, one line through
    `seq2seq.output_folders`) pass as they are, and so do Ctrl-C and SystemExit."""
    try:
        yield
    except (ExportError, OSError):
        raise
    except Exception as error:  # CTranslate2's own ValueError, RuntimeError, TypeError, ...
        reason = " ".join(str(error).split()) or "no message"
        raise ExportError(
            f"CTranslate2 failed to {stage} ({type(error).__name__}: {reason})"
        ) from error


def check_exportable(model: nn.Module, config: Any) -> None:
    """ExportError (one line) for the first part of the model CTranslate2 cannot express."""
    encoder, decoder = model.encoder, model.decoder
    if not isinstance(encoder, TransformerEncoder) or not isinstance(decoder, TransformerDecoder):
        raise ExportError(
            "the CTranslate2 export needs encoder=transformer and decoder=transformer; this "
            f"checkpoint has encoder={_family(config.encoder)} decoder={_family(config.decoder)}"
        )
    for name, part in (("encoder", encoder.input_projection), ("decoder", decoder.input_proj)):
        if not isinstance(part, nn.Identity):
            raise ExportError(
                f"model.embed_dim differs from {name}.hidden_size: CTranslate2 has no input "
                "projection after the embeddings"
            )
    if not isinstance(model.bridge.memory_proj, nn.Identity):
        raise ExportError(
            "encoder.hidden_size differs from decoder.hidden_size: CTranslate2 has no "
            "projection between encoder and decoder"
        )
    for layer in decoder.layers:
        _check_cross_attention(layer.cross_attention, layer.self_attention.heads)
    for layer in [*encoder.layers, *decoder.layers]:
        if not isinstance(layer.feed_forward.activation, nn.ReLU):
            raise ExportError("only the ReLU feed-forward block can be exported")
    epsilons = {norm.eps for norm in model.modules() if isinstance(norm, nn.LayerNorm)}
    if len(epsilons) != 1:
        raise ExportError(
            f"the LayerNorms differ in epsilon ({sorted(epsilons)}); CTranslate2 has one"
        )


def _check_cross_attention(attention: nn.Module, self_heads: int) -> None:
    if not isinstance(attention, Attention):
        raise ExportError(
            f"the cross-attention is {type(attention).__name__}; CTranslate2 runs "
            "attention=scaled_dot or multihead (scaled_dot score, soft region)"
        )
    if attention.score_name != "scaled_dot":
        raise ExportError(
            f"attention.score={attention.score_name}: CTranslate2 computes only the "
            "scaled_dot score softmax(QKᵀ/√d)"
        )
    if attention.region_name != "soft":
        raise ExportError(
            f"attention.region={attention.region_name}: CTranslate2 computes only the soft "
            "region (softmax over every source position)"
        )
    if attention.heads != self_heads:
        raise ExportError(
            f"attention.heads={attention.heads} differs from decoder.heads={self_heads}: "
            "CTranslate2 uses one head count per decoder"
        )
    if attention.heads > 1 and attention.query_proj.out_features != attention.query_dim:
        raise ExportError(
            "attention.head_dim × heads differs from decoder.hidden_size; CTranslate2 "
            "needs head_dim = hidden_size / heads"
        )


def _family(node: Any) -> str:
    """`rnn` of `seq2seq.models.encoders.RNNEncoder` (the target's class, less its part), for
    the refusal line."""
    target = str(node.get("_target_", "?")).rsplit(".", 1)[-1]
    for suffix in ("Encoder", "Decoder"):
        target = target.removesuffix(suffix)
    return target.lower() or "?"


# ---------------------------------------------------------------- the spec


def transformer_spec(
    model: nn.Module,
    vocabularies: tuple[list[str], list[str]],
    alignment: AlignmentHead | None = None,
):
    """The model as a filled `ctranslate2.specs.TransformerSpec` (check_exportable first),
    returning the attention of `alignment` (module docstring; None: the last layer's mean)."""
    ctranslate2 = import_ctranslate2()
    specs = ctranslate2.specs
    encoder, decoder = model.encoder, model.decoder
    heads = decoder.layers[0].self_attention.heads
    aligned, head = _alignment_layer_head(alignment, len(decoder.layers), heads)
    spec = specs.TransformerSpec(
        specs.TransformerEncoderSpec(
            len(encoder.layers), encoder.layers[0].self_attention.heads, pre_norm=True
        ),
        specs.TransformerDecoderSpec(
            len(decoder.layers),
            heads,
            pre_norm=True,
            alignment_layer=aligned,
            alignment_heads=heads if head is None else 1,  # CTranslate2 averages the first n
        ),
    )
    _set_inputs(spec.encoder, model.src_embed, encoder.positions)
    _set_inputs(spec.decoder, model.tgt_embed, decoder.positions)
    _set_norm(spec.encoder.layer_norm, encoder.final_norm)
    _set_norm(spec.decoder.layer_norm, decoder.final_norm)
    for layer_spec, layer in zip(spec.encoder.layer, encoder.layers):
        _set_self_attention(layer_spec.self_attention, layer.self_attention, layer.attention_norm)
        _set_ffn(layer_spec.ffn, layer.feed_forward, layer.feed_forward_norm)
    for index, (layer_spec, part) in enumerate(zip(spec.decoder.layer, decoder.layers)):
        first = head if index == aligned else None
        _set_self_attention(layer_spec.self_attention, part.self_attention, part.self_norm)
        _set_cross_attention(layer_spec.attention, part.cross_attention, part.cross_norm, first)
        _set_ffn(layer_spec.ffn, part.feed_forward, part.ff_norm)
    _set_linear(spec.decoder.projection, model.generator.weight, model.generator.bias)
    eps = next(norm.eps for norm in model.modules() if isinstance(norm, nn.LayerNorm))
    spec.config.layer_norm_epsilon = float(eps)
    spec.config.unk_token, spec.config.bos_token = UNK_PIECE, BOS_PIECE
    spec.config.eos_token, spec.config.decoder_start_token = EOS_PIECE, BOS_PIECE
    spec.config.add_source_bos = spec.config.add_source_eos = False  # the engine adds EOS
    spec.register_source_vocabulary(vocabularies[0])
    spec.register_target_vocabulary(vocabularies[1])
    return spec


def _alignment_layer_head(
    alignment: AlignmentHead | None, layers: int, heads: int
) -> tuple[int, int | None]:
    """(layer from 0, head or None) of `alignment`; the last layer's mean when None."""
    if alignment is None:
        return layers - 1, None
    if not -layers <= alignment.layer < layers:
        raise ExportError(f"alignment layer {alignment.layer}: the decoder has {layers} layer(s)")
    if alignment.head is not None and not 0 <= alignment.head < heads:
        raise ExportError(f"alignment head {alignment.head}: the model has {heads} head(s)")
    return alignment.layer % layers, None if heads == 1 else alignment.head


def _array(tensor: torch.Tensor):
    return tensor.detach().to("cpu", torch.float32).contiguous().numpy().copy()


def _set_inputs(spec, embedding, positions) -> None:
    """Embeddings, √d scaling exactly when the model scales, and the full position table."""
    tables = spec.embeddings if isinstance(spec.embeddings, list) else [spec.embeddings]
    tables[0].weight = _array(embedding.embedding.weight)  # (vocab, d); the encoder has a list
    scaled = embedding.scale != 1.0
    if scaled and not math.isclose(embedding.scale, math.sqrt(embedding.dim)):
        raise ExportError(f"embedding scale {embedding.scale} is not √d; CTranslate2 scales by √d")
    spec.scale_embeddings = scaled
    spec.position_encodings.encodings = _array(positions.table())  # (max_positions, d)


def _set_norm(spec, norm: nn.LayerNorm) -> None:
    spec.gamma, spec.beta = _array(norm.weight), _array(norm.bias)


def _set_linear(spec, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
    spec.weight = _array(weight)  # (out, in), torch's layout
    if bias is not None:
        spec.bias = _array(bias)


def _projections(attention: Attention) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(weight, bias) of W_Q, W_K, W_V, W_O; identity maps for a single head, which has none."""
    if attention.heads > 1:
        parts = (attention.query_proj, attention.key_proj, attention.value_proj,
                 attention.output_proj)  # fmt: skip
        return [(part.weight, part.bias) for part in parts]
    width = attention.query_dim
    identity = (torch.eye(width), torch.zeros(width))
    return [identity] * 4


def _head_first(
    projections: list[tuple[torch.Tensor, torch.Tensor]], heads: int, head: int
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """W_Q, W_K, W_V, W_O with `head` moved to the front: its block of output rows in the
    first three and its block of input columns in W_O, so the attention's output is unchanged."""
    width = projections[0][0].size(0) // heads
    order = [head, *(h for h in range(heads) if h != head)]
    rows = torch.cat([torch.arange(h * width, (h + 1) * width) for h in order])
    moved = [(weight[rows], bias[rows]) for weight, bias in projections[:3]]
    weight, bias = projections[3]
    return [*moved, (weight[:, rows], bias)]


def _fused(pairs: Sequence[tuple[torch.Tensor, torch.Tensor]]):
    weights = torch.cat([weight for weight, _ in pairs], dim=0)  # (k · out, in)
    return weights, torch.cat([bias for _, bias in pairs], dim=0)


def _set_self_attention(spec, attention: Attention, norm: nn.LayerNorm) -> None:
    query, key, value, output = _projections(attention)
    _set_linear(spec.linear[0], *_fused([query, key, value]))
    _set_linear(spec.linear[1], *output)
    _set_norm(spec.layer_norm, norm)


def _set_cross_attention(
    spec, attention: Attention, norm: nn.LayerNorm, first: int | None = None
) -> None:
    """The cross-attention, with head `first` (if not None) moved to the front."""
    projections = _projections(attention)
    if first is not None:
        projections = _head_first(projections, attention.heads, first)
    query, key, value, output = projections
    _set_linear(spec.linear[0], *query)
    _set_linear(spec.linear[1], *_fused([key, value]))
    _set_linear(spec.linear[2], *output)
    _set_norm(spec.layer_norm, norm)


def _set_ffn(spec, feed_forward, norm: nn.LayerNorm) -> None:
    _set_norm(spec.layer_norm, norm)
    _set_linear(spec.linear_0, feed_forward.expand.weight, feed_forward.expand.bias)
    _set_linear(spec.linear_1, feed_forward.contract.weight, feed_forward.contract.bias)


# ---------------------------------------------------------------- the folder


def vocabulary(tokenizer) -> list[str]:
    """The pieces of ids 0..V-1, which CTranslate2 maps back to those ids; ExportError when
    two ids share a piece (CTranslate2 looks tokens up by their text)."""
    pieces = [tokenizer.id_to_piece(index) for index in range(tokenizer.vocab_size)]
    if len(set(pieces)) != len(pieces):
        raise ExportError(
            "the tokeniser has two ids with the same piece; CTranslate2 needs unique pieces"
        )
    return pieces


def export_ctranslate2(
    checkpoint: str | Path,
    out_dir: str | Path,
    quantization: str = "float32",
    force: bool = False,
    choose_alignment: Callable[[Translator], AlignmentHead | None] | None = None,
) -> Path:
    """Convert `checkpoint` (loaded by `Translator.load`: weights_only, validated) into the
    CTranslate2 folder `out_dir`, weights stored as `quantization`; ExportError (one line)
    when the model or the folder cannot be used. CheckpointError comes from the loader.
    `choose_alignment` names the attention the folder returns for alignments (module
    docstring); without it, or when it gives None, the folder records no alignment."""
    if quantization not in QUANTIZATIONS:
        raise ExportError(
            f"--quantization must be one of {', '.join(QUANTIZATIONS)}, got {quantization!r}"
        )
    place = claim_output_folder(
        out_dir, command=COMMAND, inputs=[Path(checkpoint)], force=force
    )  # before any work: a place we may write, never a folder we did not make
    import_ctranslate2()
    translator = Translator.load(checkpoint, "cpu")
    check_exportable(translator.model, translator.config)
    tokenizers = (translator.src_tokenizer, translator.tgt_tokenizer)
    alignment = choose_alignment(translator) if choose_alignment is not None else None
    vocabularies = (vocabulary(tokenizers[0]), vocabulary(tokenizers[1]))
    with conversion_stage("convert the model"):
        spec = transformer_spec(translator.model, vocabularies, alignment)
        spec.validate()
    with conversion_stage(f"optimise the model to {quantization}"):
        spec.optimize(quantization=quantization)
    with place.writing() as folder:  # swapped in only once complete
        with conversion_stage("save the model"):
            spec.save(str(folder))
        _write_side_files(folder, translator, quantization, Path(checkpoint).name, alignment)
    return Path(out_dir)


def file_fingerprint(path: Path) -> str:
    """`sha256:<hex>` of the file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return f"sha256:{digest.hexdigest()}"


def fingerprints(folder: Path) -> dict[str, str]:
    """The fingerprint of every file of the folder but the weights (`model.bin`, large)
    and the metadata: the tokenisers, vocabularies and CTranslate2's config, which the
    engine checks belong together at load (`seq2seq.export.parts`)."""
    skipped = {WEIGHTS_FILE, META_FILE}
    return {path.name: file_fingerprint(path) for path in sorted(folder.iterdir())
            if path.is_file() and path.name not in skipped}  # fmt: skip


def _source_limit(translator: Translator) -> int:
    """The most source pieces a sentence keeps: `data.max_len`, and never more than the
    encoder's position table holds with the EOS after them."""
    return min(translator.max_source_len, translator.model.encoder.positions.max_positions - 1)


def _write_side_files(
    out_dir: Path, translator: Translator, quantization: str, name: str,
    alignment: AlignmentHead | None,
) -> None:  # fmt: skip
    """The tokenisers as their own files, and what the engine needs to search as the
    project does and to align (`seq2seq_export.json`; `alignment` null when not chosen)."""
    sides = {}
    for side, stem, tokenizer in (("src", "source", translator.src_tokenizer),
                                  ("tgt", "target", translator.tgt_tokenizer)):  # fmt: skip
        file_name = f"{stem}.{TOKENIZER_SUFFIX.get(tokenizer.kind, 'bin')}"
        (out_dir / file_name).write_bytes(tokenizer.to_bytes())
        sides[side] = {"kind": tokenizer.kind, "lang": tokenizer.lang, "file": file_name}
    meta = {
        "format": EXPORT_FORMAT,
        "engine": "ctranslate2",
        "quantization": quantization,
        "checkpoint": name,
        "tokenizers": sides,
        "max_source_len": _source_limit(translator),
        "decoder_positions": translator.model.decoder.positions.max_positions,
        "src_lang": str(translator.config.data.src_lang),
        "tgt_lang": str(translator.config.data.tgt_lang),
        "alignment": None if alignment is None else alignment._asdict(),
        "vocabulary_sizes": {"src": translator.src_tokenizer.vocab_size,
                             "tgt": translator.tgt_tokenizer.vocab_size},
        "fingerprints": fingerprints(out_dir),
    }  # fmt: skip
    (out_dir / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
