"""End to end on a slice of the real corpus: train briefly, then translate and evaluate
with the checkpoint alone, as a user would."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import compose_config
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from seq2seq.cli import evaluate, translate
from seq2seq.lab.lab_models import TINY_GRU_MODEL
from seq2seq.runs.assemble import train_and_test

SLICE = [
    "data.max_pairs=2500",
    "data.valid_size=60",
    "data.test_size=60",
    "data.src_vocab_size=1500",
    "data.tgt_vocab_size=400",
    "data.max_len=24",
    "data.max_tokens=1024",
    *TINY_GRU_MODEL,
    "trainer.max_steps=4",
    "trainer.valid_every=2",
    "trainer.threads=1",
    "trainer.test_search.beam_size=2",
    "logging.progress_bar=false",
]


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory, corpus_mirror):
    root = tmp_path_factory.mktemp("slice")
    import os

    os.environ["SEQ2SEQ_DATA_MIRROR"] = str(corpus_mirror)
    cfg = compose_config(SLICE + [f"data.root={root / 'data'}"])
    results = train_and_test(cfg, root / "run", outputs_root=root)
    return root / "run", results


def test_short_real_run_writes_checkpoint_results_and_events(trained_run):
    run, results = trained_run
    assert (run / "checkpoints" / "best.pt").is_file()
    on_disk = json.loads((run / "results.json").read_text())
    assert set(on_disk["test"]) >= {"bleu", "chrf", "bleu_signature", "chrf_signature"}
    assert "tok:13a" in on_disk["test"]["bleu_signature"]
    assert on_disk["steps"] == 4
    events = EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    assert [e.step for e in events.Scalars("valid/bleu")] == [2, 4]


def _translate(capsys, *argv: str) -> tuple[int, str, str]:
    code = translate.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_translate_keeps_lines_and_handles_empty_overlong_and_unseen(
    trained_run, tmp_path, capsys, caplog
):
    run, _ = trained_run
    lines = ["我爱中国。", "", "我爱中国。" * 40, "㐀㐁㐂是什么？"]
    source = tmp_path / "in.zh"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, out, _ = _translate(capsys, str(run / "checkpoints" / "best.pt"), "-i", str(source))
    assert code == 0
    outputs = out.split("\n")[:-1]
    assert len(outputs) == len(lines)
    assert outputs[1] == ""
    assert "line 3" in caplog.text and "truncated" in caplog.text


def test_translate_shows_attention_and_nbest(trained_run, capsys):
    run, _ = trained_run
    checkpoint = str(run / "checkpoints" / "best.pt")
    code, out, err = _translate(capsys, checkpoint, "我爱中国。", "--show-attention")
    assert code == 0 and "我" in err and "</s>" in err
    code, out, _ = _translate(capsys, checkpoint, "我爱中国。", "--n-best", "3", "--beam-size", "3")
    ranks = [line.split("\t")[0] for line in out.strip().split("\n")]
    assert ranks == ["1", "2", "3"]


def test_missing_or_corrupt_checkpoint_gives_one_clear_error(tmp_path, capsys):
    broken = tmp_path / "broken.pt"
    broken.write_bytes(b"\x00garbage")
    for path in (broken, tmp_path / "absent.pt"):
        code, out, err = _translate(capsys, str(path), "我爱中国。")
        assert code == 2 and str(path.name) in err and "Traceback" not in err


def test_evaluate_scores_equal_the_sacrebleu_command(trained_run, tmp_path, capsys):
    run, _ = trained_run
    data = run.parent / "data" / "prepared" / "tatoeba_zh_en"
    hyp = tmp_path / "test.hyp"
    code = evaluate.main(
        [str(run / "checkpoints" / "best.pt"), "--src", str(data / "test.zh"),
         "--ref", str(data / "test.en"), "-o", str(hyp), "--json", "--beam-size", "2"]
    )  # fmt: skip
    assert code == 0
    ours = json.loads(capsys.readouterr().out)
    command = [sys.executable, "-m", "sacrebleu", str(data / "test.en"), "-i", str(hyp),
               "-m", "bleu", "chrf", "-b", "-f", "text", "-w", "4"]  # fmt: skip
    printed = subprocess.run(command, capture_output=True, text=True, check=True).stdout.split()
    assert float(printed[0]) == pytest.approx(ours["bleu"], abs=5e-5)
    assert float(printed[1]) == pytest.approx(ours["chrf"], abs=5e-5)


def test_evaluate_a_split_of_the_checkpoints_corpus(trained_run, capsys, tmp_path, monkeypatch):
    """The split comes from the user's data config and data folder (--data-root), with the
    checkpoint's split and subword settings; the current folder does not matter."""
    run, _ = trained_run
    monkeypatch.chdir(tmp_path)
    code = evaluate.main(
        [str(run / "checkpoints" / "best.pt"), "--split", "valid", "--beam-size", "1",
         "--data-root", str(run.parent / "data")]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("BLEU") and "\nCHRF" in out
    assert (run / "checkpoints" / "best.valid.hyp").is_file()
    assert list(tmp_path.iterdir()) == []  # nothing written to the current folder


def test_evaluate_a_split_in_a_fresh_data_folder(trained_run, capsys, tmp_path):
    """Another data folder prepares the same split and the same subwords from the raw file."""
    run, _ = trained_run
    outputs = {}
    for name, root in (("trained", run.parent / "data"), ("fresh", tmp_path / "data")):
        outputs[name] = tmp_path / f"{name}.hyp"
        code = evaluate.main(
            [str(run / "checkpoints" / "best.pt"), "--split", "valid", "--beam-size", "1",
             "--data", "tatoeba_zh_en", "--data-root", str(root), "-o", str(outputs[name])]
        )  # fmt: skip
        assert code == 0, capsys.readouterr().err
    assert outputs["fresh"].read_bytes() == outputs["trained"].read_bytes()
