"""The tutorial notebook, in English and Chinese, from one list of cells; executed, and
rendered as pages of the documentation site.

`CELLS` holds the tutorial once: each code cell is shared by both languages (so running
one notebook checks the code of both), each prose cell has its English and Chinese text.
`python -m tools.site.notebooks` writes `notebooks/tutorial.ipynb` and
`notebooks/tutorial.zh.ipynb`, runs each top to bottom in a fresh kernel (nbclient) in a
working folder, keeps the outputs in the notebook, and renders the executed notebook to
`docs/tutorial/notebook.md` (`.zh.md`) with nbconvert, its pictures under
`docs/images/notebook/`. The interactive viewer a result shows inline stays interactive on
the site: it is one `<iframe srcdoc=...>` whose page needs no network.

Budgets: the notebook reads `SEQ2SEQ_NOTEBOOK_BUDGET` (`small`: a few dozen updates per
model, as `make test` runs it; anything else: the full budgets a reader runs, `make
train`'s model among them, about 15 minutes on 2 cores) and `SEQ2SEQ_NOTEBOOK_MODEL` (a
trained zh→en checkpoint to load instead of training one, e.g. `make train`'s `best.pt`).

    python -m tools.site.notebooks                       # write, run at full budget, render
    python -m tools.site.notebooks --budget small        # the same at make test's budget
    python -m tools.site.notebooks --model outputs/default_cpu/<run>/checkpoints/best.pt
    python -m tools.site.notebooks --no-run              # write the cells only (no outputs)
    python -m tools.site.notebooks --render-only         # the pages again, from the notebooks
"""

from __future__ import annotations

import argparse
import base64
import copy
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from seq2seq.progress_bars import PROGRESS_ENV
from tools.site.includes import REPO_ROOT

NOTEBOOKS = Path("notebooks")
PAGES = Path("docs") / "tutorial"
IMAGES = Path("docs") / "images" / "notebook"
LANGS = ("en", "zh")
BUDGET_ENV = "SEQ2SEQ_NOTEBOOK_BUDGET"
MODEL_ENV = "SEQ2SEQ_NOTEBOOK_MODEL"
# Above each code cell on a page: the pages' command blocks are run by their tests
# (tools/site/doc_blocks.py); these are run by tests/test_notebook_tutorial.py instead.
CELL_MARKER = '<!-- run skip="a cell of the tutorial notebook, which tests/test_notebook_tutorial.py runs" -->'  # fmt: skip
CELL_TIMEOUT_S = 3600  # a full-budget training cell takes minutes; a hung one is stopped


@dataclass(frozen=True)
class Prose:
    """A markdown cell in both languages."""

    en: str
    zh: str


@dataclass(frozen=True)
class Code:
    """A code cell, the same in both languages."""

    source: str


