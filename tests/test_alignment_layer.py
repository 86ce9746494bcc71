"""The separate alignment layer (`alignment=layer`, seq2seq/models/alignment_layer.py): what
its query has read, its weights and loss against loops, the gradient it sends back, a
translation model that trains exactly as its twin, search untouched, toy alignments learned
guided and unsupervised, and the commands that read it."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
import torch
from helpers import TINY_TOY, compose_config
from hydra.errors import ConfigCompositionException

from seq2seq.align.defaults import LAYER, default_settings
from seq2seq.align.extract import (
    AlignSettings,
    Sentence,
    hypothesis_layer_weights,
    links_from_attention,
    translation_links,
)
from seq2seq.align.teacher_forced import teacher_forced_weights
from seq2seq.config.build import ConfigError, build_model, plain
from seq2seq.config.search_settings import SearchSettings
from seq2seq.config.value_checks import check_settings
from seq2seq.metrics.alignment_accuracy import alignment_accuracy, toy_links
from seq2seq.models.alignment_layer import AlignmentLayer, scaled_gradient
from seq2seq.runs.assemble import assemble_trainer, train_and_test
from seq2seq.search.batched import translate_ids
from seq2seq.search.translator import Translator
from seq2seq.training.alignment_layer_loss import LayerTraining, teacher_labels
from seq2seq.training.guided_alignment import alignment_loss

QUICK = TINY_TOY + ["trainer.max_steps=2", "trainer.valid_every=2", "logging.tensorboard=false",
                    "trainer.test_search.beam_size=1", "data.source.train_size=48",
                    "data.source.valid_size=8", "data.source.test_size=8"]  # fmt: skip
SMALL_TRANSFORMER = ["encoder=transformer", "decoder=transformer", "attention=multihead",
                     "encoder.hidden_size=32", "decoder.hidden_size=32", "encoder.ff_size=32",
                     "decoder.ff_size=32", "encoder.num_layers=1", "decoder.num_layers=2",
                     "encoder.heads=2", "decoder.heads=2", "attention.heads=2"]  # fmt: skip
FAMILIES = {
    "gru_bahdanau": [],
    "lstm_luong": ["encoder=lstm", "decoder=lstm", "decoder.style=luong"],
    "rnn_no_feeding": ["encoder=rnn", "decoder=rnn", "decoder.input_feeding=false"],
    "cnn": ["encoder=cnn", "decoder=cnn", "attention=dot", "encoder.hidden_size=32",
            "decoder.num_layers=2", "decoder.kernel_size=3", "encoder.num_layers=1"],
    "transformer": SMALL_TRANSFORMER,
}  # fmt: skip
VOCAB = 14


def layer_model(*overrides: str) -> torch.nn.Module:
    cfg = compose_config(QUICK + ["alignment=layer", *overrides])
    return build_model(cfg, VOCAB, VOCAB).eval()


def layer_rows(model, tgt_in: torch.Tensor) -> torch.Tensor:
    src = torch.tensor([[4, 5, 6, 7, 3]])
    return model.alignment_weights(src, src != 0, tgt_in)[0]  # (heads, tgt_len, src_len)


# ---------------------------------------------------------------- what the query has read


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_row_t_reads_piece_t_and_nothing_after_it(family):
    """Row t (target piece t = tgt_in[t + 1]) changes with piece t and not with piece t + 1:
    its query is the decoder's output after reading the piece, in every family."""
    torch.manual_seed(0)
    model = layer_model(*FAMILIES[family])
    tgt_in = torch.tensor([[2, 8, 9, 10, 11]])  # BOS, pieces 0..3
    t = 1  # piece 1 is tgt_in[2]
    with_piece = tgt_in.clone()
    with_piece[0, t + 1] = 12
    with_later = tgt_in.clone()
    with_later[0, t + 2] = 12
    base, piece, later = (layer_rows(model, x) for x in (tgt_in, with_piece, with_later))
    torch.testing.assert_close(piece[:, :t], base[:, :t])  # earlier rows: not read yet
    assert (piece[:, t] - base[:, t]).abs().max() > 1e-4  # row t has read piece t
    torch.testing.assert_close(later[:, : t + 1], base[:, : t + 1])  # nothing after it
    assert torch.equal(base[:, -1], torch.zeros_like(base[:, -1]))  # EOS's row links nothing


