"""Assemble a training run from its composed config: the one place that does it.

    trainer = assemble_trainer(cfg, run_dir)           # data, model, trainer (a benchmark, a test)
    results = train_and_test(cfg, run_dir)             # all of seq2seq-train, without the CLI

`train_and_test` checks the settings, starts data parallelism when run under `torchrun`,
locks the run folder, assembles the trainer (resuming when `trainer.resume` says so),
trains, tests the best (or averaged) weights and writes `results.json` (a finished run
started again, that trains no further, keeps the results it has). `seq2seq-train`
is a thin shell over it; `scripts/bench.py` and the tests build their trainers with
`assemble_trainer`, so what they measure is what users train.
"""

from __future__ import annotations

import json
import logging
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from seq2seq import plugins, registry
from seq2seq.align.training_links import check_links_source, with_training_links
from seq2seq.bounded_files import StructuredFileError, read_json
from seq2seq.checkpoint import (
    CheckpointError,
    architecture_differences,
    check_plugins,
    load_checkpoint,
    load_resumable,
    plugins_hint,
    tokenizer_payload,
)
from seq2seq.config.build import (
    ConfigError,
    build_model,
    count_parameters,
    instantiate_part,
    plain,
)
from seq2seq.config.schema import has_alignment_layer, is_guided, needs_training_links
from seq2seq.config.search_settings import SearchSettings
from seq2seq.config.sizing import (
    Vocabulary,
    check_size_limit,
    check_state_shapes,
    configured_vocabulary,
)
from seq2seq.config.stored import check_known_keys, current_layout
from seq2seq.config.training_settings import TrainerSettings
from seq2seq.config.value_checks import check_machine, check_settings, complete_option_nodes
from seq2seq.data.prepare import PreparedData, prepare
from seq2seq.data.settings import DataConfig
from seq2seq.metrics import corpus_scores
from seq2seq.runs.folder import (
    LOCK_NAME,
    RESULTS_NAME,
    check_new_run_folder,
    remove_stale_temporaries,
    resolve_resume,
    resume_folder,
    run_folder_lock,
)
from seq2seq.training import distributed
from seq2seq.training.alignment_layer_loss import LayerTraining
from seq2seq.training.guided_alignment import Guidance, resolve_layer
from seq2seq.training.hooks import ValidationHook, validation_hooks
from seq2seq.training.logger import RunLogger
from seq2seq.training.memory import keep_freed_memory
from seq2seq.training.objectives import objective_for
from seq2seq.training.precision import autocast_for
from seq2seq.training.trainer import Trainer

log = logging.getLogger(__name__)


def select_device(name: str) -> torch.device:
    """`auto` picks CUDA when there is a GPU, else the CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"trainer.device={name!r} but no CUDA device is available")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        count = torch.cuda.device_count()
        raise ConfigError(f"trainer.device={name!r} but this machine has {count} CUDA device(s)")
    return device


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def data_config(cfg: DictConfig) -> DataConfig:
    """The run's `data` section as a checked DataConfig (a ConfigError names the key)."""
    try:
        return DataConfig(**plain(cfg.data))
    except ValueError as error:
        raise ConfigError(str(error)) from error


# ---------------------------------------------------------------- assembling a trainer


@dataclass(frozen=True)
class Placement:
    """Where a run executes: its device and its rank among data-parallel processes."""

    device: torch.device
    ranks: distributed.Distributed

    @classmethod
    def single(cls, device_name: str) -> Placement:
        """One process on `device_name` (`auto`, `cpu`, `cuda`, `cuda:N`)."""
        return cls(select_device(device_name), distributed.Distributed())


