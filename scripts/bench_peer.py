"""`make bench-peer`: this project against JoeyNMT 2.3.0, measured back to back here.

    python scripts/bench_peer.py                       # 2 shapes × 2 frameworks × 4 min, ~35 min
    python scripts/bench_peer.py --minutes 0.3 --sentences 20 --log-every 2 \\
        --warmup-updates 2 --decode-reps 1 --out /tmp/peer.md     # a smoke run, ~5 min

What it does, in one run on one machine:

1. Peer environment: `.peer/joeynmt` (reused when it imports joeynmt 2.3.0), else a new
   virtual environment with torch==2.13.0 installed FIRST (so that nothing pulls a CUDA
   build), then joeynmt==2.3.0, importlib_metadata and sentencepiece==0.2.1; torch must
   still be 2.13.0 afterwards.
2. Same data: this project's prepared Tatoeba zh→en split (training pairs after its length
   filter, 8 dev pairs that are never validated, the first `--sentences` test pairs) as
   plain text, and this project's two sentencepiece models with their piece lists as
   JoeyNMT's vocabulary files.
3. Training, per reference shape (`transformer_small`, `gru_additive`): ours for
   `--minutes`, then JoeyNMT with the same shape for as long, one directly after the other,
   both with `--threads` torch threads, the same token budget per batch, no validation while
   the clock runs. Throughput is real (non-padding) target tokens per second as each
   framework logs it every `--log-every` updates (ours: `metrics.jsonl`,
   `train/tokens_per_sec`; JoeyNMT: `Tokens per Sec` in `train.log`: the non-pad target
   tokens of the interval over its time, validation time excluded): the median of the
   intervals that end after `--warmup-updates` updates.
4. Decoding: each trained model translates the same test sentences greedy and with beam 5
   (128 sentences a batch), timed without model loading, after a warm-up: sentences/s and
   generated target tokens/s (pieces + EOS of the 1-best output), median of
   `--decode-reps` passes; BLEU by this project's scorer for both.
5. A dated entry appended to BENCHMARKS.md (or `--out`): machine, matmul ceiling measured in
   this run, command, settings of both sides, the differences that remain, tables, ratios.

The same file is the driver the peer environment's Python runs (`--peer-train`,
`--peer-decode`): its top level imports only the standard library and PyYAML, which both
environments have; this project's modules are imported inside the functions that use them.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
PEER_VERSION = "2.3.0"
TORCH_VERSION = "2.13.0"
PEER_PACKAGES = (f"joeynmt=={PEER_VERSION}", "importlib_metadata", "sentencepiece==0.2.1")
SHAPES = ("transformer_small", "gru_additive")
SEARCHES = (1, 5)  # beam sizes; 1 = greedy
DECODE_BATCH = 128  # sentences per decoding batch, both sides (our SearchSettings default)
LENGTH_PENALTY = 1.0  # GNMT alpha: our SearchSettings default, JoeyNMT's beam_alpha
DEV_PAIRS = 8  # JoeyNMT needs a dev set to start; it is never validated
OUR_FINAL_VALID = 8  # our fit() validates once after the clock (untimed): on this many pairs
NEVER = 10**8  # a step count no run reaches: validation off
START_TIMEOUT_S = 900  # JoeyNMT's data loading and model building, before its first epoch
EOS = "</s>"
JOEY_STEP_LINE = re.compile(r"Step:\s*(\d+),.*Tokens per Sec:\s*([0-9.]+)")
JOEY_INTERRUPT_LINE = re.compile(r"Interrupt at epoch\s*\d+, step\s*(\d+)")
JOEY_PARAMS_LINE = re.compile(r"Total params:\s*(\d+)")
JOEY_START_LINE = "EPOCH 1"


@dataclass
class Options:
    """The command line, checked."""

    shapes: list[str]
    minutes: float
    threads: int
    sentences: int
    log_every: int
    warmup_updates: int
    decode_reps: int
    matmul_reps: int
    peer_venv: Path
    work_dir: Path
    out: Path


# ---------------------------------------------------------------- throughput from the logs


def joey_intervals(log_text: str) -> list[tuple[int, float]]:
    """(step, tokens/s) of every `Tokens per Sec` line of a JoeyNMT train.log."""
    return [
        (int(match.group(1)), float(match.group(2)))
        for match in map(JOEY_STEP_LINE.search, log_text.splitlines())
        if match
    ]


def joey_updates(log_text: str, intervals: list[tuple[int, float]]) -> int:
    """Updates done: the step of JoeyNMT's `Interrupt at ... step N` line, else the last
    logged step."""
    found = JOEY_INTERRUPT_LINE.findall(log_text)
    if found:
        return int(found[-1])
    return intervals[-1][0] if intervals else 0


def joey_parameters(log_text: str) -> int | None:
    found = JOEY_PARAMS_LINE.findall(log_text)
    return int(found[-1]) if found else None


def our_intervals(metrics_text: str) -> list[tuple[int, float]]:
    """(step, tokens/s) of every line of our metrics.jsonl that has a throughput."""
    intervals = []
    for line in metrics_text.splitlines():
        if line.strip():
            record = json.loads(line)
            if "train/tokens_per_sec" in record:
                intervals.append((int(record["step"]), float(record["train/tokens_per_sec"])))
    return intervals


def median_after_warmup(intervals: list[tuple[int, float]], warmup_updates: int) -> dict:
    """Median tokens/s of the intervals that end after `warmup_updates` updates, and how
    many there were (None when none did: the run was too short for its log interval)."""
    kept = [rate for step, rate in intervals if step > warmup_updates]
    return {"tok_s": statistics.median(kept) if kept else None, "intervals": len(kept)}


# ---------------------------------------------------------------- the JoeyNMT config


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
    if attention["score"] != "additive":
        raise ValueError(f"JoeyNMT's recurrent decoder has no {attention['score']} attention")
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
    ours: Mapping[str, Any], data_dir: Path, model_dir: Path, log_every: int
) -> dict[str, Any]:
    """The whole JoeyNMT 2.3 config for our resolved config `ours`, its data exported to
    `data_dir` by `write_export`. Validation is off (its frequency is never reached)."""
    data, trainer, optim = ours["data"], ours["trainer"], ours["optim"]
    if not str(ours["schedule"]["_target_"]).endswith("InverseSqrtSchedule"):
        raise ValueError("only our inverse_sqrt schedule has a JoeyNMT counterpart here")
    return {
        "name": ours["name"],
        "joeynmt_version": PEER_VERSION,
        "model_dir": str(model_dir),
        "use_cuda": False,
        "fp16": False,
        "random_seed": trainer["seed"],
        "data": {
            "train": str(data_dir / "train"),
            "dev": str(data_dir / "dev"),
            "test": str(data_dir / "test"),
            "dataset_type": "plain",
            "src": _joey_side(data["src_lang"], data_dir, data["max_len"]),
            "trg": _joey_side(data["tgt_lang"], data_dir, data["max_len"]),
        },
        "training": {
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
        },
        "testing": {
            "beam_size": 1,
            "beam_alpha": LENGTH_PENALTY,
            "batch_size": DECODE_BATCH,
            "batch_type": "sentence",
            "eval_metrics": [],
        },
        "model": joey_model_section(ours),
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


# ---------------------------------------------------------------- the shared data


def write_export(prepared: Any, src_lang: str, tgt_lang: str, sentences: int, folder: Path) -> dict:
    """Write `prepared` (our PreparedData) as JoeyNMT reads it: `train|dev.<lang>` and
    `test.<src>` text (`reference.<tgt>` beside it), `spm.<lang>.model` and `vocab.<lang>`
    (the pieces in id order), and `languages.json` (`{"src": ..., "tgt": ...}`). Returns the
    pairs per split."""
    folder.mkdir(parents=True, exist_ok=True)
    splits = {
        "train": (prepared.train.src_lines, prepared.train.tgt_lines),
        "dev": (
            _first(prepared.valid.src_lines, DEV_PAIRS),
            _first(prepared.valid.tgt_lines, DEV_PAIRS),
        ),
        "test": (
            _first(prepared.test.src_lines, sentences),
            _first(prepared.test.tgt_lines, sentences),
        ),
    }
    for split, (sources, targets) in splits.items():
        _write_lines(folder / f"{split}.{src_lang}", sources)
        # Test references under another name: JoeyNMT then decodes the sources alone, as
        # our Translator does, without tokenising references inside the timed call.
        target_name = "reference" if split == "test" else split
        _write_lines(folder / f"{target_name}.{tgt_lang}", targets)
    for lang, tokenizer in ((src_lang, prepared.src_tokenizer), (tgt_lang, prepared.tgt_tokenizer)):
        (folder / f"spm.{lang}.model").write_bytes(tokenizer.to_bytes())
        pieces = [tokenizer.id_to_piece(i) for i in range(tokenizer.vocab_size)]
        _write_lines(folder / f"vocab.{lang}", pieces)
    languages = json.dumps({"src": src_lang, "tgt": tgt_lang})
    (folder / "languages.json").write_text(languages, encoding="utf-8")
    return {split: len(pair[0]) for split, pair in splits.items()}


def _first(lines: Sequence[str], n: int) -> list[str]:
    """The first `n` lines of any sequence (a list, or our lazily read text lines)."""
    return [lines[i] for i in range(min(n, len(lines)))]


def _write_lines(path: Path, lines: Sequence[str]) -> None:
    """One line each; a line that another reader would split (JoeyNMT uses splitlines)
    is an error rather than a silent misalignment."""
    for number, line in enumerate(lines, 1):
        if not line or line.splitlines() != [line]:
            raise ValueError(f"{path.name}: line {number} is empty or holds a line break")
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def generated_tokens(outputs: Sequence[Sequence[str]]) -> int:
    """Target tokens generated for 1-best outputs given as pieces: pieces + 1 each (the EOS,
    or the last step of an output cut at the length limit)."""
    return sum(len([piece for piece in pieces if piece != EOS]) + 1 for pieces in outputs)


# ---------------------------------------------------------------- the tables


def ratio(ours: float | None, peer: float | None) -> str:
    """`ours / peer` as `6.3×`; — when either is missing or the peer's is 0."""
    if ours is None or not peer:
        return "—"
    value = ours / peer
    return f"{value:.2f}×" if value < 1 else f"{value:.1f}×" if value < 100 else f"{value:.0f}×"


