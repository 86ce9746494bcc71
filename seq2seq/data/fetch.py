"""Fetch a corpus file once: from a local mirror, an earlier download, or the web.

The file keeps the name its URL ends in and lands in `<root>/raw/`, with a
`<name>.manifest.json` beside it recording where it came from and its sha256, so a run
can state exactly which version of a corpus (whose public copy changes) it used.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from urllib.error import URLError
from urllib.parse import unquote, urlsplit
from urllib.request import Request, urlopen

from tqdm import tqdm

log = logging.getLogger(__name__)

MIRROR_ENV = "SEQ2SEQ_DATA_MIRROR"
USER_AGENT = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/124.0 Safari/537.36"
)
CHUNK_BYTES = 1 << 16


class FetchError(RuntimeError):
    """The corpus file could not be obtained; the message says where to put it by hand."""


def fetch(
    url: str,
    member: str | None = None,
    *,
    root: Path | str,
    mirror: Path | str | None = None,
    timeout: float = 30.0,
) -> Path:
    """Return the path of `<root>/raw/<name>`, where `<name>` is the URL's last segment.

    Looks, in order, in the mirror folder (`mirror`, else the `SEQ2SEQ_DATA_MIRROR`
    environment variable), for an earlier copy in `<root>/raw/`, and finally downloads.
    When `member` is given the file must be a zip holding it.
    """
    name = file_name_from_url(url)
    target = Path(root) / "raw" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    mirror_file = _mirror_file(name, mirror)
    if mirror_file is not None:
        _copy_from_mirror(mirror_file, target)
    elif target.is_file():
        log.info("using the earlier copy %s", target)
        if not manifest_path(target).is_file():
            write_manifest(target, source="found in place")
    else:
        _download(url, target, timeout)
        write_manifest(target, source=url)
    if member:
        _check_member(target, member)
    return target


def file_name_from_url(url: str) -> str:
    """The last path segment of `url`: `https://x.org/anki/cmn-eng.zip` -> `cmn-eng.zip`."""
    name = unquote(urlsplit(url).path.rstrip("/").rsplit("/", 1)[-1])
    if not name:
        raise ValueError(f"data.url must end in a file name, got {url!r}")
    return name


def manifest_path(path: Path) -> Path:
    return path.with_name(path.name + ".manifest.json")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_manifest(path: Path, source: str) -> dict[str, object]:
    """Write `<file>.manifest.json`: source, sha256, size and the date of fetching."""
    manifest = {
        "file": path.name,
        "source": source,
        "sha256": sha256_of(path),
        "size": path.stat().st_size,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    manifest_path(path).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def _mirror_file(name: str, mirror: Path | str | None) -> Path | None:
    folder = mirror if mirror is not None else os.environ.get(MIRROR_ENV)
    if not folder:
        return None
    candidate = Path(folder) / name
    if candidate.is_file():
        return candidate
    log.info("mirror %s has no %s; looking elsewhere", folder, name)
    return None


def _copy_from_mirror(mirror_file: Path, target: Path) -> None:
    """Copy unless `target` already holds the same bytes (its manifest is then kept)."""
    if target.is_file() and manifest_path(target).is_file():
        if _same_file(mirror_file, target):
            return
    log.info("copying %s from the mirror %s", target.name, mirror_file.parent)
    with _temporary_beside(target) as temporary:
        shutil.copyfile(mirror_file, temporary)
        os.replace(temporary, target)
    write_manifest(target, source=str(mirror_file.resolve()))


def _same_file(first: Path, second: Path) -> bool:
    if first.stat().st_size != second.stat().st_size:
        return False
    return sha256_of(first) == sha256_of(second)


def _download(url: str, target: Path, timeout: float) -> None:
    """Stream `url` into a temporary file beside `target`, renamed only when complete."""
    request = Request(url, headers={"User-Agent": USER_AGENT})
    log.info("downloading %s", url)
    try:
        with urlopen(request, timeout=timeout) as response, _temporary_beside(target) as temporary:
            total = int(response.headers.get("Content-Length") or 0) or None
            with (
                open(temporary, "wb") as stream,
                tqdm(total=total, unit="B", unit_scale=True, desc=target.name) as progress,
            ):
                for chunk in iter(lambda: response.read(CHUNK_BYTES), b""):
                    stream.write(chunk)
                    progress.update(len(chunk))
            os.replace(temporary, target)
    except (URLError, OSError, ValueError) as error:
        raise FetchError(_offline_message(url, target, error)) from error


def _offline_message(url: str, target: Path, error: Exception) -> str:
    name = target.name
    return (
        f"could not download {url} ({error}). Get {name} by hand and either put it at "
        f"{target} or set {MIRROR_ENV} to a folder holding {name}."
    )


@contextmanager
def _temporary_beside(target: Path) -> Iterator[Path]:
    """A temporary path in the folder of `target`, removed on exit unless renamed away."""
    handle, name = tempfile.mkstemp(dir=target.parent, prefix=target.name + ".", suffix=".part")
    os.close(handle)
    path = Path(name)
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


def _check_member(path: Path, member: str) -> None:
    if not zipfile.is_zipfile(path):
        raise FetchError(f"{path} should be a zip archive holding {member}, but it is not a zip")
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
    if member not in names:
        raise FetchError(f"{path} holds no {member!r} (it holds {', '.join(names[:10])})")
