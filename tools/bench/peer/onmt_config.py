"""The OpenNMT-py 3.5.1 configs with the shape and training settings of one of our presets.

Training (`onmt_train_config`, YAML for `onmt_train -config`): a Transformer (pre-LN, as
OpenNMT-py's always is) or a recurrent encoder-decoder with additive (`mlp`) attention; Adam
with our betas and our inverse-sqrt warm-up written as its `noam` schedule; token batches of
our budget; our sentencepiece models (its `sentencepiece` transform) and piece lists as its
vocabularies; no validation set, no checkpoint but the last (a time-to-quality run keeps
every one its driver saves). Decoding (`onmt_decode_settings`,
JSON for `onmt_driver.py decode`): greedy (argmax) and beam search with our GNMT length penalty
and batch size, on pieces the driver makes with our source model.

A family or setting OpenNMT-py has no counterpart of is refused (ValueError), never
approximated silently; the differences that remain are listed in `benchmark_entry`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from seq2seq.models.attention.options import component_name
from tools.bench.peer.shared_settings import DECODE_BATCH, LENGTH_PENALTY, NEVER

ONMT_PAD = "<blank>"  # OpenNMT-py's padding token; our piece lists call it <pad>
OUR_PAD = "<pad>"
MAX_LENGTH_RATIO = 1.5  # its decoding limit: 1.5 × the longest source of the batch + 5


def onmt_model_options(ours: Mapping[str, Any]) -> dict[str, Any]:
    """OpenNMT-py's model options with the shape of our resolved config (plain dicts)."""
    model, enc, dec = ours["model"], ours["encoder"], ours["decoder"]
    families = {_family(enc), _family(dec)}
    if len(families) != 1:
        raise ValueError("OpenNMT-py's configs here pair like with like (encoder = decoder family)")
    shared = {
        "word_vec_size": model["embed_dim"],
        "share_decoder_embeddings": bool(model["tie_embeddings"]),  # target embeddings = softmax
        "share_embeddings": False,  # separate zh and en vocabularies
        "enc_layers": enc["num_layers"],
        "dec_layers": dec["num_layers"],
        "model_dtype": "fp32",
    }
    if families == {"transformer"}:
        return {**shared, **_transformer_options(model, enc, dec)}
    return {**shared, **_recurrent_options(model, enc, dec, ours["attention"])}


def _family(part: Mapping[str, Any]) -> str:
    """`transformer` or `recurrent` from our `_target_`; ValueError for other families."""
    target = str(part["_target_"])
    if target.endswith(("TransformerEncoder", "TransformerDecoder")):
        return "transformer"
    if target.endswith(("RNNEncoder", "RNNDecoder")):
        return "recurrent"
    raise ValueError(f"OpenNMT-py has no counterpart of {target} here")


def _one(name: str, enc: Mapping[str, Any], dec: Mapping[str, Any]) -> Any:
    """A setting OpenNMT-py shares between encoder and decoder: both of ours must agree."""
    if enc[name] != dec[name]:
        raise ValueError(f"OpenNMT-py has one {name} for both sides: ours {enc[name]}, {dec[name]}")
    return enc[name]


def _transformer_options(
    model: Mapping[str, Any], enc: Mapping[str, Any], dec: Mapping[str, Any]
) -> dict[str, Any]:
    """A pre-LN Transformer: OpenNMT-py scales embeddings by √d whenever positions are
    added, and adds sinusoids interleaved (sin, cos, sin, ...), as ours."""
    if _one("positional", enc, dec) != "sinusoidal" or not model["scale_embeddings"]:
        raise ValueError("OpenNMT-py's Transformer has scaled sinusoidal positions only")
    if model["embed_dim"] != _one("hidden_size", enc, dec):
        raise ValueError("OpenNMT-py's Transformer needs embed_dim = hidden_size")
    return {
        "encoder_type": "transformer",
        "decoder_type": "transformer",
        "hidden_size": enc["hidden_size"],
        "heads": _one("heads", enc, dec),
        "transformer_ff": _one("ff_size", enc, dec),
        "position_encoding": True,
        "position_encoding_type": "SinusoidalInterleaved",
        "layer_norm": "standard",
        "pos_ffn_activation_fn": "relu",
        "add_qkvbias": True,  # ours has biases on q, k, v
        "add_ffnbias": True,
        "dropout": [_one("dropout", enc, dec)],  # embeddings, sublayers and the FFN alike
        "attention_dropout": [_one("attention_dropout", enc, dec)],
        "param_init": 0.0,
        "param_init_glorot": True,
    }


