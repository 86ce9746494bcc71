"""Plugins: the user's own components, imported before anything is built.

A plugin is a module of the user's whose `@registry.register` classes join the built-ins
(fairseq's `--user-dir`), with no edit of the package. It is named by a spec:

* a dotted module name (`my_attention`, `lab.scores`), importable from `sys.path` or from
  the folder the user started in (`base`, added at the end of `sys.path`);
* a path to a `.py` file (`./lab/scores.py`), imported as the module named after the file
  (`scores`), its folder added to `sys.path` so that it can import its neighbours;
* a path to a folder: a package (a folder with `__init__.py`, imported under the folder's
  name, its parent added to `sys.path`) or a plain folder, whose `.py` files are each
  imported as the module named after the file (the folder added to `sys.path`).

A spec ending in `.py` or that is not a dotted name is a path, relative to `base`. A
package, named either way, is imported with every module below it, so a class registered in
any of them is found. Each spec is imported once per process.

    found = import_plugins(["./lab/scores.py"], base=Path.cwd())
    found[0].modules   # ("scores",)
    found[0].sha256    # the file's sha256 (`sha256sum lab/scores.py`)

Each plugin is recorded by the spec as given, the file or folder it was imported from, its
modules, and the sha256 of its source: of the file for a single file, else of the list of
its `.py` files' `sha256sum` lines (`<sha256>  <path within the folder>`, sorted by path).
A checkpoint keeps these records (`seq2seq.checkpoint.check_plugins`): it is loaded only
when the user has imported the same plugins, since a plugin's import runs its code, and
nothing is ever imported because a checkpoint names it.

A failed import (the plugin's own error, or a name that clashes with a built-in or with
another plugin's) is one PluginError naming the spec; what it registered is removed again.
"""

from __future__ import annotations

import errno
import hashlib
import importlib
import importlib.util
import logging
import os
import re
import sys
import traceback
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from seq2seq import registry
from seq2seq.folder_walk import MAX_DEPTH, walk_folders
from seq2seq.text_encoding import TextEncodingError, check_text_file

log = logging.getLogger(__name__)
DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_imported: dict[str, Plugin] = {}  # by spec as given: what `import_plugins` has done


class PluginError(ValueError):
    """A plugin that cannot be found or imported; the message names its spec."""


@dataclass(frozen=True)
class Plugin:
    """One imported plugin, or a checkpoint's record of one (module docstring)."""

    spec: str  # as the user gave it: "lab/scores.py", "my_attention"
    path: str  # the absolute file or folder it was imported from
    modules: tuple[str, ...]  # the modules it imported: ("scores",)
    sha256: str  # of its source file(s)

    def record(self) -> dict[str, Any]:
        """Plain data for a checkpoint."""
        return {"spec": self.spec, "path": self.path, "modules": list(self.modules),
                "sha256": self.sha256}  # fmt: skip

    def components(self) -> list[registry.Component]:
        """The components its import registered."""
        return [c for g in registry.GROUPS for c in registry.components(g) if c.plugin == self.spec]


# ---------------------------------------------------------------- importing


def import_plugins(specs: Iterable[str], base: str | Path | None = None) -> list[Plugin]:
    """Import each plugin (module docstring) once per process; relative paths and dotted
    names are found from `base` (default: the current folder). PluginError for a spec that
    is not found, an import that fails, or a name that clashes."""
    base = Path.cwd() if base is None else Path(base)
    return [_imported.get(spec) or _import_one(str(spec), base) for spec in specs]


def imported() -> tuple[Plugin, ...]:
    """The plugins imported in this process, in order."""
    return tuple(_imported.values())


def records(specs: Iterable[str]) -> list[dict[str, Any]]:
    """The checkpoint records of the plugins `specs` (a config's `plugins`); PluginError
    naming a spec that was not imported."""
    missing = [spec for spec in specs if spec not in _imported]
    if missing:
        raise PluginError(
            f"plugins: {missing[0]!r} was not imported (seq2seq.plugins.import_plugins)"
        )
    return [_imported[spec].record() for spec in specs]


def provider(modules: Sequence[str]) -> Plugin | None:
    """The imported plugin whose modules include all of `modules`, or None."""
    for plugin in _imported.values():
        if set(modules) <= set(plugin.modules):
            return plugin
    return None


