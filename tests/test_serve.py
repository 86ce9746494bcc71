"""`seq2seq-serve`'s application (`seq2seq.serve.app`) through FastAPI's TestClient, no
sockets: its answers are the library's own (translations, `seq2seq-translate --alignments`
links, the viewer's attention), concurrent requests are merged into one batch, every bad
request is a 4xx with a message, a full queue a 503, a model error a 500 for that request
alone, and the page at `/` is the viewer, self-contained. A toy Transformer (1 encoder
layer of 4 heads, 2 decoder layers of 4 heads) is trained for two updates once per module.
"""

from __future__ import annotations

import json
import re
import threading
import time
import warnings
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import get_type_hints

import pytest
from helpers import run_main
from serve_fixtures import toy_checkpoint

pytest.importorskip("fastapi", reason="fastapi is not installed (pip install '.[serve]')")
pytest.importorskip("httpx", reason="httpx (FastAPI's TestClient) is not installed (the dev extra)")
with warnings.catch_warnings():  # Starlette asks for `httpx2`; `httpx` works the same
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi import testclient

from seq2seq.align.defaults import default_settings  # noqa: E402
from seq2seq.cli import translate  # noqa: E402
from seq2seq.config.build import count_parameters  # noqa: E402
from seq2seq.search.batched import SearchSettings  # noqa: E402
from seq2seq.search.translator import Translator  # noqa: E402
from seq2seq.serve.app import create_app  # noqa: E402
from seq2seq.serve.backends import TorchEngine  # noqa: E402
from seq2seq.serve.limits import Limits, LimitsError  # noqa: E402
from seq2seq.visualise.viewer import PAGE_SCRIPT, PAGE_STYLE, viewer_data  # noqa: E402

LINES = ["a b c d e", "j i h", "c c a b"]
SYMBOLS = "abcdefghij"  # the toy task's symbols (`data.source.vocab_size` 10)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    return toy_checkpoint(tmp_path_factory.mktemp("serve"))


@pytest.fixture(scope="module")
def translator(checkpoint) -> Translator:
    return Translator.load(checkpoint)


@pytest.fixture(scope="module")
def engine(translator, checkpoint) -> TorchEngine:
    return TorchEngine(translator, checkpoint)


@contextmanager
def serving(engine, **limits):
    """A TestClient of the service, its worker running (the lifespan) inside; its requests
    name 127.0.0.1 as their Host, one of the names the service answers to."""
    app = create_app(engine, Limits(**limits))
    with testclient.TestClient(app, base_url="http://127.0.0.1") as client:
        yield client


class HeldEngine:
    """An engine that records each batch it translates and holds the first one until
    `release` is set, so that requests sent meanwhile wait in the queue together; a
    sentence "boom" makes it fail, as a model error would."""

    def __init__(self, engine: TorchEngine):
        self.engine, self.name = engine, engine.name
        self.links_problem = self.attention_problem = None
        self.batches: list[tuple[int, list[str]]] = []  # (beam_size, sentences)
        self.started, self.release = threading.Event(), threading.Event()

    def translate(self, sentences, settings, need_weights):
        self.batches.append((settings.beam_size, list(sentences)))
        self.started.set()
        assert self.release.wait(10)
        if "boom" in sentences:
            raise RuntimeError("boom: the model broke")
        return self.engine.translate(sentences, settings, need_weights)

    def __getattr__(self, name):  # links, views, model_info, viewer_base
        return getattr(self.engine, name)


def holding_the_worker(client, held, sentences: list[str]) -> threading.Thread:
    """Send one request in a thread and wait until the worker holds its batch (`HeldEngine`),
    so that the requests sent next queue up behind it."""
    first = threading.Thread(target=client.post, args=("/translate",),
                             kwargs={"json": {"sentences": sentences}})  # fmt: skip
    first.start()
    assert held.started.wait(10)  # the worker holds the first batch
    return first


