"""Attacks on the data pipeline: hostile downloads, files, URLs, corpora and parallel runs.

Downloads are served by a local HTTP server on 127.0.0.1 in a thread; nothing else is
contacted. Corpora are small synthetic files in `tmp_path`.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import multiprocessing
import threading
import time
import tracemalloc
import zipfile
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np
import pytest
from helpers import toy_corpus_lines

from seq2seq.data import encode as encode_module
from seq2seq.data import fetch as fetch_module
from seq2seq.data.corpus import CorpusError, read_pairs
from seq2seq.data.fetch import MIRROR_ENV, FetchError, fetch, folder_lock, write_manifest
from seq2seq.data.prepare import prepare
from seq2seq.data.settings import DataConfig
from seq2seq.data.tokenizer import SymbolTokenizer

CORPUS_BODY = "Hi.\t你好。\tCC-BY #1\nRun!\t跑！\tCC-BY #2\n".encode()


# --- helpers -------------------------------------------------------------------------------


def corpus_lines(count: int, seed: int = 0, long_every: int = 10) -> list[str]:
    """Toy pairs (`helpers.toy_corpus_lines`); every `long_every`-th one has 30+ words."""
    return toy_corpus_lines(count, seed, long_every, long_words=(30, 36))


def zip_corpus(path: Path, lines: list[str], member: str = "toy.txt") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(member, "\n".join(lines) + "\n")
    return path


def data_config(root: Path, **overrides) -> DataConfig:
    source = {"name": "tabular", "url": "https://example.org/anki/toy-eng.zip", "member": "toy.txt"}
    settings = {
        "name": "synthetic", "source": source,
        "root": str(root), "valid_size": 20, "test_size": 20,
        "src_vocab_size": 30, "tgt_vocab_size": 30, "max_len": 15, "max_tokens": 200,
    }  # fmt: skip
    return DataConfig(**{**settings, **overrides})


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class CorpusServer:
    """Serves `body` at any path; `announced` bytes in Content-Length (more = an early close)."""

    def __init__(self, body: bytes, announced: int | None = None) -> None:
        body_to_send, length = body, announced if announced is not None else len(body)

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                self.send_response(200)
                self.send_header("Content-Length", str(length))
                self.end_headers()
                self.wfile.write(body_to_send)  # then the connection closes (HTTP/1.0)

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.server.server_port}/files/{name}"

    def __enter__(self) -> CorpusServer:
        self.thread.start()
        return self

    def __exit__(self, *args) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(autouse=True)
def local_only(monkeypatch):
    """No mirror leaks in from the environment (the Makefile sets one), and no address but
    127.0.0.1 (or a file:// URL) is ever opened."""
    monkeypatch.delenv(MIRROR_ENV, raising=False)
    real_urlopen = fetch_module.urlopen

    def urlopen_local(request, *args, **kwargs):
        url = request.full_url if hasattr(request, "full_url") else str(request)
        parts = urlsplit(url)
        assert parts.scheme == "file" or parts.hostname == "127.0.0.1", f"would contact {url}"
        return real_urlopen(request, *args, **kwargs)

    monkeypatch.setattr(fetch_module, "urlopen", urlopen_local)


def files_in(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir()) if folder.is_dir() else []


# --- fetch ---------------------------------------------------------------------------------


@pytest.mark.attack("fetch")
def test_download_closed_before_content_length_is_refused_and_not_kept(tmp_path):
    with CorpusServer(CORPUS_BODY, announced=len(CORPUS_BODY) + 1000) as server:
        url = server.url("corpus.txt")
        size = len(CORPUS_BODY)
        with pytest.raises(FetchError, match=f"stopped after {size} of the {size + 1000:,} bytes"):
            fetch(url, root=tmp_path / "data")
        assert files_in(tmp_path / "data" / "raw") == []
        # and the next run does not take a partial file for "the earlier copy"
        with pytest.raises(FetchError):
            fetch(url, root=tmp_path / "data")


@pytest.mark.attack("fetch")
def test_complete_download_is_kept_with_its_manifest(tmp_path):
    with CorpusServer(CORPUS_BODY) as server:
        path = fetch(server.url("corpus.txt"), root=tmp_path / "data")
    assert path.read_bytes() == CORPUS_BODY
    manifest = json.loads(path.with_name("corpus.txt.manifest.json").read_text())
    assert manifest["sha256"] == sha256_hex(CORPUS_BODY) and manifest["size"] == len(CORPUS_BODY)


@pytest.mark.attack("fetch")
def test_download_with_another_hash_than_the_pinned_one_is_refused(tmp_path):
    pinned = "0" * 64
    with CorpusServer(CORPUS_BODY) as server:
        with pytest.raises(FetchError) as error:
            fetch(server.url("corpus.txt"), root=tmp_path / "data", sha256=pinned)
    assert sha256_hex(CORPUS_BODY) in str(error.value) and pinned in str(error.value)
    assert "data.source.sha256" in str(error.value)
    assert files_in(tmp_path / "data" / "raw") == []


@pytest.mark.attack("fetch")
def test_download_with_the_pinned_hash_is_accepted(tmp_path):
    with CorpusServer(CORPUS_BODY) as server:
        path = fetch(
            server.url("corpus.txt"), root=tmp_path / "data", sha256=sha256_hex(CORPUS_BODY)
        )
    assert path.read_bytes() == CORPUS_BODY


@pytest.mark.attack("fetch")
def test_mirror_copy_with_another_hash_than_the_pinned_one_is_refused(tmp_path):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "corpus.txt").write_bytes(CORPUS_BODY)
    url = "https://example.org/corpus.txt"
    with pytest.raises(FetchError, match=sha256_hex(CORPUS_BODY)):
        fetch(url, root=tmp_path / "data", mirror=mirror, sha256="a" * 64)
    assert files_in(tmp_path / "data" / "raw") == []


