"""The training loop: batches in, updates out; validation, checkpoints, stopping.

The loop, top to bottom (`Trainer.fit`):

    fit:  within StopRequest (stop signals wait for a step boundary)
      _train:  for each batch of the seeded order, from where the progress stands
        train_step:  parts = objective.loss(model, batch); backward of parts.loss / tokens
        at the update's last micro-batch (`trainer.accumulate`):
          update:  clip, step the optimiser and the schedule; or skip a non-finite update
          log the window of updates (`trainer.log_every`)
          validate_and_checkpoint (`trainer.valid_every`): the valid metrics and the hooks',
            selection.judge → best.pt, patience, convergence; last.pt
          a stop signal: save last.pt, raise; the budget or an early stop: return
      a last validation when the run ended between two; last.pt

Collaborators, chosen at assembly (`seq2seq.runs.assemble`), each called at one point:
the objective (`objectives`: plain, guided alignment, REINFORCE) in `train_step`; the
selection (`selection`: metric, best value, patience, convergence rule) after validating
and on resume; the stop request (`stopping`) at step boundaries; the progress with its log
window, status line and metrics file (`progress`) where an update is logged; the hooks
(`hooks`) after validating; the averaged snapshots (`averaging`). Settings: `TrainerSettings`.

Step boundaries. The run's progress (step, epoch, data position) moves only when an update
has been applied, so every checkpoint describes a state between two updates: the data
position points at the first batch of the next update (of its first micro-batch with
`trainer.accumulate`), and the saved random state is the one at that boundary. Resuming
from any checkpoint therefore replays exactly what an uninterrupted run would have done.

Non-finite updates. An update whose loss or gradient norm is NaN or infinite is skipped:
its gradients are dropped, neither the optimiser nor the schedule steps, and the step
counter does not advance (`trainer.max_steps` counts applied updates), while its batches
count as consumed. Skips are counted (`train/skipped_steps`); `trainer.max_nonfinite_steps`
skips in a row raise `TrainingDiverged` without saving anything over the checkpoints.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, NoReturn

import torch

from seq2seq.checkpoint import (
    FORMAT_VERSION,
    HOOK_KEYS,
    capture_rng_states,
    plugin_payload,
    restore_rng_states,
    save_checkpoint,
    tokenizer_payload,
)
from seq2seq.config.build import ConfigError
from seq2seq.config.search_settings import SearchSettings
from seq2seq.config.training_settings import TrainerSettings
from seq2seq.data.batching import Batch, TokenBatchSampler
from seq2seq.data.subword_sampling import SubwordSampling
from seq2seq.data.unknown_dropout import with_unknown_source_pieces
from seq2seq.flops import training_flops
from seq2seq.metrics.base import HOOK, LOSS, TRANSLATIONS, Metric, metrics_of
from seq2seq.models.model import Seq2Seq
from seq2seq.search.batched import translate_ids
from seq2seq.training import distributed
from seq2seq.training.averaging import MovingAverage, Snapshots
from seq2seq.training.hooks import ValidationContext, ValidationHook
from seq2seq.training.label_smoothing import label_smoothed_nll
from seq2seq.training.logger import RunLogger, sample_table
from seq2seq.training.objectives import LossParts, Objective, scheduled_inputs
from seq2seq.training.precision import autocast_for
from seq2seq.training.progress import LogWindow, MetricsFile, Progress, ProgressDisplay
from seq2seq.training.schedules import Schedule
from seq2seq.training.selection import Selection, shown_metrics
from seq2seq.training.stopping import StopRequest, TrainingDiverged, TrainingStopped

log = logging.getLogger(__name__)


class Trainer:
    """One run's training loop (module docstring), its model, data and collaborators."""

    def __init__(
        self,
        settings: TrainerSettings,
        model: Seq2Seq,
        data: Any,  # seq2seq.data.prepare.PreparedData
        run_dir: Path,
        device: torch.device,
        *,
        objective: Objective,
        optimizer: torch.optim.Optimizer,
        schedule: Schedule,
        logger: RunLogger,
        hooks: list[ValidationHook] | None = None,
        ranks: distributed.Distributed | None = None,
    ):
        self.settings = settings
        self.model, self.data, self.run_dir, self.device = model, data, run_dir, device
        self.objective, self.optimizer, self.schedule = objective, optimizer, schedule
        self.selection = Selection.from_settings(settings)  # trainer.select_metric
        self.ranks = ranks or distributed.Distributed()  # one process unless under torchrun
        self.logger = logger
        self.metrics = MetricsFile(run_dir, enabled=self.ranks.is_main)
        self.hooks = hooks or []  # run after each validation with a ValidationContext
        self.hook_entries: dict[str, Any] = {}  # what the hooks return, saved in checkpoints
        self.progress = Progress(best_metric=self.selection.name)
        self.sampler = TokenBatchSampler(data.train.src_lengths, data.train.tgt_lengths,
                                         max_tokens=settings.max_tokens, shuffle=True,
                                         seed=settings.seed,
                                         short_first_epochs=settings.short_first_epochs)  # fmt: skip
        # What the training forward pass runs: DDP over the model with several ranks.
        self.train_model = distributed.wrap(model, self.ranks, device)
        self.autocast = autocast_for(settings.precision, device)
        self.train_losses: list[float] = []  # smoothed loss per update, for tests and logs
        self._vocab_sizes = (data.src_tokenizer.vocab_size, data.tgt_tokenizer.vocab_size)
        self._update_flops = 0  # of the update in progress, on this rank
        self.valid_split = _evenly_spaced(data.valid, settings.valid_max_sentences)
        self.snapshots = Snapshots(settings.average_last)  # for checkpoint averaging
        self.ema = MovingAverage(settings.ema_decay)  # validated and tested when on
        try:  # None unless trainer.subword_nbest >= 2
            self.subwords = SubwordSampling.of(
                data.src_tokenizer, data.tgt_tokenizer, settings.subword_nbest,
                settings.subword_alpha, settings.max_len, settings.seed,
            )  # fmt: skip
        except ValueError as error:  # a side without n-best segmentations: one line, the key
            raise ConfigError(str(error)) from None

    # ------------------------------------------------------------------ the loop

    def fit(self) -> Progress:
        """Train until max_steps, max_epochs, the time budget or early stopping. Raises
        TrainingStopped (SIGTERM, SIGUSR1, SIGUSR2) or KeyboardInterrupt (Ctrl-C) after
        saving `last.pt` at the next step boundary, TrainingDiverged (module docstring)."""
        self.selection.check_reported(self.hooks, self.ranks.is_main)
        settings, shown = self.settings, self.settings.progress_bar and self.ranks.is_main
        display = ProgressDisplay(settings.max_steps, settings.max_minutes, enabled=shown)
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
        window, p = LogWindow(), self.progress
        batches = distributed.stream(
            self.sampler.batches, p.epoch, p.position, self.ranks, self.settings.max_epochs
        )
        for batch_indices, cursor in batches:
            batch = self.training_batch(batch_indices, cursor).to(self.device)
            window.add(self.train_step(batch), batch)
            self._update_flops += self.batch_flops(batch)
            if window.micro_batches % self.settings.accumulate != 0:
                continue  # inside an accumulated update
            applied = self._apply_update(window)
            p.epoch, p.position = cursor  # the update is done
            p.train_seconds = time.perf_counter() - self._clock_start
            if applied:
                display.advance(p.step, p.train_seconds)
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
        p.epoch, p.position = self.settings.max_epochs, 0

    def training_batch(self, indices: Sequence[int], cursor: tuple[int, int]) -> Batch:
        """The training batch of `indices` (only these examples are read), its segmentations
        sampled under subword regularisation and its source pieces dropped to `<unk>` under
        `trainer.source_unk_rate`; `cursor` is where the data stands after it."""
        key = (self.ranks.rank, *cursor)
        if self.subwords is None:
            batch = self.data.train.batch(indices)
        else:
            batch = self.subwords.batch(self.data.train, indices, key)
        rate = self.settings.source_unk_rate
        if rate > 0:
            batch = with_unknown_source_pieces(batch, rate, self.settings.seed, key)
        return batch

    def train_step(self, batch: Batch) -> LossParts:
        """Forward and backward on one batch (of an update of `trainer.accumulate`); returns
        its loss terms, summed over its target tokens, detached."""
        self.model.train()
        final_p = self.settings.scheduled_sampling
        if final_p > 0.0:  # p rises linearly from 0 to trainer.scheduled_sampling
            p = final_p * min(1.0, self.progress.step / max(1, self.settings.max_steps))
            batch = replace(batch, tgt_in=scheduled_inputs(self.model, batch, p, self.autocast))
        parts = self.objective.loss(self.train_model, batch)
        (parts.loss / (batch.num_tgt_tokens * self.settings.accumulate)).backward()
        return parts.detached()

    def _apply_update(self, window: LogWindow) -> bool:
        """The update of the window's micro-batches; whether it was applied (not skipped)."""
        applied, grad_norm = self.update(window.in_progress.loss)
        # The compute was spent, applied or skipped; every rank trained on a batch like it.
        self.progress.train_flops += self._update_flops * self.ranks.world_size
        self._update_flops = 0
        if applied:
            window.commit(grad_norm)
        else:
            window.discard()
        return applied

    def update(self, loss: torch.Tensor | None = None) -> tuple[bool, torch.Tensor]:
        """Clip the gradients and step, unless the update's loss or gradient norm is not
        finite; returns (applied, gradient norm). One host sync, for the finiteness check."""
        clip = self.settings.grad_clip if self.settings.grad_clip > 0 else math.inf
        grad_norm, *others = [  # the translation model's norm, then an alignment layer's
            torch.nn.utils.clip_grad_norm_(group, clip) for group in parameter_groups(self.model)
        ]
        finite = torch.isfinite(grad_norm)
        for other in others:
            finite = finite & torch.isfinite(other)
        if loss is not None:
            finite = finite & torch.isfinite(loss)
        if self.ranks.any(not bool(finite), self.device):
            self.optimizer.zero_grad(set_to_none=True)
            self._skip(loss, grad_norm)
            return False, grad_norm
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.schedule.step()
        self.ema.update(self.model)
        self.progress.step += 1
        self.progress.nonfinite_streak = 0
        return True, grad_norm

    def _skip(self, loss: torch.Tensor | None, grad_norm: torch.Tensor) -> None:
        """Count a skipped update; raise TrainingDiverged after too many in a row."""
        p, limit = self.progress, self.settings.max_nonfinite_steps
        p.skipped_steps += 1
        p.nonfinite_streak += 1
        loss_value = float("nan") if loss is None else float(loss)
        self.logger.scalars({"train/skipped_steps": p.skipped_steps}, p.step + 1)
        log.warning(
            "step %d: loss %s, gradient norm %s: update skipped (%d in a row, %d in all)",
            p.step + 1, loss_value, float(grad_norm), p.nonfinite_streak, p.skipped_steps,
        )  # fmt: skip
        if p.nonfinite_streak >= limit:
            raise TrainingDiverged.at(p.step + 1, p.nonfinite_streak, limit, self.settings.lr,
                                      self.run_dir / "checkpoints")  # fmt: skip

    def batch_flops(self, batch: Batch) -> int:
        """Analytic training FLOPs (`seq2seq.flops`) of one batch's padded shapes, without
        scheduled sampling's or guided alignment's full-context extra pass."""
        shapes = (len(batch), batch.src.size(1), batch.tgt_in.size(1))
        return training_flops(self.settings.run_config, *shapes, *self._vocab_sizes)

    def _log_step(self, window: LogWindow, display: ProgressDisplay) -> None:
        """TensorBoard, `metrics.jsonl` and the status line, every `log_every` steps."""
        step, p = self.progress.step, self.progress
        if step % self.settings.log_every != 0 and step != 1:
            return
        stats = window.flush(self.schedule.lr)
        stats["train/skipped_steps"] = p.skipped_steps
        stats["train/tflop"] = p.train_tflop
        self.train_losses.append(stats["train/loss"])
        self.logger.scalars(stats, step)
        self.metrics.write(step, {**stats, "epoch": p.epoch})
        best = None if p.best_value is None else (self.selection.metric.label, p.best_value)
        display.update(step, {**stats, "epoch": p.epoch}, best)

    # ------------------------------------------------------------------ stopping

    def _finished(self) -> bool:
        p, budget = self.progress, self.settings
        over_time = False
        if budget.max_minutes is not None:  # every rank must stop at the same step
            over_time = self.ranks.any(p.train_seconds >= 60.0 * budget.max_minutes, self.device)
        return (p.step >= budget.max_steps or p.epoch >= budget.max_epochs or over_time
                or p.stopped_early)  # fmt: skip

    def _validation_due(self) -> bool:
        step, settings = self.progress.step, self.settings
        due = step % settings.valid_every == 0 or step >= settings.max_steps
        return step > self.progress.validated_step and due

    def _stop_requested(self, stop: StopRequest) -> bool:
        """Whether any rank received a stop signal (every rank stops at the same step)."""
        return self.ranks.any(stop.received is not None, self.device)

    def _stop(self, stop: StopRequest, saved: bool = False) -> NoReturn:
        """Save `last.pt` at this step boundary, then end `fit` as the signal asks."""
        path = self.run_dir / "checkpoints" / "last.pt" if saved else self.save("last")
        log.warning("%s: saved %s at step %d; continue with trainer.resume=%s",
                    stop.signal_name, path, self.progress.step, self.run_dir)  # fmt: skip
        if stop.by_ctrl_c:
            raise KeyboardInterrupt
        raise TrainingStopped(stop.signal_name, self.progress.step, path, stop.received)

    # ------------------------------------------------------------------ validation

    def validate_and_checkpoint(self) -> dict[str, float]:
        """Validate and run the hooks (rank 0; the other ranks receive the scores), then
        step the schedule, judge the selected metric (best, patience, convergence) and save
        checkpoints. Returns every metric of this validation."""
        step, p = self.progress.step, self.progress
        with self.ema.applied(self.model):  # what is validated and kept as best.pt
            metrics = self.ranks.broadcast(
                self._validate_on_main(step) if self.ranks.is_main else None
            )
            p.validated_step = step
            self.logger.scalars({  # FLOPs and the run's own clock (resumed runs continue it)
                "train/tflop": p.train_tflop, "train/minutes": p.train_seconds / 60,
            }, step)  # fmt: skip
            value = self.selection.value(metrics, step)
            higher = self.selection.metric.higher_is_better
            self.schedule.on_validation(value, higher_is_better=higher)
            if self.selection.judge(p, value, metrics, step):
                self.save("best")
        self.save("last")
        if not self.ranks.is_main:
            return metrics
        self.logger.flush()
        log.info("step %d valid %s (best %s %s at %d)", step, shown_metrics(metrics),
                 self.selection.metric.label, self.selection.shown(p.best_value),
                 p.best_step)  # fmt: skip
        return metrics

    def _validate_on_main(self, step: int) -> dict[str, float]:
        """`validate`, a snapshot for averaging, then the hooks (before saving, so that
        best.pt holds what they return): their metrics join validate's."""
        metrics = self.validate()
        self.snapshots.take(self.model)
        self.logger.scalars({f"valid/{k}": v for k, v in metrics.items()}, step)
        return {**metrics, **self.run_hooks(step)}

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
        samples = sample_table(rows[: self.settings.text_samples])
        self.logger.text("valid/samples", samples, self.progress.step)
        return metrics

    def _computed(self, candidate: Metric) -> bool:
        return candidate.default or candidate.name == self.selection.name

    def _valid_loss(self, split) -> float:
        """The mean NLL per target token of the split, teacher forced, no smoothing."""
        self.model.eval()
        sampler = TokenBatchSampler(
            split.src_lengths, split.tgt_lengths, self.settings.max_tokens, shuffle=False
        )
        nll_total, tokens = torch.zeros((), device=self.device), 0
        for indices in sampler.batches(0):
            batch = split.batch(indices).to(self.device)
            with self.autocast():
                logits, _ = self.model(batch.src, batch.src_mask, batch.tgt_in)
            nll_total += label_smoothed_nll(logits, batch.tgt_out, 0.0)[1]
            tokens += batch.num_tgt_tokens
        return nll_total.item() / max(tokens, 1)

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

    def measure(self) -> dict[str, float]:
        """`validate`'s metrics and, when the selected metric comes from a hook, the hooks'
        (run with a disabled logger, their checkpoint entries not kept): the model as it
        is now measured as a validation would, for comparing other weights (averaging)."""
        metrics = self.validate()
        if self.selection.metric.source == HOOK:
            silent = RunLogger(self.run_dir, enabled=False)
            metrics.update(self.run_hooks(self.progress.step, silent))
        return metrics

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
        """Everything to continue the run and to translate, and the hooks' entries;
        `with_snapshots` adds the weights kept for averaging and the moving average (in
        `last.pt`, so a resume keeps them), `rank_rng` every rank's random state (data parallel)."""
        payload = {
            "format": FORMAT_VERSION,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "schedule": self.schedule.state_dict(),
            "progress": asdict(self.progress),
            "rng": capture_rng_states(),
            "config": self.settings.run_config,
            "tokenizers": tokenizer_payload(self.data),
            **plugin_payload({"plugins": list(self.settings.plugins)}),  # trained with them
            **self.hook_entries,
        }
        if with_snapshots and self.snapshots.enabled:
            payload["snapshots"] = self.snapshots.payload()
        if with_snapshots and self.ema.enabled:
            payload["ema"] = self.ema.payload()
        if rank_rng is not None:
            payload["rank_rng"] = rank_rng
        return payload

    def save(self, name: str, all_ranks: bool = True) -> Path:
        """Write `checkpoints/<name>.pt` (rank 0 only: the ranks hold the same weights).
        `last.pt` and `best.pt` keep their previous generation as `<name>.prev.pt`.
        `all_ranks`: every rank calls this, and their random states are gathered into the
        checkpoint (data parallel); False when rank 0 alone saves, after training."""
        path = self.run_dir / "checkpoints" / f"{name}.pt"
        rank_rng = distributed.gathered_rng_states(self.ranks) if all_ranks else None
        if self.ranks.is_main:
            payload = self.checkpoint_payload(with_snapshots=name == "last", rank_rng=rank_rng)
            save_checkpoint(path, payload, keep_previous=name in ("last", "best"))
        return path

    def restore(self, payload: dict[str, Any]) -> None:
        """Continue from a checkpoint: weights, optimiser, schedule, progress (judged again
        by this run's selection), RNG, the weights kept for averaging, the moving average and
        the validation hooks' entries."""
        self.model.load_state_dict(payload["model"])
        self.optimizer.load_state_dict(payload["optimizer"])
        self.schedule.load_state_dict(payload["schedule"])
        self.progress = self.selection.resumed(payload["progress"])
        restore_rng_states(distributed.own_rng_state(payload, self.ranks))
        self.snapshots.restore(payload.get("snapshots", []))
        self.ema.restore(payload.get("ema"), self.model)
        self.hook_entries = {key: payload[key] for key in HOOK_KEYS if key in payload}


def _evenly_spaced(split: Any, limit: int | None) -> Any:
    """`limit` pairs spread over the whole split (the corpus is ordered by length, so the
    first `limit` would be the shortest), or the whole split."""
    if not limit or limit >= len(split):
        return split
    keep = sorted({round(i * (len(split) - 1) / max(limit - 1, 1)) for i in range(limit)})
    return split.select(keep)


def parameter_groups(model: torch.nn.Module) -> list[list[torch.nn.Parameter]]:
    """The groups of parameters clipped each on its own: the model's `parameter_groups`
    (`Seq2Seq`: the translation model, then an alignment layer), else all of them."""
    groups = getattr(model, "parameter_groups", None)
    return groups() if callable(groups) else [list(model.parameters())]
