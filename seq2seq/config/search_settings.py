"""How a search runs: beam, length penalty, output length, batch, n-best, one definition.

The Hydra schema of `trainer.test_search` and the options of `seq2seq-translate`,
`seq2seq-evaluate` and the service are made from `SearchSettings`' fields; the search
itself (`seq2seq.search`) reads them. They live with the config because the config's schema
holds them, and the search sits above the config.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

# The largest counts a search accepts: far above any useful beam or batch, low enough that
# one step's scores (beam × vocabulary per sentence) cannot exhaust the memory at once.
MAX_BEAM = 1024
MAX_BATCH = 65536
# The output length limit a·(source length) + b: an RNN decoder has no position table to cap
# it, so a model that never says EOS would run (and keep every step's tokens) for b steps;
# and a past 2^63 / length turns into a negative length when cast to an integer.
MAX_LEN_A = 1000.0
MAX_LEN_B = 100_000


class SearchSettingsError(ValueError):
    """A search setting out of range; `field` names it, `problem` says what is wrong."""

    def __init__(self, field: str, problem: str):
        super().__init__(f"{field} {problem}")
        self.field, self.problem = field, problem


@dataclass
class SearchSettings:
    """How to search: the one definition of the search settings.

    The Hydra schema of `trainer.test_search` and the options of `seq2seq-translate` and
    `seq2seq-evaluate` (`--beam-size` for `beam_size`, ...) are made from these fields, their
    defaults and their `help`. The output length is limited to
    `max_len_a * source length + max_len_b` tokens.

    Invalid values raise SearchSettingsError at construction, so that a command-line option
    or `trainer.test_search` fails before any work is done."""

    beam_size: int = field(default=5, metadata={"help": "hypotheses kept per step; 1 = greedy"})
    length_penalty: float = field(
        default=1.0, metadata={"help": "GNMT length penalty alpha; 0 = raw log-probability"}
    )
    max_len_a: float = field(
        default=1.5, metadata={"help": "a of the output length limit a·(source length) + b"}
    )
    max_len_b: int = field(
        default=10, metadata={"help": "b of the output length limit a·(source length) + b"}
    )
    batch_size: int = field(default=128, metadata={"help": "sentences per decoding batch"})
    n_best: int = field(
        default=1, metadata={"help": "hypotheses returned per sentence (at most beam_size)"}
    )

    def __post_init__(self) -> None:
        for name, most in (("beam_size", MAX_BEAM), ("batch_size", MAX_BATCH), ("n_best", None)):
            _check_count(name, getattr(self, name), most)
        if self.n_best > self.beam_size:
            raise SearchSettingsError(
                "n_best", f"must not exceed beam_size ({self.beam_size}), got {self.n_best}"
            )
        _check_finite("length_penalty", self.length_penalty, minimum=None)
        _check_finite("max_len_a", self.max_len_a, minimum=0.0)
        if self.max_len_a > MAX_LEN_A:
            raise SearchSettingsError(
                "max_len_a", f"must be at most {MAX_LEN_A:g}, got {self.max_len_a!r}"
            )
        if (
            isinstance(self.max_len_b, bool)
            or not isinstance(self.max_len_b, int)
            or not 0 <= self.max_len_b <= MAX_LEN_B
        ):
            raise SearchSettingsError(
                "max_len_b", f"must be an integer from 0 to {MAX_LEN_B:,}, got {self.max_len_b!r}"
            )


def _check_count(name: str, value: object, most: int | None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SearchSettingsError(name, f"must be an integer of at least 1, got {value!r}")
    if most is not None and value > most:
        raise SearchSettingsError(name, f"must be at most {most:,}, got {value!r}")


def _check_finite(name: str, value: object, minimum: float | None) -> None:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or (minimum is not None and value < minimum):
        bound = "" if minimum is None else f" >= {minimum:g}"
        raise SearchSettingsError(name, f"must be a finite number{bound}, got {value!r}")
