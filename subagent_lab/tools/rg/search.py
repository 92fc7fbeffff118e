"""A bounded ripgrep search, the entry point of Grep and the first-search words: a directory is
searched through the descriptor walk (``rg_files``), a single file or a held descriptor by the
runner (``rg``)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from subagent_lab.core.tool import ToolError
from subagent_lab.tools import rg
from subagent_lab.tools.rg.files import search_walked
from subagent_lab.workspace.sandbox import Workspace


def search(
    ws: Workspace,
    patterns: Sequence[str],
    target: str,
    *,
    glob: str | None = None,
    case_insensitive: bool = False,
    fixed_strings: bool = False,
    context: int = 0,
    files_only: bool = False,
    max_results: int = 100,
    line_chars: int = rg.MAX_LINE_CHARS,
) -> rg.SearchRun:
    """One bounded rg run over ``target`` (from ``search_target``) for any of ``patterns``.

    Stops after ``max_results`` matching lines (files with ``files_only``); ToolError when rg
    timed out, rejected the regex or failed.
    """
    pinned = rg._pin(ws, target)
    try:
        if pinned is not None and pinned.stdin_path is None:
            flags = (case_insensitive, context, files_only, max_results, fixed_strings, line_chars)
            run = search_walked(ws, patterns, pinned, glob, *flags)
        else:
            rg_target = target if pinned is None else "-"
            args = rg._build_args(
                ws,
                patterns,
                rg_target,
                glob,
                case_insensitive,
                context,
                files_only,
                max_results,
                fixed_strings,
            )
            run = rg._run(ws, args, max_results, files_only, line_chars, glob, pinned)
    finally:
        if pinned is not None:
            os.close(pinned.fd)
    shown = patterns[0] if len(patterns) == 1 else " | ".join(patterns)
    scope = f"'{target}'" + (f" (glob {glob!r})" if glob else "")
    if run.timed_out:
        raise ToolError(
            f"the search for {shown!r} in {scope} was cut after {rg.TIMEOUT_S:g} s "
            f"({run.matches} matches so far); narrow it with a sub-directory path, a glob, "
            "or a more specific pattern"
        )
    if not run.finished and not run.capped and run.returncode not in (0, 1):
        message = run.stderr.removeprefix("rg: ") or f"rg exited with status {run.returncode}"
        if "regex" in message or "size limit" in message:
            raise ToolError(f"invalid or too large regex {shown!r}: {message}")
        raise ToolError(f"search failed: {message}")
    return run
