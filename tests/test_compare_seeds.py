"""The comparison with several seeds per configuration: grouping, mean ± std, one CSV row
per seed, the best attention by mean valid BLEU, significance marks against the sweep's
baseline, the aligner rows, linking the GRU runs of every seed, and the test AER of a
real zh→en checkpoint."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers import compose_config, single_thread_env
from sweep_fixtures import (
    SEEDS,
    fake_run,
    read_csv,
    report,
    run_name,
    seeded_sweep,
    significance_sweep,
    table_rows,
)

from seq2seq.study.aer_rows import AlignerFileError, read_aligners
from seq2seq.study.launch import Sweep, train_command
from seq2seq.study.reading import best_choice, group_by_configuration, one_per_configuration
from seq2seq.study.sweep import DEFAULT_BASELINES, find_baseline, link_runs, sweep_configurations

REPO = Path(__file__).resolve().parent.parent

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
    out = tmp_path / "out"
    assert report([sweep], out) is not None
    rows = read_csv(out / "comparison.csv")
    assert [(row["model"], row["seed"]) for row in rows] == [
        (model, str(seed))
        for model in ("attention=none", "score=additive · region=soft · heads=1")
        for seed in SEEDS
    ]
    assert [float(row["test_bleu"]) for row in rows] == bleu["none"] + bleu["additive"]
    text = (out / "COMPARISON.md").read_text(encoding="utf-8")
    none, additive = table_rows(text, "attention=none", 17) + table_rows(text, "score=additive", 17)
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


def test_significance_against_the_baseline_of_the_same_seed(tmp_path):
    sweep, _ = significance_sweep(tmp_path)
    out = tmp_path / "out"
    assert report([sweep], out) is not None
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
    (copy,) = table_rows(text, "score=additive", 17)
    (same,) = table_rows(text, "score=dot", 17)
    assert copy[9].endswith("†") and copy[-2] == "<0.001 †"
    assert not same[9].endswith("†") and same[-2] == "1.000"
    reading = text.split("## Reading the tables")[1]
    assert "Conclusions are drawn only where differences are significant" in reading
    better = reading.split("significantly better test BLEU:")[1].split(";")[0]
    assert "score=additive" in better and "score=dot" not in better
    unclear = reading.split("no significant difference, so no conclusion:")[1].split("\n")[0]
    assert "score=dot" in unclear and "score=general" in unclear


def test_a_run_s_own_test_references_are_preferred_to_the_prepared_split(tmp_path):
    """`test.ref` beside `test.hyp` (any data source, the toy tasks too) is what the run
    was scored against: a wrong prepared split does not matter then."""
    sweep, references = significance_sweep(tmp_path)
    (tmp_path / "data" / "prepared" / "tatoeba_zh_en" / "test.en").write_text("x\n", "utf-8")
    for run in sweep.iterdir():
        (run / "test.ref").write_text("\n".join(references) + "\n", encoding="utf-8")
    report([sweep], tmp_path / "out", resamples=50)
    rows = read_csv(tmp_path / "out" / "comparison.csv")
    assert all(row["test_bleu_ci_low"] != "" for row in rows)
    assert {row["significant_vs_baseline"] for row in rows if "additive" in row["model"]} == {
        "True"
    }


def test_the_encoder_sweep_baseline_is_the_gru_run(tmp_path):
    """Without attention=none, the one configuration started with +experiment=compare_gru."""
    for number, experiment in enumerate(["compare_lstm", "compare_gru", "compare_cnn"]):
        run = tmp_path / f"{number}_+experiment={experiment}"
        fake_run(run, "additive", None, {}, experiment=experiment)
    configurations = sweep_configurations(tmp_path)
    assert find_baseline(configurations, list(DEFAULT_BASELINES)) == 1


# ---------------------------------------------------------------- aligners and links


def test_an_aligner_file_becomes_a_csv_row_and_a_table_row(tmp_path):
    sweep = tmp_path / "attention"
    seeded_sweep(sweep, {"none": [10.0], "additive": [12.0]})
    aligner = tmp_path / "eflomal.json"
    aligner.write_text(json.dumps({"name": "eflomal", "test_aer": 0.3125, "precision": 0.8,
                                   "recall": None}), encoding="utf-8")  # fmt: skip
    out = tmp_path / "out"
    assert report([sweep], out, baseline_aer=[aligner]) is not None
    last = read_csv(out / "comparison.csv")[-1]
    assert (last["sweep"], last["model"], last["test_aer"]) == ("aligners", "eflomal", "0.3125")
    assert last["test_aer_recall"] == "" and last["seed"] == ""
    text = (out / "COMPARISON.md").read_text(encoding="utf-8")
    assert table_rows(text, "eflomal") == [["eflomal", "0.312", "0.800", "—"]]
    aligner.write_text(json.dumps({"name": "x", "test_aer": "low"}), encoding="utf-8")
    with pytest.raises(AlignerFileError, match="test_aer must be a number"):
        report([sweep], out, baseline_aer=[aligner])


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
    rows = read_aligners(path)
    assert [(row["model"], row["test_aer"], row["test_aer_recall"]) for row in rows] == [
        ("eflomal forward", 0.163, 0.86),
        ("eflomal grow-diag-final-and", 0.147, 0.86),
    ]
    path.write_text(json.dumps({"aligner": "eflomal", "scores": {"valid": {}}}), "utf-8")
    with pytest.raises(AlignerFileError, match="no scores of the test part"):
        read_aligners(path)


def test_every_seed_of_the_chosen_gru_run_is_linked_once(tmp_path):
    attention = tmp_path / "attention"
    runs = seeded_sweep(attention, {"none": [1.0, 2.0], "additive": [3.0, 4.0]})
    encoders = tmp_path / "encoders"
    for number, seed in enumerate((1, 2)):
        fake_run(encoders / f"{number}_+experiment=compare_lstm,attention=additive,"
                 f"trainer.seed={seed}", "additive", None, {}, experiment="compare_lstm",
                 extra=(f"trainer.seed={seed}",))  # fmt: skip
    made = link_runs(attention, encoders, "attention=additive")
    assert [link.name for link in made] == [run_name(2, "additive", 1), run_name(3, "additive", 2)]
    assert [link.resolve() for link in made] == [run.resolve() for run in runs[2:]]
    assert link_runs(attention, encoders, "attention=additive") == []  # already there
    configurations = sweep_configurations(encoders)
    assert [len(c.runs) for c in configurations] == [2, 2]
    with pytest.raises(FileNotFoundError, match="was started with attention=dot"):
        link_runs(attention, encoders, "attention=dot")


# ---------------------------------------------------------------- a real checkpoint


@pytest.mark.slow
def test_test_aer_of_a_real_checkpoint_is_the_aer_hook_on_the_test_pairs(tmp_path, corpus_mirror):
    """A tiny zh→en multihead run: the head-mean test AER is the valid/aer hook's figure on
    the test gold pairs, and the best head is the one with the lowest valid-pair AER."""
    from seq2seq.align.aer_hook import AerHook
    from seq2seq.align.extract import AlignSettings
    from seq2seq.align.gold import gold_set
    from seq2seq.align.model_aer import checkpoint_aer, gold_example
    from seq2seq.search.translator import Translator

    sweep = tmp_path / "attention"
    common = [
        "trainer.test_search.beam_size=1", f"data.root={tmp_path / 'data'}",
        "data.max_pairs=3000", "data.valid_size=100", "data.test_size=100",
        "data.src_vocab_size=2000", "data.tgt_vocab_size=1000",
        "trainer.max_steps=3", "trainer.valid_every=3", "schedule.warmup_steps=1",
    ]  # fmt: skip
    axes = ["+experiment=compare_gru", "attention=multihead"]
    command = train_command(Sweep(sweep, axes, [1], common, threads=1))
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
            gold_example(pair, ("zh", "en"), translator, translator.max_source_len)
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

    out = tmp_path / "out"
    assert report([sweep], out, aer=True) is not None
    (row,) = read_csv(out / "comparison.csv")
    assert float(row["test_aer"]) == pytest.approx(found.head_mean.aer)
    assert row["test_aer_best_head"] == found.best_name
    assert (
        float(row["test_bleu_ci_low"]) <= float(row["test_bleu"]) <= float(row["test_bleu_ci_high"])
    )  # the references were found beside the run's test.hyp
