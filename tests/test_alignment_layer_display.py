"""The alignment layer (`alignment=layer`) where attention is drawn: the viewer page of
`seq2seq-translate --html` holds it as one more kind of attention (its weights those of
`hypothesis_layer_weights`) and opens on it, saying that word links come from it; a model
without a layer has a page without it; the service names it in `GET /models`, returns its
view with the attention and its links with `--alignments`' settings; the notebook draws it
by default. The page in headless Chromium (offline and served) when Chromium is there.

A toy Transformer (cross-attention: 2 layers of 4 heads; an alignment layer of 2 heads, so
that a swapped head or layer count fails) is trained for two updates once per module."""

from __future__ import annotations

import json
import re
import shutil
import warnings
from pathlib import Path

import pytest
import torch
from helpers import TINY_TOY, TOY_TRANSFORMER, compose_config

from seq2seq.align.defaults import default_settings
from seq2seq.align.extract import hypothesis_layer_weights, translation_links
from seq2seq.align.pharaoh import format_links
from seq2seq.align.teacher_forced import LAYER
from seq2seq.cli import translate
from seq2seq.config.search_settings import SearchSettings
from seq2seq.runs.assemble import train_and_test
from seq2seq.search.translator import Translator
from seq2seq.visualise.notebook import attention_figure, bertviz_inputs, inline_html
from seq2seq.visualise.viewer import DECIMALS, opening, viewer_data

LINES = ["a b c d e", "j i h"]
LAYER_HEADS = 2
LAYER_MODEL = TOY_TRANSFORMER + ["alignment=layer", f"alignment.layer_heads={LAYER_HEADS}"]
PLAIN_MODEL = TINY_TOY + ["trainer.max_steps=2", "trainer.valid_every=2",
                          "logging.tensorboard=false", "trainer.test_search.beam_size=1",
                          "data.source.train_size=48", "data.source.valid_size=8",
                          "data.source.test_size=8"]  # fmt: skip
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def trained(root: Path, overrides: list[str]) -> Path:
    """Train a toy model for two updates under `root`: its best checkpoint."""
    cfg = compose_config(overrides + [f"data.root={root / 'data'}"])
    train_and_test(cfg, root / "run", outputs_root=root)
    return root / "run" / "checkpoints" / "best.pt"


@pytest.fixture(scope="module")
def layer_checkpoint(tmp_path_factory) -> Path:
    return trained(tmp_path_factory.mktemp("layer_display"), LAYER_MODEL)


@pytest.fixture(scope="module")
def translator(layer_checkpoint) -> Translator:
    return Translator.load(layer_checkpoint)


@pytest.fixture(scope="module")
def translations(translator):
    return translator.translate(LINES, SearchSettings(), need_weights=True)


def page_data(page: Path) -> dict:
    """The JSON blob of a viewer page, read back with Python."""
    found = re.search(r'<script type="application/json" id="attention-data">(.*?)</script>',
                      page.read_text(encoding="utf-8"), re.S)  # fmt: skip
    return json.loads(found.group(1))


def view_named(views: list[dict], name: str) -> dict:
    [view] = [view for view in views if view["name"] == name]
    return view


def rounded(matrix: torch.Tensor) -> list[list[float]]:
    return [[round(weight, DECIMALS) for weight in row] for row in matrix.tolist()]


def assert_close(got: list[list[float]], expected: list[list[float]]) -> None:
    """Page weights against the rounded expected ones: equal to the last decimal (a
    float computed twice may round the other way at a .5)."""
    assert len(got) == len(expected) and all(len(a) == len(b) for a, b in zip(got, expected))
    worst = max(abs(a - b) for row, other in zip(got, expected) for a, b in zip(row, other))
    assert worst <= 10**-DECIMALS, worst


# ---------------------------------------------------------------- the viewer page


