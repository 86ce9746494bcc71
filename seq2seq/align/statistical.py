"""A statistical word aligner as a baseline for attention's AER: eflomal, not neural.

eflomal (Östling & Tiedemann 2016, "Efficient word alignment with Markov Chain Monte Carlo",
PBML 106) is a Bayesian IBM-style aligner (IBM 1, then HMM, then HMM with fertility, by
collapsed Gibbs sampling). It learns from the sentence pairs alone, with no labels, so the
pairs to be scored are aligned in the same pass as the training pairs: the gold pairs, as
the corpus writes them, are appended to the training split, as is usual for unsupervised
aligners (they are never in the training split themselves: they come from valid and test).

The aligner reads each sentence as the attention models' alignments see it
(`seq2seq.align.words`): unsegmented Chinese or Japanese as one word per Han or kana
character, any other text by its whitespace tokens (English `city.` is one token; the
option `split_punctuation` cuts the marks off instead). eflomal lowercases every token
before it counts them. Its links are then carried onto the gold words the way
`seq2seq-align` carries subword pieces (`seq2seq.align.words.piece_words`): each token is
matched to the gold side by its characters, and a token that spans two gold words belongs to
the first; a token link (i, j) becomes the word link (word of i, word of j), duplicates
merged. So the figures stand next to the AER of each attention mechanism.

eflomal aligns in both directions; both files list links source-target (`i-j`):

* `forward`: each target word is linked to at most one source word (the shape of the
  attention's argmax links);
* `reverse`: each source word is linked to at most one target word;

and the two are combined (`symmetrise`, Koehn et al. 2003; Och & Ney 2003):

* `intersection`, `union`: of the two directions;
* `grow-diag`: start from the intersection; while anything changes, go through the links
  (i, j) in order of i then j (a link added on the way is visited when its turn comes) and
  look at their neighbours (i+Δi, j+Δj) in the order (Δi, Δj) = (0,-1), (-1,0), (0,1),
  (1,0), (-1,-1), (-1,1), (1,-1), (1,1): add a neighbour that is in the union when its
  source or its target word is not aligned yet;
* `grow-diag-final`: then, for each link of `forward` and then of `reverse` in order, add it
  when its source or its target word is not aligned yet;
* `grow-diag-final-and`: the same, but add it only when neither word is aligned yet.

eflomal is an optional dependency (`pip install eflomal`, the `align` extra); it is
imported only when an alignment is run. It samples with a clock-seeded random generator, so
two runs differ a little: report several.
"""

from __future__ import annotations

import re
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from seq2seq.align.gold import GoldPair, as_in_corpus, gold_set
from seq2seq.align.pharaoh import Link, Links, read_links
from seq2seq.align.words import piece_words, words
from seq2seq.metrics.aer import AlignmentCounts, corpus_counts

SYMMETRISATIONS = (
    "forward",
    "reverse",
    "intersection",
    "union",
    "grow-diag",
    "grow-diag-final",
    "grow-diag-final-and",
)
MODELS = {1: "IBM model 1", 2: "HMM", 3: "HMM with fertility"}  # eflomal's --model
MISSING = "eflomal is not installed (pip install eflomal, or the project's align extra)"
PUNCTUATION_SPLIT = re.compile(r"\w+(?:['’]\w+)*|\S")  # a word with inner apostrophes, or a mark
NEIGHBOURS = ((0, -1), (-1, 0), (0, 1), (1, 0), (-1, -1), (-1, 1), (1, -1), (1, 1))


class BaselineError(ValueError):
    """A problem running the statistical aligner: eflomal missing, inputs that disagree."""


# --- the aligner's input --------------------------------------------------------------


def tokens(text: str, split_punctuation: bool = False) -> list[str]:
    """The tokens the aligner reads: the words of `seq2seq.align.words` (a character per
    Han or kana character in unsegmented text, whitespace tokens otherwise); with
    `split_punctuation` each punctuation mark is cut off as a token of its own (`city.` →
    `city` `.`; `don't` and `Tom's` stay whole)."""
    found = words(text)
    if not split_punctuation:
        return found
    return [part for word in found for part in PUNCTUATION_SPLIT.findall(word)]


@dataclass(frozen=True)
class GoldTokens:
    """A gold pair as the aligner reads it (tokens of the corpus form of each side) and,
    for each token, the gold word it belongs to."""

    pair: GoldPair
    source: list[str]
    target: list[str]
    source_owners: list[int | None]
    target_owners: list[int | None]


def gold_tokens(
    pair: GoldPair, src_lang: str, tgt_lang: str, split_punctuation: bool = False
) -> GoldTokens:
    """Each side of a gold pair as the corpus writes it (Chinese without the gold's
    spaces), cut into the aligner's tokens (`tokens`), each matched to its gold word."""
    source = tokens(as_in_corpus(pair.source, src_lang), split_punctuation)
    target = tokens(as_in_corpus(pair.target, tgt_lang), split_punctuation)
    return GoldTokens(
        pair, source, target, word_owners(pair.source, source), word_owners(pair.target, target)
    )


