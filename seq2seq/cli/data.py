"""`seq2seq-data [prepare] data=<name> [data.key=value ...]`: prepare a corpus and print its summary.

A thin Hydra shell over `seq2seq.data.prepare.prepare`; `prepare` is the only command, so
the word is optional. The config is `configs/data_only.yaml` with one `configs/data/*.yaml`
(installed as the package `seq2seq.configs`; add your own with `--config-dir DIR`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from seq2seq.config import register_configs
from seq2seq.configs import SEARCH_PATH
from seq2seq.data.config import DataConfig
from seq2seq.data.prepare import prepare

COMMAND = "prepare"


@hydra.main(version_base="1.3", config_path=SEARCH_PATH, config_name="data_only")
def prepare_app(cfg: DictConfig) -> None:
    data_cfg = DataConfig.from_mapping(OmegaConf.to_container(cfg.data, resolve=True))
    prepared = prepare(data_cfg)
    print(format_summary(prepared.summary, prepared.folder))


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
