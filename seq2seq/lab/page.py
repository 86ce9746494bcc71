"""The lab's pages: one Markdown page per experiment, and the index of them all, in
English and in Chinese.

`make lab` writes `docs/lab/NAME.md` from what the experiment says of itself (its title and
claim) and what it found (the summary, the table, the figures), with the command, the run
time and the machine it ran on, so that a page always shows the figures of the last run;
and `docs/lab/NAME.zh.md`, the same page in Chinese (`Experiment.zh`), its summary written
from the numbers the finding recorded. Both are made from the run's record
(`NAME/finding.json`), so `seq2seq-lab --pages` rewrites them without running anything. The
pages do not link to each other: the site's language switch goes from one to the other
(mkdocs-static-i18n, `NAME.zh.md` beside `NAME.md`), as for every translated page.
"""

from __future__ import annotations

import json
import math
import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from seq2seq.bounded_files import read_json
from seq2seq.lab.experiment import Experiment, Finding

RECORD = "finding.json"  # beside the figures: what the index page and the tests read
# The index's number columns in Chinese, in the English columns' order
INDEX_COLUMNS_ZH = ("分钟（这次运行）", "模型数", "它们的训练（分钟）", "复用", "上限 GFLOP/s")


@dataclass(frozen=True)
class Machine:
    """Where an experiment ran: the processor, torch's threads and the matmul ceiling."""

    processor: str
    cores: int
    threads: int
    ceiling_gflops: float
    load: float | None = None  # the 1-minute load average when the lab started

    def described(self) -> str:
        load = "" if self.load is None else f", load average {self.load:.1f} at the start"
        return (
            f"{self.processor}, {self.cores} cores, {self.threads} torch threads, float32 "
            f"matmul ceiling {self.ceiling_gflops:.0f} GFLOP/s{load}"
        )

    def described_zh(self) -> str:
        load = "" if self.load is None else f"，开始时 1 分钟平均负载 {self.load:.1f}"
        return (
            f"{self.processor}，{self.cores} 核，{self.threads} 个 torch 线程，float32 矩阵乘法"
            f"上限 {self.ceiling_gflops:.0f} GFLOP/s{load}"
        )


