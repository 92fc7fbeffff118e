"""Metrics are pure functions over trace events; tables are pandas frames built from traces."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel, Field

from subagent_lab.core.trace import (
    ActionForced,
    Event,
    ModelCalled,
    ModelCallFailed,
    RunEnded,
    RunStarted,
    ToolFinished,
    ToolStarted,
    read_trace,
)
from subagent_lab.core.types import Usage


class ChildMetrics(BaseModel):
    """What a trace says about one run (the article's three figures, plus the rest)."""

    run_id: str | None = None
    terminal_reason: str = "unknown"
    """``unknown`` only for a trace whose run never ended (the process died)."""
    status: str = "unknown"
    tool_usage: dict[str, dict[str, int]] = Field(default_factory=dict)
    """Per tool: executed / failed / denied counts."""
    token_usage: Usage = Field(default_factory=Usage)
    steps: int = 0
    model_calls: int = 0
    failed_model_calls: int = 0
    model_attempts: int = 0
    repairs_used: int = 0
    grace_used: bool = False
    elapsed_s: float = 0.0
    model_time_s: float = 0.0
    grounded_ratio: float | None = None
    seen_ratio: float | None = None
    action_calls: int = 0
    """Act-phase model calls (a thought and one action each): the run's model steps."""
    forced_actions: int = 0
    """Actions the harness took without a model call (``action_forced``: a finish the grammar
    would have forced); counted in ``steps``, never in ``action_calls``."""
    actions_cut: int = 0
    """Action calls that ended with ``finish_reason: length`` (cut at their output cap)."""
    action_tokens: list[int] = Field(default_factory=list)
    """Completion tokens of each action call."""
    prompt_count_pairs: list[tuple[int, int]] = Field(default_factory=list)
    """(pre-call count, provider-reported prompt tokens) per call that was not a cache replay."""

    @property
    def tool_calls(self) -> dict[str, int]:
        """Totals over all tools by outcome."""
        total: Counter[str] = Counter()
        for counts in self.tool_usage.values():
            total.update(counts)
        return dict(total)


def child_metrics(events: Sequence[Event]) -> ChildMetrics:
    """Fold a run's events into its metrics. Pure: the same events give the same figures."""
    metrics = ChildMetrics()
    usage = Usage()
    tools: dict[str, Counter[str]] = {}
    outcome_key = {"ok": "executed", "error": "failed", "denied": "denied"}
    for event in events:
        if isinstance(event, RunStarted):
            metrics.run_id = event.run_id
        elif isinstance(event, ModelCalled):
            usage += event.usage
            metrics.model_calls += 1
            metrics.model_attempts += event.attempts
            metrics.model_time_s += event.latency_s
            metrics.steps = max(metrics.steps, event.step + (1 if event.purpose == "step" else 0))
            metrics.repairs_used += event.purpose == "repair"
            metrics.grace_used = metrics.grace_used or event.purpose == "grace"
            if event.purpose == "step":
                metrics.action_calls += 1
                metrics.actions_cut += event.finish_reason == "length"
                metrics.action_tokens.append(event.usage.completion_tokens)
            if not event.cache_hit and event.attempts == 1:
                metrics.prompt_count_pairs.append((event.prompt_tokens_est, event.usage.prompt_tokens))
        elif isinstance(event, ModelCallFailed):
            usage += event.usage
            metrics.failed_model_calls += 1
            metrics.model_attempts += event.attempts
            metrics.model_time_s += event.latency_s
        elif isinstance(event, ActionForced):
            metrics.forced_actions += 1
        elif isinstance(event, ToolFinished):
            outcome = "repeated" if event.from_record else outcome_key[event.status]
            tools.setdefault(event.tool, Counter())[outcome] += 1
        elif isinstance(event, RunEnded):
            metrics.terminal_reason = event.terminal_reason
            metrics.status = event.status
            metrics.elapsed_s = event.elapsed_s
            metrics.grounded_ratio = event.grounded_ratio
            metrics.seen_ratio = event.seen_ratio
            metrics.grace_used = metrics.grace_used or event.grace_used
    metrics.token_usage = usage
    metrics.tool_usage = {name: dict(c) for name, c in tools.items()}
    return metrics


def _run_row(events: Sequence[Event], path: Path) -> dict[str, Any]:
    m = child_metrics(events)
    start = next((e for e in events if isinstance(e, RunStarted)), None)
    end = next((e for e in events if isinstance(e, RunEnded)), None)
    row: dict[str, Any] = {
        "run_id": m.run_id,
        "profile": start.profile if start else None,
        "parent_run_id": start.parent_run_id if start else None,
        "model_choice": start.model_choice if start else None,
        "model_used": start.model_used if start else None,
        "model_id": start.model_id if start else None,
        "fallback": start.fallback if start else None,
        "terminal_reason": m.terminal_reason,
        "status": m.status,
        "steps": m.steps,
        "model_calls": m.model_calls,
        "failed_model_calls": m.failed_model_calls,
        "prompt_tokens": m.token_usage.prompt_tokens,
        "completion_tokens": m.token_usage.completion_tokens,
        "cached_tokens": m.token_usage.cached_tokens,
        "total_tokens": m.token_usage.total_tokens,
        "repairs_used": m.repairs_used,
        "grace_used": m.grace_used,
        "contract_valid": end is not None and end.contract is not None,
        "grounded_ratio": m.grounded_ratio,
        "elapsed_s": m.elapsed_s,
        "model_time_s": m.model_time_s,
        "harness_time_s": max(m.elapsed_s - m.model_time_s, 0.0),
        "trace_path": str(path),
    }
    for outcome, count in m.tool_calls.items():
        row[f"tool_calls_{outcome}"] = count
    for tool, counts in m.tool_usage.items():
        for outcome, count in counts.items():
            row[f"{tool}_{outcome}"] = count
    return row


def runs_table(paths: Iterable[str | Path]) -> pd.DataFrame:
    """One row per trace file."""
    return pd.DataFrame([_run_row(read_trace(p), Path(p)) for p in paths])


def model_calls_table(events: Sequence[Event]) -> pd.DataFrame:
    """One row per model call (successful or failed)."""
    rows = []
    for e in events:
        if isinstance(e, ModelCalled):
            rows.append(
                {
                    "run_id": e.run_id,
                    "step": e.step,
                    "purpose": e.purpose,
                    "ok": True,
                    "prompt_tokens_est": e.prompt_tokens_est,
                    "max_tokens": e.max_tokens,
                    "prompt_tokens": e.usage.prompt_tokens,
                    "completion_tokens": e.usage.completion_tokens,
                    "latency_s": e.latency_s,
                    "finish_reason": e.finish_reason,
                    "attempts": e.attempts,
                    "n_tool_calls": len(e.tool_calls),
                    "parse_ok": e.parse_ok,
                }
            )
        elif isinstance(e, ModelCallFailed):
            rows.append(
                {
                    "run_id": e.run_id,
                    "step": e.step,
                    "purpose": e.purpose,
                    "ok": False,
                    "latency_s": e.latency_s,
                    "attempts": e.attempts,
                    "error": e.error,
                }
            )
    return pd.DataFrame(rows)


def tool_calls_table(events: Sequence[Event]) -> pd.DataFrame:
    """One row per tool call, joining its start (arguments) and finish (outcome) by call id."""
    args = {e.call_id: e.arguments for e in events if isinstance(e, ToolStarted)}
    return pd.DataFrame(
        [
            {
                "run_id": e.run_id,
                "step": e.step,
                "call_id": e.call_id,
                "tool": e.tool,
                "status": e.status,
                "arguments": args.get(e.call_id, {}),
                "chars": len(e.text),
                "truncated": e.truncated,
                "duration_s": e.duration_s,
            }
            for e in events
            if isinstance(e, ToolFinished)
        ]
    )
