"""The events of a trace: typed, versioned, one pydantic model a kind, and their union ``Event``
(discriminated by ``kind``) that a trace line is read back into."""

from __future__ import annotations

import time
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter

from subagent_lab.core.types import Message, RunStatus, TerminalReason, Usage

SCHEMA_VERSION = 1


class _Event(BaseModel):
    run_id: str
    seq: int = 0
    ts: float = Field(default_factory=time.time)
    step: int = 0


class RunStarted(_Event):
    kind: Literal["run_started"] = "run_started"
    schema_version: int = SCHEMA_VERSION
    session_id: str
    parent_run_id: str | None = None
    parent_session_id: str | None = None
    parent_trace: str | None = None
    profile: str
    contract: str | None = None
    model_choice: str
    model_used: str
    model_id: str
    endpoint: str
    fallback: bool = False
    budgets: dict[str, float] = Field(default_factory=dict)
    tools: list[str] = Field(default_factory=list)
    workspace: str
    system_prompt: str
    task: str
    """The first user message as sent (the request's task, its context and any layout line)."""
    # What a re-run needs to start exactly as this run did (``subagent_lab.api.runs.rerun``); the
    # defaults keep traces written before these fields loadable.
    request_task: str | None = None
    """The task as the caller wrote it, before ``render_task``; None in older traces."""
    request_context: dict[str, Any] | None = None
    """The caller's structured context, as the plain JSON ``render_task`` rendered."""
    overrides: dict[str, Any] = Field(default_factory=dict)
    """The profile overrides the caller asked for."""
    profile_fields: dict[str, Any] = Field(default_factory=dict)
    """The resolved profile (overrides applied) without its name, description and system prompt."""
    seed: int | None = None
    """The sampling seed the run's model calls were sent with."""
    temperature: float | None = None
    """The sampling temperature the run's model calls were sent with; None in older traces."""
    rerun_of: str | None = None
    """Trace of the run this one re-ran with the same start; None for a fresh run."""
    policies: list[str] = Field(default_factory=list)
    """The scaffold's policies, in precedence order (``core.policy.policy_names``); empty in
    traces written before policies (and for a run without any)."""
    policy_params: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Each policy's parameters, by name."""
    shown: list[tuple[str, int, int]] = Field(default_factory=list)
    """Locations the first message showed before any tool ran (``[path, start, end]``, as
    ``ToolFinished.spans``): the files it names (lines 0-0) and the units a repo map listed. They
    count as seen, for the loop and for the scorer alike; empty in older traces."""
    prior_messages: list[Message] = Field(default_factory=list)
    """A forked child's share of the parent's conversation, as the child got it (``fork_prefix``'s
    kept messages, plain text turns) between its system prompt and ``task``; empty for a child
    that was not forked, for a parent, and in older traces."""


class PromptAdded(_Event):
    """A message the harness added to the conversation (repair, grace, warnings)."""

    kind: Literal["prompt_added"] = "prompt_added"
    purpose: str
    content: str


class BudgetDecision(_Event):
    kind: Literal["budget_decision"] = "budget_decision"
    purpose: str
    prompt_tokens_est: int
    """The pre-call count of the prompt: exact (the model's own tokenizer) when ``prompt_exact``."""
    prompt_exact: bool = False
    max_tokens: int
    used_total: int
    total_budget: int
    context_budget: int
    allowed: bool
    detail: str = ""
    cost_spent_usd: float | None = None
    """With a cost cap: USD charged to it before this call (a parent's includes its children's)."""
    cost_budget_usd: float | None = None


class Compacted(_Event):
    kind: Literal["compacted"] = "compacted"
    before_tokens: int
    after_tokens: int
    messages_compacted: int


class ModelCalled(_Event):
    kind: Literal["model_called"] = "model_called"
    purpose: Literal["step", "final", "repair", "grace", "check", "score"]
    prompt_tokens_est: int
    """The pre-call count (see ``BudgetDecision``); ``usage.prompt_tokens`` is the provider's figure."""
    prompt_exact: bool = False
    max_tokens: int
    usage: Usage
    latency_s: float
    finish_reason: str
    attempts: int = 1
    model_id: str = ""
    text: str = ""
    raw_text: str = ""
    """The reply as sent where the adapter rewrote ``text`` ("" when it did not)."""
    adapted: list[str] = Field(default_factory=list)
    """The grammar's cuts made to an answer decoded without a grammar (``models.grammar_cut``)."""
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    parse_ok: bool = True
    cache_hit: bool = False
    allowed_tools: list[str] | None = None
    """The actions the grammar offered (None: every tool and ``finish``, or not an action call)."""
    arg_choices: dict[str, dict[str, list[str]]] = Field(default_factory=dict)
    """Tool -> argument -> the only values the grammar offered."""
    narrowed_by: list[str] = Field(default_factory=list)
    """The policies that narrowed this call's action menu."""
    top_logprobs: dict[str, float] | None = None
    """A judged candidate's call (purpose ``score``): the first token's alternatives the endpoint
    returned (None: none asked, or none returned); a replay serves them again."""
    request_key: str = ""
    """SHA-256 of the request as sent, its timeout left out (``types.request_digest``): a replay
    serves this call's response to an identical request ("" in traces written before it)."""


