"""fetch(): mirror first, then an earlier copy, then a download; manifest; offline error."""

from __future__ import annotations

import hashlib
import json
import zipfile
from datetime import datetime
from pathlib import Path
from urllib.error import URLError

import pytest

from seq2seq.data import fetch as fetch_module
from seq2seq.data.fetch import MIRROR_ENV, FetchError, fetch

URL = "https://example.org/anki/corpus.zip"


def make_zip(folder: Path, name: str = "corpus.zip", member: str = "pairs.txt") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(member, "Hi.\t你好。\tattribution\n")
    return path


def no_network(*args, **kwargs):
    raise URLError("network is unreachable")


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """No test may reach the network, and no mirror leaks in from the environment."""
    monkeypatch.setattr(fetch_module, "urlopen", no_network)
    monkeypatch.delenv(MIRROR_ENV, raising=False)


def test_mirror_copy_and_manifest(tmp_path):
    source = make_zip(tmp_path / "mirror")
    path = fetch(URL, "pairs.txt", root=tmp_path / "data", mirror=tmp_path / "mirror")
    assert path == tmp_path / "data" / "raw" / "corpus.zip"
    assert path.read_bytes() == source.read_bytes()
    manifest = json.loads((path.parent / "corpus.zip.manifest.json").read_text())
    assert manifest["sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    assert manifest["size"] == source.stat().st_size
    assert manifest["source"] == str(source.resolve())
    assert datetime.fromisoformat(manifest["date"]).tzinfo is not None


def test_mirror_from_environment_variable(tmp_path, monkeypatch):
    source = make_zip(tmp_path / "mirror")
    monkeypatch.setenv(MIRROR_ENV, str(tmp_path / "mirror"))
    path = fetch(URL, root=tmp_path / "data")
    assert path.read_bytes() == source.read_bytes()


def test_earlier_copy_is_reused_without_network(tmp_path):
    earlier = make_zip(tmp_path / "data" / "raw")
    path = fetch(URL, "pairs.txt", root=tmp_path / "data")  # urlopen would raise
    assert path == earlier
    assert (earlier.parent / "corpus.zip.manifest.json").is_file()


def test_mirror_wins_over_a_stale_copy(tmp_path):
    stale = tmp_path / "data" / "raw" / "corpus.zip"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"stale")
    fetch_module.write_manifest(stale, source="an older download")
    source = make_zip(tmp_path / "mirror")
    fetch(URL, root=tmp_path / "data", mirror=tmp_path / "mirror")
    assert stale.read_bytes() == source.read_bytes()
    manifest = json.loads((stale.parent / "corpus.zip.manifest.json").read_text())
    assert manifest["sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()


def test_download_from_file_url(tmp_path, monkeypatch):
    from urllib.request import urlopen

    monkeypatch.setattr(fetch_module, "urlopen", urlopen)  # the real one, for file://
    source = make_zip(tmp_path / "server")
    path = fetch(source.as_uri(), "pairs.txt", root=tmp_path / "data")
    assert path.read_bytes() == source.read_bytes()
    manifest = json.loads((path.parent / "corpus.zip.manifest.json").read_text())
    assert manifest["source"] == source.as_uri()
    assert manifest["sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    assert sorted(p.name for p in path.parent.iterdir()) == [
        "corpus.zip",
        "corpus.zip.manifest.json",
    ]


def test_interrupted_download_leaves_no_file(tmp_path, monkeypatch):
    class BrokenResponse:
        headers = {"Content-Length": "100"}

        def __enter__(self):
            return self

        def __exit__(self, *args):
            return False

        def read(self, size):
            raise TimeoutError("read timed out")

    monkeypatch.setattr(fetch_module, "urlopen", lambda *args, **kwargs: BrokenResponse())
    with pytest.raises(FetchError):
        fetch(URL, root=tmp_path / "data")
    assert list((tmp_path / "data" / "raw").iterdir()) == []


def test_offline_error_says_which_file_goes_where(tmp_path):
    with pytest.raises(FetchError) as error:
        fetch(URL, root=tmp_path / "data")
    message = str(error.value)
    assert str(tmp_path / "data" / "raw" / "corpus.zip") in message
    assert f"{MIRROR_ENV} to a folder holding corpus.zip" in message
    assert URL in message


def test_zip_without_the_member_is_rejected(tmp_path):
    make_zip(tmp_path / "mirror", member="other.txt")
    with pytest.raises(FetchError, match="pairs.txt"):
        fetch(URL, "pairs.txt", root=tmp_path / "data", mirror=tmp_path / "mirror")


def test_url_without_file_name_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="data.source.url"):
        fetch("https://example.org/", root=tmp_path)
