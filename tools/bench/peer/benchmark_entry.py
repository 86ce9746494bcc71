"""The dated benchmark log (tools/bench/LOG.md) entry of `make bench-peer`: machine, this run's
matmul ceiling, the settings of every side and the differences that remain, then the
training and decoding tables, and with `--quality` the time-to-quality tables.

All frameworks are measured back to back on this machine in one run; the entry says so.
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
from tools.bench.peer.peer_env import TOOLKITS, ensure_peer
from tools.bench.peer.peer_options import PeerOptions
from tools.bench.peer.processes import measure_shape
from tools.bench.peer.quality_runs import measure_quality
from tools.bench.peer.result_tables import (
    decoding_table,
    quality_runs_table,
    quality_table,
    training_table,
)
from tools.bench.peer.shared_settings import (
    DECODE_BATCH,
    LENGTH_PENALTY,
    OUR_FINAL_VALID,
    PEERS,
    say,
)

LOG_LINES = {"joeynmt": "JoeyNMT `Tokens per Sec` in train.log", "opennmt": "OpenNMT-py's "
             "`S/T tok/s` (T, the target side) on its console"}  # fmt: skip

JOEY_DIFFERENCES = [
    "- Batching: ours sorts by length and packs neighbours within the budget (little "
    "padding); JoeyNMT 2.3 draws sentences in random order and closes a batch once "
    "sentences × longest side reaches the budget (no bucketing, more padding). The rates "
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
    "- Clock: JoeyNMT is sent SIGINT the stated minutes after its `EPOCH 1` line and "
    "saves its weights.",
]

ONMT_DIFFERENCES = [
    "- Batching: OpenNMT-py fills a bucket of 262,144 examples (its default; the corpus "
    "read round about 11 times), sorts it by length, cuts batches of sentences × longest "
    "side (BOS/EOS included) up to the budget and shuffles them: little padding, as ours. "
    "It runs sentencepiece (its `sentencepiece` transform, our models) on every sentence "
    "in its data iterator, inside its step time; its first bucket falls in the first "
    "intervals (warm-up).",
    "- Vocabulary: our piece lists in id order, our `<pad>` renamed to its `<blank>`, so "
    "ids and sizes are ours.",
    "- Optimiser: OpenNMT-py 3.5.1 has no AdamW on CPU (only bitsandbytes' GPU kernels): "
    "torch's Adam with our betas, eps 1e-8 and no weight decay. Its `noam` schedule with "
    "learning_rate = lr·√(d·warm-up) equals our inverse-sqrt schedule step for step.",
    "- Transformer: the same shape (pre-LN, interleaved sinusoids, √d-scaled embeddings, "
    "biases on q/k/v, attention dropout 0, tied softmax); layer-norm eps 1e-6.",
    "- GRU: OpenNMT-py has one hidden size for both sides and splits it between the "
    "directions: its bi-GRU has 128 units per direction (ours 256, projected to 256); its "
    "decoder (GRU 256) is Luong-ordered with input feeding and additive (`mlp`) "
    "attention, started by a bridge (linear + ReLU) of the encoder's final state; its "
    "embeddings are not scaled by √d (it scales only with positions); uniform ±0.1 "
    "initialisation, its default for recurrent models.",
    "- Decoding: greedy is its argmax search (`random_sampling_topk 1`); beam search "
    "with the GNMT length penalty (`wu`, alpha 1). Length limit 1.5 × the longest source "
    "of the batch + 5 (ours 1.5 × source + 10 per sentence). The driver cuts the sources "
    "into pieces with our model and joins the output pieces inside the timed call.",
    "- Clock: OpenNMT-py is sent SIGINT the stated minutes after its `Start training "
    "loop` line; its loop ends at the next batch and saves the weights of that step. It "
    "logs to its console (its data iterator resets its logger, so `log_file` stops "
    "early); the figures are read from there.",
]

PEER_DIFFERENCES = {"joeynmt": JOEY_DIFFERENCES, "opennmt": ONMT_DIFFERENCES}


def difference_lines(peers: list[str]) -> list[str]:
    """Every difference that remains between ours and each peer, and the common clock."""
    lines = ["Differences that remain (the frameworks do not allow removing them):", ""]
    for peer in peers:
        lines += [f"{PEERS[peer]}:", "", *PEER_DIFFERENCES[peer], ""]
    return lines + [
        "All: ours stops itself after `trainer.max_minutes` (from the start of its loop) "
        f"and then validates on {OUR_FINAL_VALID} pairs to write its checkpoint (after the "
        "clock). Under-trained models emit outputs of different lengths, so tokens/s is the "
        "fairer decoding rate.",
    ]


def settings_lines(options: PeerOptions, counts: Mapping[str, int]) -> list[str]:
    """What every side ran with, and every difference that remains."""
    ours = plain(our_config(options.shapes[0]))
    labels = ", ".join(PEERS[peer] for peer in options.peers)
    return [
        f"- Data: this project's prepared Tatoeba zh→en split and its two sentencepiece "
        f"models ({ours['data']['src_vocab_size']:,} + {ours['data']['tgt_vocab_size']:,} "
        f"pieces), the same for all: {counts['train']:,} training pairs (after the "
        f"{ours['data']['max_len']}-piece filter), {counts['test']:,} test sentences; "
        f"{labels} read them as plain text with the same models and piece lists.",
        f"- Training: {options.minutes:g} min per framework and shape, ours first, then "
        f"{labels}, one directly after the other; {options.threads} torch threads each; "
        f"batches of {ours['data']['max_tokens']:,} tokens (sentences × longest side, token "
        f"batching on every side); lr {ours['optim']['lr']:g}, betas "
        f"{list(ours['optim']['betas'])}, inverse-sqrt schedule with "
        f"{ours['schedule']['warmup_steps']} warm-up updates, gradient-norm clip "
        f"{ours['trainer']['grad_clip']:g}, label smoothing "
        f"{ours['trainer']['label_smoothing']:g}, loss per real target token, seed "
        f"{ours['trainer']['seed']}; AdamW with weight decay "
        f"{ours['optim']['weight_decay']:g} where the peer has it; no validation while the "
        "clock runs.",
        f"- Throughput: real target tokens (pieces + EOS, no padding) per second as each "
        f"framework logs it every {options.log_every} updates (ours `metrics.jsonl`, "
        + ", ".join(LOG_LINES[peer] for peer in options.peers)
        + f"); the median of the intervals ending after update {options.warmup_updates}.",
        f"- Decoding: the same {counts['test']:,} test sentences, greedy and beam 5, "
        f"{DECODE_BATCH} sentences a batch, GNMT length penalty {LENGTH_PENALTY:g} for beam "
        f"search; the time of the translate call only (not loading), after a warm-up, median "
        f"of {options.decode_reps} pass(es); tokens/s counts the generated pieces + 1 (EOS) "
        f"of each 1-best output. BLEU by this project's sacrebleu scorer for all.",
        "- Shapes: `transformer_small` = Transformer 3+3 layers, d 256, 4 heads, FF 1024, "
        "pre-LN, sinusoidal positions, scaled embeddings, target embeddings tied to the "
        "softmax, dropout 0.1 (embeddings, sublayers, FFN); `gru_additive` = bi-GRU 256 "
        "encoder, GRU 256 decoder, additive (Bahdanau) attention, input feeding, scaled and "
        "tied target embeddings, dropout 0.1 on embeddings and on the output layer's input. "
        "The peers' configs are generated from our resolved presets "
        f"(`{shown_path(options.work_dir)}/<shape>/<peer>/config.yaml`).",
        "",
        *difference_lines(options.peers),
    ]


def machine_lines(options: PeerOptions, versions: Mapping[str, Mapping[str, str]]) -> list[str]:
    """CPU, threads, every framework's version, the command line."""
    command = " ".join(shown_path(arg) if arg.startswith("/") else arg for arg in sys.argv)
    return [
        f"- CPU: {cpu_model()}, {os.cpu_count()} cores; threads: {options.threads}",
        f"- this project: torch {torch.__version__}, Python {platform.python_version()}",
        *(
            f"- {PEERS[peer]} {found['peer']}: torch {found['torch']} (its own virtual "
            f"environment, `{shown_path(options.peer_venv(peer))}`)"
            for peer, found in versions.items()
        ),
        f"- command: `python {command}`",
        "- All frameworks were measured back to back on this machine in this one run.",
    ]


