"""The loop's value types: its limits, sampling and grammar caps (``LoopSpec``), what it talks to
(``LoopDeps``), the review hook an accepted answer passes through (``Reviewer``), its mutable
per-attempt state and the ``Run`` that bundles them, and its one return type (``LoopOutcome``)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from pydantic import Field

from subagent_lab.core.budget import MIN_OUTPUT_TOKENS, Budget, BudgetNode, CostAccount
from subagent_lab.core.model import Model
from subagent_lab.core.permissions import PermissionGate
from subagent_lab.core.policy import Policy
from subagent_lab.core.tokens import PromptCounter
from subagent_lab.core.tool import Tool
from subagent_lab.core.trace import PromptAdded, RunTotals, RunTrace, TraceSink
from subagent_lab.core.types import Message, Span, ToolCall, Usage


@dataclass(frozen=True)
class RunLimits:
    """How far one run (or one attempt of it) may go: its steps, tokens, time, output per call,
    tool calls and repairs (a profile's ``Limits``, the output cap resolved against its model)."""

    max_steps: int
    context_token_budget: int
    total_token_budget: int
    timeout_s: float
    max_output_tokens: int = 1024
    """Output cap of a final-answer call (and of a repair or grace call)."""
    max_repairs: int = 2
    max_tool_calls_per_step: int = 4
    max_stale_turns: int = 3
    """Consecutive turns without a new observation that end the run as ``loop_detected``."""
    max_parallel_tools: int = 4


@dataclass(frozen=True)
class Sampling:
    """How the model samples: its temperature and seed (a call may ask for greedy decoding)."""

    temperature: float = 0.0
    seed: int | None = 0


@dataclass(frozen=True)
class GrammarCaps:
    """What an action's grammar allows: its output tokens, the thought before it and each string
    argument (a scaffold's observation sizes)."""

    action_max_tokens: int = 160
    """Output cap of an action call: a brief thought plus one tool call."""
    thought_max_chars: int = 80
    arg_max_chars: int = 160


@dataclass(frozen=True)
class LoopSpec:
    """One run's limits, sampling and grammar caps (each built from a profile and its model by a
    function of its own: ``config.build``) and its answer's contract; the scaffold is the run's
    policies (``LoopDeps.policies``), never a field here."""

    limits: RunLimits
    contract: str | None
    sampling: Sampling = Sampling()
    caps: GrammarCaps = GrammarCaps()

    def left_after(self, attempts: Sequence[LoopOutcome], budget: BudgetNode) -> LoopSpec | None:
        """The limits of the next attempt: the steps and repairs the ``attempts`` so far left of
        these, and the tokens and time the run's scope (``budget``: the attempts' and the reviews'
        spend, charged as they went) has left; None when that is too little for one more step."""
        limits = self.limits
        steps = limits.max_steps - sum(o.steps for o in attempts)
        tokens = budget.free_tokens()
        tokens = limits.total_token_budget if tokens is None else min(tokens, limits.total_token_budget)
        seconds = budget.seconds_left()
        seconds = limits.timeout_s if seconds is None else seconds
        if steps < 1 or tokens < MIN_OUTPUT_TOKENS or seconds <= 0:
            return None
        left = replace(
            limits,
            max_steps=steps,
            total_token_budget=tokens,
            context_token_budget=min(limits.context_token_budget, tokens),
            timeout_s=seconds,
            max_repairs=max(0, limits.max_repairs - sum(o.repairs_used for o in attempts)),
        )
        return replace(self, limits=left)


@dataclass(frozen=True)
class Review:
    """What a reviewer made of an accepted answer."""

    feedback: str | None
    """The message that sends the answer back for another attempt; None: the answer stands."""
    purpose: str = "review"
    """The ``PromptAdded`` purpose the feedback is written with."""


class Reviewer(Protocol):
    """Reviews an attempt that ended with an accepted answer (``terminal_reason`` completed), given
    the run's budget scope, which the review spends from (a sub-scope it ``grant``s: a verification
    child), so the next attempt gets what is left (inspect's ``attempts``)."""

    def __call__(self, attempt: LoopOutcome, budget: BudgetNode) -> Review: ...


@dataclass
class LoopDeps:
    """What the loop talks to."""

    model: Model
    tools: dict[str, Tool]
    gate: PermissionGate
    tool_context: Any
    workspace_root: Path
    trace: TraceSink
    cancel: threading.Event | None = None
    counter: PromptCounter | None = None
    """Counts a request's prompt tokens; None takes the model's own counter, else the estimate."""
    shown: list[Span] = field(default_factory=list)
    """Locations counted as shown before the first step (the files a task names)."""
    review: Reviewer | None = None
    """Reviews each accepted answer; feedback starts another attempt with it (None: no review)."""
    emit_run_ended: bool = True
    """False when the caller writes the run's one ``RunEnded`` itself (a parent's, rolled up)."""
    policies: tuple[Policy, ...] = ()
    """The scaffold, in precedence order (``scaffold.build``); each attempt takes a fresh copy of
    each (``Policy.for_run``) when it starts."""
    task: str = ""
    """The task as the caller wrote it."""
    task_message: str = ""
    """The task as the model is given it (the first user message), for policies that restate it."""
    grammar: bool = True
    """The endpoint decodes under a grammar (constrained output). False: what the grammar would
    hold (the turn's action menu, the answer's schema) is checked after each reply instead, and a
    breach gets a repair message (``core.schema_check``)."""
    allow_model_fallback: bool = False
    """Let the run go on when the endpoint reports serving another model than the one asked for
    (recorded in ``LoopOutcome.served_model_ids``); False ends it as ``model_mismatch``."""
    budget: BudgetNode | None = None
    """The run's scope in the budget tree (a parent's own, or a child's grant); None: a scope of
    the run's own, made from its limits when the loop starts."""
    cost: CostAccount | None = None
    """The run's cost cap (``cost_budget_usd`` at its model's prices), which its calls are admitted
    against and charged to; a parent's is shared by its attempts and charged its children's cost.
    None: no cost cap."""


class LoopOutcome(RunTotals):
    """How a run ended and what it used (``RunTotals``), per call and per tool; the loop's only
    return type."""

    usage_by_call: list[Usage] = Field(default_factory=list)
    tool_usage: dict[str, dict[str, int]] = Field(default_factory=dict)
    served_model_ids: list[str] = Field(default_factory=list)
    """The distinct models the endpoint reported serving, in order of first appearance."""
    attempts: int = 1
    """Loop attempts: 1, plus one per review that sent an answer back."""
    messages: list[Message] = Field(default_factory=list, exclude=True, repr=False)
    """The conversation as the run left it, an accepted final answer last (a caller continues it
    from here). In memory only: never serialized, so a result built from a dump of the outcome
    (``SubagentResult``, ``MainRunResult``) does not carry it; the trace holds the run's text."""

    def ended_fields(self) -> dict[str, Any]:
        """The fields of the run's ``RunEnded`` event: all the event and the outcome share."""
        return self.model_dump(include=set(RunTotals.model_fields))

    @classmethod
    def of_attempts(cls, attempts: Sequence[LoopOutcome], elapsed_s: float) -> LoopOutcome:
        """One outcome for a run of several attempts: what they used, summed; how it ended and
        its conversation, the last attempt's."""
        if len(attempts) == 1:
            return attempts[0]
        usage = Usage()
        tools: dict[str, dict[str, int]] = {}
        for attempt in attempts:
            usage += attempt.usage
            for name, counts in attempt.tool_usage.items():
                merged = tools.setdefault(name, {})
                for key, count in counts.items():
                    merged[key] = merged.get(key, 0) + count
        last = attempts[-1]
        return last.model_copy(
            update=dict(
                usage=usage,
                usage_by_call=[u for o in attempts for u in o.usage_by_call],
                tool_usage=tools,
                steps=sum(o.steps for o in attempts),
                model_calls=sum(o.model_calls for o in attempts),
                repairs_used=sum(o.repairs_used for o in attempts),
                grace_used=any(o.grace_used for o in attempts),
                elapsed_s=elapsed_s,
                model_time_s=sum(o.model_time_s for o in attempts),
                prompt_counts_exact=all(o.prompt_counts_exact for o in attempts),
                served_model_ids=list(dict.fromkeys(s for o in attempts for s in o.served_model_ids)),
                attempts=len(attempts),
            )
        )


@dataclass
class Record:
    """Where the result of one distinct tool call sits in the conversation."""

    step: int
    index: int
    """Index of its tool message in ``RunState.messages``."""


@dataclass
class RunState:
    """One attempt's mutable state; a new attempt starts a new one."""

    messages: list[Message]
    budget: Budget
    started: float = field(default_factory=time.monotonic)
    usage_by_call: list[Usage] = field(default_factory=list)
    steps: int = 0
    repairs: int = 0
    grace_used: bool = False
    model_time_s: float = 0.0
    tool_usage: dict[str, Counter[str]] = field(default_factory=dict)
    records: dict[str, Record] = field(default_factory=dict)
    """Call signature -> its last result; a repeat is answered from here instead of re-run."""
    observations: set[int] = field(default_factory=set)
    """Hashes of observation texts so far: a turn that adds none is a stale turn."""
    stale_turns: int = 0
    seen: list[Span] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    grounded: float | None = None
    seen_ratio: float | None = None
    counts_exact: bool = True
    served: list[str] = field(default_factory=list)

    @property
    def usage(self) -> Usage:
        return self.budget.used


class Run:
    """One run as the loop's functions share it: its spec, deps, state, trace and policies. It is
    also the policies' ``RunView``; ``ask`` is the loop's (``core.loop``)."""

    def __init__(self, spec: LoopSpec, deps: LoopDeps, state: RunState, step_offset: int = 0) -> None:
        self.spec, self.deps, self.state = spec, deps, state
        # Step numbers continue across a run's attempts.
        self.trace = RunTrace(deps.trace, lambda: state.steps, step_offset)
        self.policies: tuple[Policy, ...] = ()

    @property
    def task(self) -> str:
        return self.deps.task

    @property
    def task_message(self) -> str:
        return self.deps.task_message

    @property
    def contract(self) -> str | None:
        return self.spec.contract

    @property
    def workspace_root(self) -> Path:
        return self.deps.workspace_root

    @property
    def tools(self) -> Mapping[str, Tool]:
        return self.deps.tools

    @property
    def tool_context(self) -> Any:
        return self.deps.tool_context

    @property
    def steps(self) -> int:
        return self.state.steps

    @property
    def stale_turns(self) -> int:
        return self.state.stale_turns

    @property
    def seen(self) -> Sequence[Span]:
        return self.state.seen

    def executed(self, tool: str | None = None) -> int:
        usage = self.state.tool_usage
        if tool is not None:
            return usage[tool]["executed"] if tool in usage else 0
        return sum(counts["executed"] for counts in usage.values())

    def add_prompt(self, purpose: str, text: str) -> None:
        self.state.messages.append(Message(role="user", content=text))
        self.trace.emit(PromptAdded, purpose=purpose, content=text)

    def ask(self, purpose: str, schema: dict[str, Any], max_tokens: int) -> str:
        raise NotImplementedError("the loop's run answers this")

    def judge(self, messages: list[Message], item: str, rank: int) -> float:
        raise NotImplementedError("the loop's run answers this")

    def call_tools(self, calls: Sequence[ToolCall]) -> None:
        raise NotImplementedError("the loop's run answers this")
