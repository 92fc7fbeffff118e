"""What one parent run of the delegation study cost and how good its answer was.

- **The cost ledger**: per run (the parent, each child), every model call's input, output and
  cached prompt tokens with the turn and the tools that turn called, the model the server reported
  answering (``ModelResponse.model_id``, as the trace records it), the weights' SHA-256
  (``stamp.weights_id``) and the run's wall time. It is read from the traces, where every
  charged call is an event (``model_called``, and ``model_call_failed`` for lost attempts), so a
  run's ledger sums exactly to its ``usage``.
- **The parent's answer as evidence**: the ``path:line`` items of its final text
  (``core.contracts.EVIDENCE_RE``), scored with ``bench.scoring.score_run`` under one context of
  the parent's and its children's traces: a location a child's tool showed counts as shown, so
  evidence the parent only relayed scores like its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from subagent_lab.agents.result import MainRunResult
from subagent_lab.bench.scoring import Score, context_from_events, score_run
from subagent_lab.bench.suite import BenchTask
from subagent_lab.config.profiles import LabConfig
from subagent_lab.core.contracts import EVIDENCE_RE
from subagent_lab.core.trace import (
    Event,
    ModelCalled,
    ModelCallFailed,
    PromptAdded,
    RunEnded,
    RunStarted,
    SubagentEvent,
    read_trace,
)
from subagent_lab.core.types import Usage
from subagent_lab.experiments.stamp import weights_id

MAX_EVIDENCE = 50
"""Evidence items an answer may carry (the explore contract's cap)."""
_LEADING = "`'\"([{<*"
_TRAILING = "`'\")]}>,;.:!?*"
_FILE_LIKE = re.compile(r"[A-Za-z_][\w-]*\.\w+$|/")


class LedgerCall(BaseModel):
    """One charged model call of a run."""

    step: int
    purpose: str
    tools: list[str] = Field(default_factory=list)
    """The tools the call asked for (empty for an answer, a repair, a failed call)."""
    usage: Usage
    model_id: str = ""
    """The model the server said answered (``""`` for a call that failed)."""
    latency_s: float = 0.0

    @property
    def key(self) -> str:
        """What the call's tokens are booked to: its tools (``Grep+Read``), ``finish`` for an action
        that only finished, else its purpose (``answer``, ``final``, ``repair``, ``check``, ...)."""
        if self.tools:
            return "+".join(self.tools)
        return "finish" if self.purpose == "step" else self.purpose


class RunLedger(BaseModel):
    """The calls of one run (a parent or a child), with who answered them."""

    run_id: str
    role: Literal["parent", "task", "verification"]
    profile: str
    model_used: str
    """The configured choice the run asked for (``light``, ``main``, ``none``)."""
    model_ids: list[str] = Field(default_factory=list)
    """The distinct model ids the server reported, in order of first use."""
    weights: str = ""
    """The weights' SHA-256 (embedded models), else the endpoint and model id."""
    wall_s: float = 0.0
    calls: list[LedgerCall] = Field(default_factory=list)
    trace_path: str = ""
    """Where the run's trace is (it may be missing: a child that was never started)."""

    @property
    def usage(self) -> Usage:
        return sum((c.usage for c in self.calls), Usage())

    def by_turn(self) -> dict[int, Usage]:
        out: dict[int, Usage] = {}
        for call in self.calls:
            out[call.step] = out.get(call.step, Usage()) + call.usage
        return out

    def by_tool(self) -> dict[str, Usage]:
        out: dict[str, Usage] = {}
        for call in self.calls:
            out[call.key] = out.get(call.key, Usage()) + call.usage
        return out


def run_ledger(
    trace_path: str | Path, role: Literal["parent", "task", "verification"], weights: str = ""
) -> RunLedger:
    """The ledger of the run recorded at ``trace_path``."""
    return _ledger(read_trace(trace_path), role, weights, str(trace_path))


def _ledger(
    events: list[Event], role: Literal["parent", "task", "verification"], weights: str, trace_path: str
) -> RunLedger:
    """The ledger of the run whose trace ``events`` are given."""
    start = next((e for e in events if isinstance(e, RunStarted)), None)
    end = next((e for e in events if isinstance(e, RunEnded)), None)
    calls: list[LedgerCall] = []
    for event in events:
        if isinstance(event, ModelCalled):
            tools = [str(c.get("name")) for c in event.tool_calls if c.get("name") != "finish"]
            # An action that is text, no call at all, is the answer given in place of an action.
            purpose = "answer" if event.purpose == "step" and not event.tool_calls else event.purpose
            calls.append(LedgerCall(step=event.step, purpose=purpose, tools=tools, usage=event.usage,
                                    model_id=event.model_id, latency_s=event.latency_s))  # fmt: skip
        elif isinstance(event, ModelCallFailed):
            calls.append(LedgerCall(step=event.step, purpose=f"{event.purpose} (failed)", usage=event.usage,
                                    latency_s=event.latency_s))  # fmt: skip
    ids = list(dict.fromkeys(c.model_id for c in calls if c.model_id))
    return RunLedger(
        run_id=start.run_id if start else "",
        role=role,
        profile=str(start.profile) if start else "",
        model_used=str(start.model_used) if start else "",
        model_ids=ids,
        weights=weights,
        wall_s=end.elapsed_s if end else 0.0,
        calls=calls,
        trace_path=trace_path,
    )


def parent_ledgers(result: MainRunResult, lab: LabConfig) -> list[RunLedger]:
    """The parent's ledger, then each child's (Task children, then verification children)."""

    def weights(choice: str) -> str:
        try:
            return weights_id(lab, choice)  # type: ignore[arg-type]
        except Exception:  # a choice the configuration cannot resolve: say so, never fail the row
            return "unknown"

    out = [run_ledger(result.trace_path, "parent", weights(result.model_used))]
    for child in result.children:
        out.append(run_ledger(child.trace_path, child.via, weights(child.model_used)))
    return out


def trace_ledgers(parent_trace: str | Path) -> list[RunLedger]:
    """A parent run's ledgers from its trace alone (an inspector has the file, not the run's
    ``MainRunResult``): the parent's, then each child's in the order the children ended, as the
    parent's ``subagent_completed`` and ``subagent_failed`` events name them. A child of the
    ``verification`` profile is booked as a verification child, any other as a Task child; a child
    whose trace is missing (it was never started) gets a ledger without calls. No weights: the
    trace does not hold the configuration that resolves them."""
    events = read_trace(parent_trace)
    out = [_ledger(events, "parent", "", str(parent_trace))]
    ended = ("subagent_completed", "subagent_failed")
    for event in (e for e in events if isinstance(e, SubagentEvent) and e.kind in ended):
        role: Literal["task", "verification"] = "verification" if event.profile == "verification" else "task"
        if Path(event.child_trace).is_file():
            out.append(run_ledger(event.child_trace, role))
        else:
            out.append(RunLedger(run_id=event.child_run_id, role=role, profile=event.profile,
                                 model_used=event.model_used or "", wall_s=event.elapsed_s or 0.0,
                                 trace_path=event.child_trace))  # fmt: skip
    return out


def ledger_columns(ledgers: list[RunLedger]) -> dict[str, Any]:
    """The ledger rolled up into a row: the parent's and the children's tokens by kind, peak
    context, the served models, and per-tool tokens (JSON), for one parent run."""
    parent, children = ledgers[0], ledgers[1:]
    kids = sum((c.usage for c in children), Usage())
    peak = max((c.usage.prompt_tokens for c in parent.calls), default=0)
    tools: dict[str, int] = {}
    for ledger in ledgers:
        for key, usage in ledger.by_tool().items():
            name = f"{'parent' if ledger.role == 'parent' else 'child'}:{key}"
            tools[name] = tools.get(name, 0) + usage.total_tokens
    return {
        "parent_peak_context": peak,
        "parent_prompt_tokens": parent.usage.prompt_tokens,
        "parent_completion_tokens": parent.usage.completion_tokens,
        "parent_cached_tokens": parent.usage.cached_tokens,
        "parent_tokens": parent.usage.total_tokens,
        "children_prompt_tokens": kids.prompt_tokens,
        "children_completion_tokens": kids.completion_tokens,
        "children_cached_tokens": kids.cached_tokens,
        "children_tokens": kids.total_tokens,
        "total_tokens": parent.usage.total_tokens + kids.total_tokens,
        "parent_model_served": ",".join(parent.model_ids),
        "children_models_served": ",".join(dict.fromkeys(i for c in children for i in c.model_ids)),
        "parent_weights": parent.weights,
        "children_weights": ",".join(dict.fromkeys(c.weights for c in children)),
        "children_wall_s": sum(c.wall_s for c in children),
        "tokens_by_tool": tools,
    }


def answer_evidence(text: str | None) -> list[str]:
    """The distinct ``path:line`` items of a free-text answer, in order (at most ``MAX_EVIDENCE``):
    each whitespace-separated word, its quotes, brackets and trailing punctuation stripped, that
    ``EVIDENCE_RE`` accepts."""
    items: list[str] = []
    for word in (text or "").split():
        item = word.lstrip(_LEADING).rstrip(_TRAILING)
        match = EVIDENCE_RE.match(item)
        # A path names a file (``12:30`` is a time, not a location).
        if match and _FILE_LIKE.search(match["path"]) and item not in items:
            items.append(item)
    return items[:MAX_EVIDENCE]


def parent_evidence(result: MainRunResult) -> list[str]:
    """The parent's cited locations: its contract's ``evidence`` (``AnswerResult``), then the
    ``path:line`` items of its answer text, distinct, at most ``MAX_EVIDENCE``."""
    given = (result.contract or {}).get("evidence") or []
    items = [str(item) for item in given if isinstance(item, str)] + answer_evidence(result.answer)
    return list(dict.fromkeys(items))[:MAX_EVIDENCE]


def answer_payload(result: MainRunResult) -> dict[str, Any] | None:
    """The parent's answer as an ExploreResult-like dict (None without an answer)."""
    if not (result.answer or "").strip():
        return None
    answer = str(result.answer).strip()
    return {
        "status": "completed" if result.status == "completed" else "partial",
        "summary": answer[:4000],
        "findings": [],
        "evidence": parent_evidence(result),
        "unresolved_questions": [],
    }


def _study_events(result: MainRunResult) -> Iterator[Event]:
    """The parent's and its Task children's events as the scorer should read them: what a child
    said is no harness wording (a forced delegation's envelope is the child's words; a child's task
    is the parent's), only what the harness wrote around it is."""
    paths = [result.trace_path, *(c.trace_path for c in result.children if c.via == "task")]
    for path in paths:
        if not Path(path).is_file():
            continue
        for event in read_trace(path):
            if isinstance(event, PromptAdded) and event.purpose == "forced_delegation":
                continue
            if isinstance(event, RunStarted) and event.request_task and path != result.trace_path:
                event = event.model_copy(update={"task": event.task.replace(event.request_task, "")})
            yield event


def score_parent(task: BenchTask, result: MainRunResult, root: Path) -> Score:
    """The parent's answer scored like an explore answer: seen evidence required, where a child's
    tools showing a location counts as the parent's own."""
    context = context_from_events(_study_events(result), require_seen=True)
    return score_run(task, answer_payload(result), root, context=context)


def ledger_totals(ledgers: Iterable[RunLedger]) -> Usage:
    """All the ledgers' tokens together."""
    return sum((ledger.usage for ledger in ledgers), Usage())
