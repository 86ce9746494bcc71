"""The run folder: one training process at a time, and which checkpoint a resume uses."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

from seq2seq.checkpoint import CheckpointError
from seq2seq.files import LockHeld, file_lock

LOCK_NAME = "train.lock"  # the run folder's lock file (see `run_folder_lock`)
RESULTS_NAME = "results.json"  # what a finished run scored (`seq2seq.runs.assemble`)
# The name `save_checkpoint` gives its temporary (`seq2seq.files.temporary_name`, hidden,
# `.tmp`): `.best.pt.<pid>.<8 hex digits>.tmp`, or `.best.pt.<pid>.tmp` as earlier versions
# named it. Nothing else in `checkpoints/` is removed.
CHECKPOINT_TEMPORARY = re.compile(r"\.[^/]+\.pt\.[0-9]+(?:\.[0-9a-f]{8})?\.tmp")
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
    while holding the run folder's lock: then no other process is writing one): regular
    files named as `save_checkpoint` names them (`CHECKPOINT_TEMPORARY`), nothing else (a
    user's `.notes.tmp`, a folder or a link is left alone)."""
    folder = run_dir / "checkpoints"
    if not folder.is_dir():
        return
    for stale in folder.iterdir():
        if CHECKPOINT_TEMPORARY.fullmatch(stale.name) and _regular_file(stale):
            stale.unlink(missing_ok=True)
            log.info("removed %s, left by an interrupted checkpoint write", stale)


def _regular_file(path: Path) -> bool:
    """A regular file itself, not a link, a folder or a FIFO; False if it is gone."""
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


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


# The files a run writes at the top of its folder (and appends to: metrics.jsonl).
RUN_OUTPUTS = (RESULTS_NAME, "metrics.jsonl", "test.hyp", "test.ref")


def check_new_run_folder(run_dir: Path, *, locked_before: bool) -> None:
    """A new run (no `trainer.resume`) must not start over another run's checkpoints: its
    `best.pt` and `last.pt` would replace theirs and push out their previous versions; nor
    over a folder of the user's (`hydra.run.dir=.`) holding a file a run writes
    (`RUN_OUTPUTS`), unless the folder is a run folder (`locked_before`: it held the lock
    file before this run took the lock; a run stopped before its first checkpoint).
    CheckpointError, one line naming the folder and how to go on."""
    theirs = [name for name in RUN_OUTPUTS if (run_dir / name).exists()]
    if theirs and not locked_before:
        raise CheckpointError(
            f"{run_dir} is not a run folder but holds {', '.join(theirs)}, which a run would "
            "overwrite; give a new hydra.run.dir"
        )
    folder = run_dir / "checkpoints"
    found = sorted(path.name for path in folder.glob("*.pt")) if folder.is_dir() else []
    if found:
        raise CheckpointError(
            f"run folder {run_dir} already holds the checkpoints of a run "
            f"({', '.join(found[:3])}{', ...' if len(found) > 3 else ''}); continue it with "
            "trainer.resume=auto, or give a new hydra.run.dir"
        )


# What a run folder holds whatever stopped it: the lock, Hydra's record, the metrics log.
RUN_FOLDER_MARKS = (LOCK_NAME, ".hydra/config.yaml", "metrics.jsonl")


def resume_folder(resume_path: Path, run_dir: Path) -> Path:
    """Where a resumed run goes on writing: the run folder the checkpoint came from when it
    is one (`<run>/checkpoints/<name>.pt`, the run holding one of `RUN_FOLDER_MARKS`), else
    the new `run_dir`. A checkpoint kept anywhere else (`~/Downloads/model.pt`) never makes
    the folder above it a run folder, whose `results.json`, `test.hyp` or `checkpoints/`
    training would overwrite."""
    original = resume_path.parent.parent
    if resume_path.parent.name == "checkpoints" and any(
        (original / mark).is_file() for mark in RUN_FOLDER_MARKS
    ):
        return original
    log.info("%s is not in a run folder's checkpoints/: the run continues in %s",
             resume_path, run_dir)  # fmt: skip
    return run_dir


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
