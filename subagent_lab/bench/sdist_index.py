"""Download a pinned sdist straight from the package index, by the file's SHA-256.

``pip download`` prepares an sdist's metadata before it keeps the file, and an old ``setup.py`` may
compute its version by importing the package, which in pip's build environment can be another
release of it (more-itertools 8.x reported 10.8.0 and pip refused the file). The pin is a
SHA-256, so the file itself is all that is needed: this module asks the index's JSON API
(PEP 691) for the project's files and downloads the one whose digest is the pinned one.
"""

from __future__ import annotations

import json
import os
import re
import urllib.parse
import urllib.request
from pathlib import Path
from urllib.error import URLError

DEFAULT_INDEX = "https://pypi.org/simple"
JSON_ACCEPT = "application/vnd.pypi.simple.v1+json"


def index_url() -> str:
    """The index pip would use: ``PIP_INDEX_URL`` or PyPI's."""
    return (os.environ.get("PIP_INDEX_URL") or DEFAULT_INDEX).rstrip("/")


def project_url(dist: str, index: str) -> str:
    """The project page of ``dist`` on ``index`` (PEP 503 normalised name)."""
    return f"{index}/{re.sub(r'[-_.]+', '-', dist).lower()}/"


def find_file(page: dict[str, object], sha256: str) -> tuple[str, str] | None:
    """(file name, URL) of the ``.tar.gz`` on a PEP 691 project page whose SHA-256 is ``sha256``."""
    files = page.get("files")
    for entry in files if isinstance(files, list) else []:
        if not isinstance(entry, dict):
            continue
        hashes, name, url = entry.get("hashes"), str(entry.get("filename", "")), entry.get("url")
        digest_ok = isinstance(hashes, dict) and hashes.get("sha256") == sha256
        if digest_ok and name.endswith(".tar.gz") and "/" not in name and isinstance(url, str):
            return name, url
    return None


def download_pinned(dist: str, sha256: str, dest: Path, timeout: float = 60.0) -> Path | None:
    """The sdist of ``dist`` with digest ``sha256`` downloaded into ``dest``; None when the index
    has no JSON API, no such file, or cannot be reached (the caller falls back to pip)."""
    index = index_url()
    if not index.startswith(("https://", "http://")):
        return None
    request = urllib.request.Request(project_url(dist, index), headers={"Accept": JSON_ACCEPT})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # http(s) only: checked above
            if JSON_ACCEPT not in response.headers.get("Content-Type", ""):
                return None
            found = find_file(json.loads(response.read()), sha256)
        if found is None:
            return None
        name, url = found
        url = urllib.parse.urljoin(index + "/", url)
        if not url.startswith(("https://", "http://")):
            return None
        target = dest / name
        with urllib.request.urlopen(url, timeout=timeout) as response:  # http(s) only: checked above
            target.write_bytes(response.read())
    except (URLError, OSError, ValueError):
        return None
    return target
