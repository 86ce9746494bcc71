"""The Chinese menu says which pages are English only, from the files (a page without a
`.zh.md` twin), and gives the lab's generated pages Chinese titles that follow their
experiments' English titles (`tools.site.translations`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mkdocs.utils import get_markdown_title

from seq2seq.lab.catalogue import experiments
from tools.site import translations

REPO_ROOT = Path(__file__).resolve().parent.parent
MARK = translations.UNTRANSLATED_MARK["zh"]


@dataclass
class FakeFile:
    src_uri: str
    abs_src_path: str


@dataclass
class FakePage:
    title: str | None
    file: FakeFile
    is_index: bool = False
    is_page: bool = True
    is_section: bool = False


@dataclass
class FakeSection:
    title: str
    children: list = field(default_factory=list)
    is_page: bool = False
    is_section: bool = True


def page(docs: Path, src_uri: str, title: str | None, heading: str = "") -> FakePage:
    path = docs / src_uri
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# {heading or title}\n\ntext\n", encoding="utf-8")
    return FakePage(title, FakeFile(src_uri, str(path)), is_index=path.stem.startswith("index"))


def test_a_page_is_translated_when_its_zh_twin_exists(tmp_path):
    (tmp_path / "guides").mkdir()
    for name in ("guides/data.md", "guides/data.zh.md", "guides/serving.md"):
        (tmp_path / name).write_text("# x\n", encoding="utf-8")
    assert translations.is_translated("guides/data.md", "zh", tmp_path)
    assert translations.is_translated("guides/data.zh.md", "zh", tmp_path)
    assert not translations.is_translated("guides/serving.md", "zh", tmp_path)


def test_the_menu_marks_untranslated_pages_and_keeps_translated_titles(tmp_path):
    tutorial = page(tmp_path, "tutorial/first-alignment.zh.md", "第一个对齐")
    guide = page(tmp_path, "guides/serving.md", "部署服务")
    lab_index = page(tmp_path, "lab/index.zh.md", None, heading="注意力实验室")
    lab_page = page(tmp_path, "lab/mechanisms.zh.md", None, heading="各种注意力机制下的「我爱中国」")
    untranslated = page(tmp_path, "lab/masks.md", None, heading="Masks")
    lab = FakeSection("注意力实验室", [lab_index, lab_page, untranslated])
    guides = FakeSection("指南", [guide])
    translations.localise_menu([tutorial, guides, lab], "zh", tmp_path)
    assert tutorial.title == "第一个对齐"
    assert guide.title == f"部署服务{MARK}"
    assert guides.title == "指南"  # no page of its own: its entries say it
    assert lab_page.title == "各种注意力机制下的「我爱中国」"  # the Chinese page's own heading
    assert untranslated.title == f"Masks{MARK}"
    assert lab.title == "注意力实验室"  # its own page is translated


def test_every_lab_experiment_has_its_chinese_page_titled_in_chinese():
    for name, found in experiments().items():
        assert found.zh is not None, name
        chinese = REPO_ROOT / "docs" / "lab" / f"{name}.zh.md"
        assert get_markdown_title(chinese.read_text(encoding="utf-8")) == found.zh.title


def test_the_generated_lab_pages_are_titled_by_their_experiment():
    titles = {name: experiment.title for name, experiment in experiments().items()}
    for path in sorted((REPO_ROOT / "docs" / "lab").glob("*.md")):
        if path.stem != "index" and not path.name.endswith(".zh.md"):
            assert get_markdown_title(path.read_text(encoding="utf-8")) == titles[path.stem]
