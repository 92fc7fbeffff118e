"""Tool dispatch for the loop: the gate, argument checks, repeat warnings, per-tool counts, trace events.

A turn's calls run concurrently when there are several (each child of a parent's parallel Task
calls, for instance); results come back in call order.
"""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from subagent_lab.loop_state import LoopDeps, LoopSpec, RunState
from subagent_lab.trace import ToolFinished, ToolStarted
from subagent_lab.types import Message, ToolCall, ToolOutcome

REPEAT_NOTE = (
    "[Note: you already made this exact call and its result is unchanged. Do something different "
    "(Read the file around a match, or give your final answer); the run ends at {limit} identical calls.]"
)


def executed_calls(state: RunState) -> int:
    return sum(counts["executed"] for counts in state.tool_usage.values())


def run_tools(spec: LoopSpec, deps: LoopDeps, state: RunState, calls: list[ToolCall]) -> list[Message]:
    """Run a turn's calls (concurrently when several), returning tool messages in call order."""
    for call in calls:
        state.signatures[call.signature()] += 1
    if len(calls) > 1 and spec.max_parallel_tools > 1:
        with ThreadPoolExecutor(max_workers=min(spec.max_parallel_tools, len(calls))) as pool:
            outcomes = list(pool.map(lambda ic: run_tool(spec, deps, state, ic[0], ic[1]), enumerate(calls)))
    else:
        outcomes = [run_tool(spec, deps, state, i, c) for i, c in enumerate(calls)]
    return [
        Message(role="tool", content=o.text, tool_call_id=c.id, name=c.name)
        for c, o in zip(calls, outcomes, strict=True)
    ]


def run_tool(spec: LoopSpec, deps: LoopDeps, state: RunState, index: int, call: ToolCall) -> ToolOutcome:
    deps.trace.emit(
        ToolStarted(
            run_id=deps.trace.run_id,
            step=state.steps,
            call_id=call.id,
            tool=call.name,
            arguments=call.arguments,
        )
    )
    started = time.monotonic()
    decision = deps.gate.check(call.name, deps.tools.get(call.name))
    if index >= spec.max_tool_calls_per_step:
        outcome = ToolOutcome(
            status="denied", text=f"Denied: at most {spec.max_tool_calls_per_step} tool calls per turn"
        )
    elif not decision.allowed:
        outcome = ToolOutcome(status="denied", text=f"Denied: {decision.reason}")
    elif state.signatures[call.signature()] >= spec.loop_repeat_limit:
        outcome = ToolOutcome(
            status="denied", text="Denied: identical call repeated; try something different"
        )
    elif call.raw_arguments is not None:
        outcome = ToolOutcome(
            status="error", text=f"Error: arguments must be a JSON object, got {call.raw_arguments[:200]!r}"
        )
    else:
        outcome = deps.tools[call.name].invoke(deps.tool_context, call.arguments)
        if state.signatures[call.signature()] > 1:
            # Small models repeat themselves; say so before the loop guard has to end the run.
            note = REPEAT_NOTE.format(limit=spec.loop_repeat_limit)
            outcome = outcome.model_copy(update={"text": f"{note}\n{outcome.text}"})
    with state.lock:  # a turn's calls may run on several threads
        counts = state.tool_usage.setdefault(call.name, Counter())
        counts[{"ok": "executed", "error": "failed", "denied": "denied"}[outcome.status]] += 1
    deps.trace.emit(
        ToolFinished(
            run_id=deps.trace.run_id,
            step=state.steps,
            call_id=call.id,
            tool=call.name,
            status=outcome.status,
            text=outcome.text,
            truncated=outcome.truncated,
            duration_s=time.monotonic() - started,
        )
    )
    return outcome
