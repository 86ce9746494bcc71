"""The runnable blocks of the README and the tutorial: found by their marker and executed.

A page marks a fenced ```bash or ```python block as runnable with an HTML comment on the
line right before its opening fence (the comment does not show on GitHub or on the site):

    <!-- run -->                                   run the block as shown
    <!-- run toy="trainer.max_steps=20" -->        at toy size: the Hydra overrides are
                                                   appended to every `seq2seq-train`
                                                   command, and put into the `ARGS="..."`
                                                   of every `make` command (ARGS added
                                                   when the command has none)
    <!-- run creates="outputs/*/*/checkpoints/best.pt" -->
                                                   files or globs, relative to the page's
                                                   working folder, that must exist after
                                                   the block (several: space-separated)
    <!-- run skip="needs a browser" -->            not run; reported as skipped, with why
    <!-- run output="first-run" -->                keep the block's output under that name
                                                   (`tools.site.outputs` shows it where
                                                   the page has `<!-- output: first-run -->`)

Attributes combine (`<!-- run toy="..." creates="..." -->`). The blocks of one page run in
order in one working folder (`working_folder`), so a later block sees what an earlier one
wrote. A bash block runs under `bash -e -o pipefail` and must exit 0; a python block runs
as a script in the same folder. A marker that is not followed by a fence, an unknown
attribute or a fence of another language is a `DocBlockError`: a typo fails loudly instead
of leaving a block unrun.

Two savings for the tests, neither changing what a command does:

* `prepare_shared_data(repo, folder)` prepares the Tatoeba corpus once, with the same command
  as the pages (`seq2seq-data prepare data=tatoeba_zh_en`); `run_page(..., shared_data=)`
  links its raw file and prepared folder into the page's `data/`, where the page's own
  preparation finds it cached (the cache is keyed by the corpus and the settings, not by
  the folder: `seq2seq.data.record`) instead of training sentencepiece again.
* A translated page (`README.zh-CN.md`, `docs/tutorial/*.zh.md`) shows its original's
  commands with its comments translated: `same_commands(page, original_page(page))` says
  when its blocks run exactly what its original's do (the same code but for comments, the
  same markers), so that running the original runs the translation's commands too.
"""

from __future__ import annotations

import glob
import io
import os
import re
import shutil
import subprocess
import sys
import time
import tokenize
from dataclasses import dataclass
from pathlib import Path

MARKER = re.compile(r"^\s*<!--\s*run\b(?P<attributes>.*?)-->\s*$")
ATTRIBUTE = re.compile(r'\s*(?P<name>[a-z]+)="(?P<value>[^"]*)"')
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<language>[\w+-]*)")
ATTRIBUTES = ("toy", "creates", "skip", "output")
LANGUAGES = {"bash": "bash", "sh": "bash", "shell": "bash", "python": "python", "py": "python"}
COMMAND_LANGUAGES = set(LANGUAGES)  # fences that show commands: each must be marked
SHELL_OPERATOR = re.compile(r"\s(?:\|\|?|&&|&|[0-9]?>>?|<)|;")
ARGS_VALUE = re.compile(r"""\bARGS=(?P<quote>["'])(?P<value>.*?)(?P=quote)""")
BLOCK_TIMEOUT_S = 900  # a toy-sized block that takes longer is a wrong toy size
# What a page's working folder gets from the repository: links to what the commands read
# (never to outputs/ or docs/, which the commands may write).
LINKED = ("Makefile", "configs", "scripts", ".venv")
# The corpus most pages train on, prepared once for a test session (`prepare_shared_data`).
SHARED_DATA_COMMAND = "seq2seq-data prepare data=tatoeba_zh_en"
# A block that reads it: names it, or trains a preset or `make train` (both train on it).
USES_SHARED_DATA = re.compile(r"tatoeba|\+experiment=|\bmake train\b")
TRANSLATION = re.compile(r"^(?P<stem>.+?)(?:\.zh|\.zh-CN)\.md$")
HEREDOC = re.compile(r"<<-?\s*(?P<quote>['\"]?)(?P<word>\w+)(?P=quote)")


class DocBlockError(ValueError):
    """A marker that cannot be read; the message names the page and line."""


@dataclass(frozen=True)
class DocBlock:
    """One marked block of a page."""

    page: Path
    line: int  # of the opening fence, from 1
    language: str  # "bash" or "python"
    code: str
    toy: str = ""  # Hydra overrides for the toy size
    creates: tuple[str, ...] = ()
    skip: str | None = None  # the reason it is not run
    output: str | None = None  # the name its output is kept under

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


