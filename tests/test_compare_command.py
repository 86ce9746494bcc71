"""`seq2seq-compare`: its settings (a Hydra app over `seq2seq.study.comparison`), the
training sweeps it launches, its stages, and one real comparison on a toy task."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import compare_settings as settings
from helpers import single_thread_env
from hydra import compose, initialize_config_module
from sweep_fixtures import fake_run, read_csv, results, seeded_sweep, significance_sweep, table_rows

from seq2seq.cli.compare import as_lists
from seq2seq.configs import preset_names
from seq2seq.study import comparison
from seq2seq.study.comparison import check, run_comparison
from seq2seq.study.launch import Sweep, train_command
from seq2seq.study.report import ReportSettings, write_report

REPO = Path(__file__).resolve().parent.parent
TOY = ["data=toy_copy", "data.source.train_size=200", "data.source.valid_size=20",
       "data.source.test_size=20", "trainer.max_steps=2", "trainer.valid_every=2",
       "schedule.warmup_steps=1"]  # fmt: skip


# ---------------------------------------------------------------- the settings


def test_a_comma_list_is_a_list_and_the_budget_gives_the_seeds():
    found = settings("attention=my_score,scaled_dot", "budget=small", "plugins=./lab/scores.py")
    assert found.attention == ["my_score", "scaled_dot"] and found.plugins == ["./lab/scores.py"]
    assert found.budget.name == "small" and found.seeds == 1 and found.budget.out_dir is None
    assert "trainer.max_steps=60" in found.budget.train
    full = settings("seeds=2", 'train="data=toy_copy"', "report.baseline_aer=a.json")
    assert (full.budget.name, full.seeds, full.budget.out_dir) == ("full", 2, ".")
    assert full.train == ["data=toy_copy"] and full.report.baseline_aer == ["a.json"]
    assert full.dir.startswith("multirun/compare_full/")
    assert as_lists(["--cfg", "job", "jobs=2", "stages=[summary]"]) == [
        "--cfg", "job", "jobs=2", "stages=[summary]"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["seeds=0"], "seeds must be a number >= 1, not 0"),
        (["jobs=0"], "jobs must be a number >= 1, not 0"),
        (["stages=[attention,plots]"], "stages: unknown ['plots']"),
    ],
)
def test_a_bad_setting_fails_before_anything_is_trained(overrides, message):
    with pytest.raises(ValueError) as failure:
        check(settings(*overrides))
    assert message in str(failure.value)


def test_an_unknown_key_or_budget_fails_at_start_up_naming_it():
    with pytest.raises(Exception, match="sedes"):
        settings("sedes=3")
    with pytest.raises(Exception, match="budget"):
        settings("budget=huge")


# ---------------------------------------------------------------- the sweeps


def test_the_training_command_names_runs_by_what_differs():
    sweep = Sweep(Path("cmp/attention"), ["+experiment=compare_gru", "attention=none,dot"],
                  [1234, 1235], ["trainer.max_steps=60", "data=toy_copy"])  # fmt: skip
    command = train_command(sweep)
    assert command[:4] == [sys.executable, "-m", "seq2seq.cli.train", "-m"]
    arguments = command[4:]
    assert arguments[:2] == sweep.axes and "trainer.seed=1234,1235" in arguments
    assert "trainer.threads=0" in arguments  # one job at a time: torch's own threads
    assert not any(item.startswith("hydra/launcher") for item in arguments)
    (names,) = [item for item in arguments if "override_dirname.exclude_keys" in item]
    excluded = names.split("=", 1)[1].strip("[]").split(",")
    assert {"trainer.max_steps", "data", "trainer.threads", "logging.progress_bar"} <= set(excluded)
    assert not {"attention", "experiment", "trainer.seed"} & set(excluded)
    assert arguments[-1] == "hydra.sweep.dir=cmp/attention"


def test_several_jobs_share_the_cores_and_a_cluster_replaces_the_launcher(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    parallel = train_command(Sweep(Path("s"), ["attention=dot"], [1], jobs=4))
    assert {"hydra/launcher=joblib", "hydra.launcher.n_jobs=4", "trainer.threads=4"} <= set(
        parallel
    )
    user = Sweep(Path("s"), ["attention=dot"], [1], jobs=4, cluster="slurm",
                 plugins=["./lab/scores.py"], config_dir="lab/configs")  # fmt: skip
    command = train_command(user)
    assert "+cluster=slurm" in command and "hydra/launcher=joblib" not in command
    assert "trainer.threads=0" in command and "plugins=[./lab/scores.py]" in command
    assert command[command.index("--config-dir") + 1] == "lab/configs"


def test_the_launcher_and_name_overrides_compose_with_the_training_config():
    from seq2seq.config.schema import register_configs
    from seq2seq.configs import SEARCH_PATH

    command = train_command(Sweep(Path("s"), ["attention=dot"], [1, 2], ["data=toy_copy"], 2))
    overrides = [item for item in command[4:] if not item.startswith(("trainer.seed=", "-"))]
    register_configs()
    with initialize_config_module(SEARCH_PATH.removeprefix("pkg://"), version_base="1.3"):
        cfg = compose("train", overrides=overrides, return_hydra_config=True)
    assert "joblib" in cfg.hydra.launcher._target_.lower() and cfg.hydra.launcher.n_jobs == 2
    assert "data" in cfg.hydra.job.config.override_dirname.exclude_keys


# ---------------------------------------------------------------- the stages


def test_every_attention_preset_and_the_user_s_are_compared_by_default(tmp_path):
    (tmp_path / "attention").mkdir()
    (tmp_path / "attention" / "my_score.yaml").write_text("score: my_score\n", encoding="utf-8")
    found = comparison.attention_presets(str(tmp_path))
    assert found == sorted([*preset_names("attention"), "my_score"])


def test_the_encoder_stage_takes_the_best_attention_and_links_the_first_sweep(
    tmp_path, monkeypatch
):
    first = tmp_path / "cmp" / "attention"
    # valid BLEU is test BLEU + 1: general has the best mean (13 against 11)
    runs = seeded_sweep(first, {"dot": [20.0, 2.0], "general": [12.0, 12.0]})
    trained: list[Sweep] = []
    monkeypatch.setattr(comparison, "run_sweep", trained.append)
    found = settings(f"dir={tmp_path / 'cmp'}", "stages=[encoders]", "seeds=2")
    assert run_comparison(found, "seq2seq-compare stages=[encoders]") is None
    (sweep,) = trained
    families = [name for name in preset_names("experiment", "compare_") if name != "compare_gru"]
    assert sweep.axes == ["+experiment=" + ",".join(families), "attention=general"]
    assert sweep.folder == tmp_path / "cmp" / "encoders" and sweep.seeds == [1234, 1235]
    assert (tmp_path / "cmp" / "encoders_attention.txt").read_text().strip() == "general"
    linked = sorted((tmp_path / "cmp" / "encoders").iterdir())
    assert [link.resolve() for link in linked] == [run.resolve() for run in runs[2:]]


def test_the_aligner_stage_is_skipped_for_a_toy_task_and_reads_a_corpus_s_languages(
    tmp_path, monkeypatch
):
    first = tmp_path / "cmp" / "attention"
    fake_run(first / "0_toy", "dot", results(1, 1.0), {}, extra=("data=toy_copy",))
    commands = []

    def aligned(command, check):
        commands.append(command)
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(comparison.subprocess, "run", aligned)
    found = settings(f"dir={tmp_path / 'cmp'}", "stages=[aligner]")
    run_comparison(found, "seq2seq-compare")
    assert commands == []
    (first / "0_toy").rename(tmp_path / "toy")
    fake_run(first / "0_zh", "dot", results(1, 1.0), {}, extra=(f"data.root={tmp_path}",))
    run_comparison(found, "seq2seq-compare")
    (command,) = commands
    assert command[command.index("--data-dir") + 1] == str(tmp_path / "prepared/tatoeba_zh_en")
    assert (
        command[command.index("--src") + 1] == "zh" and command[command.index("--tgt") + 1] == "en"
    )
    assert command[-1] == str(tmp_path / "cmp" / "aligner_eflomal.json")
    methods = command[command.index("--symmetrise") + 1 : command.index("--json")]
    assert methods == ["forward", "reverse", "intersection", "union", "grow-diag-final-and"]


def test_the_summary_alone_rewrites_the_report_of_existing_sweeps(tmp_path):
    """`stages=[summary]` (what `make compare-summary` runs): the same figures as the
    library's report of the same folders, the header naming what trained the runs."""
    sweep, _ = significance_sweep(tmp_path / "cmp")
    (tmp_path / "cmp" / "made_by.txt").write_text("seq2seq-compare budget=small\n", "utf-8")
    out = tmp_path / "out"
    found = settings(f"dir={tmp_path / 'cmp'}", "stages=[summary]", f"report.out_dir={out}",
                     "report.image=false", "report.aer=false", "report.resamples=100")  # fmt: skip
    assert run_comparison(found, "seq2seq-compare stages=[summary]") == out / "COMPARISON.md"
    text = (out / "COMPARISON.md").read_text(encoding="utf-8")
    assert text.startswith("# Comparison\n\nRuns trained by `seq2seq-compare budget=small`")
    assert len(table_rows(text, "score=", 17)) == 3 and len(table_rows(text, "attention=", 17)) == 1
    direct = tmp_path / "direct"
    write_report([sweep], ReportSettings(out_dir=direct, image=False, aer=False, resamples=100))
    assert read_csv(out / "comparison.csv") == read_csv(direct / "comparison.csv")