def in_threads(client, bodies: list[dict], queue) -> tuple[list, list]:
    """POST each body from its own thread, in order, each once the queue holds the one
    before it (so that arrival order is fixed); the threads and their responses."""
    responses: list = [None] * len(bodies)

    def send(index: int, body: dict) -> None:
        responses[index] = client.post("/translate", json=body)

    threads = []
    for index, body in enumerate(bodies):
        threads.append(threading.Thread(target=send, args=(index, body)))
        threads[-1].start()
        wait_for(lambda count=index + 1: queue.depth >= count)
    return threads, responses


def wait_for(condition, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.005)


# ---------------------------------------------------------------- what it answers


def test_translations_are_the_translators(engine, translator):
    with serving(engine) as client:
        response = client.post("/translate", json={"sentences": LINES, "beam_size": 3, "nbest": 2})
    assert response.status_code == 200
    answer = response.json()
    assert (answer["engine"], answer["beam_size"], answer["nbest"]) == ("pytorch", 3, 2)
    expected = translator.translate(LINES, SearchSettings(beam_size=3, n_best=2))
    for got, want in zip(answer["translations"], expected, strict=True):
        assert got["source"] == want.source and got["text"] == want.text
        assert [h["text"] for h in got["nbest"]] == (want.texts or [""])
        assert [h["score"] for h in got["nbest"]] == pytest.approx(
            [h.score for h in want.hypotheses] or [0.0], abs=1e-5
        )
        assert "links" not in got and "attention" not in got


def test_links_are_those_of_seq2seq_translate_alignments(engine, checkpoint, capsys):
    with serving(engine) as client:
        answer = client.post("/translate", json={"sentences": LINES, "alignments": True}).json()
    code, out, _ = run_main(translate.main, capsys, checkpoint, *LINES, "--alignments")
    assert code == 0
    expected = [line.split("\t") for line in out.splitlines()]
    assert [[t["text"], t["links"]] for t in answer["translations"]] == expected
    assert [t["nbest"][0]["links"] for t in answer["translations"]] == [e[1] for e in expected]


def test_attention_is_every_view_the_viewer_shows(engine, translator):
    with serving(engine) as client:
        answer = client.post("/translate", json={"sentences": LINES, "attention": True}).json()
    translations = translator.translate(LINES, SearchSettings(), need_weights=True)
    views = [sentence["views"] for sentence in viewer_data(translator, translations)["sentences"]]
    got = [t["attention"] for t in answer["translations"]]
    assert got == views
    assert [view["name"] for view in got[0]] == ["cross", "encoder", "decoder"]
    assert [len(layer["heads"]) for layer in got[0][0]["layers"]] == [4, 4]


def test_health_and_models(engine, translator):
    with serving(engine, max_chars=40) as client:
        health, models = client.get("/health").json(), client.get("/models").json()
    assert health["status"] == "ok" and health["queued"] == 0 and health["peak_rss_mib"] > 10
    assert (health["sentences_translated"], health["sentences_dropped"]) == (0, 0)
    limits = {**asdict(Limits(max_chars=40)), "max_source_pieces": translator.max_source_len}
    assert health["limits"] == limits
    hints = {
        **get_type_hints(Limits),
        "max_source_pieces": int,
    }  # printed as declared: 40, not 40.0
    assert {name: type(value) for name, value in health["limits"].items()} == hints
    (model,) = models["models"]
    assert (model["name"], model["engine"], model["src_lang"]) == ("best.pt", "pytorch", "zh")
    assert model["architecture"]["encoder"] == "transformer"
    assert model["architecture"]["heads"] == translator.config.attention.heads == 4
    assert type(model["architecture"]["heads"]) is int and type(model["max_source_pieces"]) is int
    assert model["parameters"] == count_parameters(translator.model)
    assert model["attention"] == {"layers": 2, "heads": 4}
    assert model["alignment"]["description"] == default_settings(translator).description


