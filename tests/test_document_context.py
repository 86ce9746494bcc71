"""The corpus's own documents and document context (data.documents.boundaries=corpus,
data.documents.context): a text_pair corpus marks its documents with blank lines or an id
file; groups never cross a corpus document; with context each pair keeps its own target
and reads at most c sentences of its own document before its source; bad marks name their
file and line; the record keys of configs without the new options are those of before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import compose_config
from test_documents import numbered_pair

from seq2seq.config.build import plain
from seq2seq.data.corpus import CorpusError
from seq2seq.data.documents import lines_in_context, split_document
from seq2seq.data.prepare import prepare
from seq2seq.data.record import record_key
from seq2seq.data.settings import DataConfig
from seq2seq.lab.lab_models import TINY_GRU_MODEL
from seq2seq.runs.assemble import train_and_test
from seq2seq.special_tokens import SEP_ID

# Documents of each split, as their sizes in sentences: one of 1, one longer than any group.
DOCUMENT_SIZES = {"train": [3, 1, 9, 4, 2, 5, 7, 3, 6, 2, 8], "valid": [2, 4, 1, 3],
                  "test": [5, 1, 2, 3]}  # fmt: skip


def corpus_documents() -> dict[str, list[list[tuple[str, str]]]]:
    """Each split's documents as (English, Chinese) pairs, no pair twice."""
    documents, number = {}, 0
    for split, sizes in DOCUMENT_SIZES.items():
        documents[split] = []
        for size in sizes:
            documents[split].append([numbered_pair(n) for n in range(number, number + size)])
            number += size
    return documents


def write_corpus(folder: Path, marks: str) -> None:
    """The documents as train / valid / test files marked by blank lines or docids files."""
    folder.mkdir(parents=True, exist_ok=True)
    for split, documents in corpus_documents().items():
        for side, lang in enumerate(("en", "zh")):
            if marks == "blank_lines":  # two blank lines between two documents: one boundary
                blocks = ["".join(pair[side] + "\n" for pair in document) for document in documents]
                text = "\n\n".join(blocks)
            else:
                text = "".join(pair[side] + "\n" for document in documents for pair in document)
            (folder / f"{split}.{lang}").write_text(text, encoding="utf-8")
        if marks == "docids":
            ids = [f"doc-{index}" for index, document in enumerate(documents) for _ in document]
            (folder / f"{split}.docids").write_text("\n".join(ids) + "\n", encoding="utf-8")


def context_config(tmp_path: Path, marks: str | None = "blank_lines", **overrides) -> DataConfig:
    corpus = tmp_path / "corpus"
    source = {"name": "text_pair", "document_marks": marks,
              **{f"{split}_prefix": str(corpus / split) for split in DOCUMENT_SIZES}}  # fmt: skip
    settings = {
        "name": "marked_docs", "src_lang": "en", "tgt_lang": "zh", "source": source,
        "documents": {"boundaries": "corpus", "min_sentences": 2, "max_sentences": 3},
        "root": str(tmp_path / "data"), "src_vocab_size": 48, "tgt_vocab_size": 40,
        "max_len": 400, "max_tokens": 4000, "vocab_cap": True,
    }  # fmt: skip
    return DataConfig(**{**settings, **overrides})


def lines(folder: Path, split: str, lang: str) -> list[str]:
    return (folder / f"{split}.{lang}").read_text("utf-8").splitlines()


def grouped(folder: Path, split: str) -> list[list[tuple[str, str]]]:
    """The joined documents of a prepared split as their (English, Chinese) pairs."""
    english, chinese = lines(folder, split, "en"), lines(folder, split, "zh")
    return [list(zip(split_document(en), split_document(zh), strict=True))
            for en, zh in zip(english, chinese, strict=True)]  # fmt: skip