CELLS: list[Prose | Code] = [
    Prose(
        en="""# Seeing attention in a notebook

This notebook trains a model that reverses its input and watches the anti-diagonal form,
loads a Chinese→English model and looks at its attention on 我爱中国。, compares two
attention mechanisms on the same sentence, and reads the word links and their error
rate (AER). Every picture is drawn inline: nothing is written by hand, no file is opened.

It runs top to bottom in a fresh kernel. With `SEQ2SEQ_NOTEBOOK_BUDGET=small` each model
trains for a few dozen updates only (that is how `make test` runs it, to check that every
cell works); without it the budgets are the tutorial's, about 15 minutes on a 2-core
laptop. Set `SEQ2SEQ_NOTEBOOK_MODEL` to a trained checkpoint (for example `make train`'s
`best.pt`) to load it instead of training the Chinese→English model.""",
        zh="""# 在 notebook 里看注意力

这个 notebook 先训练一个把输入倒过来写的模型，看反对角线怎样形成；再加载一个中译英模型，
看它翻译“我爱中国。”时的注意力；然后在同一个句子上比较两种注意力机制；最后读出词对齐和
它的错误率（AER）。所有图都直接显示在 notebook 里：不用手写文件，也不用打开文件。

它可以在新内核里从头运行到尾。设置 `SEQ2SEQ_NOTEBOOK_BUDGET=small` 时每个模型只训练几十次
更新（`make test` 就这样运行它，检查每个单元都能运行）；不设置时使用教程的完整预算，在双核
笔记本上约 15 分钟。把 `SEQ2SEQ_NOTEBOOK_MODEL` 设为一个训练好的检查点（例如 `make train`
的 `best.pt`），就会加载它，而不再训练中译英模型。""",
    ),
    Code(
        """import os
from pathlib import Path

import seq2seq

RUNS = Path("outputs/notebook")  # every run of this notebook goes below this folder

# make test runs this notebook with SEQ2SEQ_NOTEBOOK_BUDGET=small: tiny models and a few
# dozen updates, so that every cell runs in seconds (the models learn next to nothing).
# These lists come last in each run's overrides, and a later override wins.
SMALL = os.environ.get("SEQ2SEQ_NOTEBOOK_BUDGET") == "small"
TOY_SMALL = [
    "trainer.max_steps=30", "trainer.valid_every=30", "data.source.train_size=1000",
    "data.source.valid_size=50", "data.source.test_size=50", "trainer.test_search.beam_size=1",
] if SMALL else []
ZH_EN_SMALL = [
    "data.max_pairs=2000", "data.valid_size=50", "data.test_size=50", "data.vocab_cap=true",
    "model.embed_dim=32", "encoder.hidden_size=32", "decoder.hidden_size=32",
    "trainer.max_steps=30", "trainer.valid_every=30", "schedule.warmup_steps=10",
    "trainer.test_search.beam_size=1",
] if SMALL else []"""
    ),
    Prose(
        en="""## 1. Watch a model learn to reverse

The toy task `toy_reverse` asks the model to write its input backwards: `c a d` → `d a c`.
Output word *t* copies input word *n − 1 − t*, so a model that has learnt the task looks
at the input from the end to the start: its attention is the anti-diagonal.
`seq2seq.train` takes the same overrides as `seq2seq-train` and returns the run's folder
and results.""",
        zh="""## 1. 看模型学会倒序

玩具任务 `toy_reverse` 要求模型把输入倒过来写：`c a d` → `d a c`。第 *t* 个输出词复制第
*n − 1 − t* 个输入词，所以学会这个任务的模型会从后往前看输入：它的注意力是反对角线。
`seq2seq.train` 接受与 `seq2seq-train` 相同的覆盖项，返回运行文件夹和结果。""",
    ),
    Code(
        """toy_run = seq2seq.train(
    ["data=toy_reverse", "encoder=gru", "decoder=gru", "attention=additive",
     "trainer.max_steps=600", "trainer.valid_every=200"] + TOY_SMALL,
    outputs=RUNS / "toy_reverse",
)
print(toy_run.run_dir)
print("test BLEU", round(toy_run.results["test"]["bleu"], 2))"""
    ),
    Prose(
        en="""Load the trained model and reverse a sequence. The result shows itself as the
interactive viewer: hover an output piece to shade the input pieces it looks at, a cell
for its exact weight.""",
        zh="""加载训练好的模型，倒序一个序列。结果会显示为交互式查看器：把鼠标移到一个输出片段上，
它关注的输入片段就会按权重着色；移到一个格子上可以看到精确的权重。""",
    ),
    Code(
        """reverser = seq2seq.load(toy_run.checkpoint)
reversed_ = reverser.translate("a b c d e f g")
reversed_"""
    ),
    Prose(
        en="""The same weights as a static heat map (what a page that cannot run scripts
shows), and for each output piece the input piece it looks at most. After the full
budget every output piece looks at the input piece it copies.""",
        zh="""同样的权重画成静态热力图（不能运行脚本的页面显示的就是它），以及每个输出片段最关注的
输入片段。完整预算训练后，每个输出片段都关注它所复制的输入片段。""",
    ),
    Code("""reversed_.plot()"""),
    Code(
        """weights = reversed_.attention[-1].mean(axis=0)  # last layer, mean over heads: (target, source)
for t, piece in enumerate(reversed_.target_pieces):
    print(f"{piece:>5} looks most at {reversed_.source_pieces[weights[t].argmax()]}")"""
    ),
    Prose(
        en="""## 2. Chinese → English: 我爱中国。

`make train`'s model: a small Transformer trained on Tatoeba Chinese–English for 1,900
updates (about 4 minutes on 2 cores; the corpus is downloaded once). The viewer opens on
the head that training chose for alignments on the valid gold pairs; the buttons switch
layer and head, and the encoder's and decoder's self-attention.""",
        zh="""## 2. 中译英：我爱中国。

这是 `make train` 的模型：在 Tatoeba 中英语料上训练 1,900 次更新的小型 Transformer（双核约
4 分钟；语料只下载一次）。查看器打开时显示训练在验证集金标准对齐上选出的那个头；按钮可以
切换层和头，以及编码器和解码器的自注意力。""",
    ),
    Code(
        """model_path = os.environ.get("SEQ2SEQ_NOTEBOOK_MODEL")  # a trained checkpoint, if you have one
if model_path is None:
    zh_en_run = seq2seq.train(["+experiment=default_cpu"] + ZH_EN_SMALL, outputs=RUNS / "zh_en")
    model_path = zh_en_run.checkpoint
zh_en = seq2seq.load(model_path)
love = zh_en.translate("我爱中国。")
love"""
    ),
    Prose(
        en="""## 3. Two mechanisms on the same sentence

A GRU encoder–decoder with additive attention (Bahdanau et al. 2015), trained on the same
data for the same number of updates, beside the Transformer's scaled dot-product
attention. The RNN has one attention ("layer 0", one head); the Transformer has one per
decoder layer, each with four heads.""",
        zh="""## 3. 同一个句子上的两种机制

一个使用加性注意力（Bahdanau 等 2015）的 GRU 编码器–解码器，在同样的数据上训练同样多的更新，
放在 Transformer 的缩放点积注意力旁边。RNN 只有一个注意力（“第 0 层”，一个头）；Transformer
每个解码器层有一个，每个有四个头。""",
    ),
    Code(
        """gru_run = seq2seq.train(
    ["+experiment=gru_additive", "data.max_tokens=1024", "trainer.max_steps=1900",
     "trainer.valid_every=380"] + ZH_EN_SMALL,
    outputs=RUNS / "gru_additive",
)
gru = seq2seq.load(gru_run.checkpoint)
seq2seq.compare(
    love, gru.translate("我爱中国。"),
    titles=["Transformer, scaled dot-product, 4 heads", "GRU, additive (Bahdanau)"],
)"""
    ),
    Prose(
        en="""## 4. Links and their error rate

A result also carries its word links, read from the attention the viewer opened on:
each target word is linked to the source word it gives most weight to. The alignment
error rate (AER) compares such links with links drawn by hand: the project keeps 200
hand-aligned test pairs for Chinese–English, and `gold_aer` scores the model on them,
with the head chosen on the valid pairs (lower is better; 0 is perfect).""",
        zh="""## 4. 词对齐和它的错误率

结果里还带着词对齐：从查看器打开时的那个注意力读出，每个目标词连到它权重最大的源词。对齐错误率
（AER）把这些对齐与人工标注的对齐比较：项目为中英保留了 200 个人工对齐的测试句对，`gold_aer`
在它们上面给模型打分，所用的头在验证句对上选出（越低越好；0 为完美）。""",
    ),
    Code(
        """for source_word, target_word in love.word_links():
    print(f"{source_word} → {target_word}")"""
    ),
    Code(
        """scores = zh_en.gold_aer()
print(f"test AER {scores.best.aer:.3f} ({scores.best_name}, chosen on valid)")
print(f"test AER {scores.head_mean.aer:.3f} (last layer, mean of the heads)")"""
    ),
    Prose(
        en="""## 5. In bertviz

If you already use [bertviz](https://github.com/jessevig/bertviz), a result gives the
arguments of its `head_view` (bertviz is optional: `pip install bertviz`).""",
        zh="""## 5. 在 bertviz 里看

如果你已经在用 [bertviz](https://github.com/jessevig/bertviz)，结果可以直接给出它的
`head_view` 的参数（bertviz 是可选的：`pip install bertviz`）。""",
    ),
    Code(
        """try:
    from bertviz import head_view
except ImportError:
    print("bertviz is not installed: pip install bertviz")
else:
    head_view(**love.to_bertviz())"""
    ),
]


