"""Records folded from trace events: steps, tool calls, the run, its evidence, a parent's ledger.

Pure functions of a trace (and, for evidence, of the workspace recorded in its ``RunStarted``
event; for a parent's ledger, of its children's traces); nothing here imports ipywidgets, so it is
testable without a browser or a kernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from subagent_lab.analysis.evidence_origin import EvidenceOrigin, evidence_origin
from subagent_lab.core.contracts import EvidenceCheck, ground_evidence
from subagent_lab.core.trace import (
    BudgetDecision,
    CandidateJudged,
    Compacted,
    ContractChecked,
    Event,
    ModelCalled,
    ModelCallFailed,
    PromptAdded,
    RunEnded,
    RunStarted,
    SubagentEvent,
    ToolFinished,
    ToolStarted,
    read_trace,
)
from subagent_lab.core.types import Usage
from subagent_lab.experiments.delegation.ledger import ledger_totals, trace_ledgers

CITATION_MAX_LINES = 60
"""At most this many lines of a citation are read: citing a whole file must not flood a cell."""
CITATION_CONTEXT_LINES = 2


@dataclass
class ToolRecord:
    """One tool call of a step: arguments from ``ToolStarted``, outcome from ``ToolFinished``."""

    call_id: str
    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)
    status: str = "unfinished"
    """``ok``, ``error``, ``denied``, or ``unfinished`` when the trace ends before the result."""
    text: str = ""
    truncated: bool = False
    duration_s: float = 0.0

    @property
    def denied(self) -> bool:
        return self.status == "denied"


@dataclass
class StepRecord:
    """One model call (or a refused one) with what led to it and what followed it."""

    index: int
    """Position in the run's step list (0-based)."""
    step: int
    """The loop's step counter when the call was made."""
    purpose: str
    """``step``, ``repair``, ``grace``, or ``refused`` when the budget stopped the call."""
    prompts: list[tuple[str, str]] = field(default_factory=list)
    """Messages the harness added before the call: (purpose, content)."""
    budget: BudgetDecision | None = None
    compacted: Compacted | None = None
    ok: bool = True
    error: str = ""
    text: str = ""
    planned_calls: list[dict[str, Any]] = field(default_factory=list)
    tools: list[ToolRecord] = field(default_factory=list)
    contract: ContractChecked | None = None
    subagents: list[SubagentEvent] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cumulative_tokens: int = 0
    """Total tokens of the run up to and including this call."""
    latency_s: float = 0.0
    finish_reason: str = ""
    cache_hit: bool = False

    @property
    def denied_count(self) -> int:
        return sum(t.denied for t in self.tools)


@dataclass
class RunView:
    """Everything the run inspector shows, folded from one trace."""

    trace_path: str
    start: RunStarted | None
    end: RunEnded | None
    steps: list[StepRecord]
    origin: EvidenceOrigin | None = None
    """What the answer made of the retrieval's candidates (``RetrievalStart``); None without them."""

    @property
    def budgets(self) -> dict[str, float]:
        return dict(self.start.budgets) if self.start else {}

    @property
    def context_budget(self) -> int | None:
        value = self.budgets.get("context_token_budget")
        return int(value) if value else None

    @property
    def total_budget(self) -> int | None:
        value = self.budgets.get("total_token_budget")
        return int(value) if value else None

    @property
    def terminal_reason(self) -> str:
        """``unknown`` for a trace whose run never ended (the process died)."""
        return self.end.terminal_reason if self.end else "unknown"

    @property
    def total_tokens(self) -> int:
        if self.end is not None:
            return self.end.usage.total_tokens
        return self.steps[-1].cumulative_tokens if self.steps else 0

    @property
    def workspace(self) -> Path | None:
        return Path(self.start.workspace) if self.start else None


