"""`make bench-peer` (tools.bench.peer): log parsing, the generated JoeyNMT config, the data
export and the tables. Fast: no virtual environment, no JoeyNMT, no training. OpenNMT-py's
side: tests/test_bench_peer_opennmt.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from seq2seq.config.build import plain
from seq2seq.data.batching import ParallelData
from tools.bench.peer import driver
from tools.bench.peer.data_export import write_export
from tools.bench.peer.joey_config import joey_config
from tools.bench.peer.ours import our_config
from tools.bench.peer.peer_env import peer_versions
from tools.bench.peer.peer_options import PeerOptions, check_options
from tools.bench.peer.result_tables import decoding_table, ratio, training_table
from tools.bench.peer.shared_settings import DEV_PAIRS
from tools.bench.peer.throughput_logs import (
    joey_intervals,
    joey_parameters,
    joey_updates,
    median_after_warmup,
    our_intervals,
)

# Lines as JoeyNMT 2.3's TrainManager writes them to train.log.
JOEY_LOG = """\
2026-12-01 11:04:40,624 - INFO - joeynmt.model - Total params: 7578624
2026-12-01 11:04:42,998 - INFO - joeynmt.training - EPOCH 1
2026-12-01 11:05:01,100 - INFO - joeynmt.training - Epoch   1, Step:       10, Batch Loss:    10.123456, Batch Acc: 0.001000, Tokens per Sec:      300, Lr: 0.000033
2026-12-01 11:05:11,100 - INFO - joeynmt.training - Epoch   1, Step:       20, Batch Loss:     9.123456, Batch Acc: 0.010000, Tokens per Sec:      510, Lr: 0.000067
2026-12-01 11:05:21,100 - INFO - joeynmt.training - Epoch   1, Step:       30, Batch Loss:     8.123456, Batch Acc: 0.020000, Tokens per Sec:      470, Lr: 0.000100
2026-12-01 11:05:31,100 - INFO - joeynmt.training - Epoch   1, Step:       40, Batch Loss:     7.123456, Batch Acc: 0.030000, Tokens per Sec:      490, Lr: 0.000133
2026-12-01 11:05:33,000 - INFO - joeynmt.training - Interrupt at epoch 1, step 43.
2026-12-01 11:05:33,500 - INFO - joeynmt.training - Checkpoint saved in model/43.ckpt.
"""  # noqa: E501


def test_joeynmt_log_lines_become_tokens_per_second():
    intervals = joey_intervals(JOEY_LOG)
    assert intervals == [(10, 300.0), (20, 510.0), (30, 470.0), (40, 490.0)]
    assert joey_updates(JOEY_LOG, intervals) == 43  # the interrupt, not the last log line
    assert joey_parameters(JOEY_LOG) == 7578624
    # The first interval (start-up) is warm-up; the median of the rest.
    assert median_after_warmup(intervals, 10) == {"tok_s": 490.0, "intervals": 3}


def test_without_an_interrupt_line_the_last_logged_step_counts():
    text = "\n".join(JOEY_LOG.splitlines()[:4])
    assert joey_updates(text, joey_intervals(text)) == 20
    assert joey_updates("", []) == 0


def test_our_metrics_lines_become_tokens_per_second(tmp_path):
    lines = [
        {"step": 1, "train/loss": 11.0, "train/tokens_per_sec": 400.0},
        {"step": 50, "train/loss": 8.0, "train/tokens_per_sec": 2900.0},
        {"step": 100, "train/loss": 7.0, "train/tokens_per_sec": 3000.0},
        {"step": 150, "train/loss": 6.5, "train/tokens_per_sec": 3100.0},
        {"step": 150, "valid/bleu": 1.0},  # no throughput: not an interval
    ]
    text = "\n".join(json.dumps(line) for line in lines) + "\n"
    (tmp_path / "metrics.jsonl").write_text(text, encoding="utf-8")
    intervals = our_intervals(tmp_path)
    assert [step for step, _ in intervals] == [1, 50, 100, 150]
    assert median_after_warmup(intervals, 50) == {"tok_s": 3050.0, "intervals": 2}


def test_a_run_shorter_than_its_warmup_has_no_median():
    assert median_after_warmup([(1, 400.0)], 50) == {"tok_s": None, "intervals": 0}


# ---------------------------------------------------------------- the generated config


def joey_yaml(shape: str, tmp_path: Path) -> dict:
    """The JoeyNMT config generated for our preset, written and read back as YAML."""
    ours = plain(our_config(shape))
    config = joey_config(ours, tmp_path / "data", tmp_path / "model", log_every=50)
    return yaml.safe_load(yaml.safe_dump(config, sort_keys=False))


def test_the_transformer_config_has_the_reference_shape(tmp_path):
    config = joey_yaml("transformer_small", tmp_path)
    model = config["model"]
    for side in ("encoder", "decoder"):
        part = model[side]
        assert part["type"] == "transformer"
        assert (part["num_layers"], part["hidden_size"], part["num_heads"]) == (3, 256, 4)
        assert part["ff_size"] == 1024
        assert part["layer_norm"] == "pre"
        assert part["dropout"] == 0.1
        assert part["embeddings"] == {"embedding_dim": 256, "scale": True, "dropout": 0.1}
    assert model["tied_softmax"] is True and model["tied_embeddings"] is False


def test_the_gru_config_has_the_reference_shape(tmp_path):
    model = joey_yaml("gru_additive", tmp_path)["model"]
    encoder, decoder = model["encoder"], model["decoder"]
    assert encoder["type"] == decoder["type"] == "recurrent"
    assert encoder["rnn_type"] == decoder["rnn_type"] == "gru"
    assert encoder["hidden_size"] == decoder["hidden_size"] == 256
    assert encoder["bidirectional"] is True
    assert decoder["attention"] == "bahdanau"  # additive scores
    assert decoder["input_feeding"] is True
    assert model["tied_softmax"] is True


def test_the_training_settings_follow_our_preset(tmp_path):
    config = joey_yaml("transformer_small", tmp_path)
    training, data = config["training"], config["data"]
    assert training["batch_type"] == "token" and training["batch_size"] == 4096
    assert training["optimizer"] == "adamw" and training["learning_rate"] == 0.001
    assert training["adam_betas"] == [0.9, 0.98] and training["weight_decay"] == 0.01
    assert training["scheduling"] == "warmupinversesquareroot"
    assert training["learning_rate_warmup"] == 300
    assert training["label_smoothing"] == 0.1 and training["clip_grad_norm"] == 1.0
    assert training["normalization"] == "tokens"
    # Validation off: JoeyNMT wants a multiple of the log interval; none is ever reached.
    assert training["validation_freq"] % training["logging_freq"] == 0
    assert training["validation_freq"] >= 10**8
    assert config["random_seed"] == 1234 and config["use_cuda"] is False
    # Our sentencepiece models and piece lists, our length filter.
    for side, lang in (("src", "zh"), ("trg", "en")):
        assert data[side]["lang"] == lang
        assert data[side]["tokenizer_type"] == "sentencepiece"
        assert data[side]["tokenizer_cfg"]["model_file"].endswith(f"spm.{lang}.model")
        assert data[side]["voc_file"].endswith(f"vocab.{lang}")
        assert data[side]["max_length"] == 100
    assert config["testing"]["beam_alpha"] == 1.0  # our length penalty
    assert config["testing"]["batch_size"] == 128


def test_a_family_joeynmt_lacks_is_refused(tmp_path):
    ours = plain(our_config("convs2s"))
    with pytest.raises(ValueError, match="no counterpart"):
        joey_config(ours, tmp_path, tmp_path, log_every=50)


# ---------------------------------------------------------------- the data export


class FakeTokenizer:
    """What the export reads of a tokenizer: its bytes and its pieces in id order."""

    def __init__(self, pieces: list[str], blob: bytes):
        self.pieces, self.blob = pieces, blob
        self.vocab_size = len(pieces)

    def to_bytes(self) -> bytes:
        return self.blob

    def id_to_piece(self, index: int) -> str:
        return self.pieces[index]


def fake_prepared(pairs: int, line_break: str = "") -> SimpleNamespace:
    """A tiny prepared split with `pairs` pairs in every split."""

    def split(name: str) -> ParallelData:
        src = [f"{name}源{i}{line_break if i == 1 else ''}" for i in range(pairs)]
        tgt = [f"{name} target {i}" for i in range(pairs)]
        return ParallelData([([5, 6], [7]) for _ in range(pairs)], src, tgt)

    specials = ["<pad>", "<unk>", "<s>", "</s>"]
    return SimpleNamespace(
        train=split("train"),
        valid=split("valid"),
        test=split("test"),
        src_tokenizer=FakeTokenizer([*specials, "源", "▁x"], b"zh-model"),
        tgt_tokenizer=FakeTokenizer([*specials, "▁target", "s"], b"en-model"),
    )


def test_the_export_writes_what_joeynmt_reads(tmp_path):
    counts = write_export(fake_prepared(20), "zh", "en", sentences=5, folder=tmp_path)
    assert counts == {"train": 20, "dev": DEV_PAIRS, "test": 5}
    train_src = (tmp_path / "train.zh").read_text(encoding="utf-8").splitlines()
    train_tgt = (tmp_path / "train.en").read_text(encoding="utf-8").splitlines()
    assert len(train_src) == len(train_tgt) == 20 and train_tgt[3] == "train target 3"
    assert (tmp_path / "test.zh").read_text(encoding="utf-8").splitlines() == [
        f"test源{i}" for i in range(5)
    ]
    # JoeyNMT decodes the test sources alone; the references lie beside them.
    assert not (tmp_path / "test.en").exists()
    assert (tmp_path / "reference.en").read_text(encoding="utf-8").splitlines()[4] == (
        "test target 4"
    )
    assert len((tmp_path / "dev.en").read_text(encoding="utf-8").splitlines()) == DEV_PAIRS
    # Our models byte for byte; every piece in id order, specials included.
    assert (tmp_path / "spm.zh.model").read_bytes() == b"zh-model"
    assert (tmp_path / "vocab.en").read_text(encoding="utf-8").splitlines() == [
        "<pad>", "<unk>", "<s>", "</s>", "▁target", "s",
    ]  # fmt: skip
    assert json.loads((tmp_path / "languages.json").read_text()) == {"src": "zh", "tgt": "en"}


def test_a_line_another_reader_would_split_is_refused(tmp_path):
    with pytest.raises(ValueError, match="line 2"):
        write_export(fake_prepared(4, "\u2028"), "zh", "en", sentences=4, folder=tmp_path)


# ---------------------------------------------------------------- counts, ratios and tables


def test_generated_tokens_are_pieces_plus_eos():
    # An output that ended with EOS, and one cut at the length limit (no EOS): 3 + 2.
    assert driver.generated_tokens([["▁I", "▁go", "</s>"], ["▁a"]]) == 5
    assert driver.generated_tokens([]) == 0


def test_ratios_read_as_multiples():
    assert ratio(2953.0, 471.0) == "6.3×"
    assert ratio(352.7, 2.5) == "141×"
    assert ratio(2.2, 75.9) == "0.03×"  # slower than the peer: two decimals
    assert ratio(None, 471.0) == "—"
    assert ratio(100.0, None) == "—"
    assert ratio(100.0, 0.0) == "—"


def test_the_training_table_shows_both_sides_and_the_ratio():
    rows = {
        "transformer_small": {
            "ours": {"tok_s": 2953.4, "intervals": 9, "updates": 612, "parameters": 7578624},
            "joeynmt": {"tok_s": 471.0, "intervals": 3, "updates": 98, "parameters": 7579136},
        },
        "gru_additive": {"ours": {"tok_s": None, "intervals": 0}, "joeynmt": {}},
    }
    lines = training_table(rows, ["joeynmt"])
    assert lines[0] == (
        "| shape | ours tgt tok/s | JoeyNMT tgt tok/s | ours / JoeyNMT | updates (ours, JoeyNMT)"
        " | intervals (ours, JoeyNMT) | params (ours, JoeyNMT) |"
    )
    assert lines[2] == (
        "| transformer_small | 2,953 | 471 | 6.3× | 612, 98 | 9, 3 | 7,578,624, 7,579,136 |"
    )
    assert lines[3] == "| gru_additive | — | — | — | —, — | 0, 0 | —, — |"
    assert all(line.count("|") == lines[0].count("|") for line in lines)


def test_the_decoding_table_gives_rates_and_ratios():
    ours = {
        "1": {"seconds": 2.0, "sentences": 20, "tokens": 300, "bleu": 3.21},
        "5": {"seconds": 4.0, "sentences": 20, "tokens": 320, "bleu": 4.5},
    }
    joey = {
        "1": {"seconds": 10.0, "sentences": 20, "tokens": 500, "bleu": 1.0},
        "5": {"seconds": 40.0, "sentences": 20, "tokens": 640, "bleu": None},
    }
    lines = decoding_table({"gru_additive": {"ours": ours, "joeynmt": joey}}, ["joeynmt"])
    assert len(lines) == 4  # header, rule, greedy, beam 5
    # greedy: 10.0 vs 2.0 sent/s (5.0×), 150 vs 50 tok/s (3.0×)
    assert lines[2] == (
        "| gru_additive | greedy | 20 | 10.0 | 2.0 | 5.0× | 150 | 50 | 3.0× | 300, 500 | 3.21, 1.00 |"
    )
    assert lines[3].startswith(
        "| gru_additive | beam 5 | 20 | 5.0 | 0.5 | 10.0× | 80 | 16 | 5.0× |"
    )
    assert lines[3].endswith("| 320, 640 | 4.50, — |")


def peer_options(tmp_path: Path, **changes) -> PeerOptions:
    """The command line's defaults, with `changes`."""
    values = dict(shapes=["gru_additive"], peers=["joeynmt", "opennmt"], minutes=4.0, threads=2,
                  sentences=1000, log_every=10, warmup_updates=20, decode_reps=3, matmul_reps=10,
                  peer_root=tmp_path / "peers", work_dir=tmp_path / "work",
                  out=tmp_path / "out.md", root=tmp_path)  # fmt: skip
    return PeerOptions(**(values | changes))


