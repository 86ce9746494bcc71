"""What all sides of `make bench-peer` share: the peers and their versions, decoding settings,
the step count that switches validation off, and the progress line."""

from __future__ import annotations

import datetime
import os
import sys

JOEYNMT_VERSION = "2.3.0"
OPENNMT_VERSION = "3.5.1"
TORCH_VERSION = "2.13.0"
PEERS = {"joeynmt": "JoeyNMT", "opennmt": "OpenNMT-py"}  # name → label, in the order they run
SHAPES = ("transformer_small", "gru_additive")
DECODE_BATCH = 128  # sentences per decoding batch, both sides (our SearchSettings default)
LENGTH_PENALTY = 1.0  # GNMT alpha: our SearchSettings default, JoeyNMT's beam_alpha
DEV_PAIRS = 8  # JoeyNMT needs a dev set to start; it is never validated
OUR_FINAL_VALID = 8  # our fit() validates once after the clock (untimed): on this many pairs
NEVER = 10**8  # a step count no run reaches: validation off
START_TIMEOUT_S = 900  # a peer's data loading and model building, before its training loop


def say(message: str) -> None:
    """A timestamped progress line on stderr."""
    print(f"[bench-peer {datetime.datetime.now():%H:%M:%S}] {message}", file=sys.stderr, flush=True)


def thread_env(threads: int) -> dict[str, str]:
    """This process's environment with OpenMP and MKL held to `threads` threads."""
    return {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
