"""Training throughput from each framework's own log: (step, target tokens/s) per interval.

JoeyNMT writes `Step: N, ... Tokens per Sec: R` to train.log every `logging_freq` updates (the
non-pad target tokens of the interval over its time, validation time excluded); OpenNMT-py
writes `Step N/M; ...; S/T tok/s; ...` to its console every `report_every` updates (T: the
non-pad target tokens, EOS included, BOS not, of the interval over the time since the last
report); ours writes `train/tokens_per_sec` to metrics.jsonl every `trainer.log_every`
updates. The figure of a run is the median of the intervals that end after the warm-up
updates.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path

from seq2seq.runs.metrics_log import read_series

JOEY_STEP_LINE = re.compile(r"Step:\s*(\d+),.*Tokens per Sec:\s*([0-9.]+)")
JOEY_INTERRUPT_LINE = re.compile(r"Interrupt at epoch\s*\d+, step\s*(\d+)")
JOEY_PARAMS_LINE = re.compile(r"Total params:\s*(\d+)")
ONMT_STEP_LINE = re.compile(r"\bStep\s+(\d+)(?:/\s*\d+)?;.*;\s*[0-9.]+/\s*([0-9.]+) tok/s;")
ONMT_SAVE_LINE = re.compile(r"Saving checkpoint (\S+_step_(\d+)\.pt)")
ONMT_PARAMS_LINE = re.compile(r"\* number of parameters:\s*(\d+)")


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


def onmt_intervals(log_text: str) -> list[tuple[int, float]]:
    """(step, target tokens/s) of every report line of OpenNMT-py's console log."""
    return [
        (int(match.group(1)), float(match.group(2)))
        for match in map(ONMT_STEP_LINE.search, log_text.splitlines())
        if match
    ]


def onmt_checkpoint(log_text: str) -> tuple[int, Path] | None:
    """(updates, checkpoint) of OpenNMT-py's last `Saving checkpoint PATH_step_N.pt` line;
    None when it saved none."""
    found = ONMT_SAVE_LINE.findall(log_text)
    return (int(found[-1][1]), Path(found[-1][0])) if found else None


def onmt_parameters(log_text: str) -> int | None:
    found = ONMT_PARAMS_LINE.findall(log_text)
    return int(found[-1]) if found else None


def our_intervals(run_dir: Path) -> list[tuple[int, float]]:
    """(step, tokens/s) of every step of our run's metrics.jsonl that logged a throughput
    (read by `seq2seq.runs.metrics_log`, the one reader of that file)."""
    return sorted(read_series(run_dir, "train/tokens_per_sec").values.items())


def median_after_warmup(intervals: list[tuple[int, float]], warmup_updates: int) -> dict:
    """Median tokens/s of the intervals that end after `warmup_updates` updates, and how
    many there were (None when none did: the run was too short for its log interval)."""
    kept = [rate for step, rate in intervals if step > warmup_updates]
    return {"tok_s": statistics.median(kept) if kept else None, "intervals": len(kept)}
