"""The training loop: batches in, updates out; validation, checkpoints and early stopping.

Read top to bottom: `Trainer.fit` loops over epochs and batches, `train_step` does one
forward/backward (with gradient accumulation), `validate` scores greedy translations of
the valid split, `save` writes a checkpoint that can both resume the run and translate.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from seq2seq.build import instantiate_part
from seq2seq.data.batching import Batch, TokenBatchSampler, collate
from seq2seq.decoding import SearchSettings, translate_ids
from seq2seq.metrics import corpus_scores
from seq2seq.models.model import Seq2Seq
from seq2seq.special_tokens import PAD_ID
from seq2seq.training import distributed
from seq2seq.training.checkpoint import (
    FORMAT_VERSION,
    capture_rng_states,
    restore_rng_states,
    save_checkpoint,
)
from seq2seq.training.logger import RunLogger, sample_table
from seq2seq.training.loss import label_smoothed_nll
from seq2seq.training.progress import ProgressDisplay

log = logging.getLogger(__name__)


@dataclass
class Progress:
    """Where the run stands; saved in every checkpoint."""

    step: int = 0  # optimiser updates done
    epoch: int = 0
    position: int = 0  # batches of this epoch already consumed
    best_bleu: float = -1.0
    best_step: int = 0
    bad_validations: int = 0
    validated_step: int = 0  # step of the latest validation
    train_seconds: float = 0.0
    stopped_early: bool = False


class Trainer:
    def __init__(
        self,
        cfg: DictConfig,
        model: Seq2Seq,
        data: Any,  # seq2seq.data.prepare.PreparedData
        run_dir: Path,
        device: torch.device,
        logger: RunLogger,
        hooks: list | None = None,
        ranks: distributed.Distributed | None = None,
    ):
        self.cfg, self.tcfg = cfg, cfg.trainer
        self.model, self.data, self.run_dir, self.device = model, data, run_dir, device
        self.ranks = ranks or distributed.Distributed()  # one process unless under torchrun
        self.logger = logger
        self.hooks = hooks or []  # callables hook(trainer, step) run after each validation
        self.optimizer = instantiate_part(cfg.optim, "optim", params=model.parameters())
        self.schedule = self._build_schedule()
        self.progress = Progress()
        self.sampler = TokenBatchSampler(
            data.train.src_lengths,
            data.train.tgt_lengths,
            max_tokens=cfg.data.max_tokens,
            shuffle=True,
            seed=self.tcfg.seed,
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
        self.train_losses: list[float] = []  # smoothed loss per update, for tests and logs
        self.valid_split = _evenly_spaced(data.valid, self.tcfg.valid_max_sentences)
        # Weights at the last `average_last` validations, for checkpoint averaging.
        self.snapshots: deque[dict[str, torch.Tensor]] = deque(
            maxlen=max(1, self.tcfg.average_last)
        )

    # ------------------------------------------------------------------ set-up

    def _build_schedule(self):
        extra = {}
        if "CosineSchedule" in self.cfg.schedule._target_:
            extra["total_steps"] = self.tcfg.max_steps
        return instantiate_part(self.cfg.schedule, "schedule", optimizer=self.optimizer, **extra)

    def autocast(self):
        if self.device.type == "cuda":
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    # ------------------------------------------------------------------ loop

    def fit(self) -> Progress:
        """Train until max_steps, max_epochs, the time budget or early stopping."""
        show = self.cfg.logging.progress_bar and self.ranks.is_main
        display = ProgressDisplay(self.tcfg.max_steps, enabled=show)
        display.update(self.progress.step, {})
        started = time.perf_counter() - self.progress.train_seconds
        window = _Window()
        try:
            while not self._finished():
                batches = self.sampler.batches(self.progress.epoch)
                for position, batch_indices in distributed.shard(
                    batches, self.progress.position, self.ranks
                ):
                    self.progress.position = position
                    self._consume(batch_indices, window)
                    self.progress.train_seconds = time.perf_counter() - started
                    if self._after_update(window, display) or self._finished():
                        break
                else:
                    self.progress.epoch += 1
                    self.progress.position = 0
        except KeyboardInterrupt:
            self.progress.train_seconds = time.perf_counter() - started
            self.save("last")
            display.close()
            log.warning("interrupted: saved %s", self.run_dir / "checkpoints" / "last.pt")
            raise
        display.close()
        if self.progress.step > self.progress.validated_step:  # stopped by time or epochs
            self.validate_and_checkpoint()
        self.save("last")
        return self.progress

    def _finished(self) -> bool:
        p, t = self.progress, self.tcfg
        over_time = False
        if t.max_minutes is not None:  # every rank must stop at the same step
            over_time = self.ranks.any(p.train_seconds >= 60.0 * t.max_minutes, self.device)
        return p.step >= t.max_steps or p.epoch >= t.max_epochs or over_time or p.stopped_early

    def _consume(self, batch_indices: list[int], window: _Window) -> None:
        batch = collate([self.data.train.examples[i] for i in batch_indices], batch_indices)
        batch = batch.to(self.device)
        loss_sum, nll_sum = self.train_step(batch)
        window.add(loss_sum, nll_sum, batch)
        window.micro_batches += 1
        if window.micro_batches % self.tcfg.accumulate == 0:
            window.grad_norm = self.update()

    def train_step(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """Forward and backward on one batch; returns the summed (smoothed loss, NLL)."""
        self.model.train()
        tgt_in = self._scheduled_sampling(batch)
        loss_sum, nll_sum = self.forward_loss(batch.src, batch.src_mask, tgt_in, batch.tgt_out)
        (loss_sum / (batch.num_tgt_tokens * self.tcfg.accumulate)).backward()
        return loss_sum.detach(), nll_sum.detach()

    def _forward_loss(
        self, src: torch.Tensor, src_mask: torch.Tensor, tgt_in: torch.Tensor, tgt_out: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Teacher-forced forward pass; the summed (smoothed loss, NLL) over real tokens."""
        with self.autocast():
            logits, _ = self.train_model(src, src_mask, tgt_in)  # (batch, tgt_len, vocab)
        return label_smoothed_nll(logits, tgt_out, self.tcfg.label_smoothing)

    def update(self) -> torch.Tensor:
        grad_norm = torch.nn.utils.clip_grad_norm_(
            self.model.parameters(), self.tcfg.grad_clip if self.tcfg.grad_clip > 0 else math.inf
        )
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.schedule.step()
        self.progress.step += 1
        return grad_norm

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

    def _after_update(self, window: _Window, display: ProgressDisplay) -> bool:
        """Logging and validation at their intervals; True when training should stop."""
        if window.micro_batches % self.tcfg.accumulate != 0:
            return False
        step = self.progress.step
        if step % self.tcfg.log_every == 0 or step == 1:
            stats = window.flush(self.schedule.lr)
            self.train_losses.append(stats["train/loss"])
            self.logger.scalars(stats, step)
            display.update(step, {**stats, "epoch": self.progress.epoch})
        if step % self.tcfg.valid_every == 0 or step >= self.tcfg.max_steps:
            self.validate_and_checkpoint()
        return self.progress.stopped_early

    # ------------------------------------------------------------------ validation

    def validate_and_checkpoint(self) -> dict[str, float]:
        """Validate (rank 0; the other ranks receive its scores), then update the best
        score, early stopping and the schedule, save checkpoints and run the hooks."""
        metrics = self.ranks.broadcast(self.validate() if self.ranks.is_main else None)
        step = self.progress.step
        self.progress.validated_step = step
        if self.tcfg.average_last > 1 and self.ranks.is_main:
            self.snapshots.append(_copy_weights(self.model))
        self.logger.scalars({f"valid/{k}": v for k, v in metrics.items()}, step)
        self.schedule.on_validation(metrics["bleu"])
        if metrics["bleu"] > self.progress.best_bleu:
            self.progress.best_bleu, self.progress.best_step = metrics["bleu"], step
            self.progress.bad_validations = 0
            self.save("best")
        else:
            self.progress.bad_validations += 1
            patience = self.tcfg.patience
            self.progress.stopped_early = patience > 0 and self.progress.bad_validations >= patience
        self.save("last")
        if not self.ranks.is_main:
            return metrics
        for hook in self.hooks:
            hook(self, step)
        self.logger.flush()
        log.info(
            "step %d valid loss %.3f ppl %.2f BLEU %.2f chrF %.2f (best %.2f at %d)",
            step, metrics["loss"], metrics["ppl"], metrics["bleu"], metrics["chrf"],
            self.progress.best_bleu, self.progress.best_step,
        )  # fmt: skip
        return metrics

    @torch.inference_mode()
    def validate(self) -> dict[str, float]:
        """Teacher-forced loss and perplexity, and BLEU / chrF of greedy translations."""
        split = self.valid_split
        loss, ppl = self._valid_loss(split)
        hypotheses = self.translate([src for src, _ in split.examples])
        scores = corpus_scores(hypotheses, split.tgt_lines, self.data.tgt_tokenizer.lang)
        rows = list(zip(split.src_lines, split.tgt_lines, hypotheses))
        self.logger.text(
            "valid/samples", sample_table(rows[: self.cfg.logging.text_samples]), self.progress.step
        )
        return {"loss": loss, "ppl": ppl, "bleu": scores["bleu"], "chrf": scores["chrf"]}

    def _valid_loss(self, split) -> tuple[float, float]:
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
        loss = nll_total.item() / max(tokens, 1)
        return loss, math.exp(min(loss, 50.0))

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

    def checkpoint_payload(self) -> dict[str, Any]:
        return {
            "format": FORMAT_VERSION,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "schedule": self.schedule.state_dict(),
            "progress": asdict(self.progress),
            "rng": capture_rng_states(),
            "config": OmegaConf.to_container(self.cfg, resolve=True, enum_to_str=True),
            "tokenizers": tokenizer_payload(self.data),
        }

    def save(self, name: str) -> Path:
        """Write `checkpoints/<name>.pt` (rank 0 only: the ranks hold the same weights)."""
        path = self.run_dir / "checkpoints" / f"{name}.pt"
        if self.ranks.is_main:
            save_checkpoint(path, self.checkpoint_payload())
        return path

    def restore(self, payload: dict[str, Any]) -> None:
        """Continue from a checkpoint: weights, optimiser, schedule, progress, RNG."""
        self.model.load_state_dict(payload["model"])
        self.optimizer.load_state_dict(payload["optimizer"])
        self.schedule.load_state_dict(payload["schedule"])
        self.progress = Progress(**payload["progress"])
        restore_rng_states(payload["rng"])


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


