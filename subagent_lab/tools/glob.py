"""The Glob tool: find files and directories by name pattern, with a bounded tree walk.

Patterns are matched segment by segment with a small NFA (``**`` spans any number of
directories), so matching is linear in the path depth whatever the pattern, and a directory
is entered only while some part of the pattern can still match below it. Symlinks are listed
only when they stay inside the workspace and are never descended into.
"""

from __future__ import annotations

import errno
import os
import re
import time
from dataclasses import dataclass
from typing import Any

from subagent_lab.core.tool import MAX_OBSERVATION_CHARS, Observation, ObservationBuilder, Span, ToolError
from subagent_lab.workspace.sandbox import Workspace

MAX_RESULTS_CAP = 1000
MAX_ENTRIES = 200_000
"""Directory entries one call may look at."""
TIME_BUDGET_S = 5.0
"""Wall-clock limit of one walk."""
MAX_ALTERNATIVES = 256
"""Most patterns one brace expression may expand to."""
MAX_PATTERN_CHARS = 1000
"""Longest pattern accepted (bounds compile time and brace nesting)."""
OUTPUT_BUDGET = MAX_OBSERVATION_CHARS - 600

_GLOBSTAR = None  # marks a `**` segment in a compiled pattern


def expand_braces(pattern: str) -> list[str]:
    """Expand shell braces: ``src/{a,b}/*.{py,pyi}`` becomes four patterns (nesting allowed)."""
    depth = 0
    open_at = -1
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if char == "{":
            if depth == 0:
                open_at = index
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            if depth == 0:
                options = _split_top(pattern[open_at + 1 : index])
                if len(options) > 1:
                    head, tail = pattern[:open_at], pattern[index + 1 :]
                    out: list[str] = []
                    for option in options:
                        out.extend(expand_braces(head + option + tail))
                        if len(out) > MAX_ALTERNATIVES:
                            raise ToolError(f"pattern expands to more than {MAX_ALTERNATIVES} alternatives")
                    return out
        index += 1
    return [pattern]


def _split_top(body: str) -> list[str]:
    """Split a brace body on commas that are not inside nested braces."""
    parts: list[str] = []
    depth = 0
    current = ""
    escaped = False
    for char in body:
        if escaped:
            current += char
            escaped = False
            continue
        if char == "\\":
            escaped = True
            current += char
        elif char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            depth += (char == "{") - (char == "}")
            current += char
    parts.append(current)
    return parts


def _segment_regex(segment: str) -> re.Pattern[str]:
    """Translate one path segment of a glob (no '/') to an anchored regex that cannot backtrack.

    The fixed-width runs between stars are matched at their earliest place, atomically (a
    lookahead that captures, then a backreference to it), as ``fnmatch.translate`` does: a
    pattern such as ``*a*a*a*a*b`` then costs linear time per run instead of exponential.
    """
    runs: list[list[str]] = [[]]  # regex tokens of each fixed-width run between stars
    index = 0
    while index < len(segment):
        char = segment[index]
        if char == "*":
            while index + 1 < len(segment) and segment[index + 1] == "*":
                index += 1  # `a**b` inside a segment means the same as `a*b`
            runs.append([])
        elif char == "?":
            runs[-1].append(".")
        elif char == "\\" and index + 1 < len(segment):
            index += 1
            runs[-1].append(re.escape(segment[index]))
        elif char == "[":
            end = index + 1
            if end < len(segment) and segment[end] in "!^":
                end += 1
            if end < len(segment) and segment[end] == "]":
                end += 1  # a leading ']' is a literal member
            while end < len(segment) and segment[end] != "]":
                end += 1
            if end >= len(segment):
                runs[-1].append(re.escape(char))  # no closing bracket: a literal '['
            else:
                body = segment[index + 1 : end]
                negate = body[:1] in ("!", "^")
                body = body[1:] if negate else body
                # keep '-' (ranges) but escape what would change the class's meaning
                members = "".join("\\" + c if c in "\\^[]" else c for c in body)
                runs[-1].append(f"[{'^' if negate else ''}{members}]")
                index = end
        else:
            runs[-1].append(re.escape(char))
        index += 1
    parts = ["".join(runs[0])]
    for number, run in enumerate(runs[1:-1]):
        if run:
            parts.append(f"(?=(?P<g{number}>.*?{''.join(run)}))(?P=g{number})")
    if len(runs) > 1:
        parts.append(".*" + "".join(runs[-1]))
    try:
        return re.compile("".join(parts), re.DOTALL)
    except re.error as exc:  # e.g. a reversed range such as [z-a]
        raise ToolError(f"invalid glob segment {segment!r}: {exc.msg}") from None


