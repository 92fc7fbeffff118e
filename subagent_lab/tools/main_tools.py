"""The main agent's tools over one shared context: Read (recording stamps), Grep, Glob, Edit, Bash, Task.

Task goes through ``delegate``, which enforces the children's token cap by reserving each child's
share before it starts, so children launched in parallel can never jointly exceed the cap.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from subagent_lab.permissions import AskPolicy
from subagent_lab.sandbox import Workspace
from subagent_lab.task_tool import TaskContext, task
from subagent_lab.tools.base import Tool, ToolError
from subagent_lab.tools.bash import bash
from subagent_lab.tools.edit import ReadStamps, edit, tracked_read
from subagent_lab.tools.readonly import GLOB, GREP

MIN_CHILD_TOKENS = 2000
"""A child granted fewer tokens than this could not fit its first call; delegation is refused."""


@dataclass
class MainToolContext:
    """The one tool context of a main agent; each tool picks what it needs."""

    workspace: Workspace
    stamps: ReadStamps
    task: TaskContext
    ask_policy: AskPolicy
    bash_timeout_s: int
    reserved: int = 0
    """Tokens of the children's cap promised to children still running."""
    lock: threading.Lock = field(default_factory=threading.Lock)


def _bind(tool: Tool, pick: Callable[[MainToolContext], Any]) -> Tool:
    """The same tool, taking its own context out of the main agent's."""

    @functools.wraps(tool.fn)  # the schema follows __wrapped__: same parameters and docs
    def bound(ctx: MainToolContext, **kwargs: Any) -> str:
        return tool.fn(pick(ctx), **kwargs)

    return Tool(tool.name, bound, kind=tool.kind)


# Task under the children's cap, the cap reserved up front so parallel calls share it. wraps()
# gives it Task's name, docstring and signature, from which the tool schema is derived.
@functools.wraps(task)
def delegate(ctx: MainToolContext, **kwargs: Any) -> str:
    parent = ctx.task
    cap = parent.children_token_cap
    profile = parent.launcher.config.profiles.get(str(kwargs.get("subagent_type", "explore")))
    if cap is None or profile is None:
        return task(parent, **kwargs)
    with ctx.lock:
        spent = parent.children_tokens
        free = cap - spent - ctx.reserved
        if free < MIN_CHILD_TOKENS:
            running = f", {ctx.reserved} reserved by sub-agents still running" if ctx.reserved else ""
            raise ToolError(
                f"the children's token cap ({cap}) is spent ({spent} used{running}); "
                "no further sub-agents can be started: answer with what you have"
            )
        share = min(profile.total_token_budget, free)
        ctx.reserved += share
    # A private context whose cap is this call's share: task() then tightens the child's budget.
    own = TaskContext(launcher=parent.launcher, children_token_cap=share)
    try:
        return task(own, **kwargs)
    finally:
        with ctx.lock:
            ctx.reserved -= share
            parent.results.extend(own.results)
            parent.envelopes.extend(own.envelopes)


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
