"""`seq2seq-train`: the Hydra training app.

    seq2seq-train                                   # the default CPU model
    seq2seq-train encoder=gru decoder=gru attention=additive
    seq2seq-train -m attention=dot,general,additive # a sweep, one run folder each
    seq2seq-train +experiment=transformer_small trainer.max_steps=2000
    seq2seq-train trainer.resume=last               # continue the newest run
    torchrun --standalone --nproc_per_node=2 -m seq2seq.train hydra.run.dir=outputs/ddp

`main` is a thin shell over `run_training(cfg, run_dir)`, which tests call directly.

Exit codes: 0 done; 2 a one-line error about the input or the run (a config value, a
checkpoint, a data file, a run folder in use by another run, a checkpoint that could not be
written, a diverged run); 143 stopped by SIGTERM or SIGUSR1 after saving `last.pt` at a step
boundary (preempted: rerun the same command with `trainer.resume=<run folder>`). Ctrl-C also
saves `last.pt` at a step boundary, then ends as an ordinary KeyboardInterrupt.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hydra
import numpy as np
import torch
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from seq2seq.build import ConfigError, build_model, count_parameters, plain
from seq2seq.checkpoint import (
    CheckpointError,
    architecture_differences,
    load_checkpoint,
    load_resumable,
    tokenizer_payload,
)
from seq2seq.config import register_configs
from seq2seq.configs import SEARCH_PATH
from seq2seq.data.config import DataConfig
from seq2seq.data.corpus import CorpusError
from seq2seq.data.fetch import FetchError
from seq2seq.data.prepare import prepare
from seq2seq.decoding import SearchSettings
from seq2seq.metrics import corpus_scores
from seq2seq.settings_checks import check_settings
from seq2seq.training import distributed
from seq2seq.training.logger import RunLogger
from seq2seq.training.trainer import Trainer, TrainingDiverged, TrainingStopped

# The run folder's lock file (see `run_folder_lock`).
LOCK_NAME = "train.lock"
# Exit code of a run stopped by SIGTERM or SIGUSR1 after saving `last.pt`: resumable.
PREEMPTED_EXIT = 143
log = logging.getLogger(__name__)


class RunFolderBusy(RuntimeError):
    """Another training process is writing to the run folder."""


# Errors that describe bad input or a run that cannot go on (a config value, a file, a
# checkpoint, a busy run folder, a diverged run), reported in one line with exit code 2.
USER_ERRORS = (
    ConfigError, CheckpointError, FetchError, CorpusError, RunFolderBusy, TrainingDiverged
)  # fmt: skip


@contextlib.contextmanager
def run_folder_lock(run_dir: Path) -> Iterator[None]:
    """Hold an advisory lock (flock) on `run_dir/train.lock` for the block; raise RunFolderBusy
    naming the folder and the holder's pid when another process holds it. The operating
    system releases the lock when its process dies, so a killed run never blocks a resume."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / LOCK_NAME
    with open(path, "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise RunFolderBusy(
                f"run folder {run_dir} is in use by another training process (pid {holder}, "
                f"lock file {path}); wait for it to end or give another hydra.run.dir"
            ) from None
        except OSError as error:  # a file system without flock: train unguarded
            log.warning("cannot lock %s (%s); not guarding the run folder", path, error)
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        yield  # closing the file releases the lock


def remove_stale_temporaries(run_dir: Path) -> None:
    """Delete checkpoint temporaries left by a process killed mid-write (only call this
    while holding the run folder's lock: then no other process is writing one)."""
    for stale in (run_dir / "checkpoints").glob(".*.tmp"):
        stale.unlink(missing_ok=True)
        log.info("removed %s, left by an interrupted checkpoint write", stale)


