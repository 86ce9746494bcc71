"""Build a `Seq2Seq` model from the composed config alone.

Each part's config node names its class with `_target_`; the builder adds the sizes that
depend on other parts (embedding width, the decoder's attention factory) and ties the
output projection to the target embeddings when asked.

Only the project's own classes are built, looked up by exact name in an allow-list (the
`_target_` defaults of the schemas in `seq2seq.config.schema`: the encoders, decoders, attention
classes and schedules of this package, and `torch.optim.AdamW`), and a
part is built without Hydra's recursive instantiation: a value below the top of a part is
passed as plain data, never built or called. A config read from a checkpoint is validated
first by `seq2seq.config.stored`.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf
from torch import nn

from seq2seq import registry
from seq2seq.config.schema import buildable_classes, nested_build_key
from seq2seq.models.alignment_layer import AlignmentLayer
from seq2seq.models.model import Bridge, Seq2Seq, TokenEmbedding
from seq2seq.special_tokens import SEP_ID


class ConfigError(ValueError):
    """A configuration value that cannot work, named by its key."""


def plain(node: Any) -> Any:
    """A config node as plain Python (enums as their names), ready for instantiate."""
    if isinstance(node, DictConfig):
        return OmegaConf.to_container(node, resolve=True, enum_to_str=True)
    return node


def allowed_target(config: Any, group: str) -> tuple[str, type]:
    """A part's `_target_` and its schema, if the group's allow-list holds that exact name;
    else a ConfigError naming `<group>._target_` and the allowed names."""
    target = config.get("_target_") if isinstance(config, dict) else None
    allowed = buildable_classes(group)
    if target not in allowed:
        raise ConfigError(
            f"{group}._target_: {target!r} is not one of the project's {group} classes "
            f"({', '.join(sorted(allowed))})"
        )
    return target, allowed[target]


def allowed_class(config: Any, group: str) -> type:
    """The class a part's config names, if the group's allow-list holds that exact name."""
    target, _ = allowed_target(config, group)
    return get_class(target)


def instantiate_part(node: Any, key: str, **kwargs: Any) -> Any:
    """Build the part `key` (a config group: encoder, decoder, attention, optim, schedule)
    from its node: the class comes from the allow-list, every other value is passed as a
    keyword argument as it is. `_partial_=True` returns a factory instead of an object.
    Any error the constructor raises becomes a ConfigError naming `key`."""
    config = plain(node)
    cls = allowed_class(config, key)
    nested = nested_build_key(config, key)
    if nested is not None:
        raise ConfigError(f"{nested}: a nested _target_ (or another Hydra key) is not allowed")
    partial = bool(kwargs.pop("_partial_", False))
    arguments = {name: value for name, value in config.items() if name != "_target_"}
    try:
        if partial:
            return functools.partial(cls, **arguments, **kwargs)
        return cls(**arguments, **kwargs)
    except Exception as error:
        raise ConfigError(f"{key}: {error}") from error


def build_model(cfg: DictConfig, src_vocab_size: int, tgt_vocab_size: int) -> Seq2Seq:
    """Embeddings, encoder, bridge, decoder and generator, as the config describes."""
    embed_dim = cfg.model.embed_dim
    src_embed = _embedding(cfg, src_vocab_size)
    tgt_embed = _embedding(cfg, tgt_vocab_size)
    encoder = instantiate_part(cfg.encoder, "encoder", embed_dim=embed_dim)
    attention_factory = instantiate_part(cfg.attention, "attention", _partial_=True)
    decoder = instantiate_part(
        cfg.decoder, "decoder", embed_dim=embed_dim, attention=attention_factory
    )
    bridge = _bridge(cfg, encoder)
    generator = nn.Linear(decoder.output_dim, tgt_vocab_size)
    if cfg.model.tie_embeddings:
        if decoder.output_dim != embed_dim:
            raise ConfigError(
                f"model.tie_embeddings=true needs the decoder's output width "
                f"({decoder.output_dim}) to equal model.embed_dim ({embed_dim})"
            )
        generator.weight = tgt_embed.embedding.weight
    return Seq2Seq(src_embed, tgt_embed, encoder, bridge, decoder, generator,
                   alignment_shift=alignment_shift(cfg, decoder.target_read_lag),
                   alignment_layer=alignment_layer(cfg, decoder.output_dim),
                   separator_id=sentence_separator(cfg))  # fmt: skip


def sentence_separator(cfg: DictConfig) -> int | None:
    """SEP_ID when the attention reads the source's sentences (`reads_sentences`, the
    hierarchical attention's) and the data are pseudo-documents (`data.documents`), whose
    sentences that piece separates; else None (one sentence)."""
    attention = registry.of_node("attention", cfg.attention).builder
    documents = cfg.get("data", {}).get("documents")
    return SEP_ID if getattr(attention, "reads_sentences", False) and documents else None


def _bridge(cfg: DictConfig, encoder: nn.Module) -> Bridge:
    """The bridge with the summary `model.summary` chooses (a ConfigError naming the key
    for one the encoder cannot give)."""
    summary = cfg.model.get("summary", "auto")  # configs stored before the key: auto
    try:
        return Bridge(encoder.output_dim, encoder.final_dim, cfg.decoder.hidden_size, summary)
    except ValueError as error:
        raise ConfigError(str(error)) from error


def alignment_layer(cfg: DictConfig, hidden_size: int) -> AlignmentLayer | None:
    """The separate alignment layer of `alignment=layer`, else None. Its weights are drawn
    with the random state restored afterwards, so that everything drawn after them (the
    data's order, dropout) is what it is without the layer."""
    node = cfg.get("alignment")
    if node is None or not node.get("separate"):
        return None
    query = node.get("query", "next")
    with torch.random.fork_rng(devices=[]):
        try:
            return AlignmentLayer(hidden_size, heads=int(node.get("layer_heads", 1)),
                                  gradient=float(node.get("gradient", 0.0)),
                                  query=str(getattr(query, "name", query)),
                                  embed_dim=cfg.model.embed_dim if node.get("embeddings")
                                  else None)  # fmt: skip
        except ValueError as error:
            raise ConfigError(f"alignment: {error}") from error


def alignment_shift(cfg: DictConfig, read_lag: int) -> int:
    """`alignment.shift` of a guided model (`seq2seq.training.guided_alignment`; null: the
    decoder's `read_lag`), else 0: an unguided model's attention is read as it is."""
    alignment = cfg.get("alignment")
    if alignment is None or not alignment.get("guided"):
        return 0
    shift = alignment.get("shift", 0)
    return read_lag if shift is None else int(shift)


def _embedding(cfg: DictConfig, vocab_size: int) -> TokenEmbedding:
    return TokenEmbedding(
        vocab_size,
        cfg.model.embed_dim,
        scale=cfg.model.scale_embeddings,
        dropout=cfg.model.embed_dropout,
        word_dropout=cfg.model.word_dropout,
    )


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters, tied weights counted once."""
    unique = {id(p): p for p in model.parameters() if p.requires_grad}
    return sum(p.numel() for p in unique.values())
