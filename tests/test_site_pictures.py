"""The pictures of docs/images are redrawn from trained runs by the current code
(`tools.site.pictures`, `make docs`): the newest finished run is taken, a picture without
its run is kept with one line that says so, a drawn one is what the command it records
draws, and the record names the checkpoint by path and hash."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import TOY_TRANSFORMER, compose_config
from PIL import Image

from seq2seq.cli import translate
from seq2seq.runs.assemble import train_and_test
from tools.site import pictures
from tools.site.doc_blocks import logical_lines, read_blocks

REPO_ROOT = Path(__file__).resolve().parent.parent
OLD_PICTURE = b"the committed picture"


def make_repo(root: Path) -> Path:
    """A repository's top with docs/images holding a stand-in of every picture."""
    images = root / "docs" / "images"
    images.mkdir(parents=True)
    for picture in pictures.PICTURES:
        (images / picture.name).write_bytes(OLD_PICTURE)
    return root


def fake_run(folder: Path, finished: bool, age_s: float = 0.0) -> Path:
    """A run folder with a checkpoint file, and results.json (dated `age_s` ago) if finished."""
    checkpoint = folder / "checkpoints" / "best.pt"
    checkpoint.parent.mkdir(parents=True)
    checkpoint.write_bytes(b"not a real checkpoint")
    if finished:
        results = folder / "results.json"
        results.write_text("{}", encoding="utf-8")
        when = results.stat().st_mtime - age_s
        os.utime(results, (when, when))
    return checkpoint


@pytest.fixture(scope="module")
def toy_checkpoint(tmp_path_factory) -> Path:
    """A toy Transformer (2 decoder layers, 4 heads), trained and tested: a finished run."""
    root = tmp_path_factory.mktemp("toy_run")
    run = root / "run"
    train_and_test(compose_config(TOY_TRANSFORMER + [f"data.root={root / 'data'}"]), run)
    assert (run / "results.json").is_file()
    return run / "checkpoints" / "best.pt"


def test_the_newest_finished_run_is_taken_and_an_unfinished_one_never(tmp_path):
    repo = make_repo(tmp_path)
    runs = repo / "outputs" / "default_cpu"
    fake_run(runs / "old", finished=True, age_s=3600)
    newer = fake_run(runs / "newer", finished=True, age_s=60)
    fake_run(runs / "training_now", finished=False)
    assert pictures.newest_run(pictures.picture_named("attention_viewer.png"), repo) == newer


def test_a_picture_without_its_run_is_kept_and_one_line_says_how_to_make_it(tmp_path, capsys):
    repo = make_repo(tmp_path)
    fake_run(repo / "outputs" / "first_alignment", finished=False)  # still training
    [outcome] = pictures.refresh(repo, ["first_alignment.png"])
    printed = capsys.readouterr().out.splitlines()
    assert outcome.record is None
    assert len(printed) == 1 and printed[0].startswith("kept docs/images/first_alignment.png: ")
    assert "hydra.run.dir=outputs/first_alignment" in printed[0]  # the command that trains it
    assert (repo / "docs" / "images" / "first_alignment.png").read_bytes() == OLD_PICTURE
    entry = json.loads((repo / "docs" / "images" / "pictures.json").read_text())[
        "first_alignment.png"
    ]
    assert entry["checkpoint"] is None and entry["kept"].startswith("drawn before this record")


def test_a_run_that_cannot_be_drawn_fails_naming_the_picture_and_keeps_it(tmp_path):
    repo = make_repo(tmp_path)
    fake_run(repo / "outputs" / "first_alignment", finished=True)  # no real checkpoint
    with pytest.raises(pictures.PictureError, match=r"^docs/images/first_alignment\.png: "):
        pictures.refresh(repo, ["first_alignment.png"])
    assert (repo / "docs" / "images" / "first_alignment.png").read_bytes() == OLD_PICTURE


def test_a_plot_is_what_its_recorded_command_draws_from_the_recorded_checkpoint(
    tmp_path, toy_checkpoint
):
    repo = make_repo(tmp_path / "repo")
    run = repo / "outputs" / "first_alignment"
    shutil.copytree(toy_checkpoint.parent.parent, run)
    [outcome] = pictures.refresh(repo, ["first_alignment.png"])
    entry = json.loads((repo / "docs" / "images" / "pictures.json").read_text())[
        "first_alignment.png"
    ]
    checkpoint = run / "checkpoints" / "best.pt"
    assert entry == outcome.record
    assert entry["checkpoint"] == "outputs/first_alignment/checkpoints/best.pt"
    assert entry["checkpoint_sha256"] == hashlib.sha256(checkpoint.read_bytes()).hexdigest()
    assert entry["drawn_by"] == [
        "seq2seq-translate outputs/first_alignment/checkpoints/best.pt 'a b c d e f g' "
        "--plot first_alignment.png"
    ]
    direct = tmp_path / "direct.png"
    assert translate.main([str(checkpoint), "a b c d e f g", "--plot", str(direct)]) == 0
    with (
        Image.open(direct) as expected,
        Image.open(repo / "docs/images/first_alignment.png") as drawn,
    ):
        assert drawn.size == expected.size
        assert drawn.convert("RGB").tobytes() == expected.convert("RGB").tobytes()


