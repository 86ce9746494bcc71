"""The training objectives: what one batch's loss is, chosen once for a run.

Each objective has `loss(model, batch) -> LossParts`: a teacher-forced forward pass of
`model` over the batch and the loss terms, each summed over the batch's real target tokens
(the trainer divides by their number and backpropagates `parts.loss`).

* `CrossEntropy`, the plain objective: label-smoothed cross-entropy (Szegedy et al. 2016,
  `seq2seq.training.label_smoothing`)

      L = Σ_t (1 − ε)·NLL_t + ε·uniform_t

* `Reinforce`, for hard attention trained by REINFORCE (`attention=hard
  attention.region.estimator=reinforce`): the same loss, and the regions' sampled keys
  recorded during the pass learn from the score-function surrogate
  L_RL = −Σ_i (R_i − b)·log π_i (`seq2seq.training.reinforce`), R_i the sentence's mean
  token log-likelihood of the reference, computed from the same logits. It is added as
  `L_RL − L_RL.detach()`: its gradient, the value 0, so `train/loss` stays the translation
  loss;

      L = Σ_i [(1 − ε)·NLL_i + ε·uniform_i] + (L_RL − L_RL.detach())

* `GuidedAlignment` (`alignment=guided`, Garg et al. 2019): one of the two above, plus
  λ·L_align of the supervised heads against the batch's links
  (`seq2seq.training.guided_alignment`)

      L = L_translation + λ·L_align

* `AlignmentLayerLoss` (`alignment=layer`): one of the first two, plus λ·L_align of the
  separate alignment layer against the batch's links or the model's own attention read at
  its lag (`seq2seq.training.alignment_layer_loss`)

`objective_for` picks one for a model and the run's settings. With `trainer.compile` the
forward pass and loss are compiled once, with dynamic shapes (every batch has another size
and length); REINFORCE cannot be traced and is refused at start-up
(`seq2seq.config.value_checks`).

`scheduled_inputs` is what every objective is fed with `trainer.scheduled_sampling`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, replace

import torch
from torch import nn

from seq2seq.data.batching import Batch
from seq2seq.special_tokens import PAD_ID
from seq2seq.training import reinforce
from seq2seq.training.alignment_layer_loss import LayerTraining, teacher_labels
from seq2seq.training.guided_alignment import Guidance, alignment_loss, guided_loss
from seq2seq.training.label_smoothing import label_smoothed_nll, sentence_label_smoothed_nll
from seq2seq.training.precision import Autocast


@dataclass(frozen=True)
class LossParts:
    """One batch's loss terms, each summed over its real target tokens (float32 scalars
    unless said otherwise), and what the training log shows of them."""

    loss: torch.Tensor  # the objective L: what the update minimises
    nll: torch.Tensor  # the plain NLL, for the perplexity
    align: torch.Tensor | None = None  # guided: L_align, summed over the linked rows
    align_rows: torch.Tensor | None = None  # guided: the number of linked rows
    rewards: torch.Tensor | None = None  # REINFORCE: R_i, (batch,)
    baseline: torch.Tensor | None = None  # REINFORCE: b of the first region after the batch

    def detached(self) -> LossParts:
        """The same values, cut from the graph (what the log keeps after the backward pass)."""
        return replace(self, loss=self.loss.detach(), nll=self.nll.detach())


def compiled_if(compiled: bool, forward_loss):
    """`forward_loss` through `torch.compile` (dynamic shapes) when `compiled`, else itself."""
    return torch.compile(forward_loss, dynamic=True) if compiled else forward_loss


class CrossEntropy:
    """The plain objective: label-smoothed cross-entropy (ε = `trainer.label_smoothing`)."""

    def __init__(self, smoothing: float, autocast: Autocast, compiled: bool = False):
        self.smoothing, self.autocast = smoothing, autocast
        self.forward_loss = compiled_if(compiled, self._forward_loss)

    def loss(self, model: nn.Module, batch: Batch) -> LossParts:
        loss, nll = self.forward_loss(model, batch.src, batch.src_mask, batch.tgt_in, batch.tgt_out)
        return LossParts(loss, nll)

    def _forward_loss(
        self,
        model: nn.Module,
        src: torch.Tensor,  # (batch, src_len)
        src_mask: torch.Tensor,  # (batch, src_len)
        tgt_in: torch.Tensor,  # (batch, tgt_len)
        tgt_out: torch.Tensor,  # (batch, tgt_len)
    ) -> tuple[torch.Tensor, torch.Tensor]:
        with self.autocast():
            logits, _ = model(src, src_mask, tgt_in)  # (batch, tgt_len, vocab)
        return self.translation_loss(logits, tgt_out)

    def translation_loss(
        self, logits: torch.Tensor, tgt_out: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The summed (smoothed loss, NLL) of the logits (batch, tgt_len, vocab)."""
        return label_smoothed_nll(logits, tgt_out, self.smoothing)

    @contextlib.contextmanager
    def recording(self, model: nn.Module) -> Iterator[None]:
        """What the forward pass runs inside (nothing to record here)."""
        yield

    def with_rewards(self, parts: LossParts) -> LossParts:
        """The parts with what was recorded during the pass (nothing here)."""
        return parts


