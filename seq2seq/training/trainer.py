"""The training loop: batches in, updates out; validation, checkpoints and early stopping.

Read top to bottom: `Trainer.fit` loops over epochs and batches, `train_step` does one
forward/backward (with gradient accumulation), `validate` scores greedy translations of
the valid split, `save` writes a checkpoint that can both resume the run and translate.

Selection. `trainer.select_metric` (default `bleu`) names a registered validation metric
(`seq2seq.metrics`): its value at each validation, compared in its direction, decides
`best.pt`, drives the plateau schedule and early stopping (`trainer.patience` validations
without a better value). The translation and loss metrics come from `validate`, the others
from the validation hooks that report them (`seq2seq.training.hooks`, e.g. AER on a gold
set). The best value, its step and every metric at that validation are in the progress
saved in each checkpoint, so a resume goes on exactly; a checkpoint written before the
choice existed (its progress holds `best_bleu`) resumes as one that selected on BLEU.

Step boundaries. The run's progress (step, epoch, data position) moves only when an update
has been applied, so every checkpoint describes a state between two updates: the data
position points at the first batch of the next update (of its first micro-batch with
`trainer.accumulate`), and the saved random state is the one at that boundary. Resuming
from any checkpoint therefore replays exactly what an uninterrupted run would have done.

Stopping. SIGTERM, SIGUSR1 and SIGUSR2 (a scheduler's preemption; SIGUSR2 is submitit's
warning before a SLURM time limit) and Ctrl-C (SIGINT) set a flag that the loop reads at the
next step boundary: it saves `last.pt` there, then raises `TrainingStopped` (SIGTERM,
SIGUSR1, SIGUSR2) or KeyboardInterrupt (Ctrl-C). A second Ctrl-C stops at once without
saving. The handlers are installed only while `fit` runs, and only in the main thread; the
ones they replace (a job launcher's, e.g. submitit's requeue) are restored afterwards.

REINFORCE. With hard attention trained by REINFORCE (`attention=hard
attention.region.estimator=reinforce`), each training forward pass records the sampled keys'
log-probabilities (`seq2seq.training.reinforce`), and the loss gains the score-function
surrogate −Σ_i (R_i − b)·log π_i, R_i the sentence's mean token log-likelihood of the
reference computed from the same logits. It is added as `s − s.detach()` (its gradient,
the value 0), so `train/loss` stays the translation loss; `train/reinforce_reward` and
`train/reinforce_baseline` log R and b. `trainer.compile` cannot trace it and is refused at
start-up (`seq2seq.config.value_checks`).

Non-finite updates. An update whose loss or gradient norm is NaN or infinite is skipped:
its gradients are dropped, neither the optimiser nor the schedule steps, and the step
counter does not advance (`trainer.max_steps` counts applied updates), while its batches
count as consumed. Skips are counted (`train/skipped_steps`); `trainer.max_nonfinite_steps`
skips in a row raise `TrainingDiverged` without saving anything over the checkpoints.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import signal
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import torch
from omegaconf import DictConfig, OmegaConf

from seq2seq import registry
from seq2seq.checkpoint import (
    FORMAT_VERSION,
    HOOK_KEYS,
    CheckpointError,
    capture_rng_states,
    plugin_payload,
    restore_rng_states,
    save_checkpoint,
    tokenizer_payload,
)
from seq2seq.config.build import ConfigError, instantiate_part, plain
from seq2seq.config.search_settings import SearchSettings
from seq2seq.data.batching import Batch, TokenBatchSampler
from seq2seq.flops import training_flops
from seq2seq.metrics.base import HOOK, LOSS, TRANSLATIONS, Metric, metric, metrics_of
from seq2seq.metrics.loss import perplexity
from seq2seq.models.model import Seq2Seq
from seq2seq.search.batched import translate_ids
from seq2seq.special_tokens import PAD_ID
from seq2seq.training import distributed, reinforce
from seq2seq.training.convergence import recent_gain, validations_in_window
from seq2seq.training.guided_alignment import Guidance, guided_loss
from seq2seq.training.hooks import ValidationContext, ValidationHook, produced_metrics
from seq2seq.training.logger import RunLogger, sample_table
from seq2seq.training.loss import label_smoothed_nll, sentence_label_smoothed_nll
from seq2seq.training.progress import MetricsFile, ProgressDisplay

log = logging.getLogger(__name__)
# Signals that stop training at the next step boundary, after saving `last.pt`.
STOP_SIGNALS = tuple(
    getattr(signal, name)
    for name in ("SIGTERM", "SIGUSR1", "SIGUSR2", "SIGINT")
    if hasattr(signal, name)
)


class TrainingDiverged(RuntimeError):
    """Too many updates in a row had a non-finite loss or gradient norm."""


class TrainingStopped(Exception):
    """A stop signal (SIGTERM, SIGUSR1, SIGUSR2) ended training at a step boundary; `last.pt`
    holds that boundary, so the run can be resumed. `signum` is the signal this process
    received (None when another rank received it)."""

    def __init__(self, signal_name: str, step: int, checkpoint: Path, signum: int | None = None):
        super().__init__(f"{signal_name}: stopped at step {step}, saved {checkpoint}")
        self.signal_name, self.step, self.checkpoint = signal_name, step, checkpoint
        self.signum = signum


class StopRequest:
    """While entered (in the main thread), SIGTERM, SIGUSR1, SIGUSR2 and SIGINT only record
    that a stop was asked for; the training loop reads `received` at its step boundaries.
    A SIGINT while a stop is already pending raises KeyboardInterrupt at once (an impatient
    Ctrl-C). The previous handlers are restored on exit."""

    def __init__(self) -> None:
        self.received: int | None = None
        self.immediate = False  # a second Ctrl-C interrupted without saving
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if signum == signal.SIGINT and self.received is not None:
            self.immediate = True
            raise KeyboardInterrupt
        if self.received is None:
            self.received = signum

    def __enter__(self) -> StopRequest:
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)
        self._previous.clear()


@dataclass
class Progress:
    """Where the run stands; saved in every checkpoint."""

    step: int = 0  # optimiser updates done
    epoch: int = 0
    position: int = 0  # batches of this epoch already consumed
    best_metric: str = "bleu"  # trainer.select_metric of the run
    best_value: float | None = None  # its best valid value; None before the first validation
    best_step: int = 0
    best_scores: dict[str, float] = field(default_factory=dict)  # every metric at best_step
    bad_validations: int = 0  # validations since the best, for trainer.patience
    history: list[list[float]] = field(
        default_factory=list
    )  # [update, selected value] of each validation
    validated_step: int = 0  # step of the latest validation
    train_seconds: float = 0.0
    stopped_early: bool = False
    skipped_steps: int = 0  # updates skipped for a non-finite loss or gradient norm
    nonfinite_streak: int = 0  # of which in a row, up to now
    train_flops: int = 0  # analytic training FLOPs of every batch trained on, all ranks

    @property
    def train_tflop(self) -> float:
        return self.train_flops / 1e12

    @classmethod
    def from_payload(cls, values: dict[str, Any]) -> Progress:
        """The progress a checkpoint saved. One written before `trainer.select_metric`
        holds `best_bleu` (-1 before the first validation) and selected on BLEU."""
        values = dict(values)
        if "best_bleu" in values:
            best = float(values.pop("best_bleu"))
            values.setdefault("best_metric", "bleu")
            values.setdefault("best_value", best if best >= 0 else None)
            values.setdefault("best_scores", {"bleu": best} if best >= 0 else {})
        values["history"] = checked_history(values.get("history", []))
        return cls(**values)


def checked_history(value: Any) -> list[list[float]]:
    """A checkpoint's validation history: a list of [update, value] pairs with finite
    numbers in update order; CheckpointError naming `progress.history` otherwise."""

    def is_number(x: Any) -> bool:
        return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)

    pairs = value if isinstance(value, list) else None
    if pairs is None or not all(
        isinstance(pair, (list, tuple)) and len(pair) == 2 and all(map(is_number, pair))
        for pair in pairs
    ):
        raise CheckpointError("progress.history: must be a list of [update, value] number pairs")
    steps = [pair[0] for pair in pairs]
    if steps != sorted(steps):
        raise CheckpointError("progress.history: the updates must be in increasing order")
    return [[int(step), float(score)] for step, score in pairs]


class Trainer:
    def __init__(
        self,
        cfg: DictConfig,
        model: Seq2Seq,
        data: Any,  # seq2seq.data.prepare.PreparedData
        run_dir: Path,
        device: torch.device,
        logger: RunLogger,
        hooks: list[ValidationHook] | None = None,
        ranks: distributed.Distributed | None = None,
    ):
        self.cfg, self.tcfg = cfg, cfg.trainer
        self.model, self.data, self.run_dir, self.device = model, data, run_dir, device
        self.ranks = ranks or distributed.Distributed()  # one process unless under torchrun
        self.logger = logger
        self.metrics = MetricsFile(run_dir, enabled=self.ranks.is_main)
        self.hooks = hooks or []  # run after each validation with a ValidationContext
        self.hook_entries: dict[str, Any] = {}  # what the hooks return, saved in checkpoints
        self.optimizer = instantiate_part(cfg.optim, "optim", params=model.parameters())
        self.schedule = self._build_schedule()
        self.selection = _selected_metric(cfg.trainer)  # trainer.select_metric
        self.progress = Progress(best_metric=self.selection.name)
        self.sampler = TokenBatchSampler(
            data.train.src_lengths,
            data.train.tgt_lengths,
            max_tokens=cfg.data.max_tokens,
            shuffle=True,
            seed=self.tcfg.seed,
            short_first_epochs=self.tcfg.short_first_epochs,
        )
        # What the training forward pass runs: DDP over the model with several ranks.
        self.train_model = distributed.wrap(model, self.ranks, device)
        # The forward pass and loss of a training step; with `trainer.compile` compiled
        # once with dynamic shapes (every batch has another size and length).
        self.forward_loss = (
            torch.compile(self._forward_loss, dynamic=True)
            if self.tcfg.compile
            else self._forward_loss
        )
        # Guided alignment (`alignment=guided`): the supervised heads, their forward pass
        # and loss (compiled as the plain one is), and the last batch's alignment sums.
        self.guidance = _guidance(cfg, model)
        self.guided_forward_loss = (
            torch.compile(self._guided_forward_loss, dynamic=True)
            if self.tcfg.compile and self.guidance is not None
            else self._guided_forward_loss
        )
        self.step_alignment: tuple[torch.Tensor, torch.Tensor] | None = None
        # Hard regions trained by REINFORCE: what they record during a training forward
        # pass (`choices`, only then) and the rewards of the last batch, for the log.
        self.reinforce_regions = reinforce.reinforce_regions(model)
        self.choices: reinforce.Choices | None = None
        self.step_rewards: torch.Tensor | None = None
        self.train_losses: list[float] = []  # smoothed loss per update, for tests and logs
        # Analytic FLOPs of each batch (`seq2seq.flops`), from the config as plain data.
        self._flop_config = plain(cfg)
        self._vocab_sizes = (data.src_tokenizer.vocab_size, data.tgt_tokenizer.vocab_size)
        self._update_flops = 0  # of the update in progress, on this rank
        self.valid_split = _evenly_spaced(data.valid, self.tcfg.valid_max_sentences)
        # Weights at the last `average_last` validations, for checkpoint averaging.
        self.snapshots: deque[dict[str, torch.Tensor]] = deque(
            maxlen=max(1, self.tcfg.average_last)
        )

    # ------------------------------------------------------------------ set-up

    def _build_schedule(self):
        """The configured schedule; `total_steps=trainer.max_steps` for one that needs it."""
        extra = {}
        if registry.of_node("schedule", self.cfg.schedule).builder.needs_total_steps:
            extra["total_steps"] = self.tcfg.max_steps
        return instantiate_part(self.cfg.schedule, "schedule", optimizer=self.optimizer, **extra)

    def autocast(self):
        """bf16 autocast with `trainer.precision=bf16`, and with `auto` on CUDA; else
        float32. The weights, the optimiser state and the loss stay in float32."""
        precision = self.tcfg.precision
        if precision == "bf16" or (precision == "auto" and self.device.type == "cuda"):
            return torch.autocast(self.device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    # ------------------------------------------------------------------ loop

    def fit(self) -> Progress:
        """Train until max_steps, max_epochs, the time budget or early stopping.

        Raises TrainingStopped (SIGTERM, SIGUSR1, SIGUSR2) or KeyboardInterrupt (Ctrl-C)
        after saving `last.pt` at the step boundary that followed the signal, and
        TrainingDiverged when `trainer.max_nonfinite_steps` updates in a row were not
        finite."""
        self.check_selection()
        show = self.cfg.logging.progress_bar and self.ranks.is_main
        display = ProgressDisplay(self.tcfg.max_steps, self.tcfg.max_minutes, enabled=show)
        display.update(self.progress.step, {})
        self._clock_start = time.perf_counter() - self.progress.train_seconds
        with StopRequest() as stop:
            try:
                self._train(stop, display)
            except KeyboardInterrupt:
                if stop.immediate:
                    log.warning("interrupted twice: stopped at once, nothing saved since the "
                                "last checkpoint")  # fmt: skip
                raise
            finally:
                display.close()
            if self.progress.step > self.progress.validated_step:  # stopped by time or epochs
                self.validate_and_checkpoint()
            self.save("last")
            if self._stop_requested(stop):  # a signal during the last validation
                self._stop(stop, saved=True)
        return self.progress

    def _train(self, stop: StopRequest, display: ProgressDisplay) -> None:
        """The update loop; returns when finished, raises on a stop signal or divergence."""
        if self._validation_due():  # the run was stopped between an update and its validation
            self.validate_and_checkpoint()
        if self._finished():
            return
        window = _Window()
        p = self.progress
        batches = distributed.stream(
            self.sampler.batches, p.epoch, p.position, self.ranks, self.tcfg.max_epochs
        )
        for batch_indices, cursor in batches:
            applied = self._consume(batch_indices, window)
            if applied is None:  # inside an accumulated update
                continue
            self.progress.epoch, self.progress.position = cursor  # the update is done
            self.progress.train_seconds = time.perf_counter() - self._clock_start
            if applied:
                display.advance(self.progress.step, self.progress.train_seconds)
                self._log_step(window, display)
            stopping = self._stop_requested(stop)
            if applied and not stopping and self._validation_due():
                self.validate_and_checkpoint()
                stopping = self._stop_requested(stop)  # a signal during the validation
            if stopping:
                self._stop(stop)
            if self._finished():
                return
        # Every epoch read (an unfinished accumulated update at the very end is dropped).
        self.progress.epoch, self.progress.position = self.tcfg.max_epochs, 0

    def _stop_requested(self, stop: StopRequest) -> bool:
        """Whether any rank received a stop signal (every rank stops at the same step)."""
        return self.ranks.any(stop.received is not None, self.device)

    def _stop(self, stop: StopRequest, saved: bool = False) -> NoReturn:
        """Save `last.pt` at this step boundary, then end `fit` as the signal asks."""
        path = self.run_dir / "checkpoints" / "last.pt" if saved else self.save("last")
        name = signal.Signals(stop.received).name if stop.received else "a signal on another rank"
        log.warning(
            "%s: saved %s at step %d; continue with trainer.resume=%s",
            name, path, self.progress.step, self.run_dir,
        )  # fmt: skip
        if stop.received == signal.SIGINT:
            raise KeyboardInterrupt
        raise TrainingStopped(name, self.progress.step, path, stop.received)

    def _finished(self) -> bool:
        p, t = self.progress, self.tcfg
        over_time = False
        if t.max_minutes is not None:  # every rank must stop at the same step
            over_time = self.ranks.any(p.train_seconds >= 60.0 * t.max_minutes, self.device)
        return p.step >= t.max_steps or p.epoch >= t.max_epochs or over_time or p.stopped_early

    def _validation_due(self) -> bool:
        step, t = self.progress.step, self.tcfg
        due = step % t.valid_every == 0 or step >= t.max_steps
        return step > self.progress.validated_step and due

    def _consume(self, batch_indices: list[int], window: _Window) -> bool | None:
        """Forward and backward on one batch; at the last micro-batch of an update, the
        update. None inside an update, else whether the update was applied (not skipped)."""
        batch = self.data.train.batch(batch_indices)  # reads only these examples
        batch = batch.to(self.device)
        loss_sum, nll_sum = self.train_step(batch)
        self._update_flops += self.batch_flops(batch)
        window.add(loss_sum, nll_sum, batch)
        if self.guidance is not None:
            window.add_alignment(*self.step_alignment)
        if self.step_rewards is not None:
            window.add_rewards(self.step_rewards, self.reinforce_regions[0].baseline)
        window.micro_batches += 1
        if window.micro_batches % self.tcfg.accumulate != 0:
            return None
        applied, grad_norm = self.update(window.update_loss)
        # The compute was spent, applied or skipped; every rank trained on a batch like it.
        self.progress.train_flops += self._update_flops * self.ranks.world_size
        self._update_flops = 0
        if applied:
            window.commit(grad_norm)
        else:
            window.discard()
        return applied

    def batch_flops(self, batch: Batch) -> int:
        """Analytic training FLOPs (forward + backward, `seq2seq.flops`) of one batch's
        padded shapes. Scheduled sampling's extra forward pass is not counted, nor guided
        alignment's full-context decoder pass (`alignment.full_context`)."""
        shapes = (len(batch), batch.src.size(1), batch.tgt_in.size(1))
        return training_flops(self._flop_config, *shapes, *self._vocab_sizes)

    def train_step(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """Forward and backward on one batch; returns the summed (smoothed loss, NLL).
        With guided alignment the loss includes λ·L_align (`_guided_step`); with REINFORCE
        regions the backward pass includes their surrogate (`_translation_loss`)."""
        self.model.train()
        tgt_in = self._scheduled_sampling(batch)
        with self._recording_choices():
            if self.guidance is None:
                loss_sum, nll_sum = self.forward_loss(
                    batch.src, batch.src_mask, tgt_in, batch.tgt_out
                )
            else:
                loss_sum, nll_sum = self._guided_step(batch, tgt_in)
        (loss_sum / (batch.num_tgt_tokens * self.tcfg.accumulate)).backward()
        return loss_sum.detach(), nll_sum.detach()

    @contextlib.contextmanager
    def _recording_choices(self):
        """While inside, the REINFORCE regions record their choices into `self.choices`
        (`seq2seq.training.reinforce`); keeps the batch's rewards in `step_rewards`."""
        if not self.reinforce_regions:
            yield
            return
        with reinforce.recording(self.model) as choices:
            self.choices = choices
            try:
                yield
            finally:
                self.choices = None
        self.step_rewards = choices.rewards

    def _guided_step(self, batch: Batch, tgt_in: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The summed (smoothed loss + λ·L_align, NLL) of a batch with links; keeps
        (L_align summed, linked rows) in `step_alignment` for the log."""
        if batch.align is None:
            raise ValueError(
                "alignment=guided: the batch carries no links (see seq2seq.data.links)"
            )
        loss_sum, nll_sum, align_sum, rows = self.guided_forward_loss(
            batch.src, batch.src_mask, tgt_in, batch.tgt_out, batch.align
        )
        self.step_alignment = (align_sum.detach(), rows)
        return loss_sum, nll_sum

    def _forward_loss(
        self, src: torch.Tensor, src_mask: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Teacher-forced forward pass; the summed (smoothed loss, NLL) over real tokens."""
        with self.autocast():
            logits, _ = self.train_model(src, src_mask, tgt_in)  # (batch, tgt_len, vocab)
        return self._translation_loss(logits, tgt_out)

    def _translation_loss(
        self, logits: torch.Tensor, tgt_out: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The summed (smoothed loss, NLL); while REINFORCE regions record (`choices`), the
        loss plus their surrogate as `s − s.detach()`: its gradient, the same value."""
        smoothing = self.tcfg.label_smoothing
        if self.choices is None:
            return label_smoothed_nll(logits, tgt_out, smoothing)
        loss, nll = sentence_label_smoothed_nll(logits, tgt_out, smoothing)  # (batch,) each
        surrogate = self.choices.surrogate(nll, tgt_out)
        return loss.sum() + (surrogate - surrogate.detach()), nll.sum()

    def _guided_forward_loss(
        self,
        src: torch.Tensor,
        src_mask: torch.Tensor,
        tgt_in: torch.Tensor,
        tgt_out: torch.Tensor,
        align: torch.Tensor,  # (batch, tgt_len, src_len) p*, rows of tgt_out over src
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """`_forward_loss` with the attention weights (those of the pass without the future
        mask with `alignment.full_context`): (smoothed loss + λ·L_align, NLL, L_align,
        linked rows), summed; L_align in float32 (`seq2seq.training.guided_alignment`)."""
        guidance = self.guidance
        with self.autocast():
            logits, attention = self.train_model(
                src, src_mask, tgt_in,
                need_weights=not guidance.full_context, full_context=guidance.full_context,
            )  # fmt: skip
        loss_sum, nll_sum = self._translation_loss(logits, tgt_out)
        align_sum, rows = guided_loss(attention, align, guidance, tgt_out != PAD_ID)
        return loss_sum + guidance.weight * align_sum, nll_sum, align_sum, rows

    def update(self, loss: torch.Tensor | None = None) -> tuple[bool, torch.Tensor]:
        """Clip the gradients and step, unless the update's loss or gradient norm is not
        finite; returns (applied, gradient norm). One host sync, for the finiteness check."""
        grad_norm = torch.nn.utils.clip_grad_norm_(
            self.model.parameters(), self.tcfg.grad_clip if self.tcfg.grad_clip > 0 else math.inf
        )
        finite = torch.isfinite(grad_norm)
        if loss is not None:
            finite = finite & torch.isfinite(loss)
        if self.ranks.any(not bool(finite), self.device):
            self.optimizer.zero_grad(set_to_none=True)
            self._skip(loss, grad_norm)
            return False, grad_norm
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.schedule.step()
        self.progress.step += 1
        self.progress.nonfinite_streak = 0
        return True, grad_norm

    def _skip(self, loss: torch.Tensor | None, grad_norm: torch.Tensor) -> None:
        """Count a skipped update; raise TrainingDiverged after too many in a row."""
        p, limit = self.progress, self.tcfg.max_nonfinite_steps
        p.skipped_steps += 1
        p.nonfinite_streak += 1
        loss_value = float("nan") if loss is None else float(loss)
        self.logger.scalars({"train/skipped_steps": p.skipped_steps}, p.step + 1)
        log.warning(
            "step %d: loss %s, gradient norm %s: update skipped (%d in a row, %d in all)",
            p.step + 1, loss_value, float(grad_norm), p.nonfinite_streak, p.skipped_steps,
        )  # fmt: skip
        if p.nonfinite_streak >= limit:
            raise TrainingDiverged(
                f"training diverged at step {p.step + 1}: the loss or gradient norm was not "
                f"finite for {p.nonfinite_streak} updates in a row "
                f"(trainer.max_nonfinite_steps={limit}); the learning rate is probably too "
                f"high (optim.lr={self.cfg.optim.lr}) or the computation overflows its "
                f"floating-point type; nothing was saved after the divergence, the checkpoints "
                f"in {self.run_dir / 'checkpoints'} are as they were"
            )

    def _scheduled_sampling(self, batch: Batch) -> torch.Tensor:
        """Two-pass scheduled sampling (Bengio et al. 2015; Mihaylova & Liu 2019): with
        probability p, which rises linearly from 0 to `trainer.scheduled_sampling` over the
        run, a gold input token is replaced by the model's own prediction for it."""
        final_p = self.tcfg.scheduled_sampling
        if final_p <= 0.0:
            return batch.tgt_in
        p = final_p * min(1.0, self.progress.step / max(1, self.tcfg.max_steps))
        with torch.no_grad(), self.autocast():
            logits, _ = self.model(batch.src, batch.src_mask, batch.tgt_in)
        predicted = logits.argmax(-1)[:, :-1]  # prediction for input position t+1
        replace = torch.rand(predicted.shape, device=predicted.device) < p
        replace &= batch.tgt_in[:, 1:] != PAD_ID
        tgt_in = batch.tgt_in.clone()
        tgt_in[:, 1:] = torch.where(replace, predicted, batch.tgt_in[:, 1:])
        return tgt_in

    def _log_step(self, window: _Window, display: ProgressDisplay) -> None:
        """TensorBoard, `metrics.jsonl` and the status line, every `log_every` steps."""
        step = self.progress.step
        if step % self.tcfg.log_every != 0 and step != 1:
            return
        stats = window.flush(self.schedule.lr)
        stats["train/skipped_steps"] = self.progress.skipped_steps
        stats["train/tflop"] = self.progress.train_tflop
        self.train_losses.append(stats["train/loss"])
        self.logger.scalars(stats, step)
        self.metrics.write(step, {**stats, "epoch": self.progress.epoch})
        display.update(step, {**stats, "epoch": self.progress.epoch}, self._best_shown())

    # ------------------------------------------------------------------ validation

    def validate_and_checkpoint(self) -> dict[str, float]:
        """Validate and run the hooks (rank 0; the other ranks receive the scores), then
        update the best value of the selected metric, early stopping and the schedule and
        save checkpoints. Returns every metric of this validation."""
        step = self.progress.step
        metrics = self.ranks.broadcast(self._validate_on_main(step) if self.ranks.is_main else None)
        self.progress.validated_step = step
        self.logger.scalars({  # FLOPs and the run's own clock (resumed runs continue it)
            "train/tflop": self.progress.train_tflop,
            "train/minutes": self.progress.train_seconds / 60,
        }, step)  # fmt: skip
        if self._select(metrics, step):
            self.save("best")
        self.save("last")
        if not self.ranks.is_main:
            return metrics
        self.logger.flush()
        log.info("step %d valid %s (best %s %s at %d)", step, _shown_metrics(metrics),
                 self.selection.label, _shown(self.selection, self.progress.best_value),
                 self.progress.best_step)  # fmt: skip
        return metrics

    def _validate_on_main(self, step: int) -> dict[str, float]:
        """`validate`, a snapshot for averaging, then the hooks (before saving, so that
        best.pt holds what they return): their metrics join validate's."""
        metrics = self.validate()
        if self.tcfg.average_last > 1:
            self.snapshots.append(_copy_weights(self.model))
        self.logger.scalars({f"valid/{k}": v for k, v in metrics.items()}, step)
        return {**metrics, **self.run_hooks(step)}

    def _select(self, metrics: dict[str, float], step: int) -> bool:
        """The selected metric's value steps the schedule and decides whether this
        validation is the best so far (returned) or one more without progress (early
        stopping after trainer.patience of them)."""
        value = self.selected_value(metrics, step)
        self.schedule.on_validation(value, higher_is_better=self.selection.higher_is_better)
        self._check_converged(value, step)
        p = self.progress
        if self.selection.improves(value, p.best_value):
            p.best_value, p.best_step, p.best_scores = value, step, dict(metrics)
            p.bad_validations = 0
            return True
        p.bad_validations += 1
        patience = self.tcfg.patience
        if patience > 0 and p.bad_validations >= patience:
            p.stopped_early = True
        return False

    def _check_converged(self, value: float, step: int) -> None:
        """Record the validation; stop once the selected metric's gain over the last
        `trainer.converged_fraction` of the updates, holding at least
        `trainer.converged_validations` validations, is under `trainer.converged_gain`."""
        p, t = self.progress, self.tcfg
        p.history.append([step, value])
        gain = self._converged_gain(p.history)
        if gain is not None:
            p.stopped_early = True
            log.info(
                "step %d: converged: %s gained %.3f (< trainer.converged_gain %g) over the "
                "last %g of the updates; stopping", step, self.selection.name, gain,
                t.converged_gain, t.converged_fraction,
            )  # fmt: skip

    def _converged_gain(self, history: list[list[float]]) -> float | None:
        """The gain of `history` when the convergence rule of `trainer.converged_*` judges
        it converged, else None (the rule off, too few validations in the window, or a gain
        at or above the threshold)."""
        t = self.tcfg
        if t.converged_gain <= 0:
            return None
        if validations_in_window(history, t.converged_fraction) < t.converged_validations:
            return None
        gain = recent_gain(history, t.converged_fraction, self.selection.higher_is_better)
        return gain if gain is not None and gain < t.converged_gain else None

    def _rejudge_convergence(self) -> None:
        """A resumed run that had stopped by the convergence rule is judged again by the
        rule it resumes with, as a run stopped by `trainer.max_steps` goes on under a higher
        cap: under a stricter rule (more validations in the window, a smaller gain, the rule
        off) it trains on, exactly as if that rule had held from its start, since the rule
        only reads the validations. A run whose `trainer.patience`, as it resumes, is used up
        stays stopped."""
        p, t = self.progress, self.tcfg
        if not p.stopped_early or (t.patience > 0 and p.bad_validations >= t.patience):
            return
        if self._converged_gain(p.history) is None:
            p.stopped_early = False
            log.info(
                "resumed at step %d: stopped by the convergence rule, but not converged by "
                "trainer.converged_gain=%g, converged_fraction=%g, converged_validations=%d: "
                "training goes on", p.step, t.converged_gain, t.converged_fraction,
                t.converged_validations,
            )  # fmt: skip

    def selected_value(self, metrics: dict[str, float], step: int) -> float:
        """The selected metric's value among a validation's metrics; ConfigError when no
        part of the validation produced it."""
        name = self.selection.name
        if name not in metrics:
            raise ConfigError(
                f"trainer.select_metric={name}: validation at step {step} gave no value for "
                f"it (it gave {', '.join(metrics) or 'nothing'})"
            )
        return metrics[name]

    def check_selection(self) -> None:
        """ConfigError when the selected metric comes from a hook and none of the run's
        hooks reports it (no gold set for AER, no attention, hooks left out)."""
        if self.selection.source != HOOK:
            return
        produced = produced_metrics(self.hooks)
        if self.ranks.is_main and self.selection.name not in produced:
            reported = ", ".join(sorted(produced)) or "no metric"
            raise ConfigError(
                f"trainer.select_metric={self.selection.name}: no validation hook of this run "
                f"reports it (its hooks report {reported}); {_summary(self.selection)}"
            )

    def run_hooks(self, step: int, logger: RunLogger | None = None) -> dict[str, float]:
        """Run the validation hooks and keep the checkpoint entries they return
        (`seq2seq.training.hooks`); ValueError for a key not in HOOK_KEYS. Returns the
        metrics they report. With `logger` (a disabled one: measuring only) they log there
        and their entries are not kept."""
        keep = logger is None
        context = ValidationContext(self.model, self.device, logger or self.logger, step)
        for hook in self.hooks:
            entries = hook(context) or {}
            unknown = sorted(set(entries) - set(HOOK_KEYS))
            if unknown:
                raise ValueError(f"validation hook {hook!r} returned unknown checkpoint "
                                 f"keys {unknown}; known: {', '.join(HOOK_KEYS)}")  # fmt: skip
            if keep:
                self.hook_entries.update(entries)
        return dict(context.metrics)

    @torch.inference_mode()
    def validate(self) -> dict[str, float]:
        """The teacher-forced loss metrics (loss, perplexity) and the translation metrics
        of greedy translations: the default ones (BLEU, chrF) and the selected one."""
        split = self.valid_split
        loss = self._valid_loss(split)
        hypotheses = self.translate([src for src, _ in split.examples])
        lang = self.data.tgt_tokenizer.lang
        metrics = {m.name: m.from_loss(loss) for m in metrics_of(LOSS) if self._computed(m)}
        for scored in filter(self._computed, metrics_of(TRANSLATIONS)):
            metrics[scored.name] = scored.score(hypotheses, split.tgt_lines, lang)
        rows = list(zip(split.src_lines, split.tgt_lines, hypotheses))
        self.logger.text(
            "valid/samples", sample_table(rows[: self.cfg.logging.text_samples]), self.progress.step
        )
        return metrics

    def measure(self) -> dict[str, float]:
        """`validate`'s metrics and, when the selected metric comes from a hook, the hooks'
        (run with a disabled logger, their checkpoint entries not kept): the model as it
        is now measured as a validation would, for comparing other weights (averaging)."""
        metrics = self.validate()
        if self.selection.source == HOOK:
            silent = RunLogger(self.run_dir, enabled=False)
            metrics.update(self.run_hooks(self.progress.step, silent))
        return metrics

    def _computed(self, candidate: Metric) -> bool:
        return candidate.default or candidate.name == self.selection.name

    def _valid_loss(self, split) -> float:
        """The mean NLL per target token of the split, teacher forced, no smoothing."""
        self.model.eval()
        sampler = TokenBatchSampler(
            split.src_lengths, split.tgt_lengths, self.cfg.data.max_tokens, shuffle=False
        )
        nll_total, tokens = torch.zeros((), device=self.device), 0
        for indices in sampler.batches(0):
            batch = split.batch(indices).to(self.device)
            with self.autocast():
                logits, _ = self.model(batch.src, batch.src_mask, batch.tgt_in)
            nll_total += label_smoothed_nll(logits, batch.tgt_out, 0.0)[1]
            tokens += batch.num_tgt_tokens
        return nll_total.item() / max(tokens, 1)

    def _best_shown(self) -> tuple[str, float] | None:
        """(label, best value) of the selected metric for the status line, or None."""
        best = self.progress.best_value
        return None if best is None else (self.selection.label, best)

    def averaged_weights(self) -> dict[str, torch.Tensor] | None:
        """The mean of the kept validation snapshots (Vaswani et al. 2017 §6.1 average
        checkpoints too); None with fewer than two."""
        if len(self.snapshots) < 2:
            return None
        return {
            name: torch.stack([snap[name].float() for snap in self.snapshots]).mean(0).to(tensor.dtype)
            if tensor.is_floating_point() else tensor
            for name, tensor in self.snapshots[-1].items()
        }  # fmt: skip

    def translate(self, sources: list, settings: SearchSettings | None = None) -> list[str]:
        """Detokenised best translations of encoded sources (greedy by default)."""
        settings = settings or SearchSettings(beam_size=1, batch_size=256)
        with self.autocast():
            nbest = translate_ids(self.model, sources, settings, self.device)
        return [self.data.tgt_tokenizer.decode(hyps[0].tokens) for hyps in nbest]

    # ------------------------------------------------------------------ checkpoints

    def checkpoint_payload(
        self, with_snapshots: bool = False, rank_rng: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        """Everything to continue the run and to translate, and the validation hooks'
        entries (`hook_entries`); `with_snapshots` adds the
        weights kept for `trainer.average_last` (in `last.pt`, so a resume keeps them),
        `rank_rng` every rank's random state (data parallel)."""
        payload = {
            "format": FORMAT_VERSION,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "schedule": self.schedule.state_dict(),
            "progress": asdict(self.progress),
            "rng": capture_rng_states(),
            "config": OmegaConf.to_container(self.cfg, resolve=True, enum_to_str=True),
            "tokenizers": tokenizer_payload(self.data),
            **plugin_payload(self.cfg),  # the plugins it was trained with
            **self.hook_entries,
        }
        if with_snapshots and self.tcfg.average_last > 1:
            payload["snapshots"] = list(self.snapshots)
        if rank_rng is not None:
            payload["rank_rng"] = rank_rng
        return payload

    def save(self, name: str, all_ranks: bool = True) -> Path:
        """Write `checkpoints/<name>.pt` (rank 0 only: the ranks hold the same weights).
        `last.pt` and `best.pt` keep their previous generation as `<name>.prev.pt`.
        `all_ranks`: every rank calls this, and their random states are gathered into the
        checkpoint (data parallel); False when rank 0 alone saves, after training."""
        path = self.run_dir / "checkpoints" / f"{name}.pt"
        rank_rng = self._gather_rng_states() if all_ranks and self.ranks.enabled else None
        if self.ranks.is_main:
            payload = self.checkpoint_payload(with_snapshots=name == "last", rank_rng=rank_rng)
            save_checkpoint(path, payload, keep_previous=name in ("last", "best"))
        return path

    def restore(self, payload: dict[str, Any]) -> None:
        """Continue from a checkpoint: weights, optimiser, schedule, progress, RNG, the
        weights kept for averaging and the validation hooks' entries."""
        self.model.load_state_dict(payload["model"])
        self.optimizer.load_state_dict(payload["optimizer"])
        self.schedule.load_state_dict(payload["schedule"])
        self.progress = self._resumed_progress(payload["progress"])
        self._rejudge_convergence()
        restore_rng_states(self._own_rng_state(payload))
        self.snapshots.clear()
        if self.tcfg.average_last > 1:
            self.snapshots.extend(payload.get("snapshots", []))
        self.hook_entries = {key: payload[key] for key in HOOK_KEYS if key in payload}

    def _resumed_progress(self, saved: dict[str, Any]) -> Progress:
        """The checkpoint's progress; CheckpointError when it selected on another metric
        than trainer.select_metric (its best value and patience count are that metric's)."""
        progress = Progress.from_payload(saved)
        if progress.best_metric != self.selection.name:
            raise CheckpointError(
                f"trainer.select_metric={self.selection.name}, but the checkpoint's run "
                f"selected on {progress.best_metric} (its best.pt, best value and patience "
                f"count are {progress.best_metric}'s): resume with "
                f"trainer.select_metric={progress.best_metric}, or start a new run"
            )
        return progress

    def _gather_rng_states(self) -> list[dict[str, Any]]:
        """Every rank's random state, in rank order (sent as bytes: tensors in a gathered
        object do not survive the trip)."""
        buffer = io.BytesIO()
        torch.save(capture_rng_states(), buffer)
        blobs = self.ranks.gather(buffer.getvalue())
        return [torch.load(io.BytesIO(blob), weights_only=True) for blob in blobs]

    def _own_rng_state(self, payload: dict[str, Any]) -> dict[str, Any]:
        """This rank's saved random state; rank 0's (with a warning) when the checkpoint
        was written by another number of ranks, which cannot resume exactly."""
        states = payload.get("rank_rng")
        if states is not None and len(states) == self.ranks.world_size:
            return states[self.ranks.rank]
        if self.ranks.enabled or states is not None:
            saved = len(states) if states is not None else 1
            log.warning(
                "checkpoint written by %d rank(s), resumed on %d: the random state (dropout) "
                "continues from rank 0's, so the run does not repeat exactly",
                saved, self.ranks.world_size,
            )  # fmt: skip
        return payload["rng"]


def _selected_metric(tcfg: DictConfig) -> Metric:
    """The metric `trainer.select_metric` names; ConfigError listing the registered ones."""
    try:
        return metric(tcfg.select_metric)
    except ValueError as error:
        raise ConfigError(str(error)) from None


def _shown(selected: Metric, value: float | None) -> str:
    return "n/a" if value is None else f"{value:.{selected.digits}f}"


def _shown_metrics(metrics: dict[str, float]) -> str:
    """`loss 2.301 ppl 9.98 BLEU 3.32 chrF2 20.10 ...`: each registered metric by its
    label and decimals; a name the registry does not know as it is."""
    shown = []
    for name, value in metrics.items():
        try:
            known = metric(name)
        except ValueError:
            shown.append(f"{name} {value:.4g}")
            continue
        shown.append(f"{known.label} {_shown(known, value)}")
    return " ".join(shown)


def _summary(selected: Metric) -> str:
    """The first paragraph of a metric's docstring, on one line: what it is, who reports it."""
    doc = type(selected).__doc__ or ""
    return " ".join(doc.split("\n\n")[0].split()) or f"metric {selected.name}"


def _guidance(cfg: DictConfig, model: torch.nn.Module) -> Guidance | None:
    """The run's guided alignment (`alignment=guided`) with `model`'s shift, or None."""
    section = cfg.get("alignment")
    if section is None or not section.guided:
        return None
    return Guidance.from_config(plain(section)).for_model(model)


def _evenly_spaced(split: Any, limit: int | None) -> Any:
    """`limit` pairs spread over the whole split (the corpus is ordered by length, so the
    first `limit` would be the shortest), or the whole split."""
    if not limit or limit >= len(split):
        return split
    keep = sorted({round(i * (len(split) - 1) / max(limit - 1, 1)) for i in range(limit)})
    return split.select(keep)


def _copy_weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {
        name: tensor.detach().to("cpu", copy=True) for name, tensor in model.state_dict().items()
    }


class _Window:
    """Running sums between two log lines; one host sync per log line, none per step.

    The micro-batches of the update in progress are summed apart (`update_loss`) and join
    the window only once their update is applied; a skipped update's are dropped."""

    def __init__(self):
        self.micro_batches = 0
        self.grad_norm = torch.zeros(())
        self._reset()
        self._clear_update()

    def _reset(self):
        self.loss = self.nll = None
        self.align = self.align_rows = None  # guided alignment: L_align summed, linked rows
        self.reward, self.sentences, self.baseline = None, 0, None  # REINFORCE: R summed, b
        self.tgt_tokens = self.src_tokens = 0
        self.started = time.perf_counter()

    def _clear_update(self):
        self.update_loss = self.update_nll = None
        self.update_align = self.update_align_rows = None
        self.update_reward, self.update_sentences, self.update_baseline = None, 0, None
        self.update_tgt_tokens = self.update_src_tokens = 0

    def add(self, loss_sum: torch.Tensor, nll_sum: torch.Tensor, batch: Batch) -> None:
        """One micro-batch of the update in progress."""
        self.update_loss = _plus(self.update_loss, loss_sum)
        self.update_nll = _plus(self.update_nll, nll_sum)
        self.update_tgt_tokens += batch.num_tgt_tokens
        self.update_src_tokens += batch.num_src_tokens

    def add_alignment(self, align_sum: torch.Tensor, rows: torch.Tensor) -> None:
        """One micro-batch's guided-alignment loss, summed over its linked rows."""
        self.update_align = _plus(self.update_align, align_sum)
        self.update_align_rows = _plus(self.update_align_rows, rows)

    def add_rewards(self, rewards: torch.Tensor, baseline: torch.Tensor) -> None:
        """One micro-batch's REINFORCE rewards (batch,) and the baseline after it."""
        self.update_reward = _plus(self.update_reward, rewards.sum())
        self.update_sentences += rewards.numel()
        self.update_baseline = baseline.detach().clone()

    def commit(self, grad_norm: torch.Tensor) -> None:
        """The update was applied: its sums join the window."""
        self.grad_norm = grad_norm
        self.loss = _plus(self.loss, self.update_loss)
        self.nll = _plus(self.nll, self.update_nll)
        if self.update_align is not None:
            self.align = _plus(self.align, self.update_align)
            self.align_rows = _plus(self.align_rows, self.update_align_rows)
        if self.update_reward is not None:
            self.reward = _plus(self.reward, self.update_reward)
            self.sentences += self.update_sentences
            self.baseline = self.update_baseline
        self.tgt_tokens += self.update_tgt_tokens
        self.src_tokens += self.update_src_tokens
        self._clear_update()

    def discard(self) -> None:
        """The update was skipped: forget its sums."""
        self._clear_update()

    def flush(self, lr: float) -> dict[str, float]:
        seconds = max(time.perf_counter() - self.started, 1e-9)
        tokens = max(self.tgt_tokens, 1)
        loss, nll = self.loss.item() / tokens, self.nll.item() / tokens
        stats = {
            "train/loss": loss,
            "train/ppl": perplexity(nll),
            "train/lr": lr,
            "train/grad_norm": float(self.grad_norm),
            "train/tokens_per_sec": self.tgt_tokens / seconds,
        }
        if self.align is not None:  # mean L_align per linked target position
            stats["train/align_loss"] = self.align.item() / max(self.align_rows.item(), 1.0)
        if self.reward is not None:  # mean R per sentence, and b at the last update
            stats["train/reinforce_reward"] = self.reward.item() / max(self.sentences, 1)
            stats["train/reinforce_baseline"] = float(self.baseline)
        self._reset()
        return stats


def _plus(total: torch.Tensor | None, value: torch.Tensor) -> torch.Tensor:
    return value if total is None else total + value
