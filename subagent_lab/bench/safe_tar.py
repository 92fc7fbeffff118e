"""Unpack an sdist's ``.tar.gz`` as data: files and directories where they say, nothing else.

Every member is checked before anything is written: a relative name without ``..``; a regular
file, a directory, a symbolic link or a hard link to a regular file of the archive (no device,
FIFO or other special file); sizes and counts bounded. Files and directories are written first,
through tarfile's ``data`` filter, while the tree holds no link at all; symbolic links are made
last, each in a directory that resolves inside the tree and each resolving inside it once made,
and all are checked again at the end (a later link can redirect an earlier one). A link that would
lead outside, relative or absolute, refuses the whole archive.
"""

from __future__ import annotations

import os
import posixpath
import tarfile
from pathlib import Path

MAX_MEMBERS = 500_000
MAX_TOTAL_BYTES = 4 << 30
"""Caps on one archive's members and unpacked size (a small ``.tar.gz`` can expand a lot)."""


def _relative(name: str) -> str:
    """``name`` normalised; ValueError when it is absolute, empty or climbs with ``..``."""
    if not name or name.startswith("/") or "\0" in name:
        raise ValueError(f"member {name!r}: not a relative path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise ValueError(f"member {name!r}: leaves the archive's directory")
    return "/".join(parts)


def check_members(members: list[tarfile.TarInfo]) -> None:
    """ValueError naming the first member that is not plain data (see the module's docstring)."""
    if len(members) > MAX_MEMBERS:
        raise ValueError(f"more than {MAX_MEMBERS} members")
    files = {_relative(m.name) for m in members if m.isreg()}
    total = 0
    for m in members:
        name = _relative(m.name)
        if m.issym():
            if m.linkname.startswith("/") or "\0" in m.linkname:
                raise ValueError(f"member {m.name!r}: a link to the absolute path {m.linkname!r}")
            target = posixpath.normpath(posixpath.join(posixpath.dirname(name), m.linkname))
            if target == ".." or target.startswith("../"):
                raise ValueError(f"member {m.name!r}: a link leading outside ({m.linkname!r})")
        elif m.islnk():
            if _relative(m.linkname) not in files:
                raise ValueError(
                    f"member {m.name!r}: a hard link to {m.linkname!r}, not a file of the archive"
                )
        elif not (m.isreg() or m.isdir()):
            raise ValueError(f"member {m.name!r}: a device, FIFO or other special file")
        total += m.size if m.isreg() else 0
        if total > MAX_TOTAL_BYTES:
            raise ValueError(f"more than {MAX_TOTAL_BYTES} bytes unpacked")


def unpack(archive: Path, dest: Path) -> None:
    """Unpack the ``.tar.gz`` ``archive`` into the new directory ``dest``.

    ValueError for a member that is not plain data (nothing is written then, or what was written
    stays inside ``dest``); ``tarfile.TarError`` or OSError for an unreadable archive.
    """
    with tarfile.open(archive, "r:gz") as tar:
        members = tar.getmembers()
        check_members(members)
        dest.mkdir()
        plain = [m for m in members if not m.issym()]
        tar.extractall(dest, members=plain, filter="data")
    root = os.path.realpath(dest)
    links = [(dest / _relative(m.name), m.linkname) for m in members if m.issym()]
    for path, target in links:
        if not _inside(os.path.realpath(path.parent), root):
            raise ValueError(f"member {path.relative_to(dest)}: its directory leads outside through a link")
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.symlink(target, path)
        except FileExistsError as exc:
            raise ValueError(f"member {path.relative_to(dest)}: a link over another member") from exc
        _check_link(path, root, dest)
    for path, _ in links:
        _check_link(path, root, dest)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root + os.sep)


def _check_link(path: Path, root: str, dest: Path) -> None:
    if not _inside(os.path.realpath(path), root):
        raise ValueError(f"member {path.relative_to(dest)}: a link leading outside the archive's directory")