def word_owners(words_text: str, text_tokens: Sequence[str]) -> list[int | None]:
    """For each token, the index of the word of `words_text` (the same characters, perhaps
    with other word boundaries) it belongs to; matched by characters as subword pieces are
    (`seq2seq.align.words.piece_words`): a token that spans two words belongs to the first."""
    return piece_words(words_text, text_tokens)


def to_gold_words(
    links: Iterable[Link], source_owners: Sequence[int | None], target_owners: Sequence[int | None]
) -> Links:
    """Token links (i, j) → word links (word of i, word of j), duplicates merged; a link
    of a token that belongs to no word is dropped."""
    mapped = set()
    for source, target in links:
        source_word, target_word = source_owners[source], target_owners[target]
        if source_word is not None and target_word is not None:
            mapped.add((source_word, target_word))
    return Links.of(mapped)


# --- running eflomal ------------------------------------------------------------------


@dataclass(frozen=True)
class EflomalSettings:
    """eflomal's options: `model` 1 (IBM 1), 2 (+HMM) or 3 (+fertility, its default);
    `samplers` independent Gibbs samplers whose marginals are averaged; `rel_iterations`
    scales its default numbers of iterations; `null_prior` the prior of a NULL link."""

    model: int = 3
    samplers: int = 3
    rel_iterations: float = 1.0
    null_prior: float = 0.2

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            choices = ", ".join(f"{number} ({name})" for number, name in MODELS.items())
            raise ValueError(f"model must be one of {choices}, got {self.model!r}")
        if not (isinstance(self.samplers, int) and self.samplers >= 1):
            raise ValueError(f"samplers must be an integer >= 1, got {self.samplers!r}")
        if not self.rel_iterations > 0:
            raise ValueError(f"rel_iterations must be > 0, got {self.rel_iterations!r}")
        if not 0 <= self.null_prior < 1:
            raise ValueError(f"null_prior must be in [0, 1), got {self.null_prior!r}")


@dataclass(frozen=True)
class Directional:
    """eflomal's links of each pair in both directions, source-target `(i, j)`, in tokens."""

    forward: list[frozenset[Link]]
    reverse: list[frozenset[Link]]

    def __len__(self) -> int:
        return len(self.forward)

    def slice(self, start: int, stop: int) -> Directional:
        return Directional(self.forward[start:stop], self.reverse[start:stop])


def eflomal_version() -> str | None:
    """The installed eflomal's version; None when it is not installed."""
    try:
        return metadata.version("eflomal")
    except metadata.PackageNotFoundError:
        return None


def run_eflomal(
    sources: Sequence[Sequence[str]],
    targets: Sequence[Sequence[str]],
    settings: EflomalSettings = EflomalSettings(),
) -> Directional:
    """Align each (source tokens, target tokens) pair with eflomal, both directions.

    BaselineError when eflomal is missing or the sides have different numbers of
    sentences. A pair with an empty side gets no links.
    """
    if len(sources) != len(targets):
        raise BaselineError(f"{len(sources)} source sentences but {len(targets)} target ones")
    try:
        import eflomal
    except ImportError as error:
        raise BaselineError(MISSING) from error
    aligner = eflomal.Aligner(
        model=settings.model,
        n_samplers=settings.samplers,
        rel_iterations=settings.rel_iterations,
        null_prior=settings.null_prior,
    )
    with tempfile.TemporaryDirectory(prefix="seq2seq-eflomal-") as folder:
        forward, reverse = Path(folder) / "forward.align", Path(folder) / "reverse.align"
        aligner.align(
            [_line(sentence) for sentence in sources],
            [_line(sentence) for sentence in targets],
            links_filename_fwd=str(forward),
            links_filename_rev=str(reverse),
            quiet=True,
        )
        found = Directional(_links(forward, len(sources)), _links(reverse, len(sources)))
    for number, (source, target, *directions) in enumerate(
        zip(sources, targets, found.forward, found.reverse), 1
    ):
        for links in directions:
            if any(i >= len(source) or j >= len(target) for i, j in links):
                raise BaselineError(f"eflomal linked beyond pair {number}: {sorted(links)}")
    return found


def _line(sentence: Sequence[str]) -> str:
    if any(not token or any(ch.isspace() for ch in token) for token in sentence):
        raise BaselineError(f"a token is empty or holds whitespace: {list(sentence)!r}")
    return " ".join(sentence) + "\n"


def _links(path: Path, count: int) -> list[frozenset[Link]]:
    found = [links.sure for links in read_links(path)]
    if len(found) != count:
        raise BaselineError(f"eflomal wrote {len(found)} lines for {count} sentence pairs")
    return found


# --- symmetrisation -------------------------------------------------------------------


