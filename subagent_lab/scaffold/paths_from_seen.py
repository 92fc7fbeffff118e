"""A path argument can only name what a tool has shown (or "." to search everything)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from subagent_lab.core.policy import ActionMenu, Policy, RunView
from subagent_lab.core.types import Span, ToolCall

READ, SEARCHES, OUTLINE = "Read", ("Grep", "Glob"), "Outline"


def seen_paths(seen: Sequence[Span], *, dirs: bool = False) -> list[str]:
    """Files (and with ``dirs``, directories) some observation has shown, in the order first shown."""
    paths = dict.fromkeys(s.path for s in seen if dirs or not s.path.endswith("/"))
    return list(paths)


@dataclass
class PathsFromSeen(Policy):
    """Read is offered once a file was shown, and only shown files; the small
    models otherwise guess paths like ``src/app/main.py``. Outline (a file or a directory) is held
    the same way: once a path was shown, only shown files and directories."""

    name = "paths_from_seen"
    grammar_only = ("*",)

    def narrow(self, run: RunView, menu: ActionMenu) -> None:
        if not seen_paths(run.seen):
            menu.allowed = [a for a in menu.allowed if a != READ]
        menu.choices.update({name: {"path": [".", *seen_paths(run.seen, dirs=True)]} for name in SEARCHES})
        menu.choices[READ] = {"path": seen_paths(run.seen)}
        if OUTLINE in run.tools:  # no entry otherwise: a request without Outline stays as it was
            shown = seen_paths(run.seen, dirs=True)
            if not shown:
                menu.allowed = [a for a in menu.allowed if a != OUTLINE]
            menu.choices[OUTLINE] = {"path": shown}

    def check_call(self, run: RunView, call: ToolCall) -> str | None:
        """The same rule where no grammar enforced it (native tool calls, other servers)."""
        if "path" not in call.arguments:
            return None
        path = str(call.arguments.get("path", "")).removeprefix("./")
        shown = seen_paths(run.seen, dirs=call.name != READ)
        if call.name == OUTLINE:
            if path in shown:
                return None
            listed = ", ".join(shown[-8:]) or "none yet: search with Grep, Glob, Find or Search first"
            return f"Error: Outline only files or directories a tool has shown. Shown so far: {listed}"
        if path in shown or (call.name != READ and path in (".", "")):
            return None
        listed = ", ".join(shown[-8:]) or "none yet: search with Grep or Glob first"
        return f"Error: Read only files a search has shown. Files shown so far: {listed}"
