"""The JoeyNMT side of `make bench-peer`, run by the peer environment's Python by file path:

    PEER_PYTHON driver.py train CONFIG --threads N [--save-every S --budget S --saves SAVES]
    PEER_PYTHON driver.py decode CONFIG --checkpoint CKPT --threads N --reps R --result OUT
    PEER_PYTHON driver.py quality CONFIG --saves SAVES --threads N --result OUT

Its top level imports only the standard library and `quality_clock` beside it (the peer
environment has JoeyNMT and torch but not this package); JoeyNMT and torch are imported
inside the functions that use them. `SEARCHES` and `generated_tokens` are shared with our
side, so both count alike.

Time to quality: with `--saves`, training saves by the `quality_clock` (`joey_saves_by_clock`)
and ends itself at the budget; `quality` translates the config's test file (the quality
sources, in that config) greedily with every checkpoint recorded in SAVES.
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

if __package__:  # imported as tools.bench.peer.driver (tests, our side)
    from tools.bench.peer.quality_clock import SaveClock, read_saves
else:  # run by file path: this folder is first on the import path
    from quality_clock import SaveClock, read_saves

SEARCHES = (1, 5)  # beam sizes; 1 = greedy
EOS = "</s>"


def generated_tokens(outputs: Sequence[Sequence[str]]) -> int:
    """Target tokens generated for 1-best outputs given as pieces: pieces + 1 each (the EOS,
    or the last step of an output cut at the length limit)."""
    return sum(len([piece for piece in pieces if piece != EOS]) + 1 for pieces in outputs)


def joey_saves_by_clock(manager_class: Any, clock: SaveClock) -> None:
    """Make JoeyNMT's TrainManager save by `clock`: its loop's start starts the clock, and
    before each batch's step the clock is asked whether a save is due (JoeyNMT's own save,
    `{step}.ckpt`, with no score, so that it deletes none); at the budget the loop ends as
    at SIGINT (JoeyNMT then saves that step again)."""
    train_and_validate, train_step = manager_class.train_and_validate, manager_class._train_step

    def timed_train_and_validate(self: Any, *args: Any, **kw: Any) -> Any:
        clock.start()
        return train_and_validate(self, *args, **kw)

    def save_or_step(self: Any, batch: Any) -> Any:
        def save(step: int) -> Path:
            self._save_checkpoint(new_best=False, score=float("nan"))
            return Path(self.model_dir) / f"{step}.ckpt"

        if clock.at_update(self.stats.steps, save):
            raise KeyboardInterrupt  # the budget is spent
        return train_step(self, batch)

    manager_class.train_and_validate = timed_train_and_validate
    manager_class._train_step = save_or_step


def peer_train(config_path: Path, threads: int, clock: SaveClock | None = None) -> None:
    """Train as `python -m joeynmt train CONFIG --skip-test` does, with `threads` torch
    threads. SIGINT ends it: JoeyNMT catches it and saves the current weights. With `clock`
    (time to quality) it saves by the clock and ends itself at its budget."""
    import torch
    from joeynmt.config import load_config
    from joeynmt.helpers import make_model_dir
    from joeynmt.helpers_for_ddp import get_logger
    from joeynmt.training import TrainManager, train

    torch.set_num_threads(threads)
    if clock is not None:
        joey_saves_by_clock(TrainManager, clock)
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
        results[str(beam)] = timed_search(
            lambda: _joey_predict(model, test_data, args, settings), reps  # noqa: B023
        )
    out.write_text(json.dumps(results), encoding="utf-8")


def peer_quality(config_path: Path, saves: Path, threads: int, out: Path) -> None:
    """Greedy translations of the config's test file (the quality sources) with every
    checkpoint recorded in `saves`, in that order; written as a JSON list of output lists."""
    import torch
    from joeynmt.config import load_config, parse_global_args
    from joeynmt.helpers import load_checkpoint
    from joeynmt.prediction import prepare

    torch.set_num_threads(threads)
    checkpoints = [Path(save["checkpoint"]) for save in read_saves(saves)]
    outputs = []
    if checkpoints:
        cfg = load_config(config_path)
        cfg["testing"]["load_model"] = str(checkpoints[0])
        args = parse_global_args(cfg, rank=0, mode="test")
        model, _, _, test_data = prepare(args, rank=0, mode="test")
        greedy = args.test._replace(beam_size=1, n_best=1, eval_metrics=[])
        for checkpoint in checkpoints:
            model.load_state_dict(load_checkpoint(checkpoint, args.device)["model_state"])
            outputs.append(_joey_predict(model, test_data, args, greedy)[0])
    out.write_text(json.dumps(outputs), encoding="utf-8")


def _joey_predict(model: Any, data: Any, args: Any, settings: Any) -> tuple[list, list]:
    """JoeyNMT's `predict` without a loss or metrics: (detokenised outputs, their pieces)."""
    from joeynmt.prediction import predict

    _, _, hypotheses, pieces, _, _ = predict(
        model=model, data=data, device=args.device, n_gpu=args.n_gpu, compute_loss=False,
        args=settings, autocast=args.autocast,
    )  # fmt: skip
    return hypotheses, pieces


def timed_search(run, reps: int) -> dict[str, Any]:
    """The median seconds of `reps` calls of `run` (-> hypotheses, their pieces), after the
    caller's warm-up, with the last call's sentence count, generated tokens and outputs."""
    seconds = []
    for _ in range(reps):
        started = time.perf_counter()
        hypotheses, pieces = run()
        seconds.append(time.perf_counter() - started)
    return {
        "seconds": statistics.median(seconds),
        "sentences": len(hypotheses),
        "tokens": generated_tokens(pieces),
        "hypotheses": hypotheses,
    }


def run_task(description: str, train, decode, quality, argv: list[str] | None = None) -> None:
    """The command line of a peer's driver: `train CONFIG` (with `--saves`: by a
    `SaveClock`), `decode CONFIG --checkpoint` or `quality CONFIG --saves`, calling
    `train(config, threads, clock)`, `decode(config, checkpoint, threads, reps, result)` or
    `quality(config, saves, threads, result)`."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("task", choices=("train", "decode", "quality"))
    parser.add_argument("config", type=Path)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--checkpoint", type=Path)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--result", type=Path)
    parser.add_argument("--saves", type=Path, help="time to quality: the saves (JSON lines)")
    parser.add_argument("--save-every", type=float, help="training seconds between saves")
    parser.add_argument("--budget", type=float, help="training seconds in all")
    args = parser.parse_args(argv)
    if args.task == "train":
        clock = None
        if args.saves is not None:
            if args.save_every is None or args.budget is None:
                parser.error("--saves needs --save-every and --budget")
            clock = SaveClock(args.save_every, args.budget, args.saves)
        train(args.config, args.threads, clock)
    elif args.task == "decode":
        decode(args.config, args.checkpoint, args.threads, args.reps, args.result)
    else:
        quality(args.config, args.saves, args.threads, args.result)


def main(argv: list[str] | None = None) -> None:
    run_task("the JoeyNMT side of make bench-peer", peer_train, peer_decode, peer_quality, argv)


if __name__ == "__main__":
    main()