def symmetrise(forward: Iterable[Link], reverse: Iterable[Link], method: str) -> frozenset[Link]:
    """The links of one pair combined from its two directions (module docstring)."""
    forward, reverse = frozenset(forward), frozenset(reverse)
    if method == "forward":
        return forward
    if method == "reverse":
        return reverse
    if method == "intersection":
        return forward & reverse
    if method == "union":
        return forward | reverse
    if method not in SYMMETRISATIONS:
        raise ValueError(f"method must be one of {', '.join(SYMMETRISATIONS)}, got {method!r}")
    alignment = grow_diag(forward & reverse, forward | reverse)
    if method == "grow-diag":
        return frozenset(alignment)
    both_free = method == "grow-diag-final-and"
    for direction in (forward, reverse):
        final(alignment, direction, both_free)
    return frozenset(alignment)


def grow_diag(start: Iterable[Link], union: Iterable[Link]) -> set[Link]:
    """`start` grown by the neighbouring links of `union` whose source or target word is
    still unaligned, until nothing more can be added (module docstring)."""
    alignment, union = set(start), frozenset(union)
    rows = 1 + max((i for i, _ in union | alignment), default=-1)
    columns = 1 + max((j for _, j in union | alignment), default=-1)
    added = True
    while added:
        added = False
        for i in range(rows):
            for j in range(columns):
                if (i, j) not in alignment:
                    continue
                for di, dj in NEIGHBOURS:
                    point = (i + di, j + dj)
                    if point in union and point not in alignment and _free(alignment, point, False):
                        alignment.add(point)
                        added = True
    return alignment


def final(alignment: set[Link], direction: Iterable[Link], both_free: bool) -> None:
    """Add, in order, each link of `direction` whose source or target word (`both_free`:
    both words) is not aligned yet."""
    for point in sorted(direction):
        if point not in alignment and _free(alignment, point, both_free):
            alignment.add(point)


def _free(alignment: set[Link], point: Link, both: bool) -> bool:
    """Whether the source or the target word of `point` (`both`: each) is unaligned."""
    source_free = all(i != point[0] for i, _ in alignment)
    target_free = all(j != point[1] for _, j in alignment)
    return source_free and target_free if both else source_free or target_free


# --- the baseline on a gold set -------------------------------------------------------


@dataclass
class BaselineResult:
    """The baseline's word links and scores per gold part and symmetrisation."""

    links: dict[str, dict[str, list[Links]]] = field(default_factory=dict)
    counts: dict[str, dict[str, AlignmentCounts]] = field(default_factory=dict)
    train_pairs: int = 0
    gold_pairs: int = 0
    seconds: float = 0.0  # eflomal's run, both directions


def gold_parts(src_lang: str, tgt_lang: str, parts: Sequence[str]) -> dict[str, list[GoldPair]]:
    """The gold pairs of each part for src_lang→tgt_lang; BaselineError without a gold set."""
    found = {}
    for part in parts:
        pairs = gold_set(src_lang, tgt_lang, part)
        if pairs is None:
            raise BaselineError(f"there is no hand-aligned gold set for {src_lang}→{tgt_lang}")
        found[part] = pairs
    return found


def evaluate_baseline(
    train_sources: Sequence[str],
    train_targets: Sequence[str],
    gold: Mapping[str, Sequence[GoldPair]],
    src_lang: str,
    tgt_lang: str,
    methods: Sequence[str] = ("grow-diag-final-and",),
    settings: EflomalSettings = EflomalSettings(),
    split_punctuation: bool = False,
) -> BaselineResult:
    """Align the training pairs with every part's gold pairs appended (corpus form) in one
    eflomal run, symmetrise with each method, carry the links onto the gold words and score
    them (AER, precision, recall; `seq2seq.metrics.aer`). `split_punctuation`: see `tokens`."""
    if len(train_sources) != len(train_targets):
        raise BaselineError(
            f"{len(train_sources)} training sources but {len(train_targets)} targets"
        )
    for method in methods:
        if method not in SYMMETRISATIONS:
            raise BaselineError(
                f"unknown symmetrisation {method!r}: one of {', '.join(SYMMETRISATIONS)}"
            )
    tokenised = {
        part: [gold_tokens(pair, src_lang, tgt_lang, split_punctuation) for pair in pairs]
        for part, pairs in gold.items()
    }
    sources = [tokens(line, split_punctuation) for line in train_sources]
    targets = [tokens(line, split_punctuation) for line in train_targets]
    spans = {}
    for part, pairs in tokenised.items():
        spans[part] = (len(sources), len(sources) + len(pairs))
        sources += [pair.source for pair in pairs]
        targets += [pair.target for pair in pairs]
    started = time.perf_counter()
    directional = run_eflomal(sources, targets, settings)
    result = BaselineResult(
        train_pairs=len(train_sources),
        gold_pairs=sum(len(pairs) for pairs in tokenised.values()),
        seconds=time.perf_counter() - started,
    )
    for part, pairs in tokenised.items():
        mine = directional.slice(*spans[part])
        result.links[part], result.counts[part] = {}, {}
        for method in methods:
            links = [
                to_gold_words(
                    symmetrise(forward, reverse, method), pair.source_owners, pair.target_owners
                )
                for pair, forward, reverse in zip(pairs, mine.forward, mine.reverse)
            ]
            result.links[part][method] = links
            result.counts[part][method] = corpus_counts(links, [p.pair.links for p in pairs])
    return result