def step_records(events: Sequence[Event]) -> list[StepRecord]:
    """Group a run's events into steps, one per model call, in trace order.

    Prompts, budget decisions and compactions attach to the call that follows them; tool calls,
    contract checks and sub-agent events attach to the call before them. A budget decision that
    refused the call becomes a step of its own (purpose ``refused``).
    """
    steps: list[StepRecord] = []
    pending_prompts: list[tuple[str, str]] = []
    pending_budget: BudgetDecision | None = None
    pending_compaction: Compacted | None = None
    cumulative = 0
    tools_by_id: dict[str, ToolRecord] = {}

    def new_step(step: int, purpose: str) -> StepRecord:
        nonlocal pending_prompts, pending_budget, pending_compaction
        record = StepRecord(
            index=len(steps),
            step=step,
            purpose=purpose,
            prompts=pending_prompts,
            budget=pending_budget,
            compacted=pending_compaction,
            cumulative_tokens=cumulative,
        )
        pending_prompts, pending_budget, pending_compaction = [], None, None
        steps.append(record)
        return record

    for event in events:
        if isinstance(event, PromptAdded):
            pending_prompts.append((event.purpose, event.content))
        elif isinstance(event, Compacted):
            pending_compaction = event
        elif isinstance(event, BudgetDecision):
            pending_budget = event
            if not event.allowed:
                record = new_step(event.step, "refused")
                record.ok, record.error = False, event.detail or "the budget refused this call"
        elif isinstance(event, ModelCalled):
            cumulative += event.usage.total_tokens
            record = new_step(event.step, event.purpose)
            record.text, record.planned_calls = event.text, list(event.tool_calls)
            record.prompt_tokens, record.completion_tokens = (
                event.usage.prompt_tokens,
                event.usage.completion_tokens,
            )
            record.cumulative_tokens = cumulative
            record.latency_s, record.finish_reason, record.cache_hit = (
                event.latency_s,
                event.finish_reason,
                event.cache_hit,
            )
        elif isinstance(event, CandidateJudged) and steps:  # the score call it follows shows it
            score = f"P(yes) {event.p_yes:.2f} for {event.item} (rank {event.rank}, {event.source})"
            steps[-1].text += "\n" + score
        elif isinstance(event, ModelCallFailed):
            cumulative += event.usage.total_tokens
            record = new_step(event.step, event.purpose)
            record.ok, record.error, record.latency_s = False, event.error, event.latency_s
            record.prompt_tokens, record.completion_tokens = (
                event.usage.prompt_tokens,
                event.usage.completion_tokens,
            )
            record.cumulative_tokens = cumulative
        elif isinstance(event, ToolStarted | ToolFinished | ContractChecked | SubagentEvent):
            # Events before any model call (a parent's own bookkeeping) get a step of their own.
            target = steps[-1] if steps else new_step(event.step, "start")
            if isinstance(event, ToolStarted):
                tool = ToolRecord(call_id=event.call_id, tool=event.tool, arguments=dict(event.arguments))
                tools_by_id[event.call_id] = tool
                target.tools.append(tool)
            elif isinstance(event, ToolFinished):
                tool = tools_by_id.get(event.call_id) or ToolRecord(call_id=event.call_id, tool=event.tool)
                if event.call_id not in tools_by_id:
                    target.tools.append(tool)
                tool.status, tool.text, tool.truncated = event.status, event.text, event.truncated
                tool.duration_s = event.duration_s
            elif isinstance(event, ContractChecked):
                target.contract = event
            else:
                target.subagents.append(event)
    if pending_prompts:
        # A prompt with no call after it (e.g. a grace turn that did not fit): still show it.
        record = new_step(steps[-1].step if steps else 0, "unanswered")
        record.ok = False
    return steps


def run_view(source: str | Path | Sequence[Event]) -> RunView:
    """Load a trace file (or take its events) and fold it for display."""
    events = read_trace(source) if isinstance(source, str | Path) else list(source)
    start = next((e for e in events if isinstance(e, RunStarted)), None)
    end = next((e for e in events if isinstance(e, RunEnded)), None)
    path = str(source) if isinstance(source, str | Path) else ""
    steps = step_records(events)
    return RunView(trace_path=path, start=start, end=end, steps=steps, origin=evidence_origin(events))


@dataclass
class EvidenceRecord:
    """One evidence item of the final contract, grounded or not."""

    item: str
    grounded: bool
    reason: str
    path: str | None
    start: int | None
    end: int | None
    origin: str = ""
    """Under ``RetrievalStart``: ``source · action``, with the candidate it keeps or narrows
    (``retrieval · kept #1``, ``model · added``); empty without candidates."""


def child_traces(run: RunView) -> list[tuple[str, str]]:
    """The sub-agents a parent run launched, as (label, trace path), in launch order."""
    children: list[tuple[str, str]] = []
    for step in run.steps:
        for sub in step.subagents:
            if sub.kind in ("subagent_completed", "subagent_failed"):
                ended = sub.terminal_reason or sub.kind
                label = f"{sub.profile} · {sub.model_used or '?'} · {ended} · {sub.child_run_id}"
                children.append((label, sub.child_trace))
    return children


