"""`seq2seq-evaluate`: translate and score with sacrebleu, from a checkpoint.

    seq2seq-evaluate CHECKPOINT                       # the test split of its corpus
    seq2seq-evaluate CHECKPOINT --split valid --data-root data
    seq2seq-evaluate CHECKPOINT --data tatoeba_zh_en  # name the corpus config yourself
    seq2seq-evaluate CHECKPOINT --src test.zh --ref test.en -o test.hyp

BLEU uses sacrebleu's `zh` tokeniser when the target is Chinese and `13a` otherwise,
through the same function as validation (`seq2seq.metrics.corpus_scores`).

Which data a split comes from is the user's choice, not the checkpoint's: a checkpoint may
come from someone else, and its data section could name any URL to download and any
folder to write to. So in split mode the corpus is described by one of the project's own
data configs (`configs/data/<NAME>.yaml`: `--data NAME`, or a YAML file of your own: `--data FILE.yaml`, by default the config whose name
is the checkpoint's `data.name`, refused when there is none), its files go below
`--data-root` (default `data`, relative to the current folder), and from the checkpoint
only the validated numbers and choices that decide the split and the subwords are taken
(seed, split sizes, `max_pairs`, vocabulary sizes and model type, toy sizes: see
`CHECKPOINT_DATA_FIELDS`), so that the evaluated split is the one the model was trained
beside. Its URL, member, languages, columns and root are never used; the languages of the
config must equal the checkpoint's, and the tokenisers prepared from the data must equal
the ones stored in the checkpoint, else one clear error (exit code 2).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping, Sequence
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from seq2seq.build import plain
from seq2seq.configs import config_files
from seq2seq.data.config import DataConfig
from seq2seq.data.corpus import CorpusError
from seq2seq.data.fetch import FetchError
from seq2seq.data.prepare import prepare
from seq2seq.inference import Translator
from seq2seq.metrics import corpus_scores
from seq2seq.translate import (
    InputError,
    OneLineParser,
    checked_settings,
    load_translator,
    one_line,
    read_text_lines,
    search_arguments,
)

CONFIG_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
# Taken from the checkpoint in split mode: they decide which pairs fall in which split and
# how the subwords are cut. Everything else in the data section is the user's.
CHECKPOINT_DATA_FIELDS = (
    "traditional_to_simplified",
    "max_malformed_share",
    "max_pairs",
    "seed",
    "valid_size",
    "test_size",
    "joint_vocab",
    "src_vocab_size",
    "tgt_vocab_size",
    "model_type",
    "max_tokens",
    "max_len",
    "toy_vocab_size",
    "toy_min_len",
    "toy_max_len",
    "toy_train_size",
    "toy_valid_size",
    "toy_test_size",
)


class EvaluationError(ValueError):
    """The data to evaluate on cannot be found or does not fit the checkpoint."""


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="seq2seq-evaluate", description=__doc__.split("\n")[0])
    search_arguments(parser)
    parser.add_argument("--split", choices=("valid", "test"), default="test")
    parser.add_argument("--data", help="data config of the split (configs/data/NAME.yaml; "
                        "default: the one named as the checkpoint's data.name)")  # fmt: skip
    parser.add_argument("--data-root", type=Path, default=Path("data"),
                        help="folder for raw/ and prepared/ (default: data)")  # fmt: skip
    parser.add_argument("--src", type=Path, help="source file (with --ref) instead of a split")
    parser.add_argument("--ref", type=Path, help="reference file, one line per source line")
    parser.add_argument(
        "-o", "--output", type=Path, help="hypotheses file (default: beside the checkpoint)"
    )
    parser.add_argument("--ter", action="store_true", help="also report TER")
    parser.add_argument("--json", action="store_true", help="print the scores as JSON")
    return parser


def data_preset(name: str) -> dict[str, Any]:
    """The values of a data config: a YAML file of the user's (`--data my/corpus.yaml`), or
    one of the installed `configs/data/*.yaml` called `name` (file stem, or its `name:`)."""
    if name.endswith(".yaml") and Path(name).is_file():
        return _load_preset(Path(name))
    if not CONFIG_NAME.fullmatch(name):
        raise EvaluationError(f"--data: {name!r} is not a data config name")
    for entry in config_files("data"):
        values = _load_preset(entry)
        if Path(entry.name).stem == name or values.get("name") == name:
            return values
    raise EvaluationError(
        f"--data: no data config named {name!r} among the installed configs/data/*.yaml; "
        "name one with --data NAME or --data FILE.yaml, or evaluate files with --src and --ref"
    )


def _load_preset(path: Path | Traversable) -> dict[str, Any]:
    try:
        node = OmegaConf.create(path.read_text(encoding="utf-8"))
        node.pop("defaults", None)
        merged = OmegaConf.merge(OmegaConf.structured(DataConfig), node)
        return OmegaConf.to_container(merged, resolve=True)
    except OmegaConfBaseException as error:
        raise EvaluationError(f"--data: {path}: {one_line(error)}") from error


def split_data_config(stored: Mapping[str, Any], name: str | None, root: Path) -> DataConfig:
    """The user's data config for evaluating a split of the checkpoint's corpus."""
    values = data_preset(name or str(stored["name"]))
    for key in ("src_lang", "tgt_lang"):
        if values[key] != stored[key]:
            raise EvaluationError(
                f"--data: the config's {key} is {values[key]!r}, the checkpoint's is "
                f"{stored[key]!r}"
            )
    values.update({key: stored[key] for key in CHECKPOINT_DATA_FIELDS if key in stored})
    values["root"] = str(root)
    try:
        return DataConfig.from_mapping(values)
    except ValueError as error:
        raise EvaluationError(str(error)) from error


def split_pairs(args: argparse.Namespace, translator: Translator) -> tuple[list[str], list[str]]:
    """Source and reference lines of a split, prepared from the user's data config."""
    config = split_data_config(plain(translator.config.data), args.data, args.data_root)
    try:
        data = prepare(config)
    except (FetchError, CorpusError, ValueError, OSError) as error:
        raise EvaluationError(f"preparing the data {config.name!r}: {one_line(error)}") from error
    for side in ("src", "tgt"):
        prepared = getattr(data, f"{side}_tokenizer").to_bytes()
        if prepared != getattr(translator, f"{side}_tokenizer").to_bytes():
            raise EvaluationError(
                f"the {side} tokeniser prepared from the data config {config.name!r} differs "
                "from the checkpoint's: check --data and --data-root"
            )
    split = getattr(data, args.split)
    return list(split.src_lines), list(split.tgt_lines)


