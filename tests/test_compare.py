"""The comparison turns sweep run folders into table rows (`seq2seq.study.sweep`,
`seq2seq.study.report`), and the compare presets keep every family within ±10% of the
reference model's parameter count."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from helpers import compose_config
from omegaconf import OmegaConf
from sweep_fixtures import cells, fake_run, report, results

from seq2seq import registry
from seq2seq.config.build import build_model, count_parameters
from seq2seq.configs import config_files
from seq2seq.study.reading import Scalars, best_choice, best_within, read_config, run_titles
from seq2seq.study.report import cost_line
from seq2seq.study.sweep import Configuration, convergence, empty_row, sweep_configurations

# What the comparison sweeps: every attention preset, every `compare_<family>` experiment.
COMPARE_ATTENTIONS = [Path(entry.name).stem for entry in config_files("attention")]
COMPARE_FAMILIES = [
    Path(entry.name).stem.removeprefix("compare_")
    for entry in config_files("experiment")
    if entry.name.startswith("compare_")
]
VOCAB = 4000  # the Tatoeba presets' sentencepiece vocabulary, both sides


def test_the_sweeps_cover_the_registered_components():
    """The compare sweep enumerates the presets; every encoder family is compared."""
    assert "none" in COMPARE_ATTENTIONS and "additive" in COMPARE_ATTENTIONS
    assert set(registry.names("encoder")) <= {
        registry.of_node("encoder", compose_config([f"+experiment=compare_{family}"]).encoder).name
        for family in COMPARE_FAMILIES
    }


@pytest.fixture
def sweep(tmp_path) -> Path:
    """Two finished runs (one without alignment accuracy) and one that crashed."""
    folder = tmp_path / "attention"
    tokens = {"train/tokens_per_sec": [100.0, 300.0, 200.0]}
    fake_run(
        folder / "0_attention=dot",
        "dot",
        results(3_892_384, 12.0),
        {**tokens, "valid/alignment_accuracy": [0.25, 0.5]},
    )
    fake_run(folder / "1_attention=additive", "additive", results(4_023_968, 14.5), tokens)
    fake_run(folder / "10_attention=hard", "hard", None, {})  # crashed: no results.json
    return folder


def test_summary_rows_come_from_results_and_event_files(sweep, tmp_path):
    out = tmp_path / "out"
    assert report([sweep], out) == out / "COMPARISON.md"
    with (out / "comparison.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["model"] for row in rows] == [  # the settings that differ within the sweep
        "score=dot · region=soft",
        "score=additive · region=soft",
        "score=additive · region=hard",
    ]
    first, second, crashed = rows
    assert first["sweep"] == "attention"
    assert first["parameters"] == "3892384" and first["steps"] == "60"
    assert float(first["tokens_per_sec"]) == 200.0  # median of 100, 300, 200
    assert float(first["alignment_accuracy"]) == 0.5  # the last value
    assert float(first["valid_bleu"]) == 13.0 and float(first["test_bleu"]) == 12.0
    assert second["alignment_accuracy"] == ""  # never logged
    assert crashed["test_bleu"] == "" and crashed["tokens_per_sec"] == ""
    assert crashed["run_dir"].endswith("10_attention=hard")  # job 10 sorts after job 1


def test_markdown_table_shows_dashes_for_missing_values(sweep, tmp_path):
    report([sweep], tmp_path)
    text = (tmp_path / "COMPARISON.md").read_text(encoding="utf-8")
    rows = [cells(line) for line in text.splitlines() if line.startswith("| score=")]
    assert rows[0][:12] == [  # no valid/bleu events: no best update, no late gain
        "score=dot · region=soft", "1", "3,892,384", "60", "1.3", "—", "—", "200",
        "13.00", "12.00", "40.50", "0.500",
    ]  # fmt: skip
    # no checkpoint (no AER), no test.hyp (no test), no baseline: those cells are dashes
    assert rows[1].count("—") == 2 + 1 + 4  # and the alignment accuracy (3 AER columns)
    assert rows[2][1] == "0/1"  # the crashed run: no finished seed
    assert rows[2].count("—") == 14  # it has nothing but its name, seeds and folder


def test_a_linked_run_joins_the_other_sweep_and_the_header_names_the_command(sweep, tmp_path):
    """The comparison links the attention sweep's GRU run into the encoder sweep."""
    encoders = tmp_path / "encoders"
    fake_run(
        encoders / "0_encoder=lstm", "additive", results(3_950_000, 11.0), {},
        experiment="compare_lstm",
    )  # fmt: skip
    (encoders / "4_encoder=gru").symlink_to(sweep / "1_attention=additive")
    out = tmp_path / "out"
    made_by = "seq2seq-compare budget=full"
    report([sweep, encoders], out, made_by=made_by, command="seq2seq-compare stages=[summary]")
    text = (out / "COMPARISON.md").read_text(encoding="utf-8")
    assert f"Runs trained by `{made_by}`; this file written by `seq2seq-compare " in text
    section = text.split("## encoders")[1].split("## ")[0]
    rows = [cells(line) for line in section.splitlines() if line.startswith("| encoder=")]
    assert [row[-1] for row in rows] == [
        str(encoders / "0_encoder=lstm"),
        str(encoders / "4_encoder=gru"),
    ]
    assert rows[1][9] == "14.50"  # the linked run's test BLEU