def unload(plugin: Plugin) -> None:
    """Undo `import_plugins` for one plugin (tests, notebooks): its components are
    unregistered and its modules forgotten, so that importing it again runs it again."""
    registry.unregister_plugin(plugin.spec)
    for name in plugin.modules:
        for loaded in [key for key in sys.modules if key == name or key.startswith(f"{name}.")]:
            del sys.modules[loaded]
    _imported.pop(plugin.spec, None)


def _import_one(spec: str, base: Path) -> Plugin:
    """Import one spec inside `registry.plugin_import`; on any failure, remove what it
    registered and the modules it added, and raise one PluginError. The roll-back never
    raises: it meets the very input that made the import fail (a link loop, a folder that
    vanished), so it resolves nothing that can fail and only compares strings."""
    before, path_before = set(sys.modules), list(sys.path)
    with registry.plugin_import(spec):
        try:
            plugin = _located(spec, base)
        except Exception as error:  # the plugin's own code may raise anything
            failure = error if isinstance(error, PluginError) else None
            if failure is None and isinstance(error, (SyntaxError, UnicodeError)):
                failure = _encoding_failure(spec, base)
            failure = failure or PluginError(f"plugin {spec!r}: {_failure(error)}")
            _roll_back(spec, base, before)
            _forget_path_entries(path_before)
            raise failure from error
    _imported[spec] = plugin
    return plugin


def _roll_back(spec: str, base: Path, before: set[str]) -> None:
    """Unregister what a failed import registered and forget the modules of its own that
    it imported (so that a later import runs them again); other new modules stay, as after
    any failed import. Total: it raises nothing on any spec or module."""
    registry.unregister_plugin(spec)
    root = _plugin_root(spec, base)
    for name in set(sys.modules) - before:
        if _is_own(spec, root, name, sys.modules.get(name)):
            sys.modules.pop(name, None)


def _forget_path_entries(path_before: list[str]) -> None:
    """Take the folders a failed import added off `sys.path` (and the import system's cache
    of them): one that vanished or became a link loop would break every later import."""
    for entry in [entry for entry in sys.path if entry not in path_before]:
        sys.path.remove(entry)
        sys.path_importer_cache.pop(entry, None)


def _plugin_root(spec: str, base: Path) -> str | None:
    """The real folder a path spec's modules come from (a file's own folder), found without
    raising (`os.path.realpath` leaves a link loop unresolved); None for a dotted name."""
    if not spec.endswith(".py") and DOTTED_NAME.fullmatch(spec):
        return None
    root = os.path.realpath(os.path.join(base, os.path.expanduser(spec)))
    return os.path.dirname(root) if root.endswith(".py") else root


def _is_own(spec: str, root: str | None, name: str, module: ModuleType | None) -> bool:
    """Whether module `name` is the plugin's: below the dotted name, or from a file within
    the plugin's folder `root` (`_plugin_root`)."""
    if root is None:
        return name == spec or name.startswith(f"{spec}.")
    origin = getattr(module, "__file__", None)
    if not isinstance(origin, str):
        return False
    return os.path.realpath(origin).startswith(root.rstrip(os.sep) + os.sep)


def _failure(error: Exception) -> str:
    """`<Type>: <message> (<file> line <n>)` on one line; a clash is the registry's message."""
    if isinstance(error, ValueError) and "registered already" in str(error):
        return str(error)
    where, message = "", str(error)
    if isinstance(error, SyntaxError) and error.filename:
        where, message = f" ({error.filename} line {error.lineno})", str(error.msg)
    elif error.__traceback__ is not None:
        frame = traceback.extract_tb(error.__traceback__)[-1]
        where = f" ({frame.filename} line {frame.lineno})"
    message = " ".join(message.split()) or "(no message)"
    return f"importing it failed: {type(error).__name__}: {message}{where}"


