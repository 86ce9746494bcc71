"""A run's validation hooks on a fresh model, with a logger that keeps the images: what
the tests of the TensorBoard images (alignment layer, attention pooling, hierarchical
attention) share."""

from __future__ import annotations

import torch

from seq2seq.config.build import build_model, plain
from seq2seq.data.prepare import prepare
from seq2seq.training.hooks import ValidationContext, validation_hooks
from seq2seq.visualise import heatmap


class ImageLog:
    """A stand-in for the run logger that keeps the images (tag -> steps) it is given."""

    enabled = True

    def __init__(self):
        self.images: dict[str, list[int]] = {}

    def image(self, tag: str, rgb, step: int) -> None:
        assert rgb.ndim == 3 and rgb.shape[-1] == 3
        self.images.setdefault(tag, []).append(step)

    def scalars(self, values, step: int) -> None:
        pass


def hooks_run(monkeypatch, cfg, step: int):
    """A fresh model of `cfg` (seed 0) through every validation hook of its run at `step`:
    the logger, every `draw_alignment` call (column pieces, row pieces, weights, title),
    the model, the data, and the hooks."""
    data = prepare(plain(cfg.data))
    torch.manual_seed(0)
    model = build_model(cfg, data.src_tokenizer.vocab_size, data.tgt_tokenizer.vocab_size)
    drawn, draw = [], heatmap.draw_alignment

    def recorded(source_pieces, target_pieces, weights, title, **options):
        drawn.append((list(source_pieces), list(target_pieces), weights.clone(), title))
        return draw(source_pieces, target_pieces, weights, title, **options)

    monkeypatch.setattr(heatmap, "draw_alignment", recorded)
    hooks = validation_hooks(plain(cfg), data)
    logger = ImageLog()
    for hook in hooks:
        hook(ValidationContext(model, torch.device("cpu"), logger, step))
    return logger, drawn, model, data, hooks
