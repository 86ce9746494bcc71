"""The command line of `make bench-peer` as one checked record."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tools.bench.peer.shared_settings import PEERS, SHAPES

POSITIVE = ("minutes", "threads", "sentences", "log_every", "decode_reps", "matmul_reps")
QUALITY_POSITIVE = ("quality_minutes", "quality_every", "quality_sentences")


@dataclass
class PeerOptions:
    """What `make bench-peer` runs: its command line, checked by `check_options`."""

    shapes: list[str]
    peers: list[str]  # names in PEERS; each in its own environment, peer_root / name
    minutes: float
    threads: int
    sentences: int
    log_every: int
    warmup_updates: int
    decode_reps: int
    matmul_reps: int
    peer_root: Path
    work_dir: Path  # absolute: the processes run elsewhere
    out: Path
    root: Path  # the repository our processes run in (its data/ holds the corpus)
    quality: list[float] | None = None  # valid BLEU thresholds of time to quality; None: off
    quality_minutes: float = 30.0  # training budget of each framework in that mode
    quality_every: float = 1.0  # training minutes between two saved checkpoints
    quality_sentences: int = 500  # valid sentences every checkpoint is scored on

    def peer_venv(self, peer: str) -> Path:
        return self.peer_root / peer

    def peer_python(self, peer: str) -> Path:
        return self.peer_venv(peer) / "bin" / "python"


def check_options(options: PeerOptions) -> PeerOptions:
    """SystemExit naming the option when a count is not positive, or a shape or peer unknown,
    or a time-to-quality setting wrong (`checked_thresholds`); the peers put in their running
    order, the thresholds sorted."""
    for name in POSITIVE:
        if getattr(options, name) <= 0:
            raise SystemExit(f"--{name.replace('_', '-')} must be > 0")
    unknown = [shape for shape in options.shapes if shape not in SHAPES]
    if unknown:
        raise SystemExit(f"--shapes: {unknown} not among {list(SHAPES)}")
    unknown = [peer for peer in options.peers if peer not in PEERS]
    if unknown or not options.peers:
        raise SystemExit(f"--peers: {unknown or 'none'} not among {list(PEERS)}")
    options.peers = [peer for peer in PEERS if peer in options.peers]
    options.warmup_updates = max(options.warmup_updates, 0)
    if options.quality is not None:
        options.quality = checked_thresholds(options)
    return options


def checked_thresholds(options: PeerOptions) -> list[float]:
    """The time-to-quality thresholds, sorted and each once; SystemExit naming the option
    when one is not a BLEU in (0, 100], or the save interval or budget is wrong."""
    thresholds = options.quality or []
    bad = [value for value in thresholds if not 0 < value <= 100]
    if bad or not thresholds:
        raise SystemExit(f"--quality: BLEU thresholds in (0, 100] wanted, got {bad or 'none'}")
    for name in QUALITY_POSITIVE:
        if not getattr(options, name) > 0:
            raise SystemExit(f"--{name.replace('_', '-')} must be > 0")
    if options.quality_every > options.quality_minutes:
        raise SystemExit(
            f"--quality-every {options.quality_every:g} is longer than --quality-minutes "
            f"{options.quality_minutes:g}: not one checkpoint would be saved before the end"
        )
    return sorted(set(thresholds))
