"""Fetch a corpus file once: from a local mirror, an earlier download, or the web.

The file keeps the name its URL ends in and lands in `<root>/raw/`, with a
`<name>.manifest.json` beside it recording where it came from and its sha256, so a run
can state exactly which version of a corpus (whose public copy changes) it used.

Nothing partial or unverified is kept: a download is streamed into a temporary file and
renamed into place only once its length matches the server's Content-Length and its
sha256 matches `data.source.sha256` when that pins one. An earlier copy whose bytes no
longer match its manifest is refused, with both hashes and the files to delete. A new copy
(from the mirror, or downloaded again) whose content differs from what the manifest it
replaces recorded is accepted when `data.source.sha256` is null, as documented, with one
warning naming both hashes, so that runs on the old and the new content can be told apart.
`raw/` is locked (an advisory `flock`, where the platform has one) while a file is
fetched, so parallel runs fetch it once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import zipfile
from datetime import datetime, timezone
from http.client import HTTPException
from pathlib import Path
from typing import Any
from urllib.error import URLError
from urllib.request import Request, urlopen

from seq2seq.bounded_files import read_json
from seq2seq.data.settings import file_name_from_url
from seq2seq.files import folder_lock, replace, temporary_beside, write_atomically
from seq2seq.progress_bars import progress_bar

log = logging.getLogger(__name__)

MIRROR_ENV = "SEQ2SEQ_DATA_MIRROR"
USER_AGENT = (
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/124.0 Safari/537.36"
)
CHUNK_BYTES = 1 << 16


class FetchError(RuntimeError):
    """The corpus file could not be obtained; the message says where to put it by hand."""


def fetch(url: str, member: str | None = None, **options: Any) -> Path:
    """The path of `<root>/raw/<name>`, where `<name>` is the URL's last segment: see
    `fetch_verified`, whose keywords (`root`, `mirror`, `timeout`, `sha256`) it takes."""
    return fetch_verified(url, member, **options)[0]


def fetch_verified(
    url: str,
    member: str | None = None,
    *,
    root: Path | str,
    mirror: Path | str | None = None,
    timeout: float = 30.0,
    sha256: str | None = None,
) -> tuple[Path, str]:
    """The path of `<root>/raw/<name>` and the sha256 of its content, checked (a caller
    keying caches by the content, `seq2seq.data.record`, need not read a corpus of
    gigabytes a second time).

    Looks, in order, in the mirror folder (`mirror`, else the `SEQ2SEQ_DATA_MIRROR`
    environment variable), for an earlier copy in `<root>/raw/`, and finally downloads.
    When `member` is given the file must be a zip holding it. When `sha256` is given
    (`data.source.sha256`), a file with other content is refused, whichever way it came.
    """
    name = file_name_from_url(url)
    raw = Path(root) / "raw"
    target = raw / name
    pinned = sha256.lower() if sha256 else None
    with folder_lock(raw):
        mirror_file = _mirror_file(name, mirror)
        if mirror_file is not None:
            digest = _copy_from_mirror(mirror_file, target, pinned)
        elif target.is_file():
            log.info("using the earlier copy %s", target)
            digest = _check_earlier_copy(target, pinned)
        else:
            digest = _download(url, target, timeout, pinned)
            previous = _manifest_sha256(target)
            _write_manifest_of_copy(target, url, digest, previous=previous, pinned=pinned)
    if member:
        _check_member(target, member)
    return target, digest


def manifest_path(path: Path) -> Path:
    return path.with_name(path.name + ".manifest.json")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_manifest(path: Path, source: str, sha256: str | None = None) -> dict[str, object]:
    """Write `<file>.manifest.json`: source, sha256, size and the date of fetching.

    `sha256` is the file's hash when the caller has already computed it.
    """
    manifest = {
        "file": path.name,
        "source": source,
        "sha256": sha256 or sha256_of(path),
        "size": path.stat().st_size,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    text = json.dumps(manifest, indent=2) + "\n"
    write_atomically(manifest_path(path), text.encode("utf-8"))
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


def _copy_from_mirror(mirror_file: Path, target: Path, pinned: str | None) -> str:
    """Copy unless `target` already holds the same bytes and a manifest that says so;
    return the sha256 of `target`."""
    recorded = _manifest_sha256(target)
    if target.is_file() and recorded is not None:
        digest = sha256_of(target)
        if digest == recorded and _same_file(mirror_file, target, digest):
            source = f"the mirror copy {mirror_file} (and {target})"
            _check_pinned(target, digest, pinned, source, remedy="replace the mirror copy")
            return digest
    log.info("copying %s from the mirror %s", target.name, mirror_file.parent)
    with temporary_beside(target) as temporary:
        shutil.copyfile(mirror_file, temporary)
        digest = sha256_of(temporary)
        _check_pinned(target, digest, pinned, source=f"the mirror copy {mirror_file}")
        replace(temporary, target)
    source = str(mirror_file.resolve())
    _write_manifest_of_copy(target, source, digest, previous=recorded, pinned=pinned)
    return digest


def _write_manifest_of_copy(
    target: Path, source: str, digest: str, *, previous: str | None, pinned: str | None
) -> None:
    """`write_manifest` for a new copy of `target`; first, when `data.source.sha256` is null
    and the manifest replaced recorded other content (`previous`), one warning with both
    hashes."""
    if pinned is None and previous is not None and previous != digest:
        log.warning(
            "%s changed: its manifest recorded sha256 %s, the new copy from %s has sha256 %s. "
            "Accepted, as data.source.sha256 is null (any content); runs prepared before used "
            "the other content. data.source.sha256 pins the content: set data.source.sha256=%s "
            "to refuse any other.",
            target,
            previous,
            source,
            digest,
            digest,
        )
    write_manifest(target, source=source, sha256=digest)


def _same_file(other: Path, target: Path, target_sha256: str) -> bool:
    if other.stat().st_size != target.stat().st_size:
        return False
    return sha256_of(other) == target_sha256


def _check_earlier_copy(target: Path, pinned: str | None) -> str:
    """Refuse an earlier copy whose bytes differ from its manifest (or from
    `data.source.sha256`); return its sha256."""
    digest = sha256_of(target)
    if not manifest_path(target).is_file():
        write_manifest(target, source="found in place", sha256=digest)
    recorded = _recorded_sha256(target) or "nothing readable"
    if digest != recorded:
        raise FetchError(
            f"{target} no longer matches its manifest {manifest_path(target)}: its sha256 is "
            f"{digest} but the manifest records {recorded}. The file was changed or damaged "
            f"after it was fetched; delete {target} and {manifest_path(target)} to fetch it "
            "again (or put the right file back)."
        )
    remedy = f"delete {target} and {manifest_path(target)} to fetch it again"
    _check_pinned(target, digest, pinned, source=f"the earlier copy {target}", remedy=remedy)
    return digest


def _manifest_sha256(target: Path) -> str | None:
    """The sha256 that the manifest of `target` records; None when there is none or it
    cannot be read."""
    return _recorded_sha256(target) if manifest_path(target).is_file() else None


def _recorded_sha256(target: Path) -> str | None:
    """The sha256 that the manifest of `target` records; None when it cannot be read."""
    try:
        recorded = read_json(manifest_path(target))["sha256"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        log.warning("the manifest %s cannot be read (%r)", manifest_path(target), error)
        return None
    return str(recorded)


def _check_pinned(
    target: Path, digest: str, pinned: str | None, source: str, remedy: str = "nothing was kept"
) -> None:
    """FetchError with both hashes when `data.source.sha256` pins content other than `digest`."""
    if pinned is None or digest == pinned:
        return
    raise FetchError(
        f"{source} of {target.name} has sha256 {digest}, but data.source.sha256 pins {pinned}: "
        f"refused ({remedy}). If this other version is wanted, set data.source.sha256={digest} "
        "(or null to accept any)."
    )


def _download(url: str, target: Path, timeout: float, pinned: str | None) -> str:
    """Stream `url` into a temporary file beside `target`, renamed only when complete.

    Complete: as many bytes as the Content-Length header announced (when there is one)
    and the pinned sha256 (when there is one). Returns the file's sha256.
    """
    request = Request(url, headers={"User-Agent": USER_AGENT})
    log.info("downloading %s", url)
    try:
        with urlopen(request, timeout=timeout) as response, temporary_beside(target) as temporary:
            expected = _content_length(response)
            digest, received = _stream_to(response, temporary, expected, target.name)
            if expected is not None and received != expected:
                raise FetchError(
                    f"the download of {url} stopped after {received:,} of the {expected:,} "
                    f"bytes its Content-Length announced; nothing was kept. " + _by_hand(target)
                )
            _check_pinned(target, digest, pinned, source=f"the download {url}")
            replace(temporary, target)
    except (URLError, OSError, ValueError, HTTPException) as error:
        raise FetchError(_offline_message(url, target, error)) from error
    return digest


def _content_length(response) -> int | None:
    """The Content-Length header as an int, None when absent; ValueError when not a number."""
    value = response.headers.get("Content-Length")
    if value is None or str(value).strip() == "":
        return None
    length = int(value)
    if length < 0:
        raise ValueError(f"negative Content-Length {value!r}")
    return length


def _stream_to(response, path: Path, expected: int | None, label: str) -> tuple[str, int]:
    """Copy `response` into `path` chunk by chunk; return its sha256 and its length. A
    progress bar in bytes shows in a terminal or a notebook (`seq2seq.progress_bars`)."""
    digest = hashlib.sha256()
    received = 0
    with (
        open(path, "wb") as stream,
        progress_bar(expected or None, unit="B", unit_scale=True, desc=label) as progress,
    ):
        for chunk in iter(lambda: response.read(CHUNK_BYTES), b""):
            stream.write(chunk)
            digest.update(chunk)
            received += len(chunk)
            progress.update(len(chunk))
    return digest.hexdigest(), received


def _by_hand(target: Path) -> str:
    name = target.name
    return (
        f"Get {name} by hand and either put it at {target} or set {MIRROR_ENV} to a folder "
        f"holding {name}."
    )


def _offline_message(url: str, target: Path, error: Exception) -> str:
    return f"could not download {url} ({error}). " + _by_hand(target)


def _check_member(path: Path, member: str) -> None:
    if not zipfile.is_zipfile(path):
        raise FetchError(f"{path} should be a zip archive holding {member}, but it is not a zip")
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
    if member not in names:
        raise FetchError(f"{path} holds no {member!r} (it holds {', '.join(names[:10])})")
