"""The runner of the pages' command blocks (tools.site.doc_blocks), the output regions
it fills (tools.site.outputs) and the results pages' includes (tools.site.includes), on
small pages written here."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.site.doc_blocks import (
    DocBlockError,
    original_page,
    read_blocks,
    run_page,
    same_commands,
    unmarked_command_blocks,
    with_toy_overrides,
    working_folder,
)
from tools.site.includes import include_files
from tools.site.outputs import fill_page, output_names, region_names

REPO_ROOT = Path(__file__).resolve().parent.parent
FENCE = "```"


def page(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "page.md"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_marker_reads_its_attributes_and_the_fence_below_it(tmp_path):
    path = page(
        tmp_path,
        f"""Intro.

<!-- run toy="trainer.max_steps=20" creates="a.txt b/*.pt" output="first" -->
{FENCE}bash
echo hi
{FENCE}

{FENCE}text
not a command
{FENCE}
""",
    )
    (block,) = read_blocks(path)
    assert (block.line, block.language, block.code) == (4, "bash", "echo hi\n")
    assert block.toy == "trainer.max_steps=20"
    assert block.creates == ("a.txt", "b/*.pt")
    assert (block.output, block.skip) == ("first", None)


@pytest.mark.parametrize(
    "text, words",
    [
        ('<!-- run tyo="x" -->\n```bash\nls\n```\n', "unknown attribute 'tyo'"),
        ("<!-- run -->\n\n```bash\nls\n```\n", "followed at once"),
        ("<!-- run -->\n```yaml\na: 1\n```\n", "'yaml' fence"),
        ("<!-- run -->\n```bash\nls\n", "never closed"),
        ("<!-- run toy=x -->\n```bash\nls\n```\n", "cannot read"),
    ],
)
def test_a_marker_that_cannot_be_read_names_its_line(tmp_path, text, words):
    with pytest.raises(DocBlockError, match=words) as raised:
        read_blocks(page(tmp_path, text))
    assert "page.md:1" in str(raised.value)


def test_every_bash_and_python_fence_without_a_marker_is_named(tmp_path):
    path = page(
        tmp_path,
        f"""<!-- run -->
{FENCE}bash
ls
{FENCE}

{FENCE}python
print(1)
{FENCE}

{FENCE}text
$ not a command block
{FENCE}
""",
    )
    assert unmarked_command_blocks(path) == [f"{path}:6"]


@pytest.mark.parametrize(
    "code, expected",
    [
        ("seq2seq-train data=toy_reverse\n", "seq2seq-train data=toy_reverse S=2\n"),
        (
            "seq2seq-train data=toy_reverse 2>&1 | tail -3\n",
            "seq2seq-train data=toy_reverse S=2 2>&1 | tail -3\n",
        ),
        ("seq2seq-train \\\n  data=toy_reverse\n", "seq2seq-train data=toy_reverse S=2\n"),
        (".venv/bin/seq2seq-train a=1 && ls\n", ".venv/bin/seq2seq-train a=1 S=2 && ls\n"),
        ("make train\n", 'make train ARGS="S=2"\n'),
        ('make train ARGS="a=1" && ls\n', 'make train ARGS="a=1 S=2" && ls\n'),
        ("make train ARGS='a=1'\n", "make train ARGS='a=1 S=2'\n"),
        ("# make train\nseq2seq-translate x\n", "# make train\nseq2seq-translate x\n"),
    ],
)
def test_toy_overrides_go_to_every_training_command(code, expected):
    assert with_toy_overrides(code, "S=2") == expected


def test_a_page_runs_in_order_in_one_folder_and_checks_what_it_creates(tmp_path):
    path = page(
        tmp_path,
        f"""<!-- run creates="out/a.txt" -->
{FENCE}bash
mkdir out && echo one > out/a.txt
{FENCE}

<!-- run skip="needs a browser" -->
{FENCE}bash
exit 3
{FENCE}

<!-- run creates="out/b.txt" -->
{FENCE}python
from pathlib import Path
Path("out/b.txt").write_text(Path("out/a.txt").read_text() + "two")
{FENCE}
""",
    )
    folder = tmp_path / "work"
    results = run_page(path, REPO_ROOT, folder)
    assert [r.returncode for r in results] == [0, None, 0]
    assert all(r.ok for r in results)
    assert results[1].output == "skipped: needs a browser"
    assert (folder / "out" / "b.txt").read_text() == "one\ntwo"
    assert (folder / "Makefile").resolve() == (REPO_ROOT / "Makefile").resolve()


def test_a_failing_block_or_a_missing_file_fails_and_stops_the_page(tmp_path):
    path = page(
        tmp_path,
        f"""<!-- run creates="never.txt" -->
{FENCE}bash
echo made nothing
{FENCE}

