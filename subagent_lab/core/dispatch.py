"""Tool dispatch for the loop: the gate, argument checks, the repeat record, per-tool counts, trace events.

A call identical to one whose result is still in the conversation is answered from the record
("already shown at step k") instead of being run again; after compaction shortened that result, it
runs again and is no repeat. With ``read_on``, a repeated Read instead shows the window after the
last one it showed of that file: a small model that asks for the same lines again wants to see
more of them. A turn's calls run concurrently when there are several (each child of
a parent's parallel Task calls, for instance); results come back in call order.
"""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

from subagent_lab.core.context import is_compacted
from subagent_lab.core.loop_state import LoopDeps, LoopSpec, Record, RunState
from subagent_lab.core.tool import READ_LEAD
from subagent_lab.core.trace import ToolFinished, ToolStarted
from subagent_lab.core.types import Message, ToolCall, ToolOutcome

FINISH = "finish"
"""The action that ends the working phase: the final answer follows in a call of its own."""
FINISH_SCHEMA = {
    "type": "function",
    "function": {
        "name": FINISH,
        "description": "Stop searching and write the final answer.",
        "parameters": {"type": "object", "properties": {}},
    },
}
REPEAT_NOTE = (
    "[Already shown at step {step}: this exact call's result is above and has not changed. "
    "Do something different: Read a file that a search showed, search for another name, or finish.]"
)


READ_ON_NOTE = "[Read on: {path} lines {start}-{end} were shown at step {step}; the lines after them follow.]"


def executed_calls(state: RunState) -> int:
    return sum(counts["executed"] for counts in state.tool_usage.values())


def seen_paths(state: RunState, *, dirs: bool = False) -> list[str]:
    """Files (and with ``dirs``, directories) some observation has shown, in the order first shown."""
    paths = dict.fromkeys(s.path for s in state.seen if dirs or not s.path.endswith("/"))
    return list(paths)


def seen_locations(state: RunState, limit: int = 12) -> list[str]:
    """The first locations the run's tools showed, as ``path:line`` / ``path:start-end``."""
    items = [
        f"{s.path}:{s.start}" if s.start == s.end else f"{s.path}:{s.start}-{s.end}"
        for s in state.seen
        if s.start
    ]
    return list(dict.fromkeys(items))[:limit]


def run_tools(
    spec: LoopSpec, deps: LoopDeps, state: RunState, calls: list[ToolCall]
) -> tuple[list[Message], bool]:
    """Run a turn's calls; returns (tool messages in call order, whether any observation is new)."""
    first = len(state.messages)
    if len(calls) > 1 and spec.max_parallel_tools > 1:
        with ThreadPoolExecutor(max_workers=min(spec.max_parallel_tools, len(calls))) as pool:
            outcomes = list(pool.map(lambda ic: run_tool(spec, deps, state, ic[0], ic[1]), enumerate(calls)))
    else:
        outcomes = [run_tool(spec, deps, state, i, c) for i, c in enumerate(calls)]
    new = False
    state.repeated_tools = {c.name for c, (_, repeated) in zip(calls, outcomes, strict=True) if repeated}
    state.last_hits = any(
        c.name == "Grep" and not repeated and any(s.start for s in o.spans)
        for c, (o, repeated) in zip(calls, outcomes, strict=True)
    )
    for i, (call, (outcome, repeated)) in enumerate(zip(calls, outcomes, strict=True)):
        if repeated:
            continue
        if outcome.status == "ok":  # a refused or failed call runs (and is refused) again, never "shown"
            state.records[call.signature()] = Record(step=state.steps, index=first + i)
        digest = hash(outcome.text)
        new = new or digest not in state.observations
        state.observations.add(digest)
        state.seen.extend(outcome.spans)
        state.seen_groups.append(list(outcome.spans))
    messages = [
        Message(role="tool", content=o.text, tool_call_id=c.id, name=c.name)
        for c, (o, _) in zip(calls, outcomes, strict=True)
    ]
    return messages, new


def _repeat_of(state: RunState, call: ToolCall) -> Record | None:
    record = state.records.get(call.signature())
    if record is None or record.index >= len(state.messages) or is_compacted(state.messages[record.index]):
        return None  # never made, or its result was shortened: running it again is no repeat
    return record


