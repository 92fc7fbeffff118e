"""The Task tool: how a parent delegates to a read-only child and what it gets back."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest, SubagentResult
from subagent_lab.core.budget import BudgetNode, BudgetSpent
from subagent_lab.core.model import Model
from subagent_lab.core.tokens import CountsPrompts
from subagent_lab.core.tool import Tool, ToolError
from subagent_lab.core.types import ConfigError, Message, ModelChoice, ModelRequest, ModelResponse, RunStatus

ContextMode = Literal["isolated", "brief", "forked"]
CONTEXT_MODES: tuple[ContextMode, ...] = ("isolated", "brief", "forked")
MIN_CHILD_TOKENS = 2000
"""A child granted fewer tokens than this could not fit its first call; delegation is refused."""
MAX_CONTEXT_DEPTH = 16
"""Nesting levels a Task ``context`` may have (findings and file hints need two or three)."""
MAX_CONTEXT_CHARS = 64_000
"""Characters of a Task ``context`` as JSON: it is rendered into the child's first message."""


def check_context(context: Any) -> None:
    """ToolError unless ``context`` is plain JSON data of bounded depth and size.

    Checked iteratively before anything serialises it: a context nested hundreds of levels deep
    would otherwise raise ``RecursionError`` in the trace writer and crash the parent's run.
    """
    if context is None:
        return
    if not isinstance(context, dict):
        raise ToolError(f"context must be an object (a JSON mapping), got {type(context).__name__}")
    stack: list[tuple[Any, int]] = [(context, 1)]  # containers only, with their nesting level
    nodes = 0
    while stack:
        value, depth = stack.pop()
        if depth > MAX_CONTEXT_DEPTH:
            raise ToolError(
                f"context is nested more than {MAX_CONTEXT_DEPTH} levels deep; pass flat findings and hints"
            )
        for child in value.values() if isinstance(value, dict) else value:
            nodes += 1
            if nodes > MAX_CONTEXT_CHARS:
                raise ToolError(f"context holds more than {MAX_CONTEXT_CHARS:,} values; pass a short summary")
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))
            elif isinstance(child, int) and not isinstance(child, bool) and abs(child) > 2**53:
                raise ToolError("context holds an integer out of range")
            elif isinstance(child, float) and not math.isfinite(child):
                raise ToolError("context holds a number that is not finite")
    size = len(json.dumps(context, ensure_ascii=False, default=str))
    if size > MAX_CONTEXT_CHARS:
        raise ToolError(f"context is {size:,} characters as JSON; at most {MAX_CONTEXT_CHARS:,}")


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
            for key in ("findings", "steps", "evidence", "unresolved_questions", "reasons"):
                items = self.result.get(key)
                if items:
                    lines.append(f"{key}: " + json.dumps(items[:12], ensure_ascii=False))
        lines.append(f"stats: {json.dumps(self.stats)}")
        return "\n".join(lines)


@dataclass(frozen=True)
class ChildSwap:
    """One child run otherwise than the parent asked (a counterfactual replay: ``api.replay``):
    another model, context mode or profile fields (budgets, a scaffold preset's fields)."""

    model: ModelChoice | None = None
    context_mode: ContextMode | None = None
    overrides: dict[str, Any] = field(default_factory=dict)

    def apply(self, request: SubagentRequest) -> SubagentRequest:
        """``request`` with this swap's model and profile fields."""
        overrides = {**request.overrides, **self.overrides}
        return request.model_copy(update={"model": self.model or request.model, "overrides": overrides})


SwapChooser = Callable[[str, str], ChildSwap | None]
"""(the child's task, its profile) -> how to run it otherwise, or None: as asked."""


