"""A trained model ready to translate text: everything comes from one checkpoint.

`Translator.load(path)` rebuilds the model from the config stored in the checkpoint, after
`seq2seq.config.stored.validated_config` has checked it against the project's schemas
and allow-list (nothing in it is built, called or interpolated beyond the registered
classes: the project's own and those of plugins the user imported), the tokenisers from their stored bytes, and the attention layer and head that
training chose on the valid gold pairs (`alignment_choice`, checked to exist in the model;
`seq2seq.align.defaults` turns it into alignment settings). A checkpoint trained with
plugins is refused, in one line naming them, unless this process has imported the same
plugins (`seq2seq.plugins.import_plugins`: the commands' `--plugins`), so that the classes
that may be built are only ever those the user chose. Every tool that loads a checkpoint
(`seq2seq-translate`, `seq2seq-evaluate`, `scripts/bench.py`,
`scripts/compare_alignments.py`) goes through it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from seq2seq.checkpoint import (
    ALIGNMENT_CHOICE_KEY,
    AlignmentChoice,
    CheckpointError,
    check_plugins,
    checked_alignment_choice,
    load_checkpoint,
    plugins_hint,
)
from seq2seq.config.build import ConfigError, build_model, count_parameters
from seq2seq.config.search_settings import SearchSettings
from seq2seq.config.sizing import Vocabulary, check_state_shapes
from seq2seq.config.stored import config_as_data, validated_config
from seq2seq.data.batching import collate
from seq2seq.data.script_check import script_problem
from seq2seq.data.tokenizer import SymbolTokenizer, Tokenizer, tokenizer_from_bytes
from seq2seq.quantization import check_quantization, quantized
from seq2seq.search import Hypothesis
from seq2seq.search.batched import translate_ids
from seq2seq.special_tokens import UNK_ID

log = logging.getLogger(__name__)


@dataclass
class Translation:
    """One input line and its n-best outputs. A source longer than the model's limit is cut
    to it (`Translator.max_source_len`): `pieces_given` counts the pieces before the cut,
    `pieces_kept` those the model read, and `truncated` says whether any were left out."""

    source: str
    source_pieces: list[str]  # what the model saw, EOS included
    hypotheses: list[Hypothesis]
    texts: list[str]  # detokenised, one per hypothesis
    target_pieces: list[list[str]]  # per hypothesis, EOS included
    pieces_given: int | None = None  # the source's pieces before the cut; None: not counted

    @property
    def text(self) -> str:
        return self.texts[0] if self.texts else ""

    @property
    def pieces_kept(self) -> int:
        """The source pieces the model read, EOS not counted."""
        return len(self.source_pieces) - 1

    @property
    def truncated(self) -> bool:
        """True when the source was cut to the model's limit."""
        return self.pieces_given is not None and self.pieces_given > self.pieces_kept


def truncation_note(translation: Translation) -> str | None:
    """The cut in words that follow `line 3: `; None when the source was not cut."""
    if not translation.truncated:
        return None
    kept = translation.pieces_kept
    return (
        f"{translation.pieces_given} source pieces, truncated to the model's limit of {kept}: "
        f"only the first {kept} were translated"
    )


def script_note(translation: Translation, src_tokenizer: Tokenizer) -> str | None:
    """A source hardly in the script of the model's source language, in words that follow
    `line 3: ` (`seq2seq.data.script_check`); None when it is, and for the toy tasks'
    symbol tokeniser, whose symbols are no language."""
    if src_tokenizer.kind == SymbolTokenizer.kind:
        return None
    return script_problem(translation.source, src_tokenizer.lang)


def unknown_characters(source: str, src_tokenizer: Tokenizer) -> list[str]:
    """The characters of `source` that the source subword model can only read as <unk>
    (outside its vocabulary, and no byte fallback), each once, in order of appearance."""
    if src_tokenizer.kind == SymbolTokenizer.kind or UNK_ID not in src_tokenizer.encode(source):
        return []
    distinct = dict.fromkeys(char for char in source if not char.isspace())
    return [char for char in distinct if UNK_ID in src_tokenizer.encode(char)]


