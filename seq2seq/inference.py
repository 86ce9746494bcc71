"""A trained model ready to translate text: everything comes from one checkpoint.

`Translator.load(path)` rebuilds the model from the config stored in the checkpoint (only
classes of this package are instantiated) and the tokenisers from their stored bytes.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from omegaconf import OmegaConf

from seq2seq.build import build_model
from seq2seq.data.tokenizer import Tokenizer, tokenizer_from_bytes
from seq2seq.decoding import SearchSettings, translate_ids
from seq2seq.search import Hypothesis
from seq2seq.training.checkpoint import CheckpointError, load_checkpoint

log = logging.getLogger(__name__)


@dataclass
class Translation:
    """One input line and its n-best outputs."""

    source: str
    source_pieces: list[str]  # what the model saw, EOS included
    hypotheses: list[Hypothesis]
    texts: list[str]  # detokenised, one per hypothesis
    target_pieces: list[list[str]]  # per hypothesis, EOS included

    @property
    def text(self) -> str:
        return self.texts[0] if self.texts else ""


class Translator:
    def __init__(self, model, src_tokenizer: Tokenizer, tgt_tokenizer: Tokenizer, config, device):
        self.model, self.config, self.device = model, config, device
        self.src_tokenizer, self.tgt_tokenizer = src_tokenizer, tgt_tokenizer
        self.max_source_len = int(config.data.max_len)

    @classmethod
    def load(cls, path: str | Path, device: str | torch.device = "cpu") -> Translator:
        device = torch.device(device)
        payload = load_checkpoint(path, map_location=device)
        config = OmegaConf.create(payload["config"])
        tokenizers = {
            side: tokenizer_from_bytes(saved["kind"], saved["model"], saved["lang"])
            for side, saved in payload["tokenizers"].items()
        }
        model = build_model(config, tokenizers["src"].vocab_size, tokenizers["tgt"].vocab_size)
        try:
            model.load_state_dict(payload["model"])
        except RuntimeError as error:
            raise CheckpointError(f"{path}: weights do not fit its own config: {error}") from error
        model.to(device).eval()
        return cls(model, tokenizers["src"], tokenizers["tgt"], config, device)

    def encode_source(self, line: str, line_number: int) -> list[int]:
        ids = self.src_tokenizer.encode(line)
        if len(ids) > self.max_source_len:
            log.warning(
                "line %d: %d source pieces, truncated to the model's limit of %d",
                line_number, len(ids), self.max_source_len,
            )  # fmt: skip
            ids = ids[: self.max_source_len]
        return ids

    def translate(
        self, lines: Sequence[str], settings: SearchSettings, need_weights: bool = False
    ) -> list[Translation]:
        """Translate lines in order; an empty line gives an empty translation."""
        sources = [self.encode_source(line, number) for number, line in enumerate(lines, 1)]
        todo = [i for i, ids in enumerate(sources) if ids]
        nbest = translate_ids(
            self.model, [sources[i] for i in todo], settings, self.device, need_weights
        )
        found = dict(zip(todo, nbest))
        return [self._translation(line, sources[i], found.get(i, [])) for i, line in enumerate(lines)]

    def _translation(self, line: str, ids: list[int], hypotheses: list[Hypothesis]) -> Translation:
        src_pieces = [self.src_tokenizer.id_to_piece(i) for i in ids] + ["</s>"]
        return Translation(
            source=line,
            source_pieces=src_pieces,
            hypotheses=hypotheses,
            texts=[self.tgt_tokenizer.decode(h.tokens) for h in hypotheses],
            target_pieces=[
                [self.tgt_tokenizer.id_to_piece(i) for i in h.tokens] + ["</s>"] for h in hypotheses
            ],
        )
