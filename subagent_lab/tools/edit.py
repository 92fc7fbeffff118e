"""The Edit tool (main agent only): exact-match replacement or file creation, written atomically.

An existing file may only be edited after the agent has read it, and only if it has not changed
since: ``ReadStamps`` remembers (mtime_ns, size, inode) of every file the agent's Read returned,
and ``tracked_read`` is the Read tool that records them. A successful edit records the new stamp,
so the agent can edit the same file again without re-reading its own change.

Edit resolves the path by descriptor (``Workspace.open_path``), reads the file through the
descriptor it checked and writes through the descriptor of the directory it resolved, so a
directory swapped for a link by a concurrent command cannot redirect the write outside the
workspace; the result names the file written by its place in the workspace.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from subagent_lab.core.tool import ToolError
from subagent_lab.tools.read import read
from subagent_lab.workspace.fdwalk import PathChanged, Walked, reopen
from subagent_lab.workspace.sandbox import Workspace

Stamp = tuple[int, int, int]


def _stamp(path: Path) -> Stamp | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_mtime_ns, info.st_size, info.st_ino)


@dataclass
class ReadStamps:
    """What the agent last saw of each file it read, by real path. Thread-safe."""

    _stamps: dict[str, Stamp] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)
    """Held across check-and-write, so two edits of one turn (run concurrently) cannot interleave."""

    def record(self, path: Path, stamp: Stamp | None = None) -> None:
        """Remember ``stamp`` (default: the file's current one) as what the agent has seen."""
        stamp = stamp if stamp is not None else _stamp(path)
        with self.lock:
            if stamp is None:
                self._stamps.pop(str(path), None)
            else:
                self._stamps[str(path)] = stamp

    def seen(self, path: Path) -> Stamp | None:
        """The stamp recorded for ``path``, None if the agent never read it."""
        with self.lock:
            return self._stamps.get(str(path))


class EditContext(Protocol):
    """What Edit and the tracked Read need: the workspace and the read-stamp registry."""

    @property
    def workspace(self) -> Workspace: ...

    @property
    def stamps(self) -> ReadStamps: ...


def tracked_read(ctx: EditContext, path: str, start: int = 1, limit: int = 400) -> str:
    # The docstring (the tool description and argument docs) is Read's own, set below.
    real, before = _walked_stamp(ctx.workspace, path)
    text = read(ctx.workspace, path, start, limit)
    # Recorded only when the file is the same object, unchanged, before and after the read: if
    # it was swapped or written meanwhile, nothing is recorded and a later Edit asks for a re-read.
    after = _walked_stamp(ctx.workspace, path)
    if before is not None and after == (real, before):
        ctx.stamps.record(real, before)
    return text


tracked_read.__doc__ = read.__doc__


def _walked_stamp(ws: Workspace, path: str) -> tuple[Path, Stamp | None]:
    with ws.open_path(path) as walked:
        return Path(ws.root, *walked.parts), _info_stamp(walked.info)


def _info_stamp(info: os.stat_result | None) -> Stamp | None:
    return None if info is None else (info.st_mtime_ns, info.st_size, info.st_ino)


def _write_at(dir_fd: int, name: str, data: bytes, mode: int, *, replace: bool) -> os.stat_result:
    """Write ``data`` to a temporary file in the directory ``dir_fd``, then move it to ``name``.

    Everything goes through the directory's descriptor: the file lands in the directory that
    was resolved, whatever happens to names meanwhile. ``replace``: rename over ``name`` (an
    edit); else link it there, failing if ``name`` appeared meanwhile (a new file). Readers see
    the old content or the new one, never a partial file; on failure the temporary file is
    removed and the original is left as it was. Returns the written file's stat.
    """
    tmp = f".{name[:200]}.{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd
        )
    except OSError as exc:
        raise ToolError(f"cannot write next to '{name}': {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
            info = os.fstat(handle.fileno())
        if replace:
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        else:
            os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
            os.unlink(tmp, dir_fd=dir_fd)
        return info
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        if isinstance(exc, FileExistsError):
            raise ToolError(f"'{name}' appeared while it was being created; Read it, then edit it") from None
        if isinstance(exc, OSError):
            raise ToolError(f"cannot write '{name}': {exc.strerror or exc}") from None
        raise


def _make_parents(walked: Walked) -> int:
    """Create the missing directories above ``walked.name`` under ``walked.parent_fd``; return an
    ``O_PATH`` descriptor of the innermost one (the caller closes it)."""
    current = os.dup(walked.parent_fd)
    try:
        for part in walked.missing[:-1]:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o777, dir_fd=current)
            nxt = os.open(part, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=current)
            os.close(current)
            current = nxt
    except OSError as exc:
        os.close(current)
        raise ToolError(f"cannot create the directories of '{walked.rel}': {exc.strerror}") from None
    return current


