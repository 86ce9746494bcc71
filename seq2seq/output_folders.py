"""Output places checked before the work, and output folders replaced only when they are ours.

Every command that writes into a folder the user names (`seq2seq-export OUT`, the compare
report's `report.out_dir`, `seq2seq-lab --out`, the docs-site build) checks the place
before any work starts, `check_output_place`: it exists or can be made (its nearest
existing parent is a folder we can write in), it is a folder (a link to a folder is
followed and the folder checked), and a file can really be created in it (a probe file,
made and removed: permission bits say nothing for root, a read-only mount or an immutable
folder). A place that fails is one `OutputPlaceError` line naming the path and why, not a
traceback after hours of work.

An output file a command writes (`seq2seq-translate --html`/`--plot`, `seq2seq-align -o`,
`seq2seq-evaluate -o`, `seq2seq-data synth OUTPUT`, ...) is checked the same way before the
work, `check_output_file`: not a folder, a regular file if it exists (a FIFO or a device
is refused: the write replaces the file), and its folder exists or can be made and takes a
new file. It is then written whole or not at all, `writing_file` / `write_output_file`: into
a temporary beside it, renamed over it once complete, so a write that fails late keeps the
earlier file's bytes; an OSError is one line naming the option and the path.

A command that writes a whole folder and may replace an earlier one (`seq2seq-export
--force`) goes through `claim_output_folder` and `OutputFolder.writing`:

* it recognises its own output by the manifest it writes into every folder it makes
  (`.seq2seq-output.json`: the command and the names of the files it wrote). A non-empty
  folder is replaced only when it holds that manifest, of the same command, and nothing
  but the files it lists; never when it holds a checkpoint (`*.pt`), and never the
  current folder, the root or home folder, or a folder holding one of the command's
  inputs (nor any folder above these). Refusals come before the work, and are checked
  again just before the swap;
* the new output is written into a hidden temporary folder beside the target
  (`.<name>.<pid>.<random>.new`), which gets its manifest last; only then the old folder
  is renamed aside, the new one renamed in, and the old one removed. A failure at any
  moment before (a full disk, Ctrl-C, an error in the conversion) removes the temporary
  and leaves the old output as it was; an OSError is then one line naming the path. An
  empty existing folder is filled by the same swap (keeping its permission bits). The
  temporary folders of a writer killed mid-way (its pid gone) are removed by the next.

A cache a command removes when it is damaged (the encoding and links caches of a prepared
folder) must be a real folder holding only files named as the cache names them
(`remove_recognised_folder`); a folder a command keeps its work in and cleans (the data
benchmark's `--work`) must be empty or marked by that command (`claim_work_folder`).
Anything else there is one line, and nothing is removed.

    place = claim_output_folder(out, command="seq2seq-export", inputs=[ckpt], force=force)
    ...                                   # the long work, nothing written yet
    with place.writing() as folder:       # a temporary folder beside `out`
        write_everything_into(folder)     # swapped in when the block ends without error
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import logging
import os
import re
import shutil
import stat
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from seq2seq.files import replace, temporary_beside

log = logging.getLogger(__name__)
MANIFEST = ".seq2seq-output.json"
MANIFEST_FORMAT = 1
MANIFEST_LIMIT = 1024 * 1024  # bytes; a manifest lists a few dozen names
ENTRIES_LIMIT = 100_000  # a folder with more entries than this is not one of our outputs
CHECKPOINT_SUFFIX = ".pt"


class OutputPlaceError(ValueError):
    """An output place that cannot be written, or a folder a command will not replace; the
    message is one line starting with the path."""


# ---------------------------------------------------------------- the place


def check_output_place(path: str | Path) -> Path:
    """The folder `path` (links followed) once it is sure it can be written: an existing
    folder in which a file can be created, or a missing one whose nearest existing parent
    is such a folder. OutputPlaceError (one line) otherwise; nothing is created."""
    path = Path(path)
    try:
        if path.is_symlink() and not path.exists():
            raise OutputPlaceError(f"{path}: a link to {os.readlink(path)}, which does not exist")
        target = path.resolve()
    except (OSError, RuntimeError) as error:  # a link loop on the way (RuntimeError before 3.13)
        raise OutputPlaceError(f"{path}: cannot be followed ({_reason(error)})") from None
    if target.exists():
        if not target.is_dir():
            raise OutputPlaceError(f"{path}: exists and is not a folder")
        _check_writable(target, path)
        return target
    parent = _nearest_existing(target)
    if not parent.is_dir():
        raise OutputPlaceError(f"{path}: cannot be made, {parent} is not a folder")
    _check_writable(parent, path)
    return target


def _nearest_existing(path: Path) -> Path:
    for parent in path.parents:
        if parent.exists():
            return parent
    return Path(path.anchor)


def _check_writable(folder: Path, given: Path) -> None:
    """OutputPlaceError unless a file can be made (and removed) in `folder`."""
    problem = _write_problem(folder)
    if problem is not None:
        where = "" if str(folder) == os.path.realpath(given) else f" in {folder}"
        raise OutputPlaceError(f"{given}: cannot write{where} ({problem})")


def _write_problem(folder: Path) -> str | None:
    """Why a file cannot be made (and removed) in `folder`, really tried; None if it can."""
    probe = folder / f".seq2seq-probe.{os.getpid()}.{uuid.uuid4().hex[:8]}"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        os.unlink(probe)
    except OSError as error:
        return error.strerror or str(error)
    return None


# ---------------------------------------------------------------- an output file


def check_output_file(path: str | Path, option: str | None = None) -> Path:
    """The file `path` names (links followed) once it is sure it can be written: not a
    folder, a regular file if it exists (never a FIFO, a device or a socket, which the
    atomic write would replace), opened for writing without a byte changed, in a folder
    that exists or can be made and in which a file can really be created. OutputPlaceError
    (one line starting with `option` and the path) otherwise; nothing is created."""
    given = Path(path)
    name = f"{option} {given}" if option else str(given)
    try:
        target = given.resolve()
        status = os.stat(target) if os.path.lexists(target) else None
    except (OSError, RuntimeError) as error:  # a link loop on the way (RuntimeError before 3.13)
        raise OutputPlaceError(f"{name}: cannot be followed ({_reason(error)})") from None
    if status is not None:
        _check_existing_file(target, status, name)
    parent = _nearest_existing(target)
    if not parent.is_dir():
        raise OutputPlaceError(f"{name}: cannot be made, {parent} is not a folder")
    problem = _write_problem(parent)
    if problem is not None:
        raise OutputPlaceError(f"{name}: cannot write in {parent} ({problem})")
    return target


def _check_existing_file(target: Path, status: os.stat_result, name: str) -> None:
    """OutputPlaceError unless the existing `target` is a regular file open for writing."""
    if stat.S_ISDIR(status.st_mode):
        raise OutputPlaceError(f"{name}: is a folder; give a file name")
    if not stat.S_ISREG(status.st_mode):
        raise OutputPlaceError(
            f"{name}: is not a regular file (a FIFO, a device or a socket); give a file name"
        )
    try:  # opened, not truncated: its bytes stay; refused when immutable or read-only
        os.close(os.open(target, os.O_WRONLY | os.O_NONBLOCK))
    except OSError as error:
        raise OutputPlaceError(f"{name}: cannot be written ({_reason(error)})") from None


@contextlib.contextmanager
def writing_file(path: str | Path, option: str | None = None) -> Iterator[Path]:
    """A temporary file beside the output file `path` (checked, `check_output_file`), with
    the same extension, to write into; renamed over the target when the block ends without
    error, so a failure leaves the earlier file's bytes as they were and removes the
    temporary. An OSError is one OutputPlaceError line naming `option` and the path."""
    name = f"{option} {path}" if option else str(path)
    target = check_output_file(path, option)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with temporary_beside(target, hidden=True, suffix=f".part{target.suffix}") as temporary:
            yield temporary
            if target.exists():
                _keep_mode(target, temporary)
            replace(temporary, target)
    except OSError as error:
        raise OutputPlaceError(f"{name}: cannot be written ({_reason(error)})") from error


def write_output_file(path: str | Path, data: str | bytes, option: str | None = None) -> Path:
    """Write `data` (text as UTF-8) to the output file `path` whole or not at all
    (`writing_file`); returns the file written."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with writing_file(path, option) as temporary:
        temporary.write_bytes(raw)
    return Path(path).resolve()


