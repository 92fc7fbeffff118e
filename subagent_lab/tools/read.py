"""The Read tool: a line-numbered window of a text file, streamed so any file answers quickly.

The file is never read whole: lines are streamed, each line's kept part is capped, the rest of
an over-long line is skipped in chunks, and the total bytes scanned per call are bounded, so a
2 GB sparse file or a 50 MB single line costs at most one bounded scan.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import BinaryIO

from subagent_lab.core.tool import MAX_OBSERVATION_CHARS, Observation, Span, ToolDeniedError, ToolError
from subagent_lab.workspace.sandbox import Workspace

MAX_LIMIT = 2000
"""Most lines one call may return."""
MAX_LINE_CHARS = 2000
"""Characters kept of one line; the rest is replaced by a marker giving the line's length."""
OUTPUT_BUDGET = min(60_000, MAX_OBSERVATION_CHARS - 600)
"""Characters of numbered lines per call. Kept under the observation cap so the harness never
cuts a Read blindly: the tool stops at a line boundary and says where to continue."""
SCAN_BUDGET = 64 * 1024 * 1024
"""Bytes one call may scan (skipping to ``start``, skipping long lines, counting the total)."""
BINARY_SNIFF = 8192

_LINE_READ = MAX_LINE_CHARS * 4  # UTF-8 needs at most 4 bytes per character
_CHUNK = 1024 * 1024


class _Scanner:
    """Streams lines of a binary file while charging every byte read to one budget."""

    def __init__(self, handle: BinaryIO) -> None:
        self.handle = handle
        self.scanned = 0
        self.exhausted = False  # the scan budget ran out before EOF

    def _charge(self, amount: int) -> bool:
        self.scanned += amount
        if self.scanned > SCAN_BUDGET:
            self.exhausted = True
        return not self.exhausted

    def next_line(self) -> tuple[bytes, int] | None:
        """(kept head of the next line without its newline, full length in bytes) or None at EOF.

        The length is -1 when the budget ran out inside the line.
        """
        if self.exhausted:
            return None
        head = self.handle.readline(_LINE_READ)
        if not head:
            return None
        if head.endswith(b"\n") or len(head) < _LINE_READ:
            self._charge(len(head))
            return head.rstrip(b"\n").rstrip(b"\r"), len(head)
        length = len(head)
        if not self._charge(length):
            return head, -1
        # An over-long line: skip the rest in chunks without keeping it.
        while True:
            pos = self.handle.tell()
            chunk = self.handle.read(_CHUNK)
            if not chunk:
                return head, length
            newline = chunk.find(b"\n")
            if newline >= 0:
                self.handle.seek(pos + newline + 1)
                self._charge(newline + 1)
                return head, length + newline + 1
            length += len(chunk)
            if not self._charge(len(chunk)):
                return head, -1

    def count_rest(self) -> int | None:
        """Newlines left in the file (so the caller can say 'of N lines'), None if over budget."""
        count = 0
        last = b"\n"
        while True:
            chunk = self.handle.read(_CHUNK)
            if not chunk:
                break
            count += chunk.count(b"\n")
            last = chunk[-1:]
            if not self._charge(len(chunk)):
                return None
        return count + (0 if last == b"\n" else 1)


def _open_regular(ws: Workspace, path: str) -> tuple[BinaryIO, int, str]:
    """Open a workspace file for reading, refusing anything that is not a regular file.

    The descriptor is the one the workspace resolved and checked (``Workspace.open_file``): a
    file swapped for a link or a FIFO after the check is never what is read.
    """
    fd, rel, info = ws.open_file(path)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise ToolDeniedError(f"'{rel}' is not a regular file")
    return os.fdopen(fd, "rb", buffering=_CHUNK), info.st_size, rel


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"


class PastEndError(ToolError):
    """The requested first line lies past the end of the file, which has ``lines`` lines."""

    def __init__(self, message: str, lines: int) -> None:
        super().__init__(message)
        self.lines = lines


@dataclass
class Window:
    """What one bounded read of a file produced (before any formatting)."""

    rel: str
    """The file, workspace-relative."""
    size: int
    """Bytes in the file."""
    start: int
    end: int = 0
    """The last line shown (0 for an empty file)."""
    body: list[str] = field(default_factory=list)
    """The lines shown, numbered like ``cat -n``."""
    total: int | None = None
    """Lines in the file; None when counting them would cost more than the scan budget."""
    pending: bool = False
    """Lines follow the last one shown."""
    output_capped: bool = False
    """The window stopped early at OUTPUT_BUDGET characters."""
    replaced: bool = False
    """Some bytes were not valid UTF-8 and are shown as U+FFFD."""
    exhausted: bool = False
    """The scan budget ran out."""

    @property
    def empty(self) -> bool:
        return self.size == 0


