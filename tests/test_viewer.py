"""The attention viewer page (`seq2seq-translate --html`, `seq2seq.visualise.viewer`):
self-contained, the model's own weights for every layer and head, hostile text kept as
text, and one-line errors. The page in a real browser: tests/test_viewer_browser.py."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest
import torch
from helpers import compose_config

from seq2seq.cli import translate
from seq2seq.config.search_settings import SearchSettings
from seq2seq.models.attention import recording_weights, self_attention
from seq2seq.runs.assemble import train_and_test
from seq2seq.search.translator import Translator
from seq2seq.special_tokens import BOS_ID, EOS_ID
from seq2seq.visualise.probes import probes_for
from seq2seq.visualise.viewer import embedded_json, viewer_html

TOY = [
    "data=toy_reverse", "data.source.train_size=256", "data.source.valid_size=8",
    "data.source.test_size=8", "data.max_tokens=512", "trainer.max_steps=2",
    "trainer.valid_every=2", "trainer.threads=1", "trainer.test_search.beam_size=1",
    "logging.progress_bar=false", "logging.tensorboard=false",
]  # fmt: skip
# Odd-one-out sizes, so that a swapped layer or head dimension fails: the encoder has 1
# layer of 4 heads, the decoder 2 layers with 2 self-attention heads and 4 cross heads.
TRANSFORMER = [
    "encoder=transformer", "decoder=transformer", "attention=multihead",
    "encoder.hidden_size=16", "decoder.hidden_size=16", "model.embed_dim=16",
    "encoder.num_layers=1", "encoder.heads=4", "decoder.num_layers=2", "decoder.heads=2",
    "attention.heads=4", "encoder.ff_size=24", "decoder.ff_size=24",
]  # fmt: skip
GRU = ["encoder=gru", "decoder=gru", "encoder.hidden_size=8", "decoder.hidden_size=8",
       "model.embed_dim=8"]  # fmt: skip
LINES = ["a b c d e", "j i h"]
HOSTILE = ["</script><script>alert(1)</script>", "a < b && c > d <!-- x", "line\u2028sep"]


def toy_checkpoint(root: Path, overrides: list[str]) -> str:
    """Train a toy model for two updates; the path of its best checkpoint."""
    train_and_test(compose_config(TOY + overrides + [f"data.root={root / 'data'}"]), root / "run")
    return str(root / "run" / "checkpoints" / "best.pt")


@pytest.fixture(scope="module")
def transformer(tmp_path_factory) -> str:
    return toy_checkpoint(tmp_path_factory.mktemp("transformer"), TRANSFORMER)


@pytest.fixture(scope="module")
def gru(tmp_path_factory) -> str:
    return toy_checkpoint(tmp_path_factory.mktemp("gru"), GRU + ["attention=additive"])


@pytest.fixture(scope="module")
def gru_without_attention(tmp_path_factory) -> str:
    """attention=none, and a language pair without built-in probes."""
    overrides = GRU + ["attention=none", "data.src_lang=de", "data.tgt_lang=fr"]
    return toy_checkpoint(tmp_path_factory.mktemp("none"), overrides)


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """`seq2seq-translate` in process: exit code (argparse's SystemExit included), out, err."""
    try:
        code = translate.main(list(argv))
    except SystemExit as exit_:
        code = exit_.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def page_data(page: Path) -> dict:
    """The JSON blob of a page, read back with Python."""
    found = re.search(r'<script type="application/json" id="attention-data">(.*?)</script>',
                      page.read_text(encoding="utf-8"), re.S)  # fmt: skip
    return json.loads(found.group(1))


def write_page(capsys, checkpoint: str, folder: Path, *argv: str) -> dict:
    page = folder / "page.html"
    code, _, err = run_cli(capsys, checkpoint, *argv, "--html", str(page))
    assert code == 0, err
    return page_data(page)


def assert_embedded(matrices: list, expected: torch.Tensor) -> None:
    """Matrices of the page (rounded to 4 decimals) against the expected tensor."""
    embedded = torch.tensor(matrices, dtype=torch.float32)
    assert embedded.shape == expected.shape
    assert torch.allclose(embedded, expected.float(), atol=5e-5 + 1e-6, rtol=0.0)


# ---------------------------------------------------------------- an independent computation


def by_hand(attention, normed: torch.Tensor, causal: bool) -> torch.Tensor:
    """softmax(Q Kᵀ / √d) of each head (Vaswani et al. 2017, eq. 1) from the module's own
    projections, written out here: normed (1, T, width) → (heads, T, T)."""
    heads, length = attention.heads, normed.size(1)
    queries = attention.query_proj(normed[0]).view(length, heads, -1).transpose(0, 1)
    keys = attention.key_proj(normed[0]).view(length, heads, -1).transpose(0, 1)
    scores = queries @ keys.transpose(1, 2) / math.sqrt(queries.size(-1))  # (heads, T, T)
    if causal:
        later = torch.ones(length, length, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(later, float("-inf"))
    return scores.softmax(dim=-1)


@torch.no_grad()
def self_attention_by_hand(model, source_ids, target_ids) -> tuple[torch.Tensor, torch.Tensor]:
    """Encoder (layers, heads, S, S) and decoder (layers, heads, T, T) self-attention from
    the inputs of each layer's self-attention, caught with forward hooks on its LayerNorm."""
    normed: dict[str, list[torch.Tensor]] = {"encoder": [], "decoder": []}
    hooks = [layer.attention_norm.register_forward_hook(
                 lambda _m, _i, out: normed["encoder"].append(out)) for layer in model.encoder.layers]  # fmt: skip
    hooks += [layer.self_norm.register_forward_hook(
                  lambda _m, _i, out: normed["decoder"].append(out)) for layer in model.decoder.layers]  # fmt: skip
    src = torch.tensor([list(source_ids) + [EOS_ID]])  # (1, S)
    tgt_in = torch.tensor([[BOS_ID] + list(target_ids)])  # (1, T)
    model(src, torch.ones_like(src, dtype=torch.bool), tgt_in)
    for hook in hooks:
        hook.remove()
    encoder = [by_hand(layer.self_attention, x, False) for layer, x in zip(model.encoder.layers, normed["encoder"])]  # fmt: skip
    decoder = [by_hand(layer.self_attention, x, True) for layer, x in zip(model.decoder.layers, normed["decoder"])]  # fmt: skip
    return torch.stack(encoder), torch.stack(decoder)


# ---------------------------------------------------------------- recording in the model


def test_recording_keeps_the_weights_and_changes_nothing_else():
    torch.manual_seed(0)
    attention = self_attention(12, 3).eval()
    x = torch.randn(2, 5, 12)  # (batch, time, width)
    mask = torch.tensor([[True] * 5, [True] * 3 + [False] * 2])  # (batch, time)
    fused, none = attention(x, x, x, mask, causal=True, need_weights=False)
    _, expected = attention(x, x, x, mask, causal=True, need_weights=True)
    with recording_weights([attention]) as records:
        context, _ = attention(x, x, x, mask, causal=True, need_weights=False)
    attention(x, x, x, mask, need_weights=False)  # after the block: not recorded
    assert none is None and attention.recorded is None
    assert len(records) == 1 and len(records[0]) == 1
    assert torch.equal(records[0][0], expected)  # (batch, heads, time, time)
    assert torch.allclose(context, fused, atol=1e-6)


# ---------------------------------------------------------------- the page's data


def test_page_holds_the_translators_cross_attention_and_the_models_self_attention(
    transformer, tmp_path, capsys
):
    data = write_page(capsys, transformer, tmp_path, *LINES)
    translator = Translator.load(transformer)
    translations = translator.translate(LINES, SearchSettings(), need_weights=True)
    assert [s["source"] for s in data["sentences"]] == LINES
    for sentence, translation in zip(data["sentences"], translations):
        best = translation.hypotheses[0]
        cross, encoder, decoder = sentence["views"]
        assert (cross["rows"], cross["columns"]) == (translation.target_pieces[0], translation.source_pieces)  # fmt: skip
        for index, layer in enumerate(cross["layers"]):
            assert_embedded(layer["heads"], best.attention[index])  # (heads, tgt, src)
            assert_embedded(layer["mean"], best.attention[index].mean(dim=0))
        source_ids = translator.src_tokenizer.encode(translation.source)
        expected_encoder, expected_decoder = self_attention_by_hand(translator.model, source_ids, best.tokens)  # fmt: skip
        assert_embedded([layer["heads"] for layer in encoder["layers"]], expected_encoder)
        assert_embedded([layer["heads"] for layer in decoder["layers"]], expected_decoder)
        assert encoder["rows"] == encoder["columns"] == translation.source_pieces
        assert decoder["columns"] == ["<s>"] + translation.target_pieces[0][:-1]


def test_every_layer_and_head_is_there_and_rows_sum_to_one(transformer, tmp_path, capsys):
    sentence = write_page(capsys, transformer, tmp_path, LINES[0])["sentences"][0]
    shapes = {v["name"]: (len(v["layers"]), len(v["layers"][0]["heads"])) for v in sentence["views"]}  # fmt: skip
    assert shapes == {"cross": (2, 4), "encoder": (1, 4), "decoder": (2, 2)}
    for view in sentence["views"]:
        for layer in view["layers"]:
            for matrix in layer["heads"] + [layer["mean"]]:
                for row in matrix:
                    assert sum(row) == pytest.approx(1.0, abs=len(row) * 5e-5)


def test_an_rnn_model_has_cross_attention_only_one_layer_one_head(gru, tmp_path, capsys):
    data = write_page(capsys, gru, tmp_path, *LINES)
    translator = Translator.load(gru)
    translations = translator.translate(LINES, SearchSettings(), need_weights=True)
    for sentence, translation in zip(data["sentences"], translations):
        [cross] = sentence["views"]
        assert cross["name"] == "cross" and len(cross["layers"]) == 1
        assert_embedded(cross["layers"][0]["heads"], translation.hypotheses[0].attention[0])


def test_probes_are_translated_with_their_references(transformer, tmp_path, capsys):
    page = tmp_path / "probes.html"
    code, out, err = run_cli(capsys, transformer, "--probes", "--html", str(page))
    probes = probes_for("zh", "en")  # the toy data keeps the default pair's names
    assert code == 0, err
    assert len(out.splitlines()) == len(probes)
    sentences = page_data(page)["sentences"]
    assert [(s["source"], s["reference"]) for s in sentences] == [(p.source, p.reference) for p in probes]  # fmt: skip


# ---------------------------------------------------------------- the page itself


def test_page_is_self_contained(transformer, tmp_path, capsys):
    write_page(capsys, transformer, tmp_path, "我爱中国。", *LINES)
    page = (tmp_path / "page.html").read_text(encoding="utf-8")
    assert '<meta charset="utf-8">' in page and "我爱中国。" in page  # text, not escapes
    for external in ("http://", "https://", "<link", "@import", "url("):
        assert external not in page
    assert re.search(r"\bsrc\s*=", page) is None
    assert page.count("<script") == 2  # the data and the code, both inline


def test_hostile_text_stays_data(transformer, tmp_path, capsys):
    write_page(capsys, transformer, tmp_path, *HOSTILE)
    page = (tmp_path / "page.html").read_text(encoding="utf-8")
    assert page.lower().count("<script") == 2 and page.lower().count("</script") == 2
    assert "<!--" not in page and "\u2028" not in page
    assert [s["source"] for s in page_data(tmp_path / "page.html")["sentences"]] == HOSTILE
    for text in HOSTILE:
        blob = embedded_json({"text": text})
        assert not set("<>&\u2028") & set(blob) and json.loads(blob) == {"text": text}


def test_title_is_escaped():
    data = {"title": "</title><script>x</script>", "pair": "zh→en", "model": "", "sentences": []}
    page = viewer_html(data)
    assert "<title>&lt;/title&gt;&lt;script&gt;x&lt;/script&gt;</title>" in page
    assert page.count("<script") == 2


# ---------------------------------------------------------------- one-line errors


def assert_one_line_error(result: tuple[int, str, str], *words: str) -> None:
    code, _, err = result
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert all(word in err for word in words), err


def test_bad_uses_are_one_line_errors(transformer, tmp_path, capsys):
    (tmp_path / "a-file").write_text("kept\n")
    missing = tmp_path / "a-file" / "page.html"  # a folder that cannot be made
    assert_one_line_error(run_cli(capsys, transformer, "a", "--html", str(missing)), "not a folder")  # fmt: skip
    assert_one_line_error(run_cli(capsys, transformer, "a", "--html", str(tmp_path)), "folder")
    assert_one_line_error(run_cli(capsys, transformer, "--probes", "-i", "x.txt"), "--probes")
    assert_one_line_error(run_cli(capsys, transformer, "", "--html", str(tmp_path / "p.html")), "empty")  # fmt: skip
    assert (tmp_path / "a-file").read_text() == "kept\n"


def test_a_model_without_attention_or_probes_is_a_one_line_error(
    gru_without_attention, tmp_path, capsys
):
    page = str(tmp_path / "page.html")
    assert_one_line_error(run_cli(capsys, gru_without_attention, "--probes"), "de→fr")
    assert_one_line_error(run_cli(capsys, gru_without_attention, "a b", "--html", page), "attention=none")  # fmt: skip
