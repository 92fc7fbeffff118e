"""The Read tool: a line-numbered window of a text file, streamed so any file answers quickly.

The file is never read whole: lines are streamed, each line's kept part is capped, the rest of
an over-long line is skipped in chunks, and the total bytes scanned per call are bounded, so a
2 GB sparse file or a 50 MB single line costs at most one bounded scan.
"""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

from subagent_lab.sandbox import Workspace
from subagent_lab.tools.base import MAX_OBSERVATION_CHARS, ToolDeniedError, ToolError

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
    """Open a workspace file for reading, refusing anything that is not a regular file."""
    real = ws.resolve(path)
    rel = ws.rel(real)
    if real.is_dir():
        raise ToolError(f"'{rel}' is a directory; use Glob (e.g. pattern='*' path='{rel}') to list it")
    try:
        # O_NONBLOCK: even if the file was swapped for a FIFO after resolve, open cannot hang.
        # O_NOFOLLOW: ...nor can it have been swapped for a symlink pointing elsewhere.
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:
        raise ToolError(f"cannot open '{rel}': {exc.strerror}") from None
    info = os.fstat(fd)
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


def read(ws: Workspace, path: str, start: int = 1, limit: int = 400) -> str:
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
    handle, size, rel = _open_regular(ws, path)
    with handle:
        if b"\x00" in handle.read(BINARY_SNIFF):
            raise ToolError(
                f"'{rel}' looks binary (a NUL byte in its first 8 KiB, {_human(size)}); "
                "Read shows text files only"
            )
        handle.seek(0)
        if size == 0:
            return f"File: {rel} is empty (0 lines)."
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
            raise ToolError(f"start={start} is past the end of '{rel}', which has {lineno} lines")
        body: list[str] = []
        used = 0
        replaced = False
        pending = False  # a line exists after the last one shown
        while len(body) < limit:
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
            replaced = replaced or "\ufffd" in text
            text = text.replace("\x00", "\u2400")  # a visible stand-in; NUL can break transports
            entry = f"{lineno + 1:6d}\t{text}"
            if body and used + len(entry) + 1 > OUTPUT_BUDGET:
                pending = True
                notes.append(f"output capped at about {OUTPUT_BUDGET} characters")
                break
            body.append(entry)
            used += len(entry) + 1
            lineno += 1
        shown_end = lineno
        if not body and not scanner.exhausted:
            raise ToolError(f"start={start} is past the end of '{rel}', which has {lineno} lines")
        if not pending:
            pending = scanner.next_line() is not None
        rest = scanner.count_rest() if pending and not scanner.exhausted else 0
        total_lines = None if rest is None or scanner.exhausted else shown_end + int(pending) + rest
    of = f"of {total_lines}" if total_lines is not None else f"of an uncounted total ({_human(size)} file)"
    header = f"File: {rel} — lines {start}-{shown_end} {of}"
    if replaced:
        notes.append("bytes that are not valid UTF-8 are shown as \ufffd")
    if scanner.exhausted and not pending:
        notes.append(
            f"stopped after scanning {_human(SCAN_BUDGET)}; more may follow from start={shown_end + 1}"
        )
    lines = [header, *body]
    if pending:
        left = f"{total_lines - shown_end} more lines" if total_lines is not None else "more lines follow"
        lines.append(f"[{left}; call Read with start={shown_end + 1} to continue]")
    if notes:
        lines.append("[note: " + "; ".join(notes) + "]")
    return "\n".join(lines)
