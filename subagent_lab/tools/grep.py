"""The Grep tool: a bounded ripgrep search whose results are workspace-relative ``path:line: text``.

The search itself (``search``, its limits, rg's JSON parsed as it streams) is ``tools.rg``; this
module is the tool: argument checks, caps, and the observation the model reads.
"""

from __future__ import annotations

from subagent_lab.core.tool import MAX_OBSERVATION_CHARS, Observation, ObservationBuilder, Span, ToolError
from subagent_lab.tools.rg import Hit, SearchRun, check_pattern, search_target
from subagent_lab.tools.rg.search import search
from subagent_lab.workspace.sandbox import Workspace

__all__ = ["Hit", "check_pattern", "grep", "search", "search_target"]  # the search is re-exported here

MAX_RESULTS_CAP = 500
MAX_CONTEXT = 10
OUTPUT_BUDGET = MAX_OBSERVATION_CHARS - 600
"""Characters of result lines per call, so the harness never cuts the observation blindly."""


def grep(
    ws: Workspace,
    pattern: str,
    path: str = ".",
    glob: str | None = None,
    case_insensitive: bool = False,
    context: int = 0,
    files_only: bool = False,
    max_results: int = 100,
) -> Observation:
    """Search file contents with a regular expression (ripgrep syntax) and list matching lines.

    Results are `path:line: text`, with context lines as `path-line- text`. Hidden files are
    searched; .gitignore'd paths, dependency/build directories, binary files, files over 20 MB
    and secrets are skipped. Use Glob to find files by name.

    Args:
        pattern: Regular expression (Rust regex syntax, e.g. 'TODO|FIXME' or 'get_\\w+'); escape
            regex characters such as ( [ . to match them literally.
        path: File or directory to search, relative to the workspace root.
        glob: Only search files whose names match this glob, e.g. '*.py' or '*.{ts,tsx}'.
        case_insensitive: Match letters regardless of case.
        context: Lines of context to show before and after each match (0 to 10).
        files_only: List only the paths of files that contain a match.
        max_results: Maximum number of matching lines (or files with files_only) to return (1 to 500).
    """
    check_pattern(pattern, glob)
    if max_results < 1:
        raise ToolError(f"max_results must be >= 1 (got {max_results})")
    if context < 0:
        raise ToolError(f"context must be >= 0 (got {context})")
    notes: list[str] = []
    if max_results > MAX_RESULTS_CAP:
        notes.append(f"max_results lowered to {MAX_RESULTS_CAP}")
        max_results = MAX_RESULTS_CAP
    if context > MAX_CONTEXT:
        notes.append(f"context lowered to {MAX_CONTEXT}")
        context = MAX_CONTEXT
    target = search_target(ws, path)
    run = search(
        ws, [pattern], target, glob=glob, case_insensitive=case_insensitive, context=context,
        files_only=files_only, max_results=max_results,
    )  # fmt: skip
    scope = f"'{target}'" + (f" (glob {glob!r})" if glob else "")
    if run.returncode == 2 and run.stderr and run.finished:
        notes.append("some files could not be read")
    if run.oversized:
        notes.append("rg output exceeded 64 MB (very long matching lines); results are incomplete")
    if not run.files:
        text = f"No matches for {pattern!r} in {scope}."
        if path not in (".", "", "./") or glob:
            text += " To search the whole workspace, call Grep with path '.' and no glob."
        else:
            text += (
                " Try a shorter pattern: one identifier, such as a function or class name alone,"
                " or another word."
            )
        return Observation(text + (f" [note: {'; '.join(notes)}]" if notes else ""))
    return _format(run, pattern, scope, files_only, max_results, notes)


def _format(
    run: SearchRun, pattern: str, scope: str, files_only: bool, max_results: int, notes: list[str]
) -> Observation:
    out = ObservationBuilder()
    lines = 0
    used = 0
    budget_hit = False
    if files_only:
        shown = run.files[:max_results]
        for path in shown:
            if used + len(path) + 1 > OUTPUT_BUDGET:
                budget_hit = True
                break
            out.line(path, Span(path, 0, 0))
            lines += 1
            used += len(path) + 1
        count = f"{lines} files"
        more = run.capped or budget_hit
        footer = f"[{count} with matches for {pattern!r} in {scope}"
    else:
        hits = run.hits
        if run.capped:
            while hits and not hits[-1].is_match:
                hits = hits[:-1]  # context of the match that was cut
        shown_matches = 0
        previous: Hit | None = None
        for hit in hits:
            if (
                previous
                and (previous.path != hit.path or hit.line > previous.line + 1)
                and (not previous.is_match or not hit.is_match)
            ):
                entry = "--"  # a gap between context groups, as grep prints it
            else:
                entry = ""
            mark = ":" if hit.is_match else "-"
            text = f"{hit.path}{mark}{hit.line}{mark} {hit.text}"
            size = len(text) + len(entry) + 2
            if used + size > OUTPUT_BUDGET:
                budget_hit = True
                break
            if entry:
                out.line(entry)
            out.line(text, Span(hit.path, hit.line, hit.line))
            used += size
            shown_matches += hit.is_match
            previous = hit
        files = len({h.path for h in hits if h.is_match})
        more = run.capped or budget_hit
        footer = f"[{shown_matches} matching lines in {files} files for {pattern!r} in {scope}"
    if run.capped and not run.oversized:
        footer += f"; capped at max_results={max_results}, more matches exist — narrow the path/glob/pattern"
    elif budget_hit:
        footer += f"; output capped at about {OUTPUT_BUDGET} characters — narrow the search"
    elif not more:
        footer += "; complete"
    footer += "]"
    if notes:
        footer += f"\n[note: {'; '.join(notes)}]"
    first = next((h for h in run.hits if h.is_match), None)
    if first is not None and not files_only:
        # Small models re-run a search that already succeeded; name the obvious next step, with
        # a bounded window (a Read without limit shows 400 lines).
        footer += (
            f"\n[next: Read path={first.path!r} start={max(first.line - 5, 1)} limit=40 to see the code, "
            f"or answer citing {first.path}:{first.line}]"
        )
    out.line(footer)
    return out.build()
