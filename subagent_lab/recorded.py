"""How a recorded child run started, read back from its trace: what ``rerun`` starts from.

A trace's ``RunStarted`` event holds the system prompt, the task and structured context as the
caller gave them, the workspace, the resolved profile fields and the sampling settings. Traces
written before those fields existed hold only the rendered first message and the budgets; they
are read back as well as they can be (the message is split into task, context and layout line).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from subagent_lab.trace import RunStarted, read_trace

CONTEXT_HEADER = "\n\nContext from the parent agent (JSON):\n"
"""How ``launch_io.render_task`` introduces the structured context."""
LAYOUT_PREFIX = "\n\nWorkspace top level: "
"""How ``launch_io.workspace_overview`` starts the layout line."""
_INT_BUDGETS = ("max_steps", "context_token_budget", "total_token_budget")


@dataclass(frozen=True)
class RecordedStart:
    """Everything a child run started from, as its trace recorded it."""

    trace_path: str
    run_id: str
    profile: str
    model_choice: str
    model_used: str
    workspace: str
    system_prompt: str
    task: str
    """The caller's task, before the context and layout line were added."""
    context: dict[str, Any] | None
    profile_fields: dict[str, Any] = field(default_factory=dict)
    """Profile fields the run ran with (old traces: its budgets and tools only)."""
    seed: int | None = None
    temperature: float | None = None


def recorded_start(trace: str | Path) -> RecordedStart:
    """The start of the run whose trace is at ``trace`` (ValueError when it has no ``RunStarted``)."""
    start = next((e for e in read_trace(trace) if isinstance(e, RunStarted)), None)
    if start is None:
        raise ValueError(f"{trace}: no run_started event; this is not a run trace")
    if start.request_task is not None:
        task, context = start.request_task, start.request_context
        fields = dict(start.profile_fields)
    else:  # written before the request was recorded
        task, context = split_rendered_task(start.task)
        fields = {k: int(v) if k in _INT_BUDGETS else v for k, v in start.budgets.items()}
        fields["tools"] = list(start.tools)
    return RecordedStart(
        trace_path=str(trace),
        run_id=start.run_id,
        profile=start.profile,
        model_choice=start.model_choice,
        model_used=start.model_used,
        workspace=start.workspace,
        system_prompt=start.system_prompt,
        task=task,
        context=context,
        profile_fields=fields,
        seed=start.seed,
        temperature=start.temperature,
    )


def split_rendered_task(message: str) -> tuple[str, dict[str, Any] | None]:
    """A rendered first message back into (task, context): the inverse of ``render_task``.

    The layout line is dropped (the launcher adds it again when the profile shows the layout);
    context that does not parse back as a JSON object stays part of the task text.
    """
    text = message
    at = text.rfind(LAYOUT_PREFIX)
    if at >= 0 and "\n\n" not in text[at + 2 :]:
        text = text[:at]
    at = text.rfind(CONTEXT_HEADER)
    if at < 0:
        return text, None
    try:
        context = json.loads(text[at + len(CONTEXT_HEADER) :])
    except ValueError:
        return text, None
    if not isinstance(context, dict):
        return text, None
    return text[:at], context
