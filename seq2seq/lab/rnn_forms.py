"""The four forms of a recurrent network, and why translation needs an encoder and a decoder.

A recurrent network reads one input per step, h_i = f(x_i, h_{i-1}) (here f is a GRU cell),
and its outputs can be wired to its states in four ways, by the shapes of input and output:

* N vs N: one output per input, y_i = g(h_i). Output i has read x_1 … x_i and nothing after.
* N vs 1: one output for the whole sequence, y = g(h_n), read from the last state.
* 1 vs N: one vector in, a sequence out: the state starts from the vector, s_0 = tanh(W x),
  and each output is fed back as the next input, s_t = f(y_{t-1}, s_{t-1}), y_t = g(s_t),
  until the end symbol.
* N vs M: the encoder-decoder (seq2seq): an N vs 1 network reads the input into its last
  state c = h_n, and a 1 vs N network writes the output from s_0 = c. Only this form lets
  the output length M differ from N (and depend on the input), and only it has read the
  whole input before it writes its first output.

The tasks: small synthetic ones over the eight letters `LETTERS` (four vowels, four
consonants), drawn from a `torch.Generator`, whose right answers are computed by rule:

    tag         N → N   each letter's class, V (vowel) or C (consonant)
    reverse     N → N   the letters in reverse order: output i is input n-1-i
    majority    N → 1   V when most letters are vowels, else C (n odd: never a tie)
    spell       1 → N   a word's number → its letters (a lexicon of random words)
    consonants  N → M   the consonants, in order (M ≤ N, depending on the input)

`reverse` has the shape of N vs N, but its output i needs an input the network has not
read yet for every i < (n-1)/2: an N vs N network can only guess there. `consonants`
changes the length. Both, by the claim, need N vs M.

Every form is trained (Adam, fresh batches each update) on every task whose shape it can
express: a form expresses a task when the task's shape is its own; N vs M expresses all
five (a single input is a sequence of length 1, a single output one of length 1). Then it
is scored on fresh examples: per-token accuracy (output token t against the answer's
token t, over the answer's tokens) and exact-sequence accuracy (the whole output, its
length included). The chance baseline of a task is the best answer that does not look at
the input: at each position the answer token most frequent there, and for whole
sequences the most frequent answer, both counted on the same evaluation examples.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure
from torch import nn

from seq2seq.lab.experiment import Experiment, Finding, LabContext
from seq2seq.runs.assemble import select_device

LETTERS = "abcdefio"
VOWELS = frozenset("aeio")
PAD, BOS, EOS = 0, 1, 2
TOKENS = ("<pad>", "<s>", "</s>", *LETTERS, "V", "C")  # every answer token; letters as inputs too
LETTER_IDS = range(3, 3 + len(LETTERS))
VOWEL_TAG, CONSONANT_TAG = TOKENS.index("V"), TOKENS.index("C")

FORMS = ("N vs N", "N vs 1", "1 vs N", "N vs M")
SHAPES = {"tag": "N vs N", "reverse": "N vs N", "majority": "N vs 1", "spell": "1 vs N",
          "consonants": "N vs M"}  # fmt: skip
TASKS = tuple(SHAPES)
# The cells the claim says fit (each form on the task of its shape that it can do) and
# must reach `FITS`; N vs N on reverse must stay within `NEAR` of chance where it has not
# read the input it needs.
PREDICTED_FITS = (("N vs N", "tag"), ("N vs 1", "majority"), ("1 vs N", "spell"),
                  ("N vs M", "reverse"), ("N vs M", "consonants"))  # fmt: skip
FITS = 0.9  # per-token accuracy of a form that fits its task
NEAR = 0.05  # "at chance": per-token accuracy at most this far above the chance baseline
LEARNING_RATE = 3e-3  # Adam
CLIP_NORM = 1.0
EVAL_SEED_OFFSET = 1_000_003  # evaluation examples: a stream no training seed draws
LEXICON_SEED_OFFSET = 2_000_003  # the spell task's words


@dataclass(frozen=True)
class Size:
    length: int  # n, the letters of a sequence input (odd)
    words: int  # the spell task's lexicon (words of 3 to `length` letters)
    width: int  # embeddings and GRU states
    steps: int  # Adam updates per model
    batch: int  # examples per update
    eval_examples: int
    seeds: int  # models per form and task (accuracies: their mean)


DEFAULT = Size(length=7, words=32, width=64, steps=1500, batch=64, eval_examples=1000, seeds=2)
QUICK = Size(length=5, words=8, width=32, steps=150, batch=32, eval_examples=256, seeds=1)


# ------------------------------------------------------------------ the tasks


@dataclass(frozen=True)
class Examples:
    """A task's inputs and their right answers."""

    sources: torch.Tensor  # (B, n) letter ids, or (B, 1) word numbers for spell
    answers: list[list[int]]  # B token-id lists, without an end symbol


