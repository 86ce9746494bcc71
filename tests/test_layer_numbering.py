"""One layer numbering for everything a person reads: for the same checkpoint the training
log's `lowest valid AER … at layer L, head H`, the stored choice, the service's `GET
/models`, the page at `/` (its data), the offline viewer (its data and the `--html`
message) and the heatmap's panel titles name the same layer and head, counted from 0 as
`seq2seq-align --layer L --head H` takes them.

The run (`chosen_head_run`) trains a tiny 2-layer, 2-head zh→en Transformer for seconds;
its AER hook chooses a head on the zh-en gold pairs. Which head it chooses is read from the
log, never assumed; the viewer's rendered labels are checked in Chromium
(`tests/test_viewer_browser.py`).
"""

from __future__ import annotations

import json
import re
import warnings

import numpy as np
import pytest
import torch
from chosen_head_run import LoggedChoice, chosen_head_run
from helpers import run_main

from seq2seq.align.defaults import CHOSEN, default_settings, head_marks
from seq2seq.cli import translate
from seq2seq.config.search_settings import SearchSettings
from seq2seq.search.translator import Translator
from seq2seq.visualise.heatmap import draw_alignment, panel_marks

SENTENCE = "我爱中国。"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return chosen_head_run(tmp_path_factory.mktemp("layer_numbering"))


@pytest.fixture(scope="module")
def logged(run) -> LoggedChoice:
    """The log line of the validation that wrote best.pt."""
    best_step = torch.load(run.checkpoint, weights_only=True)["progress"]["best_step"]
    (choice,) = [choice for choice in run.logged_choices() if choice.step == best_step]
    return choice


@pytest.fixture(scope="module")
def translator(run) -> Translator:
    return Translator.load(run.checkpoint)


def page_data(html: str) -> dict:
    found = re.search(r'<script type="application/json" id="attention-data">(.*?)</script>', html, re.S)  # fmt: skip
    return json.loads(found.group(1))


def test_the_log_names_the_stored_choice_and_the_default(run, logged, translator):
    stored = torch.load(run.checkpoint, weights_only=True)["alignment_choice"]
    assert (stored["layer"], stored["head"]) == (logged.layer, logged.head)
    found = default_settings(translator)
    assert found.source == CHOSEN
    assert (found.settings.layer, found.settings.head) == (logged.layer, logged.head)
    head = "mean" if logged.head is None else logged.head
    assert found.description.startswith(f"layer {logged.layer}, head {head} (")


def test_the_api_and_the_served_page_name_the_logged_layer(run, logged, translator):
    pytest.importorskip("fastapi", reason="fastapi is not installed (pip install '.[serve]')")
    pytest.importorskip("httpx", reason="httpx (FastAPI's TestClient) is not installed")
    with warnings.catch_warnings():  # Starlette asks for `httpx2`; `httpx` works the same
        warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
        from fastapi import testclient
    from seq2seq.serve.app import create_app
    from seq2seq.serve.backends import TorchEngine
    from seq2seq.serve.limits import Limits

    app = create_app(TorchEngine(translator, run.checkpoint), Limits())
    with testclient.TestClient(app, base_url="http://127.0.0.1") as client:
        (model,) = client.get("/models").json()["models"]
        page = client.get("/").text
    assert (model["alignment"]["layer"], model["alignment"]["head"]) == (logged.layer, logged.head)
    alignment = page_data(page)["alignment"]
    head = "mean" if logged.head is None else logged.head
    assert alignment["start"] == {"layer": logged.layer, "head": head}
    assert [(m["layer"], m["head"], m["label"]) for m in alignment["marks"]] == [
        (logged.layer, logged.head, CHOSEN)
    ]


def test_the_viewer_and_its_message_name_the_logged_layer(run, logged, tmp_path, capsys):
    page = tmp_path / "viewer.html"
    code, _, err = run_main(translate.main, capsys, run.checkpoint, SENTENCE, "--html", page)
    assert code == 0, err
    alignment = page_data(page.read_text(encoding="utf-8"))["alignment"]
    head = "mean" if logged.head is None else logged.head
    assert alignment["start"] == {"layer": logged.layer, "head": head}
    assert [(m["layer"], m["head"]) for m in alignment["marks"]] == [(logged.layer, logged.head)]
    assert f"it opens on layer {logged.layer}, head {head} (chosen on the valid gold" in err


def test_the_heatmap_title_of_the_logged_head_is_that_heads_weights(logged, translator):
    """The panel marked `chosen` is titled with the logged numbers and draws
    attention[layer, head] of that very layer and head (the numbers are its indices)."""
    (translation,) = translator.translate(
        [SENTENCE], SearchSettings(beam_size=1), need_weights=True
    )
    attention = translation.hypotheses[0].attention  # (layers, heads, tgt_len, src_len)
    figure = draw_alignment(translation.source_pieces, translation.target_pieces[0], attention,
                            "t", marks=panel_marks(head_marks(translator)))  # fmt: skip
    panels = [axes for axes in figure.axes if axes.images]
    (marked,) = [axes for axes in panels if axes.get_title().endswith(" · chosen")]
    if logged.head is None:
        expected_title, expected = (
            f"layer {logged.layer} · mean of",
            attention[logged.layer].mean(0),
        )
    else:
        expected_title, expected = f"layer {logged.layer} · head {logged.head}", attention[logged.layer, logged.head]  # fmt: skip
    assert marked.get_title().startswith(expected_title)
    shown = np.asarray(marked.images[0].get_array())
    np.testing.assert_allclose(shown, expected.float().numpy(), rtol=1e-6)