def select_device(name: str) -> torch.device:
    """`auto` picks CUDA when there is a GPU, else the CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"trainer.device={name!r} but no CUDA device is available")
    return device


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def resolve_resume(resume: str | None, run_dir: Path, outputs_root: Path) -> Path | None:
    """A checkpoint path from `trainer.resume`: a file, a run folder, or `last` (the newest
    `last.pt` under the outputs folder)."""
    if not resume:
        return None
    if resume == "last":  # a folder whose last.pt was lost mid-rotation still counts
        found = [
            p
            for name in ("last.pt", "last.prev.pt")
            for p in outputs_root.glob(f"**/checkpoints/{name}")
            if run_dir not in p.parents
        ]
        if not found:
            raise CheckpointError(
                f"trainer.resume=last: no checkpoints/last.pt under {outputs_root}"
            )
        return max(found, key=lambda p: p.stat().st_mtime).with_name("last.pt")
    path = Path(resume)
    return path / "checkpoints" / "last.pt" if path.is_dir() else path


def data_config(cfg: DictConfig) -> DataConfig:
    try:
        return DataConfig(**plain(cfg.data))
    except ValueError as error:
        raise ConfigError(str(error)) from error


def check_compatible(payload: dict, cfg: DictConfig, data: Any, path: Path) -> None:
    """Refuse a checkpoint whose architecture or vocabulary differs from the config."""
    current = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    differences = architecture_differences(payload["config"], current)
    for side, saved in payload["tokenizers"].items():
        if saved["model"] != tokenizer_payload(data)[side]["model"]:
            differences.append(
                f"{side} vocabulary: the checkpoint's tokeniser differs from the data's"
            )
    if differences:
        raise CheckpointError(
            f"checkpoint {path} does not match the configuration:\n  " + "\n  ".join(differences)
        )


def run_training(cfg: DictConfig, run_dir: Path, outputs_root: Path | None = None) -> dict:
    """Prepare data, build, train, evaluate the best checkpoint on test; returns results.

    Under `torchrun` every rank calls this (see `seq2seq.training.distributed`); rank 0's
    run folder is used by all, and only rank 0 returns the results (the others `{}`)."""
    check_settings(cfg)  # out-of-range values stop here, naming the key
    ranks = distributed.from_environment()
    device = distributed.rank_device(select_device(cfg.trainer.device), ranks)
    distributed.start(ranks, device)
    try:
        return _train_and_test(cfg, ranks.broadcast(run_dir), outputs_root, ranks, device)
    finally:
        distributed.stop()


def _train_and_test(
    cfg: DictConfig,
    run_dir: Path,
    outputs_root: Path | None,
    ranks: distributed.Distributed,
    device: torch.device,
) -> dict:
    resume_path = resolve_resume(cfg.trainer.resume, run_dir, outputs_root or run_dir.parent)
    if resume_path is not None:  # the run continues in its original folder
        run_dir = resume_path.parent.parent
    if not ranks.is_main:  # rank 0 guards the folder for all ranks
        return _train_in_folder(cfg, run_dir, resume_path, ranks, device)
    with run_folder_lock(run_dir):
        remove_stale_temporaries(run_dir)
        return _train_in_folder(cfg, run_dir, resume_path, ranks, device)


def _train_in_folder(
    cfg: DictConfig,
    run_dir: Path,
    resume_path: Path | None,
    ranks: distributed.Distributed,
    device: torch.device,
) -> dict:
    if cfg.trainer.threads > 0:
        torch.set_num_threads(cfg.trainer.threads)
    if not ranks.is_main:  # rank 0 speaks for all
        logging.getLogger("seq2seq").setLevel(logging.WARNING)
    seed_everything(cfg.trainer.seed + ranks.rank)  # DDP copies rank 0's initial weights
    with ranks.main_first():  # rank 0 fills the data caches the others then read
        data = prepare(data_config(cfg))
    model = build_model(cfg, data.src_tokenizer.vocab_size, data.tgt_tokenizer.vocab_size)
    model.to(device)
    if resume_path is not None:
        payload, resume_path = load_resumable(resume_path, map_location=device)
        check_compatible(payload, cfg, data, resume_path)
    logger = RunLogger(run_dir, enabled=cfg.logging.tensorboard and ranks.is_main)
    hooks = _visual_hooks(cfg, data) if ranks.is_main else []
    trainer = Trainer(cfg, model, data, run_dir, device, logger, hooks=hooks, ranks=ranks)
    if resume_path is not None:
        trainer.restore(payload)
        log.info("resumed %s at step %d", resume_path, trainer.progress.step)
    log.info("run folder %s; %s parameters", run_dir, f"{count_parameters(model):,}")
    if ranks.enabled:
        backend = torch.distributed.get_backend()
        log.info(
            "data parallel: %d ranks (%s), one update = %d batches",
            ranks.world_size,
            backend,
            ranks.world_size,
        )
    trainer.fit()
    if not ranks.is_main:
        return {}
    results = evaluate_best(trainer, cfg)
    finish(trainer, cfg, results)
    return results


def _visual_hooks(cfg: DictConfig, data: Any) -> list:
    """Hooks run after each validation (the alignment images, when available)."""
    try:
        from seq2seq.visualise.hooks import alignment_hooks
    except ImportError:
        return []
    return alignment_hooks(cfg, data)


def evaluate_best(trainer: Trainer, cfg: DictConfig) -> dict[str, Any]:
    """Score the best checkpoint on the test split with the configured search."""
    best = trainer.run_dir / "checkpoints" / "best.pt"
    if best.is_file():
        trainer.model.load_state_dict(load_checkpoint(best, trainer.device)["model"])
    averaged = try_averaged(trainer)
    search = SearchSettings(**plain(cfg.trainer.test_search))
    test = trainer.data.test
    hypotheses = trainer.translate([src for src, _ in test.examples], search)
    (trainer.run_dir / "test.hyp").write_text("\n".join(hypotheses) + "\n", encoding="utf-8")
    scores = corpus_scores(hypotheses, test.tgt_lines, trainer.data.tgt_tokenizer.lang)
    progress = trainer.progress
    return {
        "test": scores,
        "valid_best_bleu": progress.best_bleu,
        "best_step": progress.best_step,
        "steps": progress.step,
        "epochs": progress.epoch,
        "train_minutes": progress.train_seconds / 60.0,
        "parameters": count_parameters(trainer.model),
        "search": plain(cfg.trainer.test_search),
        "averaged": averaged,
        "run_dir": str(trainer.run_dir),
    }


def try_averaged(trainer: Trainer) -> dict[str, float] | None:
    """Average the last validations' weights; keep the average (saved as `averaged.pt`) only
    if its valid BLEU beats the best checkpoint's. Returns the averaged valid metrics."""
    averaged = trainer.averaged_weights()
    if averaged is None:
        return None
    best_weights = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
    trainer.model.load_state_dict(averaged)
    metrics = trainer.validate()
    trainer.logger.scalars({"valid/bleu_averaged": metrics["bleu"]}, trainer.progress.step)
    if metrics["bleu"] > trainer.progress.best_bleu:
        trainer.save("averaged", all_ranks=False)
        log.info("averaged weights: valid BLEU %.2f, used for the test", metrics["bleu"])
    else:
        trainer.model.load_state_dict(best_weights)
        log.info("averaged weights: valid BLEU %.2f, not better; testing best.pt", metrics["bleu"])
    return {"valid_bleu": metrics["bleu"], "used": metrics["bleu"] > trainer.progress.best_bleu}


