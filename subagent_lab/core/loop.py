"""The one ReAct loop, shared by parent and child.

``run_loop`` is the only place a ``Stop`` is caught; everything below it raises. A turn is one
short *action* (a brief thought and a tool call, or ``finish``); the final answer is a call of its
own, whose evidence the grammar may limit to lines the tools showed. Every model call is preceded
by a budget decision on the counted prompt (exact where the model has a tokenizer): the prompt is
fitted into the context budget by compaction, and a call whose prompt plus output cap could
overshoot the total budget is never started.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import replace
from typing import Any, NoReturn

from subagent_lab.core.budget import Budget
from subagent_lab.core.calls import Purpose, call_model
from subagent_lab.core.contracts import ground_evidence, grounded_ratio, parse_contract
from subagent_lab.core.dispatch import FINISH, executed_calls, run_tools, seen_locations, seen_paths
from subagent_lab.core.loop_state import LoopDeps, LoopOutcome, LoopSpec, RunState
from subagent_lab.core.provenance import (
    citable,
    line_texts,
    listed_location,
    rank_citable,
    seen_check,
)
from subagent_lab.core.trace import (
    ContractChecked,
    PromptAdded,
    RunEnded,
    ShiftedTrace,
)
from subagent_lab.core.types import (
    LIMIT_REASONS,
    Finished,
    LimitReached,
    Message,
    ModelResponse,
    OutputInvalid,
    RunStatus,
    Stop,
    TerminalReason,
    ToolCall,
)

FINAL_PROMPT = (
    "Now give your final answer as the JSON object described above, from what the tools showed you. "
    "In the summary and findings, name the functions, classes and files that answer the task."
)
CITABLE_LISTED = 8
"""Citable locations listed in the final prompt (small models cite what is in front of them)."""
FINAL_PROMPT_FREE = "Now give your final answer, from what the tools showed you."
GRACE_PROMPT = (
    "You have reached a limit ({why}). You cannot call tools any more. Give your final answer now, "
    "reporting everything you found so far; say in it whether you finished."
)
NUDGE_PROMPT = (
    "You have not looked at the workspace yet. Do not guess: call a tool first (search for a name "
    "from the task), then answer from what you saw."
)
RETRY_PROMPT = (
    "[Your last reply was not one complete action ({why}). Reply with one short action: a brief "
    "thought and one tool call, or finish.]"
)
CHECK_PROMPT = (
    'Before your final answer, one question. The task was: "{task}"\nLook at the code the tools '
    'showed you. Does it contain what the task looks for, or not? Reply {{"found": "yes"}} if it '
    'does, {{"found": "no"}} if the workspace has no such code.'
)
"""Restating the task matters: asked only "did the tools show what the task asks for?", the 1.5B
model answered "yes" on every task, absent ones included (docs/benchmarks.md)."""
CHECK_TASK_CHARS = 600
CHECK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"found": {"type": "string", "enum": ["yes", "no"]}},
    "required": ["found"],
    "additionalProperties": False,
}
ABSENT_PROMPT = (
    " You found that it does not exist in the workspace: cite no evidence, and say in the summary "
    "that there is no such code."
)
REPAIR_PROMPT = "Your final answer was rejected:\n{errors}\nReply again with one corrected answer only."


def run_loop(spec: LoopSpec, deps: LoopDeps, messages: list[Message]) -> LoopOutcome:
    """Run until a contract is accepted or a ``Stop`` ends the run; always returns a value."""
    if deps.step_offset:
        deps = replace(deps, trace=ShiftedTrace(deps.trace, deps.step_offset))
    state = RunState(
        messages=list(messages),
        budget=Budget(spec.total_token_budget, spec.context_token_budget),
        seen=list(deps.shown),
    )
    contract: dict[str, Any] | None = None
    try:
        while True:
            _step(spec, deps, state)
    except Finished as done:
        reason, detail, contract = done.reason, done.detail, done.payload
    except Stop as stop:
        reason, detail = stop.reason, stop.detail
        # A grace answer from a child that never looked at the workspace would be a guess.
        if reason in LIMIT_REASONS and spec.grace_turn and executed_calls(state) > 0:
            contract = _grace(spec, deps, state, stop)
    except Exception as exc:  # a harness bug: record it, never lose the run
        reason, detail = "crashed", "".join(traceback.format_exception(exc))[-4000:]
    outcome = _outcome(spec, state, reason, detail, contract)
    if deps.emit_run_ended:
        deps.trace.emit(RunEnded(run_id=deps.trace.run_id, step=state.steps, **outcome.ended_fields()))
    return outcome


def _step(spec: LoopSpec, deps: LoopDeps, state: RunState) -> None:
    if state.steps >= spec.max_steps:
        raise LimitReached("max_steps", f"reached max_steps={spec.max_steps}")
    response = _act(spec, deps, state)
    state.steps += 1
    if not response.parse_ok:
        return _stale(spec, state)
    finishing = not response.tool_calls or any(c.name == FINISH for c in response.tool_calls)
    if finishing and executed_calls(state) < spec.min_tool_calls:
        state.messages.append(Message(role="assistant", content=response.text))
        _add_prompt(deps, state, "nudge", NUDGE_PROMPT)
        return _stale(spec, state)
    if finishing:
        _finish(spec, deps, state, response)
    calls = response.tool_calls
    state.messages.append(Message(role="assistant", content=response.text, tool_calls=calls))
    results, new = run_tools(spec, deps, state, calls)
    state.messages.extend(results)
    if new:
        state.stale_turns = 0
    else:
        _stale(spec, state)


def _stale(spec: LoopSpec, state: RunState) -> None:
    state.stale_turns += 1
    if state.stale_turns >= spec.max_stale_turns:
        raise LimitReached(
            "loop_detected", f"{state.stale_turns} consecutive turns without a new observation"
        )


def _act(spec: LoopSpec, deps: LoopDeps, state: RunState) -> ModelResponse:
    """One action; a truncated or unparseable one gets one retry with a note, never becomes an answer."""
    allowed = [name for name in deps.tools if name != "Read" or not spec.constrain_paths or seen_paths(state)]
    if executed_calls(state) >= spec.min_tool_calls:
        allowed.append(FINISH)
    # A repeat is answered from the record; at temperature 0 the same prompt would repeat it
    # again, so the grammar offers something else next (where another action is left).
    fresh = [name for name in allowed if name not in state.repeated_tools]
    allowed = fresh or allowed
    reads = state.tool_usage["Read"]["executed"] if "Read" in state.tool_usage else 0
    if spec.finish_after_stale and state.stale_turns >= spec.finish_after_stale and FINISH in allowed:
        allowed = [FINISH]
    elif spec.finish_after_reads and reads >= spec.finish_after_reads and FINISH in allowed:
        allowed = [FINISH]  # the 0.5B model's next action after its Read was a repeat on 30 of 30 tasks
    elif spec.read_after_hits and state.last_hits:
        # A small model re-runs a search that already hit; the lines it needs are one Read away.
        allowed = [name for name in allowed if name in ("Read", FINISH)] or allowed
    choices: dict[str, dict[str, list[str]]] = {}
    if spec.constrain_paths:  # a path argument can only name what a tool has shown (or "." to search all)
        choices = {name: {"path": [".", *seen_paths(state, dirs=True)]} for name in ("Grep", "Glob")}
        choices["Read"] = {"path": seen_paths(state)}
    if spec.first_search and deps.search_words and "Grep" in deps.tools and not state.steps:
        # The 0.5B model opens with a Glob, the task's sentence or the package's name; a first
        # search for one of the task's names finds the code (tools/search_words.py).
        allowed = ["Grep"]
        choices["Grep"] = {**choices.get("Grep", {}), "pattern": list(deps.search_words)}
    if allowed == [FINISH]:  # nothing to decide: no call for an action the grammar would force
        return ModelResponse(tool_calls=[ToolCall(id=f"finish-{state.steps + 1}", name=FINISH)])
    for attempt in range(2):
        response = call_model(spec, deps, state, "step", allowed_tools=allowed, arg_choices=choices)
        cut = response.finish_reason == "length"
        if response.parse_ok and not cut:
            return response
        if attempt == 0:
            why = f"cut off at {spec.action_max_tokens} tokens" if cut else "not a valid action"
            _add_prompt(deps, state, "retry", RETRY_PROMPT.format(why=why))
    return ModelResponse(tool_calls=[], text="", parse_ok=False, finish_reason=response.finish_reason)


def _finish(spec: LoopSpec, deps: LoopDeps, state: RunState, response: ModelResponse) -> None:
    """End the working phase: accept a text answer given as the action, else ask for the answer."""
    candidate = response.text if not response.tool_calls else ""
    if candidate:
        errors = _check_final(spec, deps, state, candidate)
        if not errors:
            _accept(spec, state, candidate)
        if state.repairs >= spec.max_repairs:
            raise OutputInvalid("; ".join(errors)[:2000])
        state.messages.append(Message(role="assistant", content=candidate))
        _add_prompt(deps, state, "repair", REPAIR_PROMPT.format(errors="\n".join(f"- {e}" for e in errors)))
    else:
        state.messages.append(
            Message(role="assistant", content=response.text, tool_calls=response.tool_calls)
        )
        state.messages.extend(
            Message(role="tool", content="Finishing.", tool_call_id=c.id, name=c.name)
            for c in response.tool_calls
        )
        if spec.absence_check and spec.contract and executed_calls(state):  # a search found nothing: ask too
            _check_absence(spec, deps, state)
        _add_prompt(deps, state, "final", _final_prompt(spec, deps, state))
    _final_answer(spec, deps, state, "repair" if candidate else "final")


def _check_absence(spec: LoopSpec, deps: LoopDeps, state: RunState) -> None:
    """Ask, restating the task, whether the code the tools showed contains what it asks for; "no"
    makes the answer cite nothing.

    Small models cite what they saw whether or not it answers the task; asked this on its own, with
    a yes/no grammar, the 1.5B model can say the thing is absent, and the answer's grammar follows.
    """
    task = _task_text(state)[:CHECK_TASK_CHARS]
    _add_prompt(deps, state, "check", CHECK_PROMPT.format(task=task))
    # Greedy: sampled, the one-token verdict follows the request's seed, which a sweep repeat shares
    # across its tasks; at temperature 0.3 one seed made main answer "no" on all six smoke tasks.
    response = call_model(
        spec, deps, state, "check", phase="final", schema=CHECK_SCHEMA, max_tokens=12, greedy=True
    )
    state.messages.append(Message(role="assistant", content=response.text))
    state.absent = '"no"' in response.text.replace(" ", "")


def _final_prompt(spec: LoopSpec, deps: LoopDeps, state: RunState, lead: str | None = None) -> str:
    prompt = lead or (FINAL_PROMPT if spec.contract else FINAL_PROMPT_FREE)
    if state.absent:
        return prompt + ABSENT_PROMPT
    if spec.contract and spec.cite_anchors:
        return prompt + _citable_listing(spec, deps, state)
    locations = seen_locations(state)
    if spec.contract and locations:
        # Small models leave evidence empty unless the citable places are in front of them.
        prompt += " Locations the tools showed you (cite those that answer the task): " + ", ".join(locations)
    return prompt


def _task_text(state: RunState) -> str:
    """The run's first user message: the task as the child was given it."""
    return next((str(m.content) for m in state.messages if m.role == "user"), "").strip()