def ceiling_lines(options: PeerOptions) -> list[str]:
    """The matmul table at the run's threads, and its best figure."""
    torch.set_num_threads(options.threads)
    lines, best = ceiling_section(options.matmul_reps, torch.device("cpu"))
    return [*lines, "", f"Best: {best:.1f} GFLOP/s."]


def quality_lines(options: PeerOptions, counts: Mapping[str, int]) -> list[str]:
    """How the times to quality were measured (`quality_runs`, `quality_clock`)."""
    return [
        f"Every framework trains each shape again from scratch, with the settings above, for "
        f"{options.quality_minutes:g} minute(s) of its training clock, one directly after the "
        f"other. The clock runs from the start of its training loop and stops while a "
        f"checkpoint is written: every framework saves with its own saver at the first update "
        f"boundary after each {options.quality_every:g} training minute(s) and at the end "
        f"(ours: fit() stops at each save time, validates {OUR_FINAL_VALID} pairs and saves "
        f"off the clock, and continues, the restart of its batch stream on the clock; the "
        f"peers: their drivers save between two batches). After training, untimed, each "
        f"framework's own decoder "
        f"translates the first {counts.get('quality', 0):,} pairs of this project's valid split "
        f"greedily with every checkpoint, scored by this project's sacrebleu scorer, as the "
        f"test BLEU. The time to a threshold is the training clock of the first checkpoint "
        f"at or above it: the crossing lies up to one save interval "
        f"({options.quality_every:g} min) earlier. `> {options.quality_minutes:g}`: not "
        f"reached in the budget; a ratio against it is a bound. Ratios are the peer's "
        f"minutes / ours (how many times as fast ours got there).",
    ]


