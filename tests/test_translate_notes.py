"""What a user is told about their input, wherever it is translated: a line over the model's
piece limit is cut to it, and a line hardly in the script of the model's source language
may be another language; both are translated all the same. The translator counts each
source's pieces (`Translation.truncated`); `seq2seq-translate` warns on stderr, one line
per line, under its own default logging; the service's answer carries `truncated`, the
counts and `warnings`. The model: the tiny zh→en lexicon Transformer (`lexicon_model`),
which reads at most `MAX_PIECES` pieces; the piece counts come from its own tokeniser."""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest
from lexicon_model import MAX_PIECES, lexicon_checkpoint

from seq2seq.config.search_settings import SearchSettings
from seq2seq.search.translator import Translator, input_notes, unknown_characters
from seq2seq.special_tokens import UNK_ID

LONG = "我喜欢猫。" * 6  # one piece a character: 30 pieces
ENGLISH = "Hello world."  # 10 Latin letters, no Chinese character
PLAIN = "汤姆吃米饭。"
UNSEEN = "汤姆吃龘饭。"  # 龘 is in no training sentence of the lexicon model
UNSEEN_NOTE = (
    "1 character outside the model's source vocabulary, read as <unk>: 龘 "
    "(the translation may leave them out)"
)
ENGLISH_NOTE = (
    "0 of its 10 letters are Chinese characters, the script of the model's source language "
    "zh: is it in another language? Translated anyway"
)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return lexicon_checkpoint(tmp_path_factory.mktemp("translate_notes"))


@pytest.fixture(scope="module")
def translator(checkpoint) -> Translator:
    return Translator.load(checkpoint)


def cut_note(given: int) -> str:
    return (
        f"{given} source pieces, truncated to the model's limit of {MAX_PIECES}: "
        f"only the first {MAX_PIECES} were translated"
    )


def test_each_translation_counts_its_sources_pieces(translator):
    lines = [LONG, "", PLAIN, ENGLISH]
    given = [len(translator.src_tokenizer.encode(line)) for line in lines]
    assert translator.max_source_len == MAX_PIECES and given[0] > MAX_PIECES
    translations = translator.translate(lines, SearchSettings(beam_size=1))
    assert [t.pieces_given for t in translations] == given
    assert [t.pieces_kept for t in translations] == [min(n, MAX_PIECES) for n in given]
    assert [t.truncated for t in translations] == [True, False, False, False]
    first = translator.src_tokenizer.encode(LONG)[:MAX_PIECES]
    assert translations[0].source_pieces == [translator.src_tokenizer.id_to_piece(i) for i in first] + ["</s>"]  # fmt: skip


def test_the_notes_say_what_happened_to_each_line(translator):
    lines = [LONG, ENGLISH, PLAIN, UNSEEN]
    translations = translator.translate(lines, SearchSettings(beam_size=1))
    notes = [input_notes(t, translator.src_tokenizer) for t in translations]
    given = len(translator.src_tokenizer.encode(LONG))
    assert notes == [[cut_note(given)], [ENGLISH_NOTE], [], [UNSEEN_NOTE]]


def test_the_unknown_characters_are_those_the_tokeniser_reads_as_unk(translator):
    tokenizer = translator.src_tokenizer
    source = "龘汤姆 吃龘饭 。㐀"
    by_hand = [c for c in dict.fromkeys(source) if c != " " and tokenizer.encode(c) == [UNK_ID]]
    assert by_hand == ["龘", "㐀"]
    assert unknown_characters(source, tokenizer) == by_hand
    assert unknown_characters(PLAIN, tokenizer) == []


def test_seq2seq_translate_warns_on_stderr_naming_the_line(checkpoint, translator):
    """Run as a user runs it (its own process, its default logging): one warning line on
    stderr per doubtful line, and every line translated."""
    command = [sys.executable, "-m", "seq2seq.cli.translate", str(checkpoint), PLAIN, LONG,
               ENGLISH, UNSEEN, "--beam-size", "1"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 4
    given = len(translator.src_tokenizer.encode(LONG))
    assert done.stderr.splitlines() == [
        f"WARNING: line 2: {given} source pieces, truncated to the model's limit of {MAX_PIECES}",
        f"WARNING: line 3: {ENGLISH_NOTE}",
        f"WARNING: line 4: {UNSEEN_NOTE}",
    ]


def test_the_service_answers_the_counts_and_the_warnings(checkpoint, translator):
    pytest.importorskip("fastapi", reason="fastapi is not installed (pip install '.[serve]')")
    pytest.importorskip("httpx", reason="httpx (FastAPI's TestClient) is not installed")
    with warnings.catch_warnings():  # Starlette asks for `httpx2`; `httpx` works the same
        warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
        from fastapi import testclient
    from seq2seq.serve.app import create_app
    from seq2seq.serve.backends import TorchEngine
    from seq2seq.serve.limits import Limits

    app = create_app(TorchEngine(translator, checkpoint), Limits())
    with testclient.TestClient(app, base_url="http://127.0.0.1") as client:
        answer = client.post("/translate", json={"sentences": [LONG, ENGLISH, PLAIN]}).json()
    given = [len(translator.src_tokenizer.encode(line)) for line in (LONG, ENGLISH, PLAIN)]
    got = [(t["truncated"], t["pieces_given"], t["pieces_kept"], t["warnings"])
           for t in answer["translations"]]  # fmt: skip
    assert got == [
        (True, given[0], MAX_PIECES, [cut_note(given[0])]),
        (False, given[1], given[1], [ENGLISH_NOTE]),
        (False, given[2], given[2], []),
    ]