def _citable_listing(spec: LoopSpec, deps: LoopDeps, state: RunState) -> str:
    """The citable lines, those holding the task's words first, each with its text.

    Small models cite the first locations in front of them; a listing in the order seen put the
    asked line first and unrelated outline entries next, which halved precision.
    """
    items = citable(state.seen_groups)
    if not items:
        return ""
    texts = line_texts(items, deps.workspace_root)
    ranked = rank_citable(items, texts, _task_text(state), spec.cite_margin)[:CITABLE_LISTED]
    if spec.cite_margin is not None:
        state.cite_choices = ranked  # the answer may cite only what is listed
    lines = "\n".join(f"- {listed_location(item, texts)}" for item in ranked)
    return f" Locations the tools showed you, most relevant first (cite those that answer the task):\n{lines}"


def _final_answer(spec: LoopSpec, deps: LoopDeps, state: RunState, purpose: Purpose) -> None:
    """Final-answer calls until one passes the contract (raises Finished) or repairs run out."""
    while True:
        text = call_model(spec, deps, state, purpose, phase="final").text
        state.repairs += purpose == "repair"  # counted once the repair call happened
        errors = _check_final(spec, deps, state, text)
        if not errors:
            _accept(spec, state, text)
        if state.repairs >= spec.max_repairs:
            raise OutputInvalid("; ".join(errors)[:2000])
        state.messages.append(Message(role="assistant", content=text))
        _add_prompt(deps, state, "repair", REPAIR_PROMPT.format(errors="\n".join(f"- {e}" for e in errors)))
        purpose = "repair"


