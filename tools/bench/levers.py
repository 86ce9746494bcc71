"""Levers of `make train`: variants of its model trained for the same compute, compared on
valid BLEU.

Each lever is `+experiment=default_cpu` with a few overrides (round 1: on top of the
previous default, `PREVIOUS_DEFAULT`; round 2, names `r2_*`: on today's), trained for about
`tflop` training TFLOP (analytic FLOPs, `seq2seq/flops.py`, the same on every machine),
validated (greedy, whole valid split) four times, the last at the end of the budget:

    valid_every = ceil(tflop · 1000 / 4 / GFLOP per update · 1.03),   max_steps = 4 · valid_every

The table gives each validation's BLEU and the TFLOP spent by then: choices are made on
valid BLEU only; the runs' test figures are not read. Several levers train at once with
`jobs`, each with its share of the cores (the figures do not depend on it, the minutes do).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from seq2seq.study.reading import read_results, read_scalars

# GFLOP per update (analytic, `seq2seq.flops`), which sizes each lever's update budget:
# today's default_cpu (1,024-token batches) and the previous one (2,048-token batches).
DEFAULT_GFLOP_PER_UPDATE = 21.7
PREVIOUS_GFLOP_PER_UPDATE = 43.4
BASE = ["+experiment=default_cpu", "trainer.max_minutes=null", "trainer.test_search.beam_size=1"]
DROPOUT_0_1 = ["model.embed_dropout=0.1", "encoder.dropout=0.1", "decoder.dropout=0.1",
               "encoder.ff_dropout=0.1", "decoder.ff_dropout=0.1"]  # fmt: skip
NO_DROPOUT = ["model.embed_dropout=0", "encoder.dropout=0", "decoder.dropout=0",
              "encoder.ff_dropout=0", "decoder.ff_dropout=0"]  # fmt: skip
# Dropout on the encoder/decoder inputs and sublayer outputs only (as Vaswani et al. §5.4):
# no second mask on the embeddings, none inside the FFNs.
FEWER_DROPOUT_SITES = ["model.embed_dropout=0", "encoder.ff_dropout=0", "decoder.ff_dropout=0"]
COSINE_2E3 = ["schedule=cosine", "optim.lr=2e-3", "schedule.warmup_steps=200"]
# default_cpu before the first round of levers (2026-12-01): the base of round 1.
PREVIOUS_DEFAULT = ("data.max_tokens=2048", "schedule=inverse_sqrt", "optim.lr=1e-3",
                    "schedule.warmup_steps=400", *DROPOUT_0_1)  # fmt: skip


@dataclass(frozen=True)
class Lever:
    name: str
    overrides: tuple[str, ...]  # what differs from its base
    gflop_per_update: float = DEFAULT_GFLOP_PER_UPDATE  # estimate; sizes the update budget
    base: tuple[str, ...] = ()  # () = today's default_cpu; PREVIOUS_DEFAULT for round 1
    greedy_test: bool = True  # rounds 1-2 tested greedily; round 3 tests as make train (beam 5)


def round_1(name: str, overrides: tuple[str, ...], tokens_1024: bool = False) -> Lever:
    """A lever of the first round, measured against the previous default."""
    gflop = PREVIOUS_GFLOP_PER_UPDATE / 2 if tokens_1024 else PREVIOUS_GFLOP_PER_UPDATE
    return Lever(name, overrides, gflop, PREVIOUS_DEFAULT)


ROUND_1 = (
    round_1("base", ()),
    round_1("warmup_200", ("schedule.warmup_steps=200",)),
    round_1("lr_2e-3_warmup_200", ("optim.lr=2e-3", "schedule.warmup_steps=200")),
    round_1("cosine_lr_2e-3", tuple(COSINE_2E3)),
    round_1("tokens_1024", ("data.max_tokens=1024",), tokens_1024=True),
    round_1("dropout_0", tuple(NO_DROPOUT)),
    round_1("label_smoothing_0", ("trainer.label_smoothing=0",)),
    round_1(
        "tokens_1024_lr_2e-3_warmup_200",
        ("data.max_tokens=1024", "optim.lr=2e-3", "schedule.warmup_steps=200"),
        tokens_1024=True,
    ),
    round_1("tokens_1024_cosine_lr_2e-3", ("data.max_tokens=1024", *COSINE_2E3), True),
    round_1("tokens_1024_dropout_0", ("data.max_tokens=1024", *NO_DROPOUT), True),
    round_1("fewer_dropout_sites", tuple(FEWER_DROPOUT_SITES)),
    round_1("cosine_lr_2e-3_fewer_dropout_sites", (*COSINE_2E3, *FEWER_DROPOUT_SITES)),
    round_1("cosine_lr_2e-3_dropout_0", (*COSINE_2E3, *NO_DROPOUT)),
    round_1(
        "tokens_1024_cosine_lr_2e-3_fewer_dropout_sites",
        ("data.max_tokens=1024", *COSINE_2E3, *FEWER_DROPOUT_SITES),
        True,
    ),
    round_1(
        "tokens_1024_cosine_lr_2e-3_dropout_0",
        ("data.max_tokens=1024", *COSINE_2E3, *NO_DROPOUT),
        True,
    ),
)

# Round 2: against today's default_cpu (its own run is round 1's
# tokens_1024_cosine_lr_2e-3_dropout_0: the same settings and budget).
ROUND_2 = (
    Lever("r2_label_smoothing_0", ("trainer.label_smoothing=0",)),
    Lever("r2_label_smoothing_0.2", ("trainer.label_smoothing=0.2",)),
    # a smaller English vocabulary: longer targets, a cheaper softmax (4,000 -> 2,000 rows);
    # the Chinese side cannot shrink: its characters alone need 3,417 pieces
    Lever("r2_vocab_tgt_2000", ("data.tgt_vocab_size=2000",), 18.8),
    Lever("r2_vocab_8000_5000", ("data.src_vocab_size=8000", "data.tgt_vocab_size=5000"), 23.3),
    Lever("r2_short_first_1", ("trainer.short_first_epochs=1",)),
    Lever("r2_layers_3_3", ("encoder.num_layers=3", "decoder.num_layers=3"), 29.6),
    Lever(
        "r2_width_320",
        (
            "model.embed_dim=320",
            "encoder.hidden_size=320",
            "decoder.hidden_size=320",
            "encoder.ff_size=640",
            "decoder.ff_size=640",
        ),  # fmt: skip
        32.0,
    ),
)


def round_3(
    name: str, overrides: tuple[str, ...], gflop: float = DEFAULT_GFLOP_PER_UPDATE
) -> Lever:
    """A lever of the third round (issue 51): `make train` itself (1,900 updates, tested with
    its beam) with `overrides`, trained with several seeds (`--seeds`) and compared with
    `r3_base` of the same seed by the paired bootstrap (`seeded_table`)."""
    return Lever(name, overrides, gflop, greedy_test=False)


ROUND_3 = (
    round_3("r3_base", ()),
    # guided alignment (Garg et al. 2019): the penultimate layer's head 0 learns eflomal's links
    round_3("r3_guided", ("alignment=guided",)),
    # a moving average of the weights, validated and tested (seq2seq/training/averaging.py):
    # with the warm-up d_t = min(d, (1 + t) / (10 + t)), d = 0.999 never binds in 1,900
    # updates (an average over about the last t/9 updates); d = 0.99 binds from update 890
    round_3("r3_ema_0.99", ("trainer.ema_decay=0.99",)),
    round_3("r3_ema_0.999", ("trainer.ema_decay=0.999",)),
    # characters outside the subword models spelt in UTF-8 bytes instead of <unk>: 256 of the
    # 4,000 pieces of each side become bytes (data.byte_fallback)
    round_3("r3_byte_fallback", ("data.byte_fallback=true",)),
    # the two that won on valid, together
    round_3("r3_guided_ema_0.99", ("alignment=guided", "trainer.ema_decay=0.99")),
    # subword regularisation (Kudo 2018; seq2seq/data/subword_sampling.py): both sides of each
    # training batch drawn from the l best segmentations by P(x)^alpha; l = 64, alpha = 0.1 is
    # the paper's setting, l = 8, alpha = 0.5 stays nearer the best segmentation
    round_3("r3_subwords_64_0.1", ("trainer.subword_nbest=64", "trainer.subword_alpha=0.1")),
    round_3("r3_subwords_8_0.5", ("trainer.subword_nbest=8", "trainer.subword_alpha=0.5")),
    # source <unk> dropout (seq2seq/data/unknown_dropout.py): a source piece read as <unk> with
    # probability p, so that an unseen character does not derail the sentence around it
    round_3("r3_source_unk_0.1", ("trainer.source_unk_rate=0.1",)),
    round_3("r3_source_unk_0.05", ("trainer.source_unk_rate=0.05",)),
    # every character of the training sources in the Chinese subword model (coverage 1, not
    # 0.9995): the alternative to byte fallback for the rarest characters
    round_3("r3_full_coverage", ("data.character_coverage=1.0",)),
)

LEVERS = {lever.name: lever for lever in (*ROUND_1, *ROUND_2, *ROUND_3)}


def budget(lever: Lever, tflop: float) -> tuple[int, int]:
    """(max_steps, valid_every): four validations, the last near `tflop` (the estimate of
    GFLOP per update is a little high, so runs end a little past it)."""
    valid_every = math.ceil(tflop * 1000 / 4 / lever.gflop_per_update * 1.03)
    return 4 * valid_every, valid_every


def command(
    lever: Lever, tflop: float, run_dir: Path, threads: int, seed: int | None = None
) -> list[str]:
    max_steps, valid_every = budget(lever, tflop)
    base = BASE if lever.greedy_test else BASE[:-1]
    return [
        sys.executable, "-m", "seq2seq.cli.train", *base, *lever.base, *lever.overrides,
        f"trainer.max_steps={max_steps}", f"trainer.valid_every={valid_every}",
        f"trainer.threads={threads}", f"name=lever_{lever.name}", f"hydra.run.dir={run_dir}",
        *([] if seed is None else [f"trainer.seed={seed}"]),
    ]  # fmt: skip


def run_folder(out: Path, lever: Lever, seed: int | None) -> Path:
    """`out/NAME` for one run of a lever, `out/NAME/seed_S` for one of several seeds."""
    return out / lever.name if seed is None else out / lever.name / f"seed_{seed}"


def train(lever: Lever, tflop: float, out: Path, threads: int, seed: int | None = None) -> None:
    run_dir = run_folder(out, lever, seed)
    if (run_dir / "results.json").is_file():
        print(f"{lever.name}: done before, kept", flush=True)
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    argv = command(lever, tflop, run_dir, threads, seed)
    (run_dir / "command.txt").write_text(" ".join(argv[1:]) + "\n", encoding="utf-8")
    started = time.monotonic()
    with open(run_dir / "train.log", "w", encoding="utf-8") as log:
        status = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, check=False)
    minutes = (time.monotonic() - started) / 60
    print(f"{lever.name}: exit {status.returncode} after {minutes:.1f} min", flush=True)


def table(out: Path) -> list[str]:
    """One row per finished lever: its valid BLEU at each validation, with the training
    TFLOP spent by then (the last validation is the whole budget)."""
    lines = [
        "| lever | overrides | valid BLEU (TFLOP) at ¼, ½, ¾ and all of the budget | updates | "
        "minutes |",
        "|---|---|---|---|---|",
    ]
    for run_dir in sorted(path for path in out.iterdir() if (path / "results.json").is_file()):
        lever = LEVERS.get(run_dir.name, Lever(run_dir.name, ("?",)))
        scalars = read_scalars(run_dir)
        spent = {step: value for _, step, value in scalars.series.get("train/tflop", [])}
        cells = [
            f"{bleu:.2f} ({spent[step]:.1f})" if step in spent else f"{bleu:.2f} (update {step})"
            for _, step, bleu in scalars.series.get("valid/bleu", [])
        ]
        results = read_results(run_dir)
        shown = " ".join(lever.overrides) or (
            "(the previous default)" if lever.base else "(the default)"
        )
        lines.append(
            f"| {lever.name} | `{shown}` | {' · '.join(cells)} | {results['steps']} | "
            f"{results['train_minutes']:.1f} |"
        )
    return lines + ["", "Cells: greedy BLEU on the 1,000 valid pairs (training TFLOP by then)."]


def listing() -> list[str]:
    """One line per lever: its name and its overrides."""
    return [f"{lever.name:34} {' '.join(lever.overrides)}" for lever in LEVERS.values()]


def train_all(
    levers: list[Lever], tflop: float, out: Path, jobs: int, seeds: tuple[int, ...] = ()
) -> None:
    """Train `levers` (each with every one of `seeds`, or once with the config's seed), `jobs`
    at once, each with its share of the cores (at least 1 thread)."""
    threads = max(1, (os.cpu_count() or 1) // jobs)
    runs = [(lever, seed) for seed in (seeds or (None,)) for lever in levers]
    with ThreadPoolExecutor(jobs) as pool:
        list(pool.map(lambda run: train(run[0], tflop, out, threads, run[1]), runs))


def seeded_table(out: Path, base: str = "r3_base") -> list[str]:
    """Round 3: one row per lever trained with several seeds (`out/NAME/seed_S`): best valid
    BLEU (greedy), test BLEU and chrF (make train's beam), the gap test − valid, the test
    length ratio (hypothesis / reference words, sacrebleu's 13a) and the paired bootstrap of
    test BLEU against `base` of the same seed (1,000 resamples; the largest p over the
    seeds). Means over the seeds, each seed's value in brackets."""
    runs = seeded_runs(out)
    lines = [
        "| lever | overrides | seeds | valid BLEU | test BLEU | test chrF | test − valid | "
        "length ratio | Δ test vs base | p vs base (per seed) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, seeds in runs.items():
        lever = LEVERS.get(name, Lever(name, ("?",)))
        rows = [seed_row(run_dir, runs.get(base, {}).get(seed)) for seed, run_dir in seeds.items()]
        shown = " ".join(lever.overrides) or "(make train)"
        deltas = [row["delta"] for row in rows if row["delta"] is not None]
        p_values = [row["p"] for row in rows if row["p"] is not None]
        lines.append(
            f"| {name} | `{shown}` | {', '.join(map(str, seeds))} | {spread(rows, 'valid')} | "
            f"{spread(rows, 'test')} | {spread(rows, 'chrf')} | {spread(rows, 'gap')} | "
            f"{spread(rows, 'ratio', 3)} | "
            f"{f'{sum(deltas) / len(deltas):+.2f}' if deltas and name != base else '—'} | "
            f"{', '.join(f'{p:.3f}' for p in p_values) if p_values and name != base else 'base'} |"
        )
    return lines + ["", "valid: greedy on the 1,000 valid pairs at best.pt; test: beam 5, as make "
                    "train; Δ and p: against the base of the same seed."]  # fmt: skip


def seeded_runs(out: Path) -> dict[str, dict[int, Path]]:
    """{lever: {seed: run folder}} of the finished runs under `out/NAME/seed_S`."""
    found: dict[str, dict[int, Path]] = {}
    for run_dir in sorted(out.glob("*/seed_*/results.json")):
        seed = int(run_dir.parent.name.removeprefix("seed_"))
        found.setdefault(run_dir.parent.parent.name, {})[seed] = run_dir.parent
    return found


def seed_row(run_dir: Path, base_dir: Path | None) -> dict[str, float | None]:
    """One seed's figures (`seeded_table`), the bootstrap against `base_dir` if given."""
    from sacrebleu.metrics import BLEU

    from seq2seq.metrics.significance import paired_bootstrap

    results = read_results(run_dir)
    hypotheses = (run_dir / "test.hyp").read_text(encoding="utf-8").splitlines()
    references = (run_dir / "test.ref").read_text(encoding="utf-8").splitlines()
    score = BLEU().corpus_score(hypotheses, [references])
    row: dict[str, float | None] = {
        "valid": results["valid_best_bleu"], "test": results["test"]["bleu"],
        "chrf": results["test"]["chrf"], "ratio": score.sys_len / score.ref_len,
        "delta": None, "p": None,
    }  # fmt: skip
    row["gap"] = row["test"] - row["valid"]
    if base_dir is not None and base_dir != run_dir:
        base = (base_dir / "test.hyp").read_text(encoding="utf-8").splitlines()
        _, tested = paired_bootstrap([("base", base), ("lever", hypotheses)], references, "en")
        row["delta"], row["p"] = (
            row["test"] - read_results(base_dir)["test"]["bleu"],
            tested.p_value,
        )
    return row


def spread(rows: list[dict[str, float | None]], key: str, digits: int = 2) -> str:
    """The mean of `key` over the seeds, and each seed's value."""
    values = [float(row[key]) for row in rows]  # type: ignore[arg-type]
    each = ", ".join(f"{value:.{digits}f}" for value in values)
    return f"{sum(values) / len(values):.{digits}f} ({each})"