@dataclass(frozen=True)
class BlockResult:
    """What running one block gave."""

    block: DocBlock
    command: str  # what ran (the block with its toy overrides)
    returncode: int | None  # None: skipped
    output: str  # stdout and stderr, interleaved
    missing: tuple[str, ...]  # `creates` globs that matched nothing
    seconds: float

    @property
    def ok(self) -> bool:
        return self.returncode in (0, None) and not self.missing

    def report(self) -> str:
        """Why it failed, in a few lines: where, what ran, the exit status and output tail."""
        tail = "\n".join(self.output.splitlines()[-40:])
        lines = [f"{self.block.where}: exit {self.returncode}", "ran:", self.command]
        if self.missing:
            lines.append(f"missing after the block: {', '.join(self.missing)}")
        return "\n".join([*lines, "output (last 40 lines):", tail])


# ---------------------------------------------------------------- reading a page


def parse_attributes(text: str, where: str) -> dict[str, str]:
    """`toy="a b" creates="x"` → {"toy": "a b", "creates": "x"}; DocBlockError otherwise."""
    found, rest = {}, text.strip()
    while rest:
        match = ATTRIBUTE.match(rest)
        if match is None:
            raise DocBlockError(f"{where}: cannot read the run marker's attributes {rest!r}")
        name = match["name"]
        if name not in ATTRIBUTES:
            raise DocBlockError(f"{where}: unknown attribute {name!r}; known: {ATTRIBUTES}")
        found[name] = match["value"]
        rest = rest[match.end() :].strip()
    return found


def fenced_block(lines: list[str], start: int, where: str) -> tuple[str, str, int]:
    """The fence opening at `lines[start]`: (language, code, index after its closing fence)."""
    opening = FENCE.match(lines[start])
    if opening is None:
        raise DocBlockError(f"{where}: a run marker must be followed at once by a fenced block")
    language = LANGUAGES.get(opening["language"].lower())
    if language is None:
        raise DocBlockError(
            f"{where}: a run marker before a {opening['language'] or 'plain'!r} fence; "
            f"runnable fences: {', '.join(LANGUAGES)}"
        )
    indent, fence = opening["indent"], opening["fence"]
    for end in range(start + 1, len(lines)):
        if lines[end].strip().startswith(fence) and not lines[end].strip()[len(fence) :].strip():
            body = [
                line[len(indent) :] if line.startswith(indent) else line
                for line in lines[start + 1 : end]
            ]
            return language, "\n".join(body) + "\n", end + 1
    raise DocBlockError(f"{where}: the fenced block is never closed")


def read_blocks(page: Path) -> list[DocBlock]:
    """The marked blocks of a page, in order."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks, index = [], 0
    while index < len(lines):
        marker = MARKER.match(lines[index])
        if marker is None:
            index += 1
            continue
        where, fence_line = f"{page}:{index + 1}", index + 2
        attributes = parse_attributes(marker["attributes"], where)
        if index + 1 >= len(lines):
            raise DocBlockError(f"{where}: a run marker at the end of the page")
        language, code, index = fenced_block(lines, index + 1, where)
        blocks.append(DocBlock(
            page, fence_line, language, code,
            toy=attributes.get("toy", ""), creates=tuple(attributes.get("creates", "").split()),
            skip=attributes.get("skip"), output=attributes.get("output"),
        ))  # fmt: skip
    return blocks


def unmarked_command_blocks(page: Path) -> list[str]:
    """`page:line` of every ```bash / ```python fence without a run marker right above it."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found, fence_open = [], None
    for index, line in enumerate(lines):
        opening = FENCE.match(line)
        if fence_open is not None:
            if line.strip() == fence_open:
                fence_open = None
            continue
        if opening is None:
            continue
        fence_open = opening["fence"]
        marked = index > 0 and MARKER.match(lines[index - 1]) is not None
        if opening["language"].lower() in COMMAND_LANGUAGES and not marked:
            found.append(f"{page}:{index + 1}")
    return found


# ---------------------------------------------------------------- toy size


def logical_lines(code: str) -> list[str]:
    """The block's lines with backslash continuations joined (`a \\` + `b` → `a b`)."""
    joined, pending = [], ""
    for line in code.splitlines():
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1].rstrip() + " "
            continue
        joined.append(pending + line.lstrip() if pending else line)
        pending = ""
    return joined + ([pending.rstrip()] if pending else [])


def command_end(line: str, start: int) -> int:
    """Where the simple command that starts at `start` ends: its first shell operator
    (a pipe, `&&`, `;`, a redirection), a comment, or the line's end."""
    operator = SHELL_OPERATOR.search(line, start)
    comment = line.find(" #", start)
    ends = [len(line.rstrip())]
    ends += [operator.start()] if operator else []
    ends += [comment] if comment >= 0 else []
    return min(ends)