@pytest.mark.parametrize("marks", ["blank_lines", "docids"])
def test_groups_never_cross_a_corpus_document_and_hold_every_pair_once_in_order(tmp_path, marks):
    write_corpus(tmp_path / "corpus", marks)
    prepared = prepare(context_config(tmp_path, marks))
    documents = corpus_documents()
    for split, corpus_docs in documents.items():
        groups = grouped(prepared.folder, split)
        assert [pair for group in groups for pair in group] == [
            pair for document in corpus_docs for pair in document
        ]
        owner = {pair: index for index, document in enumerate(corpus_docs) for pair in document}
        for group in groups:
            assert len({owner[pair] for pair in group}) == 1  # one corpus document
            assert 1 <= len(group) <= 3
        cut_within = sum(len(document) > 3 for document in corpus_docs)
        assert len(groups) > len(corpus_docs) or not cut_within  # long documents are cut
    assert not list(prepared.folder.glob("*-documents.txt"))  # read, then removed
    assert prepared.summary["document_boundaries"] == "corpus"


def test_blank_lines_and_docids_make_the_same_documents(tmp_path):
    write_corpus(tmp_path / "blank" / "corpus", "blank_lines")
    write_corpus(tmp_path / "ids" / "corpus", "docids")
    by_blank = prepare(context_config(tmp_path / "blank", "blank_lines"))
    by_ids = prepare(context_config(tmp_path / "ids", "docids"))
    for split in DOCUMENT_SIZES:
        assert grouped(by_blank.folder, split) == grouped(by_ids.folder, split)


@pytest.mark.parametrize("context", [1, 2])
def test_with_context_each_pair_reads_at_most_c_sentences_of_its_own_document_before_it(
    tmp_path, context
):
    write_corpus(tmp_path / "corpus", "blank_lines")
    documents = {"boundaries": "corpus", "context": context}
    prepared = prepare(context_config(tmp_path, documents=documents))
    for split, corpus_docs in corpus_documents().items():
        expected_src, expected_tgt = [], []
        for document in corpus_docs:
            for index, (english, chinese) in enumerate(document):
                before = [pair[0] for pair in document[max(0, index - context) : index]]
                expected_src.append([*before, english])
                expected_tgt.append(chinese)
        got = [split_document(line) for line in lines(prepared.folder, split, "en")]
        assert got == expected_src
        assert lines(prepared.folder, split, "zh") == expected_tgt  # its own target alone
    assert prepared.summary["document_context"] == context
    assert prepared.summary["test_size"] == sum(DOCUMENT_SIZES["test"])  # a pair a sentence