def _window_end(outcome: ToolOutcome) -> tuple[str, int] | None:
    """(file, last line) of a Read window: the first span a Read marks is its window."""
    return (outcome.spans[0].path, outcome.spans[0].end) if outcome.spans else None


def _read_on(
    spec: LoopSpec, deps: LoopDeps, state: RunState, call: ToolCall, record: Record
) -> ToolOutcome | None:
    """The next window of a repeated Read's file (None: no read-on left, or the file has ended)."""
    window = state.read_windows.get(call.signature())
    tool = deps.tools.get(call.name)
    if tool is None or "line" not in tool.args_model.model_fields:
        return None  # the full Read (offset, limit) pages by itself
    with state.lock:
        if window is None or state.read_ons >= spec.read_on:
            return None
        state.read_ons += 1
    path, end = window
    outcome = tool.invoke(deps.tool_context, {"path": path, "line": end + READ_LEAD + 1})
    after = _window_end(outcome) if outcome.status == "ok" else None
    if after is None or after[1] <= end:
        return None  # the last window already reached the end of the file
    state.read_windows[call.signature()] = after
    start = min((s.start for s in state.seen if s.path == path and s.end == end), default=1)
    note = READ_ON_NOTE.format(path=path, start=start, end=end, step=record.step)
    text = f"{note}\n{outcome.text}"
    return ToolOutcome(status="ok", text=text, spans=outcome.spans, truncated=outcome.truncated)


def _choice_error(spec: LoopSpec, state: RunState, call: ToolCall) -> str | None:
    """Enforce ``constrain_paths`` where no grammar did (native tool calls, other servers)."""
    if not spec.constrain_paths or "path" not in call.arguments:
        return None
    path = str(call.arguments.get("path", "")).removeprefix("./")
    shown = seen_paths(state, dirs=call.name != "Read")
    if path in shown or (call.name != "Read" and path in (".", "")):
        return None
    listed = ", ".join(shown[-8:]) or "none yet: search with Grep or Glob first"
    return f"Error: Read only files a search has shown. Files shown so far: {listed}"


def run_tool(
    spec: LoopSpec, deps: LoopDeps, state: RunState, index: int, call: ToolCall
) -> tuple[ToolOutcome, bool]:
    """One call: (its outcome, whether it was answered from the record)."""
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
    record = _repeat_of(state, call)
    choice_error = _choice_error(spec, state, call)
    resumed = None
    runnable = decision.allowed and index < spec.max_tool_calls_per_step
    if record is not None and call.name == "Read" and runnable:
        resumed = _read_on(spec, deps, state, call, record)
        record = None if resumed is not None else record
    if resumed is not None:
        outcome = resumed
    elif index >= spec.max_tool_calls_per_step:
        outcome = ToolOutcome(
            status="denied", text=f"Denied: at most {spec.max_tool_calls_per_step} tool calls per turn"
        )
    elif not decision.allowed:
        outcome = ToolOutcome(status="denied", text=f"Denied: {decision.reason}")
    elif record is not None:
        outcome = ToolOutcome(status="ok", text=REPEAT_NOTE.format(step=record.step))
    elif call.raw_arguments is not None:
        outcome = ToolOutcome(
            status="error", text=f"Error: arguments must be a JSON object, got {call.raw_arguments[:200]!r}"
        )
    elif choice_error is not None:
        outcome = ToolOutcome(status="error", text=choice_error)
    else:
        outcome = deps.tools[call.name].invoke(deps.tool_context, call.arguments)
        if call.name == "Read" and outcome.status == "ok" and (window := _window_end(outcome)):
            state.read_windows[call.signature()] = window
    kind = "repeated" if record is not None and outcome.status == "ok" else None
    with state.lock:  # a turn's calls may run on several threads
        counts = state.tool_usage.setdefault(call.name, Counter())
        counts[kind or {"ok": "executed", "error": "failed", "denied": "denied"}[outcome.status]] += 1
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
            from_record=kind is not None,
            spans=[list(s) for s in outcome.spans],
        )
    )
    return outcome, kind is not None