def letter_ids(text: str) -> list[int]:
    return [TOKENS.index(letter) for letter in text]


def spelled(ids: list[int]) -> str:
    return "".join(TOKENS[i] for i in ids)


def is_vowel(token: int) -> bool:
    return TOKENS[token] in VOWELS


def tags(source: list[int]) -> list[int]:
    return [VOWEL_TAG if is_vowel(token) else CONSONANT_TAG for token in source]


def reversal(source: list[int]) -> list[int]:
    return source[::-1]


def majority(source: list[int]) -> list[int]:
    vowels = sum(is_vowel(token) for token in source)
    return [VOWEL_TAG if 2 * vowels > len(source) else CONSONANT_TAG]


def consonants(source: list[int]) -> list[int]:
    return [token for token in source if not is_vowel(token)]


RULES: dict[str, Callable[[list[int]], list[int]]] = {
    "tag": tags, "reverse": reversal, "majority": majority, "consonants": consonants,
}  # fmt: skip


def lexicon(size: Size, seed: int) -> list[list[int]]:
    """`size.words` distinct random words of 3 to `size.length` letters (the spell task's
    answers), the same for a seed."""
    generator = torch.Generator().manual_seed(seed + LEXICON_SEED_OFFSET)
    words: list[list[int]] = []
    while len(words) < size.words:
        length = int(torch.randint(3, size.length + 1, (1,), generator=generator))
        picks = torch.randint(0, len(LETTERS), (length,), generator=generator)
        word = [LETTER_IDS[i] for i in picks.tolist()]
        if word not in words:
            words.append(word)
    return words


def drawn(
    task: str, count: int, size: Size, words: list[list[int]], generator: torch.Generator
) -> Examples:
    """`count` examples of `task`: uniform letters (or word numbers for spell) and their
    answers by rule."""
    if task == "spell":
        sources = torch.randint(0, len(words), (count, 1), generator=generator)  # (B, 1)
        return Examples(sources, [list(words[i]) for i in sources[:, 0].tolist()])
    picks = torch.randint(0, len(LETTERS), (count, size.length), generator=generator)
    sources = picks + LETTER_IDS[0]  # (B, n) letter ids
    return Examples(sources, [RULES[task](row) for row in sources.tolist()])


def source_vocabulary(task: str, size: Size) -> int:
    return size.words if task == "spell" else len(TOKENS)


def expresses(form: str, task: str) -> bool:
    """Can `form` give the answer's shape for `task`'s input? N vs M can for every task."""
    return form == "N vs M" or SHAPES[task] == form


# ------------------------------------------------------------------ the four forms


def padded(rows: list[list[int]], device: torch.device) -> torch.Tensor:
    """Token lists as one `(B, longest)` tensor, PAD after each row's end."""
    longest = max(1, max(len(row) for row in rows))
    return torch.tensor([row + [PAD] * (longest - len(row)) for row in rows], device=device)