def with_toy_overrides(code: str, overrides: str) -> str:
    """The block with `overrides` appended to each `seq2seq-train` command and put into the
    ARGS of each `make` command; unchanged when `overrides` is empty."""
    if not overrides.strip():
        return code
    return "\n".join(toy_line(line, overrides.strip()) for line in logical_lines(code)) + "\n"


def toy_line(line: str, overrides: str) -> str:
    if line.lstrip().startswith("#"):
        return line
    train = re.search(r"(?:^|[\s/])seq2seq-train\b", line)
    if train is not None:
        end = command_end(line, train.end())
        return f"{line[:end]} {overrides}{line[end:]}"
    make = re.search(r"(?:^|\s)make(?=\s|$)", line)
    if make is not None:
        end = command_end(line, make.end())
        command, rest = line[:end], line[end:]
        args = ARGS_VALUE.search(command)
        if args is None:
            return f'{command} ARGS="{overrides}"{rest}'
        value = f"{args['value']} {overrides}".strip()
        return f"{command[: args.start()]}ARGS={args['quote']}{value}{args['quote']}{command[args.end() :]}{rest}"
    return line


# ---------------------------------------------------------------- running


def data_mirror(repo: Path) -> str | None:
    """The offline corpus folder: $SEQ2SEQ_DATA_MIRROR, else the one the Makefile finds
    beside the checkout (../shared/corpora with cmn-eng.zip), else None."""
    if os.environ.get("SEQ2SEQ_DATA_MIRROR"):
        return os.environ["SEQ2SEQ_DATA_MIRROR"]
    beside = (repo / ".." / "shared" / "corpora").resolve()
    return str(beside) if (beside / "cmn-eng.zip").is_file() else None


def working_folder(repo: Path, folder: Path, shared_data: Path | None = None) -> Path:
    """Make `folder` a place where a page's commands run as in the repository: links to
    the Makefile, configs/, scripts/ and .venv/, and a copy of pyproject.toml dated in
    the past (so that make's install stamp counts as up to date and `make train` never
    reinstalls the package from here). Everything the commands write (outputs/, data/, a
    translation) stays inside `folder`, but for the corpora of `shared_data` (a `data/`
    folder made by `prepare_shared_data`): each of its `raw/` files and `prepared/` folders
    is linked into `folder/data/` (the page's other data stays its own)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in LINKED:
        if (repo / name).exists() and not (folder / name).exists():
            (folder / name).symlink_to(repo / name)
    shutil.copyfile(repo / "pyproject.toml", folder / "pyproject.toml")
    os.utime(folder / "pyproject.toml", (0, 0))
    if shared_data is not None:
        for part in ("raw", "prepared"):
            (folder / "data" / part).mkdir(parents=True, exist_ok=True)
            for entry in sorted((shared_data / part).glob("*")):
                link = folder / "data" / part / entry.name
                if not link.exists() and not link.is_symlink():
                    link.symlink_to(entry.resolve())
    return folder


def uses_shared_data(page: Path) -> bool:
    """Whether a block of the page that runs (at toy size) may read the Tatoeba corpus. A
    page it misses prepares the corpus itself: slower, never wrong."""
    return any(
        USES_SHARED_DATA.search(with_toy_overrides(block.code, block.toy))
        for block in read_blocks(page)
        if block.skip is None
    )


def prepare_shared_data(repo: Path, folder: Path) -> Path:
    """Prepare the Tatoeba corpus in the working folder `folder`, as a page does
    (`SHARED_DATA_COMMAND`); returns its `data/` folder, for `run_page(shared_data=)`.
    RuntimeError with the output's tail when the preparation fails."""
    working_folder(repo, folder)
    done = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-c", SHARED_DATA_COMMAND], cwd=folder,
        env=block_environment(repo), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, timeout=BLOCK_TIMEOUT_S, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        tail = "\n".join(done.stdout.splitlines()[-40:])
        raise RuntimeError(f"{SHARED_DATA_COMMAND} exited {done.returncode}:\n{tail}")
    return folder / "data"


def block_environment(repo: Path) -> dict[str, str]:
    """The environment of a block: the repository's .venv first on PATH, the corpus mirror,
    no colours, no display (matplotlib writes files)."""
    venv = repo / ".venv"
    bin_dir = venv / "bin" if (venv / "bin").is_dir() else Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "VIRTUAL_ENV": str(bin_dir.parent), "MPLBACKEND": "Agg", "NO_COLOR": "1"}  # fmt: skip
    mirror = data_mirror(repo)
    if mirror:
        env["SEQ2SEQ_DATA_MIRROR"] = mirror
    return env


