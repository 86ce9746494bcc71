"""The training, decoding and time-to-quality tables of `make bench-peer`: ours, each peer,
and ours / each peer.

A ratio is ours / the peer's (`6.3×`: ours is 6.3 times as fast); — where either figure is
missing. Decoding rates are counted per second of the translate call: sentences/s, and
generated target tokens/s (pieces + EOS of the 1-best output; under-trained models emit
outputs of different lengths, so tokens/s is the fairer rate). Times to quality are training
minutes to a valid BLEU, and their ratio the peer's minutes / ours (`time_to_quality`). A
table's rows are `rows[shape][side]`, side `ours` or a peer's name (`shared_settings.PEERS`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tools.bench.peer.driver import SEARCHES
from tools.bench.peer.shared_settings import PEERS
from tools.bench.peer.time_to_quality import TimeRatio, minutes_to, time_ratio


def ratio(ours: float | None, peer: float | None) -> str:
    """`ours / peer` as `6.3×`; — when either is missing or the peer's is 0."""
    if ours is None or not peer:
        return "—"
    value = ours / peer
    return f"{value:.2f}×" if value < 1 else f"{value:.1f}×" if value < 100 else f"{value:.0f}×"


def bounded_ratio(value: TimeRatio | None) -> str:
    """A time ratio as `6.3×`, `> 6.3×` or `< 0.50×`; — when there is none."""
    if value is None:
        return "—"
    shown = ratio(value.value, 1.0)
    return shown if value.bound == "=" else f"{value.bound} {shown}"


def rate(value: float | None, digits: int = 0) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def count(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def _header(cells: Sequence[str]) -> list[str]:
    return ["| " + " | ".join(cells) + " |", "|" + "---|" * len(cells)]


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _rates_and_ratios(what: str, peers: Sequence[str]) -> list[str]:
    """Header cells: `ours WHAT`, each peer's `WHAT`, then `ours / <peer>` for each."""
    return [
        f"ours {what}",
        *(f"{PEERS[peer]} {what}" for peer in peers),
        *(f"ours / {PEERS[peer]}" for peer in peers),
    ]


def _joined(label: str, peers: Sequence[str]) -> str:
    return f"{label} (ours, {', '.join(PEERS[peer] for peer in peers)})"


def training_table(
    rows: Mapping[str, Mapping[str, Mapping[str, Any]]], peers: Sequence[str]
) -> list[str]:
    """One row per shape: tok_s of every side and the ratios, then updates, intervals and
    parameters of every side."""
    cells = ["shape", *_rates_and_ratios("tgt tok/s", peers)]
    cells += [_joined(name, peers) for name in ("updates", "intervals", "params")]
    lines = _header(cells)
    for shape, sides in rows.items():
        every = [sides.get("ours", {}), *(sides.get(peer, {}) for peer in peers)]
        tok_s = [side.get("tok_s") for side in every]
        lines.append(
            _row([
                shape,
                *(rate(value) for value in tok_s),
                *(ratio(tok_s[0], value) for value in tok_s[1:]),
                ", ".join(count(side.get("updates")) for side in every),
                ", ".join(str(side.get("intervals", 0)) for side in every),
                ", ".join(count(side.get("parameters")) for side in every),
            ])
        )  # fmt: skip
    return lines


def decoding_table(
    rows: Mapping[str, Mapping[str, Mapping[str, Any]]], peers: Sequence[str]
) -> list[str]:
    """One row per shape and search: sentences/s and tokens/s of every side with the ratios,
    then the generated tokens and BLEU of every side (`rows[shape][side][search]` with
    seconds, sentences, tokens, bleu)."""
    cells = ["shape", "search", "sentences", *_rates_and_ratios("sent/s", peers)]
    cells += [*_rates_and_ratios("tok/s", peers), _joined("tokens", peers), _joined("BLEU", peers)]
    lines = _header(cells)
    for shape, sides in rows.items():
        for beam in SEARCHES:
            every = [sides.get(side, {}).get(str(beam), {}) for side in ("ours", *peers)]
            sent = [_per_second(side, "sentences") for side in every]
            tok = [_per_second(side, "tokens") for side in every]
            lines.append(
                _row([
                    shape,
                    "greedy" if beam == 1 else f"beam {beam}",
                    str(every[0].get("sentences", "—")),
                    *(rate(value, 1) for value in sent),
                    *(ratio(sent[0], value) for value in sent[1:]),
                    *(rate(value) for value in tok),
                    *(ratio(tok[0], value) for value in tok[1:]),
                    ", ".join(count(side.get("tokens")) for side in every),
                    ", ".join(_bleu(side) for side in every),
                ])
            )  # fmt: skip
    return lines


def _per_second(side: Mapping[str, Any], key: str) -> float | None:
    if not side.get("seconds") or key not in side:
        return None
    return side[key] / side["seconds"]


def _bleu(side: Mapping[str, Any]) -> str:
    return "—" if side.get("bleu") is None else f"{side['bleu']:.2f}"


def quality_table(
    rows: Mapping[str, Mapping[str, Sequence[Mapping[str, Any]]]],
    peers: Sequence[str],
    thresholds: Sequence[float],
    budget: float,
) -> list[str]:
    """One row per shape and threshold: every side's training minutes to the first save at
    or above it (`> budget` when none), then each peer's minutes / ours (a bound when one
    side did not reach it). `rows[shape][side]` is the side's scored saves."""
    cells = ["shape", "valid BLEU ≥", "ours min", *(f"{PEERS[peer]} min" for peer in peers)]
    cells += [f"{PEERS[peer]} min / ours" for peer in peers]
    lines = _header(cells)
    for shape, sides in rows.items():
        for threshold in thresholds:
            every = [sides.get(side) for side in ("ours", *peers)]
            times = [None if series is None else minutes_to(series, threshold) for series in every]
            lines.append(
                _row([
                    shape,
                    f"{threshold:g}",
                    *(_minutes(series, time, budget) for series, time in zip(every, times)),
                    *(
                        bounded_ratio(time_ratio(times[0], time, budget))
                        if every[0] and series else "—"
                        for series, time in zip(every[1:], times[1:])
                    ),
                ])
            )  # fmt: skip
    return lines


def quality_runs_table(
    rows: Mapping[str, Mapping[str, Sequence[Mapping[str, Any]]]], peers: Sequence[str]
) -> list[str]:
    """One row per shape: every side's saves, its best valid BLEU and the training minutes
    of the save that gave it."""
    cells = ["shape", _joined("saves", peers), _joined("best valid BLEU", peers)]
    lines = _header([*cells, _joined("at minute", peers)])
    for shape, sides in rows.items():
        every = [sides.get(side) or [] for side in ("ours", *peers)]
        best = [max(series, key=lambda save: save["bleu"], default=None) for series in every]
        lines.append(
            _row([
                shape,
                ", ".join(str(len(series)) for series in every),
                ", ".join("—" if save is None else f"{save['bleu']:.2f}" for save in best),
                ", ".join("—" if save is None else f"{save['seconds'] / 60:.1f}" for save in best),
            ])
        )  # fmt: skip
    return lines


def _minutes(
    series: Sequence[Mapping[str, Any]] | None, minutes: float | None, budget: float
) -> str:
    """Minutes to a threshold; `> budget` when the side's saves never reached it; — when the
    side has no saves at all."""
    if not series:
        return "—"
    return f"> {budget:g}" if minutes is None else f"{minutes:.1f}"
