"""The comparison's guided sweep: every family with guided alignment, each tested against
its unguided twin (the same overrides without `alignment=guided`), seed by seed."""

from __future__ import annotations

from pathlib import Path

import pytest
from sweep_fixtures import (
    cells,
    degraded,
    fake_run,
    read_csv,
    report,
    results,
    scored_run,
    sentences,
)
from test_compare_command import settings

from seq2seq.configs import preset_names
from seq2seq.study import comparison
from seq2seq.study.comparison import run_comparison
from seq2seq.study.launch import Sweep
from seq2seq.study.sweep import find_twins, sweep_configurations

GUIDED = "alignment=guided"


def guided_sweep(root: Path, settings: tuple[str, ...] = ()) -> Path:
    """Two seeds of the GRU and the CNN, each unguided and guided (with the guided runs'
    `settings`, such as alignment.weight=0.5): the guided GRU copies the references (far
    better than its twin), the guided CNN repeats its twin's output."""
    references = sentences(150, 0)
    prepared = root / "data" / "prepared" / "tatoeba_zh_en"
    prepared.mkdir(parents=True)
    (prepared / "test.en").write_text("\n".join(references) + "\n", encoding="utf-8")
    sweep, number = root / "guided", 0
    for experiment in ("compare_gru", "compare_cnn"):
        for guided in (False, True):
            for seed in (1, 2):
                unguided = degraded(references, seed + (10 if experiment == "compare_cnn" else 0))
                hypotheses = references if guided and experiment == "compare_gru" else unguided
                extra = (f"trainer.seed={seed}", f"data.root={root / 'data'}")
                extra += (GUIDED, *settings) if guided else ()
                run = sweep / f"{number}_{experiment}_{guided}_{seed}"
                scored_run(run, experiment, hypotheses, references, extra)
                number += 1
    return sweep


def test_each_guided_configuration_finds_its_unguided_twin(tmp_path):
    configurations = sweep_configurations(guided_sweep(tmp_path))
    labels = [configuration.label for configuration in configurations]
    twins = find_twins(configurations, GUIDED)
    named = {labels[guided]: labels[twin] for guided, twin in twins.items()}
    assert len(named) == 2
    for guided, twin in named.items():
        assert guided != twin and guided.startswith(twin.split(" · ")[0])
    assert find_twins(configurations, "alignment=other") == {}


def test_the_guided_settings_go_with_the_marker(tmp_path):
    settings = ("alignment.weight=0.5", "alignment.layer=-1")
    configurations = sweep_configurations(guided_sweep(tmp_path, settings))
    labels = [configuration.label for configuration in configurations]
    twins = find_twins(configurations, GUIDED)
    assert len(twins) == 2
    for guided, twin in twins.items():
        assert set(settings) <= configurations[guided].overrides()
        assert not any(item.startswith("alignment") for item in configurations[twin].overrides())
        assert labels[guided].startswith(labels[twin])


def test_guided_rows_are_tested_against_their_own_twin(tmp_path):
    sweep = guided_sweep(tmp_path)
    out = tmp_path / "out"
    report([sweep], out, resamples=200)
    rows = read_csv(out / "comparison.csv")
    guided = [row for row in rows if row["baseline"]]
    assert len(guided) == 4  # two guided configurations × two seeds
    labels = {row["model"] for row in rows}
    for row in guided:
        assert row["baseline"] in labels and row["baseline"] != row["model"]
    copies = [row for row in guided if float(row["test_bleu"]) > 99]
    repeats = [row for row in guided if float(row["test_bleu"]) < 99]
    assert len(copies) == len(repeats) == 2
    assert all(row["significant_vs_baseline"] == "True" for row in copies)
    assert all(float(row["p_vs_baseline"]) == 1.0 for row in repeats)
    assert all(row["significant_vs_baseline"] == "False" for row in repeats)
    text = (out / "COMPARISON.md").read_text(encoding="utf-8")
    table = [cells(line) for line in text.splitlines() if line.startswith("| encoder=")]
    assert sum(row[-2] == "base" for row in table if len(row) == 17) == 2  # the twins
    assert "against each `alignment=guided` configuration's twin" in text
    (verdict,) = [line for line in text.splitlines() if line.startswith("- **guided** (each")]
    assert "significantly better test BLEU: `" in verdict and "(+" in verdict
    assert "no significant difference, so no conclusion: `" in verdict


@pytest.mark.parametrize(
    ("stage", "overrides"),
    [("guided", [GUIDED]), ("layer", ["alignment=layer", "alignment.training=guided,unsupervised"])],
)
def test_a_twin_stage_trains_every_family_and_links_the_twins(
    stage, overrides, tmp_path, monkeypatch
):
    """The guided and the layer stage: every family with the chosen attention and their
    overrides (the defaults), the encoder sweep's runs linked in as the twins."""
    folder = tmp_path / "cmp"
    family = folder / "encoders"
    for number, experiment in enumerate(("compare_cnn", "compare_rnn")):
        fake_run(family / f"{number}_{experiment}", "cosine", results(800_000, 10.0), {},
                 experiment=experiment, extra=("trainer.seed=1234",))  # fmt: skip
    (folder / "encoders_attention.txt").write_text("cosine\n", encoding="utf-8")
    trained: list[Sweep] = []
    monkeypatch.setattr(comparison, "run_sweep", trained.append)
    assert run_comparison(settings(f"dir={folder}", f"stages=[{stage}]"), "compare") is None
    (sweep,) = trained
    others = [name for name in preset_names("experiment", "compare_") if name != "compare_gru"]
    assert sweep.axes == ["+experiment=" + ",".join(["compare_gru", *others]),
                          "attention=cosine", *overrides]  # fmt: skip
    assert sweep.folder == folder / stage
    linked = sorted(path.resolve() for path in (folder / stage).iterdir())
    assert linked == sorted(path.resolve() for path in family.iterdir())


def test_no_guided_overrides_no_guided_sweep(tmp_path, monkeypatch):
    trained: list[Sweep] = []
    monkeypatch.setattr(comparison, "run_sweep", trained.append)
    found = settings(f"dir={tmp_path}", "stages=[guided]", "guided=[]")
    assert run_comparison(found, "compare") is None and trained == []
