"""The pictures of docs/images, drawn from trained runs by the current code, so that they
cannot go stale.

Each picture of `PICTURES` names the runs it may be drawn from (where `make train`, the
README's first run, the tutorial's sweep or `make compare` leave them; the newest finished
one is taken, finished meaning its `results.json` is written), the command that trains
such a run, and how it is drawn:

* `plot`: `seq2seq-translate CHECKPOINT SENTENCE --plot PICTURE`, the heat maps of every
  decoder layer;
* `viewer`: `seq2seq-translate CHECKPOINT SENTENCE --html PAGE`, the page then rendered by
  headless Chromium with the flags and the bundled CJK font of
  `seq2seq.visualise.screenshot`, one output piece hovered (a copy of the page sends it the
  `mouseenter` the mouse would), cropped to what the page shows;
* `tensorboard`: the run's TensorBoard IMAGES view (`scripts/tensorboard_screenshot.py`);
* `sweep`: one panel per run of a sweep folder (`scripts/compare_alignments.py`).

`make docs` (`python -m tools.site`) redraws every picture whose run is on the machine.
Alone: `python -m tools.site.pictures [PICTURE ...] [--checkpoint PICTURE=PATH]`. A picture
whose run (or, for a screenshot, Chromium) is missing is kept as committed, with one line
that says so and how to train the run; a run that is there but cannot be drawn is an
error. `docs/images/pictures.json` records for each picture what it shows, its checkpoint
(path and SHA-256), the command that trained it, the commands that drew it and the commit
of the code that drew it.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, ImageChops

from seq2seq.visualise.screenshot import CHROMIUM_FLAGS, fontconfig_with_cjk
from tools.site.doc_blocks import block_environment
from tools.site.includes import REPO_ROOT

IMAGES = Path("docs") / "images"
RECORD_NAME = "pictures.json"
MAKE_TRAIN = ("outputs/zh_en/checkpoints/best.pt", "outputs/default_cpu/*/checkpoints/best.pt")
MAKE_TRAIN_LAYER = ("outputs/zh_en_layer/checkpoints/best.pt",
                    "outputs/layer_guided_emb/*/checkpoints/best.pt")  # fmt: skip
COMPARE_GUIDED = (
    "multirun/compare_guided/guided/*_+experiment=compare_transformer,{}"
    "attention=scaled_dot,trainer.seed=1234/checkpoints/best.pt"
)
COMPARE_FIRST = (
    "seq2seq-compare budget=full jobs=2 'attention=[scaled_dot]' family_attention=scaled_dot "
    """'train=["trainer.max_steps=900","trainer.valid_every=300"]' 'stages=[attention,encoders]' """
    "dir=multirun/compare_guided"
)
COMPARE_THEN_GUIDED = (
    "seq2seq-compare budget=full jobs=2 family_attention=scaled_dot "
    """'train=["trainer.max_steps=900","trainer.valid_every=300"]' 'stages=[guided,aligner]' """
    "dir=multirun/compare_guided"
)
VIEWER_WINDOW = "1100,1400"  # CSS pixels; the screenshot is then cropped to the page's content
VIEWER_SCALE = "1.5"  # device pixels per CSS pixel: still legible where GitHub shrinks it
TENSORBOARD_WINDOW = "1400,1010"  # the first two rows of probe pictures
CROP_MARGIN = 24  # device pixels of white kept around a cropped screenshot
COMMAND_TIMEOUT_S = 600
DATA_BLOB = re.compile(r'<script type="application/json" id="attention-data">(.*?)</script>', re.S)


class PictureError(RuntimeError):
    """A picture that cannot be drawn although its run is there; one line."""


@dataclass(frozen=True)
class Picture:
    """One picture of docs/images and how it is made."""

    name: str  # its file below docs/images
    kind: str  # plot, viewer, tensorboard or sweep (`DRAW`)
    runs: tuple[str, ...]  # globs of checkpoints (a sweep: of folders), from the repo's top
    trained_by: str  # the command that trains such a run
    shows: str  # what the picture shows: for its caption and alt text
    sentence: str = ""
    hover: str = ""  # viewer: the output piece hovered


PICTURES = (
    Picture(
        "attention_viewer.png", "viewer", MAKE_TRAIN, "make train",
        "the attention viewer of make train's model on 我爱中国。: cross-attention, the layer "
        "and head it opens on (the chosen ones), ▁love hovered",
        sentence="我爱中国。", hover="▁love",
    ),
    Picture(
        "alignment_layer_viewer.png", "viewer", MAKE_TRAIN_LAYER,
        'make train ARGS="alignment=layer hydra.run.dir=outputs/zh_en_layer"',
        "the attention viewer of make train's model with a guided alignment layer on "
        "我爱中国。: it opens on the alignment layer, cross-attention one click away, ▁love "
        "hovered", sentence="我爱中国。", hover="▁love",
    ),
    Picture(
        "first_alignment.png", "plot", ("outputs/first_alignment/checkpoints/best.pt",),
        "seq2seq-train data=toy_reverse encoder=gru decoder=gru attention=additive "
        "encoder.hidden_size=64 decoder.hidden_size=128 model.embed_dim=128 "
        "trainer.max_steps=600 trainer.valid_every=200 hydra.run.dir=outputs/first_alignment",
        "the toy reverse model's attention on a b c d e f g: the anti-diagonal",
        sentence="a b c d e f g",
    ),
    Picture(
        "zh_en_layers.png", "plot", MAKE_TRAIN, "make train",
        "make train's model on 我爱中国。: the cross-attention of every layer and head, and "
        "each layer's head mean", sentence="我爱中国。",
    ),
    Picture(
        "tensorboard_images.png", "tensorboard", MAKE_TRAIN, "make train",
        "TensorBoard's IMAGES view of make train's run: the probe sentences' attention at "
        "the last validation",
    ),
    Picture(
        "toy_attention.png", "sweep", ("multirun/toy_attention",),
        "seq2seq-train -m data=toy_reverse encoder=gru decoder=gru encoder.hidden_size=64 "
        "decoder.hidden_size=128 model.embed_dim=128 trainer.max_steps=600 "
        "trainer.valid_every=200 attention=dot,general,additive "
        "hydra.sweep.dir=multirun/toy_attention",
        "the toy reverse task's attention on a b c d e f g with dot, general and additive "
        "scores, one panel each", sentence="a b c d e f g",
    ),
    Picture(
        "zh_en_unguided.png", "plot", (COMPARE_GUIDED.format(""),), COMPARE_FIRST,
        "make compare's unguided Transformer (900 updates, seed 1234) on 我爱中国。",
        sentence="我爱中国。",
    ),
    Picture(
        "zh_en_guided.png", "plot", (COMPARE_GUIDED.format("alignment=guided,"),),
        f"{COMPARE_FIRST}, then {COMPARE_THEN_GUIDED}",
        "make compare's guided Transformer (900 updates, seed 1234) on 我爱中国。",
        sentence="我爱中国。",
    ),
)  # fmt: skip


@dataclass(frozen=True)
class Outcome:
    """What became of one picture: drawn (with its record entry) or kept (with why)."""

    picture: Picture
    record: dict | None  # drawn: its entry of pictures.json
    why_kept: str = ""
    how_to_draw: str = ""  # kept: what would let it be drawn

    def line(self) -> str:
        where = (IMAGES / self.picture.name).as_posix()
        if self.record is not None:
            return f"drew {where} from {self.record['checkpoint']}"
        return f"kept {where}: {self.why_kept}" + (
            f" ({self.how_to_draw})" if self.how_to_draw else ""
        )


# ---------------------------------------------------------------- which run


def picture_named(name: str) -> Picture:
    """The picture `name` (`attention_viewer.png`); KeyError listing the names otherwise."""
    for picture in PICTURES:
        if picture.name == name:
            return picture
    raise KeyError(f"no picture {name!r}; the pictures: {', '.join(p.name for p in PICTURES)}")


def run_folder(checkpoint: Path) -> Path:
    """`RUN/checkpoints/best.pt` → RUN."""
    return checkpoint.parent.parent


def finished(checkpoint: Path) -> bool:
    """Whether the run of `checkpoint` has ended: trained and tested (its results.json)."""
    return checkpoint.is_file() and (run_folder(checkpoint) / "results.json").is_file()


def sweep_finished(folder: Path) -> bool:
    """Whether a sweep folder holds runs and every one of them has finished."""
    checkpoints = list(folder.glob("*/checkpoints/best.pt"))
    return bool(checkpoints) and all(finished(c) for c in checkpoints)


def newest_run(picture: Picture, repo: Path) -> Path | None:
    """The newest finished run among the picture's globs (relative to `repo`): a checkpoint,
    or for a sweep its folder; newest by the time its results were written. None if none."""
    found = [Path(p) for pattern in picture.runs for p in glob.glob(str(repo / pattern))]
    if picture.kind == "sweep":
        done = [folder for folder in found if sweep_finished(folder)]
        results = [max(f.glob("*/results.json"), key=os.path.getmtime) for f in done]
    else:
        done = [checkpoint for checkpoint in found if finished(checkpoint)]
        results = [run_folder(checkpoint) / "results.json" for checkpoint in done]
    if not done:
        return None
    return max(zip(done, results, strict=True), key=lambda pair: pair[1].stat().st_mtime)[0]


def missing_run(picture: Picture) -> Outcome:
    """A picture kept for want of a finished run where it looks, with how to train one."""
    where = " or ".join(picture.runs)
    return Outcome(
        picture, None, f"no finished run at {where}", f"train it with: {picture.trained_by}"
    )


def from_repo(path: Path, repo: Path) -> str:
    """`path` from the repository's top when it lies inside, else absolute."""
    path, top = path.absolute(), repo.absolute()  # not resolved: a linked outputs/ stays inside
    return str(path.relative_to(top)) if path.is_relative_to(top) else str(path)


