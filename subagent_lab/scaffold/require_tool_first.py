"""No final answer before the model has looked: ``finish`` is offered only after ``n`` executed calls."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import Field

from subagent_lab.core.policy import FINISH, ActionMenu, Policy, RunView
from subagent_lab.core.prompts import NUDGE_PROMPT


@dataclass
class RequireToolFirst(Policy):
    """Small models answer blind unless made to call a tool first."""

    n: Annotated[int, Field(ge=1)] = 1
    name = "require_tool_first"

    def narrow(self, run: RunView, menu: ActionMenu) -> None:
        if run.executed() < self.n:
            menu.allowed = [a for a in menu.allowed if a != FINISH]

    def check_finish(self, run: RunView) -> str | None:
        """Where no grammar kept ``finish`` off the menu, the finish is turned away with a nudge."""
        return NUDGE_PROMPT if run.executed() < self.n else None
