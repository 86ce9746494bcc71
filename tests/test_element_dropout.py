"""Element dropout with masks drawn four to a random 64-bit word (`seq2seq.models.dropout`):
the rate, the scale, the gradient and the seed, against direct computations."""

from __future__ import annotations

import math

import pytest
import torch

from seq2seq.models.dropout import (
    ElementDropout,
    drop_rate,
    dropout_layer,
    element_dropout,
    keep_mask,
    lane_threshold,
    random_words,
)


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5, 1 / 3])
def test_the_rate_is_p_to_a_sixteenth_of_a_bit_and_the_threshold_gives_it(p):
    assert abs(drop_rate(p) - p) <= 2**-17
    dropped_values = lane_threshold(p) - (-(2**15))  # int16 values below the threshold
    assert dropped_values / 2**16 == drop_rate(p)


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_every_lane_of_a_word_drops_at_the_rate(p):
    torch.manual_seed(0)
    n = 400_000
    keep = keep_mask(torch.Size([n // 4, 4]), p, torch.device("cpu"))  # column j: lane j
    sigma = math.sqrt(p * (1 - p) / (n // 4))
    for lane in range(4):
        assert abs((~keep[:, lane]).float().mean().item() - drop_rate(p)) < 5 * sigma
    # neighbouring lanes of one word are independent: P(both dropped) = p²
    both = (~keep[:, 0] & ~keep[:, 1]).float().mean().item()
    assert abs(both - drop_rate(p) ** 2) < 5 * math.sqrt(p * p / (n // 4))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_a_mask_of_another_dtype_is_the_bool_mask_as_zeros_and_ones(dtype):
    shape = torch.Size([37, 11])  # 407 elements: the last word's lanes are partly unused
    torch.manual_seed(3)
    as_bool = keep_mask(shape, 0.3, torch.device("cpu"))
    torch.manual_seed(3)
    as_dtype = keep_mask(shape, 0.3, torch.device("cpu"), dtype)
    assert as_bool.dtype == torch.bool and as_dtype.dtype == dtype
    assert torch.equal(as_dtype, as_bool.to(dtype))


def test_kept_elements_are_scaled_dropped_ones_are_zero_and_the_mean_is_kept():
    torch.manual_seed(1)
    x = torch.rand(256, 40, 32) + 0.5  # no zeros of its own
    y = ElementDropout(0.25).train()(x)
    kept = y != 0
    assert torch.allclose(y[kept], x[kept] / (1 - drop_rate(0.25)))
    assert (~kept).float().mean().item() == pytest.approx(0.25, abs=0.01)
    assert y.mean().item() == pytest.approx(x.mean().item(), rel=0.01)


def test_the_gradient_is_the_mask_times_the_scale():
    torch.manual_seed(2)
    x = (torch.rand(8, 5, 16) + 0.5).requires_grad_()
    y = element_dropout(x, 0.3, training=True)
    upstream = torch.randn_like(y)
    y.backward(upstream)
    mask_times_scale = y.detach() / x.detach()  # 0 or 1 / (1 − p′), element by element
    assert torch.allclose(x.grad, upstream * mask_times_scale)


def test_the_seed_fixes_the_mask_and_the_dtype_is_kept():
    x = torch.ones(3, 7, 9, dtype=torch.bfloat16)
    torch.manual_seed(5)
    first = element_dropout(x, 0.5, training=True)
    torch.manual_seed(5)
    assert torch.equal(first, element_dropout(x, 0.5, training=True))
    assert first.dtype == torch.bfloat16 and first.shape == x.shape


def test_identity_in_eval_mode_and_at_zero_and_a_rate_of_one_refused():
    x = torch.randn(3, 4, 5)
    assert torch.equal(ElementDropout(0.5).eval()(x), x)
    assert torch.equal(ElementDropout(0.0).train()(x), x)
    assert isinstance(dropout_layer(0.1), ElementDropout)
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        ElementDropout(1.0)


def test_torch_rng_state_fixes_the_next_mask_and_successive_masks_differ():
    """The words come from NumPy's PCG64 seeded by torch's generator: restoring torch's RNG
    state (as resuming from a checkpoint does) draws the same mask again."""
    shape = torch.Size([64, 33])
    torch.manual_seed(7)
    first = keep_mask(shape, 0.5, torch.device("cpu"))
    state = torch.get_rng_state()
    second = keep_mask(shape, 0.5, torch.device("cpu"))
    torch.set_rng_state(state)
    assert torch.equal(keep_mask(shape, 0.5, torch.device("cpu")), second)
    assert not torch.equal(first, second)


def test_random_words_use_every_bit():
    torch.manual_seed(11)
    words = random_words(20_000, torch.device("cpu"))
    assert words.dtype == torch.int64 and words.shape == (20_000,)
    bits = torch.stack([(words >> k) & 1 for k in range(64)])  # (64, n): bit k of each word
    assert (bits.float().mean(dim=1) - 0.5).abs().max().item() < 5 * math.sqrt(0.25 / 20_000)
