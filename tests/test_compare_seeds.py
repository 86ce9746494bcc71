"""`scripts/compare.py` with several seeds per configuration: grouping, mean ± std, one CSV
row per seed, the best attention by mean valid BLEU, significance marks against the
sweep's baseline, the aligner rows, linking the GRU runs of every seed, and real sweeps
(the joblib launcher; test AER from a zh→en checkpoint)."""

from __future__ import annotations

import csv
import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import compose_config, single_thread_env
from test_compare import cells, fake_run, load_script, results

from seq2seq.metrics import corpus_scores
from seq2seq.runs.reading import best_choice, group_by_configuration, one_per_configuration

REPO = Path(__file__).resolve().parent.parent
SEEDS = (1, 2, 3)


def run_name(number: int, attention: str, seed: int) -> str:
    return f"{number}_+experiment=compare_gru,attention={attention},trainer.seed={seed}"


def seeded_sweep(folder: Path, test_bleu: dict[str, list[float]], extra=()) -> list[Path]:
    """One fake run per (attention, seed), in Hydra's job order (seed varies fastest)."""
    made, number = [], 0
    for attention, values in test_bleu.items():
        for seed, bleu in zip(SEEDS, values):
            run = folder / run_name(number, attention, seed)
            fake_run(run, attention, results(4_000_000, bleu), {},
                     extra=(f"trainer.seed={seed}", *extra))  # fmt: skip
            made.append(run)
            number += 1
    return made


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def table_rows(text: str, start: str, width: int | None = None) -> list[list[str]]:
    """The cells of the markdown rows that start with `start` (and have `width` cells)."""
    rows = [cells(line) for line in text.splitlines() if line.startswith(f"| {start}")]
    return [row for row in rows if width is None or len(row) == width]


# ---------------------------------------------------------------- grouping


def test_runs_that_differ_only_in_the_training_seed_are_one_configuration():
    base = ["+experiment=compare_gru", "attention=additive"]
    configs = [
        compose_config([*base, "trainer.seed=1"]),
        compose_config([*base, "trainer.seed=2", "data.seed=7"]),  # another split: apart
        compose_config(["+experiment=compare_gru", "attention=dot", "trainer.seed=1"]),
        compose_config([*base, "trainer.seed=3"]),
        compose_config([*base, "trainer.seed=0"]),
    ]
    assert group_by_configuration(configs) == [[4, 0, 3], [1], [2]]  # each by seed


def test_rows_pool_the_seeds_as_mean_and_sample_std_and_the_csv_keeps_every_seed(tmp_path):
    sweep = tmp_path / "attention"
    bleu = {"none": [10.0, 12.0, 14.0], "additive": [15.0, 15.5, 16.9]}
    seeded_sweep(sweep, bleu)
    compare = load_script("compare")
    out = tmp_path / "out"
    assert compare.main([str(sweep), "--out-dir", str(out), "--no-image", "--no-aer"]) == 0
    rows = read_csv(out / "comparison.csv")
    assert [(row["model"], row["seed"]) for row in rows] == [
        (model, str(seed))
        for model in ("attention=none", "score=additive · region=soft · heads=1")
        for seed in SEEDS
    ]
    assert [float(row["test_bleu"]) for row in rows] == bleu["none"] + bleu["additive"]
    text = (out / "COMPARISON.md").read_text(encoding="utf-8")
    none, additive = table_rows(text, "attention=none", 16) + table_rows(text, "score=additive", 16)
    assert none[1] == "3"  # seeds
    assert none[8:10] == ["13.00 ± 2.00", "12.00 ± 2.00"]  # valid, test BLEU
    values = np.array(bleu["additive"])
    assert additive[9] == f"{values.mean():.2f} ± {values.std(ddof=1):.2f}"
    assert none[-1] == str(sweep / "*_+experiment=compare_gru,attention=none,trainer.seed=*")
    assert "± is the sample standard deviation over the seeds (n = 3" in text


def test_the_best_attention_is_chosen_by_the_mean_valid_bleu_over_seeds(tmp_path):
    sweep = tmp_path / "attention"
    # dot has the single best run (valid 21) but the lower mean (11 against 13)
    seeded_sweep(sweep, {"dot": [20.0, 4.0, 6.0], "general": [12.0, 12.0, 12.0]})
    assert best_choice(sweep, "attention") == "general"


def test_one_alignment_panel_per_configuration_takes_its_first_seed(tmp_path):
    runs = seeded_sweep(tmp_path / "s", {"dot": [1.0, 2.0, 3.0], "general": [1.0, 2.0, 3.0]})
    shuffled = [runs[2], runs[0], runs[4], runs[1], runs[3], runs[5]]
    assert one_per_configuration(shuffled) == [runs[0], runs[3]]


