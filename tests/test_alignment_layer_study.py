"""What the training images and the comparison show of the alignment layer (`alignment=layer`):
TensorBoard's `alignment_layer/...` image of each shown sentence, the comparison's layer
sweep (each family with the layer trained guided and unsupervised, tested against its twin
without one), the layer's test AER column and the column of both directions (each run with
its en→zh run, symmetrised)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import TINY_TOY, compose_config, run_main, toy_corpus_lines
from helpers import compare_settings as settings
from hook_fixtures import hooks_run
from lexicon_model import LEXICON_TRANSFORMER
from matplotlib.figure import Figure
from omegaconf import OmegaConf
from sweep_fixtures import (
    cells,
    degraded,
    read_csv,
    report,
    scored_run,
    sentences,
)

from seq2seq.align import gold as gold_module
from seq2seq.align.model_aer import checkpoint_aer
from seq2seq.cli import align
from seq2seq.config.search_settings import SearchSettings
from seq2seq.data.fetch import MIRROR_ENV
from seq2seq.runs.assemble import train_and_test
from seq2seq.search.batched import translate_ids
from seq2seq.search.translator import Translator
from seq2seq.special_tokens import BOS_ID, EOS_ID
from seq2seq.study import alignments, comparison
from seq2seq.study.alignments import collect_panels
from seq2seq.study.both_directions import fill_both, pairing_key
from seq2seq.study.comparison import run_comparison
from seq2seq.study.launch import Sweep
from seq2seq.study.report import ReportSettings, write_report
from seq2seq.study.sweep import Configuration, empty_row
from seq2seq.visualise.alignment_images import TOY_SHOWN, image_tag, layer_tag

LAYER = "alignment=layer"
BOTH_WAYS = "alignment.training=guided,unsupervised"


# ---------------------------------------------------------------- TensorBoard images


def hook_images(monkeypatch, *overrides: str):
    """A fresh toy model (`overrides` added) through its run's alignment hook at step 4:
    the logger, every `draw_alignment` call (pieces, weights, title), the model, the data,
    and the hook."""
    logger, drawn, model, data, (hook,) = hooks_run(
        monkeypatch, compose_config(TINY_TOY + list(overrides)), 4
    )
    return logger, drawn, model, data, hook


def test_a_model_with_a_layer_logs_the_layer_of_each_sentence_beside_its_attention(monkeypatch):
    logger, drawn, model, data, hook = hook_images(monkeypatch, LAYER)
    lines = data.valid.src_lines[:TOY_SHOWN]
    attention_tags = [image_tag(i, line) for i, line in enumerate(lines)]
    layer_tags = [layer_tag(tag) for tag in attention_tags]
    assert layer_tags[0] == attention_tags[0].replace("alignment/", "alignment_layer/")
    assert sorted(logger.images) == sorted(attention_tags + layer_tags)
    assert all(steps == [4] for steps in logger.images.values())

    layer_drawings = [entry for entry in drawn if "alignment layer" in entry[3]]
    assert len(layer_drawings) == len(lines)
    sources = [sentence.source_ids for sentence in hook.shown]
    nbest = translate_ids(model, sources, SearchSettings(beam_size=1), torch.device("cpu"))
    model.eval()
    for sentence, (best, *_), (src_pieces, tgt_pieces, weights, title) in zip(
        hook.shown, nbest, layer_drawings, strict=True
    ):
        # the layer fed the source and the greedy output, one sentence alone, by hand
        src = torch.tensor([sentence.source_ids + [EOS_ID]])
        tgt_in = torch.tensor([[BOS_ID, *best.tokens]])
        with torch.no_grad():
            by_hand = model.alignment_weights(src, src != 0, tgt_in)  # (1, heads, T, S)
        torch.testing.assert_close(weights, by_hand.mean(dim=1, keepdim=True), atol=1e-5, rtol=0)
        assert weights.shape == (1, 1, len(best.tokens) + 1, len(sentence.source_ids) + 1)
        assert src_pieces == sentence.source_pieces and len(tgt_pieces) == len(best.tokens) + 1
        assert title.endswith(" · alignment layer (guided)")


def test_a_model_without_a_layer_logs_no_layer_image(monkeypatch):
    logger, drawn, _, data, _ = hook_images(monkeypatch)
    lines = data.valid.src_lines[:TOY_SHOWN]
    assert sorted(logger.images) == sorted(image_tag(i, line) for i, line in enumerate(lines))
    assert not any("alignment layer" in title for *_, title in drawn)


def test_the_unsupervised_layer_says_so_in_its_title(monkeypatch):
    _, drawn, *_ = hook_images(monkeypatch, LAYER, "alignment.training=unsupervised")
    titles = [title for *_, title in drawn if "alignment layer" in title]
    assert len(titles) == TOY_SHOWN
    assert all(title.endswith(" · alignment layer (unsupervised)") for title in titles)


# ---------------------------------------------------------------- the layer sweep


def test_the_layer_rows_are_on_by_default_as_the_guided_rows_are():
    found = settings()
    assert found.guided == ["alignment=guided"] and "guided" in found.stages
    assert found.layer == [LAYER, BOTH_WAYS] and "layer" in found.stages
    assert found.report.layer_marker == LAYER


def test_no_layer_overrides_no_layer_sweep(tmp_path, monkeypatch):
    trained: list[Sweep] = []
    monkeypatch.setattr(comparison, "run_sweep", trained.append)
    found = settings(f"dir={tmp_path}", "stages=[layer]", "layer=[]")
    assert run_comparison(found, "compare") is None and trained == []


def layer_sweep(root: Path) -> Path:
    """Two seeds of the GRU and the CNN without a layer, with one trained guided and one
    unsupervised: the guided GRU's runs copy the references, the others make their twin's
    mistakes."""
    references = sentences(150, 0)
    prepared = root / "data" / "prepared" / "tatoeba_zh_en"
    prepared.mkdir(parents=True)
    (prepared / "test.en").write_text("\n".join(references) + "\n", encoding="utf-8")
    sweep, number = root / "layer", 0
    for experiment in ("compare_gru", "compare_cnn"):
        for training in (None, "guided", "unsupervised"):
            for seed in (1, 2):
                copies = training == "guided" and experiment == "compare_gru"
                twin = degraded(references, seed + (10 if experiment == "compare_cnn" else 0))
                hypotheses = references if copies else twin
                extra = (f"trainer.seed={seed}", f"data.root={root / 'data'}")
                extra += (LAYER, f"alignment.training={training}") if training else ()
                run = sweep / f"{number}_{experiment}_{training}_{seed}"
                scored_run(run, experiment, hypotheses, references, extra)
                number += 1
    return sweep


def test_layer_rows_are_named_by_how_the_layer_learned_and_tested_against_their_twin(tmp_path):
    out = tmp_path / "out"
    report([layer_sweep(tmp_path)], out, resamples=200)
    rows = read_csv(out / "comparison.csv")
    models = list(dict.fromkeys(row["model"] for row in rows))
    assert len(models) == 6
    for family in (models[:3], models[3:]):
        twin, guided, unsupervised = family
        assert guided == f"{twin} · alignment=layer (guided)"
        assert unsupervised == f"{twin} · alignment=layer (unsupervised)"
        tested = [row for row in rows if row["model"] in (guided, unsupervised)]
        assert len(tested) == 4 and all(row["baseline"] == twin for row in tested)
        assert all(row["baseline"] == "" for row in rows if row["model"] == twin)
    copies = [row for row in rows if float(row["test_bleu"]) > 99]
    assert len(copies) == 2 and all(row["model"] == models[1] for row in copies)
    assert all(row["significant_vs_baseline"] == "True" for row in copies)
    repeats = [row for row in rows if row["baseline"] and row not in copies]
    assert len(repeats) == 6 and all(float(row["p_vs_baseline"]) == 1.0 for row in repeats)
    assert all(row["test_aer_layer"] == "" for row in rows)  # no AER read here
    text = (out / "COMPARISON.md").read_text(encoding="utf-8")
    assert "against each `alignment=layer` configuration's twin" in text
    (header, *_) = [cells(line) for line in text.splitlines() if line.startswith("| model |")]
    assert len(header) == 17 and "test AER (alignment layer)" not in header  # no layer AER


# ---------------------------------------------------------------- the layer's test AER


def lexicon_run(root: Path, name: str, *overrides: str, reverse: bool = False) -> Path:
    """The tiny zh→en lexicon Transformer (`tests/lexicon_model.py`), 6 updates, trained
    into `root/layer/<name>` as a sweep's run (its composed config and overrides in
    `.hydra/`, written after training); `reverse`: en→zh (`data=tatoeba_en_zh`, prepared
    apart), into `root/layer_reverse/<name>`."""
    mirror = root / "mirror"
    if not mirror.is_dir():
        mirror.mkdir()
        with zipfile.ZipFile(mirror / "toy-eng.zip", "w") as archive:
            archive.writestr("toy.txt", "\n".join(toy_corpus_lines(400, seed=0)) + "\n")
    short = ("trainer.max_steps=", "trainer.valid_every=", "trainer.log_every=", "data=")
    chosen = [item for item in LEXICON_TRANSFORMER if not item.startswith(short)]
    data = ["data=tatoeba_en_zh", "data.name=lexicon_en_zh"] if reverse else ["data=tatoeba_zh_en"]
    chosen += [*data, "trainer.max_steps=6", "trainer.valid_every=6", "trainer.log_every=6",
               f"data.root={root / 'data'}", *overrides]  # fmt: skip
    cfg = compose_config(chosen)
    run = root / ("layer_reverse" if reverse else "layer") / name
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(MIRROR_ENV, str(mirror))
        train_and_test(cfg, run, outputs_root=root)
    (run / ".hydra").mkdir()
    OmegaConf.save(cfg, run / ".hydra" / "config.yaml")
    OmegaConf.save(OmegaConf.create(chosen), run / ".hydra" / "overrides.yaml")
    return run


@pytest.fixture(scope="module")
def aer_sweep(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("layer_aer")
    lexicon_run(root, "0_plain")
    lexicon_run(root, "1_layer", LAYER, "alignment.training=unsupervised")
    return root / "layer"


def test_the_layer_column_holds_the_layer_s_test_aer_of_each_checkpoint(aer_sweep, tmp_path):
    plain_run, layer_run = aer_sweep / "0_plain", aer_sweep / "1_layer"
    found = checkpoint_aer(layer_run / "checkpoints" / "best.pt")
    assert found is not None and found.layer_counts is not None
    assert checkpoint_aer(plain_run / "checkpoints" / "best.pt").layer_counts is None
    out = tmp_path / "out"
    settings = ReportSettings(out_dir=out, image=False, aer=True, resamples=100)
    assert write_report([aer_sweep], settings) is not None
    without, with_layer = read_csv(out / "comparison.csv")
    assert without["test_aer_layer"] == "" and without["test_aer"] != ""
    assert float(with_layer["test_aer_layer"]) == pytest.approx(found.layer_counts.aer)
    assert float(with_layer["test_aer"]) == pytest.approx(found.head_mean.aer)
    assert with_layer["model"] == "alignment=layer (unsupervised)"  # all that differs
    assert with_layer["p_vs_baseline"] != "" and without["p_vs_baseline"] == ""

    text = (out / "COMPARISON.md").read_text(encoding="utf-8")
    assert "against each `alignment=layer` configuration's twin" in text  # the twin test
    lines = text.splitlines()
    header = cells(next(line for line in lines if line.startswith("| model |")))
    column = header.index("test AER (alignment layer)")
    assert header[column - 1] == "test AER (guided head)"
    table = [cells(line) for line in lines if line.startswith("| ") and len(cells(line)) == 18]
    by_model = {row[0]: row for row in table[1:]}
    assert by_model[without["model"]][column] == "—"
    assert by_model[with_layer["model"]][column] == f"{found.layer_counts.aer:.3f}"


def test_the_sweep_image_shows_the_layer_below_the_translation_attention(
    aer_sweep, tmp_path, monkeypatch
):
    runs = [aer_sweep / "0_plain", aer_sweep / "1_layer"]
    sentence = "我爱中国。"
    panels = collect_panels([run / "checkpoints" / "best.pt" for run in runs], "cpu", sentence,
                            None)  # fmt: skip
    assert len(panels.attention) == 2 and len(panels.layer) == 1  # the plain run has no layer
    (layer,) = panels.layer
    translator = Translator.load(runs[1] / "checkpoints" / "best.pt", "cpu")
    (translation,) = translator.translate([sentence], SearchSettings(beam_size=1))
    src = torch.tensor([translator.src_tokenizer.encode(sentence) + [EOS_ID]])
    tgt_in = torch.tensor([[BOS_ID, *translation.hypotheses[0].tokens]])
    with torch.no_grad():  # the layer fed the source and the greedy output, by hand
        by_hand = translator.model.alignment_weights(src, src != 0, tgt_in)  # (1, heads, T, S)
    np.testing.assert_allclose(layer.weights, by_hand[0].mean(dim=0).numpy(), atol=1e-5)
    assert layer.target_pieces == panels.attention[1].target_pieces  # the same rows
    assert layer.title.split("\n")[0].endswith(" · alignment layer")
    assert not layer.weights[-1].any()  # the EOS row reads nothing

    reference = "I love China."
    taught = collect_panels([runs[1] / "checkpoints" / "best.pt"], "cpu", sentence, reference)
    assert taught.layer[0].target_pieces == taught.attention[0].target_pieces
    assert taught.layer[0].title.endswith(reference)

    drawn = []
    monkeypatch.setattr(alignments, "draw_comparison",
                        lambda found, title, per_row=None: drawn.append((found, title, per_row))
                        or Figure())  # fmt: skip
    assert alignments.sweep_image(aer_sweep, tmp_path / "sweep.png", "cpu") is not None
    ((found, title, per_row),) = drawn
    assert per_row == 2 and len(found) == 3  # two attention panels, the layer's below
    assert "below: the alignment layer" in title


# ---------------------------------------------------------------- both directions


@pytest.fixture(scope="module")
def both_sweeps(tmp_path_factory) -> Path:
    """A zh→en sweep `layer` of one run with an unsupervised layer and its reverse sweep
    `layer_reverse` of the same run en→zh, their overrides those of a comparison's sweeps:
    the same, but for the reverse's data preset."""
    root = tmp_path_factory.mktemp("both_directions")
    overrides = [LAYER, "alignment.training=unsupervised"]
    for reverse, data in ((False, []), (True, ["data=tatoeba_en_zh"])):
        run = lexicon_run(root, "0_layer", *overrides, reverse=reverse)
        OmegaConf.save(OmegaConf.create([*overrides, *data]), run / ".hydra" / "overrides.yaml")
    return root