def _reason(error: BaseException) -> str:
    return getattr(error, "strerror", None) or str(error) or type(error).__name__


def place_error(error: OSError, given: str | Path) -> OutputPlaceError:
    """An OSError met while writing output, as one line naming the file (or `given`)."""
    path = error.filename or given
    return OutputPlaceError(f"{path}: cannot be written ({error.strerror or error})")


# ---------------------------------------------------------------- replacing a folder


@dataclass(frozen=True)
class OutputFolder:
    """A checked output folder of `command`: `given` as the user named it, `target` the
    folder it names (links followed), `inputs` the paths it must never replace."""

    given: Path
    target: Path
    command: str
    inputs: tuple[Path, ...] = ()

    @contextlib.contextmanager
    def writing(self) -> Iterator[Path]:
        """A new temporary folder beside the target to write the output into; when the
        block ends without error it gets the manifest and is swapped in (module docstring).
        Any failure removes it and leaves the target as it was; an OSError becomes one
        OutputPlaceError line."""
        temporary = _sibling(self.target, "new")
        try:
            temporary.parent.mkdir(parents=True, exist_ok=True)
            temporary.mkdir()
            yield temporary
            write_manifest(temporary, self.command)
            self._swap_in(temporary)
        except OSError as error:
            raise place_error(error, self.given) from error
        finally:
            if temporary.exists():
                shutil.rmtree(temporary, ignore_errors=True)

    def _swap_in(self, temporary: Path) -> None:
        """Rename the old folder aside, the new one in, then remove the old one."""
        if not os.path.lexists(self.target):
            os.rename(temporary, self.target)
            return
        check_replaceable(self.target, self.given, self.command, self.inputs)
        aside = _sibling(self.target, "old")
        os.rename(self.target, aside)
        try:
            _keep_mode(aside, temporary)
            os.rename(temporary, self.target)
        except BaseException:
            _put_back(aside, self.target)
            raise
        shutil.rmtree(aside, ignore_errors=True)