def notebook(lang: str):
    """The tutorial as an nbformat notebook in `lang` ("en" or "zh"), without outputs."""
    import nbformat

    cells = []
    for cell in CELLS:
        if isinstance(cell, Prose):
            cells.append(nbformat.v4.new_markdown_cell(getattr(cell, lang)))
        else:
            cells.append(nbformat.v4.new_code_cell(cell.source))
    for number, cell in enumerate(cells):
        cell["id"] = f"{lang}-{number:02d}"  # stable ids: a rewrite changes only what changed
    book = nbformat.v4.new_notebook(cells=cells)
    book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}  # fmt: skip
    book.metadata["language_info"] = {"name": "python"}
    return book


def notebook_path(lang: str, repo: Path = REPO_ROOT) -> Path:
    suffix = "" if lang == "en" else f".{lang}"
    return repo / NOTEBOOKS / f"tutorial{suffix}.ipynb"


def executed(book, folder: Path, budget: str | None, model: str | None):
    """`book` run top to bottom in a fresh kernel whose working folder is `folder`, with
    progress bars off (`PROGRESS_ENV`: a bar redraws itself in place in a live notebook,
    but its stored output would keep every frame, thousands of lines); an error in a cell raises nbclient's
    CellExecutionError naming the cell."""
    from nbclient import NotebookClient

    environment = {BUDGET_ENV: budget, MODEL_ENV: model, PROGRESS_ENV: "0"}
    saved = {name: os.environ.get(name) for name in environment}
    try:
        for name, value in environment.items():  # the kernel inherits this process's environment
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        client = NotebookClient(
            book, timeout=CELL_TIMEOUT_S, kernel_name="python3",
            resources={"metadata": {"path": str(folder)}},
        )  # fmt: skip
        client.execute()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return book


