"""The lab's framework: the catalogue, the command line, the pages and the run cache.

Each experiment's own quick run is tested in tests/test_lab_<name>.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from matplotlib.figure import Figure

import seq2seq.cli.lab as lab_cli
from seq2seq.lab.catalogue import experiment, experiments
from seq2seq.lab.experiment import ChineseText, Experiment, Finding, LabContext
from seq2seq.lab.page import (
    Machine,
    markdown_table,
    models_note,
    page_text,
    page_text_zh,
    run_from_record,
)
from seq2seq.lab.training import run_folder, run_overrides

MACHINE = Machine("a test CPU", 2, 1, 100.0)


def context(tmp_path: Path, **changes) -> LabContext:
    return LabContext(tmp_path / "out", tmp_path / "runs", tmp_path / "data", **changes)


def drawn(context: LabContext) -> Finding:
    figure = Figure(figsize=(2, 2))
    figure.add_subplot().plot([0, 1], [1, 0])
    path = context.figure("line")
    figure.savefig(path)
    return Finding(
        summary="The line falls from 1 to 0.",
        table=[{"x": 0, "y": 1.0}, {"x": 1, "y": 0.0}],
        figures=[path],
        values={"slope": -1.0},
        agrees=True,
    )


def broken(context: LabContext) -> Finding:
    raise RuntimeError("this experiment breaks\non two lines")


def slope_zh(finding: Finding, quick: bool) -> str:
    return f"直线的斜率是 {finding.values['slope']:.1f}" + ("（快速版）" if quick else "") + "。"


LINE_ZH = ChineseText("一条直线", "直线往下走。", "画一条直线。", slope_zh)
FAKES = {
    "drawn": Experiment("drawn", 1, "A line", "Lines fall.", drawn, "Draws one line.", LINE_ZH),
    "broken": Experiment("broken", 2, "Broken", "It breaks.", broken),
}
DOCS_LAB = Path(__file__).resolve().parents[1] / "docs" / "lab"


def test_every_experiment_module_registers_one_experiment_named_as_its_module():
    found = experiments()
    assert len(found) >= 8  # the eight claims of the lab
    for name, registered in found.items():
        assert registered.run.__module__ == f"seq2seq.lab.{name}"
        assert registered.claim.strip() and registered.title and registered.default_size
    orders = [registered.order for registered in found.values()]
    assert orders == sorted(orders) and len(set(orders)) == len(orders)


def test_an_unknown_experiment_is_refused_with_the_list(capsys):
    with pytest.raises(SystemExit) as stopped:
        lab_cli.main(["no_such_experiment"])
    assert stopped.value.code == 2
    error = capsys.readouterr().err
    assert "no experiment no_such_experiment" in error and "masks" in error
    with pytest.raises(KeyError, match="the experiments: "):
        experiment("no_such_experiment")


def test_list_names_every_experiment(capsys):
    lab_cli.main(["--list"])
    listed = capsys.readouterr().out
    assert all(name in listed for name in experiments())


def test_a_run_writes_the_page_record_and_index_and_a_failure_does_not_stop_the_rest(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(lab_cli, "experiments", lambda: FAKES)
    monkeypatch.setattr(lab_cli, "this_machine", lambda threads: MACHINE)
    with pytest.raises(SystemExit) as stopped:
        lab_cli.main(["broken", "drawn", "--out", str(tmp_path / "pages"), "--quick"])
    assert stopped.value.code == 1
    captured = capsys.readouterr()
    assert "broken failed: this experiment breaks; on two lines" in captured.err
    assert "The line falls from 1 to 0." in captured.out
    page = (tmp_path / "pages" / "drawn.md").read_text(encoding="utf-8")
    assert "# A line" in page and "Lines fall." in page and "seq2seq-lab drawn --quick" in page
    assert "![line](drawn/line.png)" in page and "| x | y |" in page
    assert "float32 matmul ceiling 100 GFLOP/s" in page
    assert (tmp_path / "pages" / "drawn" / "line.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    record = json.loads((tmp_path / "pages" / "drawn" / "finding.json").read_text("utf-8"))
    assert record["values"] == {"slope": -1.0} and record["agrees"] is True
    index = (tmp_path / "pages" / "index.md").read_text(encoding="utf-8")
    assert "[A line](drawn.md)" in index and "Broken" not in index
    chinese = (tmp_path / "pages" / "drawn.zh.md").read_text(encoding="utf-8")
    assert chinese.startswith("# 一条直线\n\n## 论断")
    assert "## 论断\n\n直线往下走。" in chinese and "画一条直线。" in chinese
    assert "直线的斜率是 -1.0（快速版）。" in chinese  # from the recorded values
    assert "**" not in chinese and "这里的测量与论断一致。" in chinese
    assert "float32 矩阵乘法上限 100 GFLOP/s" in chinese and "| x | y |" in chinese
    index_zh = (tmp_path / "pages" / "index.zh.md").read_text(encoding="utf-8")
    assert "[一条直线](drawn.zh.md) | 一致 |" in index_zh and "Broken" not in index_zh


def test_pages_are_written_again_from_the_records_alone(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(lab_cli, "experiments", lambda: FAKES)
    monkeypatch.setattr(lab_cli, "this_machine", lambda threads: MACHINE)
    pages = tmp_path / "pages"
    with pytest.raises(SystemExit):
        lab_cli.main(["drawn", "--out", str(pages), "--quick"])
    written = {path.name: path.read_bytes() for path in pages.glob("*.md")}
    assert sorted(written) == ["drawn.md", "drawn.zh.md", "index.md", "index.zh.md"]
    for name in written:
        (pages / name).unlink()
    monkeypatch.setattr(lab_cli, "this_machine", lambda threads: pytest.fail("nothing runs"))
    lab_cli.main(["--pages", "--out", str(pages)])
    assert {path.name: path.read_bytes() for path in pages.glob("*.md")} == written
    assert "1 experiments' pages written again" in capsys.readouterr().out


def test_pages_refuses_names_and_a_missing_folder(tmp_path, capsys):
    for argv, message in ((["--pages", "masks"], "name no experiment"),
                          (["--pages", "--out", str(tmp_path / "none")], "is not a folder")):  # fmt: skip
        with pytest.raises(SystemExit) as stopped:
            lab_cli.main(argv)
        assert stopped.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("name", list(experiments()))
def test_the_pages_in_docs_are_those_their_records_give_in_both_languages(name):
    """docs/lab/NAME.md and NAME.zh.md are what `seq2seq-lab --pages` writes from
    NAME/finding.json: every Chinese summary reads the numbers of the committed run."""
    found = experiments()[name]
    run = run_from_record(found, DOCS_LAB)
    assert run is not None, f"docs/lab/{name}/finding.json is missing"
    assert (DOCS_LAB / f"{name}.md").read_text(encoding="utf-8") == page_text(run)
    assert found.zh is not None, f"{name} has no Chinese page"
    chinese = page_text_zh(run)
    assert (DOCS_LAB / f"{name}.zh.md").read_text(encoding="utf-8") == chinese
    summary = chinese.split("## 发现\n\n", 1)[1].split("\n\n", 1)[0]
    assert sum("\u4e00" <= char <= "\u9fff" for char in summary) > 20


def test_bad_numbers_are_refused(capsys):
    for argv in (["drawn", "--threads", "-1"], ["drawn", "--max-steps", "0"]):
        with pytest.raises(SystemExit) as stopped:
            lab_cli.main(argv)
        assert stopped.value.code == 2
    assert "argument --max-steps: must be an integer from 1" in capsys.readouterr().err


def test_runs_are_named_by_every_override_and_the_smoke_cap_comes_last(tmp_path):
    plain = context(tmp_path)
    capped = context(tmp_path, max_steps=7)
    a = run_overrides(plain, ["attention=dot"])
    assert run_folder(plain, "x", a) == run_folder(plain, "x", run_overrides(plain, ["attention=dot"]))
    assert run_folder(plain, "x", a) != run_folder(plain, "x", run_overrides(plain, ["attention=general"]))
    smoke = run_overrides(capped, ["trainer.max_steps=400"])
    assert smoke[-3:] == ["trainer.max_steps=7", "trainer.valid_every=7", "schedule.warmup_steps=1"]
    assert run_folder(capped, "x", smoke) != run_folder(plain, "x", a)


def test_the_same_overrides_under_another_label_find_the_earlier_run(tmp_path):
    plain = context(tmp_path)
    overrides = run_overrides(plain, ["attention=dot"])
    first = run_folder(plain, "gru-dot", overrides)
    first.mkdir(parents=True)
    assert run_folder(plain, "dot-soft", overrides) == first
    assert run_folder(plain, "dot-soft", run_overrides(plain, ["attention=general"])) != first


def test_the_page_says_how_long_its_models_trained_and_which_were_reused():
    assert models_note([]) == ""
    assert models_note([("a", False, 1.25)]) == "; its 1 model(s) trained for 1.2 minutes in all"
    note = models_note([("a", False, 1.0), ("b", True, 2.0), ("c", True, 0.5)])
    assert "3 model(s) trained for 3.5 minutes in all, 2 of them in an earlier run" in note


def test_markdown_table_formats_numbers():
    table = markdown_table([{"name": "a", "value": 0.123456, "big": 1234.5, "n": 3}])
    assert table.splitlines()[-1] == "| a | 0.123 | 1234 | 3 |"
