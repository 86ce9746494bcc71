"""A checkpoint loaded from Python (`load`, `Model`), its translations and their scores
(`evaluate`): the commands' own checks and functions (`seq2seq.cli`), called."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from seq2seq.align.model_aer import GoldAer, checkpoint_aer
from seq2seq.api.results import Result
from seq2seq.checkpoint import CheckpointError
from seq2seq.cli.checked_options import check_device
from seq2seq.cli.common import one_line, settings_from
from seq2seq.cli.evaluate import read_pairs, scored_translations
from seq2seq.cli.translate import all_links
from seq2seq.config.build import ConfigError
from seq2seq.config.search_settings import SearchSettings, SearchSettingsError
from seq2seq.config.value_checks import threads_problem
from seq2seq.output_folders import check_output_file, write_output_file
from seq2seq.plugins import PluginError, import_plugins
from seq2seq.quantization import QuantizationError
from seq2seq.runs.assemble import select_device
from seq2seq.search.translator import Translation, Translator, input_notes
from seq2seq.visualise.heatmap import run_title

# The search settings' defaults (`SearchSettings`), which `Model.translate` and `evaluate`
# show in their signatures; `translate` searches greedily unless told otherwise.
SEARCH_DEFAULTS = SearchSettings()
# The keyword of `Model.translate` and `evaluate` for each `SearchSettings` field.
SEARCH_KEYWORDS = {"beam_size": "beam", "n_best": "n_best", "length_penalty": "length_penalty",
                   "max_len_a": "max_len_a", "max_len_b": "max_len_b",
                   "batch_size": "batch_size"}  # fmt: skip


def search_settings(
    beam: int = SEARCH_DEFAULTS.beam_size,
    n_best: int = SEARCH_DEFAULTS.n_best,
    length_penalty: float = SEARCH_DEFAULTS.length_penalty,
    max_len_a: float = SEARCH_DEFAULTS.max_len_a,
    max_len_b: int = SEARCH_DEFAULTS.max_len_b,
    batch_size: int = SEARCH_DEFAULTS.batch_size,
) -> SearchSettings:
    """The `SearchSettings` of the API's keywords, built by the commands' own
    `settings_from` (one option per field there, one keyword here).

    Raises SearchSettingsError naming the keyword (`beam must be an integer of at least 1,
    got 0`) for a value the commands would refuse."""
    given = {"beam": beam, "n_best": n_best, "length_penalty": length_penalty,
             "max_len_a": max_len_a, "max_len_b": max_len_b, "batch_size": batch_size}  # fmt: skip
    fields = {name: given[keyword] for name, keyword in SEARCH_KEYWORDS.items()}
    try:
        return settings_from(argparse.Namespace(**fields))
    except SearchSettingsError as error:
        raise SearchSettingsError(SEARCH_KEYWORDS[error.field], error.problem) from None


class Model:
    """A checkpoint loaded for translating (`load`); `translator` is the project's
    `Translator`, `path` the checkpoint file."""

    def __init__(self, translator: Translator, path: Path) -> None:
        self.translator = translator
        self.path = path

    @property
    def title(self) -> str:
        """What distinguishes the model: `encoder=transformer · decoder=transformer · ...`."""
        return run_title(self.translator.run_config)

    @property
    def languages(self) -> tuple[str, str]:
        """(source language, target language) of the checkpoint's data."""
        data = self.translator.run_config["data"]
        return data["src_lang"], data["tgt_lang"]

    def translate(
        self,
        text_or_texts: str | Sequence[str],
        *,
        beam: int = 1,
        n_best: int = 1,
        length_penalty: float = SEARCH_DEFAULTS.length_penalty,
        max_len_a: float = SEARCH_DEFAULTS.max_len_a,
        max_len_b: int = SEARCH_DEFAULTS.max_len_b,
        batch_size: int = SEARCH_DEFAULTS.batch_size,
        progress: bool = True,
    ) -> Result | list[Result]:
        """Translate one text (a `Result`) or a list of texts (a list of `Result`s, in
        order), recording the attention.

        The keywords are seq2seq-translate's search options (`--beam-size` is `beam`;
        greedy search by default): `n_best` outputs per text (at most `beam`), the GNMT
        `length_penalty`, outputs of at most `max_len_a` · (source pieces) + `max_len_b`
        pieces, `batch_size` texts per decoding batch. An empty text gives an empty
        result; a text longer than the model's limit is cut to it (its `notes` say so).
        Texts of more than one batch show a progress bar in a notebook or a terminal
        (`seq2seq.progress_bars`; `progress=False` hides it).

        Raises SearchSettingsError naming the keyword of a value out of range, TypeError
        for something other than a str or a list of them."""
        texts = checked_texts(text_or_texts)
        settings = search_settings(beam, n_best, length_penalty, max_len_a, max_len_b, batch_size)
        translations = self.translator.translate(
            texts, settings, need_weights=True, progress=progress
        )
        links = best_links(self.translator, translations)
        tokenizer = self.translator.src_tokenizer
        results = [
            Result(translation, self.translator, found, input_notes(translation, tokenizer))
            for translation, found in zip(translations, links)
        ]
        return results[0] if isinstance(text_or_texts, str) else results

    def gold_aer(self) -> GoldAer | None:
        """The model's alignment error rate on the project's hand-aligned test pairs of its
        language pair (`seq2seq.align.model_aer.checkpoint_aer`): `best` for the head
        chosen on the valid pairs (`best_name` says which), `head_mean` for the last
        layer's head mean (`.aer` of each: lower is better). None when the pair has no
        gold set or the model no attention."""
        return checkpoint_aer(self.path, str(self.translator.device))

    def __repr__(self) -> str:
        source, target = self.languages
        parameters = f"{self.translator.parameters:,} parameters"
        return f"Model({str(self.path)!r}, {source}→{target}, {self.title}, {parameters})"


