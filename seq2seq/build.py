"""Build a `Seq2Seq` model from the composed config alone.

Each part's config node names its class with `_target_`; the builder adds the sizes that
depend on other parts (embedding width, the decoder's attention factory) and ties the
output projection to the target embeddings when asked. Only classes inside the `seq2seq`
package are instantiated, so a config read from a downloaded checkpoint cannot run code.
"""

from __future__ import annotations

from typing import Any

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf
from torch import nn

from seq2seq.models.model import Bridge, Seq2Seq, TokenEmbedding

ALLOWED_TARGET_PREFIXES = ("seq2seq.", "torch.optim.")


class ConfigError(ValueError):
    """A configuration value that cannot work, named by its key."""


def plain(node: Any) -> Any:
    """A config node as plain Python (enums as their names), ready for instantiate."""
    if isinstance(node, DictConfig):
        return OmegaConf.to_container(node, resolve=True, enum_to_str=True)
    return node


def instantiate_part(node: Any, key: str, **kwargs: Any) -> Any:
    """`instantiate` a config node, refusing targets outside the project and naming `key`
    in any error the constructor raises."""
    config = plain(node)
    target = config.get("_target_", "") if isinstance(config, dict) else ""
    if not target.startswith(ALLOWED_TARGET_PREFIXES):
        raise ConfigError(f"{key}._target_={target!r} is not a seq2seq or torch.optim class")
    try:
        return instantiate(config, **kwargs)
    except Exception as error:
        cause = error.__cause__ or error
        raise ConfigError(f"{key}: {cause}") from error


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
    bridge = Bridge(encoder.output_dim, encoder.final_dim, cfg.decoder.hidden_size)
    generator = nn.Linear(decoder.output_dim, tgt_vocab_size)
    if cfg.model.tie_embeddings:
        if decoder.output_dim != embed_dim:
            raise ConfigError(
                f"model.tie_embeddings=true needs the decoder's output width "
                f"({decoder.output_dim}) to equal model.embed_dim ({embed_dim})"
            )
        generator.weight = tgt_embed.embedding.weight
    return Seq2Seq(src_embed, tgt_embed, encoder, bridge, decoder, generator)


def _embedding(cfg: DictConfig, vocab_size: int) -> TokenEmbedding:
    return TokenEmbedding(
        vocab_size,
        cfg.model.embed_dim,
        scale=cfg.model.scale_embeddings,
        dropout=cfg.model.embed_dropout,
    )


def count_parameters(model: nn.Module) -> int:
    """Trainable parameters, tied weights counted once."""
    unique = {id(p): p for p in model.parameters() if p.requires_grad}
    return sum(p.numel() for p in unique.values())