# ---------------------------------------------------------------- a real comparison


def test_a_comparison_on_a_toy_task_trains_both_configurations_and_tests_them(tmp_path):
    """Two configurations × one seed, two updates each, one thread: the table has both rows,
    their seeds, and the paired test against the baseline (the runs' own test.ref)."""
    folder = tmp_path / "cmp"
    command = [
        sys.executable, "-m", "seq2seq.cli.compare", "attention=none,additive", "budget=small",
        "seeds=1", "threads=1", "stages=[attention,summary]", f"dir={folder}",
        "report.image=false", "report.aer=false", "report.resamples=100",
        "train=[" + ",".join(f'"{item}"' for item in TOY) + f',"data.root={tmp_path}"]',
    ]  # fmt: skip
    finished = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True,
                              timeout=600, env=single_thread_env())  # fmt: skip
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert finished.stdout.strip().splitlines()[-1] == str(folder / "COMPARISON.md")
    names = sorted(path.name for path in (folder / "attention").iterdir() if path.is_dir())
    assert names == [
        "0_+experiment=compare_gru,attention=none,trainer.seed=1234",
        "1_+experiment=compare_gru,attention=additive,trainer.seed=1234",
    ]
    rows = read_csv(folder / "comparison.csv")
    assert [(row["model"], row["seed"], row["steps"]) for row in rows] == [
        ("attention=none", "1234", "2"),
        ("score=additive · region=soft · heads=1", "1234", "2"),
    ]
    assert rows[1]["baseline"] == "attention=none" and rows[1]["p_vs_baseline"] != ""
    text = (folder / "COMPARISON.md").read_text(encoding="utf-8")
    base, additive = table_rows(text, "attention=none", 17) + table_rows(text, "score=", 17)
    assert base[1] == additive[1] == "1" and base[-2] == "base"
    assert additive[-2] != "—"  # the p value against the baseline
    assert "seq2seq-compare attention=[none,additive]" in text.splitlines()[2]


def test_a_comparison_of_the_layer_stage_alone_aligns_the_layer_runs_corpus(tmp_path, monkeypatch):
    """Without an attention sweep the aligner reads the first sweep there is (here `layer`),
    never the en→zh `layer_reverse`."""
    folder = tmp_path / "cmp"
    fake_run(folder / "layer_reverse" / "0_en", "dot", results(1, 1.0), {},
             extra=(f"data.root={tmp_path}", "data=tatoeba_en_zh"))  # fmt: skip
    fake_run(
        folder / "layer" / "0_zh", "dot", results(1, 1.0), {}, extra=(f"data.root={tmp_path}",)
    )
    commands = []

    def aligned(command, check):
        commands.append(command)
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(comparison.subprocess, "run", aligned)
    run_comparison(settings(f"dir={folder}", "stages=[aligner]"), "seq2seq-compare")
    (command,) = commands
    assert command[command.index("--data-dir") + 1] == str(tmp_path / "prepared/tatoeba_zh_en")
    assert command[command.index("--src") + 1] == "zh"