# ---------------------------------------------------------------- drawing


def run_command(argv: list[str], cwd: Path, repo: Path, env: dict[str, str] | None = None) -> None:
    """Run one drawing command in `cwd`; PictureError with its output's tail if it fails."""
    done = subprocess.run(
        argv, cwd=cwd, env=env or block_environment(repo), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, timeout=COMMAND_TIMEOUT_S, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        tail = " | ".join(done.stdout.strip().splitlines()[-5:])
        raise PictureError(f"{shlex.join(argv)} exited {done.returncode}: {tail}")


def translate_argv(picture: Picture, checkpoint: Path, option: str, out: str) -> list[str]:
    return ["seq2seq-translate", str(checkpoint), picture.sentence, option, out]


def draw_plot(picture: Picture, checkpoint: Path, folder: Path, repo: Path) -> list[list[str]]:
    """`seq2seq-translate --plot` into `folder`; returns the commands run."""
    argv = translate_argv(picture, checkpoint, "--plot", picture.name)
    run_command(argv, folder, repo)
    return [argv]


def draw_viewer(picture: Picture, checkpoint: Path, folder: Path, repo: Path) -> list[list[str]]:
    """The viewer page of the sentence, screenshot with `picture.hover` hovered."""
    page = folder / Path(picture.name).with_suffix(".html").name
    translate = translate_argv(picture, checkpoint, "--html", page.name)
    run_command(translate, folder, repo)
    hovered = page.with_name(f"hovered_{page.name}")
    text = hovered_page(page.read_text(encoding="utf-8"), picture.hover)
    hovered.write_text(text, encoding="utf-8")
    shot = chromium_screenshot(hovered, folder / picture.name, folder, repo)
    cropped_to_content(folder / picture.name, CROP_MARGIN)
    return [translate, shot]


def draw_tensorboard(
    picture: Picture, checkpoint: Path, folder: Path, repo: Path
) -> list[list[str]]:
    """TensorBoard's IMAGES view of the checkpoint's run, started from the repository's top
    so that the page names the run by its path there."""
    run = from_repo(run_folder(checkpoint), repo)
    argv = [sys.executable, "scripts/tensorboard_screenshot.py", run, "--out",
            str(folder / picture.name), "--window-size", TENSORBOARD_WINDOW,
            "--chromium", chromium_path()]  # fmt: skip
    run_command(argv, repo, repo)
    return [argv]


def draw_sweep(picture: Picture, sweep: Path, folder: Path, repo: Path) -> list[list[str]]:
    """One panel per configuration of the sweep folder."""
    argv = [sys.executable, str(repo / "scripts" / "compare_alignments.py"), str(sweep),
            "--sentence", picture.sentence, "--out", picture.name]  # fmt: skip
    run_command(argv, folder, repo)
    return [argv]


DRAW = {"plot": draw_plot, "viewer": draw_viewer, "tensorboard": draw_tensorboard,
        "sweep": draw_sweep}  # fmt: skip
NEEDS_CHROMIUM = {"viewer", "tensorboard"}


def hovered_page(page: str, piece: str) -> str:
    """The viewer page `page` with a script that, once the page is drawn, hovers the first
    sentence's output piece `piece` in the cross-attention. PictureError when the output
    has no such piece (the caption that names it would be wrong)."""
    blob = DATA_BLOB.search(page)
    if blob is None:
        raise PictureError("the viewer page holds no attention-data blob")
    data = json.loads(blob.group(1))
    rows = data["sentences"][0]["views"][0]["rows"]
    if piece not in rows:
        raise PictureError(f"the output pieces {rows} have no {piece!r} to hover")
    selector = f'.piece[data-side="row"][data-index="{rows.index(piece)}"]'
    script = (f"<script>document.querySelector({json.dumps(selector)})"
              '.dispatchEvent(new MouseEvent("mouseenter"));</script>\n')  # fmt: skip
    end = page.rindex("</body>")
    return page[:end] + script + page[end:]


def chromium_path() -> str:
    """Debian's chromium on PATH, or ""."""
    return shutil.which("chromium") or shutil.which("chromium-browser") or ""


def chromium_screenshot(page: Path, out: Path, folder: Path, repo: Path) -> list[str]:
    """Headless Chromium renders `page` into `out` (`seq2seq.visualise.screenshot`'s flags,
    with the bundled CJK font); returns the command."""
    profile = Path(tempfile.mkdtemp(prefix="chromium-", dir=folder))
    fonts = fontconfig_with_cjk(profile)
    argv = [chromium_path(), *CHROMIUM_FLAGS, f"--user-data-dir={profile / 'user-data'}",
            f"--window-size={VIEWER_WINDOW}", f"--force-device-scale-factor={VIEWER_SCALE}",
            "--virtual-time-budget=5000", f"--screenshot={out}", page.as_uri()]  # fmt: skip
    run_command(argv, folder, repo, {**block_environment(repo), "FONTCONFIG_FILE": str(fonts)})
    shutil.rmtree(profile, ignore_errors=True)
    if not out.is_file():
        raise PictureError(f"chromium wrote no screenshot of {page.name}")
    return argv


def cropped_to_content(path: Path, margin: int) -> None:
    """Crop the PNG at `path` to its non-white content plus `margin` pixels of white."""
    with Image.open(path) as image:
        picture = image.convert("RGB")
    box = ImageChops.difference(picture, Image.new("RGB", picture.size, "white")).getbbox()
    if box is None:
        raise PictureError(f"{path.name} is blank: the page drew nothing")
    left, top, right, bottom = box
    width, height = picture.size
    kept = (max(left - margin, 0), max(top - margin, 0),
            min(right + margin, width), min(bottom + margin, height))  # fmt: skip
    picture.crop(kept).save(path)


# ---------------------------------------------------------------- the record


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def git(repo: Path, *args: str) -> str:
    """What a git command prints in `repo`; "" when it fails (not a checkout, no git)."""
    try:
        done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False)
    except OSError:
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def code_version(repo: Path) -> str:
    """The commit the working tree is at, and whether it holds uncommitted changes."""
    commit = git(repo, "rev-parse", "--short", "HEAD")
    if not commit:
        return "not a git checkout"
    changed = git(repo, "status", "--porcelain", "--untracked-files=no")
    return commit + (" with uncommitted changes" if changed else "")