class Reader(nn.Module):
    """An embedding, a GRU over the input and a readout g to the tokens: the reading half
    that N vs N and N vs 1 share."""

    def __init__(self, sources: int, width: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(sources, width)
        self.rnn = nn.GRU(width, width, batch_first=True)
        self.readout = nn.Linear(width, len(TOKENS))


class PerStep(Reader):
    """N vs N: y_i = g(h_i), one output per input step; output i has read x_1 … x_i."""

    def forward(self, sources: torch.Tensor) -> torch.Tensor:
        states, _ = self.rnn(self.embedding(sources))  # (B, n, width)
        return self.readout(states)  # (B, n, tokens)

    def loss(self, examples: Examples) -> torch.Tensor:
        answers = padded(examples.answers, examples.sources.device)  # (B, n)
        return F.cross_entropy(self(examples.sources).flatten(0, 1), answers.flatten())

    def outputs(self, sources: torch.Tensor, longest: int) -> list[list[int]]:
        return self(sources).argmax(dim=-1).tolist()


class LastState(Reader):
    """N vs 1: y = g(h_n), one output read from the state after the last input."""

    def forward(self, sources: torch.Tensor) -> torch.Tensor:
        _, last = self.rnn(self.embedding(sources))  # (1, B, width)
        return self.readout(last[0])  # (B, tokens)

    def loss(self, examples: Examples) -> torch.Tensor:
        answers = torch.tensor([a[0] for a in examples.answers], device=examples.sources.device)
        return F.cross_entropy(self(examples.sources), answers)

    def outputs(self, sources: torch.Tensor, longest: int) -> list[list[int]]:
        return [[token] for token in self(sources).argmax(dim=-1).tolist()]


class Writer(nn.Module):
    """Writes a sequence from a start state s_0 `(1, B, width)`: s_t = f(y_{t-1}, s_{t-1}),
    y_t = g(s_t), y_0 = <s>, until </s>. Trained on the answer (teacher forcing), run
    greedily to write."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(len(TOKENS), width)
        self.rnn = nn.GRU(width, width, batch_first=True)
        self.readout = nn.Linear(width, len(TOKENS))

    def loss(self, start: torch.Tensor, answers: list[list[int]]) -> torch.Tensor:
        device = start.device
        read = padded([[BOS, *answer] for answer in answers], device)  # (B, T+1)
        written = padded([[*answer, EOS] for answer in answers], device)  # (B, T+1)
        states, _ = self.rnn(self.embedding(read), start)  # (B, T+1, width)
        logits = self.readout(states)  # (B, T+1, tokens)
        return F.cross_entropy(logits.flatten(0, 1), written.flatten(), ignore_index=PAD)

    def greedy(self, start: torch.Tensor, longest: int) -> list[list[int]]:
        """Each output up to (without) its first </s>, at most `longest` tokens."""
        batch = start.shape[1]
        token = torch.full((batch, 1), BOS, dtype=torch.long, device=start.device)
        state, written = start, []
        for _ in range(longest + 1):
            step, state = self.rnn(self.embedding(token), state)  # (B, 1, width)
            token = self.readout(step).argmax(dim=-1)  # (B, 1)
            written.append(token)
        rows = torch.cat(written, dim=1).tolist()  # (B, longest + 1)
        return [row[: row.index(EOS)] if EOS in row else row for row in rows]


class FromVector(nn.Module):
    """1 vs N: s_0 = tanh(W x) from one input vector (the embedded word number), then
    `Writer`."""

    def __init__(self, sources: int, width: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(sources, width)
        self.start = nn.Linear(width, width)
        self.writer = Writer(width)

    def start_state(self, sources: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.start(self.embedding(sources[:, 0])))[None]  # (1, B, width)

    def loss(self, examples: Examples) -> torch.Tensor:
        return self.writer.loss(self.start_state(examples.sources), examples.answers)

    def outputs(self, sources: torch.Tensor, longest: int) -> list[list[int]]:
        return self.writer.greedy(self.start_state(sources), longest)


class EncoderDecoder(nn.Module):
    """N vs M: an encoder reads the input into c = h_n (N vs 1), and `Writer` writes from
    s_0 = c (1 vs N)."""

    def __init__(self, sources: int, width: int) -> None:
        super().__init__()
        self.embedding = nn.Embedding(sources, width)
        self.encoder = nn.GRU(width, width, batch_first=True)
        self.writer = Writer(width)

    def start_state(self, sources: torch.Tensor) -> torch.Tensor:
        _, context = self.encoder(self.embedding(sources))  # (1, B, width): c
        return context

    def loss(self, examples: Examples) -> torch.Tensor:
        return self.writer.loss(self.start_state(examples.sources), examples.answers)

    def outputs(self, sources: torch.Tensor, longest: int) -> list[list[int]]:
        return self.writer.greedy(self.start_state(sources), longest)


MODELS = {"N vs N": PerStep, "N vs 1": LastState, "1 vs N": FromVector, "N vs M": EncoderDecoder}


def built(form: str, task: str, size: Size, seed: int, device: torch.device) -> nn.Module:
    """The model of `form` for `task`, its initial weights drawn from `seed` alone (torch's
    global random state is put back afterwards)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return MODELS[form](source_vocabulary(task, size), size.width).to(device)


def trained(
    form: str, task: str, size: Size, words: list[list[int]], seed: int, device: torch.device
) -> nn.Module:
    """`size.steps` Adam updates on fresh examples drawn from `seed`."""
    model = built(form, task, size, seed, device)
    generator = torch.Generator().manual_seed(seed)
    optimiser = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    for _ in range(size.steps):
        examples = drawn(task, size.batch, size, words, generator)
        examples = Examples(examples.sources.to(device), examples.answers)
        loss = model.loss(examples)
        optimiser.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), CLIP_NORM)
        optimiser.step()
    return model


