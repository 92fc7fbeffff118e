"""A directory Grep whose files are opened through held descriptors before rg reads them.

ripgrep walking a directory by itself opens every file by its path below the top: a
subdirectory swapped for a symlink after rg listed it led the search to a host file (issue 39).
Here rg only *lists* the files (``rg --files``, inside the pinned directory, with the same
ignore rules, globs, exclusions and order as a search), and each listed path is then opened one
component at a time from the pinned directory's descriptor: directories with ``O_DIRECTORY |
O_NOFOLLOW``, the file with ``O_NOFOLLOW | O_NONBLOCK`` (a FIFO never blocks the open), kept
only when ``fstat`` shows a regular file with one name under the size cap. A component swapped
for a link since the listing fails to open and the file is skipped. rg then searches the open
descriptors (``/proc/self/fd/N``, passed to it), so it reads exactly the files that were checked.
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import time
from collections.abc import Generator, Sequence

from subagent_lab.core.tool import ToolError
from subagent_lab.tools import rg
from subagent_lab.workspace.sandbox import Workspace

BATCH_FILES = 256
"""Descriptors handed to one rg run (one process per batch, in the listing's order)."""
MAX_LISTING = 64 * 1024 * 1024
"""Bytes of ``rg --files`` output read at most."""


def list_files(ws: Workspace, pinned_fd: int, glob: str | None, deadline: float) -> list[str]:
    """The files a search of the pinned directory would read, as rg walks it (paths below it)."""
    args = [rg._rg_binary(), "--files", "--null", "--no-config", "--no-follow", "--hidden", "--sort", "path"]
    args += ["--max-filesize", str(rg.MAX_FILESIZE), *rg.walk_filters(ws, glob), "--", "."]
    try:
        proc = subprocess.run(
            args, cwd=f"/proc/self/fd/{pinned_fd}", stdin=subprocess.DEVNULL, capture_output=True,
            timeout=max(deadline - time.monotonic(), 0.001),
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return []  # the search's own deadline then reports the cut
    listed = proc.stdout[:MAX_LISTING].split(b"\0")
    return [os.fsdecode(p[2:] if p.startswith(b"./") else p) for p in listed if p]


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


def open_listed(base_fd: int, paths: Sequence[str], max_size: int) -> Generator[tuple[str, int], None, None]:
    """``(path, descriptor)`` for each listed path that opens as checked (see the module doc).

    Paths come sorted, so the directories of one are mostly those of the last: the chain of
    open directory descriptors is kept and only its changed tail is reopened. The caller owns
    each yielded descriptor."""
    chain: list[tuple[str, int]] = []  # (component, descriptor) from the base down
    try:
        for path in paths:
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


def search_walked(
    ws: Workspace, patterns: Sequence[str], pinned: rg._Pinned, glob: str | None, case_insensitive: bool,
    context: int, files_only: bool, max_results: int, fixed_strings: bool, line_chars: int,
) -> rg.SearchRun:  # fmt: skip
    """A directory search whose files were listed by rg and opened by descriptor here."""
    run = rg.SearchRun(glob=glob)
    deadline = time.monotonic() + rg.TIMEOUT_S
    listed = list_files(ws, pinned.fd, glob, deadline)
    files = open_listed(pinned.fd, listed, rg.MAX_FILESIZE)
    batch: list[tuple[str, int]] = []

    def flush() -> None:
        # Paths as rg showed them (non-UTF-8 bytes as U+FFFD), below the searched directory.
        run.fd_paths = {
            f"/proc/self/fd/{fd}": pinned.prefix
            + path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            for path, fd in batch
        }
        args = rg._build_args(
            ws, patterns, ".", None, case_insensitive, context, files_only, max_results, fixed_strings,
            files=list(run.fd_paths) or ["/dev/null"],
        )  # fmt: skip
        run.finished = False
        fds = [fd for _, fd in batch]
        try:
            rg._run(ws, args, max_results, files_only, line_chars, glob, None, run, fds, deadline)
        finally:
            for fd in fds:
                os.close(fd)
            batch.clear()

    def done() -> bool:
        failed = run.returncode not in (None, 0, 1) and not run.finished  # a bad regex: its error stands
        return run.capped or run.timed_out or failed

    searched = False
    try:
        for path, fd in files:
            batch.append((path, fd))
            if len(batch) >= BATCH_FILES:
                flush()
                searched = True
                if done():
                    break
        if (batch or not searched) and not done():
            flush()  # with no file at all, rg still checks the pattern (on no input)
    finally:
        files.close()
        for _, fd in batch:
            os.close(fd)
    if time.monotonic() > deadline and not run.capped and not run.finished:
        run.timed_out = True
    return run
