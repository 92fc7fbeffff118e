"""The repo map as first context: the workspace's files and their most-referenced definitions,
ranked by a reference graph and fit to a token budget, at the end of the child's first message.

Small models stop after one search and one window; the map puts the code's structure in front of
them before their first action (Aider's repo map; issue 23). Each unit it shows counts as seen, so
an answer citing a unit the map listed is held to the same rule as one citing a tool's output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import Field

from subagent_lab.core.policy import Policy, RunContext, TaskShape
from subagent_lab.core.tool import ToolError
from subagent_lab.tools.symbols.repo_map import repo_map_observation

MAP_HEAD = (
    "Repository map (files, and their most-used definitions with their line ranges; "
    "tests, docs and examples marked):"
)
"""The line above the map in the first message."""


@dataclass
class RepoMap(Policy):
    """The map's budget in estimated tokens (its head line not counted)."""

    tokens: Annotated[int, Field(ge=1)] = 600
    name = "repo_map"

    def shape_task(self, ctx: RunContext, shape: TaskShape) -> None:
        try:
            observed = repo_map_observation(ctx.tool_context, self.tokens)
        except (OSError, ToolError):  # an unreadable tree has no map; the run goes on without it
            return
        if not observed.text:  # not even one file's name fits the budget
            return
        shape.sections.append(f"{MAP_HEAD}\n{observed.text}")
        shape.shown.extend(observed.spans)