def test_the_full_context_query_also_sees_the_pieces_after():
    torch.manual_seed(0)
    model = layer_model(*SMALL_TRANSFORMER, "alignment.query=full_context")
    tgt_in = torch.tensor([[2, 8, 9, 10, 11]])
    changed = tgt_in.clone()
    changed[0, 4] = 12
    assert (layer_rows(model, changed)[:, 0] - layer_rows(model, tgt_in)[:, 0]).abs().max() > 1e-4


# ---------------------------------------------------------------- numbers against loops


@pytest.mark.parametrize("embeddings", [False, True])
def test_the_layer_is_the_documented_attention(embeddings):
    torch.manual_seed(0)
    layer = AlignmentLayer(8, heads=2, embed_dim=6 if embeddings else None)
    hidden, memory = torch.randn(2, 4, 8), torch.randn(2, 3, 8)
    target, source = torch.randn(2, 4, 6), torch.randn(2, 3, 6)
    mask = torch.tensor([[True, True, True], [True, True, False]])
    got = layer(hidden, memory, mask, (target, source) if embeddings else None)  # (2, 2, 4, 3)
    for b in range(2):
        for t in range(3):
            q = layer.query_proj(layer.query_norm(hidden[b, t + 1]))  # has read piece t
            if embeddings:
                q = q + layer.embedding_query(target[b, t + 1])  # piece t's own embedding

            keys = layer.key_proj(memory[b])  # (S, 8)
            if embeddings:
                keys = keys + layer.embedding_key(source[b])
            for h in range(2):
                part = slice(4 * h, 4 * h + 4)
                scores = [
                    float((q[part] @ keys[s, part]).detach()) / math.sqrt(4)
                    if mask[b, s] else -math.inf
                    for s in range(3)
                ]  # fmt: skip
                top = max(scores)
                exps = [math.exp(x - top) for x in scores]
                for s in range(3):
                    assert got[b, h, t, s].item() == pytest.approx(exps[s] / sum(exps), abs=1e-6)
        assert torch.equal(got[b, :, 3], torch.zeros(2, 3))


def test_teacher_labels_against_a_loop():
    """Row t learns from the teacher's row t + lag, the source's EOS left out, only where
    t + lag is a real step."""
    torch.manual_seed(0)
    attention = torch.softmax(torch.randn(2, 2, 3, 5, 4), dim=-1)  # (B, layers, heads, T, S)
    src_mask = torch.tensor([[True] * 4, [True, True, True, False]])
    tgt_out = torch.tensor([[8, 9, 10, 11, 3], [8, 9, 3, 0, 0]])
    for labels in ("argmax", "soft"):
        training = LayerTraining("unsupervised", teacher_layer=-1, teacher_heads=(0, 2),
                                 labels=labels, lag=1)  # fmt: skip
        got = teacher_labels(attention, src_mask, tgt_out, training)
        for b in range(2):
            steps, pieces = int((tgt_out[b] != 0).sum()), int(src_mask[b].sum()) - 1
            for t in range(5):
                row = torch.zeros(4)
                if t + 1 < steps:
                    teacher = (attention[b, 1, 0, t + 1] + attention[b, 1, 2, t + 1]) / 2
                    kept = teacher[:pieces]
                    if labels == "soft":
                        row[:pieces] = kept / kept.sum()
                    else:
                        row[int(kept.argmax())] = 1.0
                torch.testing.assert_close(got[b, t], row)


def test_the_layer_loss_is_cross_entropy_over_the_labelled_rows():
    weights = torch.softmax(torch.randn(1, 3, 4), dim=-1)
    target = torch.tensor([[[0.5, 0.5, 0, 0], [0, 0, 0, 0], [0, 0, 1.0, 0]]])
    total, rows = alignment_loss(weights, target, "ce")
    expected = -(0.5 * math.log(weights[0, 0, 0]) + 0.5 * math.log(weights[0, 0, 1])
                 + math.log(weights[0, 2, 2]))  # fmt: skip
    assert total.item() == pytest.approx(expected, rel=1e-5)
    assert rows.item() == 2


# ---------------------------------------------------------------- the gradient it sends back


def shared_gradients(gradient: float) -> dict[str, torch.Tensor]:
    """The gradient of the layer's loss alone on the translation model's parameters."""
    torch.manual_seed(0)
    model = layer_model(*SMALL_TRANSFORMER, f"alignment.gradient={gradient}").train()
    src, tgt_in = torch.tensor([[4, 5, 6, 3]]), torch.tensor([[2, 8, 9, 10]])
    _, _, aligned = model(src, src != 0, tgt_in, alignment_layer=True)
    target = torch.zeros_like(aligned[:, 0])
    target[0, :3, 1] = 1.0
    alignment_loss(aligned.mean(dim=1), target)[0].backward()
    layer = {id(p) for p in model.alignment_layer.parameters()}
    assert all(p.grad is not None for p in model.alignment_layer.parameters())
    return {name: p.grad for name, p in model.named_parameters() if id(p) not in layer}