def rate(value: float | None, digits: int = 0) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def count(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def training_table(rows: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> list[str]:
    """One row per shape: `rows[shape]["ours"|"joey"]` with tok_s, intervals, updates,
    parameters."""
    lines = [
        "| shape | ours tgt tok/s | JoeyNMT tgt tok/s | ours / JoeyNMT | ours updates | "
        "JoeyNMT updates | intervals (ours, JoeyNMT) | params (ours, JoeyNMT) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for shape, sides in rows.items():
        ours, joey = sides["ours"], sides["joey"]
        lines.append(
            f"| {shape} | {rate(ours.get('tok_s'))} | {rate(joey.get('tok_s'))} | "
            f"{ratio(ours.get('tok_s'), joey.get('tok_s'))} | {count(ours.get('updates'))} | "
            f"{count(joey.get('updates'))} | {ours.get('intervals', 0)}, "
            f"{joey.get('intervals', 0)} | {count(ours.get('parameters'))}, "
            f"{count(joey.get('parameters'))} |"
        )
    return lines


def decoding_table(rows: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> list[str]:
    """One row per shape and search: `rows[shape]["ours"|"joey"][search]` with seconds,
    sentences, tokens, bleu."""
    lines = [
        "| shape | search | sentences | ours sent/s | JoeyNMT sent/s | ratio | ours tok/s | "
        "JoeyNMT tok/s | ratio | tokens (ours, JoeyNMT) | BLEU (ours, JoeyNMT) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for shape, sides in rows.items():
        for beam in SEARCHES:
            ours, joey = sides["ours"].get(str(beam), {}), sides["joey"].get(str(beam), {})
            sent = [_per_second(side, "sentences") for side in (ours, joey)]
            tok = [_per_second(side, "tokens") for side in (ours, joey)]
            search = "greedy" if beam == 1 else f"beam {beam}"
            lines.append(
                f"| {shape} | {search} | {ours.get('sentences', '—')} | {rate(sent[0], 1)} | "
                f"{rate(sent[1], 1)} | {ratio(*sent)} | {rate(tok[0])} | {rate(tok[1])} | "
                f"{ratio(*tok)} | {count(ours.get('tokens'))}, {count(joey.get('tokens'))} | "
                f"{_bleu(ours)}, {_bleu(joey)} |"
            )
    return lines


def _per_second(side: Mapping[str, Any], key: str) -> float | None:
    if not side.get("seconds") or key not in side:
        return None
    return side[key] / side["seconds"]


def _bleu(side: Mapping[str, Any]) -> str:
    return "—" if side.get("bleu") is None else f"{side['bleu']:.2f}"


# ---------------------------------------------------------------- the peer side (JoeyNMT's Python)


def peer_train(config_path: Path, threads: int) -> None:
    """Train as `python -m joeynmt train CONFIG --skip-test` does, with `threads` torch
    threads. SIGINT ends it: JoeyNMT catches it and saves the current weights."""
    import torch
    from joeynmt.config import load_config
    from joeynmt.helpers import make_model_dir
    from joeynmt.helpers_for_ddp import get_logger
    from joeynmt.training import train

    torch.set_num_threads(threads)
    # A process started in the background inherits SIGINT ignored; the parent's SIGINT
    # must raise KeyboardInterrupt here, which JoeyNMT's loop catches.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    cfg = load_config(config_path)
    model_dir = Path(cfg["model_dir"])
    make_model_dir(model_dir, overwrite=True)
    get_logger("", log_file=str(model_dir / "train.log"))
    train(rank=0, world_size=None, cfg=cfg, skip_test=True)


def peer_decode(config_path: Path, checkpoint: Path, threads: int, reps: int, out: Path) -> None:
    """Load the checkpoint, then time JoeyNMT's `predict` on the test file per search
    (after a warm-up on the dev file); write seconds, counts and outputs as JSON."""
    import torch
    from joeynmt.config import load_config, parse_global_args
    from joeynmt.prediction import prepare

    torch.set_num_threads(threads)
    cfg = load_config(config_path)
    cfg["testing"]["load_model"] = str(checkpoint)
    args = parse_global_args(cfg, rank=0, mode="test")
    model, _, dev_data, test_data = prepare(args, rank=0, mode="test")  # loads the weights
    unique = {id(p): p for p in model.parameters() if p.requires_grad}
    results: dict[str, Any] = {"parameters": sum(p.numel() for p in unique.values())}
    for beam in SEARCHES:
        settings = args.test._replace(beam_size=beam, n_best=1, eval_metrics=[])
        _joey_predict(model, dev_data, args, settings)  # warm-up
        seconds = []
        for _ in range(reps):
            started = time.perf_counter()
            hypotheses, pieces = _joey_predict(model, test_data, args, settings)
            seconds.append(time.perf_counter() - started)
        results[str(beam)] = {
            "seconds": statistics.median(seconds),
            "sentences": len(hypotheses),
            "tokens": generated_tokens(pieces),
            "hypotheses": hypotheses,
        }
    out.write_text(json.dumps(results), encoding="utf-8")


def _joey_predict(model: Any, data: Any, args: Any, settings: Any) -> tuple[list, list]:
    """JoeyNMT's `predict` without a loss or metrics: (detokenised outputs, their pieces)."""
    from joeynmt.prediction import predict

    _, _, hypotheses, pieces, _, _ = predict(
        model=model, data=data, device=args.device, n_gpu=args.n_gpu, compute_loss=False,
        args=settings, autocast=args.autocast,
    )  # fmt: skip
    return hypotheses, pieces


# ---------------------------------------------------------------- our side (this project's Python)


def our_config(shape: str, overrides: Sequence[str] = ()) -> Any:
    """Our composed config of `+experiment=<shape>` with `overrides`."""
    from hydra import compose, initialize_config_module

    from seq2seq.config import register_configs

    register_configs()
    with initialize_config_module(config_module="seq2seq.configs", version_base="1.3"):
        return compose(config_name="train", overrides=[f"+experiment={shape}", *overrides])


def our_overrides(minutes: float, threads: int, log_every: int) -> list[str]:
    """Our run's settings beside the preset: the clock, threads, no validation, logging."""
    return [
        f"trainer.threads={threads}",
        "trainer.device=cpu",
        f"trainer.max_minutes={minutes}",
        f"trainer.max_steps={NEVER}",
        f"trainer.valid_every={NEVER}",
        f"trainer.valid_max_sentences={OUR_FINAL_VALID}",
        f"trainer.log_every={log_every}",
        "logging.progress_bar=false",
        "logging.tensorboard=false",
    ]


def our_train(shape: str, run_dir: Path, overrides: list[str]) -> None:
    """Train `shape` until its clock runs out (fit() then validates on a few pairs and
    saves checkpoints/last.pt); print updates and parameters as JSON."""
    from seq2seq.build import count_parameters
    from seq2seq.runs.assemble import assemble_trainer

    cfg = our_config(shape, overrides)
    trainer = assemble_trainer(cfg, run_dir, observe=False)  # as seq2seq-train
    progress = trainer.fit()
    print(json.dumps({"updates": progress.step, "parameters": count_parameters(trainer.model)}))


def our_decode(checkpoint: Path, sources_file: Path, threads: int, reps: int, out: Path) -> None:
    """Time `Translator.translate` on the exported test sources per search (after a
    warm-up), as scripts/bench.py does; write seconds, counts and outputs as JSON."""
    import torch

    from seq2seq.build import count_parameters
    from seq2seq.decoding import SearchSettings
    from seq2seq.inference import Translator

    torch.set_num_threads(threads)
    translator = Translator.load(checkpoint, "cpu")
    sources = sources_file.read_text(encoding="utf-8").splitlines()
    translator.translate(sources[:16], SearchSettings(beam_size=1))  # warm-up
    results: dict[str, Any] = {"parameters": count_parameters(translator.model)}
    for beam in SEARCHES:
        settings = SearchSettings(
            beam_size=beam, batch_size=DECODE_BATCH, length_penalty=LENGTH_PENALTY
        )
        seconds = []
        for _ in range(reps):
            started = time.perf_counter()
            translations = translator.translate(sources, settings)
            seconds.append(time.perf_counter() - started)
        results[str(beam)] = {
            "seconds": statistics.median(seconds),
            "sentences": len(sources),
            "tokens": generated_tokens([t.target_pieces[0] for t in translations]),
            "hypotheses": [t.text for t in translations],
        }
    out.write_text(json.dumps(results), encoding="utf-8")


# ---------------------------------------------------------------- orchestration


def say(message: str) -> None:
    print(f"[bench-peer {datetime.datetime.now():%H:%M:%S}] {message}", file=sys.stderr, flush=True)


def thread_env(threads: int) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}


def peer_versions(python: Path) -> dict[str, str] | None:
    """torch and joeynmt versions in the peer environment; None when it cannot import them."""
    if not python.is_file():
        return None
    code = "import json, torch, joeynmt; print(json.dumps({'torch': torch.__version__, 'joeynmt': joeynmt.__version__}))"  # noqa: E501
    done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def ensure_peer(venv: Path) -> dict[str, str]:
    """The peer environment's versions, after making it when it is missing or incomplete:
    torch==2.13.0 first (a CPU build where one is at hand; nothing else may choose torch),
    then JoeyNMT and its two companions. Stops when torch changed on the way."""
    python = venv / "bin" / "python"
    found = peer_versions(python)
    if found and found["joeynmt"] == PEER_VERSION and found["torch"].startswith(TORCH_VERSION):
        say(f"reusing {venv} (joeynmt {found['joeynmt']}, torch {found['torch']})")
        return found
    say(f"making {venv}: torch=={TORCH_VERSION} first, then {' '.join(PEER_PACKAGES)}")
    if not python.is_file():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, f"torch=={TORCH_VERSION}"], check=True)
    subprocess.run([*pip, *PEER_PACKAGES], check=True)
    found = peer_versions(python)
    if not found or not found["torch"].startswith(TORCH_VERSION):
        raise SystemExit(f"{venv}: torch is {found and found['torch']}, not {TORCH_VERSION}")
    return found


def export_data(options: Options) -> tuple[Path, dict[str, int]]:
    """Our prepared split and sentencepiece models, written for JoeyNMT."""
    from seq2seq.build import plain
    from seq2seq.data.prepare import prepare

    data_cfg = plain(our_config(options.shapes[0]).data)
    prepared = prepare(data_cfg)
    folder = options.work_dir / "data"
    counts = write_export(
        prepared, data_cfg["src_lang"], data_cfg["tgt_lang"], options.sentences, folder
    )
    return folder, counts


def run_ours_training(shape: str, options: Options) -> tuple[dict[str, Any], Path]:
    """Our training of `shape` in a fresh process; its throughput, updates, checkpoint."""
    run_dir = options.work_dir / shape / "ours"
    overrides = our_overrides(options.minutes, options.threads, options.log_every)
    command = [sys.executable, __file__, "--our-train", shape, "--run-dir", str(run_dir)]
    command += ["--overrides", json.dumps(overrides)]
    say(f"{shape}: ours trains for {options.minutes:g} min")
    done = subprocess.run(
        command, capture_output=True, text=True, env=thread_env(options.threads), cwd=ROOT
    )
    (run_dir / "stderr.log").write_text(done.stderr, encoding="utf-8")
    if done.returncode != 0:
        raise SystemExit(f"our training of {shape} failed:\n{done.stderr[-3000:]}")
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    intervals = our_intervals((run_dir / "metrics.jsonl").read_text(encoding="utf-8"))
    result = {**summary, **median_after_warmup(intervals, options.warmup_updates)}
    return result, run_dir / "checkpoints" / "last.pt"


def run_joey_training(
    shape: str, options: Options, python: Path, data_dir: Path
) -> tuple[dict[str, Any], Path, Path]:
    """JoeyNMT's training of `shape` for `--minutes` from its first epoch, then SIGINT;
    its throughput, updates, checkpoint and config file."""
    folder = options.work_dir / shape / "joeynmt"
    folder.mkdir(parents=True, exist_ok=True)
    ours = _plain(our_config(shape))  # the preset's values
    config = joey_config(ours, data_dir, folder / "model", options.log_every)
    config_path = folder / "config.yaml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    log_path = folder / "model" / "train.log"
    say(f"{shape}: JoeyNMT trains for {options.minutes:g} min")
    command = [str(python), __file__, "--peer-train", str(config_path)]
    command += ["--threads", str(options.threads)]
    with (folder / "console.log").open("w", encoding="utf-8") as console:
        process = subprocess.Popen(
            command, stdout=console, stderr=subprocess.STDOUT, env=thread_env(options.threads)
        )
        try:
            _wait_for_line(process, log_path, JOEY_START_LINE)
            _run_for(process, options.minutes * 60)
            process.send_signal(signal.SIGINT)  # JoeyNMT saves its weights and returns
            process.wait(timeout=600)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    text = log_path.read_text(encoding="utf-8")
    if process.returncode != 0:
        raise SystemExit(f"JoeyNMT's training of {shape} failed; see {folder / 'console.log'}")
    intervals = joey_intervals(text)
    result = {
        "updates": joey_updates(text, intervals),
        "parameters": joey_parameters(text),
        **median_after_warmup(intervals, options.warmup_updates),
    }
    return result, folder / "model" / "latest.ckpt", config_path


def _plain(cfg: Any) -> dict[str, Any]:
    from seq2seq.build import plain

    return plain(cfg)


def _wait_for_line(process: subprocess.Popen, log_path: Path, marker: str) -> None:
    """Wait until `marker` is in the log (the training loop started)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"JoeyNMT stopped before training (exit {process.returncode})")
        if log_path.is_file() and marker in log_path.read_text(encoding="utf-8"):
            return
        time.sleep(0.2)
    raise SystemExit(f"JoeyNMT did not start training within {START_TIMEOUT_S} s")


def _run_for(process: subprocess.Popen, seconds: float) -> None:
    """Let the process run `seconds`; SystemExit when it ends on its own before."""
    try:
        process.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        return
    raise SystemExit(f"JoeyNMT's training ended early (exit {process.returncode})")


def run_decoding(command: list[str], out: Path, threads: int, what: str) -> dict[str, Any]:
    """One decoding process; its JSON results."""
    say(f"{what} decodes")
    done = subprocess.run(
        command, capture_output=True, text=True, env=thread_env(threads), cwd=ROOT
    )
    out.with_suffix(".log").write_text(done.stdout + done.stderr, encoding="utf-8")
    if done.returncode != 0:
        raise SystemExit(f"{what}: decoding failed:\n{done.stderr[-3000:]}")
    return json.loads(out.read_text(encoding="utf-8"))


def add_bleu(results: dict[str, Any], references: list[str], lang: str) -> None:
    """BLEU of each search's outputs by our scorer (the same for both sides)."""
    from seq2seq.metrics import corpus_scores

    for beam in SEARCHES:
        side = results[str(beam)]
        side["bleu"] = corpus_scores(side["hypotheses"], references, lang)["bleu"]


def measure_shape(
    shape: str, options: Options, python: Path, data_dir: Path
) -> tuple[dict[str, dict], dict[str, dict]]:
    """Train ours, then JoeyNMT; then decode with both. (training, decoding) rows."""
    ours_train, ours_ckpt = run_ours_training(shape, options)
    joey_train, joey_ckpt, joey_cfg = run_joey_training(shape, options, python, data_dir)
    reps, threads = str(options.decode_reps), str(options.threads)
    folder = options.work_dir / shape
    test_src = data_dir / f"test.{_lang(data_dir, 'src')}"
    ours_out, joey_out = folder / "ours" / "decoding.json", folder / "joeynmt" / "decoding.json"
    ours_dec = run_decoding(
        [sys.executable, __file__, "--our-decode", str(ours_ckpt), "--sources", str(test_src),
         "--threads", threads, "--reps", reps, "--result", str(ours_out)],
        ours_out, options.threads, f"{shape}: ours",
    )  # fmt: skip
    joey_dec = run_decoding(
        [str(python), __file__, "--peer-decode", str(joey_cfg), "--checkpoint", str(joey_ckpt),
         "--threads", threads, "--reps", reps, "--result", str(joey_out)],
        joey_out, options.threads, f"{shape}: JoeyNMT",
    )  # fmt: skip
    references_path = data_dir / f"reference.{_lang(data_dir, 'tgt')}"
    references = references_path.read_text(encoding="utf-8").splitlines()
    for results in (ours_dec, joey_dec):
        add_bleu(results, references, _lang(data_dir, "tgt"))
    joey_train["parameters"] = joey_train.get("parameters") or joey_dec.get("parameters")
    return {"ours": ours_train, "joey": joey_train}, {"ours": ours_dec, "joey": joey_dec}


def _lang(data_dir: Path, side: str) -> str:
    """The source or target language code of the export (from languages.json)."""
    return json.loads((data_dir / "languages.json").read_text(encoding="utf-8"))[side]


# ---------------------------------------------------------------- the entry


def settings_lines(options: Options, counts: Mapping[str, int]) -> list[str]:
    """What both sides ran with, and every difference that remains."""
    ours = _plain(our_config(options.shapes[0]))
    lines = [
        f"- Data: this project's prepared Tatoeba zh→en split and its two sentencepiece "
        f"models ({ours['data']['src_vocab_size']:,} + {ours['data']['tgt_vocab_size']:,} "
        f"pieces), the same for both: {counts['train']:,} training pairs (after the "
        f"{ours['data']['max_len']}-piece filter), {counts['test']:,} test sentences; "
        f"JoeyNMT reads them as plain text with the same models and piece lists.",
        f"- Training: {options.minutes:g} min per framework and shape, ours first, JoeyNMT "
        f"directly after; {options.threads} torch threads each; batches of "
        f"{ours['data']['max_tokens']:,} tokens (sentences × longest side, token batching on "
        f"both sides); AdamW lr {ours['optim']['lr']:g}, betas {list(ours['optim']['betas'])}, "
        f"weight decay {ours['optim']['weight_decay']:g}, inverse-sqrt schedule with "
        f"{ours['schedule']['warmup_steps']} warm-up updates, gradient-norm clip "
        f"{ours['trainer']['grad_clip']:g}, label smoothing "
        f"{ours['trainer']['label_smoothing']:g}, loss per real target token, seed "
        f"{ours['trainer']['seed']}; no validation while the clock runs.",
        f"- Throughput: real target tokens (pieces + EOS, no padding) per second as each "
        f"framework logs it every {options.log_every} updates (ours `metrics.jsonl`, JoeyNMT "
        f"`Tokens per Sec`); the median of the intervals ending after update "
        f"{options.warmup_updates}.",
        f"- Decoding: the same {counts['test']:,} test sentences, greedy and beam 5, "
        f"{DECODE_BATCH} sentences a batch, GNMT length penalty {LENGTH_PENALTY:g} for beam "
        f"search; the time of the translate call only (not loading), after a warm-up, median "
        f"of {options.decode_reps} pass(es); tokens/s counts the generated pieces + 1 (EOS) "
        f"of each 1-best output. BLEU by this project's sacrebleu scorer for both.",
        "- Shapes: `transformer_small` = Transformer 3+3 layers, d 256, 4 heads, FF 1024, "
        "pre-LN, sinusoidal positions, scaled embeddings, target embeddings tied to the "
        "softmax, dropout 0.1 (embeddings, sublayers, FFN); `gru_additive` = bi-GRU 256 "
        "encoder, GRU 256 decoder, additive (Bahdanau) attention, input feeding, scaled and "
        "tied target embeddings, dropout 0.1 on embeddings and on the output layer's input. "
        "The JoeyNMT configs are generated from our resolved presets "
        f"(`{shown(options.work_dir)}/<shape>/joeynmt/config.yaml`).",
        "",
        "Differences that remain (the frameworks do not allow removing them):",
        "",
        "- Batching: ours sorts by length and packs neighbours within the budget (little "
        "padding); JoeyNMT 2.3 draws sentences in random order and closes a batch once "
        "sentences × longest side reaches the budget (no bucketing, more padding). Both rates "
        "count only real target tokens, so padding is a cost each framework pays for itself.",
        "- JoeyNMT runs sentencepiece on every sentence in its data loader, inside its step "
        "time; ours encodes once when the data is prepared.",
        "- Optimiser: ours uses torch's fused AdamW with eps 1e-9; JoeyNMT's AdamW has torch's "
        "default kernel and eps 1e-8 (not configurable in 2.3).",
        "- Transformer dropout: JoeyNMT's one rate also drops attention probabilities (ours: "
        "attention dropout 0).",
        "- GRU decoder: ours is Bahdanau-ordered (attend with s_{t-1}, then the GRU on "
        "[y; c], output tanh(W[s; c; y])) over encoder states projected to 256; JoeyNMT's is "
        "Luong-ordered (GRU first, additive attention with the new state, attentional vector "
        "fed back) over the 512-wide bi-GRU states; both start from a bridge of the encoder. "
        "The parameter counts differ accordingly (table).",
        "- Length limit of decoding: ours 1.5 × source length + 10 per sentence; JoeyNMT "
        "1.5 × the longest source of the batch. Ours sorts all sentences by length before "
        "batching; JoeyNMT batches them in file order (sorted inside each batch).",
        "- Clock: ours stops itself after `trainer.max_minutes` (from the start of its "
        f"loop) and then validates on {OUR_FINAL_VALID} pairs to write its checkpoint (after the "
        "clock); JoeyNMT is sent SIGINT the same minutes after its `EPOCH 1` line and saves "
        "its weights. Under-trained models emit outputs of different lengths, so tokens/s is "
        "the fairer decoding rate.",
    ]
    return lines


def shown(path: Path) -> str:
    """A path as the entry shows it (scripts/bench.py's rule: no machine's folders)."""
    return _bench().shown_path(path)


def _bench() -> Any:
    """scripts/bench.py (the ceiling, the CPU name, the path rule), imported once."""
    if "bench" not in sys.modules:
        import importlib.util

        spec = importlib.util.spec_from_file_location("bench", ROOT / "scripts" / "bench.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["bench"] = module
        spec.loader.exec_module(module)
    return sys.modules["bench"]


def machine_lines(options: Options, peer: Mapping[str, str]) -> list[str]:
    import platform

    import torch

    command = " ".join(shown(arg) if arg.startswith("/") else arg for arg in sys.argv)
    return [
        f"- CPU: {_bench().cpu_model()}, {os.cpu_count()} cores; threads: {options.threads}",
        f"- this project: torch {torch.__version__}, Python {platform.python_version()}",
        f"- JoeyNMT {peer['joeynmt']}: torch {peer['torch']} (its own virtual environment)",
        f"- command: `python {command}`",
        "- Both frameworks were measured back to back on this machine in this one run.",
    ]


def ceiling_lines(options: Options) -> list[str]:
    import torch

    torch.set_num_threads(options.threads)
    lines, best = _bench().ceiling_section(options.matmul_reps, torch.device("cpu"))
    return [*lines, "", f"Best: {best:.1f} GFLOP/s."]


def build_entry(options: Options) -> list[str]:
    peer = ensure_peer(options.peer_venv)
    python = options.peer_venv / "bin" / "python"
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    lines = [f"## {stamp} — this project against JoeyNMT {PEER_VERSION} (`make bench-peer`)", ""]
    lines += machine_lines(options, peer)
    lines += ["", "### Matmul ceiling (float32, this run)", "", *ceiling_lines(options)]
    say("exporting the data")
    data_dir, counts = export_data(options)
    training, decoding = {}, {}
    for shape in options.shapes:
        training[shape], decoding[shape] = measure_shape(shape, options, python, data_dir)
    lines += ["", "### Settings", "", *settings_lines(options, counts)]
    lines += ["", "### Training throughput (real target tokens/s)", "", *training_table(training)]
    lines += ["", "### Decoding (test split)", "", *decoding_table(decoding)]
    return lines


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES))
    add("--minutes", type=float, default=4.0, help="training time per framework and shape")
    add("--threads", type=int, default=2, help="torch threads on both sides")
    add("--sentences", type=int, default=1000, help="test sentences to decode (default all)")
    add("--log-every", type=int, default=10, help="updates per logged throughput interval")
    add("--warmup-updates", type=int, default=20, help="intervals ending here are left out")
    add("--decode-reps", type=int, default=3, help="decoding passes, the median is reported")
    add("--matmul-reps", type=int, default=10)
    add("--peer-venv", type=Path, default=Path(".peer/joeynmt"))
    add("--work-dir", type=Path, help="default: bench/peer/<date_time>")
    add("--out", type=Path, default=Path("BENCHMARKS.md"), help="the file to append to")
    # internal: the worker processes
    for name in ("--our-train", "--peer-train", "--our-decode", "--peer-decode"):
        add(name, help=argparse.SUPPRESS)
    for name in ("--run-dir", "--sources", "--checkpoint", "--result"):
        add(name, type=Path, help=argparse.SUPPRESS)
    add("--overrides", help=argparse.SUPPRESS)
    add("--reps", type=int, default=1, help=argparse.SUPPRESS)
    return parser


def options_from(args: argparse.Namespace) -> Options:
    for name in ("minutes", "threads", "sentences", "log_every", "decode_reps", "matmul_reps"):
        if getattr(args, name) <= 0:
            raise SystemExit(f"--{name.replace('_', '-')} must be > 0")
    stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    return Options(
        shapes=list(args.shapes),
        minutes=args.minutes,
        threads=args.threads,
        sentences=args.sentences,
        log_every=args.log_every,
        warmup_updates=max(args.warmup_updates, 0),
        decode_reps=args.decode_reps,
        matmul_reps=args.matmul_reps,
        peer_venv=args.peer_venv,
        work_dir=(args.work_dir or Path("bench/peer") / stamp).absolute(),
        out=args.out,
    )


def run_worker(args: argparse.Namespace) -> bool:
    """Run the worker the internal options name; False when none was named."""
    if args.our_train:
        our_train(args.our_train, args.run_dir, json.loads(args.overrides))
    elif args.peer_train:
        peer_train(Path(args.peer_train), args.threads)
    elif args.our_decode:
        our_decode(Path(args.our_decode), args.sources, args.threads, args.reps, args.result)
    elif args.peer_decode:
        peer_decode(Path(args.peer_decode), args.checkpoint, args.threads, args.reps, args.result)
    else:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if run_worker(args):
        return 0
    options = options_from(args)
    lines = build_entry(options)
    _bench().append_entry(options.out, lines)  # the same file format as `make bench`
    print("\n".join(lines))
    print(f"\nappended to {options.out}; runs, logs and checkpoints in {options.work_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