def assemble_trainer(
    cfg: DictConfig,
    run_dir: Path,
    *,
    placement: Placement | None = None,
    resume_path: Path | None = None,
    observe: bool = True,
) -> Trainer:
    """Data, model and Trainer as seq2seq-train makes them, restored from `resume_path`
    when given. `observe=False` leaves out the TensorBoard logger and the alignment hooks
    (a benchmark, a test that only needs the trained model)."""
    placement = placement or Placement.single(cfg.trainer.device)
    device, ranks = placement.device, placement.ranks
    if cfg.trainer.threads > 0:
        torch.set_num_threads(cfg.trainer.threads)
    if cfg.trainer.keep_freed_memory:
        keep_freed_memory()
    seed_everything(cfg.trainer.seed + ranks.rank)  # DDP copies rank 0's initial weights
    with ranks.main_first():  # rank 0 fills the data caches the others then read
        data = prepare(data_config(cfg))
        if needs_training_links(cfg):  # the training pairs' piece links (seq2seq.align.training_links)
            data = with_training_links(plain(cfg.data), data)
    model = build_model(cfg, data.src_tokenizer.vocab_size, data.tgt_tokenizer.vocab_size)
    if is_guided(cfg) and ranks.is_main:
        log_guidance(cfg, model.alignment_shift)
    if has_alignment_layer(cfg) and ranks.is_main:
        log_alignment_layer(cfg)
    model.to(device)
    payload = None
    if resume_path is not None:
        payload, resume_path = load_resumable(resume_path, map_location=device)
        check_compatible(payload, cfg, data, resume_path)
    observed = observe and ranks.is_main
    logger = RunLogger(run_dir, enabled=observed and cfg.logging.tensorboard)
    hooks = validation_hooks(plain(cfg), data) if observed else []
    trainer = build_trainer(cfg, model, data, run_dir, placement, logger, hooks)
    if payload is not None:
        trainer.restore(payload)
        log.info("resumed %s at step %d", resume_path, trainer.progress.step)
    return trainer


def build_trainer(
    cfg: DictConfig,
    model: torch.nn.Module,
    data: PreparedData,
    run_dir: Path,
    placement: Placement,
    logger: RunLogger,
    hooks: list[ValidationHook],
) -> Trainer:
    """The Trainer of a run, and what it is given, each chosen here once: its typed
    settings, the optimiser and schedule, the objective (plain, guided alignment,
    REINFORCE: `seq2seq.training.objectives`)."""
    settings = TrainerSettings.from_config(cfg)
    optimizer = instantiate_part(cfg.optim, "optim", params=model.parameters())
    extra = {}  # total_steps=trainer.max_steps for a schedule that needs it
    if registry.of_node("schedule", cfg.schedule).builder.needs_total_steps:
        extra["total_steps"] = settings.max_steps
    schedule = instantiate_part(cfg.schedule, "schedule", optimizer=optimizer, **extra)
    guidance = None  # alignment=guided: what it supervises, with the built model's shift
    if is_guided(cfg):
        guidance = Guidance.from_config(plain(cfg.alignment)).for_model(model)
    layer_training = None  # alignment=layer: how the separate layer learns
    if has_alignment_layer(cfg):
        layer_training = LayerTraining.from_config(plain(cfg.alignment), model)
    autocast = autocast_for(settings.precision, placement.device)
    objective = objective_for(model, settings.label_smoothing, autocast, guidance, settings.compile,
                              layer_training)  # fmt: skip
    return Trainer(settings, model, data, run_dir, placement.device, objective=objective,
                   optimizer=optimizer, schedule=schedule, logger=logger, hooks=hooks,
                   ranks=placement.ranks)  # fmt: skip


def check_startup(cfg: DictConfig) -> None:
    """What is checked before any data is prepared, folder made or tensor allocated: keys
    no schema knows (`+trainer.typo=1`), out-of-range values, position tables too short for
    `data.max_len`, a guided run with no way to get its links, and a model above
    `model.max_parameters` (measured on the meta device); each a ConfigError naming the key.
    The attention's score and region become full nodes in `cfg` first (every option).
    The config's plugins must have been imported before (`seq2seq.plugins.import_plugins`,
    as seq2seq-train does), so that their components are known to every check."""
    check_plugins_imported(cfg)
    complete_option_nodes(cfg)
    check_known_keys(cfg)
    check_settings(cfg)
    check_machine(cfg)
    check_links_source(plain(cfg))
    check_size_limit(cfg, configured_vocabulary(data_config(cfg)))