def test_the_page_is_the_viewer_and_self_contained(engine):
    with serving(engine) as client:
        response = client.get("/")
    page = response.text
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    assert PAGE_SCRIPT in page and PAGE_STYLE in page
    assert 'id="translate-form"' in page and 'id="heatmap"' in page
    assert not re.search(r"""(src|href|action)\s*=\s*["']?\s*(https?:)?//""", page, re.I)
    assert not re.search(r"""(fetch|import)\(\s*["']https?:""", page)
    assert 'headers: { "Content-Type": "application/json" }' in page  # what the service reads
    data = re.search(
        r'<script type="application/json" id="attention-data">(.*?)</script>', page, re.S
    )
    base = json.loads(data.group(1))
    assert base["pair"] == "zh→en" and base["sentences"] == [] and base["alignment"]["start"]


def test_the_page_says_the_limits_and_the_models_piece_limit(engine, translator):
    with serving(engine, max_chars=40, max_sentences=3) as client:
        page = client.get("/").text
    status = re.search(r'<p id="status"[^>]*>(.*?)</p>', page, re.S).group(1)
    assert status == (
        f"At most 3 lines of 40 characters; the model reads the first "
        f"{translator.max_source_len} pieces (words or parts of words) of each line."
    )


def test_a_sentence_over_the_models_limit_is_cut_and_says_so(engine, translator):
    """Each translation counts its source's pieces; the one over the model's limit is the
    translation of its first `max_source_len` symbols, with one warning giving the counts."""
    limit = translator.max_source_len
    symbols = [SYMBOLS[i % len(SYMBOLS)] for i in range(limit + 30)]
    long_line, short_line = " ".join(symbols), "a b c"
    with serving(engine) as client:
        answer = client.post("/translate", json={"sentences": [short_line, long_line]}).json()
    short, long = answer["translations"]
    assert (short["truncated"], short["pieces_given"], short["pieces_kept"]) == (False, 3, 3)
    assert short["warnings"] == []
    assert (long["truncated"], long["pieces_given"], long["pieces_kept"]) == (
        True,
        limit + 30,
        limit,
    )
    assert long["warnings"] == [
        f"{limit + 30} source pieces, truncated to the model's limit of {limit}: "
        f"only the first {limit} were translated"
    ]
    (cut,) = translator.translate([" ".join(symbols[:limit])], SearchSettings())
    assert long["text"] == cut.text and not cut.truncated


def test_no_interactive_docs_that_load_from_a_cdn(engine):
    with serving(engine) as client:
        assert client.get("/docs").status_code == 404
        assert "/translate" in client.get("/openapi.json").json()["paths"]


# ---------------------------------------------------------------- batching


def test_concurrent_requests_are_merged_into_one_batch_per_setting(engine):
    held = HeldEngine(engine)
    with serving(held, max_wait_ms=50) as client:
        first = holding_the_worker(client, held, ["a b"])
        bodies = [{"sentences": ["a b c"], "beam_size": 2}, {"sentences": ["j i"], "beam_size": 1},
                  {"sentences": ["c d", "e f"], "beam_size": 2}, {"sentences": ["h"], "beam_size": 1}]  # fmt: skip
        threads, responses = in_threads(client, bodies, client.app.state.service.queue)
        held.release.set()
        for thread in [first, *threads]:
            thread.join(10)
        alone = [client.post("/translate", json=body).json() for body in bodies]
    assert held.batches[:3] == [(5, ["a b"]), (2, ["a b c", "c d", "e f"]), (1, ["j i", "h"])]
    assert len(held.batches) == 3 + len(bodies)  # then each alone
    for response, single in zip(responses, alone):
        assert response.status_code == 200
        assert [t["text"] for t in response.json()["translations"]] == [
            t["text"] for t in single["translations"]
        ]


