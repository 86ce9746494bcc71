"""One context vector against one per step: BLEU against the source length, on sentences and
on documents.

A plain encoder-decoder hands the decoder one summary of the source (here the mean of the
encoder states, `attention=none`: `c = (1/S) Σ_j h_j` at every step), however long the
sentence. With attention the decoder builds a new context at each step t,

    c_t = Σ_j α_tj h_j,   α_t = softmax_j(score(s_{t-1}, h_j))   (Bahdanau et al. 2015, eqs. 5-6)

so nothing has to be squeezed into one vector. Bahdanau et al. (2015, fig. 2) showed the
plain model's BLEU falling with the sentence length while the attentive model's held up:
the advantage of attention should grow with the length of the source.

Two studies, each with its own verdict:

* short sentences: the lab's GRU model (`seq2seq.lab.lab_models.gru_model`) with
  `attention=none`, `additive` and `scaled_dot`, two seeds each, on Tatoeba's sentences
  (3–25 characters);
* documents: the same model on pseudo-documents of 1–6 shuffled Tatoeba sentences
  (`data=tatoeba_zh_en_docs data.documents.order=random`: up to ~170 pieces a side, several
  times a sentence's length), with three ways of making the one vector (`DOC_ARMS`):

      final           attention=none                     s_0 from the encoder's last state
                                                         (model.summary=auto is final on a
                                                         GRU), c = mean of the states
      mean            attention=none model.summary=mean  s_0 from the mean, c = the mean
      attention_pool  attention=none model.summary=attention_pool
                      attention.context=attention_pool   s_0 and c attention pooled:
                                                         c = Σ_j α_j h_j, α = softmax_j(wᵀ tanh(U h_j + b))

  against additive and scaled dot-product attention, `DOC_SEEDS` seed(s) each. `final` is
  the very model the sentences study calls `none` (the same overrides on other data).

Each run's own greedy test output (`test.hyp` beside `test.ref`, written by
`train_and_test`) is scored per source-length bucket: the test sources are sorted by their
length in characters (spaces and document separators not counted: Chinese characters on
Tatoeba, symbols on a toy task) and cut into buckets of about equal size that never split
one length. A bucket's BLEU is corpus BLEU over its sentences (documents: whole documents,
the separators removed as `seq2seq.metrics.corpus_scores` removes them) with the project's
one scorer (`seq2seq.metrics.paired_bootstrap`), which also gives each seed's 95% bootstrap
interval (1,000 resamples of the bucket) and the p-value of each arm against each
one-vector arm on the same texts. The figures draw the mean over seeds, the band spanning
every seed's interval.

A study's verdict, fixed before the runs: the gain of each attention over each one-vector
arm (sentences: `none`; documents: all three) is compared between the shortest and the
longest bucket; all grow: agrees, none grows: disagrees, else undecided. The experiment's
`agrees` is the documents study's, the test the claim needs (lengths several times a
sentence's); the sentences study's is kept beside it (`values["agrees_sentences"]`).
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from seq2seq.data.documents import split_document
from seq2seq.data.prepare import prepare
from seq2seq.lab.experiment import Experiment, Finding, LabContext
from seq2seq.lab.lab_models import QUICK_GRU, TATOEBA_STEPS, TINY_GRU_MODEL, TOY_GRU, gru_model
from seq2seq.lab.training import TrainedRun, compose_config, run_overrides, trained
from seq2seq.metrics import BootstrapResult, paired_bootstrap
from seq2seq.metrics.base import without_separators
from seq2seq.runs.assemble import data_config

MECHANISMS = ("none", "additive", "scaled_dot")  # the first is the baseline of every test
LABELS = {"none": "none (one fixed context)", "additive": "additive", "scaled_dot": "scaled dot"}
COLOURS = {"none": "C0", "additive": "C1", "scaled_dot": "C2"}  # the same in both panels
SEEDS, QUICK_SEEDS = 2, 1
BUCKETS, QUICK_BUCKETS = 5, 4

# ---- the documents study
ONE_VECTOR = ("final", "mean", "attention_pool")  # the baselines of its tests
ATTENTIONS = MECHANISMS[1:]
DOC_ARMS = (*ONE_VECTOR, *ATTENTIONS)
DOC_ARM_OVERRIDES = {
    "final": ("attention=none",),  # model.summary=auto: a GRU encoder's last state
    "mean": ("attention=none", "model.summary=mean"),
    "attention_pool": (
        "attention=none",
        "model.summary=attention_pool",
        "attention.context=attention_pool",
    ),
    "additive": ("attention=additive",),
    "scaled_dot": ("attention=scaled_dot",),
}
DOC_LABELS = {"final": "last state", "mean": "mean", "attention_pool": "attention pooling",
              "additive": "additive", "scaled_dot": "scaled dot"}  # fmt: skip
DOC_COLOURS = {"final": "C0", "mean": "C9", "attention_pool": "C3", "additive": "C1",
               "scaled_dot": "C2"}  # fmt: skip
BASELINE_LINES = {"final": "-", "mean": "--", "attention_pool": ":"}  # the gain panel
# The table's gain columns ("gain vs last", ...) and the arm each stands for in each study.
GAIN_COLUMNS = {"last": "final", "mean": "mean", "pool": "attention_pool"}
SENTENCE_BASELINES = {"last": "none"}  # `none` is the `final` arm: same overrides
DOCUMENT_BASELINES = GAIN_COLUMNS
DOCUMENT_DATA = ("data=tatoeba_zh_en_docs", "data.documents.order=random")
# A documents run trains for about 1.3 minutes on 2 cores (800 updates, as a sentences run,
# in about as many tokens), so two seeds: 10 runs, about 13 minutes of training.
DOC_SEEDS = 2

# ---- the quick documents: a generated zh→en corpus, word for word, written under data_root
QUICK_CORPUS = "lab_corpora/context_vector_docs"
QUICK_SPLITS = {"train": 240, "valid": 24, "test": 48}  # sentences per split
QUICK_LEXICON = {"猫": "cat", "狗": "dog", "鸟": "bird", "鱼": "fish", "看": "sees",
                 "吃": "eats", "大": "big", "小": "small", "红": "red", "跑": "runs"}  # fmt: skip
QUICK_WORDS = (2, 6)  # words per sentence
QUICK_DOCUMENTS = "data.documents={min_sentences:1,max_sentences:4,order:random}"


@dataclass(frozen=True)
class LengthBucket:
    """Test sentences whose source length lies in [shortest, longest]."""

    shortest: int
    longest: int
    members: list[int]  # indices into the test split

    @property
    def label(self) -> str:
        if self.shortest == self.longest:
            return str(self.shortest)
        return f"{self.shortest}–{self.longest}"


@dataclass(frozen=True)
class GreedyOutput:
    """One run's greedy test translations, with the sources and references they belong to."""

    sources: list[str]
    hypotheses: list[str]
    references: list[str]
    tgt_lang: str