def test_the_column_of_both_directions_is_what_seq2seq_align_gives_the_two_runs(
    both_sweeps, tmp_path, capsys
):
    forward, reverse = (both_sweeps / name / "0_layer" for name in ("layer", "layer_reverse"))
    gold = Path(gold_module.__file__).parent / "gold" / "tatoeba_zh_en"
    code, out, _ = run_main(
        align.main, capsys, forward / "checkpoints" / "best.pt", "--reverse",
        reverse / "checkpoints" / "best.pt", "--symmetrise", "harmonic", "--extract",
        "threshold", "--threshold", "0.3", "--src", gold / "test.zh", "--tgt", gold / "test.en",
        "--gold", gold / "test.align", "--json",
    )  # fmt: skip
    assert code == 0
    expected = json.loads(out)["aer"]
    out_dir = tmp_path / "out"
    found = ReportSettings(out_dir=out_dir, image=False, aer=True, resamples=100)
    sweeps = [both_sweeps / "layer", both_sweeps / "layer_reverse"]
    assert write_report(sweeps, found) is not None
    ahead, back = read_csv(out_dir / "comparison.csv")
    assert (ahead["sweep"], back["sweep"]) == ("layer", "layer_reverse")
    assert float(ahead["test_aer_both"]) == pytest.approx(expected)
    assert back["test_aer_both"] == ""  # no sweep layer_reverse_reverse
    assert float(ahead["test_aer_both"]) != pytest.approx(float(ahead["test_aer_layer"]))
    lines = (out_dir / "COMPARISON.md").read_text(encoding="utf-8").splitlines()
    headers = [cells(line) for line in lines if line.startswith("| model |")]
    assert "test AER (both directions)" in headers[0]  # the layer sweep's table
    assert "test AER (both directions)" not in headers[1]  # its reverse has no partner


