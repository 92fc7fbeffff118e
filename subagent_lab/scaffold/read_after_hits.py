"""After a search that showed matching lines, only Read and ``finish`` are offered."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from subagent_lab.core.policy import FINISH, ActionMenu, CallResult, Policy, RunView


@dataclass
class ReadAfterHits(Policy):
    """A small model re-runs a search that already hit; the lines it needs are
    one Read away."""

    name = "read_after_hits"
    _hits: bool = field(default=False, init=False)
    """Last turn's search showed matching lines."""

    def observe(self, run: RunView, results: Sequence[CallResult]) -> None:
        self._hits = any(
            r.call.name == "Grep" and not r.repeated and any(s.start for s in r.outcome.spans)
            for r in results
        )

    def narrow(self, run: RunView, menu: ActionMenu) -> None:
        if self._hits:
            menu.allowed = [a for a in menu.allowed if a in ("Read", FINISH)] or menu.allowed