# ---------------------------------------------------------------- significance

WORDS = "the a cat dog sat ran on under mat house red big small quickly today".split()


def sentences(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(5, 12))) + "." for _ in range(count)]


def degraded(references: list[str], seed: int) -> list[str]:
    """Each reference with a third of its words replaced: a worse system."""
    rng = random.Random(seed)
    return [
        " ".join(word if rng.random() > 0.35 else rng.choice(WORDS) for word in line.split())
        for line in references
    ]


@pytest.fixture
def tested_sweep(tmp_path) -> tuple[Path, list[str]]:
    """Two seeds of: a baseline (attention=none), a copy of the references (additive), the
    baseline's own hypotheses (dot), and general: better than the baseline with seed 1,
    worse with seed 2. The references are a prepared test split below a data root."""
    references = sentences(150, 0)
    prepared = tmp_path / "data" / "prepared" / "tatoeba_zh_en"
    prepared.mkdir(parents=True)
    (prepared / "test.en").write_text("\n".join(references) + "\n", encoding="utf-8")
    baseline = {seed: degraded(references, seed) for seed in (1, 2)}
    systems = {
        "none": baseline,
        "additive": {seed: references for seed in (1, 2)},
        "dot": baseline,
        "general": {1: references, 2: ["the"] * len(references)},
    }
    valid = {"none": 5.0, "additive": 30.0, "dot": 5.0, "general": 20.0}
    sweep, number = tmp_path / "attention", 0
    for attention, by_seed in systems.items():
        for seed, hypotheses in by_seed.items():
            run = sweep / run_name(number, attention, seed)
            bleu = corpus_scores(hypotheses, references, "en")["bleu"]
            scored = results(4_000_000, bleu) | {"valid_best_bleu": valid[attention] + seed}
            fake_run(run, attention, scored, {},
                     extra=(f"trainer.seed={seed}", f"data.root={tmp_path / 'data'}"))  # fmt: skip
            (run / "test.hyp").write_text("\n".join(hypotheses) + "\n", encoding="utf-8")
            number += 1
    return sweep, references


def test_significance_against_the_baseline_of_the_same_seed(tested_sweep, tmp_path):
    sweep, references = tested_sweep
    compare = load_script("compare")
    out = tmp_path / "out"
    assert compare.main([str(sweep), "--out-dir", str(out), "--no-image", "--no-aer"]) == 0
    rows = {(row["model"].split(" · ")[0], int(row["seed"])): row
            for row in read_csv(out / "comparison.csv")}  # fmt: skip
    for seed in (1, 2):
        copy, same = rows[("score=additive", seed)], rows[("score=dot", seed)]
        assert float(copy["p_vs_baseline"]) < 0.01 and copy["significant_vs_baseline"] == "True"
        assert float(same["p_vs_baseline"]) == 1.0 and same["significant_vs_baseline"] == "False"
        assert copy["baseline"] == "attention=none"
        assert float(rows[("score=general", seed)]["p_vs_baseline"]) < 0.05
    # general is significant with each seed, but in opposite directions: not significant
    assert rows[("score=general", 1)]["significant_vs_baseline"] == "False"
    for row in rows.values():  # each run's 95% interval holds its own corpus BLEU
        assert float(row["test_bleu_ci_low"]) <= float(row["test_bleu"]) + 1e-6
        assert float(row["test_bleu"]) <= float(row["test_bleu_ci_high"]) + 1e-6
    # the two best by mean valid BLEU: additive, then general
    assert rows[("score=additive", 1)]["runner_up"].startswith("score=general")
    assert rows[("score=additive", 1)]["p_vs_runner_up"] != ""
    assert rows[("attention=none", 1)]["p_vs_runner_up"] == ""

    text = (out / "COMPARISON.md").read_text(encoding="utf-8")
    (copy,) = table_rows(text, "score=additive", 16)
    (same,) = table_rows(text, "score=dot", 16)
    assert copy[9].endswith("†") and copy[-2] == "<0.001 †"
    assert not same[9].endswith("†") and same[-2] == "1.000"
    reading = text.split("## Reading the tables")[1]
    assert "Conclusions are drawn only where differences are significant" in reading
    better = reading.split("significantly better test BLEU:")[1].split(";")[0]
    assert "score=additive" in better and "score=dot" not in better
    unclear = reading.split("no significant difference, so no conclusion:")[1].split("\n")[0]
    assert "score=dot" in unclear and "score=general" in unclear


