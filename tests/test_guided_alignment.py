"""Guided alignment (alignment=guided): word links moved onto pieces, the loss, where its
gradient goes, every decoder family training with it, and the start-up refusals."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from helpers import LEXICON, TINY_TOY, compose_config
from hydra.errors import ConfigCompositionException

from seq2seq.align import training_links as guidance_module
from seq2seq.align.teacher_forced import read_later, teacher_forced_weights
from seq2seq.align.training_links import (
    NO_LINKS,
    check_links_source,
    moved_onto_pieces,
    with_training_links,
)
from seq2seq.checkpoint import load_checkpoint
from seq2seq.config.build import ConfigError, build_model, plain
from seq2seq.config.stored import validated_config
from seq2seq.config.value_checks import check_settings
from seq2seq.data.batching import ParallelData, collate
from seq2seq.data.fetch import MIRROR_ENV
from seq2seq.data.links import GuidedSplit, PieceLinks, link_targets, stored_rows
from seq2seq.data.prepare import prepare
from seq2seq.metrics.alignment_accuracy import alignment_accuracy, toy_links
from seq2seq.runs.assemble import assemble_trainer, check_startup, data_config, train_and_test
from seq2seq.training.guided_alignment import (
    EPSILON,
    Guidance,
    alignment_loss,
    guided_loss,
    resolve_layer,
    shifted_target,
    supervised_attention,
)

QUICK = TINY_TOY + ["trainer.max_steps=2", "trainer.valid_every=2", "logging.tensorboard=false",
                    "trainer.test_search.beam_size=1", "data.source.train_size=48",
                    "data.source.valid_size=8", "data.source.test_size=8", "alignment=guided"]  # fmt: skip
SMALL_TRANSFORMER = ["encoder=transformer", "decoder=transformer", "attention=multihead",
                     "encoder.hidden_size=32", "decoder.hidden_size=32", "encoder.ff_size=32",
                     "decoder.ff_size=32", "encoder.num_layers=1", "decoder.num_layers=2",
                     "encoder.heads=2", "decoder.heads=2", "attention.heads=2"]  # fmt: skip


class PieceTokenizer:
    """A tokenizer whose ids are indices into a fixed list of pieces."""

    def __init__(self, pieces: list[str]) -> None:
        self.table = ["<pad>", "<unk>", "<s>", "</s>", *pieces]

    def id_to_piece(self, index: int) -> str:
        return self.table[index]

    def ids(self, pieces: list[str]) -> list[int]:
        return [self.table.index(piece) for piece in pieces]


# ---------------------------------------------------------------- words onto pieces


def test_a_hand_made_pair_gives_the_hand_computed_piece_matrix():
    source, target = "我喜欢猫。", "I like cats."  # 5 source words (characters), 3 target words
    src_tok = PieceTokenizer(["▁我", "喜", "欢", "猫", "。"])
    tgt_tok = PieceTokenizer(["▁I", "▁li", "ke", "▁cat", "s", "."])
    src_ids = src_tok.ids(["▁我", "喜", "欢", "猫", "。"])
    tgt_ids = tgt_tok.ids(["▁I", "▁li", "ke", "▁cat", "s", "."])
    split = ParallelData([(src_ids, tgt_ids)], [source], [target])
    word_links = [
        {(0, 0), (1, 1), (2, 1), (3, 2), (4, 2)}
    ]  # 我-I 喜-like 欢-like 猫-cats. 。-cats.
    links = PieceLinks.from_lists(moved_onto_pieces(word_links, split, (src_tok, tgt_tok)))
    align = GuidedSplit.of(split, links).batch([0]).align[0]  # (tgt 6 + EOS, src 5 + EOS)
    half = 0.5
    expected = torch.tensor(
        [
            [1, 0, 0, 0, 0, 0],  # ▁I    -> 我
            [0, half, half, 0, 0, 0],  # ▁li  -> 喜 欢
            [0, half, half, 0, 0, 0],  # ke   -> 喜 欢
            [0, 0, 0, half, half, 0],  # ▁cat -> 猫 。
            [0, 0, 0, half, half, 0],  # s    -> 猫 。
            [0, 0, 0, half, half, 0],  # .    -> 猫 。
            [0, 0, 0, 0, 0, 0],  # EOS: no word, no link
        ],
        dtype=torch.float32,
    )
    torch.testing.assert_close(align, expected)


def test_link_targets_pad_and_normalise_each_row():
    links = [np.array([[0, 1], [0, 2], [2, 0]]), np.zeros((0, 2), dtype=np.int64)]
    target = link_targets(links, tgt_len=4, src_len=3)
    assert target.shape == (2, 4, 3) and target.dtype == torch.float32
    torch.testing.assert_close(target[0, 0], torch.tensor([0.0, 0.5, 0.5]))
    torch.testing.assert_close(target[0, 2], torch.tensor([1.0, 0.0, 0.0]))
    assert target[0, 1].sum() == 0 and target[0, 3].sum() == 0 and target[1].sum() == 0


def test_a_split_without_links_batches_as_before():
    split = ParallelData([([4, 5], [6]), ([7], [8, 9])], ["a b", "c"], ["d", "e f"])
    batch = split.batch([1, 0])
    assert batch.align is None
    assert torch.equal(batch.tgt_out, collate([split[1], split[0]], [1, 0]).tgt_out)
    guided = GuidedSplit.of(split, PieceLinks.from_lists([[(0, 0)], [(1, 0)]]))
    picked = guided.select([1])
    assert isinstance(picked, GuidedSplit)
    assert picked.batch([0]).align[0, 1, 0] == 1.0


# ---------------------------------------------------------------- the loss


def test_the_loss_matches_a_computation_by_loops():
    generator = torch.Generator().manual_seed(3)
    batch, layers, heads, tgt_len, src_len = 3, 2, 3, 5, 7
    attention = torch.softmax(
        torch.randn(batch, layers, heads, tgt_len, src_len, generator=generator), -1
    )
    attention[0, 0, 1:3, 2, 4] = 0.0  # an exact zero at a link: ε keeps it finite
    target = torch.zeros(batch, tgt_len, src_len)
    for b, t, s in [(0, 0, 1), (0, 2, 4), (0, 2, 5), (1, 1, 0), (2, 4, 6), (2, 3, 3), (2, 3, 2)]:
        target[b, t, s] = 1.0
    target = target / target.sum(-1, keepdim=True).clamp_min(1.0)
    guidance = Guidance(layer=-2, heads=(1, 2), loss="ce")
    alpha = attention[:, 0, 1:3].mean(1).numpy()  # layer −2 of 2 is layer 0; heads 1, 2
    p = target.numpy()
    ce = mse = 0.0
    rows = 0
    for b in range(batch):
        for t in range(tgt_len):
            if p[b, t].sum() == 0:
                continue
            rows += 1
            for s in range(src_len):
                ce -= p[b, t, s] * math.log(max(alpha[b, t, s], EPSILON))
                mse += (alpha[b, t, s] - p[b, t, s]) ** 2
    summed, linked = guided_loss(attention, target, guidance)
    assert linked.item() == rows == 5
    assert alpha[0, 2, 4] == 0.0
    assert summed.item() == pytest.approx(ce, rel=1e-5)
    summed, _ = guided_loss(attention, target, Guidance(layer=0, heads=(1, 2), loss="mse"))
    assert summed.item() == pytest.approx(mse, rel=1e-5)


def test_a_shift_moves_each_row_down_and_supervises_no_padding():
    target = torch.zeros(2, 4, 3)
    target[0, 0, 2] = target[0, 1, 0] = target[0, 2, 1] = 1.0  # 3 pieces, EOS in row 3
    target[1, 0, 1] = 1.0  # 1 piece, EOS in row 1, rows 2 and 3 padding
    rows = torch.tensor([[True, True, True, True], [True, True, False, False]])
    assert torch.equal(shifted_target(target, 0, rows), target)
    one = shifted_target(target, 1, rows)
    assert one[0].nonzero().tolist() == [[1, 2], [2, 0], [3, 1]]  # the last on EOS's row
    assert one[1].nonzero().tolist() == [[1, 1]]
    two = shifted_target(target, 2, rows)
    assert two[0].nonzero().tolist() == [[2, 2], [3, 0]]  # the last piece's links dropped
    assert two[1].nonzero().tolist() == []  # row 2 is padding: never supervised


def test_the_shifted_loss_is_the_loss_of_the_rows_k_steps_later():
    generator = torch.Generator().manual_seed(5)
    attention = torch.softmax(torch.randn(2, 1, 1, 5, 4, generator=generator), -1)
    target = torch.zeros(2, 5, 4)
    for b, t, s in [(0, 0, 1), (0, 1, 3), (0, 2, 0), (1, 0, 2), (1, 1, 2)]:
        target[b, t, s] = 1.0
    rows = torch.tensor([[True] * 4 + [False], [True] * 3 + [False] * 2])
    alpha = attention[:, 0, 0].numpy()
    expected = -sum(math.log(alpha[b, t + 1, s]) for b, t, s in
                    [(0, 0, 1), (0, 1, 3), (0, 2, 0), (1, 0, 2), (1, 1, 2)])  # fmt: skip
    summed, linked = guided_loss(attention, target, Guidance(layer=0, shift=1), rows)
    assert linked.item() == 5 and summed.item() == pytest.approx(expected, rel=1e-5)
    with pytest.raises(ValueError, match="target positions"):
        guided_loss(attention, target, Guidance(layer=0, shift=1))


def test_a_shifted_model_is_read_that_many_steps_later(tmp_path):
    cfg = compose_config(TINY_TOY + ["alignment=guided", "alignment.shift=1"])
    model = build_model(cfg, 20, 20).eval()
    assert model.alignment_shift == 1
    with pytest.raises(ConfigCompositionException, match="alignment.shift"):
        compose_config(TINY_TOY + ["alignment.shift=1"])  # alignment=none has no settings
    examples = [([5, 6, 7], [8, 9]), ([5, 6], [8, 9, 10, 11])]
    read = teacher_forced_weights(model, examples, torch.device("cpu"))
    batch = collate(examples, [0, 1])
    with torch.no_grad():
        _, raw = model(batch.src, batch.src_mask, batch.tgt_in, need_weights=True)
    for row, ((src, tgt), weights) in enumerate(zip(examples, read)):
        steps = raw[row, :, :, : len(tgt) + 1, : len(src) + 1]
        torch.testing.assert_close(weights[:, :, :-1], steps[:, :, 1:])
        assert weights[:, :, -1].abs().sum() == 0  # EOS's row reads no step: it links nothing
    moved = read_later(torch.arange(6.0).reshape(3, 2), 2)
    assert moved.tolist() == [[4.0, 5.0], [0.0, 0.0], [0.0, 0.0]]


@pytest.mark.parametrize(
    ("decoder", "lag"),
    [
        (["decoder=gru"], 2),
        (["decoder=gru", "decoder.style=luong"], 1),
        (SMALL_TRANSFORMER, 1),
        (["encoder=cnn", "decoder=cnn"], 1),
    ],
    ids=["bahdanau", "luong", "transformer", "cnn"],
)
def test_shift_null_reads_each_decoder_where_its_query_has_read_the_piece(decoder, lag):
    guided = ["alignment=guided", "alignment.shift=null"]
    assert build_model(compose_config(TINY_TOY + decoder + guided), 20, 20).alignment_shift == lag
    fixed = compose_config(TINY_TOY + decoder + ["alignment=guided", "alignment.shift=0"])
    assert build_model(fixed, 20, 20).alignment_shift == 0


def test_layer_and_heads_are_chosen_as_documented():
    assert [resolve_layer(layer, 3) for layer in (-2, -1, 0, 2, 5, -7)] == [1, 2, 0, 2, 2, 0]
    assert resolve_layer(-2, 1) == 0  # the default on a one-layer stack: its only layer
    attention = torch.arange(2 * 3 * 2 * 1 * 1, dtype=torch.float32).reshape(2, 3, 2, 1, 1)
    every = supervised_attention(attention, -1, None)
    torch.testing.assert_close(every, attention[:, 2].mean(1))
    torch.testing.assert_close(supervised_attention(attention, 0, [1]), attention[:, 0, 1])


@pytest.mark.parametrize("region", ["sparsemax", "entmax15", "hard", "local"])
def test_a_region_with_exact_zeros_gives_a_finite_loss_and_gradient(region):
    cfg = compose_config(QUICK + [f"attention.region={region}", "attention.score=general"])
    model = build_model(cfg, 14, 14)
    src = torch.tensor([[4, 5, 6, 7, 8, 9, 10, 3]])
    tgt_in = torch.tensor([[2, 10, 9, 8, 7, 6, 5, 4]])
    _, attention = model(src, src != 0, tgt_in, need_weights=True)
    links = [np.array([[t, 6 - t] for t in range(7)])]  # the anti-diagonal
    target = link_targets(links, 8, 8)
    summed, _ = guided_loss(attention, target, Guidance())
    assert torch.isfinite(summed)
    summed.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)


def test_exact_zeros_cost_log_epsilon_per_unit_of_target():
    weights = torch.tensor([[[0.0, 1.0], [0.5, 0.5]]])
    target = torch.tensor([[[1.0, 0.0], [0.0, 0.0]]])  # the second row has no link
    summed, rows = alignment_loss(weights, target, "ce")
    assert summed.item() == pytest.approx(-math.log(EPSILON)) and rows.item() == 1


# ---------------------------------------------------------------- where the gradient goes


def untouched(parameter: torch.Tensor) -> bool:
    """No gradient, or an all-zero one (the layers not chosen get zeros from the stack)."""
    return parameter.grad is None or not parameter.grad.any()


def test_the_alignment_gradient_reaches_only_the_supervised_head_of_its_layer():
    cfg = compose_config(QUICK + SMALL_TRANSFORMER + ["model.tie_embeddings=false"])
    model = build_model(cfg, 14, 14)
    src = torch.tensor([[4, 5, 6, 7, 3], [8, 9, 3, 0, 0]])
    tgt_in = torch.tensor([[2, 7, 6, 5, 4], [2, 9, 8, 0, 0]])
    _, attention = model(src, src != 0, tgt_in, need_weights=True)  # (2, 2 layers, 2 heads, 5, 5)
    target = link_targets([np.array([[0, 3], [1, 2]]), np.array([[0, 1]])], 5, 5)
    summed, _ = guided_loss(attention, target, Guidance(layer=0, heads=(0,)))  # no NLL
    summed.backward()
    supervised, above = model.decoder.layers
    assert untouched(model.generator.weight) and untouched(model.generator.bias)
    assert all(untouched(p) for p in above.parameters())  # the layer above: nothing
    assert untouched(model.decoder.final_norm.weight)
    cross = supervised.cross_attention  # 2 heads of width 16: head 0 is rows 0..15 of W_Q
    assert untouched(cross.value_proj.weight) and untouched(cross.output_proj.weight)
    assert untouched(supervised.feed_forward.expand.weight)  # after the attention
    assert cross.query_proj.weight.grad[:16].any() and cross.key_proj.weight.grad[:16].any()
    assert not cross.query_proj.weight.grad[16:].any()  # the other head: nothing
    assert not cross.key_proj.weight.grad[16:].any()
    assert model.encoder.layers[0].feed_forward.expand.weight.grad.any()  # upstream: reached


# ---------------------------------------------------------------- the full-context pass


def test_the_full_context_pass_sees_later_targets_and_ignores_padding():
    model = build_model(compose_config(QUICK + SMALL_TRANSFORMER), 14, 14).eval()
    src = torch.tensor([[4, 5, 6, 3]])
    first, changed = torch.tensor([[2, 7, 6, 5]]), torch.tensor([[2, 7, 6, 9]])
    with torch.no_grad():
        causal = [model(src, src != 0, t, need_weights=True)[1] for t in (first, changed)]
        full = [model(src, src != 0, t, full_context=True)[1] for t in (first, changed)]
        padded = model(src, src != 0, torch.tensor([[2, 7, 6, 5, 0, 0]]), full_context=True)[1]
    torch.testing.assert_close(causal[0][..., :3, :], causal[1][..., :3, :])  # no peeking
    assert not torch.allclose(full[0][..., 0, :], full[1][..., 0, :])  # row 0 sees position 3
    torch.testing.assert_close(padded[..., :4, :], full[0], atol=1e-5, rtol=1e-4)


# ---------------------------------------------------------------- every decoder family


FAMILIES = {
    "rnn": ["encoder=rnn", "decoder=rnn"],
    "lstm_luong": ["encoder=lstm", "decoder=lstm", "decoder.style=luong", "trainer.accumulate=2"],
    "gru_scheduled_sampling": ["trainer.scheduled_sampling=0.5", "attention=sparsemax"],
    "cnn": ["encoder=cnn", "decoder=cnn", "attention=dot", "encoder.hidden_size=32",
            "decoder.num_layers=2", "decoder.kernel_size=3", "encoder.num_layers=1"],
    "transformer": SMALL_TRANSFORMER + ["alignment.loss=mse", "alignment.heads=null"],
    "transformer_full_context": SMALL_TRANSFORMER + ["alignment.full_context=true"],
}  # fmt: skip


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_decoder_family_trains_with_guidance(family, tmp_path):
    cfg = compose_config(QUICK + FAMILIES[family] + [f"data.root={tmp_path / 'data'}"])
    results = train_and_test(cfg, tmp_path / "run", outputs_root=tmp_path)
    assert results["steps"] == 2
    rows = [
        json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    ]
    assert all(
        math.isfinite(row["train/align_loss"]) and row["train/align_loss"] > 0 for row in rows
    )
    saved = load_checkpoint(tmp_path / "run" / "checkpoints" / "best.pt")["config"]
    assert validated_config(saved).alignment.guided  # a guided checkpoint loads as any other


# ---------------------------------------------------------------- learning the known alignment

LEARNING = ["trainer.max_steps=100", "trainer.valid_every=100", "trainer.valid_max_sentences=8",
            "logging.tensorboard=false", "schedule.warmup_steps=1", "optim.lr=0.02"]  # fmt: skip
TOY_COPY = ["data=toy_copy", "data.source.train_size=512", "data.source.valid_size=32",
            "data.source.test_size=32", "data.max_tokens=512"]  # fmt: skip


def supervised_accuracy(trainer, guidance: Guidance, task: str) -> float:
    """How often the heads that `guidance` supervises have the toy task's gold source as
    their argmax, teacher forced on the valid split."""
    examples = [(list(src), list(tgt)) for src, tgt in trainer.data.valid.examples]
    weights = teacher_forced_weights(trainer.model, examples, torch.device("cpu"))
    chosen = [supervised_attention(w[None], guidance.layer, guidance.heads)[0] for w in weights]
    return alignment_accuracy(chosen, [toy_links(task, len(src)) for src, _ in examples])


@pytest.mark.parametrize(
    ("model", "shift"),
    [
        (TINY_TOY, []),
        (TINY_TOY + TOY_COPY + SMALL_TRANSFORMER, []),
        (TINY_TOY + TOY_COPY + SMALL_TRANSFORMER, ["alignment.shift=1"]),
    ],
    ids=["gru_reverse", "transformer_copy", "transformer_copy_shift_1"],
)
def test_the_supervised_head_has_the_known_alignment_at_the_first_validation(
    model, shift, tmp_path
):
    """The guided head, read as the model is read (a shifted one a step later), gives the
    toy task's known alignment, which the same model unguided does not."""
    accuracy, guidance = {}, None
    guided_run = ["alignment=guided", "alignment.weight=1", *shift]
    for name, guided in (("guided", guided_run), ("plain", [])):
        cfg = compose_config(model + LEARNING + guided + [f"data.root={tmp_path / name}"])
        trainer = assemble_trainer(cfg, tmp_path / name / "run", observe=False)
        trainer.fit()  # 100 updates, the first validation at the last
        guidance = getattr(trainer.objective, "guidance", guidance)  # the plain run: read alike
        accuracy[name] = supervised_accuracy(trainer, guidance, cfg.data.source.task)
    assert accuracy["guided"] >= 0.8 > 0.4 > accuracy["plain"], accuracy  # 0.84-0.94 by seed


