"""`seq2seq-data [prepare] data=<name> [data.key=value ...]`: prepare a corpus, print its summary.

A thin Hydra shell over `seq2seq.data.prepare.prepare`; `prepare` is the only command, so
the word is optional. The config is `configs/data_only.yaml` with one `configs/data/*.yaml`
(installed as the package `seq2seq.configs`; add your own with `--config-dir DIR`).

Exit codes: 0 done; 2 an error about the input in one line, no traceback (exit code 2 as
`seq2seq-train`, the line on stderr as `seq2seq-evaluate`): a data config value, the corpus
file or its split, a download or a pinned hash, a vocabulary size the training text cannot
give. A key Hydra cannot compose (a misspelt one) is Hydra's own short error, exit code 1.
"""

from __future__ import annotations

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
from seq2seq.data.fetch import FetchError
from seq2seq.data.prepare import prepare
from seq2seq.data.presets import one_line

COMMAND = "prepare"
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


def main() -> None:
    """Console entry point: drop the optional `prepare` word, register schemas, run Hydra."""
    if len(sys.argv) > 1 and sys.argv[1] == COMMAND:
        del sys.argv[1]
    register_configs(["data"])  # the data schema only: no model is imported
    prepare_app()


if __name__ == "__main__":
    main()
