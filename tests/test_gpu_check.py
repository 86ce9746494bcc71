"""The CPU-testable parts of scripts/gpu_check.sh: the loss-curve comparison, the GPU peak
table and MFU, the `trainer.precision` switch, and the script's refusal without CUDA."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import TINY_TOY, compose_config

from seq2seq.config.build import ConfigError
from seq2seq.config.value_checks import check_settings
from seq2seq.runs.assemble import assemble_trainer
from seq2seq.study import loss_curves as compare
from tools.bench import gpu as gpu_bench

ROOT = Path(__file__).resolve().parent.parent


def _write_run(run_dir: Path, losses: dict[int, float]) -> Path:
    run_dir.mkdir(parents=True)
    lines = [json.dumps({"step": step, "train/loss": loss}) for step, loss in losses.items()]
    (run_dir / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    return run_dir


def _curve(steps: int, scale: float = 1.0, noise: float = 0.0) -> dict[int, float]:
    """A falling loss with alternating ±noise (batch-to-batch jitter)."""
    return {
        s: scale * (2.0 + 6.0 * math.exp(-s / 60)) + noise * (-1) ** s for s in range(1, steps + 1)
    }


def test_smoothing_is_a_trailing_moving_average():
    assert compare.smoothed({1: 1.0, 2: 3.0, 3: 5.0, 4: 7.0}, 2) == {2: 2.0, 3: 4.0, 4: 6.0}


def test_batch_jitter_is_smoothed_away_and_a_real_gap_is_not():
    reference = _curve(300)
    jittery, _ = compare.compare(_curve(300, noise=0.2), reference, window=26)
    assert jittery < 0.01  # ±0.2 per step averages to zero over an even window
    raw, _ = compare.compare(_curve(300, noise=0.2), reference, window=1)
    assert raw > 0.05  # unsmoothed, the same jitter would fail the 5 % threshold
    gap, step = compare.compare(_curve(300, scale=1.08), reference)
    assert gap == pytest.approx(0.08) and step >= compare.DEFAULT_WINDOW


def test_a_non_finite_loss_or_too_few_shared_steps_fails():
    broken = _curve(100) | {50: float("nan")}
    assert compare.compare(broken, _curve(100)) == (math.inf, 50)
    with pytest.raises(ValueError, match="share 10"):
        compare.compare(_curve(10), _curve(10))


def test_the_command_reads_two_runs_and_exits_by_the_threshold(tmp_path, capsys):
    reference = _write_run(tmp_path / "fp32", _curve(200))
    close = _write_run(tmp_path / "bf16", _curve(200, scale=1.01))
    far = _write_run(tmp_path / "bad", _curve(200, scale=1.2))
    assert compare.check(close, reference) == 0
    assert "max relative difference 0.0100" in capsys.readouterr().out
    assert compare.check(far, reference) == 1
    assert compare.check(far, reference, threshold=0.25) == 0
    assert compare.check(tmp_path / "missing", reference) == 2


def test_a_resumed_run_keeps_the_later_value_of_a_step(tmp_path):
    run = _write_run(tmp_path / "run", {1: 3.0, 2: 2.0})
    with (run / "metrics.jsonl").open("a") as stream:
        stream.write(json.dumps({"step": 2, "train/loss": 2.5}) + "\n")
    assert compare.read_losses(run) == {1: 3.0, 2: 2.5}


@pytest.mark.parametrize(
    ("name", "label", "peak"),
    [
        ("NVIDIA H100 80GB HBM3", "H100/H800 SXM", 989.0),
        ("NVIDIA H100 PCIe", "H100 PCIe", 756.0),
        ("NVIDIA H200", "H200 SXM", 989.0),
        ("NVIDIA A100-SXM4-80GB", "A100/A800", 312.0),
        ("NVIDIA L4", "L4", 121.0),
        ("NVIDIA L40S", "L40S", 362.0),
        ("NVIDIA A10", "A10", 125.0),
    ],
)
def test_known_gpus_have_their_dense_bf16_peak(name, label, peak):
    assert gpu_bench.known_peak(name) == (label, peak)


def test_an_unknown_gpu_has_no_peak_and_no_mfu():
    assert gpu_bench.known_peak("NVIDIA A10G") is None  # not the A10's figure
    assert gpu_bench.known_peak("Tesla T4") is None
    assert gpu_bench.mfu(1e12, None) is None
    assert gpu_bench.mfu(98.9e12, 989.0) == pytest.approx(0.1)


def test_the_entry_shows_the_gpu_the_peak_and_one_row_per_measurement():
    gpu = {"name": "NVIDIA H100 PCIe", "capability": "9.0", "memory_gib": 80, "count": 1,
           "cuda": "12.8"}  # fmt: skip
    measured = {"preset": "default_cpu", "precision": "bf16", "max_tokens": 8192,
                "parameters": 4_750_000, "step_seconds": 0.02, "tgt_tokens_per_s": 150_000.0,
                "all_tokens_per_s": 280_000.0, "gflops_per_s": 75_600.0,
                "peak_memory_mib": 1234.0, "batches": "20 measured"}  # fmt: skip
    failed = {"preset": "default_cpu", "precision": "fp32", "max_tokens": 8192, "error": "OOM"}
    lines = gpu_bench.entry_lines(gpu, [measured, failed], ("H100 PCIe", 756.0))
    text = "\n".join(lines)
    assert lines[0].endswith("GPU: NVIDIA H100 PCIe") and "756 TFLOP/s" in text
    assert (
        "| default_cpu | bf16 | 8192 | 4,750,000 | 20.0 | 150,000 | 280,000 | 75.60 | 10.00% | 1,234 |"
        in text
    )
    assert "| default_cpu | fp32 | 8192 | failed: OOM |" in text
    assert all(
        line.count("|") == lines[-3].count("|") for line in lines if line.startswith("| default")
    )


def test_precision_switches_autocast_on_any_device(tmp_path):
    base = TINY_TOY + [f"data.root={tmp_path / 'data'}", "logging.tensorboard=false"]
    for precision, dtype in (
        ("bf16", torch.bfloat16),
        ("fp32", torch.float32),
        ("auto", torch.float32),
    ):
        cfg = compose_config(base + [f"trainer.precision={precision}"])
        trainer = assemble_trainer(cfg, tmp_path / precision, observe=False)
        indices = trainer.sampler.batches(0)[0]
        batch = trainer.data.train.batch(indices)
        with trainer.autocast():
            logits, _ = trainer.model(batch.src, batch.src_mask, batch.tgt_in)
        assert logits.dtype == dtype, precision  # `auto` is float32 on the CPU
    with pytest.raises(ConfigError, match="trainer.precision must be auto, bf16 or fp32"):
        check_settings(compose_config(base + ["trainer.precision=fp16"]))


def test_gpu_check_refuses_to_run_without_cuda():
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_check.sh")], capture_output=True,
                          text=True, env=env, timeout=120)  # fmt: skip
    assert done.returncode != 0
    assert "no CUDA device" in done.stderr and "Traceback" not in done.stderr