def finish(trainer: Trainer, cfg: DictConfig, results: dict[str, Any]) -> None:
    """results.json, the HPARAMS entry, and the closing lines for the user."""
    path = trainer.run_dir / "results.json"
    path.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    params = {
        "encoder": cfg.encoder._target_.rsplit(".", 1)[-1],
        "decoder": cfg.decoder._target_.rsplit(".", 1)[-1],
        **{f"attention.{k}": v for k, v in plain(cfg.attention).items() if k != "_target_"},
        "attention": cfg.attention._target_.rsplit(".", 1)[-1],
        "embed_dim": cfg.model.embed_dim,
        "lr": cfg.optim.lr,
        "max_tokens": cfg.data.max_tokens,
        "parameters": results["parameters"],
    }
    metrics = {
        "hparams/valid_bleu": results["valid_best_bleu"],
        "hparams/test_bleu": results["test"]["bleu"],
        "hparams/test_chrf": results["test"]["chrf"],
    }
    trainer.logger.hparams(params, metrics, trainer.progress.step)
    trainer.logger.close()
    test = results["test"]
    print(f"test BLEU {test['bleu']:.2f}  chrF {test['chrf']:.2f}  ({test['bleu_signature']})")
    print(f"run folder: {trainer.run_dir}")
    print(f"results:    {path}")
    print(f"tensorboard --logdir {trainer.run_dir}")


register_configs()


@hydra.main(version_base="1.3", config_path=SEARCH_PATH, config_name="train")
def main(cfg: DictConfig) -> None:
    hydra_cfg = HydraConfig.get()
    run_dir = Path(hydra_cfg.runtime.output_dir)
    outputs_root = Path(hydra_cfg.runtime.cwd) / "outputs"
    try:
        run_training(cfg, run_dir, outputs_root)
    except USER_ERRORS as error:  # one clear line, not a traceback
        log.error("%s", error)
        raise SystemExit(2) from error
    except TrainingStopped as stopped:  # preempted; the trainer logged how to resume
        raise SystemExit(PREEMPTED_EXIT) from stopped


if __name__ == "__main__":
    main()
