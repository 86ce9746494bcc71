"""`make bench-peer`, OpenNMT-py's side (tools.bench.peer.onmt_*): the generated configs read
back against our presets, its log lines, the SIGINT stop of its loop, and the tables with
three frameworks. Fast: no virtual environment, no OpenNMT-py, no training."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
import yaml

from seq2seq.config.build import plain
from seq2seq.training.schedules import InverseSqrtSchedule
from tools.bench.peer import onmt_driver
from tools.bench.peer.onmt_config import (
    onmt_decode_settings,
    onmt_learning_rate,
    onmt_train_config,
    write_onmt_vocab,
)
from tools.bench.peer.ours import our_config
from tools.bench.peer.peer_options import PeerOptions, check_options
from tools.bench.peer.result_tables import decoding_table, training_table
from tools.bench.peer.throughput_logs import (
    median_after_warmup,
    onmt_checkpoint,
    onmt_intervals,
    onmt_parameters,
)

# Lines as OpenNMT-py 3.5.1 writes them to its console (format copied from a real run here;
# the figures made up).
ONMT_LOG = """\
[2026-12-05 02:47:59,451 INFO] encoder: 3393792
[2026-12-05 02:47:59,451 INFO] decoder: 4188832
[2026-12-05 02:47:59,451 INFO] * number of parameters: 7582624
[2026-12-05 02:47:59,452 INFO]  * tgt vocab size = 4000
[2026-12-05 02:48:01,644 INFO] Start training loop without validation...
[2026-12-05 02:48:01,966 INFO] Weighted corpora loaded so far:
\t\t\t* corpus_1: 2
[2026-12-05 02:48:44,659 INFO] Step  2/100000000; acc: 0.3; ppl: 3978.9; xent: 8.3; lr: 0.00032; sents:     864; bsz: 3001/3660/432; 136/166 tok/s;     44 sec;
[2026-12-05 02:49:04,744 INFO] Step  4/100000000; acc: 13.3; ppl: 2226.5; xent: 7.7; lr: 0.00053; sents:     967; bsz: 2446/3432/484; 244/342 tok/s;     64 sec;
[2026-12-05 02:49:13,811 INFO] Step  6/100000000; acc: 11.9; ppl: 1669.6; xent: 7.4; lr: 0.00074; sents:     853; bsz: 2814/3587/426; 621/791 tok/s;     73 sec;
[2026-12-05 02:49:33,811 INFO] Step  8/100000000; acc: 12.9; ppl: 1469.6; xent: 7.3; lr: 0.00094; sents:     853; bsz: 2814/3587/426; 1621/1200 tok/s;     93 sec;
[2026-12-05 02:59:17,231 INFO] Saving checkpoint /runs/opennmt/model/model_step_9.pt
"""  # noqa: E501


def test_opennmt_console_lines_become_target_tokens_per_second():
    intervals = onmt_intervals(ONMT_LOG)
    # The target side of `source/target tok/s`, never the source side.
    assert intervals == [(2, 166.0), (4, 342.0), (6, 791.0), (8, 1200.0)]
    assert median_after_warmup(intervals, 2) == {"tok_s": 791.0, "intervals": 3}
    assert onmt_checkpoint(ONMT_LOG) == (9, Path("/runs/opennmt/model/model_step_9.pt"))
    assert onmt_parameters(ONMT_LOG) == 7582624


def test_a_log_without_a_save_has_no_checkpoint():
    assert onmt_checkpoint(ONMT_LOG.rsplit("\n", 2)[0]) is None
    assert onmt_intervals("") == [] and onmt_parameters("") is None


# ---------------------------------------------------------------- the generated configs


def onmt_yaml(shape: str, tmp_path: Path) -> dict:
    """The OpenNMT-py training config generated for our preset, written and read back."""
    ours = plain(our_config(shape))
    config = onmt_train_config(ours, tmp_path / "data", tmp_path / "run", log_every=7)
    return yaml.safe_load(yaml.safe_dump(config, sort_keys=False))


def test_the_transformer_config_has_the_reference_shape(tmp_path):
    config = onmt_yaml("transformer_small", tmp_path)
    assert (config["encoder_type"], config["decoder_type"]) == ("transformer", "transformer")
    assert (config["enc_layers"], config["dec_layers"]) == (3, 3)
    assert (config["hidden_size"], config["word_vec_size"], config["heads"]) == (256, 256, 4)
    assert config["transformer_ff"] == 1024
    assert config["position_encoding"] is True
    assert config["position_encoding_type"] == "SinusoidalInterleaved"  # as ours: sin, cos, ...
    assert config["dropout"] == [0.1] and config["attention_dropout"] == [0.0]
    assert config["add_qkvbias"] is True
    assert config["share_decoder_embeddings"] is True and config["share_embeddings"] is False


def test_the_gru_config_has_the_reference_shape(tmp_path):
    config = onmt_yaml("gru_additive", tmp_path)
    assert (config["encoder_type"], config["decoder_type"]) == ("brnn", "rnn")
    assert config["rnn_type"] == "GRU"
    assert config["hidden_size"] == 256 and config["word_vec_size"] == 256
    assert (config["enc_layers"], config["dec_layers"]) == (1, 1)
    assert config["global_attention"] == "mlp"  # additive scores
    assert config["input_feed"] == 1 and config["bridge"] is True
    assert config["dropout"] == [0.1]
    assert config["share_decoder_embeddings"] is True


def test_the_training_settings_follow_our_preset(tmp_path):
    config = onmt_yaml("transformer_small", tmp_path)
    assert config["batch_type"] == "tokens" and config["batch_size"] == 4096
    assert config["accum_count"] == [1] and config["normalization"] == "tokens"
    assert (config["adam_beta1"], config["adam_beta2"]) == (0.9, 0.98)
    assert config["max_grad_norm"] == 1.0 and config["label_smoothing"] == 0.1
    assert config["decay_method"] == "noam" and config["warmup_steps"] == 300
    assert config["seed"] == 1234 and config["report_every"] == 7
    assert config["valid_steps"] >= 10**8 and "valid" not in config["data"]
    assert config["save_checkpoint_steps"] == 0  # only the save when the loop ends
    corpus = config["data"]["corpus_1"]
    assert corpus["path_src"].endswith("data/train.zh")
    assert corpus["path_tgt"].endswith("data/train.en")
    assert corpus["transforms"] == ["sentencepiece", "filtertoolong"]
    assert config["src_subword_model"].endswith("data/spm.zh.model")
    assert config["tgt_subword_model"].endswith("data/spm.en.model")
    assert config["src_seq_length"] == config["tgt_seq_length"] == 100
    assert config["src_vocab"].endswith("run/vocab.zh")
    assert (config["src_vocab_size"], config["tgt_vocab_size"]) == (4000, 4000)


def test_the_noam_schedule_becomes_our_inverse_sqrt_schedule(tmp_path):
    """OpenNMT-py's noam(s) = L · d^-½ · min(s^-½, s · w^-1.5) with the generated L equals
    lr × our schedule's factor at every step (the factor from our own class)."""
    config = onmt_yaml("gru_additive", tmp_path)
    d, w, peak = config["hidden_size"], config["warmup_steps"], 0.001
    assert config["learning_rate"] == pytest.approx(onmt_learning_rate(peak, d, w))
    weight = torch.zeros(1, requires_grad=True)
    ours = InverseSqrtSchedule(torch.optim.SGD([weight], lr=peak), warmup_steps=w)
    for step in (1, 7, 150, 299, 300, 301, 1000, 12345):
        noam = config["learning_rate"] * d**-0.5 * min(step**-0.5, step * w**-1.5)
        assert noam == pytest.approx(peak * ours.factor(step), rel=1e-9)


