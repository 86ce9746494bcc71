"""The layer × head chosen on the valid gold travels in the checkpoint: the trainer stores
what its hooks return (best.pt: the choice of its own validation; a resume keeps it), the
Translator reads it back after checking it fits the model, and `seq2seq-translate
--alignments` and the viewer use it by default and say so. A hostile `alignment_choice` is
refused in one line naming the key; a checkpoint without one gets the old default.

One toy Transformer (cross-attention: 2 layers × 4 heads) is trained once for the module,
with a stand-in for the AER hook that returns a known choice at each validation.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import torch
from helpers import compose_config, run_main

from seq2seq.align.defaults import CHOSEN, DEFAULT, GUIDED, HeadMark, default_settings, head_marks
from seq2seq.align.extract import AlignSettings, translation_links
from seq2seq.align.pharaoh import format_links
from seq2seq.checkpoint import AlignmentChoice, CheckpointError, load_checkpoint
from seq2seq.cli import align, translate
from seq2seq.config.search_settings import SearchSettings
from seq2seq.runs.assemble import assemble_trainer
from seq2seq.search.translator import Translator
from seq2seq.visualise.heatmap import panel_marks

TOY_TRANSFORMER = [
    "data=toy_reverse", "data.source.train_size=256", "data.source.valid_size=8",
    "data.source.test_size=8", "data.max_tokens=512", "trainer.valid_every=2",
    "trainer.threads=1", "logging.progress_bar=false", "logging.tensorboard=false",
    "encoder=transformer", "decoder=transformer", "attention=multihead",
    "encoder.hidden_size=16", "decoder.hidden_size=16", "model.embed_dim=16",
    "encoder.num_layers=1", "encoder.heads=2", "decoder.num_layers=2", "decoder.heads=2",
    "attention.heads=4", "encoder.ff_size=24", "decoder.ff_size=24",
]  # fmt: skip
# What the stand-in hook chooses at each validation step.
CHOICES = {2: AlignmentChoice(1, 3, 0.25, 2), 4: AlignmentChoice(0, None, 0.5, 4)}
LINES = ["a b c d", "e f g"]


def stand_in_aer_hook(context) -> dict:
    """Returns a choice for the checkpoints, as `AerHook` does."""
    return {"alignment_choice": CHOICES[context.step].as_payload()}


def config(root: Path, max_steps: int, *extra: str):
    return compose_config(
        TOY_TRANSFORMER + [f"trainer.max_steps={max_steps}", f"data.root={root / 'data'}", *extra]
    )


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """The run folder of four updates, validated at steps 2 and 4."""
    root = tmp_path_factory.mktemp("choice")
    trainer = assemble_trainer(config(root, 4), root / "run", observe=False)
    trainer.hooks.append(stand_in_aer_hook)
    trainer.fit()
    return root / "run"


@pytest.fixture(scope="module")
def payload(run) -> dict:
    """last.pt as plain data (its choice: CHOICES[4])."""
    return torch.load(run / "checkpoints" / "last.pt", weights_only=True)


def saved_with(payload: dict, folder: Path, name: str = "edited.pt", **entries) -> Path:
    """A copy of the checkpoint with some top-level entries replaced (None: removed)."""
    edited = copy.deepcopy(payload)
    for key, value in entries.items():
        edited.pop(key, None) if value is None else edited.update({key: value})
    path = folder / name
    torch.save(edited, path)
    return path


# ---------------------------------------------------------------- the trainer


def test_best_holds_the_choice_of_its_validation_and_last_the_latest(run):
    best = load_checkpoint(run / "checkpoints" / "best.pt")
    last = load_checkpoint(run / "checkpoints" / "last.pt")
    assert best["alignment_choice"] == CHOICES[best["progress"]["best_step"]].as_payload()
    assert last["alignment_choice"] == CHOICES[4].as_payload()


def test_a_resume_keeps_the_choice(run, tmp_path):
    folder = tmp_path / "run"
    (folder / "checkpoints").mkdir(parents=True)
    last = run / "checkpoints" / "last.pt"
    (folder / "checkpoints" / "last.pt").write_bytes(last.read_bytes())
    trainer = assemble_trainer(config(run.parent, 6), folder, resume_path=folder / "checkpoints" / "last.pt", observe=False)  # fmt: skip
    assert trainer.hook_entries == {"alignment_choice": CHOICES[4].as_payload()}
    trainer.fit()  # validates at step 6 with no hook: nothing new to store
    resumed = load_checkpoint(folder / "checkpoints" / "last.pt")
    assert resumed["progress"]["step"] == 6
    assert resumed["alignment_choice"] == CHOICES[4].as_payload()


def test_a_hook_may_not_overwrite_other_checkpoint_keys(run, tmp_path):
    trainer = assemble_trainer(config(run.parent, 2), tmp_path / "run", observe=False)
    trainer.hooks.append(lambda context: {"model": {}})
    with pytest.raises(ValueError, match=r"unknown checkpoint keys \['model'\]"):
        trainer.run_hooks(2)


# ---------------------------------------------------------------- the translator and tools


def test_the_translator_returns_the_stored_choice_and_the_tools_default_to_it(payload, tmp_path):
    path = saved_with(payload, tmp_path, alignment_choice=CHOICES[2].as_payload())
    translator = Translator.load(path)
    assert translator.alignment_choice == CHOICES[2]
    found = default_settings(translator)
    assert (found.source, found.settings) == (CHOSEN, AlignSettings(layer=1, head=3))
    assert found.description == "layer 1, head 3 (chosen on the valid gold: AER 0.2500 at step 2)"
    assert Translator.load(saved_with(payload, tmp_path)).alignment_choice == CHOICES[4]


def test_an_old_checkpoint_without_a_choice_gets_the_default(payload, tmp_path, capsys):
    path = saved_with(payload, tmp_path, alignment_choice=None)
    translator = Translator.load(path)
    found = default_settings(translator)
    assert translator.alignment_choice is None and head_marks(translator) == []
    assert (found.source, found.settings) == (DEFAULT, AlignSettings())
    code, out, err = run_main(translate.main, capsys, path, *LINES, "--alignments")
    assert code == 0 and len(out.splitlines()) == len(LINES)
    assert err == (
        "seq2seq-translate: --alignments: links from layer -1, head mean "
        "(the default: the checkpoint stores no choice)\n"
    )


def test_translate_alignments_use_and_report_the_stored_choice(payload, tmp_path, capsys):
    path = saved_with(payload, tmp_path, alignment_choice=CHOICES[2].as_payload())
    code, out, err = run_main(
        translate.main, capsys, path, *LINES, "--alignments", "--beam-size", "1"
    )
    assert code == 0, err
    assert err == (
        "seq2seq-translate: --alignments: links from layer 1, head 3 "
        "(chosen on the valid gold: AER 0.2500 at step 2)\n"
    )
    translator = Translator.load(path)
    translations = translator.translate(LINES, SearchSettings(beam_size=1), need_weights=True)
    chosen = AlignSettings(layer=1, head=3)
    expected = [translation_links(translator, t, chosen)[0] for t in translations]
    assert [line.split("\t")[1] for line in out.splitlines()] == [format_links(x) for x in expected]


def test_seq2seq_align_uses_and_reports_the_stored_choice(payload, tmp_path, capsys):
    """Without --layer/--head the command aligns with the stored choice and says so after
    the links; an explicit --layer or --head wins and is not reported."""
    path = saved_with(payload, tmp_path, alignment_choice=CHOICES[2].as_payload())
    src, tgt = tmp_path / "pairs.src", tmp_path / "pairs.tgt"
    src.write_text("\n".join(LINES) + "\n")
    tgt.write_text("\n".join(" ".join(reversed(line.split())) for line in LINES) + "\n")
    files = ["--src", str(src), "--tgt", str(tgt)]
    code, default_out, err = run_main(align.main, capsys, str(path), *files)
    assert code == 0, err
    assert err == (f"seq2seq-align: {path}: aligned with layer 1, head 3 "
                   "(chosen on the valid gold: AER 0.2500 at step 2)\n")  # fmt: skip
    code, explicit_out, err = run_main(
        align.main, capsys, str(path), *files, "--layer", "1", "--head", "3"
    )
    assert (code, err) == (0, "") and explicit_out == default_out
    code, mean_out, err = run_main(align.main, capsys, str(path), *files, "--head", "mean")
    assert (code, err) == (0, "")


def test_a_guided_model_defaults_to_its_guided_head_and_marks_both(payload, tmp_path):
    edited = copy.deepcopy(payload["config"])
    edited["alignment"] = {**edited.get("alignment", {}), "guided": True, "layer": -2, "heads": [1]}
    path = saved_with(payload, tmp_path, config=edited, alignment_choice=CHOICES[2].as_payload())
    translator = Translator.load(path)
    found = default_settings(translator)
    assert (found.source, found.settings) == (GUIDED, AlignSettings(layer=0, head=1))
    assert found.description.startswith("layer 0, head 1 (the guided head")
    assert [(mark.layer, mark.head, mark.label) for mark in head_marks(translator)] == [
        (0, 1, GUIDED), (1, 3, CHOSEN),
    ]  # fmt: skip


# ---------------------------------------------------------------- hostile values

HOSTILE = {
    "layer_out_of_range": ({"layer": 2, "head": 0, "aer": 0.1, "step": 2}, "alignment_choice.layer"),
    "layer_a_string": ({"layer": "0", "head": 0, "aer": 0.1, "step": 2}, "alignment_choice.layer"),
    "layer_a_nested_dict": ({"layer": {"layer": 0}, "head": 0, "aer": 0.1, "step": 2}, "alignment_choice.layer"),
    "layer_a_huge_int": ({"layer": 10**400, "head": 0, "aer": 0.1, "step": 2}, "alignment_choice.layer"),
    "layer_a_bool": ({"layer": True, "head": 0, "aer": 0.1, "step": 2}, "alignment_choice.layer"),
    "layer_negative": ({"layer": -1, "head": 0, "aer": 0.1, "step": 2}, "alignment_choice.layer"),
    "layer_a_tensor": ({"layer": torch.tensor(0), "head": 0, "aer": 0.1, "step": 2}, "alignment_choice.layer"),
    "head_out_of_range": ({"layer": 0, "head": 4, "aer": 0.1, "step": 2}, "alignment_choice.head"),
    "aer_not_a_number": ({"layer": 0, "head": 0, "aer": float("nan"), "step": 2}, "alignment_choice.aer"),
    "aer_above_one": ({"layer": 0, "head": 0, "aer": 1.5, "step": 2}, "alignment_choice.aer"),
    "step_negative": ({"layer": 0, "head": 0, "aer": 0.1, "step": -3}, "alignment_choice.step"),
    "step_huge": ({"layer": 0, "head": 0, "aer": 0.1, "step": 2**80}, "alignment_choice.step"),
    "an_extra_entry": ({"layer": 0, "head": 0, "aer": 0.1, "step": 2, "code": "x"}, "alignment_choice"),
    "a_missing_entry": ({"layer": 0, "head": 0, "aer": 0.1}, "alignment_choice"),
    "a_list": ([0, 0, 0.1, 2], "alignment_choice"),
    "a_string": ("layer 0 head 0\nTraceback", "alignment_choice"),
}  # fmt: skip


def assert_one_line(message: str, key: str) -> None:
    assert "\n" not in message.strip() and "Traceback" not in message, message
    assert re.search(rf"{re.escape(key)}: ", message), message


@pytest.mark.parametrize("case", list(HOSTILE))
def test_a_hostile_choice_is_refused_naming_the_key(case, payload, tmp_path):
    value, key = HOSTILE[case]
    path = saved_with(payload, tmp_path, alignment_choice=value)
    with pytest.raises(CheckpointError) as refused:
        Translator.load(path)
    assert_one_line(str(refused.value), key)
    assert str(refused.value).startswith(f"{path}: ")


def test_translate_refuses_a_hostile_choice_in_one_line(payload, tmp_path, capsys):
    value, key = HOSTILE["layer_a_nested_dict"]
    path = saved_with(payload, tmp_path, alignment_choice=value)
    code, out, err = run_main(translate.main, capsys, path, "a b", "--alignments")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("seq2seq-translate: ")
    assert_one_line(err, key)


# ---------------------------------------------------------------- the viewer and the plots


def page_data(page: Path) -> dict:
    found = re.search(r'<script type="application/json" id="attention-data">(.*?)</script>',
                      page.read_text(encoding="utf-8"), re.S)  # fmt: skip
    return json.loads(found.group(1))


def test_the_viewer_marks_the_chosen_head_and_opens_on_it(payload, tmp_path, capsys):
    path = saved_with(payload, tmp_path, alignment_choice=CHOICES[2].as_payload())
    page = tmp_path / "page.html"
    code, _, err = run_main(translate.main, capsys, path, *LINES, "--html", page)
    assert code == 0, err
    alignment = page_data(page)["alignment"]
    assert alignment["start"] == {"layer": 1, "head": 3}
    assert alignment["marks"] == [{"layer": 1, "head": 3, "label": "chosen",
                                   "reason": "chosen on the valid gold: AER 0.2500 at step 2"}]  # fmt: skip
    assert err == (
        f"attention viewer saved to {page}; it opens on layer 1, head 3 "
        "(chosen on the valid gold: AER 0.2500 at step 2)\n"
    )  # counted from 0, as the page's data and the stored choice count


def test_the_viewer_of_an_old_checkpoint_marks_nothing(payload, tmp_path, capsys):
    path = saved_with(payload, tmp_path, alignment_choice=None)
    page = tmp_path / "page.html"
    code, _, err = run_main(translate.main, capsys, path, LINES[0], "--html", page)
    assert code == 0, err
    alignment = page_data(page)["alignment"]
    assert alignment["marks"] == [] and alignment["start"] == {"layer": 0, "head": "mean"}
    assert err.endswith("it marks no head (the checkpoint stores no choice) "
                        "and opens on layer 0, head mean\n")  # fmt: skip


def test_plot_titles_name_the_marked_heads_counted_from_zero():
    marks = [HeadMark(1, 3, "guided", ""), HeadMark(1, 3, "chosen", ""), HeadMark(0, None, "chosen", "")]  # fmt: skip
    assert panel_marks(marks) == {(1, 3): "guided, chosen", (0, None): "chosen"}