def test_context_of_drawn_documents_stays_within_each_group(tmp_path):
    """Without corpus marks the drawn groups are the documents the context comes from."""
    write_corpus(tmp_path / "corpus", "docids")
    documents = {"min_sentences": 3, "max_sentences": 3, "context": 5}
    prepared = prepare(context_config(tmp_path, None, documents=documents))
    pairs = [pair for document in corpus_documents()["valid"] for pair in document]
    got = [split_document(line) for line in lines(prepared.folder, "valid", "en")]
    assert got == [[pair[0] for pair in pairs[3 * (i // 3) : i + 1]] for i in range(len(pairs))]


def test_blank_lines_of_a_sentence_corpus_are_marks_not_malformed_pairs(tmp_path):
    write_corpus(tmp_path / "corpus", "blank_lines")
    prepared = prepare(context_config(tmp_path, documents=None, name="marked_sentences"))
    pairs = [pair for document in corpus_documents()["test"] for pair in document]
    assert lines(prepared.folder, "test", "en") == [pair[0] for pair in pairs]
    assert prepared.summary["malformed_skipped"] == 0
    unmarked = prepare(context_config(tmp_path, None, documents=None, name="unmarked"))
    assert unmarked.summary["malformed_skipped"] > 0  # the same blank lines, read as pairs


def test_a_line_blank_on_one_side_only_is_still_malformed_and_named_by_its_own_number(
    tmp_path, caplog
):
    write_corpus(tmp_path / "corpus", "blank_lines")
    path = tmp_path / "corpus" / "train.zh"
    text = path.read_text("utf-8").splitlines()
    text[5] = ""  # line 6: after the blank lines 4 and 5 between two documents
    path.write_text("\n".join(text) + "\n", encoding="utf-8")
    prepared = prepare(context_config(tmp_path))
    assert prepared.summary["malformed_skipped"] == 1
    assert "skipped 1 malformed line(s) of" in caplog.text
    assert "at line(s) 6\n" in caplog.text + "\n"  # the file's own line, blank lines counted


def test_an_id_met_again_after_another_document_is_refused_naming_both_lines(tmp_path):
    write_corpus(tmp_path / "corpus", "docids")
    path = tmp_path / "corpus" / "valid.docids"
    ids = path.read_text("utf-8").splitlines()
    ids[3] = "doc-0"  # line 4 is in document doc-1; doc-0 ended at line 2
    path.write_text("\n".join(ids) + "\n", encoding="utf-8")
    with pytest.raises(
        CorpusError, match=r"valid\.docids: line 4 is in document 'doc-0' again.*line 1"
    ):
        prepare(context_config(tmp_path, "docids"))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda ids: ids[:-1], r"valid\.docids ends after 9 lines but .*valid\.en goes on"),
        (lambda ids: [*ids[:2], " ", *ids[3:]], r"valid\.docids: line 3 holds no document id"),
    ],
)
def test_a_short_or_empty_docids_file_is_refused_naming_the_file_and_line(tmp_path, edit, message):
    write_corpus(tmp_path / "corpus", "docids")
    path = tmp_path / "corpus" / "valid.docids"
    path.write_text("\n".join(edit(path.read_text("utf-8").splitlines())) + "\n", "utf-8")
    with pytest.raises(CorpusError, match=message):
        prepare(context_config(tmp_path, "docids"))


def test_a_missing_docids_file_names_its_key(tmp_path):
    write_corpus(tmp_path / "corpus", "blank_lines")
    with pytest.raises(
        CorpusError, match=r"data\.source\.train_prefix=.*train\.docids does not exist"
    ):
        prepare(context_config(tmp_path, "docids"))


@pytest.mark.parametrize(
    ("marks", "documents", "message"),
    [
        (None, {"boundaries": "corpus"}, r"boundaries=corpus needs a corpus whose source marks"),
        ("blank_lines", {"boundaries": "corpus", "order": "random"},
         r"data\.documents\.order=random would join sentences of different corpus documents"),
        ("blank_lines", {"context": 0}, r"data\.documents\.context must be an integer of at least 1"),
        ("pages", {}, r"data\.source\.document_marks must be one of blank_lines, docids"),
    ],
)  # fmt: skip
def test_a_wrong_document_setting_names_its_key(tmp_path, marks, documents, message):
    with pytest.raises(ValueError, match=message):
        context_config(tmp_path, marks, documents=documents)


def test_the_new_options_leave_the_record_keys_of_before_unchanged():
    """Keys computed by the release before boundaries, context and document_marks."""
    from seq2seq.config.data_presets import data_preset

    docs = DataConfig.from_mapping(data_preset("tatoeba_zh_en_docs"))
    assert record_key(docs, "0" * 64) == "393a19e27ed9539b"
    values = data_preset("text_pair")
    values["source"] |= {"train_prefix": "a", "valid_prefix": "b", "test_prefix": "c"}
    assert record_key(DataConfig.from_mapping(values), "0" * 64) == "769090e35898e9a2"
    context = {**data_preset("tatoeba_zh_en_docs")["documents"], "context": 2}
    with_context = DataConfig.from_mapping(
        {**data_preset("tatoeba_zh_en_docs"), "documents": context}
    )
    assert record_key(with_context, "0" * 64) != "393a19e27ed9539b"
    values["source"]["document_marks"] = "blank_lines"
    assert record_key(DataConfig.from_mapping(values), "0" * 64) != "769090e35898e9a2"


@pytest.fixture(scope="module")
def context_run(tmp_path_factory) -> tuple[Path, object]:
    """A model with hierarchical attention trained for 3 updates on document context (2
    lines before each source), from the command line's config: (run folder, config)."""
    root = tmp_path_factory.mktemp("document_context")
    write_corpus(root / "corpus", "docids")
    corpus = root / "corpus"
    prefixes = [f"data.source.{split}_prefix={corpus / split}" for split in DOCUMENT_SIZES]
    cfg = compose_config([
        *TINY_GRU_MODEL, "data=text_pair", *prefixes, "data.source.document_marks=docids",
        "data.src_lang=en", "data.tgt_lang=zh", "data.src_vocab_size=48",
        "data.tgt_vocab_size=40", "data.vocab_cap=true", "data.name=context_docs",
        f"data.root={root / 'data'}", "data.documents={boundaries:corpus,context:2}",
        "attention=hierarchical", "trainer.max_steps=3", "trainer.valid_every=3",
        "trainer.threads=1", "trainer.test_search.beam_size=1", "logging.progress_bar=false",
        "logging.tensorboard=false",
    ])  # fmt: skip
    run = root / "run"
    train_and_test(cfg, run, outputs_root=root)
    return run, cfg


def test_a_model_with_hierarchical_attention_trains_on_document_context_from_the_cli(context_run):
    run, cfg = context_run
    data = prepare(plain(cfg.data))
    assert any(SEP_ID in src for src, _ in data.valid.examples)
    assert all(SEP_ID not in tgt for _, tgt in data.valid.examples)  # targets are sentences
    assert "bleu" in json.loads((run / "results.json").read_text())["test"]
    references = (run / "test.ref").read_text("utf-8").splitlines()
    assert len(references) == sum(DOCUMENT_SIZES["test"])  # scored sentence by sentence
    assert not any("<sep>" in reference for reference in references)


def test_lines_in_context_read_each_line_after_the_lines_before_it_in_its_document():
    lines = ["A.", "B.", "C.", "", "D.", "E."]
    assert lines_in_context(lines, 1, ["en"]) == ["A.", "A.<sep> B.", "B.<sep> C.", "", "D.",
                                                  "D.<sep> E."]  # fmt: skip
    assert lines_in_context(lines, 5, ["en"])[2] == "A.<sep> B.<sep> C."
    assert lines_in_context(lines, 0, ["en"]) == lines
    assert lines_in_context(["我。", "你。"], 2, ["zh"]) == ["我。", "我。<sep>你。"]


@pytest.mark.parametrize(("option", "lines_before"), [([], 2), (["--context", "1"], 1),
                                                      (["--context", "0"], 0)])  # fmt: skip
def test_translate_reads_a_context_model_s_input_as_documents(
    context_run, monkeypatch, capsys, tmp_path, option, lines_before
):
    from seq2seq.cli import translate
    from seq2seq.search.translator import Translator

    run, _ = context_run
    read: list[str] = []
    original = Translator.translate

    def recording(self, lines, *args, **kwargs):
        read.extend(lines)
        return original(self, lines, *args, **kwargs)

    monkeypatch.setattr(Translator, "translate", recording)
    document = tmp_path / "document.en"
    sentences = [numbered_pair(n)[0] for n in (1, 2, 3)]
    document.write_text("\n".join([*sentences, "", sentences[0]]) + "\n", encoding="utf-8")
    code = translate.main([str(run / "checkpoints" / "best.pt"), "-i", str(document),
                           "--no-progress", *option])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0 and len(out.splitlines()) == 5  # one output a line, the blank one too
    assert read == lines_in_context([*sentences, "", sentences[0]], lines_before, ["en"])
    assert ("each line read after the" in err) == bool(lines_before)
