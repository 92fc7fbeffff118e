"""A repeated Read shows the next window of its file instead of the record."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated

from pydantic import Field

from subagent_lab.core.policy import CallResult, Policy, RunView
from subagent_lab.core.tool import READ_LEAD
from subagent_lab.core.types import ToolCall, ToolOutcome

READ_ON_NOTE = "[Read on: {path} lines {start}-{end} were shown at step {step}; the lines after them follow.]"


def window_end(outcome: ToolOutcome) -> tuple[str, int] | None:
    """(file, last line) of a Read window: the first span a Read marks is its window."""
    return (outcome.spans[0].path, outcome.spans[0].end) if outcome.spans else None


@dataclass
class ReadOn(Policy):
    """A small model that asks for the same lines again wants to see more of them."""

    n: Annotated[int, Field(ge=1, le=20)] = 1
    """Read-ons per run at most."""
    name = "read_on"
    _windows: dict[str, tuple[str, int]] = field(default_factory=dict, init=False)
    """Read call signature -> (file, last line) of the latest window it showed."""
    _used: int = field(default=0, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    """A turn's calls may run on several threads."""

    def observe(self, run: RunView, results: Sequence[CallResult]) -> None:
        for r in results:
            window = window_end(r.outcome) if r.outcome.status == "ok" and not r.repeated else None
            if r.call.name == "Read" and window:
                self._windows[r.call.signature()] = window

    def on_repeat(self, run: RunView, call: ToolCall, step: int) -> ToolOutcome | None:
        """The next window of a repeated Read's file (None: no read-on left, or the file has ended)."""
        tool = run.tools.get(call.name)
        if call.name != "Read" or tool is None or "line" not in tool.args_model.model_fields:
            return None  # the full Read (offset, limit) pages by itself
        window = self._windows.get(call.signature())
        with self._lock:
            if window is None or self._used >= self.n:
                return None
            self._used += 1
        path, end = window
        outcome = tool.invoke(run.tool_context, {"path": path, "line": end + READ_LEAD + 1})
        after = window_end(outcome) if outcome.status == "ok" else None
        if after is None or after[1] <= end:
            return None  # the last window already reached the end of the file
        self._windows[call.signature()] = after
        start = min((s.start for s in run.seen if s.path == path and s.end == end), default=1)
        note = READ_ON_NOTE.format(path=path, start=start, end=end, step=step)
        return ToolOutcome(
            status="ok", text=f"{note}\n{outcome.text}", spans=outcome.spans, truncated=outcome.truncated
        )
