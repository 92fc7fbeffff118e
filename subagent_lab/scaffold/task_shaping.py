"""The child's first message: the workspace's layout line and the files the task names.

Small models guess paths like ``src/app/main.py``; one line of layout grounds them, and a file the
task names (``loaders.py``) is one Read away once its place is said (it counts as shown).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from subagent_lab.core.policy import Policy, RunContext, TaskShape
from subagent_lab.core.tool import ToolError
from subagent_lab.tools.glob import find_paths
from subagent_lab.workspace.sandbox import Workspace

NAMED_FILE = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.[A-Za-z]\w{0,4})(?![\w/-])")
"""A file name in a task's text: ``loaders.py``, ``yaml/constructor.py``."""
MAX_NAMED_FILES = 5


def task_files(workspace: Workspace, task: str) -> list[str]:
    """The workspace files a task names, workspace-relative (at most ``MAX_NAMED_FILES``).

    A bare name (``loaders.py``) is looked up anywhere in the workspace and kept only when one file
    has it; secret and ignored files never count (``find_paths`` applies the workspace's policy).
    """
    found: list[str] = []
    for name in dict.fromkeys(NAMED_FILE.findall(task)):
        try:
            matches = find_paths(workspace, "**/" + name.rsplit("/", 1)[-1]).paths
        except ToolError:
            continue
        files = [p for p in matches if p == name or p.endswith("/" + name)]
        if len(files) == 1 and files[0] not in found:
            found.append(files[0])
    return found[:MAX_NAMED_FILES]


@dataclass
class TaskShaping(Policy):
    """The workspace's top level (``layout``) and the files the task names (``paths``) in the
    first message."""

    layout: bool = False
    """Show the workspace's top-level entries (small models copy that line into arguments)."""
    paths: bool = False
    """Name the files the task names, and count them as shown."""
    name = "task_shaping"

    def shape_task(self, ctx: RunContext, shape: TaskShape) -> None:
        if self.layout:
            shape.overview = shape.layout
        if self.paths:
            shape.files = task_files(ctx.tool_context, shape.task)