@pytest.mark.attack("fetch")
def test_earlier_copy_changed_after_its_manifest_is_refused(tmp_path):
    raw = tmp_path / "data" / "raw"
    raw.mkdir(parents=True)
    earlier = raw / "corpus.txt"
    earlier.write_bytes(CORPUS_BODY)
    write_manifest(earlier, source="https://example.org/corpus.txt")
    earlier.write_bytes(CORPUS_BODY[:20])  # truncated or edited afterwards
    with pytest.raises(FetchError) as error:
        fetch("https://example.org/corpus.txt", root=tmp_path / "data")
    message = str(error.value)
    assert str(earlier) in message and "delete" in message
    assert sha256_hex(CORPUS_BODY) in message and sha256_hex(CORPUS_BODY[:20]) in message


@pytest.mark.attack("fetch")
def test_earlier_copy_with_another_hash_than_the_pinned_one_is_refused(tmp_path):
    raw = tmp_path / "data" / "raw"
    raw.mkdir(parents=True)
    (raw / "corpus.txt").write_bytes(CORPUS_BODY)
    with pytest.raises(FetchError, match="data.source.sha256 pins " + "b" * 64):
        fetch("https://example.org/corpus.txt", root=tmp_path / "data", sha256="b" * 64)


@pytest.mark.attack("fetch")
@pytest.mark.parametrize(
    "url",
    [
        "https://example.org/anki/%2E%2E",
        "https://example.org/anki/..%2F..%2Fescaped.zip",
        "https://example.org/anki/%2Ftmp%2Fescaped.zip",
        "https://example.org/anki/..%5Cescaped.zip",
        "https://example.org/anki/../",
        "ftp://example.org/anki/cmn-eng.zip",
        "/etc/cmn-eng.zip",
    ],
)
def test_url_that_would_escape_raw_or_is_not_http_is_refused(tmp_path, url):
    with pytest.raises(ValueError, match="data.source.url"):
        DataConfig(source={"name": "tabular", "url": url}, root=str(tmp_path))
    with pytest.raises(ValueError, match="data.source.url"):
        fetch(url, root=tmp_path / "data")
    assert not (tmp_path / "escaped.zip").exists() and not (tmp_path / "data").exists()


@pytest.mark.attack("fetch")
@pytest.mark.parametrize("name", ["../outside", "a/b", "..", ".", "", "a\\b"])
def test_data_name_that_is_not_a_plain_folder_name_is_refused(tmp_path, name):
    with pytest.raises(ValueError, match="data.name"):
        DataConfig(name=name, root=str(tmp_path))


# --- corpus --------------------------------------------------------------------------------


def read_plain(path: Path, **options):
    settings = {"src_column": 1, "tgt_column": 0, "num_columns": 3, **options}
    return read_pairs(path, **settings)


