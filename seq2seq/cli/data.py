"""`seq2seq-data [prepare] data=<name> [data.key=value ...]`: prepare a corpus, print its summary.

A thin Hydra shell over `seq2seq.data.prepare.prepare`; `prepare` is the default command,
so the word is optional. The config is `configs/data_only.yaml` with one `configs/data/*.yaml`
(installed as the package `seq2seq.configs`; add your own with `--config-dir DIR`).

`seq2seq-data synth PAIRS OUTPUT [--data NAME|FILE.yaml] [--root DIR]` writes a synthetic
corpus of PAIRS pairs built from a data config's corpus (`seq2seq.data.synth`: every pair
repeated with its copy number appended to both sides), to measure preparation at scale;
prepare it with `data.url=file://<OUTPUT> data.member="" data.sha256=null data.name=...`.

Exit codes: 0 done; 2 an error about the input in one line, no traceback (exit code 2 as
`seq2seq-train`, the line on stderr as `seq2seq-evaluate`): a data config value, the corpus
file or its split, a download or a pinned hash, a vocabulary size the training text cannot
give. A key Hydra cannot compose (a misspelt one) is Hydra's own short error, exit code 1.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, NoReturn

import hydra
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from seq2seq.config import register_configs
from seq2seq.configs import SEARCH_PATH
from seq2seq.data.config import DataConfig
from seq2seq.data.corpus import CorpusError
from seq2seq.data.fetch import FetchError, fetch
from seq2seq.data.prepare import prepare
from seq2seq.data.presets import PresetError, data_preset, one_line
from seq2seq.data.synth import source_lines, write_synthetic

COMMAND = "prepare"
SYNTH_COMMAND = "synth"
PROGRAM = "seq2seq-data"
USER_ERROR_EXIT = 2
# Errors of prepare() about its input, reported in one line: the corpus file or its split
# (CorpusError, and the tokenizer's VocabularySizeError, a CorpusError), a download or a
# pinned hash (FetchError). A bad config value is caught in `data_config`.
PREPARE_ERRORS = (CorpusError, FetchError)


@hydra.main(version_base="1.3", config_path=SEARCH_PATH, config_name="data_only")
def prepare_app(cfg: DictConfig) -> None:
    data_cfg = data_config(cfg.data)
    try:
        prepared = prepare(data_cfg)
    except PREPARE_ERRORS as error:
        user_error(error)
    print(format_summary(prepared.summary, prepared.folder))


def data_config(node: DictConfig) -> DataConfig:
    """The composed `data` section as a checked DataConfig; a bad value is a user error
    (DataConfig's ValueError naming the key, or an interpolation OmegaConf cannot resolve)."""
    try:
        return DataConfig.from_mapping(OmegaConf.to_container(node, resolve=True))
    except (ValueError, OmegaConfBaseException) as error:
        user_error(error)


def user_error(error: Exception) -> NoReturn:
    """One line on stderr, then exit code 2: no traceback."""
    print(f"{PROGRAM}: {one_line(error)}", file=sys.stderr)
    raise SystemExit(USER_ERROR_EXIT) from error


def format_summary(summary: dict[str, Any], folder: Path | None = None) -> str:
    """The summary as a two-column table, keys written with spaces."""
    rows = [(key.replace("_", " "), _format_value(value)) for key, value in summary.items()]
    if folder is not None:
        rows.append(("folder", str(folder)))
    width = max(len(label) for label, _ in rows)
    rule = "-" * (width + 2 + max(len(value) for _, value in rows))
    lines = [rule, *(f"{label:<{width}}  {value}" for label, value in rows), rule]
    return "\n".join(lines)


def _format_value(value: Any) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def synth_main(argv: list[str]) -> None:
    """`seq2seq-data synth PAIRS OUTPUT [--data NAME] [--root DIR]` (module docstring)."""
    parser = argparse.ArgumentParser(
        prog=f"{PROGRAM} {SYNTH_COMMAND}",
        description="Write a synthetic corpus: the corpus of a data config repeated, each "
        "copy's number appended to both sentences, so that nothing deduplicates.",
    )
    parser.add_argument("pairs", type=int, help="number of pairs to write")
    parser.add_argument("output", type=Path, help="the tab-separated file to write")
    parser.add_argument("--data", default="tatoeba_zh_en", help="data config of the source")
    parser.add_argument("--root", default="data", help="where raw/ is (data.root)")
    args = parser.parse_args(argv)
    if args.pairs <= 0:
        parser.error(f"PAIRS must be > 0, got {args.pairs}")
    try:
        cfg = DataConfig.from_mapping({**data_preset(args.data), "root": args.root})
        if cfg.kind != "parallel":
            raise PresetError(f"--data {args.data}: a corpus config is needed, not kind={cfg.kind}")
        path = fetch(cfg.url, cfg.member or None, root=Path(cfg.root), sha256=cfg.sha256)
        lines = source_lines(
            path, cfg.member or None, cfg.src_column, cfg.tgt_column, cfg.num_columns
        )
        write_synthetic(args.output, lines, args.pairs, cfg.src_column, cfg.tgt_column)
    except (ValueError, FetchError, OSError) as error:  # PresetError, CorpusError: ValueErrors
        user_error(error)
    print(
        f"wrote {args.pairs:,} pairs ({len(lines):,} source pairs, numbered copies) to {args.output}"
    )


def main() -> None:
    """Console entry point: `synth`, or `prepare` (the word optional) under Hydra."""
    if len(sys.argv) > 1 and sys.argv[1] == SYNTH_COMMAND:
        synth_main(sys.argv[2:])
        return
    if len(sys.argv) > 1 and sys.argv[1] == COMMAND:
        del sys.argv[1]
    register_configs(["data"])  # the data schema only: no model is imported
    prepare_app()


if __name__ == "__main__":
    main()
