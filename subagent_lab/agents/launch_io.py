"""The pieces a run plan (``agents.plan``) is made of and the trace a launch writes: the first
message's text and layout line, a fork's share of the parent's conversation, the parent's context
as plain JSON, and a trace that records its write failures instead of raising them.

They exist so that ``SubagentLauncher.launch`` never raises for a runtime condition: odd values
in the parent's structured context are rendered, not rejected, and a trace that cannot be written
loses trace lines, never the run's result.
"""

from __future__ import annotations

import json
import math
from typing import Any

from pydantic import BaseModel

from subagent_lab.core.context import estimate_messages
from subagent_lab.core.types import Message
from subagent_lab.workspace.sandbox import Workspace

MAX_CONTEXT_DEPTH = 12
"""Deeper structured context is cut (a parent's hints are a few levels deep)."""


def workspace_overview(workspace: Workspace, limit: int = 40) -> str:
    """The workspace's top-level entries (ignored and secret ones left out), directories marked.

    Small models otherwise guess paths like ``src/app/main.py``; one line of layout grounds them.
    Raises OSError when the workspace root is gone or unreadable.
    """
    entries = []
    for path in sorted(workspace.root.iterdir(), key=lambda p: p.name):
        is_dir = path.is_dir() and not path.is_symlink()
        if workspace.is_secret(path.name) or workspace.is_ignored(path.name, is_dir=is_dir):
            continue
        entries.append(path.name + ("/" if is_dir else ""))
    more = f" ... ({len(entries) - limit} more)" if len(entries) > limit else ""
    return "Workspace top level: " + (", ".join(entries[:limit]) or "(empty)") + more


def render_task(
    task: str,
    context: dict[Any, Any] | None,
    overview: str | None = None,
    files: list[str] | None = None,
    sections: list[str] | None = None,
) -> str:
    """The child's first user message: the task, the parent's structured context, the layout, the
    files the task names, then ``sections`` (a repo map) as they are."""
    parts = [task.strip()]
    if context:
        rendered = json.dumps(plain_json(context), indent=2, sort_keys=True, ensure_ascii=False)
        parts.append(f"Context from the parent agent (JSON):\n{rendered}")
    if overview:
        parts.append(overview)
    if files:
        parts.append("Files named in the task: " + ", ".join(files))
    parts += [s for s in sections or () if s]
    return "\n\n".join(parts)


def plain_json(value: Any, _depth: int = 0, _open: frozenset[int] = frozenset()) -> Any:
    """``value`` as plain JSON data, whatever it holds.

    Keys become strings (``1`` and ``"1"`` both kept, the second marked), non-finite floats and
    unknown objects their text, sets sorted lists, cycles ``"<cycle>"``, lone surrogates
    replacement characters; nothing here raises.
    """
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if id(value) in _open:
        return "<cycle>"
    if _depth >= MAX_CONTEXT_DEPTH:
        return "<cut: nested too deeply>"
    inner = _open | {id(value)}
    if isinstance(value, BaseModel):
        try:
            dumped: Any = value.model_dump(mode="json")
        except Exception:  # a model holding what pydantic cannot serialise
            dumped = _text(value)
        return plain_json(dumped, _depth, inner)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = plain_json(key, _depth + 1, inner) if isinstance(key, str) else _text(key)
            while name in out:
                name += " (again)"
            out[name] = item if _plain(item) else plain_json(item, _depth + 1, inner)
        return out
    if isinstance(value, list | tuple):
        return [item if _plain(item) else plain_json(item, _depth + 1, inner) for item in value]
    if isinstance(value, set | frozenset):
        items = [plain_json(item, _depth + 1, inner) for item in value]
        return sorted(items, key=lambda item: json.dumps(item, sort_keys=True))
    return plain_json(_text(value), _depth, inner)


def _plain(value: Any) -> bool:
    """Whether ``plain_json`` returns ``value`` as it is (no call needed): None, a bool or int
    (not a subclass), or ASCII text (no lone surrogate)."""
    kind = type(value)
    return value is None or kind is bool or kind is int or (kind is str and value.isascii())


def _text(value: Any) -> str:
    try:
        return str(value)
    except Exception:  # a __str__ that raises: the type name still says what it was
        return f"<unprintable {type(value).__name__}>"


FORK_SHARE = 0.5
"""At most this share of a forked child's context budget goes to the parent's conversation: the rest
is left for the child's own turns (compaction would otherwise shorten its first observations)."""


def fork_prefix(prior: list[Message], own: list[Message], context_budget: int) -> list[Message]:
    """The newest of ``prior`` that fit ``FORK_SHARE`` of ``context_budget`` beside ``own`` (the
    child's system prompt and task), as plain text turns: a tool call becomes its assistant text
    plus the call, a tool result a user message, so the child's template never sees a call it
    cannot answer and the child holds no tool it did not get."""
    room = int(context_budget * FORK_SHARE) - estimate_messages(own)
    kept: list[Message] = []
    for message in reversed([_as_text(m) for m in prior if m.role != "system"]):
        room -= estimate_messages([message])
        if room < 0:
            break
        kept.append(message)
    return kept[::-1]


def _as_text(message: Message) -> Message:
    if message.role == "tool":
        text = f"[the parent's {message.name or 'tool'} result]\n{message.content}"
        return Message(role="user", content=text)
    calls = "".join(f"\n[the parent called {c.name} {json.dumps(c.arguments)}]" for c in message.tool_calls)
    return Message(role=message.role, content=f"{message.content or ''}{calls}".strip() or "(empty)")
