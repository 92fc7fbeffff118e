"""A commit's tree written out from raw git objects, each checked against its id.

``ObjectReader`` runs one ``git cat-file --batch`` (raw object bytes: no filter, attribute or
textconv applies) and hashes every object it returns, so an object whose bytes are not those of
its id (a planted loose object, a doctored pack) is refused. ``write_tree`` walks a commit's trees
through it and writes the files itself: names that would leave the directory or make a ``.git``
are refused, files are created with ``O_EXCL | O_NOFOLLOW`` and made read-only, and symbolic links
are made last, so no write follows one.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

GIT_MODES: dict[bytes, int | str] = {
    b"100644": 0o444,
    b"100664": 0o444,  # an old git's group-writable mode: an ordinary file
    b"100755": 0o555,
    b"120000": "link",
    b"40000": "tree",
    b"160000": "submodule",  # a gitlink: an empty directory, as git checks one out
}
"""A tree entry's mode -> the file's permission bits, or what else the entry is."""
SMALL_REQUEST = 4096
"""Bytes of object ids written at once without a thread (well under a pipe's buffer)."""


class ObjectReader:
    """Raw objects of the repository ``env`` names (``GIT_DIR``), each checked against its id."""

    def __init__(self, env: dict[str, str]) -> None:
        self._env = env
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> ObjectReader:
        self._proc = subprocess.Popen(
            ["git", "-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null", "cat-file", "--batch"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=self._env,
        )  # fmt: skip
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()
            proc.kill()
            proc.wait()

    def read(self, oid: str) -> tuple[str, bytes]:
        """(type, bytes) of object ``oid``: LookupError when absent, ValueError when its bytes
        are not those of ``oid``."""
        [(kind, data)] = list(self.read_many([oid]))
        return kind, data

    def read_many(self, oids: Sequence[str]) -> Iterator[tuple[str, bytes]]:
        """(type, bytes) of each of ``oids`` in order, requested ahead of reading (one pipe each
        way, so the requests go from a thread while the answers are read here)."""
        proc = self._proc
        if proc is None or proc.stdin is None or proc.stdout is None:
            raise RuntimeError("ObjectReader used outside its with-block")
        stdin, stdout = proc.stdin, proc.stdout
        payload = "".join(f"{oid}\n" for oid in oids).encode("ascii")

        def send() -> None:
            try:
                stdin.write(payload)
                stdin.flush()
            except (BrokenPipeError, ValueError):
                pass  # git ended: the reader below reports it

        # A request that fits a pipe's buffer cannot block; a longer one is sent from a thread.
        writer = threading.Thread(target=send, daemon=True) if len(payload) > SMALL_REQUEST else None
        if writer is None:
            send()
        else:
            writer.start()
        try:
            for oid in oids:
                yield _answer(stdout, oid)
        finally:
            if writer is not None:
                writer.join(timeout=5)


def _answer(stdout: IO[bytes], oid: str) -> tuple[str, bytes]:
    """One ``cat-file --batch`` answer for ``oid``, its bytes checked against the id."""
    header = stdout.readline().decode("ascii", "replace").split()
    if not header:
        raise OSError("git cat-file ended early")
    if header[1:] == ["missing"] or len(header) != 3 or header[0] != oid:
        raise LookupError(f"no object {oid}")
    kind, size = header[1], int(header[2])
    data = stdout.read(size)
    stdout.read(1)  # the newline after the contents
    if len(data) != size:
        raise OSError("git cat-file ended early")
    digest = hashlib.sha1() if len(oid) == 40 else hashlib.sha256()
    digest.update(f"{kind} {size}\0".encode("ascii"))
    digest.update(data)
    if digest.hexdigest() != oid:
        raise ValueError(f"object {oid} holds bytes of another object ({digest.hexdigest()})")
    return kind, data


def tree_entries(data: bytes, width: int) -> Iterator[tuple[bytes, bytes, str]]:
    """(mode, name, id) of each entry of a raw tree object whose ids are ``width`` bytes."""
    pos = 0
    while pos < len(data):
        space = data.index(b" ", pos)
        nul = data.index(b"\0", space)
        if nul + 1 + width > len(data):
            raise ValueError("a truncated tree object")
        yield data[pos:space], data[space + 1 : nul], data[nul + 1 : nul + 1 + width].hex()
        pos = nul + 1 + width


def _checked_name(name: bytes) -> str:
    """A tree entry's name as a path component; ValueError for one git itself would not check out."""
    if not name or b"/" in name or b"\0" in name or name in (b".", b"..") or name.lower() == b".git":
        raise ValueError(f"a tree entry named {name!r}")
    return os.fsdecode(name)


def write_tree(reader: ObjectReader, rev: str, dest: Path) -> str:
    """Write the tree of commit ``rev`` into the new directory ``dest``; its tree id.

    LookupError when ``rev`` is not a commit of the repository; ValueError for an object that does
    not match its id or a tree that cannot be written faithfully (a hostile name, a duplicate).
    """
    kind, commit = reader.read(rev)
    if kind != "commit":
        raise LookupError(f"{rev} is a {kind}, not a commit")
    first = commit.split(b"\n", 1)[0]
    tree_id = first.removeprefix(b"tree ").decode("ascii", "replace")
    if not first.startswith(b"tree ") or len(tree_id) != len(rev):
        raise ValueError(f"commit {rev} names no tree")
    width = len(rev) // 2
    files: list[tuple[str, Path, int]] = []
    links: list[tuple[str, Path]] = []
    dest.mkdir()
    pending = [(tree_id, dest)]
    while pending:  # a loop, not recursion: a hostile tree may nest deeper than Python's stack
        oid, directory = pending.pop()
        kind, data = reader.read(oid)
        if kind != "tree":
            raise ValueError(f"{oid} is a {kind}, not a tree")
        for mode, name, child in tree_entries(data, width):
            path, what = directory / _checked_name(name), GIT_MODES.get(mode)
            if what is None:
                raise ValueError(f"{path.relative_to(dest)}: unknown mode {mode!r}")
            if isinstance(what, int):
                files.append((child, path, what))
            elif what == "link":
                links.append((child, path))
            else:
                _mkdir(path, dest)
                if what == "tree":
                    pending.append((child, path))
    for (oid, path, perm), (kind, data) in zip(files, reader.read_many([f[0] for f in files]), strict=True):
        _write_file(path, dest, kind, data, perm, oid)
    for (oid, path), (kind, data) in zip(links, reader.read_many([x[0] for x in links]), strict=True):
        if kind != "blob" or b"\0" in data:
            raise ValueError(f"{path.relative_to(dest)}: a link whose target is not a blob path ({oid})")
        try:
            os.symlink(os.fsdecode(data), path)
        except FileExistsError as exc:
            raise ValueError(f"{path.relative_to(dest)}: two entries of one name") from exc
    return tree_id


def _mkdir(path: Path, dest: Path) -> None:
    try:
        path.mkdir()
    except FileExistsError as exc:
        raise ValueError(f"{path.relative_to(dest)}: two entries of one name") from exc


def _write_file(path: Path, dest: Path, kind: str, data: bytes, perm: int, oid: str) -> None:
    """Create ``path`` (never through a link, never over an entry) holding ``data``, mode ``perm``."""
    if kind != "blob":
        raise ValueError(f"{path.relative_to(dest)}: {oid} is a {kind}, not a file's contents")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError as exc:
        raise ValueError(f"{path.relative_to(dest)}: two entries of one name") from exc
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fchmod(fd, perm)
    finally:
        os.close(fd)
