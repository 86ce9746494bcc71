"""Round 3 of the levers (tools.bench.levers): runs with several seeds become one row each,
with means, each seed's value, the length ratio and the paired bootstrap against the base of
the same seed, all recomputed here from the run folders' files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sacrebleu.metrics import BLEU

from seq2seq.metrics.significance import paired_bootstrap
from tools.bench.levers import LEVERS, command, run_folder, seeded_runs, seeded_table

REFERENCES = [
    "the cat sat on the mat today",
    "i love china very much",
    "we will go to shanghai tomorrow",
    "he met me in beijing yesterday",
    "this book is not mine",
    "she likes to read in the evening",
] * 5


def write_run(out: Path, lever: str, seed: int, hypotheses: list[str], valid: float) -> Path:
    """A finished run folder as levers.train leaves it: results.json, test.hyp, test.ref."""
    run_dir = out / lever / f"seed_{seed}"
    run_dir.mkdir(parents=True)
    test = BLEU().corpus_score(hypotheses, [REFERENCES]).score
    results = {"valid_best_bleu": valid, "test": {"bleu": test, "chrf": 40.0 + seed % 2}}
    (run_dir / "results.json").write_text(json.dumps(results), encoding="utf-8")
    (run_dir / "test.hyp").write_text("\n".join(hypotheses) + "\n", encoding="utf-8")
    (run_dir / "test.ref").write_text("\n".join(REFERENCES) + "\n", encoding="utf-8")
    return run_dir


def shortened(drop_every: int) -> list[str]:
    """The references with the last word of every `drop_every`-th sentence left out."""
    return [
        " ".join(line.split()[:-1]) if index % drop_every == 0 else line
        for index, line in enumerate(REFERENCES)
    ]


@pytest.fixture
def finished(tmp_path: Path) -> Path:
    write_run(tmp_path, "r3_base", 1, shortened(2), valid=20.0)
    write_run(tmp_path, "r3_base", 2, shortened(3), valid=22.0)
    write_run(tmp_path, "r3_ema_0.99", 1, shortened(5), valid=21.0)
    write_run(tmp_path, "r3_ema_0.99", 2, list(REFERENCES), valid=24.0)
    (tmp_path / "r3_guided" / "seed_1").mkdir(parents=True)  # still running: no results.json
    return tmp_path


def test_the_finished_runs_are_found_by_lever_and_seed(finished: Path) -> None:
    runs = seeded_runs(finished)
    assert set(runs) == {"r3_base", "r3_ema_0.99"}
    assert runs["r3_ema_0.99"] == {
        1: finished / "r3_ema_0.99" / "seed_1",
        2: finished / "r3_ema_0.99" / "seed_2",
    }


def test_a_lever_row_holds_means_each_seed_and_the_bootstrap_against_the_same_seed(
    finished: Path,
) -> None:
    rows = {
        line.split(" | ")[0].strip("| "): line
        for line in seeded_table(finished)[2:]
        if line.startswith("| r3")
    }
    cells = [cell.strip() for cell in rows["r3_ema_0.99"].strip("|").split("|")]
    tests = {
        seed: BLEU().corpus_score(hyps, [REFERENCES])
        for seed, hyps in ((1, shortened(5)), (2, list(REFERENCES)))
    }
    bases = {
        seed: BLEU().corpus_score(shortened(step), [REFERENCES]) for seed, step in ((1, 2), (2, 3))
    }
    mean_test = (tests[1].score + tests[2].score) / 2
    assert cells[2] == "1, 2"
    assert cells[3] == "22.50 (21.00, 24.00)"  # valid
    assert cells[4] == f"{mean_test:.2f} ({tests[1].score:.2f}, {tests[2].score:.2f})"
    assert (
        cells[6] == f"{mean_test - 22.5:.2f} ({tests[1].score - 21:.2f}, {tests[2].score - 24:.2f})"
    )
    ratio = (tests[1].sys_len / tests[1].ref_len + 1.0) / 2
    assert cells[7].startswith(f"{ratio:.3f} (")
    delta = (tests[1].score - bases[1].score + tests[2].score - bases[2].score) / 2
    assert cells[8] == f"{delta:+.2f}"
    expected_p = [
        paired_bootstrap([("base", shortened(step)), ("lever", hyps)], REFERENCES, "en")[1].p_value
        for step, hyps in ((2, shortened(5)), (3, list(REFERENCES)))
    ]
    assert cells[9] == ", ".join(f"{p:.3f}" for p in expected_p)
    base_cells = [cell.strip() for cell in rows["r3_base"].strip("|").split("|")]
    assert (base_cells[8], base_cells[9]) == ("—", "base")


def test_a_round_3_run_is_make_train_with_its_seed_and_beam(tmp_path: Path) -> None:
    lever = LEVERS["r3_ema_0.99"]
    argv = command(lever, 40.0, run_folder(tmp_path, lever, 1235), 2, 1235)
    assert "trainer.ema_decay=0.99" in argv and "trainer.seed=1235" in argv
    assert "trainer.max_steps=1900" in argv
    assert not any(arg.startswith("trainer.test_search.beam_size") for arg in argv)
    assert f"hydra.run.dir={tmp_path / 'r3_ema_0.99' / 'seed_1235'}" in argv