class ConversationRecorder:
    """The parent's model, remembering the conversation of its last call and the reply (what a
    forked child starts from: a Task call is dispatched right after the call that made it)."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.last: list[Message] = []
        if isinstance(model, CountsPrompts):  # keep the exact counts of the model it wraps
            self.count_prompt = model.count_prompt

    def complete(self, request: ModelRequest) -> ModelResponse:
        response = self.model.complete(request)
        reply = Message(role="assistant", content=response.text, tool_calls=response.tool_calls)
        self.last = [*request.messages, reply]
        return response


@dataclass
class TaskContext:
    """What the Task tool runs against: a launcher bound to the parent, and the parent's budget
    scope for its children (``children``): every child runs in a ``grant`` of it."""

    launcher: SubagentLauncher
    children: BudgetNode | None = None
    """The children's scope (``plan.children_scope``): the tokens all children of this parent may
    spend together, on top of each child's budget, under the parent's cost cap. None: a scope of
    its own, capped at ``children_token_cap``."""
    children_token_cap: int | None = None
    """The children's cap when ``children`` is None (a context made on its own, as in a study)."""
    cancel: threading.Event | None = None
    """The parent's cancellation: running children stop with it."""
    envelopes: list[TaskEnvelope] = field(default_factory=list)
    results: list[SubagentResult] = field(default_factory=list)
    context_mode: ContextMode = "brief"
    """What a child starts from besides its task: ``isolated`` (nothing: a ``context`` is dropped),
    ``brief`` (the parent's structured ``context``), ``forked`` (that, and the parent's conversation
    so far from ``conversation``, cut to fit the child's context budget)."""
    conversation: Callable[[], list[Message]] | None = None
    """The parent's conversation so far (set by the parent; read by ``forked``)."""
    child_model: ModelChoice | None = None
    """Every child runs on this model, whatever the parent asks (None: the parent's ``model``)."""
    swap_for: SwapChooser | None = None
    """Called with each Task child's task and profile before it starts; a ``ChildSwap`` it returns
    changes that child (None, the default: every child runs as asked)."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if self.children is None:
            self.children = BudgetNode("children", tokens=self.children_token_cap)

    @property
    def scope(self) -> BudgetNode:
        assert self.children is not None  # set in __post_init__
        return self.children

    @property
    def children_tokens(self) -> int:
        """Tokens the children spent (a verification child's too: it counts against the cap)."""
        return self.scope.spent_tokens

    def launch_capped(
        self, request: SubagentRequest, *, task: bool = True, within: BudgetNode | None = None
    ) -> SubagentResult:
        """Launch ``request`` in a grant of the children's scope (ToolError when too little is
        left), its spend charged up the tree as it goes. ``within``: a child the parent launches
        itself (verification), granted from that scope (the parent's own) and counting against the
        children's cap too; counted, but not listed in ``results``."""
        profile = self.launcher.resolve_profile(request)
        above, also = (within, self.scope) if within is not None else (self.scope, None)
        name = f"{'task' if task else 'verification'}-{len(self.results) + 1}"
        try:
            grant = above.grant(
                name,
                tokens=profile.total_token_budget,
                usd=profile.cost_budget_usd,
                also=also,
                min_tokens=MIN_CHILD_TOKENS,
            )
        except BudgetSpent as spent:
            raise ToolError(self._refusal(spent)) from None
        result = None
        try:
            result = self.launcher.launch(request.model_copy(update={"budget": grant}), cancel=self.cancel)
        finally:
            grant.close()
            if result is not None and task:
                with self._lock:
                    self.results.append(result)
                    self.envelopes.append(TaskEnvelope.from_result(result))
        return result

    def _refusal(self, spent: BudgetSpent) -> str:
        """What a refused child's caller is told, naming the scope that ran out."""
        node = spent.scope
        if spent.resource == "usd":
            return (
                f"the cost cap (${node.usd or 0.0:.6f}) is spent (${node.spent_usd:.6f} charged): no further "
                "sub-agents can be started: answer with what you have"
            )
        if node is self.scope:
            running = f", {node.held_tokens} reserved by sub-agents still running" if node.held_tokens else ""
            return (
                f"the children's token cap ({node.tokens}) is spent ({node.spent_tokens} used{running}); "
                "no further sub-agents can be started: answer with what you have"
            )
        return f"the main agent's total_token_budget leaves {max(int(spent.free), 0)} tokens"


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
    check_context(context)
    known = sorted(ctx.launcher.config.profiles)
    if subagent_type not in known:
        raise ToolError(f"subagent_type must be one of {known}, got {subagent_type!r}")
    text = f"{description.strip()}\n\n{prompt.strip()}"
    swap = ctx.swap_for(text, subagent_type) if ctx.swap_for is not None else None
    mode = (swap.context_mode if swap else None) or ctx.context_mode
    forked = mode == "forked" and ctx.conversation is not None
    request = SubagentRequest(
        task=text,
        profile=subagent_type,
        model=ctx.child_model or model,
        context=None if mode == "isolated" else context,
        prior_messages=ctx.conversation() if forked and ctx.conversation else [],
    )
    request = swap.apply(request) if swap else request
    try:
        result = ctx.launch_capped(request)
    except ConfigError as exc:
        raise ToolError(str(exc)) from None
    return TaskEnvelope.from_result(result).observation()


TASK_TOOL = Tool("Task", task, kind="delegate")