@pytest.mark.attack("corpus")
def test_byte_order_mark_is_not_glued_to_the_first_sentence(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_bytes(b"\xef\xbb\xbf" + CORPUS_BODY)
    pairs, stats = read_plain(path)
    assert pairs[0] == ("你好。", "Hi.")
    assert stats.malformed == 0 and stats.control_chars == 0


@pytest.mark.attack("corpus")
def test_lines_with_control_characters_are_skipped_and_counted(tmp_path, caplog):
    lines = [
        b"Hi.\t\xe4\xbd\xa0\xe5\xa5\xbd\xe3\x80\x82\tok",  # kept
        b"Hi\x00there.\t\xe4\xbd\xa0\tNUL",  # NUL
        b"Bell\x07.\t\xe4\xbd\xa0\tBEL",  # C0
        b"Del\x7f.\t\xe4\xbd\xa0\tDEL",  # DEL
        b"Next\xc2\x85line.\t\xe4\xbd\xa0\tNEL",  # C1 (U+0085)
        b"Carriage\rreturn.\t\xe4\xbd\xa0\tCR inside the line",
        b"Run!\t\xe8\xb7\x91\xef\xbc\x81\tok",  # kept
        b"only one column",  # malformed, counted apart
    ]
    path = tmp_path / "corpus.txt"
    path.write_bytes(b"\n".join(lines) + b"\n")
    with caplog.at_level("WARNING"):
        pairs, stats = read_plain(path, max_malformed_share=0.9)
    assert pairs == [("你好。", "Hi."), ("跑!", "Run!")]  # NFKC: full-width "！" -> "!"
    assert stats.control_char_lines == [2, 3, 4, 5, 6]
    assert stats.malformed_lines == [8]
    assert "control character" in caplog.text and "2, 3, 4, 5, 6" in caplog.text


@pytest.mark.attack("corpus")
def test_file_of_control_characters_is_refused_as_the_wrong_file(tmp_path):
    path = tmp_path / "corpus.bin"
    path.write_bytes(b"\x00\x01\x02\tbinary\tjunk\n" * 50 + CORPUS_BODY)
    with pytest.raises(CorpusError, match="control characters"):
        read_plain(path)


@pytest.mark.attack("corpus")
def test_oversized_zip_member_is_refused_before_it_is_read(tmp_path, monkeypatch):
    path = zip_corpus(tmp_path / "corpus.zip", corpus_lines(200))
    monkeypatch.setattr(zipfile.ZipFile, "read", lambda *a, **k: pytest.fail("member was read"))
    monkeypatch.setattr(zipfile.ZipFile, "open", lambda *a, **k: pytest.fail("member was opened"))
    with pytest.raises(CorpusError, match="data.source.max_member_bytes=1,000"):
        read_plain(path, member="toy.txt", max_member_bytes=1000)


@pytest.mark.attack("corpus")
def test_corpus_is_read_as_a_stream(tmp_path):
    """A 24 MB zip member of one-column (malformed) lines is read without holding it whole."""
    line = ("x" * 1000 + "\n").encode()
    path = tmp_path / "big.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("big.txt", "w") as member:
            member.write(CORPUS_BODY)
            for _ in range(24):
                member.write(line * 1000)
    tracemalloc.start()
    try:
        pairs, stats = read_plain(path, member="big.txt", max_malformed_share=1.0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(pairs) == 2 and stats.malformed == 24_000
    assert peak < 8_000_000, f"peak {peak:,} bytes while reading a 24 MB member"


# --- prepare: long valid / test sentences --------------------------------------------------


@pytest.mark.attack("prepare")
def test_long_valid_and_test_sentences_are_truncated_not_fatal(tmp_path):
    max_len = 15  # also stands in for a small encoder.max_positions
    zip_corpus(tmp_path / "mirror" / "toy-eng.zip", corpus_lines(400, long_every=3))
    cfg = data_config(tmp_path / "data", max_len=max_len, max_tokens=max_len + 1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(MIRROR_ENV, str(tmp_path / "mirror"))
        data = prepare(cfg)
    folder = tmp_path / "data" / "prepared" / "synthetic"
    for split in ("valid", "test"):
        pieces = getattr(data, split)
        full_src = [len(data.src_tokenizer.encode(line)) for line in pieces.src_lines]
        full_tgt = [len(data.tgt_tokenizer.encode(line)) for line in pieces.tgt_lines]
        assert data.summary[f"{split}_src_truncated"] == sum(n > max_len for n in full_src) > 0
        assert data.summary[f"{split}_tgt_truncated"] == sum(n > max_len for n in full_tgt) > 0
        assert all(len(s) <= max_len and len(t) <= max_len for s, t in pieces.examples)
        # the references stay whole: the text files and the text lines agree, uncut
        assert (folder / f"{split}.zh").read_text(encoding="utf-8").splitlines() == pieces.src_lines
        assert (folder / f"{split}.en").read_text(encoding="utf-8").splitlines() == pieces.tgt_lines
        assert max(full_tgt) > max_len + 1
        # what the first validation does: batch within the token budget, collate
        for indices in pieces.sampler(cfg.max_tokens, shuffle=False, seed=0).batches(0):
            batch = pieces.batch(indices)
            assert batch.src.size(1) <= max_len + 1 and batch.tgt_in.size(1) <= max_len + 1
    assert len(data.valid) == 20 and len(data.test) == 20


# --- concurrency ---------------------------------------------------------------------------


@pytest.mark.attack("concurrency")
def test_encoding_cache_saved_by_another_writer_in_the_middle(tmp_path, monkeypatch):
    """A second writer saves the same cache folder between this one's write and its rename
    (what two processes preparing the same corpus do at once): both succeed, one intact
    folder, no temporary left."""
    tokenizer = SymbolTokenizer(5)
    paths = _text_files(tmp_path, [("a b c", "c b a"), ("d", "d"), ("e a", "a e")])
    real_move = encode_module._move_into_place
    interleaved = []

    def move_after_another_writer(temporary, cache) -> None:
        if not interleaved:
            interleaved.append(True)
            encode_module.encode_split(paths, tokenizer, tokenizer, tmp_path, "train")
        real_move(temporary, cache)

    monkeypatch.setattr(encode_module, "_move_into_place", move_after_another_writer)
    cache = encode_module.encode_split(paths, tokenizer, tokenizer, tmp_path, "train")
    monkeypatch.undo()
    assert interleaved
    assert [name for name in files_in(tmp_path) if name.startswith("encoded")] == [cache.name]
    data = encode_module.open_encoded(cache, lazy=True)
    assert data.examples == [([4, 5, 6], [6, 5, 4]), ([7], [7]), ([8, 4], [4, 8])]


@pytest.mark.attack("prepare")
def test_damaged_encoding_cache_is_encoded_again(tmp_path, caplog):
    tokenizer = SymbolTokenizer(5)
    paths = _text_files(tmp_path, [("a b", "b a"), ("c", "c")])
    cache = encode_module.encode_split(paths, tokenizer, tokenizer, tmp_path, "valid")
    first = encode_module.open_encoded(cache, lazy=False)
    ids = cache / "src_ids.npy"
    ids.write_bytes(ids.read_bytes()[:-3])  # cut short, as by a full disk
    with caplog.at_level("WARNING"):
        again = encode_module.encode_split(paths, tokenizer, tokenizer, tmp_path, "valid")
    assert again == cache and str(cache) in caplog.text
    assert encode_module.open_encoded(cache, lazy=False).examples == first.examples
    assert np.load(ids, allow_pickle=False).tolist() == [4, 5, 6]


def _text_files(folder: Path, pairs: list[tuple[str, str]]) -> tuple[Path, Path]:
    """`split.src` and `split.tgt` holding the pairs, one sentence a line."""
    paths = (folder / "split.src", folder / "split.tgt")
    for side, path in enumerate(paths):
        path.write_text("".join(pair[side] + "\n" for pair in pairs), encoding="utf-8")
    return paths


def _prepare_in_child(
    settings: dict, mirror: str, start: object, results: object, ready: object = None
) -> None:
    """Child process: wait for `start`, set `ready`, prepare, report the summary (or error)."""
    import os

    import seq2seq.built_ins  # noqa: F401  (a spawned process registers the sources itself)

    os.environ[MIRROR_ENV] = mirror
    start.wait(timeout=60)
    if ready is not None:
        ready.set()
    try:
        results.put(("ok", prepare(DataConfig(**settings)).summary))
    except BaseException as error:  # noqa: BLE001 - reported to the parent as text
        results.put(("error", repr(error)))
        raise


def _run_children(settings: dict, mirror: Path, count: int) -> list[tuple[str, object]]:
    context = multiprocessing.get_context("spawn")
    start, results = context.Event(), context.Queue()
    children = [
        context.Process(target=_prepare_in_child, args=(settings, str(mirror), start, results))
        for _ in range(count)
    ]
    for child in children:
        child.start()
    start.set()
    outcomes = [results.get(timeout=120) for _ in children]
    for child in children:
        child.join(timeout=60)
    assert [child.exitcode for child in children] == [0] * count, outcomes
    return outcomes


def _check_cache(folder: Path) -> dict[str, bytes]:
    """Every cache file is whole and valid; no temporary file is left. Returns name -> bytes
    (a cache folder's files as `folder/file`)."""
    names = files_in(folder)
    assert not [name for name in names if name.endswith(".part") or ".part." in name], names
    encoded = [name for name in names if name.startswith("encoded_")]
    assert len(encoded) == 3, names
    for name in encoded:
        for side in ("src", "tgt"):
            ids = np.load(folder / name / f"{side}_ids.npy", allow_pickle=False)
            offsets = np.load(folder / name / f"{side}_offsets.npy", allow_pickle=False)
            assert int(offsets[-1]) == len(ids)
    assert len([name for name in names if name.startswith("spm_")]) == 2, names
    files = [path for path in folder.rglob("*") if path.is_file()]
    return {str(path.relative_to(folder)): path.read_bytes() for path in files}


@pytest.mark.faults  # two spawned processes: 6-10 s on two cores
@pytest.mark.attack("concurrency")
def test_two_processes_preparing_the_same_corpus_at_once(tmp_path):
    mirror = tmp_path / "mirror"
    zip_corpus(mirror / "toy-eng.zip", corpus_lines(400))
    settings = vars(data_config(tmp_path / "data"))
    outcomes = _run_children(settings, mirror, count=2)
    assert [status for status, _ in outcomes] == ["ok", "ok"], outcomes
    assert outcomes[0][1] == outcomes[1][1]
    folder = tmp_path / "data" / "prepared" / "synthetic"
    first = _check_cache(folder)
    # a third, sequential run finds the same cache and the same data
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(MIRROR_ENV, str(mirror))
        again = prepare(DataConfig(**settings))
    assert again.summary == outcomes[0][1]
    assert _check_cache(folder) == first
    assert files_in(tmp_path / "data" / "raw") == ["toy-eng.zip", "toy-eng.zip.manifest.json"]


@pytest.mark.faults
@pytest.mark.attack("concurrency")
def test_prepare_waits_for_the_lock_of_its_folder(tmp_path):
    mirror = tmp_path / "mirror"
    zip_corpus(mirror / "toy-eng.zip", corpus_lines(400))
    settings = vars(data_config(tmp_path / "data"))
    folder = tmp_path / "data" / "prepared" / "synthetic"
    context = multiprocessing.get_context("spawn")
    start, ready, results = context.Event(), context.Event(), context.Queue()
    child = context.Process(
        target=_prepare_in_child, args=(settings, str(mirror), start, results, ready)
    )
    with folder_lock(folder):
        child.start()
        start.set()
        assert ready.wait(timeout=60)
        time.sleep(2.0)  # ample to prepare 400 lines, were the folder not locked
        assert child.is_alive()
        assert not list(folder.glob("encoded_*")) and not list(folder.glob("spm_*"))
    status, summary = results.get(timeout=120)
    child.join(timeout=60)
    assert (status, child.exitcode) == ("ok", 0), summary
    _check_cache(folder)


@pytest.mark.faults
@pytest.mark.attack("concurrency")
def test_four_processes_preparing_the_same_corpus_repeatedly(tmp_path, fault_figures):
    mirror = tmp_path / "mirror"
    zip_corpus(mirror / "toy-eng.zip", corpus_lines(1000, seed=3))
    rounds = 3
    for round_index in range(rounds):
        settings = vars(
            data_config(tmp_path / "data", name=f"round{round_index}", seed=round_index)
        )
        outcomes = _run_children(settings, mirror, count=4)
        assert {json.dumps(summary, sort_keys=True) for _, summary in outcomes} == {
            json.dumps(outcomes[0][1], sort_keys=True)
        }
        _check_cache(tmp_path / "data" / "prepared" / f"round{round_index}")
    fault_figures.add("concurrent_prepare_runs", rounds * 4)
