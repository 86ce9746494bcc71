"""Every command block of the README and the tutorial (both languages) runs, at toy size.

The pages mark their blocks (`<!-- run ... -->`, tools.site.doc_blocks); each page's
blocks run in order in a working folder of their own, and each must exit 0 and leave the
files its marker names. A bash or python block without a marker fails here, so that no
command is shown without being run; a block marked `skip="why"` is reported as skipped.

To stay within a few minutes: the Tatoeba corpus is prepared once for the session and
linked into each page's folder (`prepare_shared_data`: each page's own preparation finds
it cached), and a translated page whose blocks run exactly its original's commands (only
its comments translated: `same_commands`) is reported as skipped, its commands run by its
original's test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.site.doc_blocks import (
    original_page,
    prepare_shared_data,
    read_blocks,
    run_page,
    runnable_pages,
    same_commands,
    unmarked_command_blocks,
    uses_shared_data,
)
from tools.site.outputs import output_names, region_names

REPO_ROOT = Path(__file__).resolve().parent.parent
PAGES = runnable_pages(REPO_ROOT)
READMES = [REPO_ROOT / "README.md", REPO_ROOT / "README.zh-CN.md"]


def name(page: Path) -> str:
    return page.relative_to(REPO_ROOT).as_posix()


def pages_with_blocks() -> list[Path]:
    return [page for page in PAGES if read_blocks(page)]


def skipped_blocks() -> list:
    return [block for page in PAGES for block in read_blocks(page) if block.skip is not None]


def test_the_readmes_and_the_tutorial_have_runnable_blocks():
    counts = {name(page): len(read_blocks(page)) for page in PAGES}
    assert sum(counts.values()) > 0, f"no <!-- run --> block in {sorted(counts) or 'any page'}"
    for readme in READMES:
        assert counts.get(name(readme), 0) > 0, f"{name(readme)} has no <!-- run --> block"


def test_every_command_block_is_marked():
    unmarked = [where for page in PAGES for where in unmarked_command_blocks(page)]
    assert not unmarked, (
        'command blocks without a <!-- run --> marker (or <!-- run skip="why" -->) on the '
        f"line above: {unmarked}"
    )


def test_every_output_region_has_a_block_that_fills_it():
    for page in PAGES:
        missing = set(region_names(page)) - set(output_names(page))
        assert not missing, (
            f"{name(page)}: <!-- output: NAME --> without a run output=NAME: {missing}"
        )


@pytest.fixture(scope="session")
def shared_data(tmp_path_factory) -> Path:
    """The Tatoeba corpus prepared once (raw file and prepared folder), for every page."""
    return prepare_shared_data(REPO_ROOT, tmp_path_factory.mktemp("shared-data"))


# Pages whose toy runs take minutes and repeat paths that faster tests cover: `slow`, so out
# of `make test` (12 minutes on 2 idle cores) and run by `make test-docs`, `make test-all`
# and CI (.ci/run). The README and the tutorial's first page stay in `make test`.
SLOW_PAGES = {
    "docs/tutorial/comparing.md": "a toy sweep (tests/test_compare_command.py) and the lab",
    "docs/tutorial/first-alignment.md": "toy trainings (tests/test_visualise_learning.py)",
    "docs/tutorial/tatoeba.md": "the README's Tatoeba training, again",
    "docs/tutorial/seeing-attention.md": "the README's Tatoeba training, again",
    "docs/tutorial/own-corpus.md": "a corpus of the user's own (tests/test_install.py)",
    "docs/tutorial/own-attention.zh.md": "own-attention.md's plugin, in Chinese",
}


def page_params() -> list:
    """Every page with blocks; those of SLOW_PAGES marked `slow`."""
    return [
        pytest.param(page, marks=pytest.mark.slow) if name(page) in SLOW_PAGES else page
        for page in pages_with_blocks()
    ]


def test_every_slow_page_exists():
    missing = sorted(set(SLOW_PAGES) - {name(page) for page in pages_with_blocks()})
    assert not missing, f"SLOW_PAGES names pages without blocks: {missing}"


@pytest.mark.parametrize("page", page_params(), ids=name)
def test_the_blocks_of_the_page_run(page, tmp_path, request):
    original = original_page(page)
    if same_commands(page, original):
        pytest.skip(f"the same commands as {name(original)}, whose test runs them")
    shared = request.getfixturevalue("shared_data") if uses_shared_data(page) else None
    results = run_page(page, REPO_ROOT, tmp_path / "work", shared_data=shared)
    failed = [result for result in results if not result.ok]
    assert not failed, failed[0].report()
    assert len(results) == len(read_blocks(page))


@pytest.mark.parametrize(
    "block", skipped_blocks(), ids=lambda block: f"{name(block.page)}:{block.line}"
)
def test_a_block_marked_skip_is_not_run(block):
    pytest.skip(f"{name(block.page)}:{block.line} not run: {block.skip}")


def test_every_translation_has_its_original_page():
    for page in PAGES:
        original = original_page(page)
        if original is not None:
            assert original.is_file(), f"{name(page)} translates {name(original)}, which is missing"
