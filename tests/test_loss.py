"""The label-smoothed loss (seq2seq.training.label_smoothing) against PyTorch's own cross-entropy:
values, gradients and padding, and its closed-form backward against autograd's."""

import pytest
import torch
import torch.nn.functional as F

from seq2seq.special_tokens import PAD_ID
from seq2seq.training.label_smoothing import (
    SmoothedTerms,
    label_smoothed_nll,
    sentence_label_smoothed_nll,
)


def batch(seed: int = 0, dtype=torch.float32):
    """Logits (3, 5, 11) and targets with padding at the ends of two sentences."""
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(3, 5, 11, generator=generator, dtype=dtype) * 3
    targets = torch.randint(PAD_ID + 1, 11, (3, 5), generator=generator)
    targets[0, 3:] = PAD_ID
    targets[2, 1:] = PAD_ID
    return logits.requires_grad_(), targets


def reference(logits, targets, smoothing):
    """PyTorch's cross-entropy, summed over the real positions."""
    return F.cross_entropy(
        logits.reshape(-1, logits.size(-1)),
        targets.reshape(-1),
        ignore_index=PAD_ID,
        label_smoothing=smoothing,
        reduction="sum",
    )


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_loss_and_gradient_equal_pytorch_cross_entropy(smoothing):
    logits, targets = batch()
    loss, nll = label_smoothed_nll(logits, targets, smoothing)
    (grad,) = torch.autograd.grad(loss, logits)
    expected_logits = logits.detach().clone().requires_grad_()
    expected = reference(expected_logits, targets, smoothing)
    expected.backward()
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(nll, reference(logits.detach(), targets, 0.0))
    torch.testing.assert_close(grad, expected_logits.grad)


def test_padding_positions_get_no_loss_and_no_gradient():
    logits, targets = batch()
    loss, _ = label_smoothed_nll(logits, targets, 0.1)
    (grad,) = torch.autograd.grad(loss, logits)
    padding = targets == PAD_ID
    assert padding.any()
    assert torch.count_nonzero(grad[padding]) == 0
    changed = logits.detach().clone()
    changed[padding] = 1e4  # anything at padding changes nothing
    torch.testing.assert_close(label_smoothed_nll(changed, targets, 0.1)[0], loss.detach())


def test_sentence_sums_add_up_to_the_batch_sum():
    logits, targets = batch(seed=1)
    per_sentence, per_sentence_nll = sentence_label_smoothed_nll(logits, targets, 0.2)
    total, total_nll = label_smoothed_nll(logits, targets, 0.2)
    assert per_sentence.shape == (3,)
    torch.testing.assert_close(per_sentence.sum(), total)
    torch.testing.assert_close(per_sentence_nll.sum(), total_nll)


def test_closed_form_backward_passes_gradcheck():
    logits, targets = batch(seed=2, dtype=torch.float64)
    flat_logits = logits.detach().reshape(-1, 11).requires_grad_()
    flat_targets = targets.reshape(-1)

    def both_terms(values):
        nll, uniform = SmoothedTerms.apply(values, flat_targets, True)
        return nll, uniform

    assert torch.autograd.gradcheck(both_terms, (flat_logits,))


def test_a_term_left_unused_gets_no_gradient_contribution():
    logits, targets = batch(seed=3)
    flat = logits.detach().reshape(-1, 11).requires_grad_()
    nll, uniform = SmoothedTerms.apply(flat, targets.reshape(-1), True)
    (grad_nll_only,) = torch.autograd.grad(nll.sum(), flat)
    expected = flat.detach().clone().requires_grad_()
    reference(expected.view(3, 5, 11), targets, 0.0).backward()
    torch.testing.assert_close(grad_nll_only, expected.grad)
