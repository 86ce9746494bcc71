"""The service's documented schema: docs/guides/serving-openapi.json is the OpenAPI schema the
app writes now (so it cannot go stale), and every answer of `/health`, `/models` and
`/translate` has the types that schema gives its route.

The answers are checked by `violations`, a small reader of the JSON Schema the document
holds (type, properties, required, items, anyOf, $ref), on the JSON as the service prints
it. It is stricter than JSON Schema in two ways, on purpose: an integer must be printed
as one (`500`, not `500.0`), and an object whose schema lists its properties may hold no
others (every field the service sends is documented)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from serve_fixtures import toy_checkpoint

pytest.importorskip("fastapi", reason="fastapi is not installed (pip install '.[serve]')")
pytest.importorskip("httpx", reason="httpx (FastAPI's TestClient) is not installed (the dev extra)")
with warnings.catch_warnings():  # Starlette asks for `httpx2`; `httpx` works the same
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi import testclient

from seq2seq.search.translator import Translator  # noqa: E402
from seq2seq.serve.app import api_schema, api_schema_text, create_app  # noqa: E402
from seq2seq.serve.backends import TorchEngine  # noqa: E402
from seq2seq.serve.limits import Limits  # noqa: E402

SCHEMA_COPY = Path(__file__).resolve().parent.parent / "docs" / "guides" / "serving-openapi.json"
TYPES = {
    "string": lambda value: isinstance(value, str),
    "integer": lambda value: isinstance(value, int) and not isinstance(value, bool),
    "number": lambda value: isinstance(value, (int, float)) and not isinstance(value, bool),
    "boolean": lambda value: isinstance(value, bool),
    "null": lambda value: value is None,
    "object": lambda value: isinstance(value, dict),
    "array": lambda value: isinstance(value, list),
}
LONG_LINE = " ".join("abcdefghij"[i % 10] for i in range(130))  # over the toy's 100 pieces


def violations(value: Any, schema: dict, document: dict, place: str = "$") -> list[str]:
    """Where `value` breaks `schema` (module docstring), one line each; [] when it fits."""
    if "$ref" in schema:
        return violations(value, resolve(document, schema["$ref"]), document, place)
    if "anyOf" in schema:
        if any(not violations(value, choice, document, place) for choice in schema["anyOf"]):
            return []
        return [f"{place}: {value!r} fits none of its {len(schema['anyOf'])} choices"]
    kind = schema.get("type")
    if kind is not None and not TYPES[kind](value):
        return [f"{place}: {value!r} is not of type {kind}"]
    if kind == "object":
        return object_violations(value, schema, document, place)
    if kind == "array":
        return [problem for index, item in enumerate(value)
                for problem in violations(item, schema.get("items", {}), document, f"{place}[{index}]")]  # fmt: skip
    return []


def object_violations(value: dict, schema: dict, document: dict, place: str) -> list[str]:
    properties = schema.get("properties", {})
    problems = [
        f"{place}.{name}: missing" for name in schema.get("required", []) if name not in value
    ]
    for name, item in value.items():
        if name in properties:
            problems += violations(item, properties[name], document, f"{place}.{name}")
        elif isinstance(schema.get("additionalProperties"), dict):
            problems += violations(
                item, schema["additionalProperties"], document, f"{place}.{name}"
            )
        elif properties and "additionalProperties" not in schema:
            problems.append(f"{place}.{name}: not in the schema")
    return problems


def resolve(document: dict, reference: str) -> dict:
    """`#/components/schemas/Health` in `document`."""
    assert reference.startswith("#/"), reference
    node = document
    for part in reference[2:].split("/"):
        node = node[part]
    return node


def answer_schema(document: dict, path: str, method: str = "get") -> dict:
    return document["paths"][path][method]["responses"]["200"]["content"]["application/json"]["schema"]  # fmt: skip


@pytest.fixture(scope="module")
def document() -> dict:
    return json.loads(SCHEMA_COPY.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    return toy_checkpoint(tmp_path_factory.mktemp("serve_schema"))


@pytest.fixture(scope="module")
def engine(checkpoint) -> TorchEngine:
    return TorchEngine(Translator.load(checkpoint), checkpoint)


def answers(engine) -> dict[str, Any]:
    """The service's answers, by route: a short line and one over the model's limit,
    with every optional part asked for."""
    app = create_app(engine, Limits())
    with testclient.TestClient(app, base_url="http://127.0.0.1") as client:
        body = {"sentences": ["a b c", LONG_LINE], "beam_size": 2, "nbest": 2,
                "alignments": True, "attention": True}  # fmt: skip
        translated = client.post("/translate", json=body)
        assert translated.status_code == 200, translated.text
        return {"/health": client.get("/health").json(), "/models": client.get("/models").json(),
                "/translate": translated.json()}  # fmt: skip


def test_the_documented_schema_is_the_one_the_app_writes(engine):
    committed = SCHEMA_COPY.read_text(encoding="utf-8")
    assert committed == api_schema_text(), (
        "docs/guides/serving-openapi.json is stale: python -m seq2seq.serve.app > "
        "docs/guides/serving-openapi.json"
    )
    app = create_app(engine, Limits())
    with testclient.TestClient(app, base_url="http://127.0.0.1") as client:
        assert client.get("/openapi.json").json() == api_schema() == json.loads(committed)


def test_every_answer_has_the_documented_types(engine, document):
    got = answers(engine)
    for path, method in (("/health", "get"), ("/models", "get"), ("/translate", "post")):
        assert violations(got[path], answer_schema(document, path, method), document) == [], path
    sentence = got["/translate"]["translations"][1]
    assert sentence["truncated"] and sentence["warnings"]  # the optional parts were answered
    assert "links" in sentence and "attention" in sentence


def test_the_check_finds_a_count_printed_as_text_or_as_a_decimal(engine, document):
    """What the service printed before: `"heads": "4"`, `"max_chars": 500.0`, and a
    `truncated` it did not document: each is found."""
    got = answers(engine)
    models, health = got["/models"], got["/health"]
    models["models"][0]["architecture"]["heads"] = "4"
    health["limits"]["max_chars"] = 500.0
    got["/translate"]["translations"][0]["truncation"] = False
    (problem,) = violations(models, answer_schema(document, "/models"), document)
    assert problem.startswith("$.models[0].architecture: {") and "fits none of its 2" in problem
    assert violations(health, answer_schema(document, "/health"), document) == [
        "$.limits.max_chars: 500.0 is not of type integer"
    ]
    assert violations(got["/translate"], answer_schema(document, "/translate", "post"), document) == [
        "$.translations[0].truncation: not in the schema"
    ]  # fmt: skip


def test_a_ctranslate2_export_answers_the_documented_types(checkpoint, tmp_path, document):
    pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed (the export extra)")
    from seq2seq.cli.export import alignment_head
    from seq2seq.export import export_ctranslate2
    from seq2seq.export.ctranslate2_translator import CTranslate2Translator
    from seq2seq.serve.backends import CTranslate2Engine

    folder = export_ctranslate2(checkpoint, tmp_path / "ct2", choose_alignment=alignment_head)
    engine = CTranslate2Engine(CTranslate2Translator.load(folder, threads=1), folder)
    got = answers(engine)
    for path, method in (("/health", "get"), ("/models", "get"), ("/translate", "post")):
        assert violations(got[path], answer_schema(document, path, method), document) == [], path
    assert got["/models"]["models"][0]["architecture"]["export"] == "ctranslate2"
    short, long = got["/translate"]["translations"]
    assert (short["truncated"], short["pieces_given"], short["pieces_kept"]) == (False, 3, 3)
    assert (long["truncated"], long["pieces_given"], long["pieces_kept"]) == (True, 130, 100)


def test_the_architecture_names_a_one_vector_model_s_summary_and_context():
    """`attention=none` started from the attention pooling of the encoder states: `/models`
    says so (the names `describe_run` gives titles), and says nothing for the defaults."""
    from seq2seq.serve.backends import checkpoint_architecture
    from seq2seq.serve.json_bodies import CheckpointArchitecture

    parts = {"encoder": {"_target_": "seq2seq.models.encoders.RNNEncoder", "cell": "gru"},
             "decoder": {"_target_": "seq2seq.models.decoders.RNNDecoder", "cell": "gru"}}  # fmt: skip
    none = {"_target_": "seq2seq.models.attention.NoAttention"}
    pooled = {**parts, "model": {"summary": "attention_pool"},
              "attention": {**none, "context": "attention_pool"}}  # fmt: skip
    shown = CheckpointArchitecture(**checkpoint_architecture(pooled))
    pooling = "attention_pool"
    assert (shown.attention, shown.summary, shown.context) == ("none", pooling, pooling)
    plain = CheckpointArchitecture(**checkpoint_architecture({**parts, "attention": none}))
    assert (plain.summary, plain.context) == (None, None)