def test_a_full_queue_answers_503_and_the_queued_requests_still_succeed(engine):
    held = HeldEngine(engine)
    with serving(held, max_queue=1, max_wait_ms=0) as client:
        first = holding_the_worker(client, held, ["a"])
        threads, responses = in_threads(client, [{"sentences": ["b"]}], client.app.state.service.queue)  # fmt: skip
        refused = client.post("/translate", json={"sentences": ["c"]})
        held.release.set()
        for thread in [first, *threads]:
            thread.join(10)
    assert refused.status_code == 503
    assert "queue is full (1 requests waiting)" in refused.json()["error"]
    assert responses[0].status_code == 200


def test_a_model_error_answers_500_for_that_request_only_and_serving_goes_on(engine, caplog):
    held = HeldEngine(engine)
    held.release.set()
    with serving(held) as client:
        failed = client.post("/translate", json={"sentences": ["boom"]})
        after = client.post("/translate", json={"sentences": ["a b c"]})
    assert failed.status_code == 500
    assert failed.json() == {
        "error": "the model failed on this request (RuntimeError: boom: the model broke)"
    }
    assert after.status_code == 200 and after.json()["translations"][0]["text"]
    assert "translating a batch of 1 sentence(s) failed" in caplog.text


def test_a_failing_request_merged_with_others_fails_alone(engine):
    held = HeldEngine(engine)
    with serving(held, max_wait_ms=50) as client:
        first = holding_the_worker(client, held, ["a"])
        bodies = [{"sentences": ["a b"]}, {"sentences": ["boom"]}, {"sentences": ["c d"]}]
        threads, responses = in_threads(client, bodies, client.app.state.service.queue)
        held.release.set()
        for thread in [first, *threads]:
            thread.join(10)
    assert [r.status_code for r in responses] == [200, 500, 200]
    assert held.batches[1] == (5, ["a b", "boom", "c d"])  # merged, then each alone


def test_a_late_answer_is_a_504_and_the_service_recovers(engine):
    """The held batch outlives the limit; once released, the next request is answered.
    The limit leaves the second request time on a busy machine (each pytest worker and
    whatever else runs there share the cores)."""
    held = HeldEngine(engine)
    with serving(held, timeout_s=2.0) as client:
        late = client.post("/translate", json={"sentences": ["a b"]})
        held.release.set()
        after = client.post("/translate", json={"sentences": ["a b"]})
    assert late.status_code == 504 and late.json()["error"] == "no translation within 2 s"
    assert after.status_code == 200


# ---------------------------------------------------------------- bad requests


LIMITS = {"max_chars": 10, "max_sentences": 3, "max_beam": 6}
BAD_REQUESTS = [
    ("not json", 400, "the body is not valid JSON"),
    ('{"sentences": ["a"]', 400, "the body is not valid JSON"),
    ("[1, 2]", 422, "body: Input should be an object"),
    ('{"beam_size": 2}', 422, "sentences: Field required"),
    ('{"sentences": "a b"}', 422, "sentences: Input should be a valid array"),
    ('{"sentences": [1]}', 422, "sentences.0: Input should be a valid string"),
    ('{"sentences": ["a"], "beam_size": "2"}', 422, "beam_size: Input should be a valid integer"),
    ('{"sentences": ["a"], "beam_size": 2.5}', 422, "beam_size: Input should be a valid integer"),
    ('{"sentences": ["a"], "alignments": 1}', 422, "alignments: Input should be a valid boolean"),
    ('{"sentences": ["a"], "n_best": 2}', 422, "n_best: Extra inputs are not permitted"),
    ('{"sentences": []}', 422, "sentences: give at least one sentence"),
    ('{"sentences": [""]}', 422, "sentences[0]: an empty sentence; give text to translate"),
    ('{"sentences": ["a", " \\t\\u3000"]}', 422, "sentences[1]: an empty sentence"),
    ('{"sentences": ["a", "b", "c", "d"]}', 422, "sentences: 4 sentences; at most 3 per request"),
    ('{"sentences": ["a", "abcdefghijk"]}', 422, "sentences[1]: 11 characters; at most 10"),
    ('{"sentences": ["a"], "beam_size": 7}', 422, "beam_size: 7; at most 6"),
    ('{"sentences": ["a"], "beam_size": 0}', 422, "beam_size must be an integer of at least 1"),
    ('{"sentences": ["a"], "beam_size": 2, "nbest": 3}', 422, "nbest must not exceed beam_size (2)"),
    ('{"sentences": ["a"], "nbest": -1}', 422, "nbest must be an integer of at least 1"),
]  # fmt: skip