def shown_word(word: str, replacements: list[tuple[str, str]]) -> str:
    """A command's word as the record shows it: this interpreter as `python`, then each
    (path, shown as) of `replacements`."""
    if word == sys.executable:
        return "python"
    for path, shown in replacements:
        word = word.replace(path, shown)
    return word


def record_entry(
    picture: Picture, source: Path, commands: list[list[str]], repo: Path, folder: Path,
    shown_as: str = "", note: str = "",
) -> dict:  # fmt: skip
    """The pictures.json entry of a picture drawn from `source` (a checkpoint or a sweep
    folder) in the working folder `folder`: the source named `shown_as` (default: its path
    from the repository's top), the working folder as `.`; `note`: where the run was."""
    name = shown_as or from_repo(source, repo)
    replacements = [(str(source), name), (str(folder), "."), (str(repo) + os.sep, "")]
    drawn = [shlex.join(shown_word(word, replacements) for word in argv) for argv in commands]
    entry = {"shows": picture.shows, "checkpoint": name, "trained_by": picture.trained_by}
    if note:
        entry["run"] = note
    if source.is_file():
        entry["checkpoint_sha256"] = sha256(source)
    return {**entry, "drawn_by": drawn, "code": code_version(repo)}


def kept_entry(picture: Picture, repo: Path, why: str) -> dict:
    """The entry of a kept picture that has none: drawn before this record, by what commit."""
    commit = git(repo, "log", "-1", "--format=%h %cs", "--", (IMAGES / picture.name).as_posix())
    when = f"last changed by commit {commit}" if commit else "its commit unknown"
    return {"shows": picture.shows, "checkpoint": None, "trained_by": picture.trained_by,
            "kept": f"drawn before this record was kept ({when}); {why}"}  # fmt: skip