<!-- run -->
{FENCE}bash
echo not reached
{FENCE}
""",
    )
    (result,) = run_page(path, REPO_ROOT, tmp_path / "work")
    assert result.returncode == 0 and result.missing == ("never.txt",)
    assert not result.ok and "missing after the block: never.txt" in result.report()


def test_a_failing_command_inside_a_pipeline_fails_the_block(tmp_path):
    path = page(tmp_path, f"<!-- run -->\n{FENCE}bash\nfalse | cat\necho after\n{FENCE}\n")
    (result,) = run_page(path, REPO_ROOT, tmp_path / "work")
    assert result.returncode != 0 and "after" not in result.output


def test_make_in_a_working_folder_never_reinstalls(tmp_path):
    """The copied pyproject.toml is older than any install stamp: `make -n train` plans no
    pip install, and would train from the working folder."""
    path = page(tmp_path, f"<!-- run -->\n{FENCE}bash\nmake -n train\n{FENCE}\n")
    if not (REPO_ROOT / ".venv" / ".installed").is_file():
        pytest.skip("no .venv/.installed stamp: the repository was not set up by make")
    (result,) = run_page(path, REPO_ROOT, tmp_path / "work")
    assert result.ok, result.report()
    assert "pip install" not in result.output and "seq2seq-train" in result.output


def test_an_output_region_shows_the_last_matching_lines_of_its_block(tmp_path):
    text = """<!-- run output="log" -->
```bash
echo x
```

<!-- output: log lines="2" match="step" -->
old text
<!-- /output -->
"""
    path = page(tmp_path, text)
    assert output_names(path) == ["log"] and region_names(path) == ["log"]
    log = f"step 1 in {tmp_path}/run\nnoise\nstep 2\nstep 3 in {tmp_path}/run\n"
    filled = fill_page(text, {"log": log}, tmp_path)
    assert (
        '<!-- output: log lines="2" match="step" -->\n```text\nstep 2\nstep 3 in ./run\n```\n<!-- /output -->'
        in filled
    )
    assert fill_page(text, {}, tmp_path) == text


def test_an_included_file_is_relinked_for_the_page(tmp_path):
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "RESULTS.md").write_text(
        "# R\n![a](docs/results/a.png) [top](#r) [p](benchmarks/p.txt) "
        "[benchmarks/q.md](benchmarks/q.md) [web](https://x.org/y)\n",
        encoding="utf-8",
    )
    markdown = "Before.\n<!-- include: RESULTS.md -->\nAfter.\n"
    shown = include_files(markdown, "results/r.md", repo=tmp_path)
    assert shown == (
        "Before.\n# R\n![a](a.png) [top](#r) p (`benchmarks/p.txt`) `benchmarks/q.md` "
        "[web](https://x.org/y)\n\nAfter.\n"
    )
    with pytest.raises(FileNotFoundError, match="MISSING.md"):
        include_files("<!-- include: MISSING.md -->\n", "results/r.md", repo=tmp_path)


def test_a_translated_page_knows_its_original():
    assert original_page(Path("README.zh-CN.md")) == Path("README.md")
    assert original_page(Path("docs/tutorial/tatoeba.zh.md")) == Path("docs/tutorial/tatoeba.md")
    assert original_page(Path("docs/tutorial/tatoeba.md")) is None


ORIGINAL = f"""<!-- run toy="trainer.max_steps=20" creates="out.txt" -->
{FENCE}bash
make install       # creates .venv/
echo '# not a comment' "a # b" > out.txt  # writes it
cat > conf.yaml <<EOF
name: mine         # the prepared folder's name
EOF
{FENCE}

<!-- run skip="starts a server" -->
{FENCE}bash
tensorboard --logdir outputs   # then open it
{FENCE}

