"""The small-model interface to Grep, Read and Glob: few arguments, forgiving input, guided output.

Small models fill every argument they are shown, guess paths, write code where a word would do
and repeat calls, so these tools take only what such a model needs and build each observation
for it: Grep is a case-insensitive literal search, capped and grouped by file, that broadens by
itself on a miss and says so; Read shows a window around the asked line; Glob lists paths. Every
observation ends with one ``Next:`` line naming a concrete next step drawn from the results.

Grep lives in ``simple_grep.py``. The safety checks are the full tools' own (``grep.search``,
``read.read_window``, ``glob.find_paths``); the observation sizes are the harness's
(``ObservationLimits``), bound into the tools rather than shown to the model.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import PurePosixPath

from pydantic import BaseModel, ConfigDict, Field

from subagent_lab.core.tool import READ_LEAD, Observation, ObservationBuilder, Span, ToolError
from subagent_lab.tools.glob import display_path, find_paths, path_span
from subagent_lab.tools.read import MAX_LIMIT, OUTPUT_BUDGET, PastEndError, Window, read_window
from subagent_lab.tools.simple_grep import quote as _quote
from subagent_lab.tools.simple_grep import simple_grep
from subagent_lab.workspace.sandbox import Workspace

__all__ = ["ObservationLimits", "simple_glob", "simple_grep", "simple_read"]

BEFORE = READ_LEAD
"""Lines a Read window shows before the asked line."""
MAX_NAME_CHARS = 255
"""Longest file name looked for elsewhere when a path does not exist (longer ones cannot exist)."""


class ObservationLimits(BaseModel):
    """How much one observation of the small-model tools shows (set by the harness, not the model)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    grep_max_matches: int = Field(default=15, ge=1, le=200)
    """Matching lines one Grep shows; further matches are only counted per file."""
    read_window: int = Field(default=50, ge=1, le=MAX_LIMIT)
    """Lines one Read shows."""
    glob_max_results: int = Field(default=50, ge=1, le=1000)
    """Paths one Glob lists."""
    read_outline: int = Field(default=0, ge=0, le=200)
    """Definition lines (``class``/``def``) of the rest of the file one Read lists under the window,
    each with its line number; 0 shows none."""


# --- Read ------------------------------------------------------------------------------------


def _escape_glob(name: str) -> str:
    return re.sub(r"([*?\[\]{}\\])", r"\\\1", name)


def _existing_file(ws: Workspace, path: str) -> tuple[str, str]:
    """(path to read, note). A path that does not exist but names one file elsewhere by its
    file name (``pkg/loaders.py`` for ``loaders.py``) is read there, with a note; otherwise a
    ToolError lists the files with that name."""
    real = ws.resolve(path, must_exist=False)  # refusals still raise here
    if os.path.exists(real):  # False, not OSError, for an over-long name
        return path, ""
    name = PurePosixPath(path.strip().replace("\\", "/")).name
    searchable = name and len(name) <= MAX_NAME_CHARS
    found = find_paths(ws, f"**/{_escape_glob(name)}") if searchable else None
    files = [p for p in (found.paths if found else []) if not p.endswith("/")]
    given = path.strip().strip("/").removeprefix("./")
    if len(files) == 1 and (given.endswith("/" + files[0]) or files[0].endswith("/" + given)):
        return files[0], f"{_quote(path)} does not exist; showing {_quote(files[0])}."
    if files:
        listing = ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
        raise ToolError(
            f"{_quote(path)} does not exist. Files named {_quote(name)}: {listing}.\n"
            f"Next: Read path={_quote(files[0])} line=1"
        )
    stem = PurePosixPath(name).stem or name
    hint = f'Glob pattern="**/*{stem}*"' if stem else 'Glob pattern="*"'
    raise ToolError(
        f"{_quote(path)} does not exist and no file is named {_quote(name)}; take paths from Grep "
        f"or Glob results.\nNext: {hint} to find the file"
    )


