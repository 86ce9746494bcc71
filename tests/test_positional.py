"""Position encodings: the sinusoid formula, offset slicing, range checks."""

from __future__ import annotations

import math

import pytest
import torch

from seq2seq.models.positional import (
    POSITIONAL_ENCODINGS,
    LearnedPositions,
    SinusoidalPositions,
    position_table,
)


def explicit_sinusoid(position: int, column: int, dim: int) -> float:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d))."""
    two_i = column - column % 2
    angle = position / 10000 ** (two_i / dim)
    return math.sin(angle) if column % 2 == 0 else math.cos(angle)


@pytest.mark.parametrize("dim", [7, 8])
def test_sinusoid_matches_the_explicit_formula(dim: int) -> None:
    module = SinusoidalPositions(dim, max_positions=50)
    added = module(torch.zeros(1, 50, dim))[0]  # (50, dim)
    expected = torch.tensor(
        [[explicit_sinusoid(pos, col, dim) for col in range(dim)] for pos in range(50)]
    )
    torch.testing.assert_close(added, expected, atol=1e-6, rtol=0)


def test_sinusoid_table_is_a_buffer_not_a_parameter() -> None:
    module = SinusoidalPositions(8, max_positions=16)
    assert list(module.parameters()) == []
    assert "positions" not in module.state_dict()
    assert dict(module.named_buffers())["positions"].shape == (16, 8)


@pytest.mark.parametrize("module_class", POSITIONAL_ENCODINGS.values())
def test_forward_adds_the_positions_to_the_input(module_class: type) -> None:
    torch.manual_seed(0)
    module = module_class(5, max_positions=9)
    x = torch.randn(3, 4, 5)
    torch.testing.assert_close(module(x) - module(torch.zeros_like(x)), x)


@pytest.mark.parametrize("module_class", POSITIONAL_ENCODINGS.values())
def test_offset_gives_the_same_encoding_as_the_full_pass(module_class: type) -> None:
    torch.manual_seed(0)
    module = module_class(5, max_positions=9)
    full = module(torch.zeros(2, 9, 5))  # (2, 9, 5)
    for offset in range(9):
        one_step = module(torch.zeros(2, 1, 5), offset=offset)  # (2, 1, 5)
        torch.testing.assert_close(one_step, full[:, offset : offset + 1])
    torch.testing.assert_close(module(torch.zeros(2, 3, 5), offset=4), full[:, 4:7])


@pytest.mark.parametrize("module_class", POSITIONAL_ENCODINGS.values())
def test_positions_past_the_table_raise(module_class: type) -> None:
    module = module_class(5, max_positions=6)
    module(torch.zeros(1, 4, 5), offset=2)  # exactly fills the table: allowed
    with pytest.raises(ValueError, match="max_positions"):
        module(torch.zeros(1, 4, 5), offset=3)
    with pytest.raises(ValueError, match="max_positions"):
        module(torch.zeros(1, 7, 5))


@pytest.mark.parametrize("module_class", POSITIONAL_ENCODINGS.values())
def test_bad_arguments_raise(module_class: type) -> None:
    module = module_class(5, max_positions=6)
    with pytest.raises(ValueError, match="offset"):
        module(torch.zeros(1, 2, 5), offset=-1)
    with pytest.raises(ValueError, match="x must be"):
        module(torch.zeros(1, 2, 4))
    with pytest.raises(ValueError, match="dim"):
        module_class(0)


def test_learned_positions_are_trained() -> None:
    module = LearnedPositions(3, max_positions=5)
    module(torch.zeros(1, 2, 3), offset=1).sum().backward()
    grad = module.positions.grad  # (5, 3)
    assert grad[1:3].eq(1).all() and grad[0].eq(0).all() and grad[3:].eq(0).all()


def test_follows_the_input_dtype() -> None:
    x = torch.zeros(1, 3, 8, dtype=torch.float64)
    assert SinusoidalPositions(8)(x).dtype == torch.float64


def test_position_tables_are_chosen_by_name():
    assert isinstance(position_table("learned", 4, 6), LearnedPositions)
    with pytest.raises(ValueError, match="positional must be one of"):
        position_table("rotary", 4, 6)