def unknown_note(translation: Translation, src_tokenizer: Tokenizer) -> str | None:
    """The characters the model could not read (`unknown_characters`), in words that follow
    `line 3: `; None when it read them all."""
    unknown = unknown_characters(translation.source, src_tokenizer)
    if not unknown:
        return None
    count = f"{len(unknown)} character{'s' if len(unknown) > 1 else ''}"
    return (
        f"{count} outside the model's source vocabulary, read as <unk>: {' '.join(unknown)} "
        "(the translation may leave them out)"
    )


def reading_note(translation: Translation, src_tokenizer: Tokenizer) -> str | None:
    """A source that may be in another language (`script_note`), else one with characters
    the model cannot read (`unknown_note`): most characters of another script are unknown,
    and the first note already says why."""
    return script_note(translation, src_tokenizer) or unknown_note(translation, src_tokenizer)


def input_notes(translation: Translation, src_tokenizer: Tokenizer) -> list[str]:
    """What the person who wrote the source should know before reading its translation,
    one clause each (to follow `line 3: `): its cut to the model's limit
    (`truncation_note`), and a source in another language or with characters the model
    cannot read (`reading_note`)."""
    notes = [truncation_note(translation), reading_note(translation, src_tokenizer)]
    return [note for note in notes if note is not None]


def stored_tokenizers(saved: Any, path: str | Path) -> dict[str, Tokenizer]:
    """The source and target tokenisers rebuilt from their stored bytes."""
    if not isinstance(saved, dict) or set(saved) != {"src", "tgt"}:
        raise CheckpointError(f"{path}: tokenizers: expected the entries src and tgt")
    tokenizers = {}
    for side, entry in saved.items():
        try:
            tokenizers[side] = tokenizer_from_bytes(entry["kind"], entry["model"], entry["lang"])
        except Exception as error:  # sentencepiece and json raise many kinds on bad bytes
            message = (
                str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            )
            raise CheckpointError(
                f"{path}: tokenizers.{side}: the stored tokeniser cannot be read ({message})"
            ) from error
    return tokenizers


def check_stored_weights(
    config: Any, tokenizers: dict[str, Tokenizer], state: Any, path: str | Path
) -> None:
    """The config's model, built on the meta device (no memory), has exactly the stored
    weights' names and shapes; else CheckpointError naming the first that differs."""
    vocab = Vocabulary(tokenizers["src"].vocab_size, tokenizers["tgt"].vocab_size)
    _as_checkpoint_error(lambda: check_state_shapes(config, vocab, state), path)


def model_from_config(config: Any, tokenizers: dict[str, Tokenizer], path: str | Path):
    """`build_model` on a validated config; CheckpointError when it cannot be built."""
    vocab = (tokenizers["src"].vocab_size, tokenizers["tgt"].vocab_size)
    return _as_checkpoint_error(lambda: build_model(config, *vocab), path)


def _as_checkpoint_error(build: Callable[[], Any], path: str | Path) -> Any:
    """`build()`, its config errors and construction errors as one CheckpointError."""
    try:
        return build()
    except ConfigError as error:
        raise CheckpointError(f"{path}: {error}") from error
    except (RuntimeError, TypeError, ValueError) as error:
        raise CheckpointError(
            f"{path}: the model cannot be built from its config: {error}"
        ) from error


@torch.no_grad()
def attention_shape(model: torch.nn.Module, device: torch.device) -> tuple[int, int] | None:
    """(layers, heads) of the model's cross-attention, read from one teacher-forced pass
    over a one-piece pair (a model in eval mode: no dropout draws); None when the model has
    no attention weights."""
    batch = collate([([UNK_ID], [UNK_ID])], [0]).to(device)
    _, attention = model(batch.src, batch.src_mask, batch.tgt_in, need_weights=True)
    return None if attention is None else (attention.size(1), attention.size(2))


def stored_alignment_choice(
    payload: dict, model, device, path: str | Path
) -> AlignmentChoice | None:
    """The checkpoint's `alignment_choice`, checked against the model's attention; None
    when it has none (a checkpoint from before the key, or without a gold set)."""
    value = payload.get(ALIGNMENT_CHOICE_KEY)
    if value is None:
        return None
    try:
        return checked_alignment_choice(value, attention_shape(model, device))
    except CheckpointError as error:
        raise CheckpointError(f"{path}: {error}") from error


