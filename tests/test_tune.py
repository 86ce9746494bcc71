"""The train app returns the best valid value of `trainer.select_metric`, so that Hydra's
Optuna sweeper (`pip install .[tune]`) tunes any setting: a two-trial sweep on a toy task,
its direction the metric's."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest
import yaml
from helpers import single_thread_env
from hydra import compose, initialize_config_module
from hydra.core.hydra_config import HydraConfig
from omegaconf import open_dict

from seq2seq.cli import train as train_cli
from seq2seq.metrics import metric

# A toy run of one update with one validation, without attention (so no alignment images).
ONE_UPDATE = [
    "data=toy_reverse", "data.source.train_size=64", "data.source.valid_size=4", "data.source.test_size=4",
    "data.max_tokens=256", "encoder=gru", "decoder=gru", "attention=none",
    "encoder.hidden_size=8", "decoder.hidden_size=8", "model.embed_dim=8", "trainer.threads=1",
    "logging.progress_bar=false", "logging.tensorboard=false", "trainer.max_steps=1",
    "trainer.valid_every=1", "trainer.test_search.beam_size=1",
]  # fmt: skip


def test_the_task_function_returns_the_selected_metrics_best_value(tmp_path, monkeypatch):
    """What a Hydra sweeper receives from each job (the task function, as Hydra calls it)."""
    monkeypatch.chdir(tmp_path)
    overrides = [*ONE_UPDATE, f"data.root={tmp_path / 'data'}", "trainer.select_metric=loss"]
    with initialize_config_module(config_module="seq2seq.configs", version_base="1.3"):
        cfg = compose("train", overrides=overrides, return_hydra_config=True)
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(tmp_path / "run")
        cfg.hydra.runtime.cwd = str(tmp_path)
    HydraConfig.instance().set_config(cfg)
    with open_dict(cfg):
        del cfg["hydra"]  # as Hydra hands the config to the task
    try:
        value = train_cli.train_app.__wrapped__(cfg)
    finally:
        HydraConfig.instance().cfg = None  # no Hydra run is in progress for the other tests
    results = json.loads((tmp_path / "run" / "results.json").read_text(encoding="utf-8"))
    assert results["select_metric"] == "loss"
    assert value == results["valid_best_value"] == results["valid_best_scores"]["loss"]


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("hydra_plugins.hydra_optuna_sweeper") is None,
    reason="hydra-optuna-sweeper is not installed (pip install .[tune])",
)
def test_a_two_trial_optuna_sweep_tunes_on_the_selected_metric(tmp_path):
    selected = metric("loss")
    sweep = tmp_path / "sweep"
    command = [
        sys.executable, "-m", "seq2seq.cli.train", "-m", "hydra/sweeper=optuna",
        "hydra.sweeper.n_trials=2", "hydra.sweeper.n_jobs=1", "hydra.sweeper.sampler.seed=3",
        f"hydra.sweeper.direction={selected.direction}", "optim.lr=interval(0.001,0.05)",
        f"trainer.select_metric={selected.name}", *ONE_UPDATE, f"data.root={tmp_path / 'data'}",
        f"hydra.sweep.dir={sweep}", "hydra.sweep.subdir=${hydra.job.num}",
    ]  # fmt: skip
    done = subprocess.run(command, cwd=tmp_path, env=single_thread_env(), capture_output=True,
                          text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    trials = sorted(path for path in sweep.iterdir() if path.is_dir())
    assert [path.name for path in trials] == ["0", "1"]
    values = {}
    for trial in trials:
        results = json.loads((trial / "results.json").read_text(encoding="utf-8"))
        lr = yaml.safe_load((trial / ".hydra" / "config.yaml").read_text())["optim"]["lr"]
        values[lr] = results["valid_best_value"]
    assert len(values) == 2  # two settings tried
    reported = yaml.safe_load((sweep / "optimization_results.yaml").read_text())
    best_lr = min(values, key=values.get)  # minimize: the loss is lower-is-better
    assert reported["best_value"] == pytest.approx(values[best_lr])
    assert reported["best_params"]["optim.lr"] == pytest.approx(best_lr)
