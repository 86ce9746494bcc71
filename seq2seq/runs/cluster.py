"""Running under a job launcher: submitit (SLURM, or its local executor) through Hydra.

    seq2seq-train -m +cluster=slurm hydra.launcher.partition=gpu attention=dot,additive

Two things differ from torchrun:

- Ranks. submitit starts one process per task (`tasks_per_node` × `nodes`) with SLURM's
  variables (SLURM_PROCID, SLURM_LOCALID, SLURM_NTASKS; SUBMITIT_LOCAL_* locally), not
  torchrun's RANK / LOCAL_RANK / WORLD_SIZE / MASTER_ADDR. `export_submitit_ranks` writes
  the torchrun variables from submitit's job environment (rank 0's host as the rendezvous,
  a port drawn from the job id), so `seq2seq.training.distributed` needs no second reader.
- Preemption. Before a time limit submitit has SLURM send SIGUSR2 (`signal_delay_s`
  before it); its own handler would requeue at once, losing the steps since the last
  checkpoint. While training, the trainer's handler takes the signal instead and saves
  `last.pt` at the next step boundary; `hand_back` then gives the signal to the handler it
  replaced, submitit's, which resubmits the same job and exits. The requeued job runs the
  same command in the same run folder and, with `trainer.resume=auto`, continues from
  that `last.pt`.
"""

from __future__ import annotations

import logging
import os
import signal

log = logging.getLogger(__name__)


def under_submitit() -> bool:
    """Whether this process is a submitit job (it sets SUBMITIT_EXECUTOR for its tasks)."""
    return bool(os.environ.get("SUBMITIT_EXECUTOR"))


def export_submitit_ranks() -> bool:
    """In a submitit job of several tasks, set torchrun's variables from submitit's job
    environment; returns whether it did. Nothing changes outside submitit, in a job of one
    task, or when RANK is already set (torchrun inside the job)."""
    if not under_submitit() or "RANK" in os.environ:
        return False
    from submitit.helpers import TorchDistributedEnvironment  # only under submitit

    ranks = TorchDistributedEnvironment()
    if ranks.world_size < 2:
        return False
    # Every task keeps every GPU of its node in view and takes cuda:LOCAL_RANK.
    ranks.export(set_cuda_visible_devices=False)
    log.info(
        "submitit: rank %d of %d (local rank %d), rendezvous %s:%d",
        ranks.rank, ranks.world_size, ranks.local_rank, ranks.master_addr, ranks.master_port,
    )  # fmt: skip
    return True


def hand_back(signum: int | None) -> None:
    """After the trainer saved `last.pt` on `signum`, call the Python handler that was
    installed for it before training (submitit's checkpoint-and-requeue, which exits the
    process on rank 0). Nothing happens without one (the default action, or no signal)."""
    if signum is None or signum == signal.SIGINT:
        return
    handler = signal.getsignal(signum)
    if callable(handler) and handler is not signal.default_int_handler:
        log.info("passing %s on to the job launcher's handler", signal.Signals(signum).name)
        handler(signum, None)