class Reinforce(CrossEntropy):
    """Cross-entropy, and the REINFORCE surrogate of the hard regions that record their
    choices during the pass (module docstring)."""

    def __init__(
        self,
        smoothing: float,
        autocast: Autocast,
        regions: list[nn.Module],  # the model's REINFORCE regions (`reinforce_regions`)
        compiled: bool = False,
    ):
        super().__init__(smoothing, autocast, compiled)
        self.regions = regions
        self.choices: reinforce.Choices | None = None  # while a pass records
        self.rewards: torch.Tensor | None = None  # R of the last pass, (batch,)

    def loss(self, model: nn.Module, batch: Batch) -> LossParts:
        with self.recording(model):
            parts = super().loss(model, batch)
        return self.with_rewards(parts)

    def translation_loss(
        self, logits: torch.Tensor, tgt_out: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(smoothed loss + (L_RL − L_RL.detach()), NLL), summed; the baselines move on."""
        loss, nll = sentence_label_smoothed_nll(logits, tgt_out, self.smoothing)  # (batch,) each
        surrogate = self.choices.surrogate(nll, tgt_out)
        return loss.sum() + (surrogate - surrogate.detach()), nll.sum()

    @contextlib.contextmanager
    def recording(self, model: nn.Module) -> Iterator[None]:
        """While inside, the regions record their choices (`reinforce.recording`); keeps
        the pass's rewards."""
        with reinforce.recording(model) as choices:
            self.choices = choices
            try:
                yield
            finally:
                self.choices = None
        self.rewards = choices.rewards

    def with_rewards(self, parts: LossParts) -> LossParts:
        return replace(parts, rewards=self.rewards, baseline=self.regions[0].baseline)


class WithAlignmentLoss:
    """A translation objective plus an alignment term: `_forward_loss` returns the summed
    (loss, NLL, L_align, rows), and `needs_links` says whether the batch must carry links
    (`option` names the setting in the error)."""

    needs_links, option = True, "alignment=guided"

    def __init__(self, translation: CrossEntropy, compiled: bool = False):
        self.translation = translation
        self.forward_loss = compiled_if(compiled, self._forward_loss)

    def loss(self, model: nn.Module, batch: Batch) -> LossParts:
        if self.needs_links and batch.align is None:
            raise ValueError(f"{self.option}: the batch carries no links (see seq2seq.data.links)")
        with self.translation.recording(model):
            loss, nll, align, rows = self.forward_loss(
                model, batch.src, batch.src_mask, batch.tgt_in, batch.tgt_out, batch.align
            )
        parts = LossParts(loss, nll, align=align.detach(), align_rows=rows)
        return self.translation.with_rewards(parts)

    def _forward_loss(self, model, src, src_mask, tgt_in, tgt_out, align):
        raise NotImplementedError


class GuidedAlignment(WithAlignmentLoss):
    """A translation objective plus λ·L_align of the supervised heads (module docstring)."""

    def __init__(self, translation: CrossEntropy, guidance: Guidance, compiled: bool = False):
        self.guidance = guidance
        super().__init__(translation, compiled)

    def _forward_loss(
        self,
        model: nn.Module,
        src: torch.Tensor,
        src_mask: torch.Tensor,
        tgt_in: torch.Tensor,
        tgt_out: torch.Tensor,
        align: torch.Tensor,  # (batch, tgt_len, src_len) p*, rows of tgt_out over src
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(translation loss + λ·L_align, NLL, L_align, linked rows), summed, with the
        attention of the pass (of the one without the future mask with
        `alignment.full_context`); L_align in float32."""
        guidance = self.guidance
        with self.translation.autocast():
            logits, attention = model(
                src, src_mask, tgt_in,
                need_weights=not guidance.full_context, full_context=guidance.full_context,
            )  # fmt: skip
        loss, nll = self.translation.translation_loss(logits, tgt_out)
        align_sum, rows = guided_loss(attention, align, guidance, tgt_out != PAD_ID)
        return loss + guidance.weight * align_sum, nll, align_sum, rows


class AlignmentLayerLoss(WithAlignmentLoss):
    """A translation objective plus λ·L_align of the separate alignment layer
    (`seq2seq.training.alignment_layer_loss`): against the batch's links (guided) or the
    model's own attention read at its lag (unsupervised)."""

    option = "alignment=layer (guided)"

    def __init__(self, translation: CrossEntropy, training: LayerTraining, compiled: bool = False):
        self.training, self.needs_links = training, training.guided
        super().__init__(translation, compiled)

    def _forward_loss(
        self,
        model: nn.Module,
        src: torch.Tensor,
        src_mask: torch.Tensor,
        tgt_in: torch.Tensor,
        tgt_out: torch.Tensor,
        align: torch.Tensor | None,  # (batch, tgt_len, src_len) p* of guided training
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(translation loss + λ·L_align, NLL, L_align, labelled rows), summed."""
        training = self.training
        with self.translation.autocast():
            logits, attention, aligned = model(
                src, src_mask, tgt_in, need_weights=not training.guided, alignment_layer=True
            )  # aligned: (batch, layer heads, tgt_len, src_len)
        loss, nll = self.translation.translation_loss(logits, tgt_out)
        if training.guided:
            target = align
        else:
            if attention is None:
                raise ValueError("alignment=layer (unsupervised) learns from the translation "
                                 "attention's weights, and the decoder returned none")  # fmt: skip
            target = teacher_labels(attention, src_mask, tgt_out, training)
        align_sum, rows = alignment_loss(aligned.float().mean(dim=1), target, training.loss)
        return loss + training.weight * align_sum, nll, align_sum, rows


Objective = CrossEntropy | GuidedAlignment | AlignmentLayerLoss


def objective_for(
    model: nn.Module,
    smoothing: float,
    autocast: Autocast,
    guidance: Guidance | None = None,
    compiled: bool = False,
    layer_training: LayerTraining | None = None,
) -> Objective:
    """The run's objective: REINFORCE when `model` has regions that learn by it, else the
    plain cross-entropy; inside guided alignment with `guidance`, with the alignment
    layer's loss with `layer_training`."""
    regions = reinforce.reinforce_regions(model)
    plain_compiled = compiled and guidance is None and layer_training is None
    translation = (
        Reinforce(smoothing, autocast, regions, compiled)
        if regions
        else CrossEntropy(smoothing, autocast, plain_compiled)
    )
    if guidance is not None and layer_training is not None:
        raise ValueError("alignment=guided and alignment=layer are two choices of one option")
    if layer_training is not None:
        return AlignmentLayerLoss(translation, layer_training, compiled)
    return translation if guidance is None else GuidedAlignment(translation, guidance, compiled)


def scheduled_inputs(
    model: nn.Module, batch: Batch, probability: float, autocast: Autocast
) -> torch.Tensor:
    """Two-pass scheduled sampling (Bengio et al. 2015; Mihaylova & Liu 2019): the batch's
    decoder inputs with each real gold token after BOS replaced, with `probability`, by the
    model's own prediction for it from a first pass without gradients."""
    with torch.no_grad(), autocast():
        logits, _ = model(batch.src, batch.src_mask, batch.tgt_in)
    predicted = logits.argmax(-1)[:, :-1]  # prediction for input position t+1
    replace_token = torch.rand(predicted.shape, device=predicted.device) < probability
    replace_token &= batch.tgt_in[:, 1:] != PAD_ID
    tgt_in = batch.tgt_in.clone()
    tgt_in[:, 1:] = torch.where(replace_token, predicted, batch.tgt_in[:, 1:])
    return tgt_in