def test_the_encoder_sweep_attention_is_chosen_by_valid_not_test_bleu(tmp_path):
    folder = tmp_path / "attention"
    better_on_test = results(4_000_000, 20.0) | {"valid_best_bleu": 10.0}
    better_on_valid = results(4_000_000, 15.0) | {"valid_best_bleu": 12.0}
    fake_run(folder / "0_attention=dot", "dot", better_on_test, {})
    fake_run(folder / "1_attention=general", "general", better_on_valid, {})
    fake_run(folder / "2_attention=hard", "hard", None, {})  # unfinished: not a candidate
    assert best_choice(folder, "attention") == "general"


def test_a_folder_without_runs_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="no run folder"):
        report([tmp_path], tmp_path / "out")


def parameters(overrides: list[str]) -> int:
    return count_parameters(build_model(compose_config(overrides), VOCAB, VOCAB))


def test_every_compared_model_is_within_ten_percent_of_the_reference():
    reference = parameters(["+experiment=compare_gru", "attention=additive"])
    counts = {
        f"gru+{attention}": parameters(["+experiment=compare_gru", f"attention={attention}"])
        for attention in COMPARE_ATTENTIONS
    }
    outside = {name: count for name, count in counts.items() if abs(count / reference - 1) > 0.10}
    assert not outside, f"outside ±10% of {reference:,}: {outside}"


@pytest.mark.parametrize("attention", COMPARE_ATTENTIONS)
def test_every_family_is_within_ten_percent_of_the_gru_with_the_same_attention(attention):
    """Sweep B runs the families with whichever attention validated best in sweep A."""
    reference = parameters(["+experiment=compare_gru", f"attention={attention}"])
    counts = {
        family: parameters([f"+experiment=compare_{family}", f"attention={attention}"])
        for family in COMPARE_FAMILIES
    }
    outside = {name: count for name, count in counts.items() if abs(count / reference - 1) > 0.10}
    assert not outside, f"attention={attention}: outside ±10% of {reference:,}: {outside}"


def test_convergence_finds_the_best_validation_and_the_late_gain():
    start = 1000.0
    bleu = [(start + 60 * m, step, value) for m, step, value in
            [(2, 100, 5.0), (4, 200, 12.0), (6, 300, 15.0), (8, 400, 15.4)]]  # fmt: skip
    found = convergence(Scalars(start, {"valid/bleu": bleu}), steps=400)
    # best 15.4 at update 400, 8 minutes in; best of the first 300 updates: 15.0
    assert found["best_step"] == 400 and found["minutes_to_best"] == pytest.approx(8.0)
    assert found["last_quarter_gain"] == pytest.approx(0.4)
    falling = bleu[:3] + [(start + 480, 400, 14.0)]
    found = convergence(Scalars(start, {"valid/bleu": falling}), steps=400)
    assert found["best_step"] == 300 and found["last_quarter_gain"] == 0.0
    late_only = convergence(Scalars(None, {"valid/bleu": bleu[3:]}), steps=400)
    assert late_only == {"best_step": 400, "minutes_to_best": None, "last_quarter_gain": None}
    assert set(convergence(Scalars(start, {}), 400).values()) == {None}


def test_minutes_to_best_leave_out_the_hours_between_a_resumed_runs_sessions():
    start = 1000.0  # validations at 2 and 4 minutes, then resumed 3 hours later
    bleu = [(start + 120, 100, 5.0), (start + 240, 200, 9.0), (start + 3 * 3600 + 60, 300, 12.0)]
    clock = [(start + 120, 100, 2.0), (start + 240, 200, 4.0), (start + 3 * 3600 + 60, 300, 5.5)]
    scalars = Scalars(start, {"valid/bleu": bleu, "train/minutes": clock})
    assert convergence(scalars, steps=300)["minutes_to_best"] == pytest.approx(5.5)
    assert convergence(Scalars(start, {"valid/bleu": bleu}), 300)["minutes_to_best"] > 180
    assert best_within(scalars, (4.5, 5.5), "minutes") == [(9.0, 200, 4.0), (12.0, 300, 5.5)]