def read_window(ws: Workspace, path: str, start: int, limit: int) -> Window:
    """Up to ``limit`` (<= MAX_LIMIT) lines of ``path`` from line ``start``, with every safety check.

    Raises ToolDeniedError for what policy refuses (outside the workspace, secrets, non-regular
    files), PastEndError when ``start`` lies past the end, ToolError for other unreadable cases.
    """
    handle, size, rel = _open_regular(ws, path)
    with handle:
        if b"\x00" in handle.read(BINARY_SNIFF):
            raise ToolError(
                f"'{rel}' looks binary (a NUL byte in its first 8 KiB, {_human(size)}); "
                "Read shows text files only"
            )
        handle.seek(0)
        window = Window(rel=rel, size=size, start=start)
        if size == 0:
            return window
        scanner = _Scanner(handle)
        lineno = 0
        while lineno < start - 1 and scanner.next_line() is not None:
            lineno += 1
        if lineno < start - 1:
            if scanner.exhausted:
                raise ToolError(
                    f"could not reach line {start} of '{rel}' within a {_human(SCAN_BUDGET)} scan "
                    f"(stopped at line {lineno + 1}); the file has extremely long lines"
                )
            raise PastEndError(f"start={start} is past the end of '{rel}', which has {lineno} lines", lineno)
        used = 0
        while len(window.body) < limit:
            item = scanner.next_line()
            if item is None:
                break
            head, length = item
            text = head.decode("utf-8", errors="replace")
            if lineno == 0:
                text = text.removeprefix("\ufeff")
            if len(text) > MAX_LINE_CHARS or length < 0 or length > len(head) + 2:
                total = "over " + _human(scanner.scanned) if length < 0 else _human(length)
                # cut before checking for U+FFFD: a multi-byte character split by the cap is not
                # a decoding problem of the file
                text = text[:MAX_LINE_CHARS] + f" … [line truncated: {total} long]"
            window.replaced = window.replaced or "\ufffd" in text
            text = text.replace("\x00", "\u2400")  # a visible stand-in; NUL can break transports
            entry = f"{lineno + 1:6d}\t{text}"
            if window.body and used + len(entry) + 1 > OUTPUT_BUDGET:
                window.pending = window.output_capped = True
                break
            window.body.append(entry)
            used += len(entry) + 1
            lineno += 1
        window.end = lineno
        if not window.body and not scanner.exhausted:
            raise PastEndError(f"start={start} is past the end of '{rel}', which has {lineno} lines", lineno)
        if not window.pending:
            window.pending = scanner.next_line() is not None
        rest = scanner.count_rest() if window.pending and not scanner.exhausted else 0
        window.exhausted = scanner.exhausted
        if rest is not None and not scanner.exhausted:
            window.total = window.end + int(window.pending) + rest
    return window


def read_observed(ws: Workspace, path: str, start: int = 1, limit: int = 400) -> Observation:
    """Read a text file and return its lines numbered like `cat -n`, a window at a time.

    Shows at most `limit` lines from line `start`; long lines are cut at 2000 characters and
    large outputs stop early with the `start` value to continue from. Binary files and
    directories are refused (use Glob to list a directory, Grep to find text).

    Args:
        path: File path relative to the workspace root, exactly as Grep or Glob printed it.
        start: 1-based number of the first line to show.
        limit: Maximum number of lines to show (1 to 2000).
    """
    if start < 1:
        raise ToolError(f"start must be >= 1 (got {start}); lines are numbered from 1")
    if limit < 1:
        raise ToolError(f"limit must be >= 1 (got {limit})")
    notes: list[str] = []
    if limit > MAX_LIMIT:
        notes.append(f"limit lowered from {limit} to the maximum of {MAX_LIMIT}")
        limit = MAX_LIMIT
    window = read_window(ws, path, start, limit)
    rel = window.rel
    if window.empty:
        return Observation(f"File: {rel} is empty (0 lines).")
    total_lines, shown_end, pending = window.total, window.end, window.pending
    if window.output_capped:
        notes.append(f"output capped at about {OUTPUT_BUDGET} characters")
    of = (
        f"of {total_lines}"
        if total_lines is not None
        else f"of an uncounted total ({_human(window.size)} file)"
    )
    header = f"File: {rel} — lines {start}-{shown_end} {of}"
    if window.replaced:
        notes.append("bytes that are not valid UTF-8 are shown as \ufffd")
    if window.exhausted and not pending:
        notes.append(
            f"stopped after scanning {_human(SCAN_BUDGET)}; more may follow from start={shown_end + 1}"
        )
    lines = [header, *window.body]
    spans = [Span(rel, start, shown_end)] if window.body else []
    ends = [len("\n".join(lines))]
    if pending:
        left = f"{total_lines - shown_end} more lines" if total_lines is not None else "more lines follow"
        lines.append(f"[{left}; call Read with start={shown_end + 1} to continue]")
    if notes:
        lines.append("[note: " + "; ".join(notes) + "]")
    return Observation("\n".join(lines), spans, ends[: len(spans)])


def read(ws: Workspace, path: str, start: int = 1, limit: int = 400) -> str:
    # The docstring (the tool description and argument docs) is read_observed's, set below.
    return read_observed(ws, path, start, limit).text


read.__doc__ = read_observed.__doc__
