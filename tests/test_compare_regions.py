"""The regions and heads comparison (`report.soft_twins`): each attention with a region
other than soft, or more than one head, is tested against the same model with soft
attention, one head and the same score, seed by seed."""

from __future__ import annotations

from pathlib import Path

from sweep_fixtures import degraded, fake_run, read_csv, report, results, sentences

from seq2seq.metrics.sacrebleu_scores import corpus_scores
from seq2seq.study.sweep import find_soft_twins, sweep_configurations

# attention preset -> the preset of its soft, one-head twin (configs/attention/)
TWIN_OF = {"sparsemax": "additive", "hard": "additive", "local": "general",
           "multihead": "scaled_dot"}  # fmt: skip
SOFT = ("additive", "general", "scaled_dot", "none")


def regions_sweep(root: Path, extra_by_attention: dict[str, tuple[str, ...]] | None = None) -> Path:
    """Two seeds of every preset above; sparsemax copies the references (far better than
    its twin), the others repeat their twin's output (no difference)."""
    references = sentences(120, 0)
    prepared = root / "data" / "prepared" / "tatoeba_zh_en"
    prepared.mkdir(parents=True)
    (prepared / "test.en").write_text("\n".join(references) + "\n", encoding="utf-8")
    sweep, number = root / "regions", 0
    for attention in (*SOFT, *TWIN_OF):
        for seed in (1, 2):
            twin = TWIN_OF.get(attention, attention)
            hypotheses = references if attention == "sparsemax" else degraded(
                references, seed + 10 * SOFT.index(twin)
            )  # fmt: skip
            extra = (f"trainer.seed={seed}", f"data.root={root / 'data'}",
                     *(extra_by_attention or {}).get(attention, ()))  # fmt: skip
            run = sweep / f"{number}_+experiment=compare_gru,attention={attention},seed={seed}"
            bleu = corpus_scores(hypotheses, references, "en")["bleu"]
            fake_run(run, attention, results(800_000, bleu), {}, extra=extra)
            (run / "test.hyp").write_text("\n".join(hypotheses) + "\n", encoding="utf-8")
            number += 1
    return sweep


def test_each_region_and_multi_head_configuration_finds_its_soft_twin_of_the_same_score(
    tmp_path,
):
    configurations = sweep_configurations(regions_sweep(tmp_path))
    choice = [next(item.split("=", 1)[1] for item in c.overrides() if item.startswith("attention="))
              for c in configurations]  # fmt: skip
    twins = find_soft_twins(configurations)
    assert {choice[index]: choice[twin] for index, twin in twins.items()} == TWIN_OF
    assert all(choice[index] not in SOFT for index in twins)  # none and soft have no twin


def test_a_hard_region_s_estimator_is_part_of_the_model_its_twin_is_soft(tmp_path):
    reinforce = {"hard": ("attention.region.estimator=reinforce",)}
    configurations = sweep_configurations(regions_sweep(tmp_path, reinforce))
    labels = {c.label for c in configurations}
    assert any("hard (reinforce)" in label for label in labels)
    twins = find_soft_twins(configurations)
    hard = next(i for i, c in enumerate(configurations) if "hard (reinforce)" in c.label)
    assert "score=additive" in configurations[twins[hard]].label
    assert "region=soft" in configurations[twins[hard]].label


def test_the_report_tests_each_against_its_soft_twin_and_says_so(tmp_path):
    out = tmp_path / "out"
    report([regions_sweep(tmp_path)], out, resamples=200, soft_twins=True)
    rows = read_csv(out / "comparison.csv")
    tested = {row["model"]: row for row in rows if row["baseline"]}
    assert len(tested) == len(TWIN_OF)
    for model, row in tested.items():
        assert "region=soft" in row["baseline"] and row["baseline"] != model
    sparse = [row for row in rows if row["baseline"] and "sparsemax" in row["model"]]
    assert sparse and all(row["significant_vs_baseline"] == "True" for row in sparse)
    repeats = [row for row in rows if row["baseline"] and "sparsemax" not in row["model"]]
    assert all(row["significant_vs_baseline"] == "False" for row in repeats)
    text = (out / "COMPARISON.md").read_text(encoding="utf-8")
    assert (
        "against each configuration's twin with soft attention, one head and the same score" in text
    )
    (verdict,) = [line for line in text.splitlines() if line.startswith("- **regions** (each")]
    assert "significantly better test BLEU: `" in verdict and "sparsemax" in verdict