def read_record(path: Path) -> dict:
    """pictures.json as {picture: entry}; {} when there is none yet."""
    if not path.is_file():
        return {}
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise PictureError(f"{path}: not JSON ({error.msg}, line {error.lineno})") from error
    if not isinstance(record, dict):
        raise PictureError(f"{path}: not a JSON object of pictures")
    return record


def write_record(path: Path, record: dict) -> None:
    text = json.dumps(dict(sorted(record.items())), ensure_ascii=False, indent=2) + "\n"
    path.write_text(text, encoding="utf-8")


# ---------------------------------------------------------------- one picture, all of them


def redraw(
    picture: Picture, repo: Path, checkpoint: Path | None = None, shown_as: str = "",
    note: str = "",
) -> Outcome:  # fmt: skip
    """Draw `picture` into repo/docs/images from `checkpoint` (default: its newest finished
    run) and return its record entry (`shown_as`, `note`: see `record_entry`); kept, with
    why, when there is no run or no Chromium. PictureError when drawing fails. The picture
    is replaced only whole, once drawn."""
    source = checkpoint if checkpoint is not None else newest_run(picture, repo)
    if source is None:
        return missing_run(picture)
    if not source.exists():
        return Outcome(picture, None, f"no checkpoint at {source}")
    if picture.kind in NEEDS_CHROMIUM and not chromium_path():
        return Outcome(picture, None, "no chromium on PATH to take it", "apt-get install chromium")
    source, top = source.absolute(), repo.absolute()
    with tempfile.TemporaryDirectory(prefix="seq2seq-picture-") as name:
        folder = Path(name)
        commands = DRAW[picture.kind](picture, source, folder, top)
        if not (folder / picture.name).is_file():
            raise PictureError(f"{shlex.join(commands[-1])} wrote no {picture.name}")
        entry = record_entry(picture, source, commands, top, folder, shown_as, note)
        shutil.copyfile(folder / picture.name, repo / IMAGES / picture.name)
    return Outcome(picture, entry)