def _cite_line(window: Window, asked: int) -> int:
    """The line to propose citing: the asked one, else the first definition shown, else the first."""
    if asked > 1 and window.start <= asked <= window.end:
        return asked
    for entry in window.body:
        number, _, text = entry.partition("\t")
        if re.match(r"^\s*(?:async\s+def|def|class)\s", text):
            return int(number)
    return window.start


DEFINITION = re.compile(r"^(?P<indent>[ \t]*)(?:async\s+def|def|class)\s+\w")
OUTLINE_SCAN_LINES = 20_000
"""Lines of a file scanned for its outline (longer files are outlined up to here)."""
OUTLINE_LINE_CHARS = 90
"""Longest definition line an outline shows; a longer one is not listed (it would be shown cut)."""


def _definitions(ws: Workspace, rel: str) -> list[tuple[int, int, str]]:
    """(line, indent, text) of each ``class``/``def`` line of a file, in order (none if unreadable)."""
    found: list[tuple[int, int, str]] = []
    try:
        fd, _, _ = ws.open_file(rel)  # the checked file's own descriptor, not its name again
        with open(fd, encoding="utf-8", errors="replace") as fh:
            for number, text in enumerate(fh, start=1):
                if number > OUTLINE_SCAN_LINES:
                    break
                match = DEFINITION.match(text)
                if match and len(text.rstrip()) <= OUTLINE_LINE_CHARS:
                    found.append((number, len(match.group("indent").expandtabs()), text.rstrip()))
    except (OSError, ToolError):
        return []
    return found


def _outline(
    defs: list[tuple[int, int, str]], shown: Window, asked: int, limit: int
) -> list[tuple[int, str]]:
    """Up to ``limit`` definition lines outside the window: outermost first, then nearest the asked line."""
    outside = [d for d in defs if not shown.start <= d[0] <= shown.end]
    ranked = sorted(outside, key=lambda d: (d[1] > 0, d[1] > 4, abs(d[0] - asked)))
    return sorted((number, text) for number, _, text in ranked[:limit])


def _anchors(shown: Window, asked: int) -> list[Span]:
    """The lines of a window worth citing: the asked line and the definitions shown."""
    lines = {asked} if asked > 1 and shown.start <= asked <= shown.end else set()  # 1: "the top"
    for entry in shown.body:
        number, _, text = entry.partition("\t")
        if DEFINITION.match(text):
            lines.add(int(number))
    return [Span(display_path(shown.rel), n, n) for n in sorted(lines)]


def simple_read(ws: Workspace, path: str, line: int = 1, window: int = 50, outline: int = 0) -> Observation:
    """Show a numbered window of a text file around one line.

    The window starts a few lines before `line`, so the code around a Grep match is in view.

    Args:
        path: The file, exactly as Grep or Glob showed it.
        line: The line to look at, such as the line number of a Grep match; 1 is the top of the file.
    """
    if window < 1:
        raise ToolError(f"window must be >= 1 (got {window})")
    window = min(window, MAX_LIMIT)
    notes: list[str] = []
    path, note = _existing_file(ws, path)
    if note:
        notes.append(note)
    line = max(line, 1)
    start = max(1, line - BEFORE)
    try:
        shown = read_window(ws, path, start, window)
    except PastEndError as exc:
        start = max(1, exc.lines - window + 1)
        notes.append(f"Line {line} is past the end of the file ({exc.lines} lines); showing its last lines.")
        shown = read_window(ws, path, start, window)
    rel = display_path(shown.rel)
    out = ObservationBuilder()
    for note in notes:
        out.line(note)
    if shown.empty:
        parent = str(PurePosixPath(rel).parent)
        out.line(f"File: {rel} is empty (0 lines).")
        out.line(f'Next: Glob pattern="*" path={_quote(parent)} to see the files next to it')
        return out.build()
    of = f"of {shown.total}" if shown.total is not None else "of more than can be counted"
    out.line(f"File: {rel} — lines {shown.start}-{shown.end} {of}")
    for entry in shown.body:
        out.line(entry)
    # The window is seen; its definitions and the asked line are also marked on their own, as the
    # lines worth citing (single-line spans, see provenance.citable).
    out.mark(Span(rel, shown.start, shown.end), *_anchors(shown, line))
    listed = _outline(_definitions(ws, shown.rel), shown, line, outline) if outline else []
    if listed:
        out.line(f"Other definitions in {rel}:")
        for number, text in listed:
            out.line(f"{number}\t{text}", Span(rel, number, number))
    extra: list[str] = []
    if shown.output_capped:
        extra.append(f"output capped at about {OUTPUT_BUDGET} characters")
    if shown.replaced:
        extra.append("bytes that are not valid UTF-8 are shown as \ufffd")
    if extra:
        out.line("[note: " + "; ".join(extra) + "]")
    cite = f"{rel}:{_cite_line(shown, line)}"
    if shown.pending:
        # Small models do what the Next line names, and copy any condition as a verdict ("these
        # lines do not answer the task, so I will read on"): a suggestion to read on had both
        # models read window after window. The header's "lines a-b of n" says there is more.
        out.line(f"Next: finish citing {cite}")
    else:
        out.line(f"Next: finish citing {cite} (this is the end of the file)")
    return out.build()


