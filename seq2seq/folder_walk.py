"""The one way the project walks a folder a user hands it.

Symbolic links are followed on purpose (`make compare` links a run of one sweep into
another instead of training it twice), so a walk must not run away on links that loop or
lead out of the tree. `walk_folders` therefore:

* visits each real folder once, known by its device and inode (`ln -s . again` is met
  once, not without end);
* follows a link only to a folder inside the tree being walked, or to another run folder
  outside it (a folder holding the caller's `marker`, e.g. `.hydra/config.yaml`), never to
  `/`, the home folder or a folder that holds the tree (those only lead back in);
* goes at most `MAX_DEPTH` folders down;
* leaves out folders it cannot read.

What it leaves out is collected, not raised, so the caller says it in one line
(`Walk.summary`): `skipped 2 folders: sweep/a/root -> / (outside the tree), sweep/b/self
-> . (visited already)`.

    walk = walk_folders(sweep, marker=".hydra/config.yaml")
    runs = [folder for folder in walk.folders if (folder / ".hydra/config.yaml").is_file()]
    if walk.skipped:
        log.warning("%s", walk.summary())
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

MAX_DEPTH = 32  # folders below the root; a sweep's deepest file is about 5 down
SHOWN_SKIPS = 5  # the skipped folders a summary names; the rest are counted

OUTSIDE = "outside the tree"
VISITED = "visited already"
LINK_LOOP = "a link loop"


@dataclass(frozen=True)
class Skipped:
    """A folder (or link) a walk left out, and why; `target` is where a link led."""

    path: Path
    reason: str
    target: str | None = None

    def __str__(self) -> str:
        arrow = f" -> {self.target}" if self.target is not None else ""
        return f"{self.path}{arrow} ({self.reason})"


@dataclass
class Walk:
    """What a walk found: each folder once (by the path it was reached through, the root
    first, then depth first in name order), the regular files in them, and what it left out."""

    folders: list[Path] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    def summary(self) -> str:
        """One line naming what was skipped ("" when nothing was)."""
        if not self.skipped:
            return ""
        shown = ", ".join(str(skip) for skip in self.skipped[:SHOWN_SKIPS])
        more = len(self.skipped) - SHOWN_SKIPS
        rest = f" and {more} more" if more > 0 else ""
        count = len(self.skipped)
        return f"skipped {count} folder{'s' * (count != 1)}: {shown}{rest}"


def walk_folders(
    root: str | Path,
    *,
    marker: str | None = None,
    follow_links: bool = True,
    max_depth: int = MAX_DEPTH,
) -> Walk:
    """Every folder at or below `root` (module docstring): links followed within the tree,
    or out of it to a folder holding `marker` (links to folders not at all without
    `follow_links`); each real folder once; `max_depth` deep. FileNotFoundError when `root`
    is not a folder."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a folder")
    walker = _Walker(root, marker, follow_links, max_depth)
    walker.run()
    return walker.walk


class _Walker:
    """The state of one walk: the trees it may enter and the folders it has seen."""

    def __init__(self, root: Path, marker: str | None, follow_links: bool, max_depth: int):
        self.marker = marker
        self.follow_links = follow_links
        self.max_depth = max_depth
        self.walk = Walk()
        self.trees = [os.path.realpath(root)]  # the root's tree and linked run folders
        self.refused = _refused_targets(self.trees[0])
        self.seen: set[tuple[int, int]] = set()
        self.pending = [(root, 0)]

    def run(self) -> None:
        while self.pending:
            folder, depth = self.pending.pop()
            if self._enter(folder):
                self.pending.extend(reversed(self._children(folder, depth)))

    def _enter(self, folder: Path) -> bool:
        """Record `folder` unless its real folder was seen already."""
        try:
            status = folder.stat()
        except OSError as error:
            self.walk.skipped.append(Skipped(folder, _why(error)))
            return False
        identity = (status.st_dev, status.st_ino)
        if identity in self.seen:
            self.walk.skipped.append(Skipped(folder, VISITED, _link_text(folder)))
            return False
        self.seen.add(identity)
        self.walk.folders.append(folder)
        return True

    def _children(self, folder: Path, depth: int) -> list[tuple[Path, int]]:
        """The sub-folders of `folder` to visit next (its regular files are recorded)."""
        try:
            with os.scandir(folder) as entries:
                ordered = sorted(entries, key=lambda entry: entry.name)
        except OSError as error:
            self.walk.skipped.append(Skipped(folder, _why(error)))
            return []
        children = []
        for entry in ordered:
            path = folder / entry.name
            kind = _kind(entry, self.follow_links)
            if kind == "file":
                self.walk.files.append(path)
            elif kind == "loop":
                self.walk.skipped.append(Skipped(path, LINK_LOOP))
            elif kind == "folder" and self._may_enter(path, entry.is_symlink(), depth + 1):
                children.append((path, depth + 1))
        return children

    def _may_enter(self, path: Path, is_link: bool, depth: int) -> bool:
        if depth > self.max_depth:
            self.walk.skipped.append(Skipped(path, f"deeper than {self.max_depth} folders"))
            return False
        if not is_link:
            return True
        target = os.path.realpath(path)
        if target in self.refused or not self._allowed(target):
            self.walk.skipped.append(Skipped(path, OUTSIDE, _link_text(path)))
            return False
        return True

    def _allowed(self, target: str) -> bool:
        """Inside a tree already open to the walk, or another run folder (which opens it)."""
        if any(_within(target, tree) for tree in self.trees):
            return True
        if self.marker is not None and os.path.isfile(os.path.join(target, self.marker)):
            self.trees.append(target)
            return True
        return False


def _refused_targets(tree: str) -> set[str]:
    """Folders a link must never lead to: `/`, the home folder, and every folder holding
    the tree (from there the walk would only come back in)."""
    refused = {os.path.realpath(os.path.expanduser("~")), os.path.realpath(os.sep)}
    folder = tree
    while os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
        refused.add(folder)
    return refused


def _within(path: str, tree: str) -> bool:
    return path == tree or path.startswith(tree.rstrip(os.sep) + os.sep)


def _kind(entry: os.DirEntry, follow_links: bool) -> str:
    """What the entry is: "folder", "file" (regular, or a link to one), "loop" (a link that
    loops) or "other" (a dangling link, a FIFO, a device, a link to a folder when links to
    folders are not followed)."""
    try:
        mode = entry.stat(follow_symlinks=True).st_mode
    except OSError as error:
        return "loop" if error.errno == errno.ELOOP else "other"
    if stat.S_ISDIR(mode):
        return "folder" if follow_links or not entry.is_symlink() else "other"
    return "file" if stat.S_ISREG(mode) else "other"


def _link_text(path: Path) -> str | None:
    """Where the link `path` points, as written; None when it is not a link."""
    try:
        return os.readlink(path) if path.is_symlink() else None
    except OSError:
        return None


def _why(error: OSError) -> str:
    if error.errno == errno.ELOOP:
        return LINK_LOOP
    return f"cannot be read: {error.strerror or error}"