def checked_texts(text_or_texts: Any) -> list[str]:
    """[text] for a str, the list for a list or tuple of str; TypeError otherwise."""
    if isinstance(text_or_texts, str):
        return [text_or_texts]
    if not isinstance(text_or_texts, (list, tuple)):
        raise TypeError(
            f"translate takes a str or a list of str, got {type(text_or_texts).__name__}"
        )
    for index, text in enumerate(text_or_texts):
        if not isinstance(text, str):
            raise TypeError(f"texts[{index}]: a str was expected, got {type(text).__name__}")
    return list(text_or_texts)


def best_links(
    translator: Translator, translations: Sequence[Translation]
) -> list[list[tuple[int, int]] | None]:
    """The word links of each translation's best output, read as seq2seq-translate
    `--alignments` reads them (`all_links`); None for each when the model has no attention."""
    if translator.attention_shape() is None:  # attention=none: no weights, no links
        return [None] * len(translations)
    found, _ = all_links(translator, translations)
    return [sorted(outputs[0].sure) for outputs in found]


def load(
    path: str | Path,
    *,
    device: str = "cpu",
    threads: int | None = None,
    plugins: Sequence[str] = (),
    quantization: str = "float32",
) -> Model:
    """Load a checkpoint written by seq2seq-train (or `train`) for translating.

    Arguments: `device` cpu, cuda, cuda:N or auto (CUDA when there is a GPU);
    `threads` the torch threads of this process (None: torch's default, every core);
    `plugins` the plugins a checkpoint trained with plugins needs (module names, .py
    files or folders, relative to the current folder; as `--plugins`); `quantization`
    int8 to decode with dynamically quantised weights (CPU only).

    Returns a `Model`. Raises what seq2seq-translate reports in one line: CheckpointError
    (a missing, broken or hostile checkpoint, naming the file and the key), PluginError,
    QuantizationError; ValueError for a device or thread count this machine lacks."""
    chosen = checked_device(device)
    set_threads(threads)
    try:
        import_plugins(list(plugins))
        return Model(Translator.load(path, chosen, quantization), Path(path))
    except (CheckpointError, ConfigError, PluginError, QuantizationError) as error:
        error.args = (one_line(error),)  # the line seq2seq-translate prints
        raise


def checked_device(name: str) -> str:
    """The device `name` names, `auto` resolved as training resolves it; ValueError, as
    the commands' `--device` check words it, for one this machine lacks."""
    problem = check_device(name, auto=True)
    if problem is not None:
        raise ValueError(problem.replace("--device ", "device ", 1))
    return str(select_device(name))


def set_threads(threads: int | None) -> None:
    """torch's thread count (for the whole process), checked as `--threads` is."""
    if threads is None:
        return
    problem = threads_problem(threads, all_cores=False)
    if problem is not None:
        raise ValueError(f"threads {problem}, got {threads!r}")
    torch.set_num_threads(threads)


def evaluate(
    model: Model | str | Path,
    source_file: str | Path,
    reference_file: str | Path,
    *,
    beam: int = SEARCH_DEFAULTS.beam_size,
    length_penalty: float = SEARCH_DEFAULTS.length_penalty,
    max_len_a: float = SEARCH_DEFAULTS.max_len_a,
    max_len_b: int = SEARCH_DEFAULTS.max_len_b,
    batch_size: int = SEARCH_DEFAULTS.batch_size,
    ter: bool = False,
    output: str | Path | None = None,
) -> dict[str, float | str]:
    """Translate a source file and score it against a reference file, as
    `seq2seq-evaluate CHECKPOINT --src SOURCE --ref REFERENCE` does (its search defaults
    too: beam 5).

    Arguments: `model`, a `Model` or a checkpoint path (loaded on the CPU); the two
    UTF-8 files, one sentence a line, of equal length; the search keywords of
    `Model.translate`; `ter` to add TER; `output` a file for the translations.

    Returns the scores as `seq2seq-evaluate --json` prints them: `bleu`, `chrf` (and
    `ter`) on a 0-100 scale, each with its sacrebleu signature (`bleu_signature`, ...).
    Raises InputError naming the file and line that cannot be read or the lengths that
    differ, OutputPlaceError for an output file that cannot be written,
    SearchSettingsError, and `load`'s errors."""
    settings = search_settings(beam, 1, length_penalty, max_len_a, max_len_b, batch_size)
    if output is not None:
        check_output_file(output, "output")  # before any work
    sources, references = read_pairs(
        Path(source_file), Path(reference_file), ("source_file", "reference_file")
    )
    translator = (model if isinstance(model, Model) else load(model)).translator
    hypotheses, scores = scored_translations(translator, sources, references, settings, ter)
    if output is not None:
        write_output_file(output, "\n".join(hypotheses) + "\n", "output")
    return scores