def test_a_stopped_gradient_reaches_no_shared_parameter_and_a_scaled_one_is_scaled():
    assert all(grad is None for grad in shared_gradients(0.0).values())
    whole, half = shared_gradients(1.0), shared_gradients(0.5)
    reached = [name for name, grad in whole.items() if grad is not None and grad.abs().sum() > 0]
    assert any(name.startswith("decoder.") for name in reached)
    assert any(name.startswith("encoder.") for name in reached)
    for name in reached:
        torch.testing.assert_close(half[name], 0.5 * whole[name])


def test_scaled_gradient_keeps_the_value():
    x = torch.randn(3, requires_grad=True)
    y = scaled_gradient(x, 0.25)
    torch.testing.assert_close(y, x)
    y.sum().backward()
    torch.testing.assert_close(x.grad, torch.full((3,), 0.25))


# ---------------------------------------------------------------- the translation untouched


def translation_state(model) -> dict[str, torch.Tensor]:
    return {k: v for k, v in model.state_dict().items() if not k.startswith("alignment_layer.")}


@pytest.mark.parametrize(
    ("training", "attention"),
    [("guided", "additive"), ("unsupervised", "additive"), ("guided", "scaled_dot"),
     ("unsupervised", "scaled_dot")],
)  # fmt: skip
def test_with_the_gradient_stopped_the_translation_model_trains_exactly_as_its_twin(
    tmp_path, training, attention
):
    """Guided (the toy task's known links) or unsupervised (the model's own attention),
    gradient stopped: every translation weight after 3 updates is bit for bit the twin's,
    as is the test output. So a guided layer run's test BLEU and translation attention are
    its twin's (the comparison's guided layer rows rely on it). The one exception: the
    unsupervised layer reads the attention weights, which scaled dot-product attention
    otherwise leaves inside its fused kernel, so there the weights agree up to rounding."""
    trained = {}
    layer = ["alignment=layer", "alignment.weight=1", f"alignment.training={training}"]
    for name, extra in (("twin", []), ("layer", layer)):
        cfg = compose_config(QUICK + ["trainer.max_steps=3", f"attention={attention}", *extra,
                                      f"data.root={tmp_path / 'data'}"])  # fmt: skip
        results = train_and_test(cfg, tmp_path / name, outputs_root=tmp_path)
        trained[name] = (Translator.load(tmp_path / name / "checkpoints" / "last.pt"), results)
    twin, layer = (translation_state(trained[name][0].model) for name in ("twin", "layer"))
    assert twin.keys() == layer.keys()
    if (training, attention) == ("unsupervised", "scaled_dot"):
        for key in twin:
            torch.testing.assert_close(layer[key], twin[key], atol=1e-5, rtol=1e-4)
        return
    assert all(torch.equal(twin[key], layer[key]) for key in twin)
    assert (tmp_path / "twin" / "test.hyp").read_text() == (tmp_path / "layer" / "test.hyp").read_text()
    # and the layer did learn beside it: a loss at every logged update, not a layer left idle
    logged = (tmp_path / "layer" / "metrics.jsonl").read_text().splitlines()
    losses = [json.loads(line).get("train/align_loss") for line in logged]
    assert losses and all(loss is not None and loss > 0 for loss in losses)


def test_search_is_the_same_with_and_without_the_layer():
    torch.manual_seed(0)
    model = layer_model(*SMALL_TRANSFORMER)
    sources = [[4, 5, 6], [7, 8], [9, 10, 11, 12]]
    settings = SearchSettings(beam_size=3, max_len_a=0.0, max_len_b=6)
    with_layer = translate_ids(model, sources, settings, torch.device("cpu"))
    model.alignment_layer = None
    without = translate_ids(model, sources, settings, torch.device("cpu"))
    for a, b in zip(with_layer, without, strict=True):
        assert [h.tokens for h in a] == [h.tokens for h in b]
        assert [h.score for h in a] == [h.score for h in b]


# ---------------------------------------------------------------- learning the toy alignment

