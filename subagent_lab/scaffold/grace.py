"""A run ended by a limit gets one final-answer call without tools, if it looked at anything."""

from __future__ import annotations

from dataclasses import dataclass

from subagent_lab.core.policy import Policy, RunView
from subagent_lab.core.types import LIMIT_REASONS, Stop


@dataclass
class Grace(Policy):
    """The findings so far are kept; a grace answer from a run that never looked at
    the workspace would be a guess."""

    name = "grace"

    def grace(self, run: RunView, stop: Stop) -> bool:
        return stop.reason in LIMIT_REASONS and run.executed() > 0
