"""SLURM through Hydra's submitit launcher: the `cluster` presets, `trainer.resume=auto`,
submitit's ranks, and preemption (SIGUSR2 → save `last.pt` → requeue → continue).

The fast tests need no launcher process; the slow ones run sweeps with submitit's local
executor (`+cluster=local`), which starts, signals and requeues jobs as SLURM would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from faults.test_resume import PREEMPTED_EXIT, _command, interrupt, logged_losses
from helpers import TINY_TOY, compose_config, single_thread_env
from hydra import compose, initialize_config_module
from omegaconf import OmegaConf

from seq2seq.checkpoint import load_checkpoint
from seq2seq.config.schema import register_configs
from seq2seq.runs import cluster
from seq2seq.runs.assemble import train_and_test
from seq2seq.runs.folder import resolve_resume
from seq2seq.training import distributed
from seq2seq.training.stopping import STOP_SIGNALS, StopRequest

pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="the `cluster` extra")

# ---------------------------------------------------------------- trainer.resume=auto


def _touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x")
    return path


def test_resume_auto_starts_a_new_run_in_an_empty_or_new_folder(tmp_path):
    assert resolve_resume("auto", tmp_path / "not_yet", tmp_path) is None
    (tmp_path / "run" / "checkpoints").mkdir(parents=True)
    _touch(tmp_path / "run" / "checkpoints" / "best.pt")  # best.pt alone: not a run to continue
    assert resolve_resume("auto", tmp_path / "run", tmp_path) is None


def test_resume_auto_continues_the_folder_own_last_checkpoint(tmp_path):
    run = tmp_path / "run"
    other = _touch(tmp_path / "other" / "checkpoints" / "last.pt")  # never another folder's
    assert resolve_resume("auto", run, tmp_path) is None
    last = _touch(run / "checkpoints" / "last.pt")
    assert resolve_resume("auto", run, tmp_path) == last != other
    last.unlink()  # killed mid-rotation: only the previous version is left
    _touch(run / "checkpoints" / "last.prev.pt")
    assert resolve_resume("auto", run, tmp_path) == last  # load_resumable falls back


def test_resume_auto_of_a_finished_run_resumes_it_rather_than_training_anew(tmp_path):
    run = tmp_path / "run"
    last = _touch(run / "checkpoints" / "last.pt")
    (run / "results.json").write_text("{}")
    assert resolve_resume("auto", run, tmp_path) == last


def test_resume_auto_trains_then_continues_a_finished_run_without_training_or_testing(tmp_path):
    overrides = TINY_TOY + [f"data.root={tmp_path / 'data'}", "trainer.valid_every=3",
                            "trainer.max_steps=3", "trainer.test_search.beam_size=1",
                            "logging.tensorboard=false", "trainer.resume=auto"]  # fmt: skip
    run = tmp_path / "run"
    first = train_and_test(compose_config(overrides), run, tmp_path)
    steps = len(logged_losses(run))
    translations = (run / "test.hyp").stat().st_mtime_ns
    again = train_and_test(compose_config(overrides), run, tmp_path)
    assert first["steps"] == again["steps"] == 3 and len(logged_losses(run)) == steps
    # nothing trained and nothing changed: the results stand, the test is not run again
    assert again == first and (run / "test.hyp").stat().st_mtime_ns == translations
    wider = train_and_test(compose_config(overrides + ["trainer.test_search.beam_size=2"]),
                           run, tmp_path)  # fmt: skip
    assert wider["search"]["beam_size"] == 2 and wider["steps"] == 3  # tested again
    assert (run / "test.hyp").stat().st_mtime_ns != translations
    assert json.loads((run / "results.json").read_text())["tested"]["search"]["beam_size"] == 2


# ---------------------------------------------------------------- the presets


def _compose_hydra(overrides: list[str]):
    register_configs()
    with initialize_config_module(config_module="seq2seq.configs", version_base="1.3"):
        return compose(config_name="train", overrides=overrides, return_hydra_config=True)


def test_the_slurm_preset_composes_with_one_rank_per_gpu_and_resume_auto():
    cfg = _compose_hydra(["+cluster=slurm", "hydra.launcher.partition=gpu",
                          "hydra.launcher.gpus_per_node=4", "hydra.launcher.nodes=2",
                          "hydra.launcher.timeout_min=30"])  # fmt: skip
    launcher = cfg.hydra.launcher
    assert launcher._target_.endswith("SlurmLauncher")
    assert (launcher.partition, launcher.nodes, launcher.timeout_min) == ("gpu", 2, 30)
    assert launcher.gpus_per_node == launcher.tasks_per_node == 4
    assert launcher.max_num_timeout > 0 and launcher.signal_delay_s > 0  # requeue on time-outs
    assert cfg.trainer.resume == "auto" and cfg.trainer.device == "cuda"


def test_the_local_preset_composes_with_submitit_local():
    cfg = _compose_hydra(["+cluster=local"])
    assert cfg.hydra.launcher._target_.endswith("LocalLauncher")
    assert cfg.trainer.resume == "auto"


# ---------------------------------------------------------------- ranks and signals


TORCHRUN_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                      "MASTER_PORT", "CUDA_VISIBLE_DEVICES")  # fmt: skip


def test_submitit_tasks_become_torchrun_ranks(monkeypatch):
    # export writes os.environ itself: set then delete each variable through monkeypatch,
    # which then deletes (or restores) it after the test; a leaked RANK would make every
    # later training process of this session wait for peers that never come.
    for name in TORCHRUN_VARIABLES:
        monkeypatch.setenv(name, "unset")
        monkeypatch.delenv(name)
    assert not cluster.export_submitit_ranks()  # not a submitit job: nothing changes
    local = {"SUBMITIT_EXECUTOR": "local", "SUBMITIT_LOCAL_JOB_ID": "4242",
             "SUBMITIT_LOCAL_NTASKS": "4", "SUBMITIT_LOCAL_JOB_NUM_NODES": "2",
             "SUBMITIT_LOCAL_NODEID": "1", "SUBMITIT_LOCAL_GLOBALID": "3",
             "SUBMITIT_LOCAL_LOCALID": "1"}  # fmt: skip
    for name, value in local.items():
        monkeypatch.setenv(name, value)
    assert cluster.export_submitit_ranks()
    assert distributed.from_environment() == distributed.Distributed(3, 1, 4)
    assert os.environ["MASTER_ADDR"] and int(os.environ["MASTER_PORT"]) >= 20000
    assert not cluster.export_submitit_ranks()  # RANK set (torchrun inside the job): kept
    assert "CUDA_VISIBLE_DEVICES" not in os.environ  # every task sees every GPU of its node


def test_sigusr2_is_a_stop_signal_and_the_previous_handler_comes_back():
    assert signal.SIGUSR2 in STOP_SIGNALS
    received = []
    previous = signal.signal(signal.SIGUSR2, lambda signum, frame: received.append(signum))
    try:
        with StopRequest() as stop:
            signal.raise_signal(signal.SIGUSR2)
            assert stop.received == signal.SIGUSR2 and not received
        cluster.hand_back(stop.received)  # what the CLI does once last.pt is saved
        assert received == [signal.SIGUSR2]
    finally:
        signal.signal(signal.SIGUSR2, previous)


def test_sigusr2_without_a_launcher_saves_and_exits_143_like_sigusr1(tmp_path):
    """A plain run (no submitit handler to hand the signal to) stops as SIGUSR1 does."""
    run_dir = tmp_path / "run"
    command = _command(run_dir, tmp_path / "data", [])
    code, signalled_at, output = interrupt(command, run_dir, signal.SIGUSR2, 3)
    assert code == PREEMPTED_EXIT, output[-3000:]
    saved = load_checkpoint(run_dir / "checkpoints" / "last.pt")["progress"]["step"]
    assert signalled_at <= saved <= signalled_at + 2 and f"SIGUSR2: saved {run_dir}" in output
    assert "passing SIGUSR2 on" not in output and "Traceback" not in output


def test_hand_back_does_nothing_without_a_python_handler():
    previous = signal.signal(signal.SIGUSR2, signal.SIG_IGN)
    try:
        cluster.hand_back(signal.SIGUSR2)
        cluster.hand_back(None)  # the signal reached another rank
    finally:
        signal.signal(signal.SIGUSR2, previous)


# ---------------------------------------------------------------- sweeps with submitit_local

SWEEP = TINY_TOY + [
    "+cluster=local",
    "trainer.valid_every=10",
    "trainer.valid_max_sentences=8",
    "trainer.test_search.beam_size=1",
    "hydra.sweep.subdir=${hydra.job.num}",  # short folder names: 0, 1, ...
]


def _sweep_command(tmp_path: Path, *overrides: str) -> list[str]:
    return [sys.executable, "-m", "seq2seq.cli.train", "-m", *SWEEP,
            f"data.root={tmp_path / 'data'}", f"hydra.sweep.dir={tmp_path / 'sweep'}",
            *overrides]  # fmt: skip


def _run_sweep(tmp_path: Path, *overrides: str) -> Path:
    """Run the sweep to its end (it must succeed); its folder."""
    done = subprocess.run(_sweep_command(tmp_path, *overrides), capture_output=True, text=True,
                          env=single_thread_env(), cwd=tmp_path, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return tmp_path / "sweep"


def _results(run_dir: Path) -> dict:
    return json.loads((run_dir / "results.json").read_text())


def _steps_logged(run_dir: Path) -> int:
    return max(logged_losses(run_dir), default=0)


@pytest.mark.slow
def test_a_two_job_sweep_runs_as_submitit_jobs(tmp_path):
    sweep = _run_sweep(tmp_path, "trainer.max_steps=6", "attention=dot,additive")
    for job, attention in ((0, "dot"), (1, "additive")):
        run_dir = sweep / str(job)
        results = _results(run_dir)
        assert results["steps"] == 6 and results["run_dir"] == str(run_dir)
        config = OmegaConf.load(run_dir / ".hydra" / "config.yaml")
        assert config.attention.score.name == attention
    assert list((sweep / ".submitit").glob("*/*_0_result.pkl"))


@pytest.mark.slow
def test_a_preempted_job_saves_requeues_and_continues_with_the_same_losses(tmp_path):
    """SIGUSR2 to the training process of a submitit job (what SLURM sends before the time
    limit): the trainer saves last.pt at the next step boundary, submitit requeues the job,
    and the requeued job (trainer.resume=auto) continues in the same folder; the logged
    losses equal those of an uninterrupted run."""
    max_steps, signal_at = 30, 12
    command = _sweep_command(tmp_path, f"trainer.max_steps={max_steps}")
    run_dir = tmp_path / "sweep" / "0"
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, env=single_thread_env(), cwd=tmp_path) as sweep:  # fmt: skip
        deadline = time.monotonic() + 180
        while _steps_logged(run_dir) < signal_at and sweep.poll() is None:
            assert time.monotonic() < deadline, "the job did not reach the signal's step"
            time.sleep(0.01)
        if sweep.poll() is not None:
            pytest.fail("the job ended before it could be preempted:\n" + sweep.stdout.read())
        pid = int((run_dir / "train.lock").read_text())  # the job's training process
        os.kill(pid, signal.SIGUSR2)
        output, _ = sweep.communicate(timeout=300)
    assert sweep.returncode == 0, output[-3000:]
    log = (run_dir / "train.log").read_text()
    assert "SIGUSR2: saved" in log and "passing SIGUSR2 on" in log
    assert "trainer.resume=auto: continuing the run" in log
    resumed_at = int(log.split("resumed ")[1].split(" at step ")[1].split()[0])
    assert signal_at <= resumed_at < max_steps
    assert _results(run_dir)["steps"] == max_steps
    # The uninterrupted run, in this process: the same config as the job's.
    reference_dir = tmp_path / "reference"
    overrides = [o for o in SWEEP if not o.startswith(("+cluster", "hydra."))]
    cfg = compose_config(overrides + [f"data.root={tmp_path / 'data'}",
                                      f"trainer.max_steps={max_steps}"])  # fmt: skip
    train_and_test(cfg, reference_dir, tmp_path)
    assert logged_losses(run_dir) == logged_losses(reference_dir)
    assert sorted(logged_losses(run_dir)) == list(range(1, max_steps + 1))


@pytest.mark.slow
def test_a_job_of_two_tasks_trains_data_parallel(tmp_path):
    """`tasks_per_node=2`: submitit's two tasks become ranks 0 and 1 (gloo on the CPU)."""
    run_dir = _run_sweep(tmp_path, "trainer.max_steps=4", "hydra.launcher.tasks_per_node=2") / "0"
    assert "data parallel: 2 ranks (gloo)" in (run_dir / "train.log").read_text()
    assert _results(run_dir)["steps"] == 4