# Per bucket and seed: the paired bootstrap against each baseline, {baseline: {arm: result}}.
BaselineScores = dict[str, dict[str, BootstrapResult]]
Runs = dict[str, list[tuple[TrainedRun, list[str]]]]  # arm → (run, its overrides) per seed


@dataclass(frozen=True)
class DocumentStudy:
    """What the documents study measured."""

    buckets: list[LengthBucket]
    rows: list[dict[str, Any]]  # `table_row`s, one per arm and bucket
    seeds: int
    test_bleu: dict[str, float]  # each arm's whole-test BLEU, mean over seeds
    lengths: list[int]  # the test documents' source lengths
    sentences_per_document: float  # on the test split


# ------------------------------------------------------------------ lengths and buckets


def source_length(line: str) -> int:
    """Characters of a source line, spaces not counted (a toy line "c a d" has 3)."""
    return sum(1 for char in line if not char.isspace())


def document_length(line: str) -> int:
    """Characters of a document's sentences, spaces and separators not counted (the
    `source_length` of a line without separators)."""
    return sum(source_length(sentence) for sentence in split_document(line))


def length_buckets(lengths: list[int], count: int) -> list[LengthBucket]:
    """At most `count` buckets of about equal size, each a whole range of lengths: a length
    goes to the bucket that the middle of its sentences falls in when the sorted lengths
    are cut into `count` equal parts; a last bucket under half that size joins the one
    before it."""
    target = len(lengths) / count
    by_length: dict[int, list[int]] = {}
    for index, length in enumerate(lengths):
        by_length.setdefault(length, []).append(index)
    groups: list[list[int]] = [[] for _ in range(count)]  # the lengths of each bucket
    filled = 0
    for length in sorted(by_length):
        middle = filled + len(by_length[length]) / 2
        groups[min(count - 1, int(middle // target))].append(length)
        filled += len(by_length[length])
    groups = [group for group in groups if group]
    if len(groups) > 1 and sum(len(by_length[n]) for n in groups[-1]) < target / 2:
        last = groups.pop()
        groups[-1] = groups[-1] + last
    return [
        LengthBucket(group[0], group[-1], [i for n in group for i in by_length[n]])
        for group in groups
    ]


# ------------------------------------------------------------------ runs and their test output


def mechanism_runs(context: LabContext) -> dict[str, list[tuple[TrainedRun, list[str]]]]:
    """Every mechanism's runs, one per seed, with the overrides each was trained with."""
    seeds = context.seeds(QUICK_SEEDS if context.quick else SEEDS)
    runs: dict[str, list[tuple[TrainedRun, list[str]]]] = {}
    for mechanism in MECHANISMS:
        for seed in seeds:
            overrides = gru_model(context, f"attention={mechanism}", seed=seed)
            run = trained(context, overrides, f"gru-{mechanism}")
            runs.setdefault(mechanism, []).append((run, overrides))
    return runs


def document_overrides(context: LabContext, arm: str, seed: int) -> list[str]:
    """The overrides of one documents run: the lab's GRU on Tatoeba's documents, or at the
    quick size the tiny GRU on the generated corpus (`quick_documents_data`)."""
    if not context.quick:
        return gru_model(context, *DOCUMENT_DATA, *DOC_ARM_OVERRIDES[arm], seed=seed)
    training = [option for option in QUICK_GRU if option not in TOY_GRU]  # no toy data
    return [*TINY_GRU_MODEL, *quick_documents_data(context), *training,
            *DOC_ARM_OVERRIDES[arm], f"trainer.seed={seed}"]  # fmt: skip


def document_runs(context: LabContext) -> Runs:
    """Every documents arm's runs, one per seed, with their overrides."""
    runs: Runs = {}
    for arm in DOC_ARMS:
        for seed in context.seeds(QUICK_SEEDS if context.quick else DOC_SEEDS):
            overrides = document_overrides(context, arm, seed)
            runs.setdefault(arm, []).append(
                (trained(context, overrides, f"gru-docs-{arm}"), overrides)
            )
    return runs


def lines_of(path: Path) -> list[str]:
    """The lines of a file written as `"\\n".join(lines) + "\\n"` (`train_and_test`)."""
    return path.read_text(encoding="utf-8").removesuffix("\n").split("\n")


def greedy_output(context: LabContext, run: TrainedRun, overrides: list[str]) -> GreedyOutput:
    """The run's `test.hyp` and `test.ref`, and the sources of its prepared test split
    (the references are checked against the split's, so the three are in one order)."""
    data = prepare(data_config(compose_config(run_overrides(context, overrides))))
    hypotheses, references = lines_of(run.run_dir / "test.hyp"), lines_of(run.run_dir / "test.ref")
    if references != list(data.test.tgt_lines) or len(hypotheses) != len(references):
        raise ValueError(f"{run.run_dir}: test.hyp / test.ref do not match its test split")
    return GreedyOutput(list(data.test.src_lines), hypotheses, references, data.tgt_tokenizer.lang)


# ------------------------------------------------------------------ the quick documents corpus


def toy_sentence_pair(rng: random.Random) -> tuple[str, str]:
    """A Chinese sentence of `QUICK_LEXICON` words and its word-for-word English."""
    words = rng.choices(list(QUICK_LEXICON), k=rng.randint(*QUICK_WORDS))
    english = " ".join(QUICK_LEXICON[word] for word in words)
    return "".join(words) + "。", english[0].upper() + english[1:] + "."


def write_quick_corpus(folder: Path, seed: int) -> Path:
    """`folder/{train,valid,test}.{zh,en}`: `QUICK_SPLITS` generated pairs (the same for a
    seed); returns `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    for number, (split, count) in enumerate(QUICK_SPLITS.items()):
        rng = random.Random(seed * len(QUICK_SPLITS) + number)
        pairs = [toy_sentence_pair(rng) for _ in range(count)]
        for side, lang in enumerate(("zh", "en")):
            text = "".join(pair[side] + "\n" for pair in pairs)
            (folder / f"{split}.{lang}").write_text(text, encoding="utf-8")
    return folder


def quick_documents_data(context: LabContext) -> list[str]:
    """The data overrides of the quick documents: the generated corpus (written under the
    context's data root) as `data=text_pair` pseudo-documents of 1–4 sentences."""
    corpus = write_quick_corpus(context.data_root / QUICK_CORPUS, context.seed)
    prefixes = [f"data.source.{split}_prefix={corpus / split}" for split in QUICK_SPLITS]
    return ["data=text_pair", "data.name=context_vector_docs", "data.src_lang=zh",
            "data.tgt_lang=en", *prefixes, "data.src_vocab_size=24", "data.tgt_vocab_size=32",
            "data.max_len=200", "data.max_tokens=1024", QUICK_DOCUMENTS]  # fmt: skip


# ------------------------------------------------------------------ scoring


def arm_scores(
    outputs: dict[str, GreedyOutput], members: list[int], baseline: str, arms: tuple[str, ...]
) -> dict[str, BootstrapResult]:
    """Each arm's corpus BLEU on the `members` of the test split (separators removed), with
    its 95% bootstrap interval and its p-value against `baseline` (none for the baseline)."""
    ordered = [baseline, *(arm for arm in arms if arm != baseline)]
    systems = [(arm, without_separators([outputs[arm].hypotheses[i] for i in members]))
               for arm in ordered]  # fmt: skip
    references = without_separators([outputs[baseline].references[i] for i in members])
    results = paired_bootstrap(systems, references, outputs[baseline].tgt_lang)
    return dict(zip(ordered, results, strict=True))


def bucket_scores(
    outputs: dict[str, GreedyOutput], bucket: LengthBucket
) -> dict[str, BootstrapResult]:
    """Each mechanism's corpus BLEU on the bucket's sentences, with its 95% bootstrap
    interval and its p-value against `none` (one seed's runs, the same sentences)."""
    return arm_scores(outputs, bucket.members, MECHANISMS[0], MECHANISMS)


def seed_spread(results: list[BootstrapResult]) -> dict[str, float]:
    """One arm's BLEU in a bucket over seeds: the mean, the seeds' range, and the band
    spanning every seed's 95% interval (clipped to [0, 100], BLEU's range)."""
    return {
        "bleu": statistics.fmean(result.bleu for result in results),
        "seed min": min(result.bleu for result in results),
        "seed max": max(result.bleu for result in results),
        "band low": max(0.0, min(result.ci_low for result in results)),
        "band high": min(100.0, max(result.ci_high for result in results)),
    }


def gain_over(arm: str, baseline: str, per_seed: list[BaselineScores]) -> tuple[float, float]:
    """The arm's BLEU minus the baseline's, mean over seeds, and the largest of the seeds'
    p-values (NaN when the arm is the baseline)."""
    pairs = [(scores[baseline][arm], scores[baseline][baseline]) for scores in per_seed]
    gap = statistics.fmean(mine.bleu - theirs.bleu for mine, theirs in pairs)
    p_values = [mine.p_value for mine, _ in pairs if mine.p_value is not None]
    return gap, max(p_values) if p_values else float("nan")


def bucket_row(
    mechanism: str, bucket: LengthBucket, per_seed: list[dict[str, BootstrapResult]]
) -> dict[str, Any]:
    """One table row: the mechanism's mean BLEU over seeds in the bucket, the seeds' range,
    the band spanning every seed's 95% interval, the gap to `none` and the largest p."""
    plain = MECHANISMS[0]
    gap, p_value = gain_over(mechanism, plain, [{plain: scores} for scores in per_seed])
    return {
        "mechanism": mechanism,
        "source length": bucket.label,
        "sentences": len(bucket.members),
        **seed_spread([scores[mechanism] for scores in per_seed]),
        "gap vs none": gap,
        "p vs none": p_value,
    }


def bucket_table(
    context: LabContext, runs: dict[str, list[tuple[TrainedRun, list[str]]]]
) -> tuple[list[LengthBucket], list[dict[str, Any]]]:
    """The buckets (from the test sources) and one row per mechanism and bucket."""
    seeds = len(runs[MECHANISMS[0]])
    outputs = [
        {mechanism: greedy_output(context, *runs[mechanism][seed]) for mechanism in MECHANISMS}
        for seed in range(seeds)
    ]
    lengths = [source_length(line) for line in outputs[0][MECHANISMS[0]].sources]
    buckets = length_buckets(lengths, QUICK_BUCKETS if context.quick else BUCKETS)
    scores = [[bucket_scores(by_seed, bucket) for by_seed in outputs] for bucket in buckets]
    rows = [
        bucket_row(mechanism, bucket, per_seed)
        for mechanism in MECHANISMS
        for bucket, per_seed in zip(buckets, scores, strict=True)
    ]
    return buckets, rows


# ------------------------------------------------------------------ the page's one table


def table_row(
    study: str,
    arm: str,
    bucket: LengthBucket,
    per_seed: list[BaselineScores],
    baselines: dict[str, str],
) -> dict[str, Any]:
    """One row of the page's table: the study, the arm, the bucket, the arm's BLEU over
    seeds (`seed_spread`) and its gain over each one-vector arm with the largest p, NaN
    where the study has no such arm (`baselines`: gain column → the study's arm)."""
    first = next(iter(baselines.values()))
    row: dict[str, Any] = {
        "study": study,
        "arm": arm,
        "source length": bucket.label,
        "texts": len(bucket.members),
        **seed_spread([scores[first][arm] for scores in per_seed]),
    }
    for column in GAIN_COLUMNS:
        gap, p_value = float("nan"), float("nan")
        if column in baselines:
            gap, p_value = gain_over(arm, baselines[column], per_seed)
        row[f"gain vs {column}"], row[f"p vs {column}"] = gap, p_value
    return row


def sentence_table_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The sentences study's `bucket_row`s as rows of the page's table (`none`, the last
    state starting the decoder, is its `last` column)."""
    return [
        {
            "study": "sentences",
            "arm": row["mechanism"],
            "source length": row["source length"],
            "texts": row["sentences"],
            **{key: row[key] for key in ("bleu", "seed min", "seed max", "band low", "band high")},
            "gain vs last": row["gap vs none"],
            "p vs last": row["p vs none"],
            **{
                f"{kind} vs {column}": float("nan")
                for column in GAIN_COLUMNS
                if column not in SENTENCE_BASELINES
                for kind in ("gain", "p")
            },
        }
        for row in rows
    ]


def study_gains(
    rows: list[dict[str, Any]], study: str, arm: str, column: str
) -> tuple[float, float]:
    """The arm's gain in the table's `gain vs <column>` in the shortest and the longest
    bucket of `study`."""
    mine = [row[f"gain vs {column}"] for row in rows if row["study"] == study and row["arm"] == arm]
    return mine[0], mine[-1]


def growth_verdict(endpoints: list[tuple[float, float]]) -> bool | None:
    """True when every (shortest, longest) gain grows, False when none does, None when
    they disagree."""
    grows = [longest > shortest for shortest, longest in endpoints]
    return True if all(grows) else False if not any(grows) else None


# ------------------------------------------------------------------ the documents study


def document_study(context: LabContext) -> DocumentStudy:
    """Train (or reuse) every documents arm and score it in document-length buckets."""
    runs = document_runs(context)
    seeds = len(runs[DOC_ARMS[0]])
    outputs = [{arm: greedy_output(context, *runs[arm][seed]) for arm in DOC_ARMS}
               for seed in range(seeds)]  # fmt: skip
    sources = outputs[0][DOC_ARMS[0]].sources
    lengths = [document_length(line) for line in sources]
    buckets = length_buckets(lengths, QUICK_BUCKETS if context.quick else BUCKETS)
    scores = [[{baseline: arm_scores(by_seed, bucket.members, baseline, DOC_ARMS)
                for baseline in ONE_VECTOR} for by_seed in outputs]
              for bucket in buckets]  # fmt: skip
    rows = [
        table_row("documents", arm, bucket, per_seed, DOCUMENT_BASELINES)
        for arm in DOC_ARMS
        for bucket, per_seed in zip(buckets, scores, strict=True)
    ]
    test_bleu = {arm: statistics.fmean(run.test_bleu for run, _ in runs[arm]) for arm in DOC_ARMS}
    per_document = statistics.fmean(len(split_document(line)) for line in sources)
    return DocumentStudy(buckets, rows, seeds, test_bleu, lengths, per_document)


def document_endpoints(study: DocumentStudy) -> dict[tuple[str, str], tuple[float, float]]:
    """(attention, one-vector arm) → the attention's gain over it in the shortest and the
    longest document bucket."""
    return {
        (attention, baseline): study_gains(study.rows, "documents", attention, column)
        for attention in ATTENTIONS
        for column, baseline in GAIN_COLUMNS.items()
    }


# ------------------------------------------------------------------ figures and findings


def draw(
    context: LabContext, buckets: list[LengthBucket], rows: list[dict[str, Any]], unit: str
) -> Path:
    """BLEU against the source-length bucket, one line per mechanism with its band (left),
    and each attention's gap to the fixed context vector (right)."""
    positions = list(range(len(buckets)))
    ticks = [f"{b.label}\n({len(b.members)})" for b in buckets]
    figure = Figure(figsize=(10, 4), layout="constrained")
    bleu_axes, gap_axes = figure.subplots(1, 2)
    for mechanism in MECHANISMS:
        mine = [row for row in rows if row["mechanism"] == mechanism]
        style = {"color": COLOURS[mechanism], "label": LABELS[mechanism]}
        bleu_axes.plot(positions, [row["bleu"] for row in mine], marker="o", **style)
        low, high = [row["band low"] for row in mine], [row["band high"] for row in mine]
        bleu_axes.fill_between(positions, low, high, color=style["color"], alpha=0.2)
        if mechanism != MECHANISMS[0]:
            gap_axes.plot(positions, [row["gap vs none"] for row in mine], marker="o", **style)
    gap_axes.axhline(0.0, color="grey", linewidth=0.8)
    for axes, ylabel in ((bleu_axes, "test BLEU"), (gap_axes, "BLEU gain over none")):
        axes.set_xticks(positions, ticks)
        axes.set_xlabel(f"source length in {unit} (sentences)")
        axes.set_ylabel(ylabel)
        axes.legend()
    bleu_axes.set_title("BLEU by source length (mean over seeds; band: 95% intervals)")
    gap_axes.set_title("attention minus one fixed context vector")
    path = context.figure("bleu_by_length")
    figure.savefig(path, dpi=110)
    return path


def draw_documents(context: LabContext, study: DocumentStudy, unit: str) -> Path:
    """Documents: BLEU against the document-length bucket, one line per arm with its band
    (left), and each attention's gain over each one-vector arm (right: the attention's
    colour, the one-vector arm's line style)."""
    positions = list(range(len(study.buckets)))
    ticks = [f"{b.label}\n({len(b.members)})" for b in study.buckets]
    figure = Figure(figsize=(11, 4.5), layout="constrained")
    bleu_axes, gain_axes = figure.subplots(1, 2)
    for arm in DOC_ARMS:
        mine = [row for row in study.rows if row["arm"] == arm]
        colour = DOC_COLOURS[arm]
        bleu_axes.plot(positions, [row["bleu"] for row in mine], marker="o", color=colour,
                       label=DOC_LABELS[arm])  # fmt: skip
        bleu_axes.fill_between(positions, [row["band low"] for row in mine],
                               [row["band high"] for row in mine], color=colour, alpha=0.15)  # fmt: skip
    for attention in ATTENTIONS:
        mine = [row for row in study.rows if row["arm"] == attention]
        for column, baseline in GAIN_COLUMNS.items():
            gain_axes.plot(positions, [row[f"gain vs {column}"] for row in mine], marker="o",
                           color=DOC_COLOURS[attention], linestyle=BASELINE_LINES[baseline],
                           label=f"{DOC_LABELS[attention]} − {DOC_LABELS[baseline]}")  # fmt: skip
    gain_axes.axhline(0.0, color="grey", linewidth=0.8)
    for axes, ylabel in ((bleu_axes, "test BLEU (whole documents)"), (gain_axes, "BLEU gain")):
        axes.set_xticks(positions, ticks)
        axes.set_xlabel(f"document source length in {unit} (documents)")
        axes.set_ylabel(ylabel)
        axes.legend(fontsize="small")
    seeds = f"{study.seeds} seed{'s' if study.seeds > 1 else ''}"
    bleu_axes.set_title(f"Documents: BLEU by length ({seeds}; band: 95% intervals)")
    gain_axes.set_title("attention minus each one-vector arm")
    path = context.figure("documents_bleu_by_length")
    figure.savefig(path, dpi=110)
    return path


def gaps(rows: list[dict[str, Any]], mechanism: str) -> tuple[float, float]:
    """The mechanism's mean gap to `none` in the shortest and in the longest bucket."""
    mine = [row["gap vs none"] for row in rows if row["mechanism"] == mechanism]
    return mine[0], mine[-1]


def ratios(rows: list[dict[str, Any]], mechanism: str) -> tuple[float, float]:
    """The mechanism's mean BLEU over `none`'s in the shortest and in the longest bucket
    (NaN where `none` scores 0): the gain relative to what the plain model still gets."""
    mine = [row["bleu"] for row in rows if row["mechanism"] == mechanism]
    plain = [row["bleu"] for row in rows if row["mechanism"] == MECHANISMS[0]]
    pairs = ((mine[0], plain[0]), (mine[-1], plain[-1]))
    return tuple(a / b if b > 0 else float("nan") for a, b in pairs)


def verdict(rows: list[dict[str, Any]]) -> bool | None:
    """True when every attention's gap grows from the shortest to the longest bucket,
    False when none does, None when they disagree."""
    return growth_verdict([gaps(rows, mechanism) for mechanism in MECHANISMS[1:]])


OUTCOMES = {
    True: "the advantage of a context per step grows with the source length, as claimed",
    False: "the advantage does not grow with the source length here, against the claim",
    None: "the two attentions disagree, so this does not decide the claim",
}


def summary(rows, buckets, unit: str, seeds: int, where: str, agrees: bool | None) -> str:
    parts = [
        f"{LABELS[m]} {gaps(rows, m)[0]:+.1f} → {gaps(rows, m)[1]:+.1f}" for m in MECHANISMS[1:]
    ]
    relative = [
        f"{LABELS[m]} {ratios(rows, m)[0]:.2f}× → {ratios(rows, m)[1]:.2f}×" for m in MECHANISMS[1:]
    ]
    return (
        f"On {where}, in {len(buckets)} source-length buckets from {buckets[0].label} to "
        f"{buckets[-1].label} {unit} ({seeds} seed(s) each), the BLEU gain over one fixed "
        f"context vector goes from the shortest to the longest bucket: {'; '.join(parts)}. "
        f"So {OUTCOMES[agrees]}. Every model's BLEU falls with the length; relative to the plain "
        f"model's, attention's BLEU goes {'; '.join(relative)} (a measure chosen after the "
        "run, so a hint, not a test)."
    )


def document_summary(study: DocumentStudy, unit: str, where: str, agrees: bool | None) -> str:
    """The documents study in a few sentences: BLEU of each arm in the shortest and the
    longest bucket, each attention's gain over each one-vector arm there, the verdict."""
    endpoints = document_endpoints(study)
    bleu = {arm: [row["bleu"] for row in study.rows if row["arm"] == arm] for arm in DOC_ARMS}
    scores = "; ".join(f"{DOC_LABELS[a]} {bleu[a][0]:.1f} → {bleu[a][-1]:.1f}" for a in DOC_ARMS)
    gains = "; ".join(
        f"{DOC_LABELS[attention]} over "
        + ", ".join(
            f"{DOC_LABELS[b]} {endpoints[attention, b][0]:+.1f} → {endpoints[attention, b][1]:+.1f}"
            for b in ONE_VECTOR
        )  # fmt: skip
        for attention in ATTENTIONS
    )
    grown = sum(longest > shortest for shortest, longest in endpoints.values())
    outcome = {None: f"the gains disagree ({grown} of {len(endpoints)} grow), so this does "
               "not decide the claim"}.get(agrees, OUTCOMES[agrees])  # fmt: skip
    buckets, seeds = study.buckets, study.seeds
    return (
        f"On {where} ({len(study.lengths)} documents, {study.sentences_per_document:.1f} "
        f"sentences and {statistics.fmean(study.lengths):.0f} {unit} on average, at most "
        f"{max(study.lengths)}; {seeds} seed(s) per arm), in {len(buckets)} length buckets "
        f"from {buckets[0].label} to {buckets[-1].label} {unit}, BLEU goes from the shortest "
        f"to the longest bucket: {scores}. The gain of {gains}. So {outcome}."
    )


def values_of(
    runs: Runs, rows: list[dict[str, Any]], buckets: list[LengthBucket], study: DocumentStudy
) -> dict[str, Any]:
    """The numbers the tests and the page quote: the sentences study's under the keys it
    always had, the documents study's under `documents`."""
    values: dict[str, Any] = {"buckets": [b.label for b in buckets], "seeds": len(runs["none"])}
    for mechanism in MECHANISMS:
        values[f"test_bleu_{mechanism}"] = statistics.fmean(r.test_bleu for r, _ in runs[mechanism])
        if mechanism != MECHANISMS[0]:
            values[f"gap_shortest_{mechanism}"], values[f"gap_longest_{mechanism}"] = gaps(
                rows, mechanism
            )
    endpoints = document_endpoints(study)
    values["documents"] = {
        "buckets": [bucket.label for bucket in study.buckets],
        "seeds": study.seeds,
        "documents": len(study.lengths),
        "sentences_per_document": study.sentences_per_document,
        "mean_length": statistics.fmean(study.lengths),
        "max_length": max(study.lengths),
        "test_bleu": study.test_bleu,
        "gain_shortest": {a: {b: endpoints[a, b][0] for b in ONE_VECTOR} for a in ATTENTIONS},
        "gain_longest": {a: {b: endpoints[a, b][1] for b in ONE_VECTOR} for a in ATTENTIONS},
    }
    return values


def run(context: LabContext) -> Finding:
    runs = mechanism_runs(context)
    buckets, rows = bucket_table(context, runs)
    unit = "symbols" if context.quick else "characters"
    agrees_sentences = verdict(rows)
    where = "the toy reverse task's test split" if context.quick else "Tatoeba's zh→en test split"
    study = document_study(context)
    agrees_documents = growth_verdict(list(document_endpoints(study).values()))
    where_documents = ("the generated zh→en documents' test split" if context.quick else
                       "Tatoeba's zh→en test split joined into documents of 1–6 shuffled sentences")  # fmt: skip
    sentences_text = summary(rows, buckets, unit, len(runs["none"]), where, agrees_sentences)
    documents_text = document_summary(study, "characters", where_documents, agrees_documents)
    verdicts = {True: "agrees with", False: "does not agree with", None: "does not decide"}
    values = values_of(runs, rows, buckets, study)
    values["agrees_sentences"], values["agrees_documents"] = agrees_sentences, agrees_documents
    return Finding(
        summary=(
            f"**Short sentences.** {sentences_text}\n\n**Documents.** {documents_text}\n\n"
            "The verdict below is the documents study's, the test the claim needs (sources "
            f"several times a sentence's length); on short sentences the measurement "
            f"{verdicts[agrees_sentences]} the claim. In the table, `none` (sentences) "
            "and `final` (documents) are the same model, the last state starting the decoder "
            "and the mean of the states its one context: its gains are in `gain vs last`."
        ),
        table=[*sentence_table_rows(rows), *study.rows],
        figures=[draw(context, buckets, rows, unit), draw_documents(context, study, "characters")],
        values=values,
        agrees=agrees_documents,
    )


EXPERIMENT = Experiment(
    name="context_vector",
    order=2,
    title="One context vector against one per step",
    claim=(
        "An encoder-decoder without attention must pack the whole source sentence into one "
        "vector of fixed size before it writes a word, and the longer the sentence, the more "
        "that vector has to leave out. Attention lets the decoder look back at every encoder "
        "state and form a new context for each word it writes, so it should lose less on "
        "long sentences: the BLEU gained by attention should grow with the source length "
        "(Bahdanau et al. 2015, fig. 2)."
    ),
    run=run,
    default_size=(
        "Two studies of the lab's GRU model, each run for "
        f"{TATOEBA_STEPS} updates and scored greedily in five source-length buckets. Short "
        "sentences: Tatoeba zh→en without attention, with additive and with scaled "
        "dot-product attention, two seeds each (6 runs). Documents: Tatoeba's sentences "
        "joined into pseudo-documents of 1–6 shuffled sentences "
        "(`data=tatoeba_zh_en_docs data.documents.order=random`), with the one vector made "
        "three ways (the last state, the mean, attention pooling: `attention=none` with "
        "`model.summary=auto`, `mean`, or `attention_pool` and "
        "`attention.context=attention_pool`) against the two attentions, "
        f"{DOC_SEEDS} seed{'s' if DOC_SEEDS > 1 else ''} each ({len(DOC_ARMS) * DOC_SEEDS} runs)."
    ),
)