# ---------------------------------------------------------------- start-up


def test_no_aligner_and_no_links_file_stops_at_start_up(tmp_path, monkeypatch):
    monkeypatch.setattr(guidance_module, "eflomal_version", lambda: None)
    cfg = compose_config(["alignment=guided", f"data.root={tmp_path / 'data'}"])
    with pytest.raises(ConfigError) as raised:
        train_and_test(cfg, tmp_path / "run", outputs_root=tmp_path)
    assert str(raised.value) == NO_LINKS and "\n" not in NO_LINKS
    assert "data.alignments=PATH" in NO_LINKS and "[align]" in NO_LINKS
    assert not (tmp_path / "data").exists() and not (tmp_path / "run").exists()
    links = tmp_path / "train.align"
    links.write_text("0-0\n")
    check_links_source(plain(compose_config(["alignment=guided", f"data.alignments={links}"])))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["attention=none"], "attention=none"),
        (["alignment.full_context=true"], "full_context"),
        (["alignment.heads=[1]"], r"alignment\.heads"),
        (["alignment.heads=[]"], r"alignment\.heads"),
        (["alignment.weight=-1"], r"alignment\.weight"),
        (["alignment.weight=nan"], r"alignment\.weight"),
        (["alignment.shift=-1"], r"alignment\.shift"),
        (["alignment.shift=3"], r"alignment\.shift"),
        (["data.alignments=/no/such/links.align"], "no such file"),
    ],
)
def test_settings_guidance_cannot_use_are_refused(overrides, message):
    with pytest.raises(ConfigError, match=message):
        check_startup(compose_config(QUICK + overrides))