def test_every_family_trains_with_the_same_recipe():
    """The families differ in their encoder and decoder only: data, embeddings, optimiser,
    schedule and trainer settings are the reference preset's."""

    def recipe(family: str) -> dict:
        cfg = compose_config([f"+experiment=compare_{family}"])
        shared = {key: cfg[key] for key in ("data", "optim", "schedule", "trainer")}
        shared["embed_dim"] = cfg.model.embed_dim
        return OmegaConf.to_container(OmegaConf.create(shared), resolve=True)

    reference = recipe("gru")
    assert reference["schedule"]["_target_"] == "seq2seq.training.schedules.CosineSchedule"
    for family in COMPARE_FAMILIES:
        assert recipe(family) == reference, family


def test_the_csv_goes_to_the_files_folder_and_the_report_stays_in_its_own(sweep, tmp_path):
    """The full budget keeps COMPARISON.md at the top and its CSV and images in docs/results/;
    a `report.out_dir` given on the command line takes them all."""
    from seq2seq.study.comparison import BudgetConfig, files_dir

    out, files = tmp_path / "top", tmp_path / "top" / "docs" / "results"
    assert report([sweep], out, files_dir=files) == out / "COMPARISON.md"
    assert (files / "comparison.csv").is_file() and not (out / "comparison.csv").exists()
    full = BudgetConfig(name="full", seeds=3, train=[], out_dir=".", files_dir="docs/results")
    assert files_dir(None, full) == Path("docs/results")
    assert files_dir("elsewhere", full) is None
    assert files_dir(None, BudgetConfig(name="small", seeds=1, train=[])) is None


def test_the_cost_line_sums_the_finished_runs_and_names_those_not_near_convergence():
    def row(seed, minutes, steps, gain):
        return empty_row(seed=seed, train_minutes=minutes, steps=steps, last_quarter_gain=gain)

    settled = Configuration("attention", "A", [], [row(1, 2.0, 100, 0.1), row(2, 3.7, 250, 0.0)])
    unfinished = Configuration("attention", "B", [], [row(1, None, None, None)])
    line = cost_line([settled, unfinished])
    assert line.startswith("Cost: 2 finished runs, 6 min of training and validation")
    assert "350 updates." in line and line.endswith("last ¼ gain is under 0.5.")
    late = Configuration("attention", "C", [], [row(1, 1.0, 80, 0.2), row(2, 1.0, 90, 0.75)])
    line = cost_line([settled, late])
    assert line.endswith("Not near convergence (last ¼ gain ≥ 0.5): C seed 2 (0.75).")
    assert "4 finished runs" in line and "520 updates" in line


def test_one_vector_summaries_are_rows_of_their_own(tmp_path):
    """`attention=none` started from the final state, the mean or the attention pooling of
    the encoder states: three models, three rows named by what differs."""
    variants = {
        (): "encoder=gru · decoder=gru · attention=none",  # no differing setting: all
        ("model.summary=mean",): "summary=mean",
        ("model.summary=attention_pool", "attention.context=attention_pool"):
            "summary=attention_pool · context=attention_pool",
    }  # fmt: skip
    for number, extra in enumerate(variants):
        run = tmp_path / "docs" / f"{number}_+experiment=compare_gru,attention=none,seed=1"
        fake_run(run, "none", results(838_064, 2.0), {}, extra=("trainer.seed=1", *extra))
    labels = [c.label for c in sweep_configurations(tmp_path / "docs")]
    assert sorted(labels) == sorted(variants.values())


def test_alignment_titles_leave_out_what_a_run_does_not_have(tmp_path):
    """The comparison picture titles each run as its row is named: hierarchical attention has
    no score, region or heads of its own to show as `score=-`."""
    runs = [tmp_path / "0_attention=scaled_dot", tmp_path / "1_attention=hierarchical"]
    for run, attention in zip(runs, ("scaled_dot", "hierarchical"), strict=True):
        fake_run(run, attention, results(838_064, 20.0), {})
    titles = run_titles(runs, [read_config(run) for run in runs])
    assert titles == ["score=scaled_dot · region=soft · heads=1", "attention=hierarchical"]
