"""int8 decoding of the PyTorch engine (`seq2seq.quantization`, `--quantization int8`).

Every family is quantised and must still give what float32 gives: the teacher-forced
log-probabilities within a small distance, and on a GRU trained for a few seconds on the
letter-reversal task, the same greedy outputs on nearly every sentence and the same
accuracy within 5 points.
"""

from __future__ import annotations

import random

import pytest
import torch
from helpers import (
    compose_config,
    letters,
    reversed_text,
    run_main,
    save_model,
    train_reverse,
)
from torch import nn

from seq2seq.cli import translate as translate_cli
from seq2seq.config.build import build_model, count_parameters
from seq2seq.config.search_settings import SearchSettings
from seq2seq.data.batching import collate
from seq2seq.data.tokenizer import SubwordTokenizer
from seq2seq.quantization import QuantizationError, check_quantization, quantized
from seq2seq.search.translator import Translator

TOY = ["data=toy_reverse", "model.embed_dim=32", "encoder.hidden_size=32", "decoder.hidden_size=32"]
FAMILIES = {
    "gru": ["encoder=gru", "decoder=gru", "attention=additive"],
    "lstm": ["encoder=lstm", "decoder=lstm", "attention=general", "decoder.style=luong"],
    "rnn": ["encoder=rnn", "decoder=rnn", "attention=dot"],
    "cnn": ["encoder=cnn", "decoder=cnn", "attention=dot"],
    "transformer": ["encoder=transformer", "decoder=transformer", "attention=multihead",
                    "attention.heads=4", "encoder.heads=4", "decoder.heads=4"],
}  # fmt: skip


def toy_batch(vocab: int, seed: int = 0):
    rng = random.Random(seed)
    pairs = [([rng.randrange(4, vocab) for _ in range(rng.randint(2, 8))],) * 2 for _ in range(16)]
    return collate(pairs, list(range(len(pairs))))


@pytest.mark.parametrize("family", FAMILIES)
def test_every_family_quantises_and_keeps_its_log_probabilities(family):
    torch.manual_seed(0)
    model = build_model(compose_config(TOY + FAMILIES[family]), 20, 20).eval()
    int8 = quantized(model, "int8", torch.device("cpu"))
    assert not any(isinstance(module, (nn.Linear, nn.GRU, nn.LSTM))
                   for module in int8.modules()), "a float linear or recurrent layer is left"  # fmt: skip
    batch = toy_batch(20)
    with torch.inference_mode():
        expected = model(batch.src, batch.src_mask, batch.tgt_in)[0].log_softmax(-1)
        found = int8(batch.src, batch.src_mask, batch.tgt_in)[0].log_softmax(-1)
    real = batch.tgt_in != 0
    # Total variation distance between the two next-token distributions, per position.
    distance = 0.5 * (found.exp() - expected.exp()).abs().sum(-1)[real]
    # ConvS2S has no normalisation: its activations span a wider range, so int8's steps
    # are coarser (measured at initialisation: median 0.021, max 0.20; the others: at most
    # 0.004 and 0.01). BENCHMARKS.md measures BLEU after training.
    median, largest = (0.05, 0.3) if family == "cnn" else (0.01, 0.03)
    assert distance.median() < median and distance.max() < largest, distance


def test_float32_is_the_model_itself_and_bad_requests_are_refused():
    model = build_model(compose_config(TOY + FAMILIES["gru"]), 20, 20).eval()
    assert quantized(model, "float32", torch.device("cpu")) is model
    with pytest.raises(QuantizationError, match="float32, int8.*'int4'"):
        check_quantization("int4", torch.device("cpu"))
    with pytest.raises(QuantizationError, match="CPU only.*cuda"):
        check_quantization("int8", torch.device("cuda"))


@pytest.fixture(scope="module")
def trained_gru(tmp_path_factory):
    """A checkpoint of a GRU model trained on letter reversal in-process (a few seconds)."""
    folder = tmp_path_factory.mktemp("int8")
    texts = letters(random.Random(0), 2000)
    tokenizer = SubwordTokenizer.train(
        texts, lang="toy", vocab_size=40, folder=folder, vocab_cap=True
    )
    cfg = compose_config(TOY + FAMILIES["gru"] + ["encoder.dropout=0", "decoder.dropout=0"])
    torch.manual_seed(0)
    model = build_model(cfg, tokenizer.vocab_size, tokenizer.vocab_size)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train_reverse(model, tokenizer, steps=250)
    finally:
        torch.set_num_threads(threads)
    save_model(folder / "best.pt", model, cfg, tokenizer)
    return folder / "best.pt"


def test_int8_gives_float32s_greedy_outputs_and_accuracy(trained_gru):
    sentences = letters(random.Random(7), 200)
    outputs, accuracy = {}, {}
    for quantization in ("float32", "int8"):
        translator = Translator.load(trained_gru, quantization=quantization)
        assert translator.quantization == quantization
        found = translator.translate(sentences, SearchSettings(beam_size=1))
        outputs[quantization] = [t.hypotheses[0].tokens for t in found]
        accuracy[quantization] = sum(
            t.text == reversed_text(s) for t, s in zip(found, sentences, strict=True)
        ) / len(sentences)
    same = sum(a == b for a, b in zip(outputs["float32"], outputs["int8"], strict=True))
    assert accuracy["float32"] > 0.5, accuracy  # the model learnt the task
    assert same >= 0.95 * len(sentences), same
    assert abs(accuracy["int8"] - accuracy["float32"]) <= 0.05, accuracy


def test_int8_translator_reports_the_float_parameter_count(trained_gru):
    float32 = Translator.load(trained_gru)
    int8 = Translator.load(trained_gru, quantization="int8")
    assert int8.parameters == float32.parameters == count_parameters(float32.model)
    assert count_parameters(int8.model) < int8.parameters  # the int8 weights are not parameters


def test_translate_option_quantization(trained_gru, capsys):
    code, stdout, stderr = run_main(
        translate_cli.main, capsys, trained_gru, "a b c d", "--quantization", "int8"
    )
    assert code == 0, stderr
    assert len(stdout.splitlines()) == 1 and set(stdout.split()) <= set("abcd"), stdout
    code, _, stderr = run_main(
        translate_cli.main, capsys, trained_gru, "a", "--quantization", "int4"
    )
    assert code == 2 and "--quantization" in stderr and len(stderr.splitlines()) == 1


def test_service_reports_the_quantization(trained_gru):
    from seq2seq.serve.backends import TorchEngine

    engine = TorchEngine(Translator.load(trained_gru, quantization="int8"), trained_gru)
    info = engine.model_info()
    assert info["quantization"] == "int8"
    assert info["parameters"] == Translator.load(trained_gru).parameters