def _read_all(walked: Walked) -> bytes:
    try:
        fd = reopen(walked, os.O_RDONLY | os.O_NONBLOCK)
    except PathChanged as exc:
        raise ToolError(f"{exc}; Read it again before editing it") from None
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


def _line_span(text: str, index: int, length: int) -> tuple[int, int]:
    first = text.count("\n", 0, index) + 1
    return first, first + text.count("\n", index, index + length)


def edit(ctx: EditContext, path: str, old: str, new: str) -> str:
    """Replace one exact occurrence of `old` with `new` in a file, or create a new file.

    `old` must occur exactly once in the file (include surrounding lines to make it unique);
    whitespace and indentation must match exactly. Read the file first: a file that was not
    read, or that changed since it was read, is refused. To create a file that does not exist,
    pass an empty `old` and the whole content as `new`.

    Args:
        path: File path relative to the workspace root.
        old: The exact text to replace (empty only to create a new file).
        new: The replacement text (the whole content when creating a file).
    """
    ws = ctx.workspace
    with ctx.stamps.lock, ws.open_path(path, must_exist=False) as walked:
        rel = walked.rel
        real = Path(ws.root, *walked.parts)
        # Every file an Edit touches is named in its result, by its place in the workspace.
        via = f" (the path '{path}' leads there)" if rel != os.path.normpath(path.strip()) else ""
        if walked.info is None:
            if old:
                raise ToolError(f"'{rel}' does not exist; to create it, pass old='' and the content as new")
            parent = _make_parents(walked)
            try:
                info = _write_at(parent, walked.name, new.encode("utf-8"), 0o644, replace=False)
            finally:
                os.close(parent)
            ctx.stamps.record(real, _info_stamp(info))
            return f"Created {rel}{via} ({new.count(chr(10)) + (0 if new.endswith(chr(10)) else 1)} lines)."
        if stat.S_ISDIR(walked.info.st_mode):
            raise ToolError(f"'{rel}' is a directory")
        seen = ctx.stamps.seen(real)
        if seen is None:
            raise ToolError(f"'{rel}' has not been read yet; Read it before editing it")
        if _info_stamp(walked.info) != seen:
            raise ToolError(f"'{rel}' changed since you last read it; Read it again before editing it")
        if not old:
            raise ToolError(f"'{rel}' already exists; old must be the exact text to replace")
        if old == new:
            raise ToolError("old and new are identical; nothing to change")
        try:
            text = _read_all(walked).decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"'{rel}' is not valid UTF-8 text; Edit changes text files only") from None
        count = text.count(old)
        if count == 0:
            raise ToolError(f"old was not found in '{rel}'; copy it exactly from Read, without line numbers")
        if count > 1:
            raise ToolError(f"old occurs {count} times in '{rel}'; add surrounding text to make it unique")
        index = text.index(old)
        updated = text[:index] + new + text[index + len(old) :]
        mode = walked.info.st_mode & 0o7777
        info = _write_at(walked.parent_fd, walked.name, updated.encode("utf-8"), mode, replace=True)
        ctx.stamps.record(real, _info_stamp(info))
    first, last = _line_span(updated, index, len(new))
    return f"Edited {rel}{via}: replaced 1 occurrence; the new text is at lines {first}-{last}."
