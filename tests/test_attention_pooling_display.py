"""Attention pooling where weights are drawn: the pooling hook's TensorBoard images (one
row per pooling over the source) and the viewer page's "attention pooling" view, for a
pooled summary beside cross-attention and for `attention=none` with a pooled context,
whose page opens on the pooling and claims no word links."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from helpers import TINY_TOY, compose_config
from hook_fixtures import hooks_run

from seq2seq.cli import translate
from seq2seq.config.search_settings import SearchSettings
from seq2seq.runs.assemble import train_and_test
from seq2seq.search.translator import Translator
from seq2seq.special_tokens import EOS_ID
from seq2seq.visualise.alignment_images import TOY_SHOWN, image_tag
from seq2seq.visualise.pooling_images import PoolingHook, pooling_tag
from seq2seq.visualise.viewer import DECIMALS, viewer_data

POOLED_SUMMARY = ["model.summary=attention_pool"]
POOLED_NONE = ["attention=none", "attention.context=attention_pool"]
SHORT = ["trainer.max_steps=2", "trainer.valid_every=2", "logging.tensorboard=false",
         "trainer.test_search.beam_size=1", "data.source.train_size=48",
         "data.source.valid_size=8", "data.source.test_size=8"]  # fmt: skip
LINES = ["a b c d e", "j i h"]


def hook_run(monkeypatch, overrides: list[str]):
    """A fresh toy model through its run's hooks at step 3 (`hook_fixtures.hooks_run`)."""
    return hooks_run(monkeypatch, compose_config(TINY_TOY + overrides), 3)


@pytest.mark.parametrize(
    ("overrides", "rows"), [(POOLED_SUMMARY, ["summary"]), (POOLED_NONE, ["context"])]
)
def test_each_shown_sentence_gets_a_pooling_image_of_its_weights(monkeypatch, overrides, rows):
    logger, drawn, model, data, hooks = hook_run(monkeypatch, overrides)
    lines = data.valid.src_lines[:TOY_SHOWN]
    pooling_tags = [pooling_tag(image_tag(i, line)) for i, line in enumerate(lines)]
    assert pooling_tags[0].startswith("pooling/00_")
    assert set(pooling_tags) <= set(logger.images)
    assert any(isinstance(hook, PoolingHook) for hook in hooks)
    pooled = [entry for entry in drawn if "attention pooling" in entry[3]]
    assert len(pooled) == len(lines)
    model.eval()
    for (src_pieces, names, weights, _), (src, _) in zip(pooled, data.valid.examples, strict=False):
        assert names == rows
        ids = torch.tensor([list(src) + [EOS_ID]])
        by_hand = model.pooling_weights(ids, ids != 0)[rows[0]]  # (1, src_len), alone
        assert weights.shape == (1, 1, 1, len(src) + 1) and len(src_pieces) == len(src) + 1
        torch.testing.assert_close(weights[0, 0], by_hand, atol=1e-6, rtol=0)
        assert weights.sum().item() == pytest.approx(1.0, abs=1e-5)


def test_a_model_without_pooling_gets_no_pooling_hook(monkeypatch):
    logger, _, *_, hooks = hook_run(monkeypatch, [])
    assert not any(isinstance(hook, PoolingHook) for hook in hooks)
    assert not any(tag.startswith("pooling/") for tag in logger.images)


# ---------------------------------------------------------------- the viewer page


def trained(root: Path, overrides: list[str]) -> Path:
    cfg = compose_config(TINY_TOY + SHORT + overrides + [f"data.root={root / 'data'}"])
    train_and_test(cfg, root / "run", outputs_root=root)
    return root / "run" / "checkpoints" / "best.pt"


def page_data(page: Path) -> dict:
    found = re.search(r'<script type="application/json" id="attention-data">(.*?)</script>',
                      page.read_text(encoding="utf-8"), re.S)  # fmt: skip
    return json.loads(found.group(1))


def test_the_page_shows_the_pooled_summary_beside_the_cross_attention(tmp_path):
    translator = Translator.load(trained(tmp_path, POOLED_SUMMARY))
    translations = translator.translate(LINES, SearchSettings(), need_weights=True)
    data = viewer_data(translator, translations)
    for sentence, line in zip(data["sentences"], LINES, strict=True):
        assert [view["name"] for view in sentence["views"]] == ["cross", "pooling"]
        cross, pooled = sentence["views"]
        assert pooled["rows"] == ["summary"] and pooled["columns"] == cross["columns"]
        ids = translator.src_tokenizer.encode(line) + [EOS_ID]
        src = torch.tensor([ids])
        expected = translator.model.pooling_weights(src, src != 0)["summary"][0]
        [row] = pooled["layers"][0]["mean"]
        assert max(abs(a - b) for a, b in zip(row, expected.tolist(), strict=True)) <= 10**-DECIMALS
    assert "view" not in data["alignment"]["start"]  # the cross-attention's head, as before


def test_attention_none_with_pooling_gets_a_page_that_opens_on_the_pooling(tmp_path, capsys):
    checkpoint = trained(tmp_path, POOLED_NONE)
    page = tmp_path / "viewer.html"
    assert translate.main([str(checkpoint), *LINES, "--html", str(page)]) == 0
    assert "it opens on attention pooling" in capsys.readouterr().err
    data = page_data(page)
    assert [[view["name"] for view in s["views"]] for s in data["sentences"]] == [["pooling"]] * 2
    assert data["alignment"]["start"] == {"view": "pooling", "layer": 0, "head": "mean"}
    assert data["alignment"]["marks"] == []
    assert data["alignment"]["source"] == "pooling"  # no word links are claimed from it
