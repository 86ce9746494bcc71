"""What the service accepts: per request, per queue and per batch, checked at start-up.

A request over a limit, or with an empty sentence (`""`, or only spaces), is answered 422
with the limit in words (`request_problem`); a full queue is answered 503. The defaults fit a small model on a laptop: a client sends up to 32
sentences of up to 500 characters, 64 requests wait at most, and the worker merges up to 64
sentences, waiting up to 5 ms for more after the first. A request's translation may take 60 s
(`timeout_s`: then it is answered 504 and its work dropped), and a client has 10 s to send a
request's headers and again 10 s for its body (`read_timeout_s`). Each limit also has an
upper bound (`MOST`, and at most `MAX_REQUEST_CHARS` characters per request): a limit is a
promise about memory, so `--max-batch 10**18` is refused at start-up, not trusted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields

from seq2seq.config.search_settings import MAX_BATCH, MAX_BEAM

# The most each count may be: a limit is a promise about memory (a request's body is read
# whole, up to `max_body_bytes`; the queue and a batch hold their sentences), so a value
# beyond these is refused at start-up rather than trusted.
MOST = {
    "max_chars": 100_000,
    "max_sentences": 10_000,
    "max_queue": 100_000,
    "max_batch": MAX_BATCH,
    "max_beam": MAX_BEAM,
}
MAX_REQUEST_CHARS = 10_000_000  # max_sentences × max_chars: a body of at most ~120 MB


class LimitsError(ValueError):
    """A limit out of range; `name` is the field, the message says what is wrong."""

    def __init__(self, name: str, problem: str):
        super().__init__(f"{name} {problem}")
        self.name, self.problem = name, problem


@dataclass(frozen=True)
class Limits:
    """The service's limits; LimitsError at construction for a value out of range."""

    max_chars: int = field(
        default=500,
        metadata={"help": "characters per sentence (the model reads the first data.max_len "
                  "pieces of it, and says when it cuts one)"},
    )  # fmt: skip
    max_sentences: int = field(default=32, metadata={"help": "sentences per request"})
    max_queue: int = field(default=64, metadata={"help": "requests waiting for the worker"})
    max_batch: int = field(default=64, metadata={"help": "sentences the worker merges"})
    max_wait_ms: float = field(
        default=5.0, metadata={"help": "milliseconds the worker waits to fill a batch"}
    )
    max_beam: int = field(default=16, metadata={"help": "largest beam_size a request may ask"})
    timeout_s: float = field(
        default=60.0,
        metadata={"help": "seconds a request's translation may take, queued and running; "
                  "then it is answered 504 and its work is dropped"},
    )  # fmt: skip
    read_timeout_s: float = field(
        default=10.0,
        metadata={"help": "seconds a client has to send a request's headers, and again its "
                  "body; then the connection is closed (408 for a late body)"},
    )  # fmt: skip

    def __post_init__(self) -> None:
        for name, most in MOST.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
                raise LimitsError(name, f"must be an integer from 1 to {most:,}, got {value!r}")
        if self.max_sentences * self.max_chars > MAX_REQUEST_CHARS:
            raise LimitsError(
                "max_sentences",
                f"× --max-chars is {self.max_sentences * self.max_chars:,} characters per "
                f"request; at most {MAX_REQUEST_CHARS:,}",
            )
        _check_seconds("max_wait_ms", self.max_wait_ms, minimum=0.0, maximum=1000.0)
        _check_seconds("timeout_s", self.timeout_s, minimum=0.001, maximum=3600.0)
        _check_seconds("read_timeout_s", self.read_timeout_s, minimum=0.01, maximum=600.0)

    @property
    def max_body_bytes(self) -> int:
        """The largest request body worth reading: every sentence at its longest, each
        character JSON-escaped as a surrogate pair (12 bytes), plus room for the options."""
        return self.max_sentences * (self.max_chars * 12 + 8) + 4096


def _check_seconds(name: str, value: object, minimum: float, maximum: float) -> None:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not minimum <= value <= maximum:
        raise LimitsError(name, f"must be a number from {minimum:g} to {maximum:g}, got {value!r}")


def limit_names() -> list[str]:
    """The fields of `Limits`, in order (the command line makes one option of each)."""
    return [limit.name for limit in fields(Limits)]


def request_problem(sentences: Sequence[str], beam_size: int, limits: Limits) -> str | None:
    """What puts a request over the limits (or gives an empty sentence), in one line naming
    the sentence's index; None when it is within them."""
    if not sentences:
        return "sentences: give at least one sentence"
    if len(sentences) > limits.max_sentences:
        return f"sentences: {len(sentences)} sentences; at most {limits.max_sentences} per request"
    for index, sentence in enumerate(sentences):
        if not sentence.strip():
            return f"sentences[{index}]: an empty sentence; give text to translate"
        if len(sentence) > limits.max_chars:
            return (
                f"sentences[{index}]: {len(sentence)} characters; "
                f"at most {limits.max_chars} per sentence"
            )
    if beam_size > limits.max_beam:
        return f"beam_size: {beam_size}; at most {limits.max_beam}"
    return None
