"""A run's trace as Inspect events (``api.inspect_export``): one agent span per run, a
``ModelEvent`` per model call and a ``ToolEvent`` per tool call, each child a span inside its
parent's, where the parent's trace says it ended.

A child is followed only to a trace file inside the directory being exported (``root``): a trace
is data, and its ``child_trace`` may name any path (``/etc/passwd``, ``../../elsewhere``, a link
out of the folder). A call of a no-model choice (``none``, ``retrieval``) spent no tokens: its
event carries no usage, however much the harness estimated for its budgets.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from subagent_lab.core.trace import (
    Event,
    ModelCalled,
    PromptAdded,
    RunEnded,
    RunStarted,
    SubagentEvent,
    ToolFinished,
    ToolStarted,
    read_trace,
)
from subagent_lab.core.types import FLOOR_CHOICES, Usage

if TYPE_CHECKING:
    from inspect_ai.event import Event as InspectEvent
    from inspect_ai.event import ModelEvent as InspectModelEvent
    from inspect_ai.model import ModelUsage, StopReason

STOP_REASONS = {"stop": "stop", "length": "max_tokens", "tool_calls": "tool_calls"}
"""The trace's ``finish_reason`` -> Inspect's ``stop_reason`` (any other: ``unknown``)."""


def inside(path: Path, root: Path) -> bool:
    """Whether ``path``, links resolved, is a file under ``root`` (itself resolved)."""
    try:
        return path.resolve().is_relative_to(root.resolve()) and path.resolve().is_file()
    except (OSError, RuntimeError, ValueError):  # a link loop, a name the OS refuses
        return False


def no_model(event: ModelCalled, started: RunStarted) -> bool:
    """Whether a call was a no-model choice's (the baseline's or the retrieval floor's)."""
    return (event.model_id or started.model_used) in FLOOR_CHOICES or started.model_used in FLOOR_CHOICES


def transcript(
    events: Sequence[Event], parent: str | None, root: Path
) -> tuple[list[InspectEvent], dict[str, ModelUsage]]:
    """A run's trace as Inspect events inside one agent span (children under ``root`` nested), and
    its usage (children included) per model; a no-model run's span says 0 tokens."""
    from inspect_ai.event import SpanBeginEvent, SpanEndEvent, ToolEvent
    from inspect_ai.tool import ToolCallError

    started = next(e for e in events if isinstance(e, RunStarted))
    ended = next((e for e in reversed(events) if isinstance(e, RunEnded)), None)
    calls = [e for e in events if isinstance(e, ModelCalled)]
    floor = started.model_used in FLOOR_CHOICES or (bool(calls) and all(no_model(e, started) for e in calls))
    span, own = started.run_id, ended.usage if ended is not None and not floor else Usage()
    totals = {
        "input_tokens": own.prompt_tokens,
        "output_tokens": own.completion_tokens,
        "total_tokens": own.total_tokens,
    }
    metadata: dict[str, Any] = {"run_id": span, "profile": started.profile, "model_used": started.model_used}
    metadata.update(totals, no_model=floor, terminal_reason=ended.terminal_reason if ended else None)
    name = f"{started.profile} ({started.model_used})"
    begin = SpanBeginEvent(
        id=span, span_id=span, parent_id=parent, name=name, type="agent", metadata=metadata
    )
    out: list[InspectEvent] = [begin.model_copy(update={"timestamp": when(started.ts)})]
    usage: dict[str, ModelUsage] = {}
    pending: list[Any] = [started.task]
    arguments: dict[str, dict[str, Any]] = {}
    for event in events:
        if isinstance(event, PromptAdded):
            pending.append(event.content)
        elif isinstance(event, ModelCalled):
            model_event = _model_event(event, started.model_id, pending, span, not no_model(event, started))
            out.append(model_event)
            key, used = model_event.model, model_event.output.usage
            if used is not None:
                usage[key] = usage[key] + used if key in usage else used
            pending = []
        elif isinstance(event, ToolStarted):
            arguments[event.call_id] = event.arguments
        elif isinstance(event, ToolFinished):
            error = None
            if event.status != "ok":
                denied = event.status == "denied"
                text = event.text[:2000]
                error = ToolCallError("permission", text) if denied else ToolCallError("unknown", text)
            tool = ToolEvent(
                id=event.call_id,
                function=event.tool,
                arguments=arguments.get(event.call_id, {}),
                result=event.text,
                error=error,
                span_id=span,
                working_time=event.duration_s,
                agent_span_id=span,
            )
            out.append(tool.model_copy(update={"timestamp": when(event.ts)}))
        elif isinstance(event, SubagentEvent) and event.kind in ("subagent_completed", "subagent_failed"):
            child = Path(event.child_trace) if event.child_trace else None
            if child is not None and inside(child, root):
                nested, child_usage = transcript(read_trace(child), span, root)
                out.extend(nested)
                for key, used in child_usage.items():
                    usage[key] = usage[key] + used if key in usage else used
    end = SpanEndEvent(id=span, span_id=span)
    out.append(end.model_copy(update={"timestamp": when(ended.ts if ended else started.ts)}))
    return out, usage


def _model_event(
    event: ModelCalled, asked: str, pending: list[str], span: str, spent: bool
) -> InspectModelEvent:
    """One model call: the messages the harness added since the call before, the reply, its usage
    (none for a no-model call: ``spent`` False)."""
    from inspect_ai.event import ModelEvent
    from inspect_ai.model import (
        ChatCompletionChoice,
        ChatMessageAssistant,
        ChatMessageUser,
        GenerateConfig,
        ModelOutput,
    )
    from inspect_ai.tool import ToolCall

    calls = [
        ToolCall(id=str(c.get("id", "")), function=str(c.get("name", "")), arguments=c.get("arguments") or {})
        for c in event.tool_calls
    ]
    model = event.model_id or asked
    reply = ChatMessageAssistant(content=event.text, tool_calls=calls or None, model=model)
    stop = cast("StopReason", STOP_REASONS.get(event.finish_reason, "unknown"))
    choice = ChatCompletionChoice(message=reply, stop_reason=stop)
    output = ModelOutput(model=model, choices=[choice], usage=_usage(event.usage) if spent else None)
    called = ModelEvent(
        model=model,
        requested_model=asked,
        input=[ChatMessageUser(content=text) for text in pending],
        tools=[],
        tool_choice="auto",
        config=GenerateConfig(max_tokens=event.max_tokens),
        output=output,
        span_id=span,
        working_time=event.latency_s,
        cache="read" if event.cache_hit else None,
        metadata={"purpose": event.purpose, "step": event.step, "no_model": not spent},
    )
    return called.model_copy(update={"timestamp": when(event.ts)})


def _usage(usage: Usage) -> ModelUsage:
    from inspect_ai.model import ModelUsage

    return ModelUsage(
        input_tokens=usage.prompt_tokens,
        output_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
        input_tokens_cache_read=usage.cached_tokens or None,
    )


def when(ts: float) -> datetime:
    """A trace's timestamp (seconds since the epoch) as Inspect's."""
    return datetime.fromtimestamp(ts, UTC)