def run_block(block: DocBlock, folder: Path, env: dict[str, str], toy: bool = True) -> BlockResult:
    """Run one block in `folder` (at toy size, unless `toy` is False: as shown); a skipped
    block is not run."""
    toy_size = toy and block.language == "bash"
    code = with_toy_overrides(block.code, block.toy) if toy_size else block.code
    if block.skip is not None:
        return BlockResult(block, code, None, f"skipped: {block.skip}", (), 0.0)
    if block.language == "bash":
        argv = ["bash", "-e", "-o", "pipefail", "-c", code]
    else:
        script = folder / f"block_{block.line}.py"
        script.write_text(code, encoding="utf-8")
        argv = [str(Path(env["VIRTUAL_ENV"]) / "bin" / "python"), script.name]
    began = time.monotonic()
    done = subprocess.run(
        argv, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, timeout=BLOCK_TIMEOUT_S, check=False,
    )  # fmt: skip
    missing = tuple(pattern for pattern in block.creates if not glob.glob(str(folder / pattern)))
    return BlockResult(block, code, done.returncode, done.stdout, missing, time.monotonic() - began)


def run_page(
    page: Path, repo: Path, folder: Path, toy: bool = True, shared_data: Path | None = None
) -> list[BlockResult]:
    """Run every marked block of `page` in order in `folder` (made a working folder, with
    the corpora of `shared_data` linked in), at toy size unless `toy` is False; stops after
    the first block that fails, since the next ones build on it."""
    working_folder(repo, folder, shared_data)
    env = block_environment(repo)
    results = []
    for block in read_blocks(page):
        result = run_block(block, folder, env, toy)
        results.append(result)
        if not result.ok:
            break
    return results


def runnable_pages(repo: Path) -> list[Path]:
    """The pages whose command blocks are run: both READMEs and the tutorial, every language."""
    readmes = [repo / name for name in ("README.md", "README.zh-CN.md") if (repo / name).is_file()]
    return readmes + sorted((repo / "docs" / "tutorial").glob("*.md"))


# ---------------------------------------------------------------- translated pages


def original_page(page: Path) -> Path | None:
    """The page that `page` translates (README.zh-CN.md → README.md, first-alignment.zh.md
    → first-alignment.md), or None for a page that is no translation."""
    match = TRANSLATION.match(page.name)
    return None if match is None else page.with_name(f"{match['stem']}.md")


def without_comments(block: DocBlock) -> str:
    """The block's code without its comments: what it runs. Python: its tokens but
    comments; bash: each line cut at an unquoted `#` that starts a word. The lines of a
    here-document (`<<EOF` ... `EOF`: a YAML or Python file the page writes, whose comments
    a translation translates) are cut the same way, each on its own."""
    if block.language == "python":
        tokens = tokenize.generate_tokens(io.StringIO(block.code).readline)
        kept = [(kind, text) for kind, text, *_ in tokens
                if kind not in (tokenize.COMMENT, tokenize.NL)]  # fmt: skip
        return repr(kept)
    lines, heredoc, quote = [], None, None
    for line in block.code.splitlines():
        if heredoc is not None:
            if line.strip() == heredoc:
                heredoc = None
            lines.append(uncommented(line, None)[0])
            continue
        code, quote = uncommented(line, quote)
        lines.append(code)
        found = HEREDOC.search(code) if quote is None else None
        heredoc = found["word"] if found else None
    return "\n".join(line for line in lines if line)


def uncommented(line: str, quote: str | None) -> tuple[str, str | None]:
    """`line` cut at its first `#` that starts a word outside quotes, and the quote still
    open at its end (`quote`: the one open at its start)."""
    kept = []
    for index, char in enumerate(line):
        if quote is None and char == "#" and (index == 0 or line[index - 1].isspace()):
            break
        if char in "'\"" and (quote is None or quote == char):
            quote = None if quote == char else char
        kept.append(char)
    return "".join(kept).rstrip(), quote


def command_identity(block: DocBlock) -> tuple[object, ...]:
    """What running the block does: its code without comments and its markers (a skipped
    block only by being skipped: its reason may be translated)."""
    if block.skip is not None:
        return ("skip", block.language)
    return (block.language, without_comments(block), block.toy, block.creates)


def same_commands(page: Path, original: Path | None) -> bool:
    """Whether `page` runs exactly the commands of `original` (block by block, in order)."""
    if original is None or not original.is_file():
        return False
    ours, theirs = read_blocks(page), read_blocks(original)
    return len(ours) == len(theirs) and all(
        command_identity(a) == command_identity(b) for a, b in zip(ours, theirs, strict=True)
    )
