"""The Task tool: how a parent delegates to a read-only child and what it gets back."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from subagent_lab.launcher import SubagentLauncher, SubagentRequest, SubagentResult
from subagent_lab.tools.base import Tool, ToolError
from subagent_lab.types import ConfigError, RunStatus


class TaskEnvelope(BaseModel):
    """What the parent gets back from one Task call."""

    status: RunStatus
    profile: str
    terminal_reason: str
    result: dict[str, Any] | None
    text: str
    """The child's summary: the only part the parent's model reads, besides ``stats``."""
    stats: dict[str, Any] = Field(default_factory=dict)
    child_run_id: str
    child_trace: str

    @classmethod
    def from_result(cls, result: SubagentResult) -> TaskEnvelope:
        executed = sum(c.get("executed", 0) for c in result.tool_usage.values())
        return cls(
            status=result.status,
            profile=result.profile,
            terminal_reason=result.terminal_reason,
            result=result.contract,
            text=result.summary,
            stats={
                "tool_calls": executed,
                "tokens": result.usage.total_tokens,
                "model": result.model_used,
                "model_id": result.model_id,
                "fallback": result.fallback,
                "cost_usd": round(result.cost_usd, 6),
            },
            child_run_id=result.run_id,
            child_trace=result.trace_path,
        )

    def observation(self) -> str:
        """The compact observation text the parent's model sees."""
        lines = [f"[{self.profile} sub-agent: {self.status}, {self.terminal_reason}] {self.text}"]
        if self.result:
            for key in ("findings", "evidence", "unresolved_questions", "reasons"):
                items = self.result.get(key)
                if items:
                    lines.append(f"{key}: " + json.dumps(items[:12], ensure_ascii=False))
        lines.append(f"stats: {json.dumps(self.stats)}")
        return "\n".join(lines)


@dataclass
class TaskContext:
    """What the Task tool runs against: a launcher bound to the parent, plus limits across calls."""

    launcher: SubagentLauncher
    children_token_cap: int | None = None
    """Total tokens all children of this parent may spend together, on top of each child's budget."""
    envelopes: list[TaskEnvelope] = field(default_factory=list)
    results: list[SubagentResult] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def children_tokens(self) -> int:
        return sum(r.usage.total_tokens for r in self.results)


def task(
    ctx: TaskContext,
    description: str,
    prompt: str,
    subagent_type: str = "explore",
    model: Literal["light", "main"] | None = None,
    context: dict[str, Any] | None = None,
) -> str:
    """Delegate a self-contained, read-only job to a sub-agent and get its summary back.

    Args:
        description: A short (3-10 words) summary of the delegated job.
        prompt: Complete, self-contained instructions; the sub-agent sees nothing else of you.
        subagent_type: The profile to run (e.g. explore, verification, plan).
        model: light or main; defaults to the profile's choice.
        context: Optional structured context (earlier findings, file hints) passed to the sub-agent.
    """
    if not description.strip():
        raise ToolError("description must be a non-empty short summary")
    if not prompt.strip():
        raise ToolError("prompt must hold the complete instructions for the sub-agent")
    known = sorted(ctx.launcher.config.profiles)
    if subagent_type not in known:
        raise ToolError(f"subagent_type must be one of {known}, got {subagent_type!r}")
    with ctx._lock:
        if ctx.children_token_cap is not None and ctx.children_tokens >= ctx.children_token_cap:
            raise ToolError(
                f"the children's token cap ({ctx.children_token_cap}) is spent "
                f"({ctx.children_tokens} used); answer with what you have"
            )
    request = SubagentRequest(
        task=f"{description.strip()}\n\n{prompt.strip()}", profile=subagent_type, model=model, context=context
    )
    remaining = None
    if ctx.children_token_cap is not None:
        remaining = ctx.children_token_cap - ctx.children_tokens
        profile = ctx.launcher.config.profile(subagent_type)
        if remaining < profile.total_token_budget:
            # The cap across children tightens this child's own budget; it never loosens it.
            request.overrides = {
                "total_token_budget": remaining,
                "context_token_budget": min(profile.context_token_budget, remaining),
            }
    try:
        result = ctx.launcher.launch(request)
    except ConfigError as exc:
        raise ToolError(str(exc)) from None
    envelope = TaskEnvelope.from_result(result)
    with ctx._lock:
        ctx.results.append(result)
        ctx.envelopes.append(envelope)
    return envelope.observation()


TASK_TOOL = Tool("Task", task, kind="delegate")
