"""The JoeyNMT side of `make bench-peer`, run by the peer environment's Python by file path:

    PEER_PYTHON driver.py train CONFIG --threads N
    PEER_PYTHON driver.py decode CONFIG --checkpoint CKPT --threads N --reps R --result OUT

Its top level imports only the standard library (the peer environment has JoeyNMT and torch
but not this package); JoeyNMT and torch are imported inside the functions that use them.
`SEARCHES` and `generated_tokens` are shared with our side, so both count alike.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SEARCHES = (1, 5)  # beam sizes; 1 = greedy
EOS = "</s>"


def generated_tokens(outputs: Sequence[Sequence[str]]) -> int:
    """Target tokens generated for 1-best outputs given as pieces: pieces + 1 each (the EOS,
    or the last step of an output cut at the length limit)."""
    return sum(len([piece for piece in pieces if piece != EOS]) + 1 for pieces in outputs)


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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="the JoeyNMT side of make bench-peer")
    parser.add_argument("task", choices=("train", "decode"))
    parser.add_argument("config", type=Path)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--checkpoint", type=Path)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--result", type=Path)
    args = parser.parse_args(argv)
    if args.task == "train":
        peer_train(args.config, args.threads)
    else:
        peer_decode(args.config, args.checkpoint, args.threads, args.reps, args.result)


if __name__ == "__main__":
    main()
