"""Scratch copies: the main agent works on a copy of the target, and reports what it changed.

The copy is safe to write: nothing in it leads back out. Symlinks are re-created relative so
that each resolves inside the copy (a link to a place outside the target, into a directory
that is not copied, or in a loop is dropped); FIFOs, sockets and device files are skipped;
secret files (the policy of Read: names and private-key content) are not copied. Each skip is
noted. A manifest of what was copied (content hashes, link targets) is taken while copying, so
``ScratchCopy.changed_files`` is computed from the copy alone, never by looking at the target.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from subagent_lab.core.secret_policy import PRIVATE_KEY_MARKER, is_secret_dir, is_secret_name

SCRATCH_SKIP: frozenset[str] = frozenset(
    {".git", ".venv", "node_modules", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox"}
)
"""Directory names not copied into the scratch workspace (nor counted as changes in it)."""
SCRATCH_PREFIX = "subagent-main-"
_CHUNK = 1024 * 1024

Signature = tuple[int, int, int, int]
"""``(inode, size, mtime_ns, ctime_ns)``: ctime moves on every write, so an unchanged signature
means unchanged content and the hash taken at copy time still holds."""


@dataclass
class ScratchCopy:
    """A scratch copy of a target: its root, what was copied (the manifest) and what was not."""

    root: Path
    manifest: dict[str, str] = field(default_factory=dict)
    """Relative path -> ``file:<sha256>`` or ``link:<target>``, as copied."""
    notes: list[str] = field(default_factory=list)
    """One line per entry that was not copied (or a link that was rewritten), saying why."""
    _signatures: dict[str, tuple[Signature, str]] = field(default_factory=dict, repr=False)

    def changed_files(self) -> list[str]:
        """Relative paths added, removed or modified in the copy since it was made."""
        now = _snapshot(self.root, self._signatures)
        changed = self.manifest.keys() ^ now.keys()
        changed |= {rel for rel in self.manifest.keys() & now.keys() if self.manifest[rel] != now[rel]}
        return sorted(changed)


def make_scratch(target: Path, base: str | Path | None = None) -> ScratchCopy:
    """Copy ``target`` into a new temporary directory (see the module docstring for what stays behind).

    Returns the copy; its root is ``<tempdir>/<target name>``. ``remove_scratch`` deletes it again.
    """
    real_target = os.path.realpath(target)
    root = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX, dir=base)) / Path(real_target).name
    copy = ScratchCopy(root=root)
    os.mkdir(root)
    _copy_dir(real_target, "", copy, real_target)
    return copy


def copy_to_scratch(target: Path, base: str | Path | None = None) -> Path:
    """The root of a new scratch copy of ``target`` (``make_scratch`` also returns its manifest)."""
    return make_scratch(target, base).root


def _copy_dir(src_dir: str, rel_dir: str, copy: ScratchCopy, real_target: str) -> None:
    try:
        entries = sorted(os.scandir(src_dir), key=lambda e: e.name)
    except OSError as exc:
        copy.notes.append(f"skipped '{rel_dir or '.'}': cannot list it ({exc.strerror})")
        return
    for entry in entries:
        rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
        dest = os.path.join(copy.root, rel)
        try:
            mode = entry.stat(follow_symlinks=False).st_mode
        except OSError as exc:
            copy.notes.append(f"skipped '{rel}': {exc.strerror}")
            continue
        if stat.S_ISDIR(mode) and entry.name in SCRATCH_SKIP:
            continue
        if is_secret_dir(rel) if stat.S_ISDIR(mode) else is_secret_name(rel):
            copy.notes.append(f"skipped '{rel}': a secret (credentials, keys, .env)")
        elif stat.S_ISLNK(mode):
            _copy_link(entry.path, rel, dest, copy, real_target)
        elif stat.S_ISDIR(mode):
            os.mkdir(dest)
            _copy_dir(entry.path, rel, copy, real_target)
            shutil.copystat(entry.path, dest, follow_symlinks=False)
        elif stat.S_ISREG(mode):
            _copy_file(entry.path, rel, dest, copy)
        else:
            kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device file"
            copy.notes.append(f"skipped '{rel}': {kind}")


def _copy_link(src: str, rel: str, dest: str, copy: ScratchCopy, real_target: str) -> None:
    """Re-create a link relative, pointing at the same place inside the copy, or drop it."""
    try:
        resolved = os.path.realpath(src, strict=True)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            copy.notes.append(f"dropped link '{rel}': a symlink loop")
            return
        resolved = os.path.realpath(src)  # dangling: where it would point
    if not (resolved == real_target or resolved.startswith(real_target + os.sep)):
        copy.notes.append(f"dropped link '{rel}': it points outside the target")
        return
    inside = os.path.relpath(resolved, real_target)
    parts = [] if inside == "." else inside.split(os.sep)
    if any(part in SCRATCH_SKIP for part in parts) or (parts and is_secret_name(inside)):
        copy.notes.append(f"dropped link '{rel}': it points at something not copied")
        return
    link = os.path.relpath(os.path.join(copy.root, inside), os.path.dirname(dest))
    if os.path.isabs(os.readlink(src)):
        copy.notes.append(f"rewrote absolute link '{rel}' as '{link}' (inside the copy)")
    os.symlink(link, dest)
    copy.manifest[rel] = f"link:{link}"


def _copy_file(src: str, rel: str, dest: str, copy: ScratchCopy) -> None:
    """Copy one regular file while hashing it; a file holding a private key is not kept."""
    try:
        # O_NONBLOCK and O_NOFOLLOW: a file swapped for a FIFO or a link since lstat cannot hang or lead out.
        fd = os.open(src, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        copy.notes.append(f"skipped '{rel}': {exc.strerror}")
        return
    digest, secret, tail = hashlib.sha256(), False, b""
    with os.fdopen(fd, "rb", buffering=0) as handle, open(dest, "xb") as out:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            secret = True  # swapped since lstat: treat as not copyable
        while not secret and (chunk := handle.read(_CHUNK)):
            secret = PRIVATE_KEY_MARKER.search(tail + chunk) is not None
            digest.update(chunk)
            out.write(chunk)
            tail = chunk[-80:]
    if secret:
        os.unlink(dest)
        copy.notes.append(f"skipped '{rel}': it holds a private key (or changed while copied)")
        return
    shutil.copystat(src, dest)
    copy.manifest[rel] = f"file:{digest.hexdigest()}"
    copy._signatures[rel] = (_signature(os.lstat(dest)), copy.manifest[rel])


def _signature(info: os.stat_result) -> Signature:
    return (info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _snapshot(root: Path, known: dict[str, tuple[Signature, str]]) -> dict[str, str]:
    """Relative path -> digest of every file and link in the copy (unchanged files are not re-read)."""
    out: dict[str, str] = {}
    pending = [(str(root), "")]
    while pending:
        directory, rel_dir = pending.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                if entry.name not in SCRATCH_SKIP:
                    pending.append((entry.path, rel))
            elif stat.S_ISLNK(info.st_mode):
                out[rel] = f"link:{os.readlink(entry.path)}"
            elif not stat.S_ISREG(info.st_mode):
                out[rel] = f"special:{stat.S_IFMT(info.st_mode)}"
            elif rel in known and known[rel][0] == _signature(info):
                out[rel] = known[rel][1]
            else:
                out[rel] = _hash(entry.path)
    return out


def _hash(path: str) -> str:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for chunk in iter(lambda: handle.read(_CHUNK), b""):
                digest.update(chunk)
    except OSError:
        return "unreadable"
    return f"file:{digest.hexdigest()}"


def remove_scratch(scratch: str | Path) -> None:
    """Delete a scratch copy made by ``make_scratch`` (its temporary parent directory included)."""
    path = Path(scratch)
    parent = path.parent
    if not parent.name.startswith(SCRATCH_PREFIX):
        raise ValueError(f"{scratch} is not a scratch copy made by make_scratch")
    shutil.rmtree(parent)