# --- Glob ------------------------------------------------------------------------------------


def simple_glob(ws: Workspace, pattern: str, path: str = ".", max_results: int = 50) -> Observation:
    """List the files and directories whose path matches a glob pattern; directories end with '/'.

    `*` matches within one directory level and `**` across any number of levels.

    Args:
        pattern: Glob pattern, for example '**/*.py' or '**/*loader*'.
        path: The directory to look in, as Glob showed it; by default the whole workspace.
    """
    if max_results < 1:
        raise ToolError(f"max_results must be >= 1 (got {max_results})")
    notes: list[str] = []
    real = ws.resolve(path, must_exist=False)
    if not os.path.exists(real):  # False, not OSError, for an over-long name
        notes.append(f"{_quote(path)} does not exist, so the whole workspace was listed.")
        path = "."
    pattern = pattern.strip()
    found = find_paths(ws, pattern, path)
    if not found.paths and "/" not in pattern.rstrip("/") and "**" not in pattern:
        deeper = find_paths(ws, "**/" + pattern, path)
        if deeper.paths:
            notes.append(
                f"No path matches {_quote(pattern)} directly in {_quote(found.base_rel)}; "
                f"showing matches for {_quote('**/' + pattern)} at any depth instead."
            )
            pattern, found = "**/" + pattern, deeper
    out = ObservationBuilder()
    for note in [*notes, *found.notes]:
        out.line(note)
    where = _quote(found.base_rel)
    if not found.paths:
        out.line(f"No path matches {_quote(pattern)} under {where}.")
        out.line(f'Next: Glob pattern="*" path={where} to list that directory')
        return out.build()
    shown = found.paths[:max_results]
    count = f"{len(found.paths)} paths match" if len(found.paths) != 1 else "1 path matches"
    head = f"{count} {_quote(pattern)} under {where}"
    out.line(head + (f"; the first {len(shown)}:" if len(shown) < len(found.paths) else ":"))
    for rel in shown:
        out.line(rel, path_span(rel))
    files = [p for p in shown if not p.endswith("/")]
    if len(shown) < len(found.paths):
        base = "" if found.base_rel == "." else found.base_rel + "/"
        top = Counter(
            base + p[len(base) :].split("/")[0] for p in found.paths if "/" in p[len(base) :].rstrip("/")
        )
        if top:
            busiest, n = max(top.items(), key=lambda item: (item[1], item[0]))
            out.line(
                f"Next: narrow with Glob pattern={_quote(pattern)} path={_quote(busiest)} "
                f"({n} of the matches are there)"
            )
            return out.build()
    if files:
        out.line(f"Next: Read path={_quote(files[0])} line=1 to see the first file")
    else:
        out.line(f'Next: Glob pattern="*" path={_quote(shown[0])} to list the first directory')
    return out.build()