class Translator:
    def __init__(
        self,
        model,
        src_tokenizer: Tokenizer,
        tgt_tokenizer: Tokenizer,
        config,
        device,
        alignment_choice: AlignmentChoice | None = None,
        quantization: str = "float32",
        run_config: Mapping[str, Any] | None = None,
    ):
        self.model, self.config, self.device = model, config, device
        # the config as plain data, converted once at `load`: what titles and marks read
        self.run_config: Mapping[str, Any] = {} if run_config is None else run_config
        self.src_tokenizer, self.tgt_tokenizer = src_tokenizer, tgt_tokenizer
        self.max_source_len = int(config.data.max_len)
        self.alignment_choice = alignment_choice  # the valid-gold choice training stored
        self.quantization = quantization  # "int8": `model` is a dynamically quantised copy
        self.parameters = count_parameters(model)  # before quantisation hides the weights

    def attention_shape(self) -> tuple[int, int] | None:
        """(layers, heads) of the model's cross-attention; None without attention."""
        return attention_shape(self.model, self.device)

    @classmethod
    def load(
        cls, path: str | Path, device: str | torch.device = "cpu", quantization: str = "float32"
    ) -> Translator:
        """The checkpoint's model and tokenisers; CheckpointError (one line naming the file
        and the offending key) for anything that cannot be used as it is. `quantization` int8
        decodes with a dynamically quantised copy of the model (`seq2seq.quantization`,
        CPU only; QuantizationError otherwise)."""
        device = torch.device(device)
        check_quantization(quantization, device)
        payload = load_checkpoint(path, map_location=device)
        check_plugins(payload, path, plugins_hint("--plugins"))  # imported by the user only
        try:
            config = validated_config(payload["config"])
        except ConfigError as error:
            raise CheckpointError(f"{path}: {error}") from error
        tokenizers = stored_tokenizers(payload["tokenizers"], path)
        check_stored_weights(config, tokenizers, payload["model"], path)
        model = model_from_config(config, tokenizers, path)
        try:
            model.load_state_dict(payload["model"])
        except (RuntimeError, TypeError, AttributeError) as error:
            raise CheckpointError(f"{path}: weights do not fit its own config: {error}") from error
        model.to(device).eval()
        choice = stored_alignment_choice(payload, model, device, path)
        translator = cls(model, tokenizers["src"], tokenizers["tgt"], config, device, choice,
                         run_config=config_as_data(config))  # fmt: skip
        translator.model = quantized(model, quantization, device)
        translator.quantization = quantization
        return translator

    def cut_to_limit(self, ids: list[int], line_number: int) -> list[int]:
        """The source pieces the model reads: all of them, or the first `max_source_len`
        (one warning naming the line and both counts; `Translation.truncated` says it too)."""
        if len(ids) > self.max_source_len:
            log.warning(
                "line %d: %d source pieces, truncated to the model's limit of %d",
                line_number, len(ids), self.max_source_len,
            )  # fmt: skip
            ids = ids[: self.max_source_len]
        return ids

    def translate(
        self,
        lines: Sequence[str],
        settings: SearchSettings,
        need_weights: bool = False,
        *,
        progress: bool = False,
    ) -> list[Translation]:
        """Translate lines in order; an empty line gives an empty translation. Each
        translation counts its source's pieces (`Translation.truncated`). With `progress`,
        more lines than one batch show a bar in a terminal or a notebook (`translate_ids`)."""
        given = [self.src_tokenizer.encode(line) for line in lines]
        sources = [self.cut_to_limit(ids, number) for number, ids in enumerate(given, 1)]
        todo = [i for i, ids in enumerate(sources) if ids]
        nbest = translate_ids(
            self.model,
            [sources[i] for i in todo],
            settings,
            self.device,
            need_weights,
            progress=progress,
        )
        found = dict(zip(todo, nbest))
        return [
            self._translation(line, sources[i], found.get(i, []), len(given[i]))
            for i, line in enumerate(lines)
        ]

    def _translation(
        self, line: str, ids: list[int], hypotheses: list[Hypothesis], pieces_given: int
    ) -> Translation:
        src_pieces = [self.src_tokenizer.id_to_piece(i) for i in ids] + ["</s>"]
        return Translation(
            source=line,
            source_pieces=src_pieces,
            hypotheses=hypotheses,
            texts=[self.tgt_tokenizer.decode(h.tokens) for h in hypotheses],
            target_pieces=[
                [self.tgt_tokenizer.id_to_piece(i) for i in h.tokens] + ["</s>"] for h in hypotheses
            ],
            pieces_given=pieces_given,
        )