LEARNING = ["trainer.max_steps=150", "trainer.valid_every=150", "trainer.valid_max_sentences=8",
            "logging.tensorboard=false", "schedule.warmup_steps=1", "optim.lr=0.02"]  # fmt: skip


def layer_accuracy(trainer, task: str) -> tuple[float, float]:
    """(the layer's accuracy, the translation attention's read as it is) against the toy
    task's known links, teacher forced on the valid split."""
    examples = [(list(src), list(tgt)) for src, tgt in trainer.data.valid.examples]
    gold = [toy_links(task, len(src)) for src, _ in examples]
    cpu = torch.device("cpu")
    layer = teacher_forced_weights(trainer.model, examples, cpu, "layer")
    attention = teacher_forced_weights(trainer.model, examples, cpu)
    return (
        alignment_accuracy([w[0].mean(dim=0) for w in layer], gold),
        alignment_accuracy([w[-1].mean(dim=0) for w in attention], gold),
    )


def test_the_guided_layer_learns_the_reversal(tmp_path):
    """Guided by the known links, its gradient let through (`alignment.gradient=1`)."""
    cfg = compose_config(TINY_TOY + LEARNING + ["alignment=layer", "alignment.weight=1",
                                                "alignment.gradient=1", f"data.root={tmp_path}"])  # fmt: skip
    trainer = assemble_trainer(cfg, tmp_path / "run", observe=False)
    trainer.fit()
    layer, attention = layer_accuracy(trainer, cfg.data.source.task)
    assert layer >= 0.9 > 0.6 > attention, (layer, attention)


def test_the_unsupervised_layer_learns_the_anti_diagonal_from_a_shifted_attention(tmp_path):
    """The translation attention is taught the reversal one step late (guided, shift 1: the
    step that has read piece t looks at its source); a new layer, reading that attention one
    step on (teacher_shift 1) and nothing else, learns the anti-diagonal for piece t itself,
    while the attention read as it is stays off it."""
    shifted = compose_config(TINY_TOY + LEARNING + ["alignment=guided", "alignment.weight=1",
                                                    "alignment.shift=1", f"data.root={tmp_path}"])  # fmt: skip
    teacher = assemble_trainer(shifted, tmp_path / "teacher", observe=False)
    teacher.fit()
    cfg = compose_config(TINY_TOY + LEARNING + [
        "alignment=layer", "alignment.training=unsupervised", "alignment.teacher_shift=1",
        "alignment.weight=1", "trainer.max_steps=300", f"data.root={tmp_path}"])  # fmt: skip
    trainer = assemble_trainer(cfg, tmp_path / "layer", observe=False)
    trainer.model.load_state_dict(teacher.model.state_dict(), strict=False)  # the layer is new
    for parameter in trainer.model.parameters():
        parameter.requires_grad_(False)
    for parameter in trainer.model.alignment_layer.parameters():
        parameter.requires_grad_(True)
    trainer.fit()
    layer, attention = layer_accuracy(trainer, cfg.data.source.task)
    assert layer >= 0.85 > 0.5 > attention, (layer, attention)  # measured: 0.90, 0.18


# ---------------------------------------------------------------- settings and the commands


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["alignment.query=full_context"], "alignment.query=full_context needs a decoder"),
        (["alignment.layer_heads=3", *SMALL_TRANSFORMER], "alignment.layer_heads=3 must divide"),
        (["alignment.training=unsupervised", "attention=none"], "attention=none has none"),
        (["alignment.gradient=2"], r"alignment.gradient must be in \[0, 1\]"),
    ],
)
def test_settings_the_layer_cannot_use_are_refused(overrides, message):
    cfg = plain(compose_config(QUICK + ["alignment=layer", *overrides]))
    with pytest.raises(ConfigError, match=message):
        check_settings(cfg)


def test_a_training_the_layer_does_not_know_is_refused_when_composed():
    with pytest.raises(ConfigCompositionException, match="alignment.training=self"):
        compose_config(QUICK + ["alignment=layer", "alignment.training=self"])


@pytest.fixture(scope="module")
def layer_checkpoint(tmp_path_factory):
    folder = tmp_path_factory.mktemp("layer_checkpoint")
    cfg = compose_config(QUICK + ["alignment=layer", f"data.root={folder / 'data'}"])
    train_and_test(cfg, folder / "run", outputs_root=folder)
    return folder / "run" / "checkpoints" / "best.pt"