@dataclass(frozen=True)
class _Compiled:
    """Alternatives as lists of segment matchers; ``None`` stands for ``**``."""

    alternatives: tuple[tuple[re.Pattern[str] | None, ...], ...]
    dirs_only: bool

    def closure(self, states: frozenset[tuple[int, int]]) -> frozenset[tuple[int, int]]:
        """Add the states reachable by letting a `**` match zero segments."""
        result = set(states)
        stack = list(states)
        while stack:
            alt, pos = stack.pop()
            segs = self.alternatives[alt]
            if pos < len(segs) and segs[pos] is _GLOBSTAR and (alt, pos + 1) not in result:
                result.add((alt, pos + 1))
                stack.append((alt, pos + 1))
        return frozenset(result)

    def start(self) -> frozenset[tuple[int, int]]:
        return self.closure(frozenset((alt, 0) for alt in range(len(self.alternatives))))

    def step(self, states: frozenset[tuple[int, int]], name: str) -> frozenset[tuple[int, int]]:
        """States after consuming one path segment."""
        nxt: set[tuple[int, int]] = set()
        for alt, pos in states:
            segs = self.alternatives[alt]
            if pos >= len(segs):
                continue
            seg = segs[pos]
            if seg is _GLOBSTAR:
                nxt.add((alt, pos))  # `**` swallows this segment and may swallow more
            elif seg.fullmatch(name):
                nxt.add((alt, pos + 1))
        return self.closure(frozenset(nxt))

    def can_continue(self, states: frozenset[tuple[int, int]]) -> bool:
        """Whether some pattern segment is still left to match below this point."""
        return any(pos < len(self.alternatives[alt]) for alt, pos in states)

    def accepts(self, states: frozenset[tuple[int, int]]) -> bool:
        return any(pos == len(self.alternatives[alt]) for alt, pos in states)


def compile_pattern(pattern: str) -> _Compiled:
    """Compile a glob (``**``, ``*``, ``?``, ``[a-z]``, ``[!x]``, ``{a,b}``) for segment matching."""
    alternatives: list[tuple[re.Pattern[str] | None, ...]] = []
    dirs_only = pattern.endswith("/")
    for alternative in expand_braces(pattern):
        segments: list[re.Pattern[str] | None] = []
        for part in alternative.strip("/").split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                raise ToolError("pattern cannot contain '..'; set path to the directory to search instead")
            if part == "**":
                if segments and segments[-1] is _GLOBSTAR:
                    continue  # `**/**` is one `**`
                segments.append(_GLOBSTAR)
            else:
                segments.append(_segment_regex(part))
        alternatives.append(tuple(segments))
    return _Compiled(tuple(alternatives), dirs_only)


def display_path(rel: str) -> str:
    """A path as observations show it: non-UTF-8 names arrive with surrogate escapes, which
    cannot be serialised as JSON text, so their bytes are shown as U+FFFD."""
    return rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


@dataclass
class Found:
    """What one bounded walk found: sorted workspace-relative paths (directories end with '/')."""

    paths: list[str]
    base_rel: str
    """The directory searched, workspace-relative."""
    notes: list[str]


def find_paths(ws: Workspace, pattern: str, path: str = ".") -> Found:
    """Every path under ``path`` matching ``pattern``, within the walk's bounds; ToolError if invalid."""
    pattern = pattern.strip()
    if not pattern:
        raise ToolError("pattern must not be empty; use '*' to list a directory")
    if "\x00" in pattern:
        raise ToolError("pattern must not contain NUL bytes")
    if pattern.startswith("/"):
        raise ToolError("pattern must be relative to path; put the directory in path instead")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ToolError(f"pattern is {len(pattern)} characters long; the limit is {MAX_PATTERN_CHARS}")
    compiled = compile_pattern(pattern.removeprefix("./"))
    base = ws.resolve(path)
    base_rel = ws.rel(base)
    if not base.is_dir():
        raise ToolError(f"'{base_rel}' is a file, not a directory; use Read to view it")
    found, cut = _walk(ws, compiled, base_rel)
    found.sort()
    notes = (
        [f"the walk stopped after {cut}, so results are incomplete; narrow path or pattern"] if cut else []
    )
    return Found(found, base_rel, notes)


def path_span(shown: str) -> Span:
    """The span of a listed path: the path as shown, no lines."""
    return Span(shown, 0, 0)


def glob(ws: Workspace, pattern: str, path: str = ".", max_results: int = 200) -> Observation:
    """Find files and directories whose path matches a glob pattern; directories end with '/'.

    The pattern is matched against paths relative to `path`: `*` and `?` stay within one
    directory level, `**` spans any number of levels, `[a-z]` is a character range and
    `{a,b}` lists alternatives. So `*.py` matches only directly in `path`, while `**/*.py`
    matches at any depth. Results are sorted and relative to the workspace root; gitignored,
    dependency/build directories and secrets are skipped. Use Grep to search file contents.

    Args:
        pattern: Glob pattern, e.g. '**/*.py', '**/test_*.{py,pyi}', '*' (list a directory).
        path: Directory to search in, relative to the workspace root.
        max_results: Maximum number of paths to return (1 to 1000).
    """
    if max_results < 1:
        raise ToolError(f"max_results must be >= 1 (got {max_results})")
    notes: list[str] = []
    if max_results > MAX_RESULTS_CAP:
        notes.append(f"max_results lowered to {MAX_RESULTS_CAP}")
        max_results = MAX_RESULTS_CAP
    result = find_paths(ws, pattern, path)
    pattern = pattern.strip()
    found, base_rel = result.paths, result.base_rel
    notes += result.notes
    if not found:
        text = f"No paths match {pattern!r} under '{base_rel}'."
        if "/" not in pattern.rstrip("/") and "**" not in pattern:
            text += (
                f" Note: '{pattern}' only matches directly in '{base_rel}'; use '**/{pattern}' for any depth."
            )
        return Observation(text + (f" [note: {'; '.join(notes)}]" if notes else ""))
    out = ObservationBuilder()
    shown = 0
    used = 0
    for rel in found[:max_results]:
        if used + len(rel) + 1 > OUTPUT_BUDGET:
            notes.append(f"output capped at about {OUTPUT_BUDGET} characters")
            break
        out.line(rel, path_span(rel))
        shown += 1
        used += len(rel) + 1
    footer = f"[{shown} of {len(found)} paths matching {pattern!r} under '{base_rel}', sorted"
    if shown < len(found):
        footer += "; narrow the pattern or path to see the rest"
    footer += "]"
    if notes:
        footer += f"\n[note: {'; '.join(notes)}]"
    out.line(footer)
    return out.build()


