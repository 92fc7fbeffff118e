"""The permission gate: an allowlist and an independent risk classifier, both must agree."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from subagent_lab.core.tool import Tool, ToolKind

PermissionMode = Literal["main_agent", "readonly_subagent"]
AskPolicy = Literal["allow", "deny"]

_WRITING_NAMES = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit", "Bash", "Task", "TodoWrite"})


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""


def classify(tool_name: str, kind: ToolKind | None) -> ToolKind:
    """The risk class of a tool, by its declared kind and, independently, by its name.

    A writing tool registered under a read kind by mistake is still caught by its name.
    """
    if tool_name == "Task":
        return "delegate"
    if tool_name in _WRITING_NAMES:
        return "execute" if tool_name == "Bash" else "write"
    return kind or "read"


@dataclass(frozen=True)
class PermissionGate:
    """Decides whether a tool call may run.

    ``readonly_subagent`` allows reads only. ``main_agent`` allows reads and delegation; writes
    and execution follow ``ask_policy`` (deny by default; the tool itself may refuse more).
    """

    mode: PermissionMode
    allowlist: frozenset[str]
    ask_policy: AskPolicy = "deny"

    def check(self, name: str, tool: Tool | None) -> Decision:
        if name not in self.allowlist:
            return Decision(False, f"tool {name!r} is not allowed here; allowed: {sorted(self.allowlist)}")
        if tool is None:
            return Decision(False, f"tool {name!r} is not available")
        risk = classify(name, tool.kind)
        if self.mode == "readonly_subagent" and risk != "read":
            return Decision(False, f"{name} is a {risk} tool; a read-only sub-agent may not use it")
        if self.mode == "main_agent" and risk in ("write", "execute") and self.ask_policy == "deny":
            return Decision(False, f"{name} needs approval and the ask policy is 'deny'")
        return Decision(True)
