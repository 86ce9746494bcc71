"""The OpenNMT-py side of `make bench-peer`, run by its environment's Python by file path:

    PEER_PYTHON onmt_driver.py train CONFIG --threads N [--save-every S --budget S --saves SAVES]
    PEER_PYTHON onmt_driver.py decode SETTINGS --checkpoint CKPT --threads N --reps R --result OUT
    PEER_PYTHON onmt_driver.py quality SETTINGS --saves SAVES --threads N --result OUT

Its top level imports only the standard library and `driver` and `quality_clock` beside it
(the peer environment has OpenNMT-py and torch but not this package); OpenNMT-py, torch and
sentencepiece are imported inside the functions that use them.

Training is `onmt_train -config CONFIG`, stopped by SIGINT: the signal ends its loop at the
next batch, and OpenNMT-py then saves the weights of that step as at its last step.
Decoding times OpenNMT-py's translator on the test sources per search, with the sources cut
into pieces by our sentencepiece model and the outputs joined again inside the timed call
(as our Translator and JoeyNMT do), so that the 1-best pieces can be counted.

Time to quality: with `--saves`, training saves by the `quality_clock` between batches
(`save_by_clock`, OpenNMT-py's own saver, every checkpoint kept by the quality config) and
ends itself at the budget; `quality` translates the settings' sources (the quality sources)
greedily with every checkpoint recorded in SAVES.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

if __package__:  # imported as tools.bench.peer.onmt_driver (tests, our side)
    from tools.bench.peer.driver import SEARCHES, run_task, timed_search
    from tools.bench.peer.quality_clock import SaveClock, read_saves
else:  # run by file path: this folder is first on the import path
    from driver import SEARCHES, run_task, timed_search
    from quality_clock import SaveClock, read_saves

# OpenNMT-py 3.5 stores its options (an argparse Namespace) in its checkpoints, which
# torch ≥ 2.6 refuses to unpickle by default; the checkpoint is the one this run wrote.
FULL_UNPICKLE = {"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}


def until_stopped(stop: threading.Event, batches: Iterable[Any]) -> Iterator[Any]:
    """The batches of `batches` until `stop` is set (checked before each one but the first:
    OpenNMT-py's loop must make one step to have a step to save)."""
    for index, batch in enumerate(batches):
        if index and stop.is_set():
            return
        yield batch


def stop_between_batches(trainer_class: Any, stop: threading.Event) -> None:
    """Make `trainer_class.train` (OpenNMT-py's Trainer) draw its batches through
    `until_stopped`: once `stop` is set its loop ends and saves the weights of that step."""
    train = trainer_class.train

    def train_until_stopped(self: Any, train_iter: Iterable[Any], *args: Any, **kw: Any) -> Any:
        return train(self, until_stopped(stop, train_iter), *args, **kw)

    trainer_class.train = train_until_stopped


def saved_by_clock(trainer: Any, clock: SaveClock, batches: Iterable[Any]) -> Iterator[Any]:
    """The batches of `batches`, the clock asked before each is used whether a save is due
    (OpenNMT-py's `optim.training_step` is the step about to be made: the updates done are
    one fewer); they end when the budget is spent, after that step's save (the loop's final
    save then finds it saved)."""
    for batch in batches:
        if clock.at_update(trainer.optim.training_step - 1, lambda done: _save(trainer, done)):
            return
        yield batch


def _save(trainer: Any, step: int) -> Path:
    """OpenNMT-py's save of `step` (its `<save_model>_step_<step>.pt`); the path."""
    trainer.model_saver.save(step, moving_average=trainer.moving_average)
    return Path(f"{trainer.model_saver.base_path}_step_{step}.pt")


def save_by_clock(trainer_class: Any, clock: SaveClock) -> None:
    """Make `trainer_class.train` (OpenNMT-py's Trainer) start `clock` and draw its batches
    through `saved_by_clock`."""
    train = trainer_class.train

    def train_saving(self: Any, train_iter: Iterable[Any], *args: Any, **kw: Any) -> Any:
        clock.start()
        return train(self, saved_by_clock(self, clock, train_iter), *args, **kw)

    trainer_class.train = train_saving


def peer_train(config_path: Path, threads: int, clock: SaveClock | None = None) -> None:
    """Train as `onmt_train -config CONFIG` does, with `threads` torch threads, until SIGINT;
    with `clock` (time to quality), saving by it until its budget is spent."""
    import torch
    from onmt.bin.train import _get_parser, train
    from onmt.trainer import Trainer

    torch.set_num_threads(threads)
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    stop_between_batches(Trainer, stop)
    if clock is not None:
        save_by_clock(Trainer, clock)
    opt, _ = _get_parser().parse_known_args(["-config", str(config_path)])
    train(opt)


def load_engine(settings: dict[str, Any], checkpoint: Path, beam: int) -> Any:
    """OpenNMT-py's inference engine for `checkpoint` with beam size `beam` (1 = argmax)."""
    from onmt.inference_engine import InferenceEnginePY
    from onmt.opts import translate_opts
    from onmt.utils.parse import ArgumentParser

    parser = ArgumentParser(description="onmt_driver decode")
    translate_opts(parser)
    options = {
        **settings["options"],
        "beam_size": beam,
        "random_sampling_topk": 1 if beam == 1 else 0,
    }
    argv = ["-model", str(checkpoint), "-src", settings["sources"]]
    for name, value in options.items():
        argv += [f"-{name}", str(value)]
    opt = parser.parse_args(argv)
    ArgumentParser.validate_translate_opts(opt)
    ArgumentParser._get_all_transform_translate(opt)
    ArgumentParser._validate_transforms_opts(opt)
    ArgumentParser.validate_translate_opts_dynamic(opt)
    return InferenceEnginePY(opt)


def translate(engine: Any, encode: Callable, decode: Callable, sources: list[str]) -> tuple:
    """(detokenised outputs, their pieces) of `sources`; pieces in, pieces out."""
    _, predictions = engine.infer_list([" ".join(encode(line)) for line in sources])
    pieces = [best[0].split(" ") if best[0] else [] for best in predictions]
    return [decode(output) for output in pieces], pieces


def _decoding_setup(settings_path: Path, threads: int) -> tuple[dict, Callable, Callable]:
    """(settings, encode, decode): the decode settings, and our sentencepiece models as
    line → pieces and pieces → line."""
    os.environ.update(FULL_UNPICKLE)
    import sentencepiece
    import torch

    torch.set_num_threads(threads)
    settings = json.loads(settings_path.read_text(encoding="utf-8"))
    src_model = sentencepiece.SentencePieceProcessor(model_file=settings["src_model"])
    tgt_model = sentencepiece.SentencePieceProcessor(model_file=settings["tgt_model"])
    encode = lambda line: src_model.encode(line, out_type=str)  # noqa: E731
    return settings, encode, tgt_model.decode_pieces


def peer_decode(settings_path: Path, checkpoint: Path, threads: int, reps: int, out: Path) -> None:
    """Per search: load the model, warm up on the dev sources, then time `reps` translations
    of the test sources; write seconds, counts and outputs as JSON."""
    settings, encode, decode = _decoding_setup(settings_path, threads)
    sources = Path(settings["sources"]).read_text(encoding="utf-8").splitlines()
    warmup = Path(settings["warmup_sources"]).read_text(encoding="utf-8").splitlines()
    results: dict[str, Any] = {}
    for beam in SEARCHES:
        engine = load_engine(settings, checkpoint, beam)
        model = engine.translator.model
        results["parameters"] = sum(p.numel() for p in model.parameters() if p.requires_grad)
        translate(engine, encode, decode, warmup)  # warm-up
        results[str(beam)] = timed_search(
            lambda: translate(engine, encode, decode, sources), reps  # noqa: B023
        )
    out.write_text(json.dumps(results), encoding="utf-8")


def peer_quality(settings_path: Path, saves: Path, threads: int, out: Path) -> None:
    """Greedy translations of the settings' sources (the quality sources) with every
    checkpoint recorded in `saves`, in that order; written as a JSON list of output lists."""
    settings, encode, decode = _decoding_setup(settings_path, threads)
    sources = Path(settings["sources"]).read_text(encoding="utf-8").splitlines()
    outputs = []
    for save in read_saves(saves):
        engine = load_engine(settings, Path(save["checkpoint"]), 1)
        outputs.append(translate(engine, encode, decode, sources)[0])
    out.write_text(json.dumps(outputs), encoding="utf-8")


def main(argv: list[str] | None = None) -> None:
    run_task("the OpenNMT-py side of make bench-peer", peer_train, peer_decode, peer_quality, argv)


if __name__ == "__main__":
    main()