@pytest.mark.parametrize(("body", "status", "message"), BAD_REQUESTS)
def test_a_bad_request_is_a_4xx_with_a_message(engine, body, status, message):
    with serving(engine, **LIMITS) as client:
        response = client.post("/translate", content=body.encode("utf-8"),
                               headers={"Content-Type": "application/json"})  # fmt: skip
    assert response.status_code == status
    assert message in response.json()["error"]


def test_a_body_over_the_limits_is_a_413_before_it_is_read(engine):
    limits = Limits(**LIMITS)
    with serving(engine, **LIMITS) as client:
        huge = client.post("/translate", content=b"[" + b" " * limits.max_body_bytes + b"]",
                           headers={"Content-Type": "application/json"})  # fmt: skip
        wrong_path = client.get("/translations")
        wrong_method = client.get("/translate")
    assert huge.status_code == 413 and "at most" in huge.json()["error"]
    assert (wrong_path.status_code, wrong_path.json()) == (404, {"error": "Not Found"})
    assert (wrong_method.status_code, wrong_method.json()) == (405, {"error": "Method Not Allowed"})


def test_a_service_beam_over_max_beam_is_refused_at_start_up(engine):
    with pytest.raises(LimitsError, match="max_beam must be at least the service's beam size 5"):
        create_app(engine, Limits(max_beam=4))


def test_what_the_model_cannot_give_is_a_422(engine):
    held = HeldEngine(engine)
    held.links_problem = "the model has no attention weights"
    held.release.set()
    with serving(held) as client:
        response = client.post("/translate", json={"sentences": ["a"], "alignments": True})
    assert response.status_code == 422
    assert response.json()["error"] == "alignments: the model has no attention weights"


# ---------------------------------------------------------------- the CTranslate2 engine


def test_the_ctranslate2_engine_answers_as_seq2seq_translate_does(checkpoint, tmp_path, capsys):
    pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed (the export extra)")
    from seq2seq.cli.export import alignment_head
    from seq2seq.export import export_ctranslate2
    from seq2seq.export.ctranslate2_translator import CTranslate2Translator
    from seq2seq.serve.backends import CTranslate2Engine

    folder = export_ctranslate2(checkpoint, tmp_path / "ct2", choose_alignment=alignment_head)
    engine = CTranslate2Engine(CTranslate2Translator.load(folder, threads=1), folder)
    with serving(engine) as client:
        body = {"sentences": LINES, "alignments": True, "attention": True}
        answer = client.post("/translate", json=body).json()
        model = client.get("/models").json()["models"][0]
    code, out, _ = run_main(translate.main, capsys, "--engine", "ctranslate2", folder, *LINES,
                            "--alignments")  # fmt: skip
    assert code == 0
    assert answer["engine"] == "ctranslate2" and model["engine"] == "ctranslate2"
    assert [[t["text"], t["links"]] for t in answer["translations"]] == [
        line.split("\t") for line in out.splitlines()
    ]
    cross = answer["translations"][0]["attention"]
    assert [view["name"] for view in cross] == ["cross"] and len(cross[0]["layers"]) == 1
    assert model["alignment"]["description"].startswith("layer -1, head mean")
