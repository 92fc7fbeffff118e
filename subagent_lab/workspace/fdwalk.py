"""Path resolution by file descriptor: no name is checked and then opened again.

``walk`` resolves a workspace-relative path one component at a time, each ``openat``-ed with
``O_PATH | O_NOFOLLOW`` relative to the descriptor of the directory before it, starting from a
descriptor of the workspace root. A symlink is read from the descriptor that was opened on it
(``readlinkat(fd, "")``), so the link that is followed is the one that was looked at; its target
is walked the same way (an absolute target must name a place inside the root), ``..`` pops the
resolved directories (the semantics of ``realpath``), and popping the root is an escape. What
``walk`` returns holds descriptors: the caller reads, writes and re-opens through them, so a
directory swapped for a link after the walk changes nothing for that call.

A path that changes while it is walked (a component vanishes, or turns into something else
between two looks) raises ``PathChanged``; containment failures raise ``PathEscape`` and
``PathLoop``. All three are errors for the caller to turn into an observation, never a crash.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections import deque
from dataclasses import dataclass, field

MAX_LINKS = 40
"""Symlinks followed in one walk (the kernel's own limit)."""
_PATH_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC
_MISSING = (errno.ENOENT, errno.ENOTDIR, errno.ENAMETOOLONG)
"""What ``openat`` says of a name that does not exist (or could not: a name over NAME_MAX)."""


class WalkError(Exception):
    """A path could not be resolved inside the root."""


class PathEscape(WalkError):
    """A symlink (or ``..`` after one) leads outside the root."""


class PathLoop(WalkError):
    """More than ``MAX_LINKS`` symlinks: a loop, or a chain too long to follow."""


class PathChanged(WalkError):
    """A component changed while it was being resolved (a concurrent rename or swap)."""


@dataclass
class Walked:
    """The result of one walk: descriptors the caller must ``close``.

    ``fd`` is an ``O_PATH`` descriptor of the object itself (None when it does not exist);
    ``parent_fd`` one of the directory that holds it (the root for the root itself); ``name``
    its entry in that directory ('' for the root); ``parts`` the canonical components from the
    root; ``missing`` the components below ``parent_fd`` that do not exist yet (the last is
    ``name``), empty when the object exists.
    """

    parent_fd: int
    name: str
    parts: list[str]
    fd: int | None = None
    info: os.stat_result | None = None
    missing: list[str] = field(default_factory=list)

    @property
    def rel(self) -> str:
        return "/".join(self.parts) if self.parts else "."

    def close(self) -> None:
        for fd in {self.fd, self.parent_fd} - {None}:
            with contextlib.suppress(OSError):
                os.close(fd)  # type: ignore[arg-type]
        self.fd = None

    def __enter__(self) -> Walked:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _split(path: str) -> list[str]:
    return [p for p in path.split("/") if p not in ("", ".")]


def walk(root_fd: int, path: str, roots: tuple[str, ...]) -> Walked:
    """Resolve ``path`` (relative to the root) under the directory descriptor ``root_fd``.

    ``roots``: the spellings of the root an absolute symlink target may use (its real path and
    the path it was given as). Missing components are allowed: the walk stops at the first one,
    and ``missing`` lists it and what follows (a ``..`` there is refused as a changed path).
    """
    stack: list[int] = [os.dup(root_fd)]
    names: list[str] = []
    pending = deque(_split(path))
    links = 0
    try:
        while pending:
            part = pending.popleft()
            if part == "..":
                if not names:
                    raise PathEscape(path)
                os.close(stack.pop())
                names.pop()
                continue
            try:
                fd = os.open(part, _PATH_FLAGS, dir_fd=stack[-1])
            except OSError as exc:
                if exc.errno not in _MISSING:
                    raise
                rest = [part, *pending]
                if ".." in rest:
                    raise PathChanged(f"'{path}' goes through a directory that does not exist") from None
                return _result(stack, names, None, None, rest)
            info = os.fstat(fd)
            if stat.S_ISLNK(info.st_mode):
                links += 1
                try:
                    target = os.readlink("", dir_fd=fd)
                finally:
                    os.close(fd)
                if links > MAX_LINKS:
                    raise PathLoop(path)
                if target.startswith("/"):
                    inside = _under(target, roots)
                    if inside is None:
                        raise PathEscape(path)
                    while len(stack) > 1:
                        os.close(stack.pop())
                    names.clear()
                    pending.extendleft(reversed(_split(inside)))
                else:
                    pending.extendleft(reversed(target.split("/")))
                continue
            if pending:
                if not stat.S_ISDIR(info.st_mode):
                    os.close(fd)  # a file where a directory is named: what is below does not exist
                    if ".." in pending:
                        raise PathChanged(f"'{'/'.join([*names, part])}' is not a directory")
                    return _result(stack, names, None, None, [part, *pending])
                stack.append(fd)
                names.append(part)
                continue
            return _result(stack, [*names, part], fd, info, [], name=part)
        # The path was the root itself (or resolved to it).
        if len(stack) == 1:
            top = os.dup(stack[0])
            return _result(stack, [], top, os.fstat(top), [], name="")
        last = stack.pop()
        name = names[-1]
        return _result(stack, names, last, os.fstat(last), [], name=name)
    except WalkError:
        for fd in stack:
            os.close(fd)
        raise
    except OSError as exc:
        for fd in stack:
            os.close(fd)
        if exc.errno == errno.ELOOP:
            raise PathLoop(path) from None
        raise PathChanged(f"'{path}': {exc.strerror}") from None


def _result(
    stack: list[int], parts: list[str], fd: int | None, info: os.stat_result | None, missing: list[str],
    *, name: str | None = None,
) -> Walked:  # fmt: skip
    """Close every directory descriptor but the innermost and package the walk's outcome."""
    parent = stack.pop()
    for other in stack:
        os.close(other)
    stack.clear()
    if missing:
        return Walked(parent, missing[-1], [*parts, *missing], None, None, missing)
    return Walked(parent, name if name is not None else (parts[-1] if parts else ""), parts, fd, info)


def _under(target: str, roots: tuple[str, ...]) -> str | None:
    """``target`` relative to the first root it lies under (lexically), or None."""
    norm = os.path.normpath(target)
    for root in roots:
        if norm == root:
            return ""
        if norm.startswith(root.rstrip("/") + "/"):
            return norm[len(root.rstrip("/")) + 1 :]
    return None


def reopen(walked: Walked, flags: int) -> int:
    """Open the walked object for I/O (``flags``, never following a link) and make sure it is
    the very object the walk found; ``PathChanged`` if it was swapped in between."""
    if walked.fd is None or walked.info is None:
        raise PathChanged(f"'{walked.rel}' does not exist")
    name = walked.name or "."
    try:
        fd = os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=walked.parent_fd)
    except OSError as exc:
        raise PathChanged(f"'{walked.rel}' changed while it was opened ({exc.strerror})") from None
    now = os.fstat(fd)
    if (now.st_dev, now.st_ino) != (walked.info.st_dev, walked.info.st_ino):
        os.close(fd)
        raise PathChanged(f"'{walked.rel}' was replaced while it was opened")
    return fd
