"""A directory Grep whose files are opened through held descriptors before rg reads them.

ripgrep walking a directory by itself opens every file by its path below the top: a
subdirectory swapped for a symlink after rg listed it led the search to a host file (issue 39).
Here rg only *lists* the files (``rg --files``, inside the pinned directory, with the same
ignore rules, globs, exclusions and order as a search; ``rg_listing`` keeps the listing while a
signature of the tree stays the same), and each listed path is then opened one
component at a time from the pinned directory's descriptor: directories with ``O_DIRECTORY |
O_NOFOLLOW``, the file with ``O_NOFOLLOW | O_NONBLOCK`` (a FIFO never blocks the open), kept
only when ``fstat`` shows a regular file with one name under the size cap. A component swapped
for a link since the listing fails to open and the file is skipped. The bytes read from those
descriptors are fed to one rg on its stdin, file after file (``Segments`` maps each line of the
stream back to its file and line), so rg reads exactly the files that were checked. Binary files
(a NUL byte) are left out of the stream, as rg's walk skips them; a hit in a file holding a
private key is hidden like any search hit (``Workspace.hidden_from_search``). Handing rg
``/proc/self/fd/N`` paths instead cost ~2.5x more on 1,000 files (each open resolves a magic
link). The listing runs in the feeding thread, while the searching rg starts.

Differences from rg's own walk: a UTF-16 file (NUL bytes) is skipped as binary rather than
transcoded; a binary file is skipped whole rather than searched up to its first NUL byte.
"""

from __future__ import annotations

import bisect
import contextlib
import errno
import os
import stat
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import IO, Any

from subagent_lab.core.tool import ToolError
from subagent_lab.tools import rg
from subagent_lab.tools.rg.listing import ListingTimedOut, list_files
from subagent_lab.workspace.sandbox import Workspace

__all__ = ["Segments", "list_files", "open_listed", "search_walked"]


def _open_file(dir_fd: int, name: str, max_size: int) -> int | None:
    """``name`` in ``dir_fd`` opened without following a link or blocking, kept only if it is a
    regular file with one name (a hard link's other name may be outside or a secret)."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.EMFILE:
            raise ToolError("the search ran out of file descriptors; narrow it with a path") from None
        return None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1 or info.st_size > max_size:
        os.close(fd)
        return None
    return fd


def open_listed(
    base_fd: int, paths: Sequence[str], max_size: int, skip: Callable[[str], bool] = lambda path: False
) -> Generator[tuple[str, int], None, None]:
    """``(path, descriptor)`` for each listed path that opens as checked (see the module doc).

    Paths come sorted, so the directories of one are mostly those of the last: the chain of
    open directory descriptors is kept and only its changed tail is reopened. The caller owns
    each yielded descriptor."""
    chain: list[tuple[str, int]] = []  # (component, descriptor) from the base down
    try:
        for path in paths:
            if skip(path):
                continue
            *dirs, name = path.split("/")
            keep = 0
            while keep < min(len(chain), len(dirs)) and chain[keep][0] == dirs[keep]:
                keep += 1
            for _, fd in chain[keep:]:
                os.close(fd)
            del chain[keep:]
            ok = True
            for component in dirs[keep:]:
                parent = chain[-1][1] if chain else base_fd
                try:
                    fd = os.open(
                        component, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent
                    )
                except OSError:
                    ok = False  # swapped for a link (or gone) since the listing: skipped
                    break
                chain.append((component, fd))
            if not ok or not name or name in (".", ".."):
                continue
            file_fd = _open_file(chain[-1][1] if chain else base_fd, name, max_size)
            if file_fd is not None:
                yield path, file_fd
    finally:
        for _, fd in chain:
            os.close(fd)


class Segments:
    """Where each walked file sits in rg's stdin stream, and the placing of rg's lines.

    A line of the stream belongs to the file whose first line is the last one at or before it.
    Context lines are kept only beside a match of their own file: a match on a file's first line
    would otherwise show the previous file's last lines as its context.
    """

    def __init__(self) -> None:
        self.starts: list[int] = []  # stream line number of each file's first line
        self.paths: list[str] = []
        self.next_line = 1
        self._pending: list[tuple[dict[str, Any], int]] = []  # context waiting for a match of its file
        self._last = -1  # the file of the last match

    def add(self, path: str, lines: int) -> None:
        self.starts.append(self.next_line)
        self.paths.append(path)
        self.next_line += lines

    def _index(self, line: int) -> int:
        return bisect.bisect_right(self.starts, line) - 1

    def place(self, message: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """The messages to show for one of rg's match or context messages, placed in their file."""
        data = message["data"]
        index = self._index(int(data["line_number"]))
        placed = {
            "type": message["type"],
            "data": {
                **data,
                "place": self.paths[index],
                "line_number": data["line_number"] - self.starts[index] + 1,
            },
        }
        if message["type"] == "match":
            yield from (p for p, i in self._pending if i == index)
            self._pending.clear()
            self._last = index
            yield placed
        elif index == self._last:
            yield placed  # after-context of a match of this file
        else:
            self._pending.append((placed, index))  # before-context of a match to come, or nothing