def _accept(spec: LoopSpec, state: RunState, text: str) -> NoReturn:
    """The answer stands: it ends the conversation (as the model wrote it) and the run."""
    payload = _payload(spec, text)
    state.messages.append(Message(role="assistant", content=text))
    raise Finished(payload)


def _payload(spec: LoopSpec, text: str) -> dict[str, Any]:
    if spec.contract is None:
        return {"answer": text.strip()}
    check = parse_contract(text, spec.contract)
    assert check.payload is not None
    return check.payload


def _check_final(spec: LoopSpec, deps: LoopDeps, state: RunState, text: str) -> list[str]:
    if spec.contract is None:
        return [] if text.strip() else ["the reply was empty"]
    check = parse_contract(text, spec.contract)
    errors, ratio, seen = list(check.errors), None, None
    ungrounded: list[str] = []
    unseen: list[str] = []
    if check.valid and check.payload is not None:
        items = list(check.payload.get("evidence") or [])
        checks = ground_evidence(items, deps.workspace_root)
        ratio = grounded_ratio(checks)
        ungrounded = [f"{c.item} ({c.reason})" for c in checks if not c.grounded]
        seen, unseen = seen_check(items, state.seen)
        state.grounded, state.seen_ratio = ratio, seen
        if ungrounded and spec.require_grounded:
            errors.append(f"evidence not found in the workspace: {ungrounded}; cite only lines you have seen")
        if unseen and spec.require_seen:
            errors.append(f"evidence no tool showed you: {unseen}; cite only lines a tool result showed")
    deps.trace.emit(
        ContractChecked(
            run_id=deps.trace.run_id,
            step=state.steps,
            valid=not errors,
            errors=errors,
            grounded_ratio=ratio,
            ungrounded=ungrounded,
            seen_ratio=seen,
            unseen=unseen,
        )
    )
    return errors