def refresh(
    repo: Path, names: list[str] | None = None, checkpoints: dict[str, Path] | None = None,
    shown_as: dict[str, tuple[str, str]] | None = None,
) -> list[Outcome]:  # fmt: skip
    """Redraw the pictures `names` (default: all), each from its newest finished run or
    from `checkpoints[name]` (recorded as `shown_as[name]`: a name and a note), print a
    line for each and update pictures.json (a kept picture keeps its entry, or gets one that
    says it was drawn before the record). PictureError, naming the picture, when one cannot
    be drawn (those drawn before it are kept and recorded)."""
    checkpoints, shown_as = checkpoints or {}, shown_as or {}
    record_path = repo / IMAGES / RECORD_NAME
    record, outcomes = read_record(record_path), []
    try:
        for picture in [picture_named(name) for name in names] if names else PICTURES:
            named = shown_as.get(picture.name, ("", ""))
            try:
                outcome = redraw(picture, repo, checkpoints.get(picture.name), *named)
            except PictureError as error:
                raise PictureError(
                    f"{(IMAGES / picture.name).as_posix()}: {error} (another run: python -m "
                    f"tools.site.pictures {picture.name} --checkpoint {picture.name}=PATH)"
                ) from error
            print(outcome.line(), flush=True)
            if outcome.record is not None:
                record[picture.name] = outcome.record
            elif picture.name not in record:
                record[picture.name] = kept_entry(picture, repo, outcome.why_kept)
            outcomes.append(outcome)
    finally:
        write_record(record_path, record)
    return outcomes


def checkpoint_option(text: str) -> tuple[str, Path]:
    """`attention_viewer.png=outputs/x/checkpoints/best.pt` → (name, path)."""
    name, sep, path = text.partition("=")
    if not sep or not path:
        raise argparse.ArgumentTypeError(f"--checkpoint takes PICTURE=PATH, not {text!r}")
    return name, Path(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.site.pictures",
        description="Redraw the pictures of docs/images from trained runs with the current code.",
    )
    names = ", ".join(picture.name for picture in PICTURES)
    parser.add_argument("pictures", nargs="*", help=f"default: all ({names})")
    parser.add_argument(
        "--checkpoint", type=checkpoint_option, action="append", default=[],
        metavar="PICTURE=PATH", help="draw PICTURE from this checkpoint (a sweep: its folder)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    try:
        for name in args.pictures + [name for name, _ in args.checkpoint]:
            picture_named(name)
        refresh(REPO_ROOT, args.pictures or None, dict(args.checkpoint))
    except (KeyError, PictureError) as error:
        print(f"python -m tools.site.pictures: {error.args[0]}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