def check_plugins_imported(cfg: DictConfig) -> None:
    """ConfigError naming `plugins[i]` for a plugin of the config not imported yet."""
    done = {plugin.spec for plugin in plugins.imported()}
    for index, spec in enumerate(cfg.get("plugins") or []):
        if spec not in done:
            raise ConfigError(
                f"plugins[{index}]: {spec!r} is not imported; call "
                "seq2seq.plugins.import_plugins(cfg.plugins) before train_and_test"
            )


def log_guidance(cfg: DictConfig, shift: int) -> None:
    """One line: which attention guided alignment supervises, and how (`shift`: the built
    model's, `alignment.shift` resolved)."""
    alignment, decoder = plain(cfg.alignment), plain(cfg.decoder)
    builder = registry.of_node("decoder", decoder).builder
    layers = builder.flops(decoder, cfg.model.embed_dim, 1, 1)[1]  # its attention layers
    heads = alignment["heads"]
    log.info(
        "guided alignment: attention layer %d of %d, %s, λ=%g, %s loss%s, the links of "
        "target piece t on decoder step t + %d",
        resolve_layer(alignment["layer"], layers), layers,
        "every head" if heads is None else f"head(s) {heads}", alignment["weight"],
        alignment["loss"], ", full-context pass" if alignment["full_context"] else "", shift,
    )  # fmt: skip


def log_alignment_layer(cfg: DictConfig) -> None:
    """One line: how the separate alignment layer learns (`alignment=layer`)."""
    alignment = plain(cfg.alignment)
    if alignment["training"] == "guided":
        teacher = "the links of the training pairs"
    else:
        shift = alignment["teacher_shift"]
        teacher = (f"the translation attention (layer {alignment['teacher_layer']}, heads "
                   f"{alignment['teacher_heads'] or 'all'}) read "
                   f"{'at the decoder lag' if shift is None else f'{shift} step(s) on'}, "
                   f"{alignment['labels']} labels")  # fmt: skip
    log.info("alignment layer: %d head(s), query %s, λ=%g, %s loss, gradient into the shared "
             "states ×%g, learning from %s", alignment["layer_heads"], alignment["query"],
             alignment["weight"], alignment["loss"], alignment["gradient"], teacher)  # fmt: skip


def check_compatible(payload: dict, cfg: DictConfig, data: PreparedData, path: Path) -> None:
    """Refuse a checkpoint trained with plugins the run was not given (`plugins=`), or whose
    architecture, vocabulary or weights' shapes differ from the config."""
    check_plugins(payload, path, plugins_hint("plugins="))
    current = OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)
    stored = current_layout(payload["config"])  # an older checkpoint's flat attention options
    differences = architecture_differences(stored, current_layout(current))
    for side, saved in payload["tokenizers"].items():
        if saved["model"] != tokenizer_payload(data)[side]["model"]:
            differences.append(
                f"{side} vocabulary: the checkpoint's tokeniser differs from the data's"
            )
    if differences:
        raise CheckpointError(
            f"checkpoint {path} does not match the configuration:\n  " + "\n  ".join(differences)
        )
    vocab = Vocabulary(data.src_tokenizer.vocab_size, data.tgt_tokenizer.vocab_size)
    try:
        check_state_shapes(cfg, vocab, payload["model"])
    except ConfigError as error:
        raise CheckpointError(f"checkpoint {path}: {error}") from error


# ---------------------------------------------------------------- a whole run