def file_pairs(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """Source and reference lines from --src and --ref, checked to have equal lengths."""
    sources = read_text_lines(args.src, "--src")
    references = read_text_lines(args.ref, "--ref")
    if len(sources) != len(references):
        raise InputError(
            f"--src {args.src} has {len(sources)} lines, --ref {args.ref} has {len(references)}"
        )
    return sources, references


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    settings = checked_settings(parser, args)
    if (args.src is None) != (args.ref is None):
        parser.error("--src and --ref go together")
    try:
        pair = file_pairs(args) if args.src is not None else None
    except InputError as error:
        parser.error(str(error))
    translator = load_translator(args, "seq2seq-evaluate")
    if translator is None:
        return 2
    try:
        sources, references = pair or split_pairs(args, translator)
    except EvaluationError as error:
        print(f"seq2seq-evaluate: {one_line(error)}", file=sys.stderr)
        return 2
    translations = translator.translate(sources, settings)
    hypotheses = [translation.text for translation in translations]
    output = args.output or args.checkpoint.with_suffix(
        f".{args.src and 'files' or args.split}.hyp"
    )
    try:
        output.write_text("\n".join(hypotheses) + "\n", encoding="utf-8")
    except OSError as error:
        print(
            f"seq2seq-evaluate: cannot write {output}: {error.strerror or error}", file=sys.stderr
        )
        return 2
    scores = corpus_scores(hypotheses, references, translator.tgt_tokenizer.lang, ter=args.ter)
    if args.json:
        print(json.dumps(scores, ensure_ascii=False, indent=2))
    else:
        for name in ("bleu", "chrf", "ter"):
            if name in scores:
                print(f"{name.upper():5s} {scores[name]:6.2f}  {scores[name + '_signature']}")
        print(f"hypotheses: {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
