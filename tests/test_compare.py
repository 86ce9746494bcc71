"""`scripts/compare.py` turns sweep run folders into table rows, and the compare presets
keep every family within ±10% of the reference model's parameter count."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import compose_config, script_module
from omegaconf import OmegaConf
from torch.utils.tensorboard import SummaryWriter

from seq2seq import registry
from seq2seq.build import build_model, count_parameters
from seq2seq.configs import config_files
from seq2seq.runs.reading import Scalars

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
# What `make compare` sweeps: every attention preset, every `compare_<family>` experiment.
COMPARE_ATTENTIONS = [Path(entry.name).stem for entry in config_files("attention")]
COMPARE_FAMILIES = [
    Path(entry.name).stem.removeprefix("compare_")
    for entry in config_files("experiment")
    if entry.name.startswith("compare_")
]
VOCAB = 4000  # the Tatoeba presets' sentencepiece vocabulary, both sides


def load_script(name: str):
    """Import scripts/<name>.py from its file (scripts import only the library)."""
    return script_module(name)


def test_the_sweeps_cover_the_registered_components():
    """The compare sweep enumerates the presets; every encoder family is compared."""
    assert "none" in COMPARE_ATTENTIONS and "additive" in COMPARE_ATTENTIONS
    assert set(registry.names("encoder")) <= {
        registry.of_node("encoder", compose_config([f"+experiment=compare_{family}"]).encoder).name
        for family in COMPARE_FAMILIES
    }


def fake_run(
    run_dir: Path,
    attention: str,
    results: dict | None,
    scalars: dict,
    *,
    experiment: str = "compare_gru",
    extra: tuple[str, ...] = (),
) -> None:
    """A run folder as `seq2seq-train` leaves it: config, results, one event file. `extra`
    overrides (`trainer.seed=2`, `data.root=...`) join the config and the command line."""
    (run_dir / ".hydra").mkdir(parents=True)
    overrides = [f"+experiment={experiment}", f"attention={attention}", *extra]
    cfg = compose_config(overrides)
    OmegaConf.save(cfg, run_dir / ".hydra" / "config.yaml")
    OmegaConf.save(OmegaConf.create(overrides), run_dir / ".hydra" / "overrides.yaml")
    if results is not None:
        (run_dir / "results.json").write_text(json.dumps(results), encoding="utf-8")
    writer = SummaryWriter(str(run_dir / "tensorboard"))
    for tag, values in scalars.items():
        for step, value in enumerate(values, 1):
            writer.add_scalar(tag, value, step)
    writer.close()


def results(parameters: int, bleu: float) -> dict:
    return {
        "test": {"bleu": bleu, "chrf": 40.5, "bleu_signature": "x", "chrf_signature": "y"},
        "valid_best_bleu": bleu + 1.0,
        "steps": 60,
        "train_minutes": 1.3,
        "parameters": parameters,
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
    compare = load_script("compare")
    out = tmp_path / "out"
    assert compare.main([str(sweep), "--out-dir", str(out), "--no-image"]) == 0
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
    compare = load_script("compare")
    compare.main([str(sweep), "--out-dir", str(tmp_path), "--no-image"])
    text = (tmp_path / "COMPARISON.md").read_text(encoding="utf-8")
    rows = [cells(line) for line in text.splitlines() if line.startswith("| score=")]
    assert rows[0][:12] == [  # no valid/bleu events: no best update, no late gain
        "score=dot · region=soft", "1", "3,892,384", "60", "1.3", "—", "—", "200",
        "13.00", "12.00", "40.50", "0.500",
    ]  # fmt: skip
    # no checkpoint (no AER), no test.hyp (no test), no baseline: those cells are dashes
    assert rows[1].count("—") == 2 + 1 + 3  # and the alignment accuracy
    assert rows[2][1] == "0/1"  # the crashed run: no finished seed
    assert rows[2].count("—") == 13  # it has nothing but its name, seeds and folder


def test_a_linked_run_joins_the_other_sweep_and_the_header_names_the_command(sweep, tmp_path):
    """`make compare` links the attention sweep's GRU run into the encoder sweep."""
    encoders = tmp_path / "encoders"
    fake_run(
        encoders / "0_encoder=lstm", "additive", results(3_950_000, 11.0), {},
        experiment="compare_lstm",
    )  # fmt: skip
    (encoders / "4_encoder=gru").symlink_to(sweep / "1_attention=additive")
    compare = load_script("compare")
    out = tmp_path / "out"
    made_by = "make compare BUDGET=full"
    compare.main(
        [str(sweep), str(encoders), "--out-dir", str(out), "--no-image", "--made-by", made_by]
    )
    text = (out / "COMPARISON.md").read_text(encoding="utf-8")
    assert f"Runs trained by `{made_by}`" in text
    section = text.split("## encoders")[1].split("## ")[0]
    rows = [cells(line) for line in section.splitlines() if line.startswith("| encoder=")]
    assert [row[-1] for row in rows] == [
        str(encoders / "0_encoder=lstm"),
        str(encoders / "4_encoder=gru"),
    ]
    assert rows[1][9] == "14.50"  # the linked run's test BLEU


