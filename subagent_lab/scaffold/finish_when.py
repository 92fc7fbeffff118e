"""Only ``finish`` is left after stale turns or after enough Reads (the harness then finishes
without a model call)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import Field

from subagent_lab.core.policy import FINISH, ActionMenu, Policy, RunView


@dataclass
class FinishWhen(Policy):
    """Finish after stale turns, or after Reads (each 0: never)."""

    stale: Annotated[int, Field(ge=0)] = 0
    """After this many consecutive stale turns."""
    reads: Annotated[int, Field(ge=0, le=50)] = 0
    """After this many executed Reads (a small model's next action after its Read tends to repeat
    it; docs/design.md)."""
    name = "finish_when"

    def narrow(self, run: RunView, menu: ActionMenu) -> None:
        if FINISH not in menu.allowed:
            return
        if (self.stale and run.stale_turns >= self.stale) or (
            self.reads and run.executed("Read") >= self.reads
        ):
            menu.allowed = [FINISH]