def _put_back(aside: Path, target: Path) -> None:
    """Rename the old folder back after a failed swap, without raising: the error that made
    the swap fail (Ctrl-C included) is the one to report. When the new folder is already in
    place (a signal after the rename), or the rename back fails, the old one stays aside
    (`.TARGET.<pid>.<rand>.old`, removed by the next run once this process is gone)."""
    try:
        if not os.path.lexists(target):
            os.rename(aside, target)
    except OSError as error:
        log.error("could not rename %s back to %s (%s); the earlier output is there",
                  aside, target, _reason(error))  # fmt: skip


def claim_output_folder(
    path: str | Path, *, command: str, inputs: Iterable[str | Path] = (), force: bool = False
) -> OutputFolder:
    """Check, before any work, that `command` may write its output folder at `path`: a
    writable place (`check_output_place`) that is missing, empty, or an earlier output of
    `command` (replaced only with `force`). OutputPlaceError (one line) otherwise."""
    given = Path(path)
    target = check_output_place(given)
    inputs = tuple(Path(item) for item in inputs)
    if target.exists():
        check_replaceable(target, given, command, inputs)
        _check_writable(target.parent, given)  # where the new folder is written and swapped
        if not force and _entries(target, given):
            raise OutputPlaceError(
                f"{given} holds an earlier {command} output; pass --force to replace it"
            )
    remove_stale_siblings(target)
    return OutputFolder(given, target, command, inputs)