def test_the_encoder_sweep_attention_is_chosen_by_valid_not_test_bleu(tmp_path, capsys):
    folder = tmp_path / "attention"
    better_on_test = results(4_000_000, 20.0) | {"valid_best_bleu": 10.0}
    better_on_valid = results(4_000_000, 15.0) | {"valid_best_bleu": 12.0}
    fake_run(folder / "0_attention=dot", "dot", better_on_test, {})
    fake_run(folder / "1_attention=general", "general", better_on_valid, {})
    fake_run(folder / "2_attention=hard", "hard", None, {})  # unfinished: not a candidate
    compare = load_script("compare")
    assert compare.main([str(folder), "--best", "attention"]) == 0
    assert capsys.readouterr().out.strip() == "general"


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def test_a_folder_without_runs_is_refused(tmp_path):
    compare = load_script("compare")
    with pytest.raises(FileNotFoundError, match="no run folder"):
        compare.main([str(tmp_path), "--no-image"])


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


def test_time_to_quality_takes_the_best_valid_bleu_within_each_budget(tmp_path):
    """`scripts/bench.py` reads the same event files: valid/bleu wall times, relative to
    the file's first event, give the best BLEU reached after 5, 10 and 20 minutes, and
    `train/tflop` at the validation steps the best BLEU within 10 to 120 TFLOP."""
    bench = load_script("bench")
    writer = SummaryWriter(str(tmp_path / "tensorboard"))  # first event: now
    start = time.time()
    for minutes, step, bleu, tflop in [
        (2, 500, 9.0, 8.0),
        (4.5, 1000, 14.0, 16.0),
        (7, 1500, 13.5, 24.0),
        (11, 2000, 16.0, 32.0),
    ]:
        writer.add_scalar("valid/bleu", bleu, step, walltime=start + 60 * minutes)
        writer.add_scalar("train/tflop", tflop, step, walltime=start + 60 * minutes)
    writer.close()
    table = [cells(line) for line in bench.quality_section(tmp_path) if line.startswith("| ")]
    minutes_rows, tflop_rows = table[1:4], table[5:]
    assert minutes_rows == [
        ["5", "14.00", "1000"],  # 9.0 and 14.0 are within 5 minutes
        ["10", "14.00", "1000"],  # 13.5 at 7 min is worse than 14.0
        ["20", "—", "—"],  # the run ended at 11 min: it never trained for 20
    ]
    assert table[4] == ["TFLOP", "best valid BLEU so far", "at step"]
    assert tflop_rows == [
        ["10", "9.00", "500"],
        ["20", "14.00", "1000"],
        ["40", "—", "—"],  # the run ended at 32 TFLOP
        ["80", "—", "—"],
        ["120", "—", "—"],
    ]


def test_bench_shows_no_machine_specific_absolute_path(tmp_path, monkeypatch):
    bench = load_script("bench")
    monkeypatch.chdir(tmp_path)
    assert bench.shown_path(tmp_path / "outputs" / "run" / "best.pt") == "outputs/run/best.pt"
    assert bench.shown_path("/elsewhere/a/run/checkpoints/best.pt") == "…/run/checkpoints/best.pt"
    assert bench.shown_path("--quick") == "--quick"


def test_bench_composes_a_preset_in_a_fresh_process():
    """The benchmark's workers are fresh processes: they must register the schemas
    themselves (nothing else in them does)."""
    code = (
        "import importlib.util, sys; "
        f"spec = importlib.util.spec_from_file_location('bench', {str(SCRIPTS / 'bench.py')!r}); "
        "bench = importlib.util.module_from_spec(spec); sys.modules['bench'] = bench; "
        "spec.loader.exec_module(bench); "
        "print(bench.preset_config('default_cpu', 1, 'cpu', None).name)"
    )
    finished = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert finished.stdout.strip() == "default_cpu"


def test_convergence_finds_the_best_validation_and_the_late_gain():
    compare = load_script("compare")
    start = 1000.0
    bleu = [(start + 60 * m, step, value) for m, step, value in
            [(2, 100, 5.0), (4, 200, 12.0), (6, 300, 15.0), (8, 400, 15.4)]]  # fmt: skip
    found = compare.convergence(Scalars(start, {"valid/bleu": bleu}), steps=400)
    # best 15.4 at update 400, 8 minutes in; best of the first 300 updates: 15.0
    assert found["best_step"] == 400 and found["minutes_to_best"] == pytest.approx(8.0)
    assert found["last_quarter_gain"] == pytest.approx(0.4)
    falling = bleu[:3] + [(start + 480, 400, 14.0)]
    found = compare.convergence(Scalars(start, {"valid/bleu": falling}), steps=400)
    assert found["best_step"] == 300 and found["last_quarter_gain"] == 0.0
    late_only = compare.convergence(Scalars(None, {"valid/bleu": bleu[3:]}), steps=400)
    assert late_only == {"best_step": 400, "minutes_to_best": None, "last_quarter_gain": None}
    assert set(compare.convergence(Scalars(start, {}), 400).values()) == {None}


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