def test_the_encoder_sweep_baseline_is_the_gru_run(tmp_path):
    """Without attention=none, the one configuration started with +experiment=compare_gru."""
    compare = load_script("compare")
    configurations = []
    for number, experiment in enumerate(["compare_lstm", "compare_gru", "compare_cnn"]):
        run = tmp_path / f"{number}_+experiment={experiment}"
        fake_run(run, "additive", None, {}, experiment=experiment)
    configurations = compare.sweep_configurations(tmp_path)
    assert compare.find_baseline(configurations, list(compare.DEFAULT_BASELINES)) == 1


# ---------------------------------------------------------------- aligners and links


def test_an_aligner_file_becomes_a_csv_row_and_a_table_row(tmp_path):
    sweep = tmp_path / "attention"
    seeded_sweep(sweep, {"none": [10.0], "additive": [12.0]})
    aligner = tmp_path / "eflomal.json"
    aligner.write_text(json.dumps({"name": "eflomal", "test_aer": 0.3125, "precision": 0.8,
                                   "recall": None}), encoding="utf-8")  # fmt: skip
    compare = load_script("compare")
    out = tmp_path / "out"
    argv = [str(sweep), "--out-dir", str(out), "--no-image", "--no-aer"]
    assert compare.main([*argv, "--baseline-aer", str(aligner)]) == 0
    last = read_csv(out / "comparison.csv")[-1]
    assert (last["sweep"], last["model"], last["test_aer"]) == ("aligners", "eflomal", "0.3125")
    assert last["test_aer_recall"] == "" and last["seed"] == ""
    text = (out / "COMPARISON.md").read_text(encoding="utf-8")
    assert table_rows(text, "eflomal") == [["eflomal", "0.312", "0.800", "—"]]
    aligner.write_text(json.dumps({"name": "x", "test_aer": "low"}), encoding="utf-8")
    with pytest.raises(SystemExit, match="test_aer must be a number"):
        compare.main([*argv, "--baseline-aer", str(aligner)])


def test_the_json_of_the_statistical_aligner_gives_a_row_per_symmetrisation(tmp_path):
    """What `seq2seq-align-baseline --part valid test --json FILE` writes: only the test
    part's scores are read."""
    scores = {"precision": 0.85, "recall": 0.86, "aer": 0.147, "sentences": 200}
    document = {
        "aligner": "eflomal",
        "scores": {
            "valid": {"forward": {**scores, "aer": 0.5}},
            "test": {"forward": {**scores, "aer": 0.163}, "grow-diag-final-and": scores},
        },
    }
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    compare = load_script("compare")
    rows = compare.read_aligners(path)
    assert [(row["model"], row["test_aer"], row["test_aer_recall"]) for row in rows] == [
        ("eflomal forward", 0.163, 0.86),
        ("eflomal grow-diag-final-and", 0.147, 0.86),
    ]
    path.write_text(json.dumps({"aligner": "eflomal", "scores": {"valid": {}}}), "utf-8")
    with pytest.raises(SystemExit, match="no scores of the test part"):
        compare.read_aligners(path)


def test_every_seed_of_the_chosen_gru_run_is_linked_once(tmp_path):
    attention = tmp_path / "attention"
    runs = seeded_sweep(attention, {"none": [1.0, 2.0], "additive": [3.0, 4.0]})
    encoders = tmp_path / "encoders"
    for number, seed in enumerate((1, 2)):
        fake_run(encoders / f"{number}_+experiment=compare_lstm,attention=additive,"
                 f"trainer.seed={seed}", "additive", None, {}, experiment="compare_lstm",
                 extra=(f"trainer.seed={seed}",))  # fmt: skip
    compare = load_script("compare")
    made = compare.link_runs(attention, encoders, "attention=additive")
    assert [link.name for link in made] == [run_name(2, "additive", 1), run_name(3, "additive", 2)]
    assert [link.resolve() for link in made] == [run.resolve() for run in runs[2:]]
    assert compare.link_runs(attention, encoders, "attention=additive") == []  # already there
    configurations = compare.sweep_configurations(encoders)
    assert [len(c.runs) for c in configurations] == [2, 2]


# ---------------------------------------------------------------- real sweeps


def sweep_command(sweep_dir: Path, *overrides: str) -> list[str]:
    return [
        sys.executable, "-m", "seq2seq.cli.train", "-m", "+experiment=compare_gru",
        "trainer.threads=1", "trainer.test_search.beam_size=1", "logging.progress_bar=false",
        "hydra.job.config.override_dirname.exclude_keys=[trainer.threads,"
        "trainer.test_search.beam_size,logging.progress_bar,trainer.max_steps,"
        "trainer.valid_every,data,data.root,data.max_pairs,data.valid_size,data.test_size,"
        "data.src_vocab_size,data.tgt_vocab_size,data.toy_train_size,data.toy_valid_size,"
        "data.toy_test_size,schedule.warmup_steps]",
        f"hydra.sweep.dir={sweep_dir}", *overrides,
    ]  # fmt: skip