def train_and_test(cfg: DictConfig, run_dir: Path, outputs_root: Path | None = None) -> dict:
    """Check the settings, train, test the best checkpoint; returns the results (module
    docstring). `trainer.resume=last` looks for checkpoints under `outputs_root`.

    Under `torchrun` every rank calls this (see `seq2seq.training.distributed`); rank 0's
    run folder is used by all, and only rank 0 returns the results (the others `{}`)."""
    check_startup(cfg)  # unknown keys, out-of-range values, oversized models stop here
    try:
        ranks = distributed.from_environment()
    except distributed.RankEnvironmentError as error:
        raise ConfigError(str(error)) from None
    device = distributed.rank_device(select_device(cfg.trainer.device), ranks)
    distributed.start(ranks, device)
    try:
        run_dir = ranks.broadcast(run_dir)
        resume_path = resolve_resume(cfg.trainer.resume, run_dir, outputs_root or run_dir.parent)
        if resume_path is not None:  # the run continues in its original folder
            run_dir = resume_folder(resume_path, run_dir)
        placement = Placement(device, ranks)
        if not ranks.is_main:  # rank 0 guards the folder for all ranks
            return _train_in_folder(cfg, run_dir, placement, resume_path)
        locked_before = (run_dir / LOCK_NAME).exists()  # a run folder, not a user's folder
        with run_folder_lock(run_dir):  # another run there: RunFolderBusy first
            if resume_path is None:
                check_new_run_folder(run_dir, locked_before=locked_before)
            remove_stale_temporaries(run_dir)
            return _train_in_folder(cfg, run_dir, placement, resume_path)
    finally:
        distributed.stop()


def _train_in_folder(
    cfg: DictConfig, run_dir: Path, placement: Placement, resume_path: Path | None
) -> dict:
    ranks = placement.ranks
    if not ranks.is_main:  # rank 0 speaks for all
        logging.getLogger("seq2seq").setLevel(logging.WARNING)
    trainer = assemble_trainer(cfg, run_dir, placement=placement, resume_path=resume_path)
    log.info("run folder %s; %s parameters", run_dir, f"{count_parameters(trainer.model):,}")
    if ranks.enabled:
        backend = torch.distributed.get_backend()
        log.info(
            "data parallel: %d ranks (%s), one update = %d batches",
            ranks.world_size,
            backend,
            ranks.world_size,
        )
    trained_from = trainer.progress.step
    trainer.fit()
    if not ranks.is_main:
        return {}
    standing = results_that_stand(trainer, cfg, trained_from)
    if standing is not None:
        trainer.logger.close()
        return standing
    results = evaluate_best(trainer, cfg)
    write_results(trainer, cfg, results)
    return results


def results_that_stand(trainer: Trainer, cfg: DictConfig, trained_from: int) -> dict | None:
    """A finished run started again (`trainer.resume=auto` in a sweep started again) keeps
    its `results.json` when this process made no update and the file scored this very
    state: the same last and best updates, the same test search and checkpoint averaging.
    Anything else (a file unreadable or from an older version, a run that trained on, a new
    search) returns None, and the run is tested again."""
    path = trainer.run_dir / RESULTS_NAME
    if trainer.progress.step != trained_from or not path.is_file():
        return None
    try:
        results = read_json(path)
    except StructuredFileError:
        return None
    same = isinstance(results, dict) and results.get("tested") == tested_state(trainer, cfg)
    if same:
        log.info("%s finished at update %d and trained no further: its results stand",
                 trainer.run_dir, trainer.progress.step)  # fmt: skip
    return results if same else None


def tested_state(trainer: Trainer, cfg: DictConfig) -> dict[str, Any]:
    """What a test score depends on besides the data: the run's last and best updates, the
    test search, and checkpoint averaging (results.json keeps it as `tested`)."""
    return {
        "steps": trainer.progress.step,
        "best_step": trainer.progress.best_step,
        "search": plain(cfg.trainer.test_search),
        "average_last": cfg.trainer.average_last,
        **({"ema_decay": cfg.trainer.ema_decay} if cfg.trainer.ema_decay > 0 else {}),
    }


