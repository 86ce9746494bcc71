"""Files written whole or not at all, and the one file lock: what every writer shares.

A file is written to a temporary beside it, then renamed over it: `os.replace` is atomic
on one file system, so a reader sees the old file or the new one, never part of either,
and a process killed mid-write leaves only the temporary, whose name says it is one
(`<name>.<pid>.<random>.part`, or `.<name>.<pid>.<random>.tmp` for checkpoints) and who left
it. With `durable` the data is flushed to the disk (fsync) before the rename, so that a
power cut right after it cannot leave an empty file under the new name.

The lock is an advisory `flock` held on an open file or folder: the operating system
releases it when the descriptor is closed or its process dies, so a killed process never
blocks the next. Where the platform has no `fcntl` or the file system refuses locks, the
block runs unlocked (the writes are still atomic) and `file_lock` yields False.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import select
import stat
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

try:
    import fcntl
except ImportError:  # not on Windows: the per-process temporary names still keep writes whole
    fcntl = None

log = logging.getLogger(__name__)


class LockHeld(OSError):
    """`file_lock(..., wait=False)` found the lock held by another process."""


# ---------------------------------------------------------------- reading a user's file

FIFO_WAIT_S = 10.0  # how long a FIFO may stay silent before it is refused


@contextlib.contextmanager
def opened_for_reading(path: str | Path, *, wait_s: float | None = None) -> Iterator[BinaryIO]:
    """`path` open for reading in binary. A FIFO (a named pipe, `<(command)`) is opened
    without blocking and read only once something arrives or its writer closes; one that
    stays silent for `wait_s` (default `FIFO_WAIT_S`; a named pipe nobody writes to) is
    TimeoutError, an OSError whose `strerror` says what to give instead, not a read that
    never returns."""
    wait_s = FIFO_WAIT_S if wait_s is None else wait_s
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if stat.S_ISFIFO(os.fstat(descriptor).st_mode):
            ready, _, _ = select.select([descriptor], [], [], wait_s)
            if not ready:
                raise TimeoutError(
                    errno.ETIMEDOUT,
                    f"a FIFO that nothing was written to within {wait_s:g} s; give a regular file",
                )
        os.set_blocking(descriptor, True)
        stream = os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise
    with stream:
        yield stream


# ---------------------------------------------------------------- atomic writes


def temporary_name(target: Path, *, hidden: bool = False, suffix: str = ".part") -> Path:
    """A fresh name beside `target` for this process: its pid and a random part, so that
    parallel writers never share one."""
    name = f"{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}{suffix}"
    return target.with_name(f".{name}" if hidden else name)


@contextlib.contextmanager
def temporary_beside(target: Path, **naming) -> Iterator[Path]:
    """A new empty file beside `target` (`temporary_name`), removed on exit unless it was
    renamed (`replace`). Created with the usual permissions (the umask), unlike
    `tempfile.mkstemp`."""
    path = temporary_name(Path(target), **naming)
    path.open("xb").close()
    try:
        yield path
    finally:
        _remove_quietly(path)


def _remove_quietly(path: Path) -> None:
    """Remove a temporary on the way out, never raising: an error here (the folder made
    read-only meanwhile) would hide the error that is leaving, so it is only logged."""
    try:
        path.unlink(missing_ok=True)
    except OSError as error:
        log.warning("cannot remove the temporary %s (%s)", path, error.strerror or error)


def replace(temporary: Path, target: Path, *, previous: Path | None = None) -> None:
    """Rename the finished `temporary` over `target`; with `previous`, the file it replaces
    is first moved there (the older generation a reader can fall back on)."""
    if previous is not None and Path(target).is_file():
        os.replace(target, previous)
    os.replace(temporary, target)


def write_atomically(
    path: Path,
    data: bytes | memoryview,
    *,
    durable: bool = False,
    previous: Path | None = None,
    **naming,
) -> None:
    """Write `data` to `path` through a temporary file, so readers see the old or new file;
    with `durable`, fsync before the rename (module docstring); `previous`: see `replace`.
    On any error (OSError of a full disk, Ctrl-C) the temporary is removed."""
    with temporary_beside(path, **naming) as temporary:
        with open(temporary, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        replace(temporary, path, previous=previous)


# ---------------------------------------------------------------- the lock


@contextlib.contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """`file_lock` on a folder (created if missing), waiting for it: no lock file is left
    behind. Preparations and fetches of the same data folder take turns this way."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with file_lock(folder):
        yield


@contextlib.contextmanager
def file_lock(path: Path, *, wait: bool = True) -> Iterator[int | None]:
    """Hold an exclusive flock on `path` (a folder, or a file created if missing) for the
    block; yields the open descriptor (a file's is open for reading and writing), or None
    where the lock cannot be taken (module docstring). With `wait=False` a lock held by
    another process raises LockHeld at once instead of waiting. Not re-entrant: a process
    must not lock the same path twice."""
    descriptor = _open_for_lock(Path(path))
    if descriptor is not None and not _locked(descriptor, path, wait):
        os.close(descriptor)
        descriptor = None
    try:
        yield descriptor
    finally:
        if descriptor is not None:
            os.close(descriptor)  # closing the descriptor releases the lock


def _open_for_lock(path: Path) -> int | None:
    if fcntl is None:
        log.debug("no fcntl on this platform: %s is not locked", path)
        return None
    try:
        if path.is_dir():
            return os.open(path, os.O_RDONLY)
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as error:
        log.debug("cannot open %s to lock it (%s); going on unlocked", path, error)
        return None


def _locked(descriptor: int, path: Path, wait: bool) -> bool:
    """Take the lock; False where the file system refuses it, LockHeld when it is held."""
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        os.close(descriptor)
        raise LockHeld(f"{path} is locked by another process") from None
    except OSError as error:
        log.debug("cannot lock %s (%s); going on unlocked", path, error)
        return False
    return True
