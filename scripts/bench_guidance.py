"""The cost of guided alignment: time per update with and without it, same batches, same run.

    python scripts/bench_guidance.py                                  # default_cpu, gru_additive
    python scripts/bench_guidance.py --preset default_cpu --updates 30 --threads 1

For each preset, one trainer per variant (assembled as `seq2seq-train` assembles it:
`seq2seq.runs.assemble.assemble_trainer`): without guidance, with `alignment=guided`, and
for a Transformer decoder also with `alignment.full_context=true`. The links are those a
guided run uses (eflomal's, or `data.alignments`), made once and cached. The variants take
the same batches of epoch 0, after `--warmup` updates each, one update of every variant in
turn, the first of the turn rotating (so a slow spell of the machine hits them all, and no
variant always runs first); an update is the trainer's own batch
(the link targets included), `train_step` and `update`. Printed: the median seconds per
update of each variant and its ratio to the unguided one.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
from hydra import compose, initialize_config_module
from omegaconf import DictConfig

from seq2seq import registry
from seq2seq.config import register_configs
from seq2seq.runs.assemble import assemble_trainer
from seq2seq.training.trainer import Trainer

PRESETS = ("default_cpu", "gru_additive")
VARIANTS = {
    "unguided": [],
    "guided": ["alignment=guided"],
    "guided, full context": ["alignment=guided", "alignment.full_context=true"],
}


def preset_config(preset: str, threads: int, device: str, extra: list[str]) -> DictConfig:
    overrides = [f"+experiment={preset}", f"trainer.threads={threads}", f"trainer.device={device}"]
    register_configs()
    with initialize_config_module(config_module="seq2seq.configs", version_base="1.3"):
        return compose(config_name="train", overrides=overrides + extra)


def timed_update(trainer: Trainer, indices: list[int]) -> float:
    """Seconds of one update on the batch `indices`, as the training loop makes it."""
    started = time.perf_counter()
    batch = trainer.data.train.batch(indices).to(trainer.device)
    trainer.train_step(batch)
    trainer.update()
    if trainer.device.type == "cuda":
        torch.cuda.synchronize(trainer.device)
    return time.perf_counter() - started


def measure(preset: str, args: argparse.Namespace, folder: Path) -> dict[str, float]:
    """Median seconds per update of each variant that applies to the preset."""
    trainers = {}
    for name, overrides in VARIANTS.items():
        cfg = preset_config(preset, args.threads, args.device, overrides + args.override)
        decoder = registry.of_node("decoder", cfg.decoder).builder
        if "alignment.full_context=true" in overrides and not hasattr(decoder, "full_context"):
            continue  # a recurrent or convolutional decoder has no full-context pass
        trainers[name] = assemble_trainer(cfg, folder / preset / name, observe=False)
    batches = next(iter(trainers.values())).sampler.batches(0)[: args.warmup + args.updates]
    seconds: dict[str, list[float]] = {name: [] for name in trainers}
    names = list(trainers)
    for position, indices in enumerate(batches):
        turn = position % len(names)
        for name in names[turn:] + names[:turn]:  # each variant goes first as often
            elapsed = timed_update(trainers[name], indices)
            if position >= args.warmup:
                seconds[name].append(elapsed)
    return {name: statistics.median(values) for name, values in seconds.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", nargs="+", default=list(PRESETS))
    parser.add_argument("--updates", type=int, default=30, help="timed updates per variant")
    parser.add_argument("--warmup", type=int, default=5, help="untimed updates first")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--override", nargs="*", default=[], help="more Hydra overrides")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-guidance-") as folder:
        for preset in args.preset:
            medians = measure(preset, args, Path(folder))
            base = medians["unguided"]
            for name, median in medians.items():
                print(f"{preset:14} {name:22} {median * 1000:8.1f} ms/update  {median / base:.3f}×")


if __name__ == "__main__":
    main()