@pytest.mark.parametrize("name", ["minutes", "threads", "log_every", "decode_reps"])
def test_options_refuse_a_nonpositive_budget(tmp_path, name):
    flag = "--" + name.replace("_", "-")
    with pytest.raises(SystemExit, match=flag):
        check_options(peer_options(tmp_path, **{name: 0}))


def test_options_keep_a_positive_budget_and_clip_a_negative_warmup(tmp_path):
    checked = check_options(peer_options(tmp_path, minutes=0.3, warmup_updates=-5))
    assert (checked.minutes, checked.warmup_updates) == (0.3, 0)
    with pytest.raises(SystemExit, match="convs2s"):
        check_options(peer_options(tmp_path, shapes=["convs2s"]))


def test_the_peer_driver_runs_without_this_package(tmp_path):
    """The peer environment has JoeyNMT but not seq2seq: its driver file must start with the
    standard library and `quality_clock` beside it (here: an interpreter that cannot import
    seq2seq, -S -E -s: no site-packages, no PYTHONPATH)."""
    done = subprocess.run(
        [sys.executable, "-S", "-E", "-s", driver.__file__, "--help"],
        capture_output=True, text=True, cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert all(task in done.stdout for task in ("train", "decode", "quality"))


def test_a_missing_peer_environment_reports_no_versions(tmp_path):
    assert peer_versions(tmp_path / "bin" / "python", "joeynmt") is None