def evidence_records(run: RunView) -> list[EvidenceRecord]:
    """The final contract's evidence items, each checked against the run's workspace."""
    if run.end is None or not run.end.contract or run.workspace is None:
        return []
    items = [str(i) for i in run.end.contract.get("evidence") or []]
    checks: list[EvidenceCheck] = ground_evidence(items, run.workspace)
    origins = run.origin.items if run.origin is not None else []
    labels = [f"{o.source} · {o.action}" + (f" #{o.candidate}" if o.candidate else "") for o in origins]
    return [
        EvidenceRecord(
            item=c.item,
            grounded=c.grounded,
            reason=c.reason,
            path=c.path,
            start=c.start,
            end=c.end,
            origin=labels[i] if i < len(labels) else "",
        )
        for i, c in enumerate(checks)
    ]


def cited_lines(
    workspace: Path,
    record: EvidenceRecord,
    *,
    context: int = CITATION_CONTEXT_LINES,
    max_lines: int = CITATION_MAX_LINES,
) -> list[tuple[int, str, bool]]:
    """The cited lines with a little context: (line number, text, inside the cited range).

    Only grounded items are read (grounding already checked they lie inside the workspace), and at
    most ``max_lines`` lines: a citation of a whole file must not flood the notebook.
    """
    if not record.grounded or record.path is None or record.start is None:
        return []
    end = record.end or record.start
    first = max(1, record.start - context)
    last = min(end + context, first + max_lines - 1)
    out: list[tuple[int, str, bool]] = []
    with (workspace / record.path).open(encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh, start=1):
            if number > last:
                break
            if number >= first:
                out.append((number, line.rstrip("\n"), record.start <= number <= end))
    return out


@dataclass
class LedgerRow:
    """One row of a parent run's cost ledger: one run (the parent, a child), or the total."""

    role: str
    """``parent``, ``task`` or ``verification`` (``delegation_ledger.RunLedger.role``), or ``total``."""
    profile: str
    run_id: str
    usage: Usage
    """Input (prompt), output (completion) and cached prompt tokens of every charged call."""
    calls: int
    """Charged model calls, failed attempts included."""
    served: str
    """The model ids the server reported answering, comma-separated, in order of first use."""
    wall_s: float
    trace_path: str = ""


def is_parent_run(run: RunView) -> bool:
    """Whether ``run`` is a main agent's (its profile is ``main``) or launched sub-agents."""
    return run.start is not None and (run.start.profile == "main" or bool(child_traces(run)))


def ledger_rows(run: RunView) -> list[LedgerRow]:
    """A parent run's cost ledger (``delegation_ledger.trace_ledgers``): the parent's row, each
    child's in the order they ended, then the total; empty for a child run or a view built from
    events rather than a file.

    The total sums every run's tokens and calls; its wall time is the parent's, since the children
    ran inside it (adding theirs would count that time twice)."""
    if not run.trace_path or not is_parent_run(run):
        return []
    ledgers = trace_ledgers(run.trace_path)
    rows = [
        LedgerRow(
            role=ledger.role,
            profile=ledger.profile,
            run_id=ledger.run_id,
            usage=ledger.usage,
            calls=len(ledger.calls),
            served=",".join(ledger.model_ids),
            wall_s=ledger.wall_s,
            trace_path=ledger.trace_path,
        )
        for ledger in ledgers
    ]
    total = LedgerRow(
        role="total",
        profile="",
        run_id="",
        usage=ledger_totals(ledgers),
        calls=sum(row.calls for row in rows),
        served=",".join(dict.fromkeys(i for ledger in ledgers for i in ledger.model_ids)),
        wall_s=ledgers[0].wall_s,
    )
    return [*rows, total]


def rolled_up_usage(run: RunView) -> Usage | None:
    """What the parent's own trace says the whole run used: its ``run_ended`` usage plus each
    finished child's (its ``subagent_completed`` or ``subagent_failed`` event), the sum
    ``MainRunResult.total_usage`` holds; None for a run that never ended."""
    if run.end is None:
        return None
    children = (
        sub.usage or Usage()
        for step in run.steps
        for sub in step.subagents
        if sub.kind in ("subagent_completed", "subagent_failed")
    )
    return sum(children, run.end.usage)
