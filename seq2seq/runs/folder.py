"""The run folder: one training process at a time, and which checkpoint a resume uses."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from seq2seq.checkpoint import CheckpointError
from seq2seq.files import LockHeld, file_lock

LOCK_NAME = "train.lock"  # the run folder's lock file (see `run_folder_lock`)
RESULTS_NAME = "results.json"  # what a finished run scored (`seq2seq.runs.assemble`)
log = logging.getLogger(__name__)


class RunFolderBusy(RuntimeError):
    """Another training process is writing to the run folder."""


@contextlib.contextmanager
def run_folder_lock(run_dir: Path) -> Iterator[None]:
    """Hold the lock of `run_dir/train.lock` (`seq2seq.files.file_lock`) for the block, the
    holder's pid written in it; raise RunFolderBusy naming the folder and the holder's pid
    when another process holds it. The operating system releases the lock when its process
    dies, so a killed run never blocks a resume."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / LOCK_NAME
    with contextlib.ExitStack() as stack:
        try:
            descriptor = stack.enter_context(file_lock(path, wait=False))
        except LockHeld:
            holder = path.read_text(encoding="utf-8").strip() or "unknown"
            raise RunFolderBusy(
                f"run folder {run_dir} is in use by another training process (pid {holder}, "
                f"lock file {path}); wait for it to end or give another hydra.run.dir"
            ) from None
        if descriptor is None:  # a file system without flock: train unguarded
            log.warning("cannot lock %s; not guarding the run folder", path)
        else:
            os.ftruncate(descriptor, 0)
            os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
        yield  # leaving the stack closes the descriptor, which releases the lock


def remove_stale_temporaries(run_dir: Path) -> None:
    """Delete checkpoint temporaries left by a process killed mid-write (only call this
    while holding the run folder's lock: then no other process is writing one)."""
    for stale in (run_dir / "checkpoints").glob(".*.tmp"):
        stale.unlink(missing_ok=True)
        log.info("removed %s, left by an interrupted checkpoint write", stale)


def resolve_resume(resume: str | None, run_dir: Path, outputs_root: Path) -> Path | None:
    """A checkpoint path from `trainer.resume`: a file, a run folder, `last` (the newest
    `last.pt` under the outputs folder) or `auto` (`resumable_checkpoint(run_dir)`)."""
    if not resume:
        return None
    if resume == "auto":
        return resumable_checkpoint(run_dir)
    if resume == "last":  # a folder whose last.pt was lost mid-rotation still counts
        found = [
            p
            for name in ("last.pt", "last.prev.pt")
            for p in outputs_root.glob(f"**/checkpoints/{name}")
            if run_dir not in p.parents
        ]
        if not found:
            raise CheckpointError(
                f"trainer.resume=last: no checkpoints/last.pt under {outputs_root}"
            )
        return max(found, key=lambda p: p.stat().st_mtime).with_name("last.pt")
    path = Path(resume)
    return path / "checkpoints" / "last.pt" if path.is_dir() else path


def resumable_checkpoint(run_dir: Path) -> Path | None:
    """`trainer.resume=auto`: the run folder's own `checkpoints/last.pt` when the folder
    holds one (or only its previous version, `last.prev.pt`, left by a kill mid-rotation),
    else None: a new run starts there. This is what a requeued job needs, since it is
    started again with the same command and the same folder (a submitit job, a sweep job,
    a fixed `hydra.run.dir`). A finished run (`results.json`) resumes too: its training is
    over, so it only tests again, rather than training anew over its checkpoints."""
    checkpoints = run_dir / "checkpoints"
    if not any((checkpoints / name).is_file() for name in ("last.pt", "last.prev.pt")):
        log.info("trainer.resume=auto: no checkpoint in %s, starting a new run", run_dir)
        return None
    if (run_dir / RESULTS_NAME).is_file():
        log.info("trainer.resume=auto: %s has finished; testing it again", run_dir)
    else:
        log.info("trainer.resume=auto: continuing the run in %s", run_dir)
    return checkpoints / "last.pt"