def test_the_viewer_page_is_hovered_on_the_named_piece():
    data = {"sentences": [{"views": [{"rows": ["▁I", "▁love", "▁China", "</s>"]}]}]}
    page = (
        '<html><body><script type="application/json" id="attention-data">'
        f"{json.dumps(data)}</script></body></html>"
    )
    hovered = pictures.hovered_page(page, "▁love")
    selector = re.search(r"querySelector\((.*?)\)\.dispatchEvent", hovered).group(1)
    assert json.loads(selector) == '.piece[data-side="row"][data-index="1"]'  # ▁love's row
    assert hovered.index("mouseenter") < hovered.index("</body>")
    with pytest.raises(pictures.PictureError, match="no '▁hate' to hover"):
        pictures.hovered_page(page, "▁hate")


def test_a_screenshot_is_cropped_to_its_content_and_a_margin(tmp_path):
    path = tmp_path / "shot.png"
    image = Image.new("RGB", (300, 200), "white")
    image.paste((0, 0, 0), (40, 30, 140, 90))  # a 100 × 60 block
    image.save(path)
    pictures.cropped_to_content(path, margin=10)
    with Image.open(path) as cropped:
        assert cropped.size == (100 + 2 * 10, 60 + 2 * 10)
        assert cropped.getpixel((10, 10)) == (0, 0, 0) and cropped.getpixel((9, 9)) == (255,) * 3


def test_a_blank_screenshot_is_an_error(tmp_path):
    path = tmp_path / "blank.png"
    Image.new("RGB", (50, 50), "white").save(path)
    with pytest.raises(pictures.PictureError, match="blank"):
        pictures.cropped_to_content(path, margin=10)


def test_every_picture_of_docs_images_is_drawn_by_the_code_and_shown_somewhere():
    images = REPO_ROOT / "docs" / "images"
    made = {picture.name for picture in pictures.PICTURES}
    assert {path.name for path in images.glob("*.png")} == made
    pages = [*REPO_ROOT.glob("README*.md"), *(REPO_ROOT / "docs").rglob("*.md")]
    shown = "\n".join(page.read_text(encoding="utf-8") for page in pages)
    assert [name for name in sorted(made) if f"images/{name})" not in shown] == []
    record = json.loads((images / pictures.RECORD_NAME).read_text(encoding="utf-8"))
    assert set(record) <= made
    for name, entry in record.items():
        assert entry["shows"] == pictures.picture_named(name).shows
        assert entry["trained_by"] == pictures.picture_named(name).trained_by
        assert (entry["drawn_by"] and entry["checkpoint"]) if "drawn_by" in entry else entry["kept"]


@pytest.mark.parametrize(
    ("name", "page"),
    [("first_alignment.png", "README.md"), ("toy_attention.png", "docs/tutorial/comparing.md")],
)
def test_a_toy_pictures_run_is_trained_by_the_command_its_page_shows(name, page):
    shown = [
        " ".join(line.split())
        for block in read_blocks(REPO_ROOT / page)
        for line in logical_lines(block.code)
    ]
    assert pictures.picture_named(name).trained_by in shown


def test_the_command_line_refuses_an_unknown_picture_in_one_line(capsys):
    assert pictures.main(["no_such.png"]) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert "no picture 'no_such.png'" in line and "attention_viewer.png" in line


@pytest.mark.slow
@pytest.mark.skipif(pictures.chromium_path() == "", reason="no chromium on PATH")
def test_the_viewer_screenshot_shows_the_page_with_the_piece_hovered(tmp_path, toy_checkpoint):
    repo = make_repo(tmp_path / "repo")
    page = tmp_path / "page.html"
    assert translate.main([str(toy_checkpoint), "a b c d e", "--html", str(page)]) == 0
    rows = json.loads(pictures.DATA_BLOB.search(page.read_text(encoding="utf-8")).group(1))[
        "sentences"
    ][0]["views"][0]["rows"]
    viewer = dataclasses.replace(
        pictures.picture_named("attention_viewer.png"), sentence="a b c d e", hover=rows[1]
    )
    outcome = pictures.redraw(viewer, repo, toy_checkpoint)
    with Image.open(repo / "docs" / "images" / "attention_viewer.png") as shot:
        width, _ = shot.size
    window_width = int(pictures.VIEWER_WINDOW.split(",")[0]) * float(pictures.VIEWER_SCALE)
    assert 0 < width < window_width  # cropped to the page's content
    assert outcome.record["drawn_by"][0].endswith("'a b c d e' --html attention_viewer.html")
    # The hovered copy, rendered by the same Chromium: the read-out names the hovered piece.
    hovered = tmp_path / "hovered.html"
    hovered.write_text(pictures.hovered_page(page.read_text(encoding="utf-8"), rows[1]), "utf-8")
    dom = subprocess.run(
        [pictures.chromium_path(), "--headless", "--no-sandbox", "--disable-gpu",
         f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", hovered.as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    assert f"“{rows[1]}” (row " in dom and "attends most to" in dom
