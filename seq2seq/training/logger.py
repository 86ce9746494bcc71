"""TensorBoard logging: scalars, text samples, hyper-parameters, images.

All tags live in one event file per run folder, so TensorBoard's SCALARS, TEXT, IMAGES
and HPARAMS views all read the same run.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from torch.utils.tensorboard import SummaryWriter
from torch.utils.tensorboard.summary import hparams as hparams_summary

# The final metrics shown in the HPARAMS view, next to each run's hyper-parameters.
HPARAM_METRICS = ("hparams/valid_bleu", "hparams/test_bleu", "hparams/test_chrf")


class RunLogger:
    """Writes to `<run_dir>/tensorboard`; a no-op when disabled."""

    def __init__(self, run_dir: Path, enabled: bool = True):
        self.writer = SummaryWriter(str(run_dir / "tensorboard")) if enabled else None

    @property
    def enabled(self) -> bool:
        """Whether anything logged is written (a hook may skip drawing an image otherwise)."""
        return self.writer is not None

    def scalars(self, values: Mapping[str, float], step: int) -> None:
        if self.writer is None:
            return
        for tag, value in values.items():
            self.writer.add_scalar(tag, value, step)

    def text(self, tag: str, markdown: str, step: int) -> None:
        if self.writer is not None:
            self.writer.add_text(tag, markdown, step)

    def image(self, tag: str, rgb: np.ndarray, step: int) -> None:
        """`rgb`: (height, width, 3) uint8."""
        if self.writer is not None:
            self.writer.add_image(tag, rgb, step, dataformats="HWC")

    def hparams(self, params: Mapping[str, Any], metrics: Mapping[str, float], step: int) -> None:
        """Record the run's hyper-parameters with its final metrics (HPARAMS view)."""
        if self.writer is None:
            return
        values = {key: _hparam_value(value) for key, value in params.items()}
        experiment, start, end = hparams_summary(values, dict(metrics))
        file_writer = self.writer._get_file_writer()
        for summary in (experiment, start, end):
            file_writer.add_summary(summary)
        self.scalars(metrics, step)

    def flush(self) -> None:
        if self.writer is not None:
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def _hparam_value(value: Any) -> Any:
    if isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def sample_table(rows: list[tuple[str, str, str]]) -> str:
    """Markdown table of (source, reference, hypothesis) for the TEXT view."""
    lines = ["| source | reference | hypothesis |", "|---|---|---|"]
    for source, reference, hypothesis in rows:
        cells = [cell.replace("|", "\\|") for cell in (source, reference, hypothesis)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
