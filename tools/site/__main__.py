"""`python -m tools.site` (`make docs`): regenerate what the site generates from the code.

1. the reference pages (`tools.site.reference`) into docs/reference/, and the tables of
   components in the READMEs (`tools.site.readme_tables`);
2. the output regions of the README and the tutorial (`tools.site.outputs`): each page
   that has one runs its blocks in a temporary working folder (`tools.site.doc_blocks`)
   and shows what they printed: at toy size (the markers' `toy=` overrides), or as the page
   shows them with `--as-shown` (full trainings: minutes to hours). `--no-outputs` skips
   this step;
3. with `--first-run`: the README's first run as it shows it (its blocks up to the one that
   draws `first_alignment.png`; about a minute on 2 cores), which fills its `size="full"`
   output regions (the lines the training ends with) and redraws the picture
   docs/images/first_alignment.png from the run's checkpoint;
4. the pictures of docs/images (`tools.site.pictures`), redrawn by the current code from
   the runs they show (`make train`'s, the README's first run, `make compare`'s): a
   picture whose run is not on this machine is kept, with a line that says so.
   `--no-pictures` skips this step.

The strict build of the site is make's next step (`mkdocs build --strict`).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from seq2seq.output_folders import OutputPlaceError, check_output_place, place_error
from tools.site import pictures, readme_tables, reference
from tools.site.doc_blocks import (
    BlockResult,
    block_environment,
    read_blocks,
    run_block,
    run_page,
    runnable_pages,
    working_folder,
)
from tools.site.includes import REPO_ROOT
from tools.site.outputs import fill_page, region_names

FIRST_RUN_PICTURE = "first_alignment.png"  # what the README's first run draws
FIRST_RUN_IMAGE = Path("docs") / "images" / FIRST_RUN_PICTURE  # where the README shows it
FIRST_RUN_CHECKPOINT = Path("outputs") / "first_alignment" / "checkpoints" / "best.pt"


def reported(results: list[BlockResult]) -> bool:
    """Print each block's result; False (with the first failure's report) if one failed."""
    for result in results:
        print(f"  {result.block.where}: {'ok' if result.ok else 'FAILED'} "
              f"({result.seconds:.0f} s)", flush=True)  # fmt: skip
    failed = [result for result in results if not result.ok]
    if failed:
        print(failed[0].report(), file=sys.stderr)
    return not failed


def fill_outputs(page: Path, results: list[BlockResult], folder: Path, as_shown: bool) -> None:
    outputs = {r.block.output: r.output for r in results if r.block.output}
    text = page.read_text(encoding="utf-8")
    page.write_text(fill_page(text, outputs, folder.resolve(), as_shown), encoding="utf-8")


def refresh_outputs(page: Path, repo: Path, toy: bool) -> bool:
    """Run the page's blocks and fill its output regions; False if a block failed."""
    with tempfile.TemporaryDirectory(prefix="seq2seq-docs-") as folder:
        results = run_page(page, repo, Path(folder), toy)
        if not reported(results):
            return False
        fill_outputs(page, results, Path(folder), as_shown=not toy)
    return True


def first_run_blocks(readme: Path) -> list:
    """The README's blocks up to the one that creates the first run's picture."""
    blocks = read_blocks(readme)
    for index, block in enumerate(blocks):
        if FIRST_RUN_PICTURE in block.creates:
            return blocks[: index + 1]
    raise ValueError(f"no block of {readme} creates {FIRST_RUN_PICTURE} (creates=...)")


def refresh_first_run(repo: Path) -> bool:
    """Run the README's first run as shown; fill the full-size output regions of both
    READMEs and copy the picture it draws to docs/images/. False if a block failed."""
    readme = repo / "README.md"
    with tempfile.TemporaryDirectory(prefix="seq2seq-first-run-") as name:
        folder = working_folder(repo, Path(name))
        env = block_environment(repo)
        results = []
        for block in first_run_blocks(readme):
            results.append(run_block(block, folder, env, toy=False))
            if not results[-1].ok:
                break
        if not reported(results):
            return False
        for page in (readme, repo / "README.zh-CN.md"):
            if page.is_file():
                fill_outputs(page, results, folder, as_shown=True)
        print("wrote the first run's output in the READMEs")
        pictures.refresh(
            repo, [FIRST_RUN_PICTURE],
            {FIRST_RUN_PICTURE: folder / FIRST_RUN_CHECKPOINT},
            {FIRST_RUN_PICTURE: (FIRST_RUN_CHECKPOINT.as_posix(), "the README's first run, in a "
                                 "temporary folder (python -m tools.site --first-run)")},
        )  # fmt: skip
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.site", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--no-outputs", action="store_true", help="do not run the pages' blocks")
    parser.add_argument(
        "--as-shown", action="store_true", help="run the blocks without their toy overrides"
    )
    parser.add_argument(
        "--first-run", action="store_true",
        help="also run the README's first run as shown (about a minute): its output and picture",
    )  # fmt: skip
    parser.add_argument(
        "--no-pictures", action="store_true", help="do not redraw the pictures of docs/images"
    )
    args = parser.parse_args(argv)
    try:
        return build(args)
    except OSError as error:  # a page or picture that cannot be written: one line
        print(f"python -m tools.site: {place_error(error, REPO_ROOT)}", file=sys.stderr)
        return 2
    except OutputPlaceError as error:
        print(f"python -m tools.site: {error}", file=sys.stderr)
        return 2
    except pictures.PictureError as error:  # a checkpoint there that the code cannot draw
        print(f"python -m tools.site: {error}", file=sys.stderr)
        return 1


def build(args: argparse.Namespace) -> int:
    """The steps of the module docstring; 0, or 1 when a page's block failed. The places
    written are checked first, so that minutes of blocks never end in an unwritable page."""
    for place in (REPO_ROOT, REPO_ROOT / "docs", REPO_ROOT / FIRST_RUN_IMAGE.parent):
        check_output_place(place)
    for path in reference.write_pages(REPO_ROOT / "docs"):
        print(f"wrote {path.relative_to(REPO_ROOT)}")
    for path in readme_tables.write_readmes(REPO_ROOT):
        print(f"wrote the components tables of {path.relative_to(REPO_ROOT)}")
    ok = refresh_first_run(REPO_ROOT) if args.first_run else True
    if not args.no_pictures:  # after the first run, whose picture it then leaves alone
        drawn_by_first_run = {FIRST_RUN_PICTURE} if args.first_run else set()
        pictures.refresh(
            REPO_ROOT, [p.name for p in pictures.PICTURES if p.name not in drawn_by_first_run]
        )
    if args.no_outputs:
        return 0 if ok else 1
    for page in runnable_pages(REPO_ROOT):
        if region_names(page, as_shown=args.as_shown):
            print(f"running {page.relative_to(REPO_ROOT)} for its outputs", flush=True)
            ok = refresh_outputs(page, REPO_ROOT, toy=not args.as_shown) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