def test_the_column_of_both_directions_needs_the_reverse_sweep(both_sweeps, tmp_path):
    out_dir = tmp_path / "out"
    found = ReportSettings(out_dir=out_dir, image=False, aer=True, resamples=100)
    assert write_report([both_sweeps / "layer"], found) is not None
    (only,) = read_csv(out_dir / "comparison.csv")
    assert only["test_aer_both"] == "" and only["test_aer_layer"] != ""


def overrides_run(folder: Path, *overrides: str) -> Path:
    (folder / ".hydra").mkdir(parents=True)
    OmegaConf.save(OmegaConf.create(list(overrides)), folder / ".hydra" / "overrides.yaml")
    return folder


def test_a_run_and_its_reverse_differ_only_in_their_data_settings(tmp_path):
    common = ("+experiment=compare_gru", LAYER, "trainer.seed=1234")
    forward = pairing_key(overrides_run(tmp_path / "a", *common))
    sizes = ("data.src_vocab_size=2000", "data.tgt_vocab_size=4000")
    reverse = overrides_run(tmp_path / "b", *common, "data=tatoeba_en_zh", *sizes)
    assert forward == pairing_key(reverse)
    other_seed = overrides_run(
        tmp_path / "c", *common[:2], "trainer.seed=1235", "data=tatoeba_en_zh"
    )
    assert forward != pairing_key(other_seed)
    assert forward != pairing_key(overrides_run(tmp_path / "d", *common, "alignment.weight=1"))