def test_the_page_holds_the_alignment_layer_and_opens_on_it(
    layer_checkpoint, translator, translations, tmp_path, capsys
):
    page = tmp_path / "viewer.html"
    assert translate.main([str(layer_checkpoint), *LINES, "--html", str(page)]) == 0
    err = capsys.readouterr().err
    assert "it opens on the alignment layer, head mean" in err
    data = page_data(page)
    for sentence, translation in zip(data["sentences"], translations, strict=True):
        assert [view["name"] for view in sentence["views"]] == ["cross", "layer", "encoder", "decoder"]  # fmt: skip
        views = sentence["views"]
        cross, layer = view_named(views, "cross"), view_named(views, "layer")
        assert layer["title"] == "alignment layer"
        assert (layer["rows"], layer["columns"]) == (cross["rows"], cross["columns"])
        [expected] = hypothesis_layer_weights(translator, translation)[:1]  # (1, heads, T+1, S+1)
        assert expected.shape == (1, LAYER_HEADS, len(layer["rows"]), len(layer["columns"]))
        [page_layer] = layer["layers"]
        assert len(page_layer["heads"]) == LAYER_HEADS
        for head, matrix in enumerate(page_layer["heads"]):
            assert_close(matrix, rounded(expected[0, head]))
        assert_close(page_layer["mean"], rounded(expected[0].mean(dim=0)))
        assert not any(page_layer["mean"][-1])  # the EOS row links nothing
        assert len(cross["layers"]) == 2 and len(cross["layers"][0]["heads"]) == 4
    alignment = data["alignment"]
    assert alignment["source"] == LAYER
    assert alignment["start"] == {"view": "layer", "layer": 0, "head": "mean"}
    assert alignment["description"] == default_settings(translator).description
    assert alignment["description"].startswith("the alignment layer, head mean")


def test_a_model_without_a_layer_has_no_layer_view(tmp_path):
    plain = Translator.load(trained(tmp_path, PLAIN_MODEL))
    data = viewer_data(plain, plain.translate(LINES, SearchSettings(), need_weights=True))
    assert [[view["name"] for view in s["views"]] for s in data["sentences"]] == [["cross"]] * 2
    assert "view" not in data["alignment"]["start"]
    assert "alignment layer" not in json.dumps(data)


def test_the_layers_start_is_not_the_cross_attentions_layer_0(translator):
    """Settings with source LAYER name the layer's own layer 0: the page opens on the
    alignment layer's view, never on cross-attention layer 0; cross-attention settings
    open on their (wrapped) layer."""
    found = default_settings(translator)
    assert found.settings.source == LAYER and found.settings.layer == 0
    assert opening(found, layers=2) == {"view": "layer", "layer": 0, "head": "mean"}
    cross = default_settings(translator, use_layer=False)
    assert "view" not in opening(cross, layers=2)


# ---------------------------------------------------------------- the service


@pytest.fixture(scope="module")
def engine(translator, layer_checkpoint):
    pytest.importorskip("fastapi", reason="fastapi is not installed (pip install '.[serve]')")
    from seq2seq.serve.backends import TorchEngine

    return TorchEngine(translator, layer_checkpoint)


def client_of(engine):
    pytest.importorskip("httpx", reason="httpx (FastAPI's TestClient) is not installed")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
        from fastapi import testclient

    from seq2seq.serve.app import create_app
    from seq2seq.serve.limits import Limits

    return testclient.TestClient(create_app(engine, Limits()), base_url="http://127.0.0.1")


def test_the_service_names_the_layer_and_returns_its_links_and_view(
    engine, translator, translations
):
    with client_of(engine) as client:
        models = client.get("/models").json()
        body = {"sentences": LINES, "alignments": True, "attention": True}
        answer = client.post("/translate", json=body).json()
        page = client.get("/").text
    [model] = models["models"]
    assert model["alignment"]["source"] == LAYER
    assert model["alignment"]["description"].startswith("the alignment layer, head mean")
    settings = default_settings(translator).settings
    assert settings.source == LAYER
    for got, translation in zip(answer["translations"], translations, strict=True):
        expected = [format_links(links) for links in translation_links(translator, translation, settings)]  # fmt: skip
        assert [hypothesis["links"] for hypothesis in got["nbest"]] == expected
        assert [view["name"] for view in got["attention"]] == ["cross", "layer", "encoder", "decoder"]  # fmt: skip
        [layer_weights] = hypothesis_layer_weights(translator, translation)[:1]
        assert_close(view_named(got["attention"], "layer")["layers"][0]["mean"],
                     rounded(layer_weights[0].mean(dim=0)))  # fmt: skip
    base = json.loads(re.search(r'id="attention-data">(.*?)</script>', page, re.S).group(1))
    assert base["alignment"]["start"]["view"] == "layer"


# ---------------------------------------------------------------- the notebook


def figure_matrix(figure) -> torch.Tensor:
    """The matrix a one-panel `attention_figure` draws."""
    [image] = [image for axes in figure.axes for image in axes.images]
    return torch.as_tensor(image.get_array().data, dtype=torch.float32)