def _read_all(fd: int, size: int) -> bytes:
    chunks, left = [], size
    while left > 0:
        chunk = os.read(fd, min(left, 1024 * 1024))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def search_walked(
    ws: Workspace, patterns: Sequence[str], pinned: rg._Pinned, glob: str | None, case_insensitive: bool,
    context: int, files_only: bool, max_results: int, fixed_strings: bool, line_chars: int,
) -> rg.SearchRun:  # fmt: skip
    """A directory search whose files were listed by rg, opened by descriptor and fed to rg here."""
    run = rg.SearchRun(glob=glob)
    deadline = time.monotonic() + rg.TIMEOUT_S
    segments = run.segments = Segments()
    skip_secret: Callable[[str], bool] = lambda path: ws.is_secret(pinned.prefix + path)  # noqa: E731
    failures: list[str] = []

    def feed(pipe: IO[bytes]) -> None:
        # Listed here, in the writer's thread: the searching rg starts (and compiles its regex)
        # while the listing runs.
        try:
            listed = list_files(ws, pinned.fd, glob, deadline)
        except ListingTimedOut:
            run.timed_out = True  # the search reports the cut, as for rg past the deadline
            with contextlib.suppress(BrokenPipeError, OSError):
                pipe.close()
            return
        files = open_listed(pinned.fd, listed, rg.MAX_FILESIZE, skip_secret)
        try:
            for path, fd in files:
                try:
                    data = _read_all(fd, rg.MAX_FILESIZE)
                except OSError:
                    continue
                finally:
                    os.close(fd)
                if not data or b"\0" in data:
                    continue  # binary (rg's walk skips it) or empty
                if not data.endswith(b"\n"):
                    data += b"\n"
                shown = pinned.prefix + path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
                segments.add(shown, data.count(b"\n"))  # before rg can print a line of it
                pipe.write(data)
                if time.monotonic() > deadline:
                    break
        except (BrokenPipeError, ValueError):
            pass  # rg stopped early (enough results, the deadline): nothing more to feed
        except (ToolError, OSError) as exc:  # out of descriptors, a listing that failed
            failures.append(str(exc))
        finally:
            files.close()
            with contextlib.suppress(BrokenPipeError, OSError):
                pipe.close()

    args = rg._build_args(
        ws,
        patterns,
        "-",
        None,
        case_insensitive,
        context,
        files_only,
        max_results,
        fixed_strings,
        stream=True,
    )
    rg._run(ws, args, max_results, files_only, line_chars, glob, None, run, feed, deadline)
    if failures:
        raise ToolError(f"search failed: {failures[0]}")
    return run
