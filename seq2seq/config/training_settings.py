"""The training loop's settings, typed and frozen: what `seq2seq.training.trainer` reads of a run.

    settings = TrainerSettings.from_config(cfg)     # once, at assembly (seq2seq.runs.assemble)

`from_config` reads the validated composed config (`trainer.*` and the few keys of other
sections the loop needs: `data.max_tokens`, `data.max_len`, `logging.progress_bar`,
`logging.text_samples`, `optim.lr`, `plugins`), so that the loop below it holds no `DictConfig` and calls no
`plain()`. The keys that only the assembly reads (`trainer.device`, `threads`, `resume`,
`keep_freed_memory`, `test_search`) are not here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf


@dataclass(frozen=True)
class TrainerSettings:
    """What the training loop reads of the run's config (`configs/trainer/default.yaml`
    says what each `trainer.*` key means)."""

    # The budget: the run ends at the first one reached.
    max_steps: int
    max_epochs: int
    max_minutes: float | None
    # When to validate and to log, in applied updates.
    valid_every: int
    log_every: int
    # The update.
    seed: int  # the batch order's seed
    short_first_epochs: int
    accumulate: int  # batches per update
    grad_clip: float  # 0 or less: no clipping
    label_smoothing: float
    scheduled_sampling: float
    precision: str  # auto | bf16 | fp32
    compile: bool
    max_nonfinite_steps: int
    # Checkpoint selection (`seq2seq.training.selection`).
    select_metric: str
    patience: int
    converged_gain: float
    converged_fraction: float
    converged_validations: int
    # Validation.
    valid_max_sentences: int | None
    average_last: int
    ema_decay: float  # 0: off
    subword_nbest: int  # < 2: off (seq2seq.data.subword_sampling)
    subword_alpha: float
    source_unk_rate: float  # 0: off (seq2seq.data.unknown_dropout)
    # From the other sections of the config.
    max_tokens: int  # data.max_tokens: the batches' size, training and validation
    max_len: int  # data.max_len: the most pieces of a side of a training pair
    progress_bar: bool  # logging.progress_bar
    text_samples: int  # logging.text_samples: valid translations shown in TensorBoard
    lr: float  # optim.lr, named when a run diverges
    plugins: tuple[str, ...]  # the run's plugins, recorded in each checkpoint
    # The whole config as plain data (enums as names): saved in every checkpoint, and
    # what the analytic FLOPs are counted from (`seq2seq.flops`). Read only.
    run_config: dict[str, Any]

    @classmethod
    def from_config(cls, cfg: DictConfig) -> TrainerSettings:
        """The settings of a composed, validated run config."""
        trainer = cfg.trainer
        return cls(
            max_steps=trainer.max_steps,
            max_epochs=trainer.max_epochs,
            max_minutes=trainer.max_minutes,
            valid_every=trainer.valid_every,
            log_every=trainer.log_every,
            seed=trainer.seed,
            short_first_epochs=trainer.short_first_epochs,
            accumulate=trainer.accumulate,
            grad_clip=trainer.grad_clip,
            label_smoothing=trainer.label_smoothing,
            scheduled_sampling=trainer.scheduled_sampling,
            precision=trainer.precision,
            compile=trainer.compile,
            max_nonfinite_steps=trainer.max_nonfinite_steps,
            select_metric=trainer.select_metric,
            patience=trainer.patience,
            converged_gain=trainer.converged_gain,
            converged_fraction=trainer.converged_fraction,
            converged_validations=trainer.converged_validations,
            valid_max_sentences=trainer.valid_max_sentences,
            average_last=trainer.average_last,
            ema_decay=trainer.ema_decay,
            subword_nbest=trainer.subword_nbest,
            subword_alpha=trainer.subword_alpha,
            source_unk_rate=trainer.source_unk_rate,
            max_len=cfg.data.max_len,
            max_tokens=cfg.data.max_tokens,
            progress_bar=cfg.logging.progress_bar,
            text_samples=cfg.logging.text_samples,
            lr=cfg.optim.lr,
            plugins=tuple(cfg.get("plugins") or ()),
            run_config=OmegaConf.to_container(cfg, resolve=True, enum_to_str=True),
        )