def _grace(spec: LoopSpec, deps: LoopDeps, state: RunState, stop: Stop) -> dict[str, Any] | None:
    """One final-answer call without tools to collect findings; None if it cannot fit or fails."""
    _add_prompt(
        deps,
        state,
        "grace",
        _final_prompt(spec, deps, state, GRACE_PROMPT.format(why=stop.detail or stop.reason)),
    )
    try:
        _final_answer(spec, deps, state, "grace")
    except Finished as done:
        return done.payload  # the model's own status is kept; the run keeps the guard's reason
    except Stop:
        return None
    return None


def _add_prompt(deps: LoopDeps, state: RunState, purpose: str, content: str) -> None:
    state.messages.append(Message(role="user", content=content))
    deps.trace.emit(PromptAdded(run_id=deps.trace.run_id, step=state.steps, purpose=purpose, content=content))


def _outcome(
    spec: LoopSpec, state: RunState, reason: TerminalReason, detail: str, contract: dict[str, Any] | None
) -> LoopOutcome:
    status: RunStatus
    if contract is None:
        status = "failed"
    elif reason == "completed" and contract.get("status", "completed") == "completed":
        status = "completed"
    else:
        status = "partial"
    return LoopOutcome(
        terminal_reason=reason,
        status=status,
        detail=detail,
        contract=contract,
        usage=state.usage,
        usage_by_call=state.usage_by_call,
        tool_usage={k: dict(v) for k, v in state.tool_usage.items()},
        steps=state.steps,
        model_calls=len(state.usage_by_call),
        repairs_used=state.repairs,
        grace_used=state.grace_used,
        elapsed_s=time.monotonic() - state.started,
        model_time_s=state.model_time_s,
        grounded_ratio=state.grounded if contract is not None else None,
        seen_ratio=state.seen_ratio if contract is not None else None,
        prompt_counts_exact=state.counts_exact,
        messages=state.messages,
    )