class _Dir:
    """An open directory descriptor shared by the entries below it still waiting on the stack."""

    __slots__ = ("fd", "refs")

    def __init__(self, fd: int) -> None:
        self.fd, self.refs = fd, 0

    def release(self) -> None:
        self.refs -= 1
        if self.refs <= 0 and self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _open_below(ws: Workspace, parent: _Dir | None, name: str, ws_rel: str) -> int | None:
    """The directory ``name`` opened through its parent's descriptor (``O_NOFOLLOW``: a directory
    swapped for a link since it was listed is not entered); the base by a walk from the root."""
    if parent is None:
        return ws.open_dir(ws_rel)
    try:
        return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent.fd)
    except OSError as exc:
        # Out of descriptors (a tree thousands deep): walk this one from the root instead.
        return ws.open_dir(ws_rel) if exc.errno == errno.EMFILE else None


def _walk(ws: Workspace, compiled: _Compiled, base_rel: str) -> tuple[list[str], str]:
    """Depth-first walk below ``base_rel``; returns (workspace-relative matches, why it was cut or '').

    Directories are listed through descriptors, each opened relative to its parent's with
    ``O_NOFOLLOW`` from the base resolved by descriptor: a directory swapped for a link to a place
    outside during the walk is never listed. Open descriptors are at most one per level."""
    found: list[str] = []
    prefix = "" if base_rel == "." else base_rel + "/"
    # (the parent's descriptor, the name in it, the path below the base, the pattern's states)
    stack: list[Any] = [(None, base_rel, "", compiled.start())]
    opened: list[_Dir] = []
    try:
        return _walk_stack(ws, compiled, prefix, stack, opened, found)
    finally:
        for holder in opened:
            if holder.fd >= 0:
                os.close(holder.fd)
                holder.fd = -1


def _walk_stack(
    ws: Workspace, compiled: _Compiled, prefix: str, stack: list[Any], opened: list[_Dir], found: list[str]
) -> tuple[list[str], str]:
    deadline = time.monotonic() + TIME_BUDGET_S
    seen = 0
    while stack:
        parent, name, dir_rel, states = stack.pop()
        fd = _open_below(ws, parent, name, prefix + dir_rel if dir_rel else prefix.rstrip("/") or ".")
        if parent is not None:
            parent.release()
        if fd is None:
            continue  # unreadable, vanished or swapped directory: skip it, as find(1) does
        holder = _Dir(fd)
        opened.append(holder)
        try:
            with os.scandir(fd) as entries:
                listing = list(entries)
        except OSError:
            listing = []
        for entry in listing:
            seen += 1
            if seen > MAX_ENTRIES:
                return found, f"{MAX_ENTRIES} entries"
            if time.monotonic() > deadline:  # every entry: ignore rules can make one entry slow
                return found, f"{TIME_BUDGET_S:.0f} s"
            next_states = compiled.step(states, entry.name)
            if not next_states:
                continue  # neither this entry nor anything below it can match
            rel = f"{dir_rel}/{entry.name}" if dir_rel else entry.name
            ws_rel = prefix + rel
            try:
                is_link = entry.is_symlink()
                is_dir = entry.is_dir(follow_symlinks=False)
                if is_link:
                    target = ws.resolve(ws_rel)  # raises unless the link stays inside the root
                    is_dir = target.is_dir()
                elif not is_dir and not entry.is_file(follow_symlinks=False):
                    continue  # FIFOs, sockets, devices are not listed
            except (OSError, ToolError):
                continue
            if ws.is_secret(ws_rel) or ws.is_ignored(ws_rel, is_dir=is_dir, parents_checked=True):
                continue
            if compiled.accepts(next_states) and (is_dir or not compiled.dirs_only):
                found.append(display_path(ws_rel) + ("/" if is_dir else ""))
            if is_dir and not is_link and compiled.can_continue(next_states):
                holder.refs += 1
                stack.append((holder, entry.name, rel, next_states))
        if holder.refs == 0:
            holder.refs = 1
            holder.release()
    return found, ""
