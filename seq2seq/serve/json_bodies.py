"""The JSON the service reads and writes (pydantic models, as FastAPI uses them).

A request is read strictly: `"5"` is not a beam size, `1` is not `true`, and an unknown
key (`"n_best"` for `"nbest"`) is refused, each with a message naming the key. What lies
within the types but beyond the service's limits is checked by `seq2seq.serve.limits`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class TranslateRequest(BaseModel):
    """`POST /translate`: sentences and how to search them (omitted: the service's own)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    sentences: list[str] = Field(description="the sentences to translate, one string each")
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


class Health(BaseModel):
    status: str
    engine: str
    queued: int = Field(description="requests waiting for the worker")
    sentences_translated: int = Field(description="sentences the model translated so far")
    sentences_dropped: int = Field(
        description="sentences not translated: their client hung up or their time ran out"
    )
    peak_rss_mib: float | None = Field(description="the server process's peak resident memory")
    limits: dict[str, float]


class ModelInfo(BaseModel):
    name: str
    engine: str
    src_lang: str
    tgt_lang: str
    architecture: dict[str, str]
    parameters: int | None
    quantization: str = Field(description="float32, int8 (the weights decoded with)")
    max_source_pieces: int
    attention: dict[str, int] | None = Field(description="layers and heads of cross-attention")
    alignment: dict[str, Any] | None = Field(description="the head links are read from")


class Models(BaseModel):
    models: list[ModelInfo]


class Problem(BaseModel):
    """Every error: one line saying what is wrong."""

    error: str
