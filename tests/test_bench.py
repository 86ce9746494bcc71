"""`make bench` and its neighbours (tools.bench): the entry file, paths without a machine's
folders, time to quality from event files, the worker's job, the tables, the levers' budget.
Fast: nothing is trained here (the one subprocess only composes a preset)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time

import pytest
from torch.utils.tensorboard import SummaryWriter

from tools.bench import guidance, levers
from tools.bench.entry import HEADER, append_entry, shown_command, shown_path
from tools.bench.quality import quality_section
from tools.bench.speed import FULL_DEFAULTS, QUICK_PRESETS, BenchOptions
from tools.bench.throughput import DROPOUT_VARIANTS, dropout_table, training_row
from tools.bench.training_speed import StepCounts
from tools.bench.worker import WorkerJob


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def test_time_to_quality_takes_the_best_valid_bleu_within_each_budget(tmp_path):
    """valid/bleu wall times, relative to the file's first event, give the best BLEU reached
    after 5, 10 and 20 minutes, and `train/tflop` at the validation steps the best BLEU
    within 10 to 120 TFLOP."""
    writer = SummaryWriter(str(tmp_path / "tensorboard"))  # first event: now
    start = time.time()
    for minutes, step, bleu, tflop in [
        (2, 500, 9.0, 8.0),
        (4.5, 1000, 14.0, 16.0),
        (7, 1500, 13.5, 24.0),
        (11, 2000, 16.0, 32.0),
    ]:
        writer.add_scalar("valid/bleu", bleu, step, walltime=start + 60 * minutes)
        writer.add_scalar("train/tflop", tflop, step, walltime=start + 60 * minutes)
    writer.close()
    table = [cells(line) for line in quality_section(tmp_path) if line.startswith("| ")]
    minutes_rows, tflop_rows = table[1:4], table[5:]
    assert minutes_rows == [
        ["5", "14.00", "1000"],  # 9.0 and 14.0 are within 5 minutes
        ["10", "14.00", "1000"],  # 13.5 at 7 min is worse than 14.0
        ["20", "—", "—"],  # the run ended at 11 min: it never trained for 20
    ]
    assert table[4] == ["TFLOP", "best valid BLEU so far", "at step"]
    assert tflop_rows == [
        ["10", "9.00", "500"],
        ["20", "14.00", "1000"],
        ["40", "—", "—"],  # the run ended at 32 TFLOP
        ["80", "—", "—"],
        ["120", "—", "—"],
    ]


def test_bench_shows_no_machine_specific_absolute_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert shown_path(tmp_path / "outputs" / "run" / "best.pt") == "outputs/run/best.pt"
    assert shown_path("/elsewhere/a/run/checkpoints/best.pt") == "…/run/checkpoints/best.pt"
    assert shown_path("--quick") == "--quick"
    command = ["scripts/bench.py", "--checkpoint", str(tmp_path / "runs" / "best.pt")]
    assert shown_command(command) == "python scripts/bench.py --checkpoint runs/best.pt"


def test_an_entry_starts_a_new_file_with_the_header_and_follows_a_blank_line(tmp_path):
    """Without a `# History` heading (a fresh --out file), entries go at the end."""
    path = tmp_path / "BENCHMARKS.md"
    append_entry(path, ["## first", "", "- a"])
    append_entry(path, ["## second"])
    text = path.read_text(encoding="utf-8")
    assert text == HEADER.rstrip("\n") + "\n\n## first\n\n- a\n\n## second\n"
    assert text.count("# Benchmarks") == 1


def test_an_entry_goes_directly_below_the_history_heading_newest_first(tmp_path):
    """With a `# History` heading, each new entry goes right below it, above the older ones;
    the current results above the heading stay as they are."""
    path = tmp_path / "BENCHMARKS.md"
    current = "# Benchmarks\n\n# Current results\n\n## Speed\n\n- 1.0×\n\n# History\n\n"
    oldest = "## 2026-01-01 09:00\n\n- old\n"
    path.write_text(current + oldest, encoding="utf-8")
    append_entry(path, ["## 2026-01-02 09:00", "", "- newer"])
    append_entry(path, ["## 2026-01-03 09:00", "", "- newest"])
    newer = "## 2026-01-03 09:00\n\n- newest\n\n## 2026-01-02 09:00\n\n- newer\n\n"
    assert path.read_text(encoding="utf-8") == current + newer + oldest


def test_the_first_entry_below_an_empty_history_ends_the_file(tmp_path):
    path = tmp_path / "BENCHMARKS.md"
    path.write_text("# Benchmarks\n\n# History\n\n", encoding="utf-8")
    append_entry(path, ["## 2026-01-01 09:00", "", "- first"])
    assert path.read_text(encoding="utf-8") == (
        "# Benchmarks\n\n# History\n\n## 2026-01-01 09:00\n\n- first\n"
    )


def test_bench_composes_a_preset_in_a_fresh_process():
    """The benchmark's workers are fresh processes: they must register the built-ins (the
    workshop's package imports `seq2seq.built_ins`) and the schemas themselves (nothing else
    in them does)."""
    code = (
        "import seq2seq.built_ins; from seq2seq.runs.compose import preset_config; "
        "print(preset_config('default_cpu', 1, 'cpu').name)"
    )
    finished = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert finished.stdout.strip() == "default_cpu"


def test_a_worker_job_survives_its_trip_as_json():
    job = WorkerJob("gru_additive", 2, "cpu", StepCounts(1, 2, 3), max_tokens=512,
                    overrides=["model.embed_dropout=0"], profile="/tmp/p.txt")  # fmt: skip
    assert WorkerJob.from_json(json.dumps(dataclasses.asdict(job))) == job
    assert job.counts.needed == 1 + 2 * 3


def test_options_take_the_given_numbers_else_the_defaults_of_their_mode():
    quick = BenchOptions(quick=True, steps=7)
    assert quick.chosen_presets() == list(QUICK_PRESETS)
    assert quick.worker_job().counts == StepCounts(warmup=1, reps=2, steps=7)
    full = BenchOptions(threads=3, presets=["convs2s"], max_tokens=256)
    job = full.worker_job()
    assert (job.threads, job.max_tokens, job.device) == (3, 256, "cpu")
    assert job.counts == StepCounts(*(FULL_DEFAULTS[k] for k in ("warmup", "reps", "steps")))
    assert full.number("sentences") == FULL_DEFAULTS["sentences"]
    assert full.chosen_presets() == ["convs2s"]


def test_a_training_row_shows_mfu_against_the_ceiling_and_a_failure_keeps_the_columns():
    result = {"parameters": 1_234_567, "step_seconds": 0.25, "tgt_tokens_per_s": 4000.4,
              "all_tokens_per_s": 9000.0, "gflops_per_step": 12.34, "gflops_per_s": 25.0,
              "padding": 0.125, "peak_rss_mib": 2048.0}  # fmt: skip
    row = training_row("gru_additive", result, ceiling=100.0)
    assert cells(row) == ["gru_additive", "1,234,567", "0.250", "4,000", "9,000", "12.3",
                          "25.0%", "12.5%", "2,048"]  # fmt: skip
    failed = training_row("convs2s", {"error": "exit 1: boom"}, ceiling=100.0)
    assert failed.count("|") == row.count("|")


def test_the_dropout_table_gives_medians_and_the_speed_up_over_every_site():
    seconds = {"every site": [0.30, 0.20, 0.25], "inputs + sublayer outputs": [0.2, 0.2, 0.2],
               "token: inputs + sublayer outputs": [0.15, 0.15, 0.15],
               "token + word dropout": [0.16, 0.16, 0.16], "none": [0.10, 0.5, 0.125]}  # fmt: skip
    rows = {name: {"gflops_per_step": 10.0} for name in DROPOUT_VARIANTS}
    table = [cells(line) for line in dropout_table(seconds, rows, ceiling=100.0)[2:]]
    every, fewer, token, _, none = table
    assert token[0] == "token: inputs + sublayer outputs" and token[5] == "1.67×"
    assert every[2:] == ["0.250", "0.300, 0.200, 0.250", "40.0%", "1.00×"]  # 10/0.25/100
    assert fewer[2] == "0.200" and fewer[5] == "1.25×"  # 0.25 / 0.2
    assert none[2] == "0.125" and none[5] == "2.00×"


def test_guidance_lines_give_each_variant_its_ratio_to_unguided():
    lines = guidance.report_lines("default_cpu", {"unguided": 0.040, "guided": 0.050})
    assert lines[0].split()[-3:] == ["40.0", "ms/update", "1.000×"]
    assert lines[1].split()[-3:] == ["50.0", "ms/update", "1.250×"]


@pytest.mark.parametrize("name", ["base", "tokens_1024", "r2_layers_3_3"])
def test_a_lever_validates_four_times_and_ends_near_its_tflop_budget(name):
    lever = levers.LEVERS[name]
    max_steps, valid_every = levers.budget(lever, 40.0)
    assert max_steps == 4 * valid_every
    spent_tflop = max_steps * lever.gflop_per_update / 1000
    assert 40.0 <= spent_tflop <= 40.0 * 1.03 + 4 * lever.gflop_per_update / 1000