def test_the_notebook_draws_the_layer_by_default_and_the_cross_attention_on_request(
    translator, translations
):
    translation = translations[0]
    [weights] = hypothesis_layer_weights(translator, translation)[:1]
    layer_figure = attention_figure(translator, translation)
    assert "alignment layer · head mean" in layer_figure.get_suptitle()
    assert torch.allclose(figure_matrix(layer_figure), weights[0].mean(dim=0), atol=1e-6)
    one_head = attention_figure(translator, translation, head=1, source="layer")
    assert torch.allclose(figure_matrix(one_head), weights[0, 1], atol=1e-6)
    cross = attention_figure(translator, translation, source="attention", layer=1, head=2)
    assert "cross-attention · layer 1 · head 2" in cross.get_suptitle()
    cross_weights = translation.hypotheses[0].attention[1, 2].float()
    assert torch.allclose(figure_matrix(cross), cross_weights, atol=1e-6)
    with pytest.raises(ValueError, match="head 2: the model has 2 head"):
        attention_figure(translator, translation, head=LAYER_HEADS, source="layer")
    with pytest.raises(ValueError, match="source must be one of"):
        attention_figure(translator, translation, source="lyer")
    assert "alignment layer" in inline_html(translator, translation)
    assert set(bertviz_inputs(translator, translation)) >= {"cross_attention", "encoder_tokens"}


# ---------------------------------------------------------------- in a browser


def playwright_or_skip():
    """Playwright's context manager, driving the system Chromium; skips without either."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    if CHROMIUM is None:
        pytest.skip("no chromium on PATH (apt-get install chromium)")
    return sync_api.sync_playwright()


def shown_matrix(page) -> list[list[float]]:
    rows = page.eval_on_selector_all(
        "#heatmap tbody tr",
        "rows => rows.map(r => Array.from(r.querySelectorAll('td')).map(c => c.dataset.weight))",
    )
    return [[float(weight) for weight in row] for row in rows]


def pressed(page, group: str) -> list[str]:
    return page.eval_on_selector_all(f'#{group} button[aria-pressed="true"]',
                                     "nodes => nodes.map(n => n.textContent)")  # fmt: skip


def check_opens_on_the_layer(page, sentence: dict) -> None:
    """The page shows the layer's head mean, its button marked and the links' source in
    words; one click on cross-attention shows cross-attention layer 0's head mean."""
    layer, cross = view_named(sentence["views"], "layer"), view_named(sentence["views"], "cross")
    assert pressed(page, "views") == ["alignment layer"]
    assert pressed(page, "layers") == ["0"] and pressed(page, "heads") == ["mean"]
    assert_close(shown_matrix(page), layer["layers"][0]["mean"])
    assert "Word links are read from the alignment layer, head mean" in page.text_content("#marks")
    marked = page.get_attribute("#views button[data-mark]", "data-mark")
    assert marked == "links"
    page.locator("#views button", has_text=re.compile("^cross-attention$")).click()
    assert pressed(page, "views") == ["cross-attention"]
    assert_close(shown_matrix(page), cross["layers"][0]["mean"])
    assert len(page.eval_on_selector_all("#layers button", "nodes => nodes")) == 2


@pytest.mark.slow
def test_the_offline_page_opens_on_the_layer_in_a_browser(layer_checkpoint, tmp_path):
    playwright_context = playwright_or_skip()
    page_file = tmp_path / "viewer.html"
    assert translate.main([str(layer_checkpoint), *LINES, "--html", str(page_file)]) == 0
    with playwright_context as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        page = browser.new_page(viewport={"width": 1100, "height": 800})
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(page_file.as_uri())
        page.wait_for_selector("#heatmap td")
        check_opens_on_the_layer(page, page_data(page_file)["sentences"][0])
        browser.close()
    assert errors == []


@pytest.mark.slow
def test_the_served_page_opens_on_the_layer_in_a_browser(engine):
    playwright_context = playwright_or_skip()
    pytest.importorskip("uvicorn", reason="uvicorn is not installed (pip install '.[serve]')")
    from serve_fixtures import server_in_thread

    from seq2seq.serve.app import create_app
    from seq2seq.serve.limits import Limits

    limits = Limits()
    with server_in_thread(create_app(engine, limits), limits) as port, playwright_context as playwright:  # fmt: skip
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        page = browser.new_page(viewport={"width": 1100, "height": 800})
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(f"http://127.0.0.1:{port}/")
        page.fill("#source", LINES[0])
        page.click("#translate")
        page.wait_for_selector("#heatmap td")
        data = json.loads(page.text_content("#attention-data"))
        check_opens_on_the_layer(page, data["sentences"][0])
        browser.close()
    assert errors == []
