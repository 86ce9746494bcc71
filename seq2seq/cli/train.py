"""`seq2seq-train`: the Hydra training app.

    seq2seq-train                                   # the default CPU model
    seq2seq-train encoder=gru decoder=gru attention=additive
    seq2seq-train -m attention=dot,general,additive # a sweep, one run folder each
    seq2seq-train +experiment=transformer_small trainer.max_steps=2000
    seq2seq-train trainer.resume=last               # continue the newest run
    seq2seq-train -m +cluster=slurm attention=dot,additive  # a sweep of SLURM jobs (submitit)
    seq2seq-train --config-dir lab 'plugins=[./lab/scores.py]' attention=scaled_general  # a plugin
    seq2seq-train -m hydra/sweeper=optuna hydra.sweeper.direction=maximize \
        hydra.sweeper.n_trials=20 'optim.lr=interval(1e-4,3e-3)'   # tune (pip install .[tune])
    torchrun --standalone --nproc_per_node=2 -m seq2seq.cli.train hydra.run.dir=outputs/ddp

A thin shell over `seq2seq.runs.assemble.train_and_test`, which does the work and which
tests and benchmarks call directly. It first imports the config's `plugins`
(`seq2seq.plugins`), so that the start-up checks, schemas, FLOPs, titles and the trainer
see their components; their YAML presets come from `--config-dir` or `hydra.searchpath`.

Exit codes: 0 done; 2 a one-line error about the input or the run (a config value, a
checkpoint, a data file, a run folder in use by another run, a checkpoint that could not be
written, a diverged run); 143 stopped by SIGTERM, SIGUSR1 or SIGUSR2 after saving `last.pt`
at a step boundary (preempted: rerun the same command with `trainer.resume=<run folder>`, or
`trainer.resume=auto` in the same folder). Under submitit the signal is then handed to
submitit's handler, which requeues the job (`seq2seq.runs.cluster`). Ctrl-C also saves
`last.pt` at a step boundary, then ends as an ordinary KeyboardInterrupt.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig

from seq2seq.checkpoint import CheckpointError
from seq2seq.cli.hydra_places import check_config_folders, run_hydra_app
from seq2seq.config.build import ConfigError
from seq2seq.config.schema import register_configs
from seq2seq.configs import SEARCH_PATH
from seq2seq.data.corpus import CorpusError
from seq2seq.data.fetch import FetchError
from seq2seq.plugins import PluginError, import_plugins
from seq2seq.runs import cluster
from seq2seq.runs.assemble import train_and_test
from seq2seq.runs.folder import RESULTS_NAME, RunFolderBusy
from seq2seq.training.trainer import TrainingDiverged, TrainingStopped

# Exit code of a run stopped by SIGTERM, SIGUSR1 or SIGUSR2 after saving `last.pt`: resumable.
PREEMPTED_EXIT = 143
# Errors that describe bad input or a run that cannot go on (a config value, a plugin, a
# file, a checkpoint, a busy run folder, a diverged run), reported in one line with exit code 2.
USER_ERRORS = (
    ConfigError, PluginError, CheckpointError, FetchError, CorpusError, RunFolderBusy,
    TrainingDiverged,
)  # fmt: skip
log = logging.getLogger(__name__)


def closing_lines(results: dict) -> list[str]:
    """What the user reads when a run ends: the test scores and where to look next."""
    test, run_dir = results["test"], Path(results["run_dir"])
    return [
        f"test BLEU {test['bleu']:.2f}  chrF {test['chrf']:.2f}  ({test['bleu_signature']})",
        f"run folder: {run_dir}",
        f"results:    {run_dir / RESULTS_NAME}",
        f"tensorboard --logdir {run_dir}",
    ]


PROGRAM = "seq2seq-train"
register_configs()


def main() -> float | None:
    """Console entry point: the config folders a user names checked (`seq2seq.cli.
    hydra_places.check_config_folders`), then the Hydra app."""
    check_config_folders(sys.argv[1:], PROGRAM)
    return run_hydra_app(train_app, PROGRAM)


@hydra.main(version_base="1.3", config_path=SEARCH_PATH, config_name="train")
def train_app(cfg: DictConfig) -> float | None:
    """Train and test; returns the best valid value of `trainer.select_metric` (its own
    sign: BLEU up, loss down), which Hydra's sweepers read (`hydra/sweeper=optuna` with
    `hydra.sweeper.direction` the metric's, `maximize` for BLEU); None on ranks but 0."""
    hydra_cfg = HydraConfig.get()
    run_dir = Path(hydra_cfg.runtime.output_dir)
    outputs_root = Path(hydra_cfg.runtime.cwd) / "outputs"
    cluster.export_submitit_ranks()  # a submitit job of several tasks: torchrun's variables
    try:
        # The user's plugins join the registry before anything reads it; relative specs
        # are found from the folder the command was started in, whatever hydra.job.chdir.
        import_plugins(cfg.plugins, base=hydra_cfg.runtime.cwd)
        results = train_and_test(cfg, run_dir, outputs_root)
    except USER_ERRORS as error:  # one clear line, not a traceback
        log.error("%s", error)
        raise SystemExit(2) from error
    except TrainingStopped as stopped:  # preempted; the trainer logged how to resume
        cluster.hand_back(stopped.signum)  # submitit: requeue the job (and exit)
        raise SystemExit(PREEMPTED_EXIT) from stopped
    if not results:  # a data-parallel rank but 0
        return None
    print("\n".join(closing_lines(results)))
    return results["valid_best_value"]


if __name__ == "__main__":
    main()
