"""The lab's `mechanisms` experiment: its quick run on the toy reverse task, and the list of
mechanisms it trains (the registry's, a plugin's included)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from helpers import dot_score_plugin, is_png, lab_quick_fixture, plugins_unloaded_after

from seq2seq import registry
from seq2seq.lab.chinese.mechanisms import CHINESE
from seq2seq.lab.experiment import LabContext
from seq2seq.lab.mechanisms import EXPERIMENT, SOFT, mechanisms, percent_range, preset_choice
from seq2seq.plugins import import_plugins

quick = lab_quick_fixture(EXPERIMENT)


def context(root: Path, quick: bool) -> LabContext:
    return LabContext(root / "out", root / "runs", root / "data", quick=quick, threads=1)



@pytest.fixture(scope="module")
def rows(quick) -> dict[str, dict]:
    return {row["mechanism"]: row for row in quick.table}


def test_one_row_per_trained_mechanism_with_an_accuracy_in_0_1(quick, rows, tmp_path):
    trained = [mechanism.name for mechanism in mechanisms(context(tmp_path, quick=True))]
    assert list(rows) == trained
    assert {"additive", "dot", "sparsemax", "hard"} <= set(trained)
    for row in rows.values():
        assert 0.0 <= row["alignment accuracy"] <= 1.0
    assert quick.agrees is True  # every mechanism was scored
    assert quick.values["best"] in trained and quick.values["worst"] in trained


def test_hard_attention_is_one_hot_and_sparsemax_sparser_than_softmax(rows):
    assert rows["hard"]["row entropy (nats)"] == 0.0  # one source piece per target row
    assert rows["hard"]["zero weights"] > rows["sparsemax"]["zero weights"] > 0.0
    assert rows["additive"]["zero weights"] < 0.01  # softmax: no exact zeros
    assert rows["additive"]["row entropy (nats)"] > rows["hard"]["row entropy (nats)"]


def test_the_figures_exist_and_are_pngs(quick):
    assert [path.name for path in quick.figures] == ["alignments.png", "quality.png"]
    for path in quick.figures:
        assert is_png(path)


def test_every_registered_score_and_region_is_trained_at_default_size(tmp_path):
    found = mechanisms(context(tmp_path, quick=False))
    assert {m.score for m in found} == set(registry.names("score"))
    assert {m.region for m in found} == set(registry.names("region"))
    named = {m.name: m.overrides for m in found}
    assert named["additive"] == ("attention=additive",)  # the lab's shared reference run
    assert named["local-monotonic"][-1] == "attention.region.mode=monotonic"
    assert "local-predictive" in named


def test_a_preset_is_read_for_its_score_and_region():
    assert preset_choice("dot") == ("dot", "soft")
    assert preset_choice("hard") == ("additive", "hard")
    assert preset_choice("none") is None and preset_choice("no_such_preset") is None


def test_a_plugin_score_joins_the_mechanisms(tmp_path):
    plugin = tmp_path / "twice.py"
    plugin.write_text(dot_score_plugin("twice_dot", 2.0), encoding="utf-8")
    with plugins_unloaded_after():
        import_plugins([str(plugin)])
        for quick in (False, True):
            named = {m.name: m for m in mechanisms(context(tmp_path, quick))}
            assert named["twice_dot"].region == "soft"
            assert named["twice_dot"].plugin == str(plugin)
            assert named["twice_dot"].overrides == (
                "attention=additive", "attention.score=twice_dot", f"plugins=['{plugin}']",
            )  # fmt: skip
    assert "twice_dot" not in {m.name for m in mechanisms(context(tmp_path, False))}


def test_the_chinese_summary_quotes_the_quick_run_s_numbers(quick):
    values = quick.values
    text = CHINESE.summary(quick, True)
    best, worst = values["best"], values["worst"]
    assert text.startswith(f"在 {len(values['mechanisms'].split(','))} 种机制中")
    assert f"{best} 的对齐最好（对齐准确率 {values[f'accuracy.{best}']:.3f}）" in text
    assert f"{worst} 最差（{values[f'accuracy.{worst}']:.3f}）" in text
    sparse = [values[f"zero_share.{name}"] for name in ("sparsemax", "hard")]
    assert f"非 soft 的区域让 {percent_range(sparse)} 的权重恰好为零" in text
    assert ("与论断一致" in text) == bool(quick.agrees)
    # Soft or not is the table's region, as the English summary decides it: a region the
    # registry does not know now (a plugin's, not loaded) counts, and soft rows alone say nothing.
    renamed = [{**row, "mechanism": "plugin_region", "region": "plugin_region"}
               if row["mechanism"] == "hard" else row for row in quick.table]  # fmt: skip
    shares = {**values, "zero_share.plugin_region": values["zero_share.hard"]}
    varied = replace(quick, table=renamed, values=shares)
    assert f"非 soft 的区域让 {percent_range(sparse)} 的权重恰好为零" in CHINESE.summary(varied, True)
    all_soft = [{**row, "region": SOFT} for row in quick.table]
    assert "非 soft 的区域" not in CHINESE.summary(replace(quick, table=all_soft), True)