def processor_name() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one)."""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def formatted(value: Any) -> str:
    """A table cell: floats to 3 significant figures (4 for values of 100 and more)."""
    if isinstance(value, bool) or not isinstance(value, float):
        return str(value)
    if math.isnan(value):
        return "–"
    if value != 0 and (abs(value) >= 1e5 or abs(value) < 1e-3):
        return f"{value:.2e}"
    return f"{value:.4g}" if abs(value) >= 100 else f"{value:.3g}"


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table (the keys of the first row are the columns)."""
    if not rows:
        return ""
    columns = list(rows[0])
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(formatted(row.get(c, "")) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


VERDICTS_ZH = {
    None: "这里的测量既不能证实也不能否定这条论断。",
    True: "这里的测量与论断一致。",
    False: "**这里的测量与论断不一致。**",
}


def verdict(finding: Finding) -> str:
    if finding.agrees is None:
        return "The measurement neither confirms nor refutes the claim here."
    if finding.agrees:
        return "The measurement here agrees with the claim."
    return "**The measurement here does not agree with the claim.**"


def model_counts(models: list[tuple[str, bool, float]]) -> tuple[float, int]:
    """The minutes the run's models trained in all, and how many were reused."""
    minutes = sum(trained for _, _, trained in models)
    return minutes, sum(1 for _, was_reused, _ in models if was_reused)


def models_note(models: list[tuple[str, bool, float]]) -> str:
    """What the run trained and reused, for the sentence on its run time."""
    if not models:
        return ""
    minutes, reused = model_counts(models)
    note = f"; its {len(models)} model(s) trained for {minutes:.1f} minutes in all"
    if reused:
        note += f", {reused} of them in an earlier run (reused here, not in this run's time)"
    return note


def models_note_zh(models: list[tuple[str, bool, float]]) -> str:
    """`models_note` in Chinese."""
    if not models:
        return ""
    minutes, reused = model_counts(models)
    note = f"；它的 {len(models)} 个模型一共训练了 {minutes:.1f} 分钟"
    if reused:
        note += f"，其中 {reused} 个是之前的运行训练的（这里直接复用，不计入这次的时间）"
    return note


@dataclass(frozen=True)
class LabRun:
    """One experiment's run as its page and record tell it."""

    experiment: Experiment
    finding: Finding
    seconds: float
    machine: Machine
    quick: bool
    models: tuple[tuple[str, bool, float], ...] = ()  # (label, reused, training minutes)


def page_text(run: LabRun) -> str:
    """The Markdown page of one experiment's run."""
    experiment, finding = run.experiment, run.finding
    command = f"seq2seq-lab {experiment.name}" + (" --quick" if run.quick else "")
    figures = "\n\n".join(
        f"![{path.stem}]({experiment.name}/{path.name})" for path in finding.figures
    )
    return "\n".join([
        f"# {experiment.title}",
        "",
        "## The claim",
        "",
        experiment.claim.strip(),
        "",
        "## The experiment",
        "",
        f"```bash\n{command}\n```",
        "",
        experiment.default_size.strip(),
        "",
        f"This run took {run.seconds / 60:.1f} minutes on {run.machine.described()}"
        + models_note(list(run.models)) + (" (the `--quick` size)." if run.quick else "."),
        "",
        "## What it found",
        "",
        finding.summary.strip(),
        "",
        verdict(finding),
        "",
        figures,
        "",
        markdown_table(finding.table),
        "",
    ])  # fmt: skip


def page_text_zh(run: LabRun) -> str:
    """The Chinese page of one experiment's run (`Experiment.zh`); the table as the English
    page's (its columns are the record's keys)."""
    experiment, finding = run.experiment, run.finding
    text = experiment.zh
    if text is None:
        raise ValueError(f"the experiment {experiment.name} has no Chinese page")
    command = f"seq2seq-lab {experiment.name}" + (" --quick" if run.quick else "")
    figures = "\n\n".join(
        f"![{path.stem}]({experiment.name}/{path.name})" for path in finding.figures
    )
    took = (
        f"这次运行用了 {run.seconds / 60:.1f} 分钟，机器：{run.machine.described_zh()}"
        + models_note_zh(list(run.models))
        + ("（`--quick` 的规模）。" if run.quick else "。")
    )
    summary = text.summary(finding, run.quick)
    return "\n".join([
        f"# {text.title}",
        "",
        "## 论断",
        "",
        text.claim.strip(),
        "",
        "## 实验",
        "",
        f"```bash\n{command}\n```",
        "",
        text.default_size.strip(),
        "",
        took,
        "",
        "## 发现",
        "",
        summary.strip(),
        "",
        VERDICTS_ZH[finding.agrees],
        "",
        figures,
        "",
        "下表的列名与记录（`finding.json`）中的键相同，保留英文。",
        "",
        markdown_table(finding.table),
        "",
    ])  # fmt: skip


def write_pages(out_root: Path, run: LabRun) -> Path:
    """`out_root/NAME.md` and, when the experiment has one, `out_root/NAME.zh.md`; returns
    the English page's path."""
    page = out_root / f"{run.experiment.name}.md"
    page.write_text(page_text(run), encoding="utf-8")
    if run.experiment.zh is not None:
        chinese = out_root / f"{run.experiment.name}.zh.md"
        chinese.write_text(page_text_zh(run), encoding="utf-8")
    return page


def run_from_record(experiment: Experiment, out_root: Path) -> LabRun | None:
    """The run `out_root/NAME/finding.json` records (None when there is none): what its
    pages are written from."""
    record_file = out_root / experiment.name / RECORD
    if not record_file.is_file():
        return None
    record = read_json(record_file)
    folder = out_root / experiment.name
    finding = Finding(
        summary=record["summary"],
        table=record["table"],
        figures=[folder / name for name in record["figures"]],
        values=record["values"],
        agrees=record["agrees"],
    )
    models = tuple(
        (model["label"], model["reused"], model["train_minutes"]) for model in record["models"]
    )
    machine = Machine(**record["machine"])
    return LabRun(experiment, finding, record["seconds"], machine, record["quick"], models)


def rewrite_pages(out_root: Path, experiments: list[Experiment]) -> list[Path]:
    """Every page of the experiments that have a record in `out_root`, written again from
    it (nothing runs); the indexes too. The English pages written."""
    pages = []
    for experiment in experiments:
        run = run_from_record(experiment, out_root)
        if run is not None:
            pages.append(write_pages(out_root, run))
    write_index(out_root, experiments)
    return pages


def write_page(out_root: Path, run: LabRun) -> Path:
    """`out_root/NAME/finding.json` and the pages (`write_pages`); returns the English
    page's path."""
    experiment, finding = run.experiment, run.finding
    folder = out_root / experiment.name
    folder.mkdir(parents=True, exist_ok=True)
    record = {
        "name": experiment.name,
        "title": experiment.title,
        "summary": finding.summary,
        "agrees": finding.agrees,
        "values": finding.values,
        "table": finding.table,
        "figures": [path.name for path in finding.figures],
        "seconds": run.seconds,
        "models": [
            {"label": label, "reused": reused, "train_minutes": minutes}
            for label, reused, minutes in run.models
        ],
        "quick": run.quick,
        "machine": run.machine.__dict__,
    }
    (folder / RECORD).write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", "utf-8")
    return write_pages(out_root, run)


def write_index(out_root: Path, experiments: list[Experiment]) -> Path:
    """`out_root/index.md` (and `index.zh.md`): every experiment with its finding and run
    time (those run so far)."""
    rows, rows_zh = [], []
    for experiment in experiments:
        record_file = out_root / experiment.name / RECORD
        if not record_file.is_file():
            continue
        record = read_json(record_file)
        models = record.get("models", [])
        numbers = {
            "minutes (this run)": round(record["seconds"] / 60, 1),
            "models": len(models),
            "their training, minutes": round(sum(m["train_minutes"] for m in models), 1),
            "reused": sum(1 for m in models if m["reused"]),
            "ceiling GFLOP/s": round(record["machine"]["ceiling_gflops"]),
        }
        agrees = {True: "yes", False: "no", None: "undecided"}[record["agrees"]]
        rows.append({"experiment": f"[{experiment.title}]({experiment.name}.md)",
                     "agrees with the claim": agrees, **numbers})  # fmt: skip
        if experiment.zh is not None:
            agrees_zh = {True: "一致", False: "不一致", None: "未定"}[record["agrees"]]
            rows_zh.append({"实验": f"[{experiment.zh.title}]({experiment.name}.zh.md)",
                            "与论断": agrees_zh, **dict(zip(INDEX_COLUMNS_ZH, numbers.values()))})  # fmt: skip
    text = "\n".join([
        "# The attention lab",
        "",
        "Each classic claim about RNNs and attention, run as an experiment: "
        "`seq2seq-lab NAME` (`--quick` for a run of seconds), `make lab` for all of them. "
        "Trained models are kept and shared: a model another experiment (or an earlier "
        "run) trained is reused, and its training time is not in the run's minutes.",
        "",
        markdown_table(rows),
        "",
    ])  # fmt: skip
    text_zh = "\n".join([
        "# 注意力实验室",
        "",
        "关于 RNN 和注意力的每一条经典论断，都作为一个实验来运行：`seq2seq-lab NAME`"
        "（`--quick` 只跑几秒钟），`make lab` 运行全部实验。训练好的模型会保留并共享："
        "别的实验（或之前的运行）训练过的模型会被复用，它的训练时间不计入这次运行的分钟数。",
        "",
        markdown_table(rows_zh),
        "",
    ])  # fmt: skip
    out_root.mkdir(parents=True, exist_ok=True)
    path = out_root / "index.md"
    path.write_text(text, encoding="utf-8")
    (out_root / "index.zh.md").write_text(text_zh, encoding="utf-8")
    return path


def this_machine(threads: int) -> Machine:
    """This machine, with its float32 matmul ceiling measured now (about a second)."""
    import torch

    from seq2seq.lab.matmul_ceiling import MATMUL_SHAPES, matmul_gflops

    device = torch.device("cpu")
    ceiling = max(matmul_gflops(m, k, n, reps=5, device=device) for m, k, n in MATMUL_SHAPES)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return Machine(processor_name(), cores(), threads or torch.get_num_threads(), ceiling, load)