def remove_stale_siblings(target: Path) -> None:
    """Remove the temporary folders beside `target` that a writer killed mid-way left
    (`.<name>.<pid>.<random>.new` or `.old`, `_sibling`) when their process is gone."""
    pattern = re.compile(rf"\.{re.escape(target.name)}\.(\d+)\.[0-9a-f]{{8}}\.(?:new|old)")
    with contextlib.suppress(OSError):
        for entry in target.parent.iterdir():
            match = pattern.fullmatch(entry.name)
            if match and entry.is_dir() and not entry.is_symlink():
                if not _process_alive(int(match.group(1))):
                    shutil.rmtree(entry, ignore_errors=True)
                    log.info("removed %s, left by an interrupted writer", entry)


def _process_alive(pid: int) -> bool:
    """Whether `pid` may be a running process (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def check_replaceable(target: Path, given: Path, command: str, inputs: Iterable[Path] = ()) -> None:
    """OutputPlaceError unless `command` may replace the existing folder `target`: not a
    protected folder (`refuse_protected`), and empty or holding only its own output."""
    refuse_protected(target, given, inputs)
    entries = _entries(target, given)
    if not entries:
        return
    for entry in entries:
        if entry.endswith(CHECKPOINT_SUFFIX):
            raise OutputPlaceError(
                f"{given} holds a checkpoint ({entry}); choose another folder for the output"
            )
    listed = _manifest_files(target, command)
    foreign = sorted(entry for entry in entries if not _listed(entry, listed))
    if foreign:
        raise OutputPlaceError(
            f"{given} holds files {command} did not write (e.g. {foreign[0]}); choose "
            "another folder or empty it yourself"
        )


def refuse_protected(target: Path, given: Path, inputs: Iterable[Path] = ()) -> None:
    """OutputPlaceError when `target` is, or holds, the current folder, the home folder,
    the root folder or one of `inputs`: a command never replaces those."""
    target = target.resolve()
    protected = [("the current folder", Path.cwd), ("the root folder", lambda: target.anchor),
                 ("the home folder", Path.home)]  # fmt: skip
    protected += [(f"the input {item}", lambda item=item: item) for item in inputs]
    for name, find in protected:
        try:
            place = Path(find()).resolve()
        except (OSError, RuntimeError, KeyError):  # no home or current folder, a link loop
            continue
        if place == target or target in place.parents:
            holds = "is" if place == target else "holds"
            raise OutputPlaceError(f"{given} {holds} {name}; refusing to replace it")


def _entries(folder: Path, given: Path) -> list[str]:
    """Relative names of everything under `folder` (links not followed), at most
    ENTRIES_LIMIT of them; folders end with '/'."""
    found: list[str] = []
    pending = [folder]
    try:
        while pending:
            current = pending.pop()
            with os.scandir(current) as scan:
                for entry in scan:
                    relative = Path(entry.path).relative_to(folder).as_posix()
                    if entry.is_dir(follow_symlinks=False):
                        found.append(relative + "/")
                        pending.append(Path(entry.path))
                    else:
                        found.append(relative)
                    if len(found) > ENTRIES_LIMIT:
                        raise OutputPlaceError(
                            f"{given} holds over {ENTRIES_LIMIT} entries; not an output to replace"
                        )
    except OSError as error:
        raise place_error(error, given) from None
    return found


def _listed(entry: str, listed: set[str]) -> bool:
    """Whether `entry` is the manifest, a listed file, or a folder above a listed file."""
    if entry == MANIFEST or entry in listed:
        return True
    return entry.endswith("/") and any(name.startswith(entry) for name in listed)


# ---------------------------------------------------------------- the manifest


def write_manifest(folder: Path, command: str) -> None:
    """Record in `folder` that `command` wrote it, and every file it holds now."""
    files = sorted(entry for entry in _entries(folder, folder) if not entry.endswith("/"))
    record = {"format": MANIFEST_FORMAT, "command": command, "files": files}
    (folder / MANIFEST).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


def _manifest_files(folder: Path, command: str) -> set[str]:
    """The files the manifest of `folder` lists when `command` wrote it; else an empty set
    (no manifest, another command's, or one that cannot be read: nothing is ours)."""
    record = _read_manifest(folder / MANIFEST)
    if record.get("command") != command or record.get("work") is True:
        return set()
    files = record.get("files")
    if not isinstance(files, list) or not all(isinstance(name, str) for name in files):
        return set()
    return set(files)


def _read_manifest(path: Path) -> dict:
    """The manifest at `path` as a dict; empty when missing, too big or not a JSON object."""
    try:
        status = path.lstat()
        if not stat.S_ISREG(status.st_mode) or status.st_size > MANIFEST_LIMIT:
            return {}
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return {}
    return record if isinstance(record, dict) else {}


# ---------------------------------------------------------------- caches and work folders


def remove_recognised_folder(folder: str | Path, patterns: Iterable[str], *, what: str) -> None:
    """Remove the cache folder `folder` when it is ours: a real folder (not a link) whose
    every entry is a file named as `what` names its files (`patterns`, fnmatch). A link,
    a subfolder or any other name is OutputPlaceError (one line) and nothing is removed."""
    folder, patterns = Path(folder), list(patterns)
    if folder.is_symlink() or not folder.is_dir():
        raise OutputPlaceError(
            f"{folder}: not a folder {what} wrote (a link or a file); remove it yourself"
        )
    for entry in _entries(folder, folder):
        if entry.endswith("/") or not any(fnmatch.fnmatchcase(entry, p) for p in patterns):
            raise OutputPlaceError(
                f"{folder} holds {entry}, which {what} does not write; remove the folder "
                "yourself if it is not needed"
            )
    try:
        shutil.rmtree(folder)
    except OSError as error:
        raise place_error(error, folder) from None


def claim_work_folder(
    path: str | Path, *, command: str, known: Iterable[str] = (), inputs: Iterable[Path] = ()
) -> Path:
    """The folder `command` keeps its work files in and may clean: missing or empty (made
    and marked with the manifest, `"work": true`), marked so by `command` before, or (from
    before the mark) holding only top-level names matching `known` (then marked). Never
    a protected folder (`refuse_protected`); OutputPlaceError (one line) otherwise."""
    given = Path(path)
    target = check_output_place(given)
    if target.exists():
        refuse_protected(target, given, inputs)
        if not _is_work_folder(target, command):
            _check_known(target, given, command, list(known))
    try:
        target.mkdir(parents=True, exist_ok=True)
        if not _is_work_folder(target, command):
            record = {"format": MANIFEST_FORMAT, "command": command, "work": True, "files": []}
            (target / MANIFEST).write_text(json.dumps(record) + "\n", encoding="utf-8")
    except OSError as error:
        raise place_error(error, given) from None
    return target


def _is_work_folder(folder: Path, command: str) -> bool:
    record = _read_manifest(folder / MANIFEST)
    return bool(record) and record.get("command") == command and record.get("work") is True


def _check_known(target: Path, given: Path, command: str, known: list[str]) -> None:
    try:
        names = sorted(entry.name for entry in target.iterdir())
    except OSError as error:
        raise place_error(error, given) from None
    for name in names:
        if not any(fnmatch.fnmatchcase(name, pattern) for pattern in known):
            raise OutputPlaceError(
                f"{given} holds {name}, which {command} did not write; choose another work "
                "folder or empty it yourself"
            )


# ---------------------------------------------------------------- helpers


def _sibling(target: Path, kind: str) -> Path:
    """A fresh hidden name beside `target` for this process: `.<name>.<pid>.<random>.<kind>`."""
    return target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.{kind}")


def _keep_mode(old: Path, new: Path) -> None:
    """Give the new folder the permission bits of the one it replaces."""
    with contextlib.suppress(OSError):
        shutil.copymode(old, new)