def _encoding_failure(spec: str, base: Path) -> PluginError | None:
    """A PluginError naming the first source file of a path spec saved as UTF-16 or UTF-32
    (Python reads it as "source code cannot contain null bytes"), with how to convert it;
    None when there is none. Total: it is called on the error path of any spec."""
    root = _plugin_root(spec, base)
    if root is None:
        return None
    try:
        if spec.endswith(".py"):
            files = [Path(os.path.realpath(os.path.join(base, os.path.expanduser(spec))))]
        else:
            files = _regular_files(Path(root), "*.py", deep=True, follow_links=False)
        for file in files:
            check_text_file(file)
    except TextEncodingError as error:
        return PluginError(f"plugin {spec!r}: {error}")
    except (OSError, RuntimeError, ValueError):
        return None
    return None


def _located(spec: str, base: Path) -> Plugin:
    """Import `spec` as a dotted name or as a path (module docstring)."""
    if not spec.endswith(".py") and DOTTED_NAME.fullmatch(spec):
        return _import_dotted(spec, base)
    path = _real_path(spec, base)
    if path.is_file() and path.suffix == ".py":
        return _import_file(spec, path)
    if path.is_dir() and (path / "__init__.py").is_file():
        return _import_package(spec, path)
    if path.is_dir():
        return _import_folder(spec, path)
    raise PluginError(f"plugin {spec!r}: {path} is not a .py file or a folder")


def _real_path(spec: str, base: Path) -> Path:
    """The file or folder a path spec names, links resolved; PluginError for a link that
    loops, or one that cannot be followed (`Path.resolve` raises RuntimeError on a loop)."""
    given = os.path.join(base, os.path.expanduser(spec))
    try:
        os.stat(given)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise PluginError(f"plugin {spec!r}: {given} is a symbolic link loop") from None
        if not isinstance(error, FileNotFoundError):
            raise PluginError(
                f"plugin {spec!r}: {given} cannot be read ({error.strerror or error})"
            ) from None
    return Path(os.path.realpath(given))


def _import_dotted(spec: str, base: Path) -> Plugin:
    if spec == "seq2seq" or spec.startswith("seq2seq."):
        raise PluginError(f"plugin {spec!r}: a module of seq2seq is built in, not a plugin")
    _add_to_path(base)
    try:
        module = importlib.import_module(spec)
    except ModuleNotFoundError as error:
        if error.name == spec or spec.startswith(f"{error.name}."):
            raise PluginError(
                f"plugin {spec!r}: no module of that name on sys.path or in {base} "
                "(a file is given as a path: ./name.py)"
            ) from error
        raise
    modules = (spec, *_submodules(module))
    return Plugin(spec, str(_module_root(module)), modules, source_hash(module_files(module)))


def _import_file(spec: str, path: Path) -> Plugin:
    _add_to_path(path.parent)
    name = _module_name(spec, path.stem)
    _load_file(spec, name, path)
    return Plugin(spec, str(path), (name,), source_hash({path.name: path}))


def _import_package(spec: str, path: Path) -> Plugin:
    name = _module_name(spec, path.name)
    _check_free(spec, name, path / "__init__.py")
    _add_to_path(path.parent)
    module = importlib.import_module(name)
    modules = (name, *_submodules(module))
    return Plugin(spec, str(path), modules, source_hash(module_files(module)))


def _import_folder(spec: str, path: Path) -> Plugin:
    files = _regular_files(path, "*.py")
    if not files:
        raise PluginError(f"plugin {spec!r}: the folder {path} has no .py files")
    _add_to_path(path)
    names = []
    for file in files:
        names.append(_module_name(spec, file.stem))
        _load_file(spec, names[-1], file)
    return Plugin(spec, str(path), tuple(names), source_hash({f.name: f for f in files}))


def _module_name(spec: str, name: str) -> str:
    if not name.isidentifier():
        raise PluginError(
            f"plugin {spec!r}: {name!r} is not a Python identifier, so it cannot be a module "
            "name (rename it with letters, digits and _)"
        )
    return name


def _check_free(spec: str, name: str, file: Path) -> None:
    """PluginError when another file is imported already under the module name `name`, or
    would be by `import name` (a module installed, or of the standard library: the plugin
    must not shadow it)."""
    if name in sys.modules:
        existing: Any = sys.modules[name]
        origin = getattr(existing, "__file__", None)
    else:
        existing = _findable(name)
        origin = getattr(existing, "origin", None)
    if existing is not None and (origin is None or Path(origin).resolve() != file):
        renamed = file.parent.name if file.name == "__init__.py" else file.name
        raise PluginError(
            f"plugin {spec!r}: the module name {name!r} is taken by "
            f"{origin or 'a built-in module'}; rename {renamed}"
        )


