"""The Edit tool (main agent only): exact-match replacement or file creation, written atomically.

An existing file may only be edited after the agent has read it, and only if it has not changed
since: ``ReadStamps`` remembers (mtime_ns, size, inode) of every file the agent's Read returned,
and ``tracked_read`` is the Read tool that records them. A successful edit records the new stamp,
so the agent can edit the same file again without re-reading its own change.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from subagent_lab.core.tool import ToolError
from subagent_lab.tools.read import read
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
    real = ctx.workspace.resolve(path)
    # The stamp is taken before reading: if the file changes while being read, the stamp is the
    # older one and a later Edit is refused (the safe direction).
    before = _stamp(real)
    text = read(ctx.workspace, path, start, limit)
    if before is not None:
        ctx.stamps.record(real, before)
    return text


tracked_read.__doc__ = read.__doc__


def _atomic_write(path: Path, data: bytes, mode: int | None) -> None:
    """Write ``data`` to a temporary file in the same directory, then rename it over ``path``.

    Readers see the old content or the new one, never a partial file; on failure the temporary
    file is removed and the original is left as it was.
    """
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise ToolError(f"cannot write next to '{path.name}': {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise ToolError(f"cannot write '{path.name}': {exc.strerror or exc}") from None
        raise


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
    real = ws.resolve(path, must_exist=False)
    rel = ws.rel(real)
    with ctx.stamps.lock:
        if not real.exists():
            if old:
                raise ToolError(f"'{rel}' does not exist; to create it, pass old='' and the content as new")
            real.parent.mkdir(parents=True, exist_ok=True)
            _atomic_write(real, new.encode("utf-8"), None)
            ctx.stamps.record(real)
            return f"Created {rel} ({new.count(chr(10)) + (0 if new.endswith(chr(10)) else 1)} lines)."
        if real.is_dir():
            raise ToolError(f"'{rel}' is a directory")
        seen = ctx.stamps.seen(real)
        if seen is None:
            raise ToolError(f"'{rel}' has not been read yet; Read it before editing it")
        if _stamp(real) != seen:
            raise ToolError(f"'{rel}' changed since you last read it; Read it again before editing it")
        if not old:
            raise ToolError(f"'{rel}' already exists; old must be the exact text to replace")
        if old == new:
            raise ToolError("old and new are identical; nothing to change")
        try:
            text = real.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError(f"'{rel}' is not valid UTF-8 text; Edit changes text files only") from None
        count = text.count(old)
        if count == 0:
            raise ToolError(f"old was not found in '{rel}'; copy it exactly from Read, without line numbers")
        if count > 1:
            raise ToolError(f"old occurs {count} times in '{rel}'; add surrounding text to make it unique")
        index = text.index(old)
        updated = text[:index] + new + text[index + len(old) :]
        _atomic_write(real, updated.encode("utf-8"), os.stat(real).st_mode & 0o7777)
        ctx.stamps.record(real)
    first, last = _line_span(updated, index, len(new))
    return f"Edited {rel}: replaced 1 occurrence; the new text is at lines {first}-{last}."