def test_an_old_checkpoint_config_gets_the_default_section():
    raw = json.loads(json.dumps(plain(compose_config(TINY_TOY))))
    del raw["alignment"]
    config = validated_config(raw)
    assert config.alignment.guided is False and config.alignment.shift == 0
    check_settings(config)


# ---------------------------------------------------------------- a corpus's links


def lexicon_links(source: str, target: str) -> str:
    """The Pharaoh line of a LEXICON pair: each Chinese character to its English word, the
    final 。 to the last word (which holds the full stop)."""
    english = target.rstrip(".").split()
    links, position = [], 0
    for j, word in enumerate(english):
        for _ in LEXICON[word]:
            links.append(f"{position}-{j}")
            position += 1
    assert source[position:] == "。"
    links.append(f"{position}-{len(english) - 1}")
    return " ".join(links)


CORPUS = ["data.name=synthetic", "data.source.sha256=null", "data.source.url=https://example.org/anki/toy-eng.zip",
          "data.source.member=toy.txt", "data.valid_size=20", "data.test_size=20",
          "data.src_vocab_size=30", "data.tgt_vocab_size=30", "data.max_len=15",
          "data.max_tokens=200", "alignment=guided"]  # fmt: skip


def test_a_links_file_follows_the_kept_pairs_and_is_cached(tmp_path, mirror, monkeypatch):
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    cfg = compose_config(CORPUS + [f"data.root={tmp_path / 'data'}"])
    data = prepare(data_config(cfg))
    folder = data.folder
    sources = (folder / "train.zh").read_text(encoding="utf-8").splitlines()
    targets = (folder / "train.en").read_text(encoding="utf-8").splitlines()
    path = tmp_path / "train.align"
    path.write_text("".join(lexicon_links(s, t) + "\n" for s, t in zip(sources, targets)))
    data_section = {**plain(cfg.data), "alignments": str(path)}
    guided = with_training_links(data_section, data)
    rows, total = stored_rows(guided.train)
    assert total == len(sources) > len(guided.train)  # data.max_len dropped the long pairs
    chinese = {character: en for en, zh in LEXICON.items() for character in zh}
    for index in range(len(guided.train)):
        src_ids, tgt_ids = guided.train.examples[index]
        assert guided.train.src_lines[index] == sources[rows[index]]
        english = guided.train.tgt_lines[index].rstrip(".").split()
        for t, s in guided.train.links[index].tolist():
            src_piece = data.src_tokenizer.id_to_piece(src_ids[s]).lstrip("▁")
            tgt_piece = data.tgt_tokenizer.id_to_piece(tgt_ids[t]).lstrip("▁").rstrip(".")
            words = {chinese.get(character, english[-1]) for character in src_piece}
            assert any(tgt_piece in word for word in words), (index, t, s)
    caches = sorted(folder.glob("links_*"))
    assert len(caches) == 1
    monkeypatch.setattr(guidance_module, "file_word_links", lambda *a: pytest.fail("recomputed"))
    again = with_training_links(data_section, data)
    assert [again.train.links[i].tolist() for i in range(5)] == [
        guided.train.links[i].tolist() for i in range(5)
    ]


