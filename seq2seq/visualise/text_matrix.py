"""Attention as a small text matrix for the terminal: source across, target down."""

from __future__ import annotations

import unicodedata

import torch

SHADES = " ░▒▓█"
WORD_BOUNDARY = "▁"


def display_width(text: str) -> int:
    """Terminal columns: wide (CJK) characters take two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def pad(text: str, width: int) -> str:
    return text + " " * max(0, width - display_width(text))


def shade(weight: float) -> str:
    """Two characters for a weight in [0, 1]: a shade and its tenth (9 = 0.9 and over)."""
    level = min(len(SHADES) - 1, int(weight * len(SHADES)))
    tenth = min(9, int(weight * 10))
    return (SHADES[level] + str(tenth)) if weight >= 0.05 else " ·"


def attention_matrix_text(
    source_pieces: list[str], target_pieces: list[str], weights: torch.Tensor
) -> str:
    """weights (tgt_len, src_len) → rows of shaded cells, one per target piece.

    A cell reads `▓7`: the shade and the first decimal of the weight (0.7x).
    """
    if tuple(weights.shape) != (len(target_pieces), len(source_pieces)):
        raise ValueError(
            f"weights of shape {tuple(weights.shape)} do not fit "
            f"{len(target_pieces)} target × {len(source_pieces)} source pieces"
        )
    sources = [piece.replace(WORD_BOUNDARY, "_") for piece in source_pieces]
    targets = [piece.replace(WORD_BOUNDARY, "_") for piece in target_pieces]
    row_label = max(display_width(piece) for piece in targets) + 1
    widths = [max(3, display_width(piece) + 1) for piece in sources]
    lines = [" " * row_label + "".join(pad(p, w) for p, w in zip(sources, widths))]
    for piece, row in zip(targets, weights.tolist()):
        cells = "".join(pad(shade(value), width) for value, width in zip(row, widths))
        lines.append(pad(piece, row_label) + cells)
    return "\n".join(lines)