def test_runs_that_differ_only_in_their_data_settings_are_not_paired(tmp_path, capsys):
    common = ("+experiment=compare_gru", LAYER, "trainer.seed=1234")
    runs = [overrides_run(tmp_path / f"{n}", *common, f"data.max_len={n}") for n in (20, 30)]
    rows = [empty_row(), empty_row()]
    reverse = [overrides_run(tmp_path / "r", *common, "data=tatoeba_en_zh")]
    fill_both([Configuration("layer", "a", runs, rows)],
              [Configuration("layer_reverse", "b", reverse, [empty_row()])], "cpu")  # fmt: skip
    assert [row["test_aer_both"] for row in rows] == [None, None]
    assert "differ only in their data settings" in capsys.readouterr().err


def test_the_reverse_sweep_turns_the_compare_presets_vocabularies_round():
    found = settings("reverse_data=tatoeba_en_zh")
    forward = compose_config(["+experiment=compare_gru"]).data
    reverse = compose_config(
        ["+experiment=compare_gru", "data=tatoeba_en_zh", *found.reverse_train]
    ).data
    assert (forward.src_lang, forward.tgt_lang) == (reverse.tgt_lang, reverse.src_lang)
    assert (reverse.src_vocab_size, reverse.tgt_vocab_size) == (
        forward.tgt_vocab_size,
        forward.src_vocab_size,
    )


def test_reverse_data_trains_the_layer_sweep_again_the_other_way(tmp_path, monkeypatch):
    trained: list[Sweep] = []
    monkeypatch.setattr(comparison, "run_sweep", trained.append)
    monkeypatch.setattr(comparison, "link_runs", lambda *args: [])
    found = settings(f"dir={tmp_path}", "stages=[layer]", "family_attention=scaled_dot",
                     "reverse_data=tatoeba_en_zh")  # fmt: skip
    run_comparison(found, "compare")
    assert [sweep.folder.name for sweep in trained] == ["layer", "layer_reverse"]
    ahead, back = trained
    assert back.axes == [*ahead.axes, "data=tatoeba_en_zh", *found.reverse_train]
    assert all("data=" not in axis for axis in ahead.axes)


def test_reverse_data_must_be_a_data_preset(tmp_path):
    with pytest.raises(ValueError, match="reverse_data: 'tatoeba_xx_zh' is not a data preset"):
        comparison.check(settings(f"dir={tmp_path}", "reverse_data=tatoeba_xx_zh"))