def _recurrent_options(
    model: Mapping[str, Any],
    enc: Mapping[str, Any],
    dec: Mapping[str, Any],
    attention: Mapping[str, Any],
) -> dict[str, Any]:
    """A recurrent encoder-decoder with additive attention. OpenNMT-py wants one hidden
    size for both sides and splits it between the directions of a bidirectional encoder:
    the decoder keeps our size, the encoder gets half of it per direction."""
    score = component_name(attention["score"])
    if score != "additive":
        raise ValueError(f"OpenNMT-py's recurrent decoder here has no {score} attention")
    hidden = dec["hidden_size"]
    if model["tie_embeddings"] and hidden != model["embed_dim"]:
        raise ValueError("OpenNMT-py ties the softmax only when hidden_size = embed_dim")
    return {
        "encoder_type": "brnn" if enc["bidirectional"] else "rnn",
        "decoder_type": "rnn",
        "rnn_type": _one("cell", enc, dec).upper(),
        "hidden_size": hidden,
        "global_attention": "mlp",  # additive (Bahdanau) scores
        "global_attention_function": "softmax",
        "input_feed": int(bool(dec["input_feeding"])),
        "bridge": True,  # a learned map of the encoder's final state starts the decoder
        "dropout": [dec["dropout"]],  # embeddings and the output layer's input, as ours
        "param_init": 0.1,  # OpenNMT-py's default for recurrent models (uniform ±0.1)
        "param_init_glorot": False,
    }


def onmt_learning_rate(lr: float, hidden_size: int, warmup_steps: int) -> float:
    """The `learning_rate` that makes OpenNMT-py's noam schedule our inverse-sqrt one.

    noam(s) = L · d^-½ · min(s^-½, s · w^-1.5) (Vaswani et al. 2017, eq. 3); with
    L = lr · √(d · w) this is lr · min(√(w / s), s / w), our schedule, peaking at lr at s = w.
    """
    return lr * math.sqrt(hidden_size * warmup_steps)


