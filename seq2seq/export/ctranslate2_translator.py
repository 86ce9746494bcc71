"""Translate with an exported CTranslate2 folder, the search settings meaning what they mean
for the project's own search (`seq2seq.config.search_settings.SearchSettings`):

* the source is the checkpoint's tokeniser's pieces plus EOS, truncated to `data.max_len`;
* at most floor(max_len_a · (source pieces + 1) + max_len_b) output tokens, and at most the
  decoder's position rows − 1; sentences are grouped by that limit, since CTranslate2 takes
  one limit per call;
* PAD and BOS are never emitted (`suppress_sequences`). CTranslate2 removes them before its
  softmax, the project after, so a score here is higher by −log(1 − p(PAD) − p(BOS)) per
  step: nothing for a trained model, which gives them next to no probability, but visible
  in an untrained one;
* beam_size 1 is greedy search; a wider beam asks CTranslate2 for all `beam_size` finished
  hypotheses with its length penalty off (so each score is the raw log P(Y|X), EOS
  included) and ranks them by score / ((5 + |Y|) / 6)^α, the project's GNMT penalty
  (`seq2seq.search.common.gnmt_length_penalty`), keeping `n_best`.

With `need_weights`, each hypothesis carries the attention of the head the export chose
for alignments (`meta["alignment"]`), as a (1, 1, len(tokens) + 1, source pieces + 1)
tensor: one layer and head, the rows of the output pieces and EOS (with a beam wider than
1, the first row comes from a one-step greedy search: `_greedy_first_rows`). Other weights
(`--html`, `--plot`, `--show-attention`) are left out.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import torch

from seq2seq.bounded_files import StructuredFileError, read_bounded
from seq2seq.config.search_settings import SearchSettings
from seq2seq.data.tokenizer import Tokenizer, tokenizer_from_bytes
from seq2seq.export.ctranslate2 import META_FILE, ExportError, import_ctranslate2
from seq2seq.export.parts import TOKENIZER_LIMIT, check_parts, read_meta
from seq2seq.search import Hypothesis
from seq2seq.search.translator import Translation
from seq2seq.special_tokens import BOS_PIECE, EOS_PIECE, PAD_PIECE

log = logging.getLogger(__name__)
NEVER_EMITTED = [[PAD_PIECE], [BOS_PIECE]]  # as `seq2seq.search.common.NEVER_EMITTED`


class CTranslate2Translator:
    """An exported folder's CTranslate2 model and the tokenisers written beside it."""

    def __init__(self, model, src_tokenizer: Tokenizer, tgt_tokenizer: Tokenizer, meta: dict):
        self.model, self.meta = model, meta
        self.compute_type = str(meta.get("quantization"))  # what the weights are run in
        self.src_tokenizer, self.tgt_tokenizer = src_tokenizer, tgt_tokenizer
        self.max_source_len = int(meta["max_source_len"])
        self.positions = int(meta["decoder_positions"])
        self.tgt_ids = {tgt_tokenizer.id_to_piece(i): i for i in range(tgt_tokenizer.vocab_size)}

    @classmethod
    def load(
        cls,
        folder: str | Path,
        device: str = "cpu",
        threads: int | None = None,
        compute_type: str | None = None,
    ):
        """ExportError (one line) for a folder that is not a seq2seq-export output, or
        whose parts do not belong together (`seq2seq.export.parts`).
        `compute_type` (CTranslate2's: float32, int8, ...) converts the weights at load;
        None keeps the precision the folder was written in."""
        folder = Path(folder)
        meta = read_meta(folder)
        tokenizers = [_side_tokenizer(folder, meta, side) for side in ("src", "tgt")]
        check_parts(folder, meta, dict(zip(("src", "tgt"), tokenizers)))
        ctranslate2 = import_ctranslate2()
        parsed = torch.device(device)
        try:
            model = ctranslate2.Translator(
                str(folder), device=parsed.type, device_index=parsed.index or 0,
                intra_threads=threads or torch.get_num_threads(),
                compute_type=compute_type or "default",
            )  # fmt: skip
        except (RuntimeError, ValueError) as error:
            raise ExportError(
                f"{folder}: CTranslate2 cannot load the model ({_first_line(error)})"
            ) from error
        translator = cls(model, *tokenizers, meta)
        translator.compute_type = compute_type or str(meta.get("quantization"))
        return translator

    def encode_source(self, line: str, line_number: int) -> list[int]:
        ids = self.src_tokenizer.encode(line)
        if len(ids) > self.max_source_len:
            log.warning("line %d: %d source pieces, truncated to the model's limit of %d",
                        line_number, len(ids), self.max_source_len)  # fmt: skip
            ids = ids[: self.max_source_len]
        return ids

    def output_limit(self, source_len: int, settings: SearchSettings) -> int:
        """Most output tokens before EOS (`seq2seq.search.common.max_output_lengths`)."""
        limit = math.floor(settings.max_len_a * (source_len + 1) + settings.max_len_b)
        return min(limit, self.positions - 1)

    def translate(
        self, lines: Sequence[str], settings: SearchSettings, need_weights: bool = False
    ) -> list[Translation]:
        """Translate lines in order; an empty line gives an empty translation. With
        `need_weights`, hypotheses carry the alignment head's attention (module docstring)."""
        sources = [self.encode_source(line, number) for number, line in enumerate(lines, 1)]
        groups: dict[int, list[int]] = defaultdict(list)
        for index, ids in enumerate(sources):
            if ids:
                groups[self.output_limit(len(ids), settings)].append(index)
        found: dict[int, list[Hypothesis]] = {}
        for limit, indices in groups.items():
            pieces = [self._source_pieces(sources[i]) for i in indices]
            for index, nbest in zip(indices, self._search(pieces, limit, settings, need_weights)):
                found[index] = nbest
        return [
            self._translation(line, sources[i], found.get(i, [])) for i, line in enumerate(lines)
        ]

    def _source_pieces(self, ids: list[int]) -> list[str]:
        return [self.src_tokenizer.id_to_piece(i) for i in ids] + [EOS_PIECE]

    def _search(
        self, sources: list[list[str]], limit: int, settings: SearchSettings, weights: bool
    ):
        beam = settings.beam_size
        results = self.model.translate_batch(
            sources, max_batch_size=settings.batch_size, beam_size=beam,
            num_hypotheses=beam, length_penalty=0.0, max_decoding_length=limit + 1,
            return_scores=True, return_end_token=True, suppress_sequences=NEVER_EMITTED,
            max_input_length=0, min_decoding_length=0, return_attention=weights,
        )  # fmt: skip
        found = [self._ranked(result, limit, settings) for result in results]
        if weights and beam > 1:
            self._greedy_first_rows(sources, settings, found)
        return found

    def _greedy_first_rows(self, sources, settings: SearchSettings, found) -> None:
        """Replace each hypothesis's first attention row (the step from BOS, the same for
        every hypothesis) by that of a one-step greedy search: CTranslate2 4.x's beam search
        returns another row there, while its later rows are the project's."""
        firsts = self.model.translate_batch(
            sources, max_batch_size=settings.batch_size, beam_size=1, max_decoding_length=1,
            return_attention=True, max_input_length=0, min_decoding_length=0,
        )  # fmt: skip
        for first, hypotheses in zip(firsts, found):
            row = torch.tensor(first.attention[0][0], dtype=torch.float32)
            for hypothesis in hypotheses:
                hypothesis.attention[0, 0, 0] = row

    def _ranked(self, result, limit: int, settings: SearchSettings) -> list[Hypothesis]:
        attention = result.attention or [None] * len(result.hypotheses)
        hypotheses = [self._hypothesis(tokens, score, limit, weights) for tokens, score, weights
                      in zip(result.hypotheses, result.scores, attention)]  # fmt: skip
        if settings.beam_size > 1:
            hypotheses.sort(key=lambda h: -h.normalised_score(settings.length_penalty))
        return hypotheses[: settings.n_best]

    def _hypothesis(self, pieces: list[str], score: float, limit: int, weights) -> Hypothesis:
        """Output ids without EOS, cut at `limit` (where the project forces EOS), and the
        attention rows of those ids and the EOS when CTranslate2 returned them."""
        if pieces and pieces[-1] == EOS_PIECE:
            pieces = pieces[:-1]
        tokens = [self.tgt_ids[piece] for piece in pieces[:limit]]
        attention = None
        if weights is not None:
            attention = torch.tensor(weights, dtype=torch.float32)[: len(tokens) + 1][None, None]
        return Hypothesis(tokens=tokens, score=float(score), attention=attention)

    def _translation(self, line: str, ids: list[int], hypotheses: list[Hypothesis]) -> Translation:
        return Translation(
            source=line,
            source_pieces=self._source_pieces(ids),
            hypotheses=hypotheses,
            texts=[self.tgt_tokenizer.decode(h.tokens) for h in hypotheses],
            target_pieces=[
                [self.tgt_tokenizer.id_to_piece(i) for i in h.tokens] + [EOS_PIECE]
                for h in hypotheses
            ],
        )


def _side_tokenizer(folder: Path, meta: dict, side: str) -> Tokenizer:
    entry = (
        meta.get("tokenizers", {}).get(side) if isinstance(meta.get("tokenizers"), dict) else None
    )
    if not isinstance(entry, dict) or not all(
        isinstance(entry.get(k), str) for k in ("kind", "lang", "file")
    ):
        raise ExportError(f"{folder / META_FILE}: tokenizers.{side}: expected kind, lang and file")
    path = folder / Path(entry["file"]).name  # a name beside the model, never a path elsewhere
    try:
        data = read_bounded(path, limit=TOKENIZER_LIMIT)
    except StructuredFileError as error:
        raise ExportError(str(error)) from None
    try:
        return tokenizer_from_bytes(entry["kind"], data, entry["lang"])
    except Exception as error:  # sentencepiece and json raise many kinds on bad bytes
        raise ExportError(f"{path}: the tokeniser cannot be read ({_first_line(error)})") from error


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
