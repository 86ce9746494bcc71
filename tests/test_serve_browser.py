"""`seq2seq-serve` as a user meets it: the real server (uvicorn on 127.0.0.1, a free port, in
a subprocess) and its page in headless Chromium. Type 我爱中国。, press Translate, wait for
the translation, hover a cell of the attention heatmap and read the weight the service
returned; a second pair of lines redraws the viewer; an over-long line shows the service's
message; a line cut to the model's piece limit and a line in English (the model reads
Chinese) each show a note under their translation; nothing is fetched from anywhere but
the server. The server is stopped at the end.

The model is a tiny zh→en Transformer (2 layers, 2 heads) trained for seconds on the toy
lexicon corpus (`lexicon_model`), so its translations are rough. Needs Debian's
`chromium`, the `playwright` package and the `serve` extra; skips with the reason when one
is missing. Marked slow: not part of `make test`.
"""

from __future__ import annotations

import json
import shutil
import urllib.request

import pytest
from lexicon_model import MAX_PIECES, lexicon_checkpoint

pytestmark = pytest.mark.slow

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install -e '.[dev]')"
)
pytest.importorskip("fastapi", reason="fastapi is not installed (pip install '.[serve]')")
pytest.importorskip("uvicorn", reason="uvicorn is not installed (pip install '.[serve]')")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip("no chromium on PATH (apt-get install chromium)", allow_module_level=True)

from seq2seq.search.translator import Translator  # noqa: E402
from seq2seq.serve.process import running_server  # noqa: E402

MAX_CHARS = 40


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return lexicon_checkpoint(tmp_path_factory.mktemp("serve_browser"))


@pytest.fixture(scope="module")
def server(checkpoint):
    arguments = [str(checkpoint), "--threads", "1", "--max-chars", str(MAX_CHARS)]
    with running_server(arguments) as running:
        yield running
    assert running.process.poll() is not None  # stopped


@pytest.fixture(scope="module")
def browser_page(server):
    """The service's page in headless Chromium; its console errors and every URL it asked."""
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        page = browser.new_page(viewport={"width": 1100, "height": 800})
        errors: list[str] = []
        requested: list[str] = []
        page.on("console", lambda message: message.type == "error" and errors.append(message.text))
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("request", lambda request: requested.append(request.url))
        page.goto(server.url + "/")
        yield page, errors, requested
        browser.close()


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url + "/translate", json.dumps(body).encode("utf-8"),
                                     {"Content-Type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.load(response)


def texts(page, selector: str) -> list[str]:
    return page.eval_on_selector_all(selector, "nodes => nodes.map(n => n.textContent)")


def translate_in_page(page, text: str) -> None:
    page.fill("#source", text)
    page.click("#translate")
    page.wait_for_function("document.querySelector('#status').textContent !== 'Translating…'")


def test_type_chinese_see_the_translation_and_hover_a_cell(browser_page, server):
    page, errors, _ = browser_page
    assert "zh→en" in page.text_content("#meta")
    assert page.locator("#heatmap").is_hidden()  # nothing to show before a translation
    translate_in_page(page, "我爱中国。")
    page.wait_for_selector("#heatmap td")
    answer = post(server.url, {"sentences": ["我爱中国。"], "attention": True})
    (translation,) = answer["translations"]
    assert texts(page, "#translations li") == [translation["text"]]
    assert texts(page, "#texts span") == ["我爱中国。", translation["text"]]
    cross = translation["attention"][0]
    base = json.loads(page.text_content("#attention-data"))
    start = base["alignment"]["start"]
    layer = cross["layers"][start["layer"]]
    matrix = layer["mean"] if start["head"] == "mean" else layer["heads"][start["head"]]
    page.hover('#heatmap td[data-row="1"][data-column="0"]')
    assert f"{matrix[1][0]:.4f}" in page.text_content("#readout")
    page.locator("#heads button", has_text="1").click()  # every head is there
    page.hover('#heatmap td[data-row="0"][data-column="1"]')
    assert f"{layer['heads'][1][0][1]:.4f}" in page.text_content("#readout")
    assert errors == []


def test_new_lines_redraw_the_viewer_and_errors_are_shown(browser_page, server):
    page, errors, requested = browser_page
    translate_in_page(page, "我喜欢猫。\n汤姆吃米饭。")
    page.wait_for_function("document.querySelectorAll('#sentence option').length === 2")
    assert len(texts(page, "#translations li")) == 2
    page.select_option("#sentence", index=1)
    assert texts(page, "#texts span")[0] == "汤姆吃米饭。"
    assert errors == []
    translate_in_page(page, "我" * (MAX_CHARS + 1))
    assert page.text_content("#status") == (
        f"Error 422: sentences[0]: {MAX_CHARS + 1} characters; at most {MAX_CHARS} per sentence"
    )
    assert len(errors) == 1 and "status of 422" in errors[0]  # Chromium logs the refusal
    assert requested and all(url.startswith(server.url + "/") for url in requested)


def test_a_cut_line_and_a_line_in_another_language_are_noted(browser_page, server, checkpoint):
    """The status line gives the model's piece limit; under the translation of a line over
    it, a note gives the pieces given and kept; under that of an English line (the model
    reads Chinese), a note says it may be another language; a plain line has no note."""
    page, errors, _ = browser_page
    before = len(errors)  # the test before leaves Chromium's log of a refusal
    page.reload()
    assert f"the model reads the first {MAX_PIECES} pieces" in page.text_content("#status")
    long_line, english, plain = "我喜欢猫。" * 6, "Hello world.", "我喜欢猫。"
    given = len(Translator.load(checkpoint).src_tokenizer.encode(long_line))
    assert given > MAX_PIECES and len(long_line) <= MAX_CHARS
    translate_in_page(page, "\n".join([long_line, english, plain]))
    notes = page.eval_on_selector_all(
        "#translations li",
        "items => items.map(i => [...i.querySelectorAll('.input-note')].map(n => n.textContent))",
    )
    letters = sum(character.isalpha() for character in english)
    assert notes == [
        [f"⚠ {given} source pieces, truncated to the model's limit of {MAX_PIECES}: "
         f"only the first {MAX_PIECES} were translated"],
        [f"⚠ 0 of its {letters} letters are Chinese characters, the script of the model's "
         "source language zh: is it in another language? Translated anyway"],
        [],
    ]  # fmt: skip
    assert page.is_visible("#translations .input-note")
    assert page.text_content("#status").endswith(
        "2 of 3 lines have a warning below their translation."
    )
    assert errors[before:] == []
