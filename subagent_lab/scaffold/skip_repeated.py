"""A repeated call is answered from the record, and the tool that repeated sits out the next turn."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from subagent_lab.core.policy import ActionMenu, CallResult, Policy, RunView

REPEAT_NOTE = (
    "[Already shown at step {step}: this exact call's result is above and has not changed. "
    "Do something different: Read a file that a search showed, search for another name, or finish.]"
)


@dataclass
class SkipRepeated(Policy):
    """At temperature 0 the same prompt repeats the same call: the grammar offers something else
    next (where another action is left), and the repeat's answer says what to do instead."""

    name = "skip_repeated"
    _repeated: set[str] = field(default_factory=set, init=False)
    """Tools whose call last turn repeated an earlier one."""

    def observe(self, run: RunView, results: Sequence[CallResult]) -> None:
        self._repeated = {r.call.name for r in results if r.repeated}

    def narrow(self, run: RunView, menu: ActionMenu) -> None:
        fresh = [name for name in menu.allowed if name not in self._repeated]
        menu.allowed = fresh or menu.allowed

    def repeat_note(self, run: RunView, step: int) -> str | None:
        return REPEAT_NOTE.format(step=step)