def coalesced(book):
    """`book` with each run of stream outputs of a cell merged into one, as nbconvert's
    CoalesceStreamsPreprocessor does (a training cell's log is one block, not one per line)."""
    from nbconvert.preprocessors import CoalesceStreamsPreprocessor

    book, _ = CoalesceStreamsPreprocessor().preprocess(book, {})
    return book


def one_line_html(book):
    """A copy of `book` whose HTML outputs are one line each, a line break written `&#10;`
    (the same character in an attribute such as `srcdoc`, white space between tags): in
    markdown a blank line inside an HTML block would end it and show the rest as text."""
    flat = copy.deepcopy(book)
    for cell in flat.cells:
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            if "text/html" in data:
                data["text/html"] = data["text/html"].replace("\n", "&#10;")
    return flat


def markdown_page(book, lang: str, repo: Path = REPO_ROOT) -> str:
    """The executed notebook as a page of the site: nbconvert's markdown, each picture
    written to docs/images/notebook/ and linked from the page, each HTML output on one
    line (`one_line_html`)."""
    from nbconvert import MarkdownExporter

    body, resources = MarkdownExporter().from_notebook_node(one_line_html(book))
    images = repo / IMAGES
    images.mkdir(parents=True, exist_ok=True)
    for name, data in resources.get("outputs", {}).items():
        if f"]({name})" not in body:
            continue  # a picture of an output shown as HTML on the page
        target = images / f"{lang}-{name}"
        target.write_bytes(data if isinstance(data, bytes) else base64.b64decode(data))
        body = body.replace(f"]({name})", f"](../images/notebook/{target.name})")
    source = "notebooks/tutorial.ipynb" if lang == "en" else "notebooks/tutorial.zh.ipynb"
    note = f"<!-- generated by python -m tools.site.notebooks from {source}: edit the cells in tools/site/notebooks.py -->"  # fmt: skip
    body = re.sub(r"^```python$", CELL_MARKER + "\n```python", body, flags=re.MULTILINE)
    return note + "\n\n" + re.sub(r"\n{3,}", "\n\n", body).strip() + "\n"


def render(lang: str, repo: Path = REPO_ROOT) -> None:
    """The page of the committed, executed notebook of `lang`, written again without
    running it (after a change to the rendering); its streams coalesced first."""
    import nbformat

    path = notebook_path(lang, repo)
    book = coalesced(nbformat.read(path, as_version=4))
    nbformat.write(book, path)
    suffix = "" if lang == "en" else f".{lang}"
    page = repo / PAGES / f"notebook{suffix}.md"
    page.write_text(markdown_page(book, lang, repo), encoding="utf-8")
    print(f"wrote {page.relative_to(repo)} from {path.relative_to(repo)}")


def write(lang: str, run: bool, budget: str | None, model: str | None, repo: Path = REPO_ROOT) -> None:  # fmt: skip
    """Write the notebook of `lang` (run when `run`) and, when run, its page."""
    import nbformat

    book = notebook(lang)
    if run:
        with tempfile.TemporaryDirectory(prefix="seq2seq-notebook-") as folder:
            executed(book, Path(folder), budget, model)
        book = coalesced(book)
    path = notebook_path(lang, repo)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(book, path)
    print(f"wrote {path.relative_to(repo)}")
    if run:
        suffix = "" if lang == "en" else f".{lang}"
        page = repo / PAGES / f"notebook{suffix}.md"
        page.write_text(markdown_page(book, lang, repo), encoding="utf-8")
        print(f"wrote {page.relative_to(repo)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.site.notebooks",
        description="Write the tutorial notebooks, run them, render them for the site.",
    )
    parser.add_argument("--budget", choices=["full", "small"], default="full")
    parser.add_argument(
        "--model", help="a trained zh→en checkpoint to load instead of training one"
    )
    parser.add_argument("--no-run", action="store_true", help="write the cells only")
    parser.add_argument(
        "--render-only", action="store_true",
        help="render the pages of the committed executed notebooks, running nothing",
    )  # fmt: skip
    parser.add_argument("--lang", choices=LANGS, action="append", help="only this language")
    args = parser.parse_args(argv)
    model = None if args.model is None else str(Path(args.model).resolve())
    for lang in args.lang or LANGS:
        if args.render_only:
            render(lang)
        else:
            write(lang, not args.no_run, args.budget, model)
    return 0


if __name__ == "__main__":
    sys.exit(main())
