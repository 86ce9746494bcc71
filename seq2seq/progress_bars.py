"""Progress bars for long work, in a terminal and in a notebook, and when to show none.

Training, a download, reading a corpus, translating a file and the lab's experiments show
a `tqdm` bar with the remaining time (`progress_bar`). `tqdm.auto` draws it as a widget in
Jupyter (when `ipywidgets` is installed; as text on stderr otherwise) and as one line on
stderr in a terminal. Where nobody watches (CI, a log file, a pipe) no bar is drawn, so
redirected output and logs hold no carriage returns; `bars_wanted` is the one rule.

A bar is only ever written to stderr (or the stream given), so standard output stays the
same with bars on or off. The commands' `--no-progress` and `logging.progress_bar=false`
turn bars off where asked, and `SEQ2SEQ_PROGRESS=0` everywhere (`switch_off_in`).
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Mapping, MutableMapping
from typing import Any, TextIO

PROGRESS_ENV = "SEQ2SEQ_PROGRESS"  # "0": no bar anywhere
OFF_VALUES = ("0", "false", "no", "off")  # what turns a switch off (case ignored)
NO_PROGRESS_HELP = (
    "show no progress bar (bars show only on a terminal or in a notebook; "
    f"{PROGRESS_ENV}=0 turns them off everywhere)"
)


def bars_wanted(
    enabled: bool = True, stream: TextIO | None = None, environ: Mapping[str, str] | None = None
) -> bool:
    """Whether a progress bar should be drawn on `stream` (default: `sys.stderr` now).

    The rule: `enabled` (the caller's option: `--no-progress`, `logging.progress_bar`), and
    someone is watching: `stream` is a terminal or this process is a Jupyter kernel
    (`in_notebook`), and the environment does not turn bars off: `SEQ2SEQ_PROGRESS=0`
    (or false / no / off), `CI` set to anything but empty / 0 / false (GitHub Actions,
    GitLab and most CI services set it, and some give their jobs a terminal), or tqdm's own
    `TQDM_DISABLE` set likewise. A pipe or a file (a redirect, a log) gets no bar."""
    environ = os.environ if environ is None else environ
    if not enabled or _switched_off(environ):
        return False
    return _is_terminal(sys.stderr if stream is None else stream) or in_notebook()


def _switched_off(environ: Mapping[str, str]) -> bool:
    """True when the environment turns bars off (`bars_wanted`)."""
    if environ.get(PROGRESS_ENV, "").strip().lower() in OFF_VALUES:
        return True
    return any(_is_set(environ.get(name, "")) for name in ("CI", "TQDM_DISABLE"))


def _is_set(value: str) -> bool:
    """A flag variable that is on: set to anything but empty, 0, false, no or off."""
    value = value.strip().lower()
    return bool(value) and value not in OFF_VALUES


def _is_terminal(stream: Any) -> bool:
    """True for a stream on a terminal; False for a file, a pipe, a closed or odd stream."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def in_notebook() -> bool:
    """True inside a Jupyter kernel (a notebook, JupyterLab, VS Code's notebooks): IPython
    is loaded, with `ipykernel`, and its shell has a kernel. IPython is never imported here:
    a process that has not loaded it is no kernel."""
    if "ipykernel" not in sys.modules:
        return False
    ipython = sys.modules.get("IPython")
    get_ipython = getattr(ipython, "get_ipython", None)
    if get_ipython is None:
        return False
    try:
        shell = get_ipython()
    except Exception:  # a half-initialised IPython: no kernel to draw in
        return False
    return getattr(shell, "kernel", None) is not None


def progress_bar(
    total: float | None, *, unit: str, desc: str | None = None, enabled: bool = True, **options
) -> Any:
    """A `tqdm.auto.tqdm` bar over `total` `unit`s (None: a count without an end), drawn
    only when `bars_wanted(enabled, file)` (`options["file"]`, default stderr); otherwise
    a disabled bar whose calls write nothing. `options` go to tqdm as they are."""
    stream = options.get("file")
    shown = bars_wanted(enabled, stream)
    with warnings.catch_warnings():
        # In a kernel without ipywidgets tqdm.auto warns once and draws text on stderr,
        # which Jupyter shows as well: the warning would be noise in every notebook.
        warnings.simplefilter("ignore")
        from tqdm.auto import tqdm
    return tqdm(total=total, unit=unit, desc=desc, disable=not shown, **options)


def switch_off_in(environ: MutableMapping[str, str]) -> None:
    """`--no-progress` of a command: `SEQ2SEQ_PROGRESS=0` in its environment (pass
    `os.environ`), so that every bar of the process, however deep, and of the processes it
    starts stays off."""
    environ[PROGRESS_ENV] = "0"
