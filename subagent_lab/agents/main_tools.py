"""The main agent's tools over one shared context: Read (recording stamps), Grep, Glob, Edit, Bash, Task.

Task goes through ``task_tool.task``, which enforces the children's token cap by reserving each
child's share before it starts, so children launched in parallel can never jointly exceed the cap.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from subagent_lab.agents.task_tool import TaskContext, task
from subagent_lab.core.permissions import AskPolicy
from subagent_lab.core.tool import Tool, ToolResult
from subagent_lab.tools.bash import bash
from subagent_lab.tools.edit import ReadStamps, edit, tracked_read
from subagent_lab.tools.registry import GLOB, GREP
from subagent_lab.workspace.bwrap import BashSandbox
from subagent_lab.workspace.sandbox import Workspace


@dataclass
class MainToolContext:
    """The one tool context of a main agent; each tool picks what it needs."""

    workspace: Workspace
    stamps: ReadStamps
    task: TaskContext
    ask_policy: AskPolicy
    bash_timeout_s: int
    bash_sandbox: BashSandbox = field(default_factory=BashSandbox)


def _bind(tool: Tool, pick: Callable[[MainToolContext], Any]) -> Tool:
    """The same tool, taking its own context out of the main agent's."""

    @functools.wraps(tool.fn)  # the schema follows __wrapped__: same parameters and docs
    def bound(ctx: MainToolContext, **kwargs: Any) -> ToolResult:
        return tool.fn(pick(ctx), **kwargs)

    return Tool(tool.name, bound, kind=tool.kind, bound=tool.bound)


# Task with the main agent's context: the children's cap (reserved per call, so parallel calls
# share it) and cancellation live in TaskContext. wraps() gives it Task's name, docstring and
# signature, from which the tool schema is derived.
@functools.wraps(task)
def delegate(ctx: MainToolContext, **kwargs: Any) -> str:
    return task(ctx.task, **kwargs)


def main_tools(names: tuple[str, ...]) -> dict[str, Tool]:
    """The main agent's tools, all taking a ``MainToolContext``, in the order named."""
    available = {
        "Read": Tool("Read", tracked_read),
        "Grep": _bind(GREP, lambda c: c.workspace),
        "Glob": _bind(GLOB, lambda c: c.workspace),
        "Edit": Tool("Edit", edit, kind="write"),
        "Bash": Tool("Bash", bash, kind="execute"),
        "Task": Tool("Task", delegate, kind="delegate"),
    }
    return {name: available[name] for name in names}