def onmt_train_config(
    ours: Mapping[str, Any],
    data_dir: Path,
    run_dir: Path,
    log_every: int,
    quality: bool = False,
) -> dict[str, Any]:
    """The whole `onmt_train` config for our resolved config `ours`, its data exported to
    `data_dir` by `write_export` and its vocabularies by `write_onmt_vocab` (in `run_dir`).
    Validation is off (no validation set). The last weights are saved when training ends;
    in a time-to-quality run (`quality`) the driver also saves by its clock
    (`onmt_driver.save_by_clock`), and every checkpoint is kept."""
    data, trainer, optim = ours["data"], ours["trainer"], ours["optim"]
    if not str(ours["schedule"]["_target_"]).endswith("InverseSqrtSchedule"):
        raise ValueError("only our inverse_sqrt schedule has an OpenNMT-py counterpart here")
    model = onmt_model_options(ours)
    src, tgt = data["src_lang"], data["tgt_lang"]
    warmup = ours["schedule"]["warmup_steps"]
    config = {
        "data": {
            "corpus_1": {
                "path_src": str(data_dir / f"train.{src}"),
                "path_tgt": str(data_dir / f"train.{tgt}"),
                "transforms": ["sentencepiece", "filtertoolong"],
            }
        },
        "src_subword_model": str(data_dir / f"spm.{src}.model"),
        "tgt_subword_model": str(data_dir / f"spm.{tgt}.model"),
        "src_seq_length": data["max_len"],  # longer training pairs are dropped, as ours
        "tgt_seq_length": data["max_len"],
        "src_vocab": str(run_dir / f"vocab.{src}"),
        "tgt_vocab": str(run_dir / f"vocab.{tgt}"),
        "src_vocab_size": data["src_vocab_size"],
        "tgt_vocab_size": data["tgt_vocab_size"],
        "save_model": str(run_dir / "model" / "model"),
        "save_checkpoint_steps": 0,  # none by steps: the final one (and the driver's)
        "keep_checkpoint": -1 if quality else 1,  # -1: all
        "log_file": str(run_dir / "train.log"),
        "report_every": log_every,
        "seed": trainer["seed"],
        **model,
        "optim": "adam",  # 3.5.1 has no AdamW on CPU: no weight decay
        "adam_beta1": optim["betas"][0],
        "adam_beta2": optim["betas"][1],
        "learning_rate": onmt_learning_rate(optim["lr"], model["hidden_size"], warmup),
        "decay_method": "noam",
        "warmup_steps": warmup,
        "max_grad_norm": trainer["grad_clip"],
        "label_smoothing": trainer["label_smoothing"],
        "normalization": "tokens",  # ours: the loss summed over real tokens / their count
        "batch_type": "tokens",  # sentences × longest side (pieces + BOS/EOS) ≤ the budget
        "batch_size": data["max_tokens"],
        "batch_size_multiple": 1,
        "accum_count": [trainer["accumulate"]],
        "num_workers": 0,  # batches made in the training process, as ours and JoeyNMT
        "train_steps": NEVER,
        "valid_steps": NEVER,
    }
    return config


def onmt_decode_settings(
    ours: Mapping[str, Any], data_dir: Path, run_dir: Path, split: str = "test"
) -> dict[str, Any]:
    """What `onmt_driver.py decode` (and `quality`) reads: OpenNMT-py's translate options
    beside the model and the search (its outputs are also written to `run_dir`/pred.txt, as
    it always writes them), the sources of `split` (`test`, or `quality` for a
    time-to-quality run), the warm-up sources and our sentencepiece models."""
    data = ours["data"]
    src, tgt = data["src_lang"], data["tgt_lang"]
    return {
        "options": {
            "batch_size": DECODE_BATCH,
            "batch_type": "sents",
            "n_best": 1,
            "length_penalty": "wu",  # GNMT: ((5 + |y|) / 6)^alpha, as ours
            "alpha": LENGTH_PENALTY,
            "max_length_ratio": MAX_LENGTH_RATIO,
            "gpu": -1,
            "output": str(run_dir / "pred.txt"),  # its default is the working folder
            "seed": ours["trainer"]["seed"],
        },
        "sources": str(data_dir / f"{split}.{src}"),
        "warmup_sources": str(data_dir / f"dev.{src}"),
        "src_model": str(data_dir / f"spm.{src}.model"),
        "tgt_model": str(data_dir / f"spm.{tgt}.model"),
    }


def write_onmt_vocab(data_dir: Path, lang: str, folder: Path) -> Path:
    """Our piece list of `lang` (exported `vocab.<lang>`, id order) as OpenNMT-py's vocabulary:
    the same pieces in the same order, with our padding piece under OpenNMT-py's name, so
    that it adds no special token and its ids are ours."""
    pieces = (data_dir / f"vocab.{lang}").read_text(encoding="utf-8").splitlines()
    if OUR_PAD not in pieces:
        raise ValueError(f"{data_dir / f'vocab.{lang}'}: no {OUR_PAD} piece")
    renamed = [ONMT_PAD if piece == OUR_PAD else piece for piece in pieces]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"vocab.{lang}"
    path.write_text("".join(piece + "\n" for piece in renamed), encoding="utf-8")
    return path
