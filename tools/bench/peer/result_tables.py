"""The training and decoding tables of `make bench-peer`: both sides and their ratio.

A ratio is ours / JoeyNMT's (`6.3×`: ours is 6.3 times as fast); — where either figure is
missing. Decoding rates are counted per second of the translate call: sentences/s, and
generated target tokens/s (pieces + EOS of the 1-best output; under-trained models emit
outputs of different lengths, so tokens/s is the fairer rate).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tools.bench.peer.driver import SEARCHES


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
