"""The JoeyNMT 2.3 config with the shape and training settings of one of our resolved presets.

A Transformer (pre-LN) or a recurrent encoder-decoder with additive (Bahdanau) attention;
AdamW with our betas, weight decay and inverse-sqrt warm-up; token batches of our budget;
our sentencepiece models and piece lists as its vocabularies. Validation is off: its
frequency is a multiple of the log interval that no run reaches. A family or setting
JoeyNMT has no counterpart of is refused (ValueError), never approximated silently.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from seq2seq.models.attention.options import component_name
from tools.bench.peer.shared_settings import DECODE_BATCH, JOEYNMT_VERSION, LENGTH_PENALTY, NEVER


def joey_model_section(ours: Mapping[str, Any]) -> dict[str, Any]:
    """JoeyNMT's `model:` section with the shape of our resolved config (plain dicts):
    a Transformer (pre-LN) or a recurrent encoder-decoder with additive attention."""
    model, enc, dec = ours["model"], ours["encoder"], ours["decoder"]
    embeddings = {
        "embedding_dim": model["embed_dim"],
        "scale": bool(model["scale_embeddings"]),
        "dropout": model["embed_dropout"],
    }
    return {
        "tied_embeddings": False,  # separate zh and en vocabularies
        "tied_softmax": bool(model["tie_embeddings"]),  # target embeddings = output layer
        "encoder": _joey_encoder(enc, embeddings),
        "decoder": _joey_decoder(dec, ours["attention"], embeddings),
    }


def _family(part: Mapping[str, Any]) -> str:
    """`transformer` or `recurrent` from our `_target_`; ValueError for other families."""
    target = str(part["_target_"])
    if target.endswith("TransformerEncoder") or target.endswith("TransformerDecoder"):
        return "transformer"
    if target.endswith("RNNEncoder") or target.endswith("RNNDecoder"):
        return "recurrent"
    raise ValueError(f"JoeyNMT has no counterpart of {target}")


def _joey_encoder(enc: Mapping[str, Any], embeddings: dict[str, Any]) -> dict[str, Any]:
    if _family(enc) == "transformer":
        return {
            "type": "transformer",
            "num_layers": enc["num_layers"],
            "num_heads": enc["heads"],
            "hidden_size": enc["hidden_size"],
            "ff_size": enc["ff_size"],
            "dropout": enc["dropout"],
            "layer_norm": "pre",
            "embeddings": dict(embeddings),
        }
    return {
        "type": "recurrent",
        "rnn_type": _cell(enc),
        "hidden_size": enc["hidden_size"],
        "num_layers": enc["num_layers"],
        "bidirectional": bool(enc["bidirectional"]),
        "dropout": enc["dropout"],
        "embeddings": dict(embeddings),
    }


def _joey_decoder(
    dec: Mapping[str, Any], attention: Mapping[str, Any], embeddings: dict[str, Any]
) -> dict[str, Any]:
    if _family(dec) == "transformer":
        return _joey_encoder(dec, embeddings)  # the same keys
    score = component_name(attention["score"])  # a name or a node {name, <its options>}
    if score != "additive":
        raise ValueError(f"JoeyNMT's recurrent decoder has no {score} attention")
    return {
        "type": "recurrent",
        "rnn_type": _cell(dec),
        "hidden_size": dec["hidden_size"],
        "num_layers": dec["num_layers"],
        "attention": "bahdanau",  # additive (MLP) scores
        "input_feeding": bool(dec["input_feeding"]),
        "init_hidden": "bridge",
        "dropout": dec["dropout"],  # between stacked layers
        "hidden_dropout": dec["dropout"],  # on the output layer's input, as ours
        "embeddings": dict(embeddings),
    }


def _cell(part: Mapping[str, Any]) -> str:
    cell = str(part["cell"])
    if cell not in ("gru", "lstm"):
        raise ValueError(f"JoeyNMT has no {cell} cell")
    return cell


def joey_config(
    ours: Mapping[str, Any], data_dir: Path, model_dir: Path, log_every: int, quality: bool = False
) -> dict[str, Any]:
    """The whole JoeyNMT 2.3 config for our resolved config `ours`, its data exported to
    `data_dir` by `write_export`. Validation is off (its frequency is never reached). In a
    time-to-quality run (`quality`) its test set is the quality split, which the driver's
    `quality` task decodes with each checkpoint its clock saved (`driver.joey_saves_by_clock`:
    JoeyNMT's own checkpoint saving, by training time)."""
    data = ours["data"]
    if not str(ours["schedule"]["_target_"]).endswith("InverseSqrtSchedule"):
        raise ValueError("only our inverse_sqrt schedule has a JoeyNMT counterpart here")
    return {
        "name": ours["name"],
        "joeynmt_version": JOEYNMT_VERSION,
        "model_dir": str(model_dir),
        "use_cuda": False,
        "fp16": False,
        "random_seed": ours["trainer"]["seed"],
        "data": {
            "train": str(data_dir / "train"),
            "dev": str(data_dir / "dev"),
            "test": str(data_dir / ("quality" if quality else "test")),
            "dataset_type": "plain",
            "src": _joey_side(data["src_lang"], data_dir, data["max_len"]),
            "trg": _joey_side(data["tgt_lang"], data_dir, data["max_len"]),
        },
        "training": _joey_training(ours, log_every),
        "testing": {
            "beam_size": 1,
            "beam_alpha": LENGTH_PENALTY,
            "batch_size": DECODE_BATCH,
            "batch_type": "sentence",
            "eval_metrics": [],
        },
        "model": joey_model_section(ours),
    }


def _joey_training(ours: Mapping[str, Any], log_every: int) -> dict[str, Any]:
    """JoeyNMT's `training:` section: our optimiser, schedule, loss and token batches."""
    data, trainer, optim = ours["data"], ours["trainer"], ours["optim"]
    return {
        "optimizer": "adamw",
        "adam_betas": list(optim["betas"]),
        "learning_rate": optim["lr"],
        "learning_rate_min": 1.0e-8,  # a floor that never stops the run
        "weight_decay": optim["weight_decay"],
        "scheduling": "warmupinversesquareroot",
        "learning_rate_warmup": ours["schedule"]["warmup_steps"],
        "clip_grad_norm": trainer["grad_clip"],
        "loss": "crossentropy",
        "label_smoothing": trainer["label_smoothing"],
        "normalization": "tokens",  # ours: the loss summed over real tokens / their count
        "batch_type": "token",
        "batch_size": data["max_tokens"],
        "batch_multiplier": trainer["accumulate"],
        "shuffle": True,
        "epochs": 1000,
        "logging_freq": log_every,
        "validation_freq": log_every * NEVER,
        "print_valid_sents": [],
        "keep_best_ckpts": 1,
        "overwrite": True,
        "num_workers": 0,
    }


def _joey_side(lang: str, data_dir: Path, max_len: int) -> dict[str, Any]:
    """One language: our sentencepiece model and its pieces as the vocabulary."""
    return {
        "lang": lang,
        "level": "bpe",
        "tokenizer_type": "sentencepiece",
        "tokenizer_cfg": {"model_file": str(data_dir / f"spm.{lang}.model")},
        "voc_file": str(data_dir / f"vocab.{lang}"),
        "max_length": max_len,  # longer training pairs are dropped, as ours
        "lowercase": False,
        "normalize": False,
    }
