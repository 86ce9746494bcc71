"""The JSON the service reads and writes (pydantic models, as FastAPI uses them).

A request is read strictly: `"5"` is not a beam size, `1` is not `true`, and an unknown
key (`"n_best"` for `"nbest"`) is refused, each with a message naming the key. What lies
within the types but beyond the service's limits (and an empty sentence) is checked by
`seq2seq.serve.limits`.

The answers are typed as well: a count is an integer (`"heads": 4`, `"max_chars": 500`),
a score or a time a number. FastAPI writes them into the service's OpenAPI schema
(`seq2seq.serve.app.api_schema`), which the documentation keeps a copy of.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class TranslateRequest(BaseModel):
    """`POST /translate`: sentences and how to search them (omitted: the service's own)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    sentences: list[str] = Field(
        description="the sentences to translate, one string each, none empty or only spaces"
    )
    beam_size: int | None = Field(default=None, description="hypotheses kept per step; 1 = greedy")
    nbest: int | None = Field(default=None, description="hypotheses returned per sentence")
    alignments: bool = Field(default=False, description="Pharaoh word links of each hypothesis")
    attention: bool = Field(
        default=False, description="every layer and head of the best output's attention"
    )


class Hypothesis(BaseModel):
    text: str
    score: float = Field(description="log P(output, EOS | source) under the model")
    links: str | None = Field(default=None, description="Pharaoh links `i-j`, from 0")


class SentenceTranslation(BaseModel):
    source: str
    text: str = Field(description="the best output")
    score: float
    links: str | None = None
    nbest: list[Hypothesis]
    truncated: bool = Field(
        description="the source had more pieces than the model reads: only the first "
        "`pieces_kept` were translated"
    )
    pieces_given: int = Field(description="the source's pieces (words or parts of words)")
    pieces_kept: int = Field(
        description="the pieces the model read: at most the model's `max_source_pieces`"
    )
    warnings: list[str] = Field(
        description="what the sentence's writer should know, one line each: that it was "
        "truncated, that it is hardly in the script of the model's source language (it may "
        "be another language); it is translated all the same"
    )
    attention: list[dict[str, Any]] | None = Field(
        default=None,
        description="the viewer's views of the best output: name, title, note, rows, "
        "columns and per layer every head's matrix and their mean",
    )


class TranslateResponse(BaseModel):
    engine: str
    beam_size: int
    nbest: int
    translations: list[SentenceTranslation]


class ServiceLimits(BaseModel):
    """`seq2seq.serve.limits.Limits` (the `seq2seq-serve` options of the same names) and
    the most source pieces the model reads of a sentence."""

    max_chars: int = Field(description="characters per sentence")
    max_sentences: int = Field(description="sentences per request")
    max_queue: int = Field(description="requests waiting for the worker")
    max_batch: int = Field(description="sentences the worker merges")
    max_wait_ms: float = Field(description="milliseconds the worker waits to fill a batch")
    max_beam: int = Field(description="largest beam_size a request may ask")
    timeout_s: float = Field(description="seconds a request's translation may take")
    read_timeout_s: float = Field(description="seconds a client has to send headers or body")
    max_source_pieces: int = Field(
        description="the model's limit: it reads the first this many pieces of a sentence"
    )


class Health(BaseModel):
    status: str
    engine: str
    queued: int = Field(description="requests waiting for the worker")
    sentences_translated: int = Field(description="sentences the model translated so far")
    sentences_dropped: int = Field(
        description="sentences not translated: their client hung up or their time ran out"
    )
    peak_rss_mib: float | None = Field(description="the server process's peak resident memory")
    limits: ServiceLimits


class CheckpointArchitecture(BaseModel):
    """A checkpoint's components, as the page's title names them; null where they do not
    apply (`attention` is `none` for a model without attention, and then the rest is null)."""

    encoder: str
    decoder: str
    attention: str | None = None
    score: str | None = None
    region: str | None = None
    heads: int | None = Field(default=None, description="heads of the cross-attention")
    alignment: str | None = Field(default=None, description="`guided`: trained to align")
    summary: str | None = Field(
        default=None, description="what starts the decoder (`model.summary`) when not `auto`"
    )
    context: str | None = Field(
        default=None, description="`attention=none`'s fixed context when not the mean"
    )


class ExportArchitecture(BaseModel):
    """A `seq2seq-export` folder: where it comes from."""

    family: str
    export: str
    quantization: str
    checkpoint: str


class AttentionShape(BaseModel):
    """The cross-attention's layers and heads per layer."""

    layers: int
    heads: int


class AlignmentHead(BaseModel):
    """The attention the word links are read from, its layer and head counted from 0."""

    layer: int = Field(description="from 0; negative from the end (-1: the last layer)")
    head: int | None = Field(description="from 0; null: the mean of the layer's heads")
    source: str = Field(
        description="layer (the separate alignment layer of alignment=layer; layer 0 is "
        "its own), guided (trained to align), chosen (on the valid gold), default (the "
        "last layer's head mean) or export (the head a CTranslate2 export recorded)"
    )
    description: str


class ModelInfo(BaseModel):
    name: str
    engine: str
    src_lang: str
    tgt_lang: str
    architecture: CheckpointArchitecture | ExportArchitecture
    parameters: int | None
    quantization: str = Field(description="float32, int8 (the weights decoded with)")
    max_source_pieces: int = Field(
        description="the model reads the first this many pieces of a sentence"
    )
    attention: AttentionShape | None = Field(description="null: the model has no attention")
    alignment: AlignmentHead | None = Field(description="null: no head to read links from")


class Models(BaseModel):
    models: list[ModelInfo]


class Problem(BaseModel):
    """Every error: one line saying what is wrong."""

    error: str