def evaluate_best(trainer: Trainer, cfg: DictConfig) -> dict[str, Any]:
    """Score the best checkpoint (or the averaged weights, when better) on the test split
    with the configured search; `test.hyp` keeps the translations, `test.ref` the references."""
    best = trainer.run_dir / "checkpoints" / "best.pt"
    if best.is_file():
        trainer.model.load_state_dict(load_checkpoint(best, trainer.device)["model"])
    averaged = try_averaged(trainer)
    search = SearchSettings(**plain(cfg.trainer.test_search))
    test = trainer.data.test
    hypotheses = trainer.translate([src for src, _ in test.examples], search)
    (trainer.run_dir / "test.hyp").write_text("\n".join(hypotheses) + "\n", encoding="utf-8")
    # the references they are scored against, for paired tests of runs (seq2seq.study.seed_significance)
    (trainer.run_dir / "test.ref").write_text("\n".join(test.tgt_lines) + "\n", encoding="utf-8")
    scores = corpus_scores(hypotheses, test.tgt_lines, trainer.data.tgt_tokenizer.lang)
    progress = trainer.progress
    return {
        "test": scores,
        # the valid BLEU of best.pt (-1: never validated), whichever metric selected it
        "valid_best_bleu": progress.best_scores.get("bleu", -1.0),
        "select_metric": progress.best_metric,  # trainer.select_metric
        "valid_best_value": progress.best_value,  # its value at best.pt: what a sweep tunes
        "valid_best_scores": progress.best_scores,  # every valid metric of best.pt
        "best_step": progress.best_step,
        "steps": progress.step,
        "epochs": progress.epoch,
        "train_minutes": progress.train_seconds / 60.0,
        "train_tflop": progress.train_tflop,  # analytic training FLOPs (seq2seq.flops)
        "parameters": count_parameters(trainer.model),
        "search": plain(cfg.trainer.test_search),
        "averaged": averaged,
        "tested": tested_state(trainer, cfg),  # a run started again keeps these results
        "run_dir": str(trainer.run_dir),
    }


def try_averaged(trainer: Trainer) -> dict[str, float] | None:
    """Average the last validations' weights; keep the average (saved as `averaged.pt`) only
    if its valid value of `trainer.select_metric` beats the best checkpoint's. Returns the
    averaged weights' valid BLEU and selected value, and whether they were used."""
    averaged = trainer.snapshots.averaged()
    if averaged is None:
        return None
    best_weights = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
    trainer.model.load_state_dict(averaged)
    step, selected = trainer.progress.step, trainer.selection.metric
    metrics = trainer.measure()
    value = trainer.selection.value(metrics, step)
    trainer.logger.scalars({f"valid/{name}_averaged": metrics[name]
                            for name in dict.fromkeys(["bleu", selected.name])}, step)  # fmt: skip
    used = selected.improves(value, trainer.progress.best_value)
    shown = f"valid {selected.label} {value:.{selected.digits}f}"
    if used:
        trainer.save("averaged", all_ranks=False)
        log.info("averaged weights: %s, used for the test", shown)
    else:
        trainer.model.load_state_dict(best_weights)
        log.info("averaged weights: %s, not better; testing best.pt", shown)
    return {"valid_bleu": metrics["bleu"], "valid_value": value, "used": used}


def write_results(trainer: Trainer, cfg: DictConfig, results: dict[str, Any]) -> Path:
    """`results.json` and the TensorBoard HPARAMS entry; closes the logger."""
    path = trainer.run_dir / RESULTS_NAME
    path.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    trainer.logger.hparams(hparams(cfg, results), hparam_metrics(results), trainer.progress.step)
    trainer.logger.close()
    return path


def hparams(cfg: DictConfig, results: dict[str, Any]) -> dict[str, Any]:
    """What the HPARAMS table shows of a run: its parts' classes and main settings."""
    attention = plain(cfg.attention)
    return {
        "encoder": registry.of_node("encoder", cfg.encoder).builder.__name__,
        "decoder": registry.of_node("decoder", cfg.decoder).builder.__name__,
        **{f"attention.{k}": v for k, v in attention.items() if k != "_target_"},
        "attention": registry.of_node("attention", attention).builder.__name__,
        "embed_dim": cfg.model.embed_dim,
        "lr": cfg.optim.lr,
        "max_tokens": cfg.data.max_tokens,
        "parameters": results["parameters"],
    }


def hparam_metrics(results: dict[str, Any]) -> dict[str, float]:
    return {
        "hparams/valid_bleu": results["valid_best_bleu"],
        "hparams/test_bleu": results["test"]["bleu"],
        "hparams/test_chrf": results["test"]["chrf"],
    }
