"""Tool dispatch for the loop: the gate, argument checks, the repeat record, per-tool counts, trace events.

A call identical to one whose result is still in the conversation is answered from the record
instead of being run again (a policy may answer it otherwise: ``Policy.on_repeat``); after
compaction shortened that result, it runs again and is no repeat. A turn's calls run concurrently
when there are several (each child of a parent's parallel Task calls, for instance); results come
back in call order, and the policies then observe the turn.
"""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from subagent_lab.core.context import is_compacted
from subagent_lab.core.loop_state import Record, Run
from subagent_lab.core.policy import CallResult
from subagent_lab.core.trace import ToolFinished, ToolStarted
from subagent_lab.core.types import Message, ToolCall, ToolOutcome

REPEAT_NOTE = "[Already shown at step {step}: this exact call's result is above and has not changed.]"
"""The record's answer to a repeat when no policy words it (``Policy.repeat_note``)."""


def run_tools(run: Run, calls: list[ToolCall]) -> tuple[list[Message], bool]:
    """Run a turn's calls; returns (tool messages in call order, whether any observation is new)."""
    state, spec = run.state, run.spec
    first = len(state.messages)
    if len(calls) > 1 and spec.limits.max_parallel_tools > 1:
        with ThreadPoolExecutor(max_workers=min(spec.limits.max_parallel_tools, len(calls))) as pool:
            outcomes = list(pool.map(lambda ic: run_tool(run, ic[0], ic[1]), enumerate(calls)))
    else:
        outcomes = [run_tool(run, i, c) for i, c in enumerate(calls)]
    results = [CallResult(c, o, repeated) for c, (o, repeated) in zip(calls, outcomes, strict=True)]
    new = False
    for i, result in enumerate(results):
        if result.repeated:
            continue
        if (
            result.outcome.status == "ok"
        ):  # a refused or failed call runs (and is refused) again, never "shown"
            state.records[result.call.signature()] = Record(step=state.steps, index=first + i)
        digest = hash(result.outcome.text)
        new = new or digest not in state.observations
        state.observations.add(digest)
        state.seen.extend(result.outcome.spans)
    for policy in run.policies:
        policy.observe(run, results)
    messages = [
        Message(role="tool", content=r.outcome.text, tool_call_id=r.call.id, name=r.call.name)
        for r in results
    ]
    return messages, new


def _repeat_of(run: Run, call: ToolCall) -> Record | None:
    messages = run.state.messages
    record = run.state.records.get(call.signature())
    if record is None or record.index >= len(messages) or is_compacted(messages[record.index]):
        return None  # never made, or its result was shortened: running it again is no repeat
    return record


def _outcome(run: Run, index: int, call: ToolCall) -> tuple[ToolOutcome, bool]:
    """What answers ``call``, and whether that was the record of an earlier identical call."""
    deps, spec = run.deps, run.spec
    decision = deps.gate.check(call.name, deps.tools.get(call.name))
    record = _repeat_of(run, call)
    if record is not None and decision.allowed and index < spec.limits.max_tool_calls_per_step:
        resumed = next((o for p in run.policies if (o := p.on_repeat(run, call, record.step))), None)
        if resumed is not None:
            return resumed, False
    if index >= spec.limits.max_tool_calls_per_step:
        return ToolOutcome(
            status="denied", text=f"Denied: at most {spec.limits.max_tool_calls_per_step} tool calls per turn"
        ), False
    if not decision.allowed:
        return ToolOutcome(status="denied", text=f"Denied: {decision.reason}"), False
    if record is not None:
        note = next((n for p in run.policies if (n := p.repeat_note(run, record.step))), None)
        return ToolOutcome(status="ok", text=note or REPEAT_NOTE.format(step=record.step)), True
    if call.raw_arguments is not None:
        text = f"Error: arguments must be a JSON object, got {call.raw_arguments[:200]!r}"
        return ToolOutcome(status="error", text=text), False
    refusal = next((e for p in run.policies if (e := p.check_call(run, call)) is not None), None)
    if refusal is not None:
        return ToolOutcome(status="error", text=refusal), False
    return deps.tools[call.name].invoke(deps.tool_context, call.arguments), False


def run_tool(run: Run, index: int, call: ToolCall) -> tuple[ToolOutcome, bool]:
    """One call: (its outcome, whether it was answered from the record)."""
    run.trace.emit(ToolStarted, call_id=call.id, tool=call.name, arguments=call.arguments)
    started = time.monotonic()
    outcome, from_record = _outcome(run, index, call)
    with run.state.lock:  # a turn's calls may run on several threads
        counts = run.state.tool_usage.setdefault(call.name, Counter())
        counts[
            "repeated"
            if from_record
            else {"ok": "executed", "error": "failed", "denied": "denied"}[outcome.status]
        ] += 1
    run.trace.emit(
        ToolFinished,
        call_id=call.id,
        tool=call.name,
        status=outcome.status,
        text=outcome.text,
        truncated=outcome.truncated,
        duration_s=time.monotonic() - started,
        from_record=from_record,
        spans=[list(s) for s in outcome.spans],
    )
    return outcome, from_record
