"""Download a pinned sdist straight from the package index, by the file's SHA-256.

An sdist is data (issue 52): nothing of it runs, not even to learn its metadata, so pip (which
prepares an sdist's metadata with its build backend before keeping the file) is never asked. The
index's project page lists each file with its digest, as JSON (PEP 691) or as HTML links ending
in ``#sha256=...`` (PEP 503, which every index serves); the fetcher downloads the file whose
digest is the pinned one and hashes what arrived before anything else reads it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import posixpath
import re
import urllib.parse
import urllib.request
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

DEFAULT_INDEX = "https://pypi.org/simple"
JSON_ACCEPT = "application/vnd.pypi.simple.v1+json"
ACCEPT = f"{JSON_ACCEPT}, text/html;q=0.1"
SCHEMES = ("https://", "http://", "file://")
MAX_PAGE_BYTES = 64 << 20
MAX_SDIST_BYTES = 1 << 30
"""Caps on a project page and on one sdist: a hostile or broken index cannot fill the disk."""


@dataclass(frozen=True)
class IndexFile:
    """One file a project page lists."""

    name: str
    url: str
    """Absolute."""
    sha256: str | None
    """As the page states it; None where it states none."""


def index_url() -> str:
    """The index pip would use: ``PIP_INDEX_URL`` or PyPI's."""
    return (os.environ.get("PIP_INDEX_URL") or DEFAULT_INDEX).rstrip("/")


def shown_index() -> str:
    """``index_url()`` without any credentials in it, for messages and logs."""
    return without_credentials(index_url())


def without_credentials(url: str) -> str:
    """``url`` less any ``user:password@`` part."""
    parts = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def project_url(dist: str, index: str) -> str:
    """The project page of ``dist`` on ``index`` (PEP 503 normalised name)."""
    return f"{index}/{normalise(dist)}/"


def normalise(name: str) -> str:
    """A distribution name as PEP 503 compares it."""
    return re.sub(r"[-_.]+", "-", name).lower()


def is_sdist_of(filename: str, dist: str, version: str) -> bool:
    """Whether ``filename`` is the ``.tar.gz`` sdist of ``dist==version`` (names normalised)."""
    stem = filename.removesuffix(".tar.gz")
    name, _, got = stem.rpartition("-")
    return (
        filename.endswith(".tar.gz") and normalise(name) == normalise(dist) and got.lower() == version.lower()
    )


def find_file(page: dict[str, object], sha256: str) -> tuple[str, str] | None:
    """(file name, URL) of the ``.tar.gz`` on a PEP 691 project page whose SHA-256 is ``sha256``."""
    for entry in json_files(page, ""):
        if entry.sha256 == sha256 and entry.name.endswith(".tar.gz"):
            return entry.name, entry.url
    return None


def json_files(page: dict[str, object], base: str) -> list[IndexFile]:
    """The files of a PEP 691 page whose names are one path component, URLs made absolute."""
    files = page.get("files")
    found = []
    for entry in files if isinstance(files, list) else []:
        if not isinstance(entry, dict):
            continue
        hashes, name, url = entry.get("hashes"), str(entry.get("filename", "")), entry.get("url")
        digest = hashes.get("sha256") if isinstance(hashes, dict) else None
        if _plain_name(name) and isinstance(url, str):
            found.append(
                IndexFile(name, urllib.parse.urljoin(base, url), digest if isinstance(digest, str) else None)
            )
    return found


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href")
        if tag == "a" and href:
            self.hrefs.append(href)


def html_files(text: str, base: str) -> list[IndexFile]:
    """The files a PEP 503 page links to (name from the URL's path, digest from its fragment)."""
    parser = _Links()
    parser.feed(text)
    found = []
    for href in parser.hrefs:
        url, _, fragment = urllib.parse.urljoin(base, href).partition("#")
        name = urllib.parse.unquote(posixpath.basename(urllib.parse.urlsplit(url).path))
        algo, _, digest = fragment.partition("=")
        if _plain_name(name):
            found.append(IndexFile(name, url, digest.lower() if algo == "sha256" and digest else None))
    return found


def project_files(dist: str, index: str | None = None, timeout: float = 60.0) -> list[IndexFile]:
    """Every file the index lists for ``dist``. OSError when the page cannot be read (a URLError
    is one), ValueError when it is neither a PEP 691 nor a PEP 503 page or has another scheme."""
    page = project_url(dist, index or index_url())
    if not page.startswith(SCHEMES):
        raise ValueError(f"the index {page} is not an http(s) or file URL")
    url = page + "index.html" if page.startswith("file://") else page  # a directory on disk
    with urllib.request.urlopen(_request(url, {"Accept": ACCEPT}), timeout=timeout) as response:  # checked
        body = response.read(MAX_PAGE_BYTES + 1)
        kind = response.headers.get("Content-Type", "") or ""
    if len(body) > MAX_PAGE_BYTES:
        raise ValueError(f"the project page {page} is larger than {MAX_PAGE_BYTES} bytes")
    if JSON_ACCEPT in kind or kind.startswith("application/json"):
        data = json.loads(body)
        return json_files(data if isinstance(data, dict) else {}, page)
    return html_files(body.decode("utf-8", "replace"), page)


def download(url: str, target: Path, timeout: float = 60.0) -> str:
    """Write the file at ``url`` to the new file ``target``; the SHA-256 of what arrived. At most
    ``MAX_SDIST_BYTES``; OSError or ValueError when it cannot be had whole."""
    if not url.startswith(SCHEMES):
        raise ValueError(f"{url} is not an http(s) or file URL")
    digest, size = hashlib.sha256(), 0
    with urllib.request.urlopen(_request(url, {}), timeout=timeout) as response, target.open("xb") as out:
        for chunk in iter(lambda: response.read(1 << 20), b""):
            size += len(chunk)
            if size > MAX_SDIST_BYTES:
                raise ValueError(f"{url} is larger than {MAX_SDIST_BYTES} bytes")
            digest.update(chunk)
            out.write(chunk)
    return digest.hexdigest()


def _request(url: str, headers: dict[str, str]) -> urllib.request.Request:
    """A request for ``url``; credentials in the index's URL (``https://user:token@host/simple``,
    as pip takes them) go as Basic authorisation to that host only, never in the URL."""
    index = urllib.parse.urlsplit(index_url())
    parts = urllib.parse.urlsplit(without_credentials(url))  # a link's own are dropped
    same_host = (parts.scheme, parts.netloc) == (index.scheme, index.netloc.rpartition("@")[2])
    if index.username is not None and same_host:
        user = urllib.parse.unquote(index.username) + ":" + urllib.parse.unquote(index.password or "")
        headers = {**headers, "Authorization": "Basic " + base64.b64encode(user.encode()).decode("ascii")}
    return urllib.request.Request(urllib.parse.urlunsplit(parts), headers=headers)


def _plain_name(name: str) -> bool:
    """One path component (a file name the index gives cannot place a file anywhere else)."""
    return (
        bool(name) and "/" not in name and "\\" not in name and name not in (".", "..") and "\0" not in name
    )