def test_a_family_opennmt_lacks_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no counterpart"):
        onmt_train_config(plain(our_config("convs2s")), tmp_path, tmp_path, log_every=5)


def test_the_decode_settings_follow_our_search(tmp_path):
    ours = plain(our_config("transformer_small"))
    settings = onmt_decode_settings(ours, tmp_path, tmp_path / "run")
    options = settings["options"]
    assert options["batch_size"] == 128 and options["batch_type"] == "sents"
    assert (options["length_penalty"], options["alpha"]) == ("wu", 1.0)  # GNMT, alpha 1
    assert options["n_best"] == 1 and options["gpu"] == -1
    assert options["output"] == str(tmp_path / "run" / "pred.txt")  # not the working folder
    assert settings["sources"] == str(tmp_path / "test.zh")
    assert settings["src_model"] == str(tmp_path / "spm.zh.model")
    assert settings["tgt_model"] == str(tmp_path / "spm.en.model")


def test_the_vocabulary_keeps_our_pieces_and_ids(tmp_path):
    pieces = ["<pad>", "<unk>", "<s>", "</s>", "▁the", "s"]
    (tmp_path / "vocab.en").write_text("\n".join(pieces) + "\n", encoding="utf-8")
    path = write_onmt_vocab(tmp_path, "en", tmp_path / "run")
    written = path.read_text(encoding="utf-8").splitlines()
    assert written == ["<blank>", "<unk>", "<s>", "</s>", "▁the", "s"]  # its padding name
    (tmp_path / "vocab.zh").write_text("<unk>\n▁x\n", encoding="utf-8")
    with pytest.raises(ValueError, match="vocab.zh"):
        write_onmt_vocab(tmp_path, "zh", tmp_path / "run")


# ---------------------------------------------------------------- the driver


def test_the_stop_ends_the_batches_between_two():
    stop = threading.Event()
    seen = []
    for batch in onmt_driver.until_stopped(stop, range(10)):
        seen.append(batch)
        if batch == 2:
            stop.set()  # as the SIGINT handler does, during a step
    assert seen == [0, 1, 2]