# ------------------------------------------------------------------ scores


@dataclass(frozen=True)
class Score:
    token: float  # share of the answers' tokens right at their position
    sequence: float  # share of answers written exactly (length included)
    per_position: list[float]  # token accuracy at each answer position (NaN: no answer has it)


def scored(outputs: list[list[int]], answers: list[list[int]]) -> Score:
    """Outputs against answers, token by token and whole."""
    longest = max(len(answer) for answer in answers)
    right, seen = np.zeros(longest), np.zeros(longest)
    for output, answer in zip(outputs, answers, strict=True):
        for position, token in enumerate(answer):
            seen[position] += 1
            right[position] += position < len(output) and output[position] == token
    exact = statistics.fmean(output == answer for output, answer in zip(outputs, answers))
    with np.errstate(invalid="ignore"):
        per_position = (right / seen).tolist()
    return Score(float(right.sum() / max(1, seen.sum())), exact, per_position)


def chance(answers: list[list[int]]) -> Score:
    """The best score of an answer that ignores the input: at each position the token most
    frequent there, and the most frequent whole answer."""
    longest = max(len(answer) for answer in answers)
    by_position = [Counter(a[t] for a in answers if len(a) > t) for t in range(longest)]
    guess = [counts.most_common(1)[0][0] for counts in by_position]
    token_score = scored([guess] * len(answers), answers)
    commonest = Counter(tuple(answer) for answer in answers).most_common(1)[0][1]
    return Score(token_score.token, commonest / len(answers), token_score.per_position)


def evaluated(model: nn.Module, examples: Examples, device: torch.device) -> Score:
    longest = max(len(answer) for answer in examples.answers)
    model.eval()
    with torch.no_grad():
        outputs = model.outputs(examples.sources.to(device), longest)
    return scored(outputs, examples.answers)


def mean_score(scores: list[Score]) -> Score:
    per_position = np.nanmean(np.array([s.per_position for s in scores]), axis=0)
    return Score(statistics.fmean(s.token for s in scores),
                 statistics.fmean(s.sequence for s in scores), per_position.tolist())  # fmt: skip


def measured(context: LabContext, size: Size) -> tuple[dict, dict]:
    """Scores of every form on every task it expresses (mean over the seeds), and each
    task's chance baseline, on the same evaluation examples."""
    device = select_device(context.device)
    words = lexicon(size, context.seed)
    scores: dict[tuple[str, str], Score] = {}
    baselines: dict[str, Score] = {}
    for task in TASKS:
        generator = torch.Generator().manual_seed(context.seed + EVAL_SEED_OFFSET)
        examples = drawn(task, size.eval_examples, size, words, generator)
        baselines[task] = chance(examples.answers)
        for form in (form for form in FORMS if expresses(form, task)):
            runs = [trained(form, task, size, words, seed, device) for seed in
                    context.seeds(size.seeds)]  # fmt: skip
            scores[form, task] = mean_score([evaluated(m, examples, device) for m in runs])
    return scores, baselines


# ------------------------------------------------------------------ the verdict