def test_a_links_file_of_another_length_is_refused(tmp_path, mirror, monkeypatch):
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    cfg = compose_config(CORPUS + [f"data.root={tmp_path / 'data'}"])
    data = prepare(data_config(cfg))
    path = tmp_path / "short.align"
    path.write_text("0-0\n")
    with pytest.raises(ConfigError, match="data.alignments.*1 lines"):
        with_training_links({**plain(cfg.data), "alignments": str(path)}, data)


def test_the_statistical_aligner_makes_the_links_once(tmp_path, mirror, monkeypatch):
    pytest.importorskip("eflomal")
    monkeypatch.setenv(MIRROR_ENV, str(mirror))
    cfg = compose_config(CORPUS + [f"data.root={tmp_path / 'data'}"])
    data = prepare(data_config(cfg))
    guided = with_training_links(plain(cfg.data), data)
    assert guided.train.links.count() > len(guided.train)  # more than one link a pair
    monkeypatch.setattr(guidance_module, "run_eflomal", lambda *a: pytest.fail("aligned again"))
    again = with_training_links(plain(cfg.data), data)
    assert again.train.links[0].tolist() == guided.train.links[0].tolist()


# ---------------------------------------------------------------- data parallel


@pytest.mark.slow  # three training processes: about 15 s
def test_two_gloo_ranks_guided_train_like_one_process_accumulating(tmp_path):
    """λ·L_align joins the summed loss before the division by the target tokens, so DDP's
    average of two ranks' gradients is `trainer.accumulate=2`'s over the same batches."""
    common = TINY_TOY + [f"data.root={tmp_path / 'data'}", "trainer.max_steps=2",
                         "trainer.valid_every=2", "trainer.test_search.beam_size=1",
                         "decoder.dropout=0", "model.embed_dropout=0", "alignment=guided",
                         "data.source.valid_size=8",
                         "data.source.test_size=8", "logging.tensorboard=false"]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    torchrun = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    for name, launcher, extra in (("single", [], ["trainer.accumulate=2"]), ("ddp", torchrun, [])):
        command = [sys.executable, *launcher, "-m", "seq2seq.cli.train", *common, *extra,
                   f"hydra.run.dir={tmp_path / name}"]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
    one = load_checkpoint(tmp_path / "single" / "checkpoints" / "last.pt")
    two = load_checkpoint(tmp_path / "ddp" / "checkpoints" / "last.pt")
    assert two["progress"]["position"] == one["progress"]["position"] == 4
    for name, weight in one["model"].items():
        torch.testing.assert_close(two["model"][name], weight, rtol=1e-4, atol=1e-5, msg=name)


def test_a_guided_setting_without_guided_alignment_is_one_line_naming_the_option(tmp_path):
    """alignment=none (the default) composes as an empty node, so a setting of guided
    alignment cannot be given to it; the command says which option holds it."""
    result = subprocess.run(
        [sys.executable, "-m", "seq2seq.cli.train", "alignment.weight=2",
         f"hydra.run.dir={tmp_path / 'run'}"],
        capture_output=True, text=True, timeout=120, env=dict(os.environ, HYDRA_FULL_ERROR="0"),
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "seq2seq-train: alignment.weight is a setting of guided alignment: add "
        "alignment=guided (the default, alignment=none, has no settings)"
    ]
    assert not (tmp_path / "run").exists()
