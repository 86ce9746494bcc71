"""The dated benchmark log (tools/bench/LOG.md) entry of `make bench-peer`: machine, this run's matmul ceiling,
the settings of both sides and the differences that remain, then the two tables.

Both frameworks are measured back to back on this machine in one run; the entry says so.
"""

from __future__ import annotations

import datetime
import os
import platform
import sys
from collections.abc import Mapping

import torch

from seq2seq.config.build import plain
from seq2seq.lab.matmul_ceiling import ceiling_section
from tools.bench.entry import cpu_model, shown_path
from tools.bench.peer.data_export import export_data
from tools.bench.peer.ours import our_config
from tools.bench.peer.peer_env import ensure_peer
from tools.bench.peer.processes import PeerOptions, measure_shape
from tools.bench.peer.result_tables import decoding_table, training_table
from tools.bench.peer.shared_settings import (
    DECODE_BATCH,
    LENGTH_PENALTY,
    OUR_FINAL_VALID,
    PEER_VERSION,
    say,
)

DIFFERENCES = [
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


def settings_lines(options: PeerOptions, counts: Mapping[str, int]) -> list[str]:
    """What both sides ran with, and every difference that remains (`DIFFERENCES`)."""
    ours = plain(our_config(options.shapes[0]))
    return [
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
        f"(`{shown_path(options.work_dir)}/<shape>/joeynmt/config.yaml`).",
        "",
        *DIFFERENCES,
    ]


def machine_lines(options: PeerOptions, peer: Mapping[str, str]) -> list[str]:
    """CPU, threads, both frameworks' versions, the command line."""
    command = " ".join(shown_path(arg) if arg.startswith("/") else arg for arg in sys.argv)
    return [
        f"- CPU: {cpu_model()}, {os.cpu_count()} cores; threads: {options.threads}",
        f"- this project: torch {torch.__version__}, Python {platform.python_version()}",
        f"- JoeyNMT {peer['joeynmt']}: torch {peer['torch']} (its own virtual environment)",
        f"- command: `python {command}`",
        "- Both frameworks were measured back to back on this machine in this one run.",
    ]


def ceiling_lines(options: PeerOptions) -> list[str]:
    """The matmul table at the run's threads, and its best figure."""
    torch.set_num_threads(options.threads)
    lines, best = ceiling_section(options.matmul_reps, torch.device("cpu"))
    return [*lines, "", f"Best: {best:.1f} GFLOP/s."]


def build_entry(options: PeerOptions) -> list[str]:
    """Make (or reuse) the peer environment, export the data, measure every shape; the entry."""
    peer = ensure_peer(options.peer_venv)
    python = options.peer_venv / "bin" / "python"
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    lines = [f"## {stamp} — this project against JoeyNMT {PEER_VERSION} (`make bench-peer`)", ""]
    lines += machine_lines(options, peer)
    lines += ["", "### Matmul ceiling (float32, this run)", "", *ceiling_lines(options)]
    say("exporting the data")
    data_dir = options.work_dir / "data"
    counts = export_data(options.shapes[0], options.sentences, data_dir)
    training, decoding = {}, {}
    for shape in options.shapes:
        training[shape], decoding[shape] = measure_shape(shape, options, python, data_dir)
    lines += ["", "### Settings", "", *settings_lines(options, counts)]
    lines += ["", "### Training throughput (real target tokens/s)", "", *training_table(training)]
    lines += ["", "### Decoding (test split)", "", *decoding_table(decoding)]
    return lines