def unread_positions(length: int) -> range:
    """Reverse's output positions i whose input n-1-i comes after i (not read yet)."""
    return range((length - 1) // 2 + (length % 2 == 0))


def unread_accuracy(score: Score, length: int) -> float:
    return statistics.fmean(score.per_position[i] for i in unread_positions(length))


def read_accuracy(score: Score, length: int) -> float:
    """The mean accuracy at reverse's other positions, whose input has been read."""
    read = range(len(unread_positions(length)), length)
    return statistics.fmean(score.per_position[i] for i in read)


def predictions(scores: dict, baselines: dict, length: int) -> dict[str, bool]:
    """Each prediction of the claim and whether it held."""
    held = {f"{form} fits {task}": scores[form, task].token >= FITS
            for form, task in PREDICTED_FITS}  # fmt: skip
    unread = unread_accuracy(scores["N vs N", "reverse"], length)
    held["N vs N at chance on reverse's unread half"] = (
        unread <= unread_accuracy(baselines["reverse"], length) + NEAR
    )
    return held


# ------------------------------------------------------------------ table and figures


def counted(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("s" if count != 1 else "")


def cell(score: Score | None) -> str:
    return "—" if score is None else f"{score.token:.2f} / {score.sequence:.2f}"


def matrix_rows(scores: dict, baselines: dict) -> list[dict[str, str]]:
    """The form × task matrix: 'token / sequence' accuracy, — where the form cannot express
    the task; the last row the chance baseline."""
    rows = [{"form": form, **{f"{task} ({SHAPES[task]})": cell(scores.get((form, task)))
                              for task in TASKS}} for form in FORMS]  # fmt: skip
    rows.append({"form": "chance", **{f"{task} ({SHAPES[task]})": cell(baselines[task])
                                      for task in TASKS}})  # fmt: skip
    return rows


def draw_matrix(context: LabContext, scores: dict, baselines: dict, size: Size) -> Path:
    """Per-token accuracy of each form on each task, grey where it cannot express it."""
    grid = np.full((len(FORMS), len(TASKS)), np.nan)
    for (form, task), score in scores.items():
        grid[FORMS.index(form), TASKS.index(task)] = score.token
    figure = Figure(figsize=(9, 4.5), layout="constrained")
    axes = figure.subplots()
    axes.set_facecolor("0.85")
    grid = np.ma.masked_invalid(grid)
    image = axes.imshow(grid, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    for row, form in enumerate(FORMS):
        for column, task in enumerate(TASKS):
            score = scores.get((form, task))
            text = (
                "cannot\nexpress" if score is None else f"{score.token:.2f}\n({score.sequence:.2f})"
            )
            dark = score is not None and score.token < 0.6
            axes.text(column, row, text, ha="center", va="center", fontsize=9,
                      color="white" if dark else "black")  # fmt: skip
    labels = [f"{task}\n(shape {SHAPES[task]})\nchance {baselines[task].token:.2f} "
              f"({baselines[task].sequence:.2f})" for task in TASKS]  # fmt: skip
    axes.set_xticks(range(len(TASKS)), labels, fontsize=9)
    axes.set_yticks(range(len(FORMS)), FORMS)
    axes.set_ylabel("form of the GRU")
    axes.set_title(f"Per-token accuracy (exact sequences in brackets), {size.length}-letter "
                   f"inputs, mean of {counted(size.seeds, 'model')}")  # fmt: skip
    figure.colorbar(image, ax=axes, label="per-token accuracy")
    path = context.figure("form_task_matrix")
    figure.savefig(path, dpi=110)
    return path


def draw_reversal(context: LabContext, scores: dict, baselines: dict, size: Size) -> Path:
    """Reverse: accuracy at each output position for N vs N and N vs M, with chance."""
    positions = list(range(size.length))
    figure = Figure(figsize=(6, 4), layout="constrained")
    axes = figure.subplots()
    unread = unread_positions(size.length)
    axes.axvspan(-0.5, unread[-1] + 0.5, color="C3", alpha=0.1,
                 label="needs an input after i (unread by N vs N)")  # fmt: skip
    for form, colour in (("N vs N", "C3"), ("N vs M", "C0")):
        axes.plot(positions, scores[form, "reverse"].per_position, marker="o", color=colour,
                  label=form)  # fmt: skip
    axes.plot(positions, baselines["reverse"].per_position, linestyle=":", color="grey",
              label="chance")  # fmt: skip
    axes.set_xticks(positions)
    axes.set_ylim(0, 1.05)
    axes.set_xlabel(f"output position i (it must be input {size.length - 1} − i)")
    axes.set_ylabel("accuracy at position i")
    axes.set_title(f"Reversing {size.length} letters")
    axes.legend(fontsize="small")
    path = context.figure("reverse_by_position")
    figure.savefig(path, dpi=110)
    return path


# ------------------------------------------------------------------ finding


def summary(scores: dict, baselines: dict, held: dict[str, bool], size: Size) -> str:
    fits = ", ".join(f"{form} {task} {scores[form, task].token:.2f}"
                     for form, task in PREDICTED_FITS)  # fmt: skip
    chances = ", ".join(f"{baselines[task].token:.2f}" for _, task in PREDICTED_FITS)
    reverse, length = scores["N vs N", "reverse"], size.length
    unread, read = unread_accuracy(reverse, length), read_accuracy(reverse, length)
    failed = [name for name, ok in held.items() if not ok]
    outcome = f" Predictions that failed: {'; '.join(failed)}." if failed else ""
    return (
        f"Per-token accuracy of each form on the tasks of its own shape: {fits} (chance "
        f"{chances}; a fit means at least {FITS}). Reversal has the shape of N vs N, yet N vs "
        f"N scores {unread:.2f} at the output positions whose input it has not read yet "
        f"(chance {unread_accuracy(baselines['reverse'], length):.2f}) and {read:.2f} at the "
        f"others, so it writes {reverse.sequence:.2f} of the {length}-letter reversals "
        f"exactly, N vs M (the encoder-decoder) {scores['N vs M', 'reverse'].sequence:.2f}. "
        f"Each cell is the mean of {counted(size.seeds, 'model')} trained for {size.steps} "
        f"updates, scored on {size.eval_examples} fresh examples; the table gives per-token / "
        "exact-sequence accuracy, — where a form cannot express the task's shape, and chance "
        f"is the best answer that ignores the input.{outcome}"
    )


def values_of(scores: dict, baselines: dict, held: dict[str, bool], size: Size) -> dict:
    values: dict[str, Any] = {
        "length": size.length, "steps": size.steps, "seeds": size.seeds, "fits": FITS,
        "token_accuracy": {form: {task: scores[form, task].token if (form, task) in scores
                                  else None for task in TASKS} for form in FORMS},
        "sequence_accuracy": {form: {task: scores[form, task].sequence if (form, task) in scores
                                     else None for task in TASKS} for form in FORMS},
        "chance_token": {task: baselines[task].token for task in TASKS},
        "chance_sequence": {task: baselines[task].sequence for task in TASKS},
        "reverse_by_position": {form: scores[form, "reverse"].per_position
                                for form in ("N vs N", "N vs M")},
        "reverse_chance_by_position": baselines["reverse"].per_position,
        "unread_positions": list(unread_positions(size.length)),
        "predictions": held,
    }  # fmt: skip
    return values


def run(context: LabContext) -> Finding:
    if context.threads > 0:  # tiny recurrent steps: spare threads only wait on each other
        torch.set_num_threads(context.threads)
    size = QUICK if context.quick else DEFAULT
    scores, baselines = measured(context, size)
    held = predictions(scores, baselines, size.length)
    return Finding(
        summary=summary(scores, baselines, held, size),
        table=matrix_rows(scores, baselines),
        figures=[
            draw_matrix(context, scores, baselines, size),
            draw_reversal(context, scores, baselines, size),
        ],
        values=values_of(scores, baselines, held, size),
        agrees=all(held.values()),
    )


EXPERIMENT = Experiment(
    name="rnn_forms",
    order=0,
    title="The four forms of an RNN: N vs N, N vs 1, 1 vs N, N vs M",
    claim=(
        "A recurrent network can map a sequence to a sequence of the same length (N vs N), a "
        "sequence to one output (N vs 1), one input to a sequence (1 vs N), or a sequence to "
        "a sequence of another length (N vs M, the encoder-decoder), and each form fits the "
        "tasks whose input and output have its shape. A task whose output length differs "
        "from its input's, or whose output at step i depends on input after i, needs N vs M: "
        "the encoder reads the whole input into a vector c before the decoder writes. "
        "Translation is such a task, so it needs an encoder and a decoder."
    ),
    run=run,
    default_size=(
        "Trains one-layer width-64 GRUs of each form on five synthetic tasks on sequences "
        "of 7 letters (tag, reverse, majority, spell, consonants), on every task each form can "
        "express (9 form × task cells, 2 seeds, 1500 Adam updates of 64 examples each, on "
        "the CPU), and scores them on 1000 fresh examples."
    ),
)