def build_entry(options: PeerOptions) -> list[str]:
    """Make (or reuse) the peers' environments, export the data, measure every shape; the
    entry."""
    versions = {
        peer: ensure_peer(TOOLKITS[peer], options.peer_venv(peer)) for peer in options.peers
    }
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    against = " and ".join(f"{PEERS[peer]} {TOOLKITS[peer].version}" for peer in options.peers)
    lines = [f"## {stamp} — this project against {against} (`make bench-peer`)", ""]
    lines += machine_lines(options, versions)
    lines += ["", "### Matmul ceiling (float32, this run)", "", *ceiling_lines(options)]
    say("exporting the data")
    data_dir = options.work_dir / "data"
    quality_sentences = options.quality_sentences if options.quality else 0
    counts = export_data(options.shapes[0], options.sentences, data_dir, quality_sentences)
    training, decoding, quality = {}, {}, {}
    for shape in options.shapes:
        training[shape], decoding[shape] = measure_shape(shape, options, data_dir)
    for shape in options.shapes if options.quality else ():
        quality[shape] = measure_quality(shape, options, data_dir)
    lines += ["", "### Settings", "", *settings_lines(options, counts)]
    lines += ["", "### Training throughput (real target tokens/s)", ""]
    lines += training_table(training, options.peers)
    lines += ["", "### Decoding (test split)", "", *decoding_table(decoding, options.peers)]
    if options.quality:
        lines += ["", "### Time to quality (training minutes to a greedy valid BLEU)", ""]
        lines += [*quality_lines(options, counts), ""]
        lines += quality_table(quality, options.peers, options.quality, options.quality_minutes)
        lines += ["", *quality_runs_table(quality, options.peers)]
    return lines