def _findable(name: str) -> Any:
    """The import system's spec for a top-level module `name`, or None."""
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None


def _load_file(spec: str, name: str, path: Path) -> ModuleType:
    """The module `name` executed from `path` (once: a second spec for it reuses it)."""
    _check_free(spec, name, path)
    if name in sys.modules:
        return sys.modules[name]
    found = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(found)
    sys.modules[name] = module  # dataclasses and pickling look a class's module up by name
    found.loader.exec_module(module)
    return module


def _add_to_path(folder: Path) -> None:
    """Append `folder` to `sys.path`, after what is installed, so it shadows nothing."""
    entry = str(folder.resolve())
    if entry not in sys.path:
        sys.path.append(entry)


def _submodules(module: ModuleType) -> list[str]:
    """Import every module below a package; their names (none for a plain module). The
    package's folder is walked once (`walk_folders`: each real folder once, links kept
    inside it), so a link back into the package imports nothing twice and ends."""
    paths = list(getattr(module, "__path__", []))
    names = _package_modules(module.__name__, Path(paths[0])) if paths else []
    for name in names:
        importlib.import_module(name)
    return names


def _package_modules(package: str, root: Path) -> list[str]:
    """The names of the modules below the package `package` in `root`, sorted: the `.py`
    files of the folders reached through `__init__.py`s (the package's own left out)."""
    walk = walk_folders(root)
    if walk.skipped:
        log.warning("plugin package %s: %s", package, walk.summary())
    packages = {Path(".")} | {
        folder.relative_to(root) for folder in walk.folders if (folder / "__init__.py").is_file()
    }
    names = set()
    for file in walk.files:
        inside = file.relative_to(root)
        if file.suffix != ".py" or not _is_package_path(inside.parent, packages):
            continue
        parts = inside.with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        if parts and all(part.isidentifier() for part in parts):
            names.add(".".join((package, *parts)))
    return sorted(names)


def _is_package_path(folder: Path, packages: set[Path]) -> bool:
    """Whether `folder` and every folder above it (within the package) is a package."""
    return all(parent in packages for parent in (folder, *folder.parents))


# ---------------------------------------------------------------- source hashes


def _module_root(module: ModuleType) -> Path:
    """A package's folder, or a module's file."""
    paths = list(getattr(module, "__path__", []))
    if paths:
        return Path(paths[0]).resolve()
    if getattr(module, "__file__", None) is None:
        raise PluginError(f"plugin {module.__name__!r}: it has no source file")
    return Path(module.__file__).resolve()


def module_files(module: ModuleType) -> dict[str, Path]:
    """The source files of a module (its file) or of a package (every `.py` below it), by
    their path within the package's folder."""
    root = _module_root(module)
    if root.is_file():
        return {root.name: root}
    return {
        file.relative_to(root).as_posix(): file
        for file in _regular_files(root, "*.py", deep=True, follow_links=False)
    }  # as recorded since plugins began: links to folders are not hashed


def _regular_files(
    folder: Path, pattern: str, *, deep: bool = False, follow_links: bool = True
) -> list[Path]:
    """The regular files matching `pattern` in `folder` (and below it with `deep`: each
    real folder once, links kept inside it, `walk_folders`), sorted by path."""
    walk = walk_folders(folder, follow_links=follow_links, max_depth=MAX_DEPTH if deep else 0)
    return sorted(file for file in walk.files if file.match(pattern))


def source_hash(files: dict[str, Path]) -> str:
    """sha256 of the one file, or of the sorted `sha256sum` lines of several."""
    digests = {name: hashlib.sha256(path.read_bytes()).hexdigest() for name, path in files.items()}
    if len(digests) == 1:
        return next(iter(digests.values()))
    manifest = "".join(f"{digests[name]}  {name}\n" for name in sorted(digests))
    return hashlib.sha256(manifest.encode("utf-8")).hexdigest()