def test_a_seeded_sweep_under_the_joblib_launcher(tmp_path):
    """`make compare JOBS=2`: two loky worker processes train the jobs of a sweep; every
    run folder is complete, named by its seed, and the summary groups the seeds."""
    sweep = tmp_path / "attention"
    command = sweep_command(
        sweep, "attention=none,additive", "trainer.seed=1,2", "data=toy_copy",
        "data.toy_train_size=200", "data.toy_valid_size=20", "data.toy_test_size=20",
        "trainer.max_steps=2", "trainer.valid_every=2", "schedule.warmup_steps=1",
        "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
    )  # fmt: skip
    finished = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600,
                              env=single_thread_env())  # fmt: skip
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert "Joblib" in finished.stderr + finished.stdout  # the launcher was used
    names = sorted(path.name for path in sweep.iterdir() if path.is_dir())
    assert names == [
        run_name(n, a, s)
        for n, (a, s) in enumerate([("none", 1), ("none", 2), ("additive", 1), ("additive", 2)])
    ]
    for name in names:
        assert (sweep / name / "results.json").is_file() and (sweep / name / "test.hyp").is_file()
    compare = load_script("compare")
    out = tmp_path / "out"
    assert compare.main([str(sweep), "--out-dir", str(out), "--no-image", "--no-aer"]) == 0
    rows = read_csv(out / "comparison.csv")
    assert [row["seed"] for row in rows] == ["1", "2", "1", "2"]
    assert len({row["model"] for row in rows}) == 2


@pytest.mark.slow
def test_test_aer_of_a_real_checkpoint_is_the_aer_hook_on_the_test_pairs(tmp_path, corpus_mirror):
    """A tiny zh→en multihead run: the head-mean test AER is the valid/aer hook's figure on
    the test gold pairs, and the best head is the one with the lowest valid-pair AER."""
    from seq2seq.align.extract import AlignSettings
    from seq2seq.align.gold import gold_set
    from seq2seq.inference import Translator
    from seq2seq.runs.gold_aer import checkpoint_aer
    from seq2seq.visualise.hooks import AerHook, gold_example

    sweep = tmp_path / "attention"
    command = sweep_command(
        sweep, "attention=multihead", "trainer.seed=1", f"data.root={tmp_path / 'data'}",
        "data.max_pairs=3000", "data.valid_size=100", "data.test_size=100",
        "data.src_vocab_size=2000", "data.tgt_vocab_size=1000",
        "trainer.max_steps=3", "trainer.valid_every=3", "schedule.warmup_steps=1",
    )  # fmt: skip
    env = single_thread_env() | {"SEQ2SEQ_DATA_MIRROR": str(corpus_mirror)}
    finished = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=900,
                              env=env)  # fmt: skip
    assert finished.returncode == 0, finished.stderr[-3000:]
    (run,) = [path for path in sweep.iterdir() if path.is_dir()]
    checkpoint = run / "checkpoints" / "best.pt"
    found = checkpoint_aer(checkpoint)
    translator = Translator.load(checkpoint)

    def hook_counts(part: str, settings: AlignSettings):
        examples = [
            gold_example(pair, "zh", "en", translator, translator.max_source_len)
            for pair in gold_set("zh", "en", part)
        ]
        examples = [example for example in examples if example.source_ids and example.target_ids]
        return AerHook(examples, settings).counts(translator.model, translator.device)

    assert found.head_mean == hook_counts("test", AlignSettings())
    heads = [AlignSettings(layer=0, head=head) for head in range(4)]
    valid_aer = [hook_counts("valid", settings).aer for settings in heads]
    assert found.layer == 0 and valid_aer[found.head] == min(valid_aer)
    assert found.best == hook_counts("test", heads[found.head])
    assert found.best_name == f"layer 0 head {found.head}"

    compare = load_script("compare")
    out = tmp_path / "out"
    assert compare.main([str(sweep), "--out-dir", str(out), "--no-image"]) == 0
    (row,) = read_csv(out / "comparison.csv")
    assert float(row["test_aer"]) == pytest.approx(found.head_mean.aer)
    assert row["test_aer_best_head"] == found.best_name
    assert (
        float(row["test_bleu_ci_low"]) <= float(row["test_bleu"]) <= float(row["test_bleu_ci_high"])
    )  # the references were found below the run's data root