class CandidateJudged(_Event):
    """One candidate the model judged (``core.judge``): its P(yes) for the request, read from the
    first token's log-probabilities (``source="logprobs"``) or, where the endpoint returned none,
    from the generated word (``"generated"``: 1.0 yes, 0.0 no, 0.5 neither)."""

    kind: Literal["candidate_judged"] = "candidate_judged"
    item: str
    """The candidate as cited (``path:line`` of its header)."""
    rank: int
    """Its retrieval rank (1 = first)."""
    p_yes: float
    source: Literal["logprobs", "generated"]
    answer: str = ""
    """The generated token."""


class ActionForced(_Event):
    """An action the harness took without a model call (the menu left only one): a loop step, but
    no model step."""

    kind: Literal["action_forced"] = "action_forced"
    action: str
    narrowed_by: list[str] = Field(default_factory=list)
    """The policies that narrowed the menu to it."""


class ModelCallFailed(_Event):
    kind: Literal["model_call_failed"] = "model_call_failed"
    purpose: str
    error: str
    attempts: int = 1
    latency_s: float = 0.0
    retryable: bool = False
    usage: Usage = Field(default_factory=Usage)


class ToolStarted(_Event):
    kind: Literal["tool_started"] = "tool_started"
    call_id: str
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ToolFinished(_Event):
    kind: Literal["tool_finished"] = "tool_finished"
    call_id: str
    tool: str
    status: Literal["ok", "error", "denied"]
    text: str
    truncated: bool = False
    duration_s: float = 0.0
    from_record: bool = False
    """Answered from the record of an identical earlier call, not run again."""
    spans: list[list[Any]] = Field(default_factory=list)
    """``[path, start, end]`` locations the observation showed (``start == 0``: the path only)."""


class ContractChecked(_Event):
    kind: Literal["contract_checked"] = "contract_checked"
    valid: bool
    errors: list[str] = Field(default_factory=list)
    grounded_ratio: float | None = None
    ungrounded: list[str] = Field(default_factory=list)
    seen_ratio: float | None = None
    unseen: list[str] = Field(default_factory=list)


class SubagentEvent(_Event):
    """Parent-side record of a child: requested, started, completed or failed."""

    kind: Literal["subagent_requested", "subagent_started", "subagent_completed", "subagent_failed"]
    child_run_id: str
    child_session_id: str
    child_trace: str
    profile: str
    model_choice: str | None = None
    model_used: str | None = None
    terminal_reason: str | None = None
    status: str | None = None
    usage: Usage | None = None
    tool_usage: dict[str, dict[str, int]] | None = None
    elapsed_s: float | None = None
    error: str | None = None


class RunTotals(BaseModel):
    """How a run ended and what it used: the one field list a run's outcome (``LoopOutcome``) and
    its ``run_ended`` event share."""

    terminal_reason: TerminalReason
    status: RunStatus
    detail: str = ""
    contract: dict[str, Any] | None = None
    usage: Usage = Field(default_factory=Usage)
    steps: int = 0
    model_calls: int = 0
    repairs_used: int = 0
    grace_used: bool = False
    elapsed_s: float = 0.0
    model_time_s: float = 0.0
    grounded_ratio: float | None = None
    """Share of evidence items that exist in the workspace (file and lines)."""
    seen_ratio: float | None = None
    """Share of evidence items inside a location the run's tools showed the model."""
    prompt_counts_exact: bool = True
    """False when any pre-call count of this run was an estimate (no tokenizer for the model)."""


class RunEnded(RunTotals, _Event):
    kind: Literal["run_ended"] = "run_ended"


Event = Annotated[
    RunStarted
    | PromptAdded
    | BudgetDecision
    | Compacted
    | ModelCalled
    | CandidateJudged
    | ActionForced
    | ModelCallFailed
    | ToolStarted
    | ToolFinished
    | ContractChecked
    | SubagentEvent
    | RunEnded,
    Field(discriminator="kind"),
]
EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)