def test_the_patched_trainer_sees_the_stopped_batches_and_its_arguments():
    class FakeTrainer:
        def train(self, train_iter, train_steps, save_checkpoint_steps=5000):
            return list(train_iter), train_steps, save_checkpoint_steps

    stop = threading.Event()
    stop.set()
    onmt_driver.stop_between_batches(FakeTrainer, stop)
    # Stopped before it began: one batch all the same, so that the loop has a step to save.
    assert FakeTrainer().train(iter([1, 2]), 10, save_checkpoint_steps=0) == ([1], 10, 0)


def test_the_opennmt_driver_runs_without_this_package(tmp_path):
    """The peer environment has OpenNMT-py but not seq2seq: its driver must start with the
    standard library and `driver` beside it (-S -E -s: no site-packages, no PYTHONPATH)."""
    done = subprocess.run(
        [sys.executable, "-S", "-E", "-s", onmt_driver.__file__, "--help"],
        capture_output=True, text=True, cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "train" in done.stdout and "decode" in done.stdout


# ---------------------------------------------------------------- three frameworks


def test_the_training_table_has_three_frameworks_and_two_ratios():
    rows = {
        "transformer_small": {
            "ours": {"tok_s": 3000.0, "intervals": 9, "updates": 612, "parameters": 7578624},
            "joeynmt": {"tok_s": 500.0, "intervals": 3, "updates": 98, "parameters": 7579136},
            "opennmt": {"tok_s": 1200.0, "intervals": 5, "updates": 240, "parameters": 7582624},
        }
    }
    lines = training_table(rows, ["joeynmt", "opennmt"])
    assert lines[0] == (
        "| shape | ours tgt tok/s | JoeyNMT tgt tok/s | OpenNMT-py tgt tok/s | ours / JoeyNMT | "
        "ours / OpenNMT-py | updates (ours, JoeyNMT, OpenNMT-py) | intervals (ours, JoeyNMT, "
        "OpenNMT-py) | params (ours, JoeyNMT, OpenNMT-py) |"
    )
    # 3000 / 500 = 6.0×, 3000 / 1200 = 2.5×
    assert lines[2] == (
        "| transformer_small | 3,000 | 500 | 1,200 | 6.0× | 2.5× | 612, 98, 240 | 9, 3, 5 | "
        "7,578,624, 7,579,136, 7,582,624 |"
    )
    assert lines[1].count("---") == lines[0].count("|") - 1


def test_the_decoding_table_has_three_frameworks_and_two_ratios():
    def side(seconds: float, tokens: int, bleu: float) -> dict:
        return {"seconds": seconds, "sentences": 20, "tokens": tokens, "bleu": bleu}

    rows = {
        "gru_additive": {
            "ours": {"1": side(2.0, 300, 3.0), "5": side(4.0, 320, 4.0)},
            "joeynmt": {"1": side(10.0, 500, 1.0), "5": side(40.0, 640, 2.0)},
            "opennmt": {"1": side(5.0, 250, 2.5)},  # its beam 5 missing
        }
    }
    lines = decoding_table(rows, ["joeynmt", "opennmt"])
    assert len(lines) == 4
    # greedy, sent/s: 10.0, 2.0, 4.0 → 5.0×, 2.5×; tok/s: 150, 50, 50 → 3.0×, 3.0×
    assert lines[2] == (
        "| gru_additive | greedy | 20 | 10.0 | 2.0 | 4.0 | 5.0× | 2.5× | 150 | 50 | 50 | 3.0× | "
        "3.0× | 300, 500, 250 | 3.00, 1.00, 2.50 |"
    )
    assert lines[3].endswith("| 5.0 | 0.5 | — | 10.0× | — | 80 | 16 | — | 5.0× | — | "
                             "320, 640, — | 4.00, 2.00, — |")  # fmt: skip
    assert all(line.count("|") == lines[0].count("|") for line in lines)


def options_for(tmp_path: Path, peers: list[str]) -> PeerOptions:
    return PeerOptions(
        shapes=["gru_additive"], peers=peers, minutes=1.0, threads=2, sentences=10,
        log_every=5, warmup_updates=0, decode_reps=1, matmul_reps=1,
        peer_root=tmp_path / "peers", work_dir=tmp_path / "work", out=tmp_path / "o.md",
        root=tmp_path,
    )  # fmt: skip


def test_the_peers_are_checked_and_put_in_running_order(tmp_path):
    checked = check_options(options_for(tmp_path, ["opennmt", "joeynmt"]))
    assert checked.peers == ["joeynmt", "opennmt"]
    assert checked.peer_python("opennmt") == tmp_path / "peers" / "opennmt" / "bin" / "python"
    with pytest.raises(SystemExit, match="--peers"):
        check_options(options_for(tmp_path, ["fairseq"]))
    with pytest.raises(SystemExit, match="--peers"):
        check_options(options_for(tmp_path, []))
