"""The first action is a Grep for one of the task's best names."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from pydantic import Field

from subagent_lab.core.policy import ActionMenu, Policy, RunContext, RunView
from subagent_lab.tools.search_words import task_search_words


@dataclass
class FirstSearch(Policy):
    """The 0.5B model opens with a Glob, the task's sentence or the package's
    name; a first search for one of the task's names finds the code (``tools/search_words.py``)."""

    n: Annotated[int, Field(ge=1, le=10)] = 1
    """How many of the task's names the first Grep may choose from."""
    name = "first_search"
    grammar_only = ("*",)
    _words: tuple[str, ...] = field(default=(), init=False)

    def for_run(self, ctx: RunContext) -> FirstSearch:
        fresh = FirstSearch(self.n)
        fresh._words = tuple(task_search_words(ctx.tool_context, ctx.task, self.n))
        return fresh

    def narrow(self, run: RunView, menu: ActionMenu) -> None:
        if self._words and "Grep" in run.tools and not run.steps:
            menu.allowed = ["Grep"]
            menu.choices["Grep"] = {**menu.choices.get("Grep", {}), "pattern": list(self._words)}