def tokenizer_payload(data: Any) -> dict[str, Any]:
    """Both tokenisers as bytes, so that a checkpoint alone can translate."""
    return {
        side: {"lang": tok.lang, "kind": tok.kind, "model": tok.to_bytes()}
        for side, tok in (("src", data.src_tokenizer), ("tgt", data.tgt_tokenizer))
    }


class _Window:
    """Running sums between two log lines; one host sync per log line, none per step."""

    def __init__(self):
        self.micro_batches = 0
        self.grad_norm = torch.zeros(())
        self._reset()

    def _reset(self):
        self.loss = self.nll = None
        self.tgt_tokens = self.src_tokens = 0
        self.started = time.perf_counter()

    def add(self, loss_sum: torch.Tensor, nll_sum: torch.Tensor, batch: Batch) -> None:
        self.loss = loss_sum if self.loss is None else self.loss + loss_sum
        self.nll = nll_sum if self.nll is None else self.nll + nll_sum
        self.tgt_tokens += batch.num_tgt_tokens
        self.src_tokens += batch.num_src_tokens

    def flush(self, lr: float) -> dict[str, float]:
        seconds = max(time.perf_counter() - self.started, 1e-9)
        tokens = max(self.tgt_tokens, 1)
        loss, nll = self.loss.item() / tokens, self.nll.item() / tokens
        stats = {
            "train/loss": loss,
            "train/ppl": math.exp(min(nll, 50.0)),
            "train/lr": lr,
            "train/grad_norm": float(self.grad_norm),
            "train/tokens_per_sec": self.tgt_tokens / seconds,
        }
        self._reset()
        return stats