<!-- run -->
{FENCE}python
print(1)  # one
{FENCE}
"""


@pytest.mark.parametrize(
    "translation, same",
    [
        (ORIGINAL.replace("# creates .venv/", "# 创建 .venv/").replace("# writes it", "# 写入")
         .replace("# the prepared folder's name", "# 名称").replace("# one", "# 一")
         .replace('skip="starts a server"', 'skip="启动服务"'), True),
        (ORIGINAL.replace("'# not a comment'", "'# 不是注释'"), False),  # a quoted text
        (ORIGINAL.replace('"a # b"', '"a # c"'), False),
        (ORIGINAL.replace("name: mine", "name: yours"), False),  # what the file holds
        (ORIGINAL.replace("max_steps=20", "max_steps=10"), False),  # the markers
        (ORIGINAL.replace('creates="out.txt"', 'creates="out.txt x"'), False),
        (ORIGINAL.replace("print(1)", "print(2)"), False),
        (ORIGINAL.replace('<!-- run skip="starts a server" -->', "<!-- run -->"), False),
        (ORIGINAL.split("<!-- run -->")[0], False),  # a block fewer
    ],
)  # fmt: skip
def test_a_translation_runs_the_same_commands_only_when_only_its_comments_differ(
    tmp_path, translation, same
):
    original = tmp_path / "page.md"
    original.write_text(ORIGINAL, encoding="utf-8")
    translated = tmp_path / "page.zh.md"
    translated.write_text(translation, encoding="utf-8")
    assert original_page(translated) == original
    assert same_commands(translated, original) is same


def test_shared_data_is_linked_into_the_working_folder_beside_the_pages_own(tmp_path):
    shared = tmp_path / "shared" / "data"
    (shared / "raw").mkdir(parents=True)
    (shared / "raw" / "corpus.zip").write_bytes(b"zip")
    (shared / "prepared" / "tatoeba_zh_en").mkdir(parents=True)
    (shared / "prepared" / "tatoeba_zh_en" / "train.zh").write_text("我\n", encoding="utf-8")
    folder = working_folder(REPO_ROOT, tmp_path / "work", shared)
    assert (folder / "data" / "raw" / "corpus.zip").read_bytes() == b"zip"
    prepared = folder / "data" / "prepared"
    assert (prepared / "tatoeba_zh_en").is_symlink()
    assert (prepared / "tatoeba_zh_en" / "train.zh").read_text(encoding="utf-8") == "我\n"
    (prepared / "mine").mkdir()  # a page's own corpus stays in its folder
    assert not (shared / "prepared" / "mine").exists()


def test_a_full_size_region_is_filled_only_by_a_run_as_shown_without_log_prefixes(tmp_path):
    text = """<!-- run output="first-run" -->
```bash
echo x
```

<!-- output: first-run size="full" lines="2" match="^(step [0-9]+ valid|run folder:)" -->
```text
as the page shows it
```
<!-- /output -->
"""
    path = page(tmp_path, text)
    assert region_names(path) == ["first-run"] and region_names(path, as_shown=False) == []
    log = (
        "[2026-12-02 14:00:00,000][seq2seq.training.trainer][INFO] - step 10 valid loss 2.0\n"
        "[2026-12-02 14:00:01,000][seq2seq.training.trainer][INFO] - step 20 valid loss 1.0\n"
        f"run folder: {tmp_path}/outputs/first\n"
    )
    assert fill_page(text, {"first-run": log}, tmp_path) == text  # a toy run leaves it
    filled = fill_page(text, {"first-run": log}, tmp_path, as_shown=True)
    assert "```text\nstep 20 valid loss 1.0\nrun folder: ./outputs/first\n```" in filled


def test_the_readmes_first_run_ends_with_the_block_that_draws_its_picture():
    from tools.site.__main__ import FIRST_RUN_IMAGE, FIRST_RUN_PICTURE, first_run_blocks

    blocks = first_run_blocks(REPO_ROOT / "README.md")
    assert FIRST_RUN_PICTURE in blocks[-1].creates
    assert any(block.output == "first-run" for block in blocks)
    assert f"]({FIRST_RUN_IMAGE.as_posix()})" in (REPO_ROOT / "README.md").read_text(
        encoding="utf-8"
    )


def test_a_page_that_trains_on_tatoeba_uses_the_shared_corpus(tmp_path):
    from tools.site.doc_blocks import uses_shared_data

    trains = page(tmp_path, f"<!-- run -->\n{FENCE}bash\nmake train ARGS=x\n{FENCE}\n")
    assert uses_shared_data(trains)
    toy = tmp_path / "toy.md"
    toy.write_text(
        f"<!-- run -->\n{FENCE}bash\nseq2seq-train data=toy_reverse\n{FENCE}\n\n"
        f'<!-- run skip="no" -->\n{FENCE}bash\nseq2seq-train +experiment=default_cpu\n{FENCE}\n',
        encoding="utf-8",
    )
    assert not uses_shared_data(toy)
