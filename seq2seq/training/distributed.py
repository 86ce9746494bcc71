"""Data-parallel training with PyTorch's DistributedDataParallel, started by `torchrun`.

    torchrun --standalone --nproc_per_node=2 -m seq2seq.cli.train hydra.run.dir=outputs/ddp

torchrun starts one process per rank and sets RANK, LOCAL_RANK and WORLD_SIZE (plus the
rendezvous address). Every rank builds the same model and walks the same seeded batch order
of each epoch; rank r trains on batches r, r + W, r + 2W, ... and DDP averages the gradients,
so one optimiser update consumes W batches, as `trainer.accumulate=W` does in one process.
Rank 0 alone validates, writes checkpoints and logs, and evaluates on the test split; the
other ranks receive its validation scores, so schedules and early stopping stay in step.
A checkpoint holds every rank's random state, so a resume with the same number of ranks
continues exactly; each rank's data position is the same count of whole groups of W batches.
Backend: NCCL on CUDA, gloo on the CPU.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from seq2seq.checkpoint import capture_rng_states

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class Distributed:
    """This process's place among the ranks; the defaults describe a single process."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def broadcast(self, value: T) -> T:
        """Rank 0's `value` (any picklable object) on every rank."""
        if not self.enabled:
            return value
        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def gather(self, value: T) -> list[T]:
        """Every rank's `value` (any picklable object), in rank order, on every rank."""
        if not self.enabled:
            return [value]
        box: list[Any] = [None] * self.world_size
        dist.all_gather_object(box, value)
        return box

    def any(self, flag: bool, device: torch.device) -> bool:
        """True on every rank when `flag` is true on at least one."""
        if not self.enabled:
            return flag
        tensor = torch.tensor([int(flag)], device=device)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX)
        return bool(tensor.item())

    @contextlib.contextmanager
    def main_first(self) -> Iterator[None]:
        """Rank 0 runs the block before the others (it writes caches they then read)."""
        if self.enabled and not self.is_main:
            dist.barrier()
        yield
        if self.enabled and self.is_main:
            dist.barrier()


class RankEnvironmentError(ValueError):
    """The environment describes ranks that cannot be (one line naming the variable)."""


MAX_WORLD_SIZE = 65536  # ranks; far above any machine's or cluster's process count


def from_environment(environment: dict[str, str] | None = None) -> Distributed:
    """The ranks torchrun describes in the environment; a single process without it.
    RankEnvironmentError for a variable that is not a whole number in range (`RANK=banana`,
    a RANK not below WORLD_SIZE), or several ranks without torchrun's MASTER_ADDR and
    MASTER_PORT: these ended in a ValueError traceback from `int()` or from the rendezvous."""
    environment = os.environ if environment is None else environment
    world_size = _rank_variable(environment, "WORLD_SIZE", "1", 1, MAX_WORLD_SIZE)
    rank = _rank_variable(environment, "RANK", "0", 0, world_size - 1)
    local_rank = _rank_variable(environment, "LOCAL_RANK", "0", 0, MAX_WORLD_SIZE - 1)
    if world_size > 1:
        missing = [name for name in ("MASTER_ADDR", "MASTER_PORT") if not environment.get(name)]
        if missing:
            raise RankEnvironmentError(
                f"WORLD_SIZE={world_size} but {' and '.join(missing)} not set: start several "
                "ranks with torchrun, which sets them"
            )
    return Distributed(rank=rank, local_rank=local_rank, world_size=world_size)


def _rank_variable(environment, name: str, default: str, low: int, high: int) -> int:
    text = environment.get(name, default)
    try:
        value = int(text.strip(), 10)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        raise RankEnvironmentError(
            f"the environment variable {name}={text[:40]!r} must be a whole number from "
            f"{low} to {high}"
        )
    return value


def rank_device(device: torch.device, ranks: Distributed) -> torch.device:
    """Each rank's own GPU (`cuda:LOCAL_RANK`); the CPU is shared."""
    if device.type != "cuda" or not ranks.enabled:
        return device
    device = torch.device("cuda", ranks.local_rank)
    torch.cuda.set_device(device)
    return device


def start(ranks: Distributed, device: torch.device) -> None:
    """Join the process group (NCCL for CUDA, gloo for the CPU)."""
    if ranks.enabled and not dist.is_initialized():
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend, rank=ranks.rank, world_size=ranks.world_size)


def stop() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def wrap(model: torch.nn.Module, ranks: Distributed, device: torch.device) -> torch.nn.Module:
    """The module the training forward pass goes through: DDP over `model` when there are
    several ranks (it broadcasts rank 0's weights now, then averages every gradient)."""
    if not ranks.enabled:
        return model
    device_ids = [device.index] if device.type == "cuda" else None
    # Some settings leave parameters out of a forward pass (e.g. a bridge the decoder
    # does not use); DDP must then not wait for their gradients.
    return torch.nn.parallel.DistributedDataParallel(
        model, device_ids=device_ids, find_unused_parameters=True
    )


def shard(batches: Sequence[Any], position: int, ranks: Distributed) -> Iterator[tuple[int, Any]]:
    """This rank's batches of one epoch from `position` on, with the position after each.

    The epoch is read in groups of W consecutive batches, rank r taking the r-th of each;
    a last incomplete group is skipped so every rank makes the same number of updates."""
    world = ranks.world_size
    usable = len(batches) - len(batches) % world
    for start_index in range(position, usable, world):
        yield start_index + world, batches[start_index + ranks.rank]


def stream(
    batches_of_epoch: Callable[[int], Sequence[T]],
    epoch: int,
    position: int,
    ranks: Distributed,
    max_epochs: int,
) -> Iterator[tuple[T, tuple[int, int]]]:
    """This rank's batches from (`epoch`, `position`) on, across epochs up to `max_epochs`,
    each with the (epoch, position) the data stands at once it is consumed: the next group,
    or (epoch + 1, 0) after an epoch's last group. A trainer commits that cursor to its
    progress only when the batch's update has been applied, so a run that stops between two
    updates resumes at the first batch of the one it did not finish."""
    while epoch < max_epochs:
        batches = batches_of_epoch(epoch)
        end = len(batches) - len(batches) % ranks.world_size
        for after, batch in shard(batches, position, ranks):
            yield batch, ((epoch, after) if after < end else (epoch + 1, 0))
        epoch, position = epoch + 1, 0


def gathered_rng_states(ranks: Distributed) -> list[dict[str, Any]] | None:
    """Every rank's random state, in rank order, for a checkpoint; None in one process.
    (Sent as bytes: tensors in a gathered object do not survive the trip.)"""
    if not ranks.enabled:
        return None
    buffer = io.BytesIO()
    torch.save(capture_rng_states(), buffer)
    blobs = ranks.gather(buffer.getvalue())
    return [torch.load(io.BytesIO(blob), weights_only=True) for blob in blobs]


def own_rng_state(payload: dict[str, Any], ranks: Distributed) -> dict[str, Any]:
    """This rank's random state saved in a checkpoint; rank 0's (with a warning) when the
    checkpoint was written by another number of ranks, which cannot resume exactly."""
    states = payload.get("rank_rng")
    if states is not None and len(states) == ranks.world_size:
        return states[ranks.rank]
    if ranks.enabled or states is not None:
        saved = len(states) if states is not None else 1
        log.warning(
            "checkpoint written by %d rank(s), resumed on %d: the random state (dropout) "
            "continues from rank 0's, so the run does not repeat exactly",
            saved, ranks.world_size,
        )  # fmt: skip
    return payload["rng"]