def test_a_layer_checkpoint_aligns_with_its_layer_by_default(layer_checkpoint):
    translator = Translator.load(layer_checkpoint)
    found = default_settings(translator)
    assert found.source == LAYER and found.settings.source == LAYER
    assert "alignment layer" in found.description
    assert default_settings(translator, use_layer=False).settings.source == "attention"


def test_translation_links_of_the_layer_are_those_of_its_teacher_forced_weights(layer_checkpoint):
    translator = Translator.load(layer_checkpoint)
    settings = default_settings(translator).settings
    translation = translator.translate(["4 5 6 7"], SearchSettings(beam_size=1), need_weights=True)[0]
    links = translation_links(translator, translation, settings)
    ids = translator.src_tokenizer.encode(translation.source)
    weights = teacher_forced_weights(
        translator.model, [(ids, translation.hypotheses[0].tokens)], torch.device("cpu"), "layer"
    )[0]
    source = Sentence(translation.source, translation.source_pieces)
    target = Sentence(translation.texts[0], translation.target_pieces[0])
    assert links[0] == links_from_attention(weights, source, target, settings)
    attention_links = translation_links(translator, translation, AlignSettings())
    assert len(attention_links) == 1  # the translation attention is still there to read


def test_seq2seq_align_names_the_layer_and_reads_the_attention_when_asked(layer_checkpoint, tmp_path):
    src, tgt = tmp_path / "s.txt", tmp_path / "t.txt"
    src.write_text("4 5 6\n7 8\n")
    tgt.write_text("6 5 4\n8 7\n")
    command = [sys.executable, "-m", "seq2seq.cli.align", str(layer_checkpoint),
               "--src", str(src), "--tgt", str(tgt)]  # fmt: skip
    layer = subprocess.run(command, capture_output=True, text=True, check=True)
    assert "aligned with the alignment layer" in layer.stderr
    assert len(layer.stdout.splitlines()) == 2
    attention = subprocess.run([*command, "--attention"], capture_output=True, text=True, check=True)
    assert "alignment layer" not in attention.stderr and "aligned with layer" in attention.stderr


def test_an_old_checkpoint_without_the_layer_reads_as_before():
    torch.manual_seed(0)
    model = build_model(compose_config(QUICK), VOCAB, VOCAB).eval()
    assert model.alignment_layer is None
    assert teacher_forced_weights(model, [([4, 5], [6])], torch.device("cpu"), "layer") is None
    weights = teacher_forced_weights(model, [([4, 5], [6])], torch.device("cpu"))
    assert weights is not None and weights[0].shape[-2:] == (2, 3)
    assert json.dumps(list(translation_state(model))) == json.dumps(list(model.state_dict()))


def test_a_layer_setting_without_the_layer_is_one_line_naming_the_option(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "seq2seq.cli.train", "alignment.training=unsupervised",
         f"hydra.run.dir={tmp_path / 'run'}"],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "seq2seq-train: alignment.training is a setting of the alignment layer: add "
        "alignment=layer (the default, alignment=none, has no settings)"
    ]
    assert not (tmp_path / "run").exists()


def test_the_api_result_carries_the_layer_weights_its_links_come_from(layer_checkpoint):
    import seq2seq

    model = seq2seq.load(layer_checkpoint)
    result = model.translate("4 5 6 7", progress=False)
    weights = result.alignment_layer  # (heads, target pieces + EOS, source pieces + EOS)
    assert weights is not None and weights.shape[1:] == (
        len(result.translation.target_pieces[0]), len(result.translation.source_pieces))
    same = hypothesis_layer_weights(model.translator, result.translation)[0][0].numpy()
    assert (weights == same).all()
    found = default_settings(model.translator).settings
    expected = translation_links(model.translator, result.translation, found)[0]
    assert result.links == sorted(expected.sure)


@pytest.mark.parametrize("training", ["guided", "unsupervised"])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_decoder_family_trains_its_layer_both_ways(family, training, tmp_path):
    cfg = compose_config(QUICK + FAMILIES[family] + [
        "alignment=layer", f"alignment.training={training}", f"data.root={tmp_path / 'data'}"])  # fmt: skip
    results = train_and_test(cfg, tmp_path / "run", outputs_root=tmp_path)
    assert results["steps"] == 2
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert all(math.isfinite(row["train/align_loss"]) and row["train/align_loss"] > 0 for row in rows)
    translator = Translator.load(tmp_path / "run" / "checkpoints" / "best.pt")
    assert translator.model.alignment_layer is not None  # stored, rebuilt and loaded
    assert default_settings(translator).source == LAYER
