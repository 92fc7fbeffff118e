"""The one ReAct loop, shared by parent and child.

``run_loop`` is the only place a ``Stop`` is caught; everything below it raises. Every model call
is preceded by a budget decision: the prompt is fitted into the context budget (compaction), and a
call whose estimated prompt plus its output cap could overshoot the total budget is never started.
"""

from __future__ import annotations

import time
import traceback
from typing import Any, Literal

from subagent_lab.context import compact, estimate_messages
from subagent_lab.contracts import contract_schema, ground_evidence, grounded_ratio, parse_contract
from subagent_lab.dispatch import executed_calls, run_tools
from subagent_lab.loop_state import LoopDeps, LoopOutcome, LoopSpec, RunState
from subagent_lab.models.base import ModelCallError
from subagent_lab.trace import (
    BudgetDecision,
    Compacted,
    ContractChecked,
    ModelCalled,
    ModelCallFailed,
    PromptAdded,
    RunEnded,
)
from subagent_lab.types import (
    LIMIT_REASONS,
    Cancelled,
    Finished,
    LimitReached,
    Message,
    ModelFailed,
    ModelRequest,
    ModelResponse,
    OutputInvalid,
    RunStatus,
    Stop,
    TerminalReason,
)

MIN_OUTPUT_TOKENS = 48
"""A call that could not produce at least this many tokens is not worth starting."""
GRACE_PROMPT = (
    "You have reached a limit ({why}). You cannot call tools any more. Reply now with your final "
    'JSON answer as specified, with status "partial", reporting everything you found so far.'
)
GRACE_PROMPT_FREE = (
    "You have reached a limit ({why}). You cannot call tools any more. Reply now with your final "
    "answer, reporting everything you found so far."
)
NUDGE_PROMPT = (
    "You have not looked at the workspace yet. Do not guess: call a tool first (for example Grep "
    "for a name from the task), then answer from what you saw."
)
REPAIR_PROMPT = "Your final answer was rejected:\n{errors}\nReply again with one corrected JSON object only."


def run_loop(spec: LoopSpec, deps: LoopDeps, messages: list[Message]) -> LoopOutcome:
    """Run until a contract is accepted or a ``Stop`` ends the run; always returns a value."""
    state = RunState(messages=list(messages))
    contract: dict[str, Any] | None = None
    try:
        while True:
            _step(spec, deps, state)
    except Finished as done:
        reason, detail, contract = done.reason, done.detail, done.payload
    except Stop as stop:
        reason, detail = stop.reason, stop.detail
        if reason in LIMIT_REASONS and spec.grace_turn:
            contract = _grace(spec, deps, state, stop)
    except Exception as exc:  # a harness bug: record it, never lose the run
        reason, detail = "crashed", "".join(traceback.format_exception(exc))[-4000:]
    outcome = _outcome(spec, state, reason, detail, contract)
    deps.trace.emit(RunEnded(run_id=deps.trace.run_id, step=state.steps, **_ended_fields(outcome)))
    return outcome


def _step(spec: LoopSpec, deps: LoopDeps, state: RunState) -> None:
    if state.steps >= spec.max_steps:
        raise LimitReached("max_steps", f"reached max_steps={spec.max_steps}")
    tools = [t.schema() for t in deps.tools.values()]
    allow_final = executed_calls(state) >= spec.min_tool_calls
    response = _call_model(spec, deps, state, "step", tools, allow_final=allow_final)
    state.steps += 1
    if not response.tool_calls and not allow_final:
        # A constrained server cannot get here; a native-tools model that answers blind can.
        state.messages.append(Message(role="assistant", content=response.text))
        _add_prompt(deps, state, "nudge", NUDGE_PROMPT)
        return
    if not response.tool_calls:
        _finalize(spec, deps, state, response.text)
    calls = response.tool_calls
    state.messages.append(Message(role="assistant", content=response.text, tool_calls=calls))
    state.messages.extend(run_tools(spec, deps, state, calls))
    repeated = [c.name for c in calls if state.signatures[c.signature()] >= spec.loop_repeat_limit]
    if repeated:
        raise LimitReached(
            "loop_detected", f"{repeated[0]} called {spec.loop_repeat_limit} times with the same arguments"
        )


def _call_model(
    spec: LoopSpec,
    deps: LoopDeps,
    state: RunState,
    purpose: Literal["step", "repair", "grace"],
    tools: list[dict[str, Any]],
    *,
    allow_final: bool = True,
) -> ModelResponse:
    if deps.cancel is not None and deps.cancel.is_set():
        raise Cancelled("cancelled by the caller")
    time_left = spec.timeout_s - (time.monotonic() - state.started)
    if time_left <= 0:
        raise LimitReached("timeout", f"wall-clock limit of {spec.timeout_s:.0f}s reached")
    est = state.meter.estimate(state.messages, tools)
    if est > spec.context_token_budget:
        state.messages, n = compact(
            state.messages, budget=spec.context_token_budget, meter=state.meter, tools=tools
        )
        after = state.meter.estimate(state.messages, tools)
        deps.trace.emit(
            Compacted(
                run_id=deps.trace.run_id,
                step=state.steps,
                before_tokens=est,
                after_tokens=after,
                messages_compacted=n,
            )
        )
        est = after
    remaining = spec.total_token_budget - state.usage.total_tokens
    max_tokens = min(spec.max_output_tokens, remaining - est)
    fits_context = est <= spec.context_token_budget
    allowed = fits_context and max_tokens >= MIN_OUTPUT_TOKENS
    deps.trace.emit(
        BudgetDecision(
            run_id=deps.trace.run_id,
            step=state.steps,
            purpose=purpose,
            prompt_tokens_est=est,
            max_tokens=max(max_tokens, 0),
            used_total=state.usage.total_tokens,
            total_budget=spec.total_token_budget,
            context_budget=spec.context_token_budget,
            allowed=allowed,
        )
    )
    if not fits_context:
        raise LimitReached(
            "context_budget", f"prompt needs ~{est} tokens > context budget {spec.context_token_budget}"
        )
    if not allowed:
        raise LimitReached("token_budget", f"{remaining} tokens left, next call needs ~{est} + output")
    request = ModelRequest(
        messages=state.messages,
        tools=tools,
        max_tokens=max_tokens,
        temperature=spec.temperature,
        seed=spec.seed,
        timeout_s=time_left,
        final_schema=contract_schema(spec.contract) if spec.contract else None,
        allow_final=allow_final,
    )
    try:
        response = deps.model.complete(request)
    except ModelCallError as exc:
        deps.trace.emit(
            ModelCallFailed(
                run_id=deps.trace.run_id,
                step=state.steps,
                purpose=purpose,
                error=str(exc),
                attempts=exc.attempts,
                latency_s=exc.latency_s,
                retryable=exc.retryable,
            )
        )
        state.model_time_s += exc.latency_s
        if time.monotonic() - state.started >= spec.timeout_s:
            raise LimitReached("timeout", f"wall-clock limit of {spec.timeout_s:.0f}s reached") from None
        raise ModelFailed(str(exc)) from None
    state.meter.observe(estimate_messages(state.messages, tools), response.usage.prompt_tokens)
    state.usage += response.usage
    state.usage_by_call.append(response.usage)
    state.model_time_s += response.latency_s
    deps.trace.emit(
        ModelCalled(
            run_id=deps.trace.run_id,
            step=state.steps,
            purpose=purpose,
            prompt_tokens_est=est,
            max_tokens=max_tokens,
            usage=response.usage,
            latency_s=response.latency_s,
            finish_reason=response.finish_reason,
            attempts=response.attempts,
            model_id=response.model_id,
            text=response.text,
            parse_ok=response.parse_ok,
            cache_hit=response.cache_hit,
            tool_calls=[c.model_dump() for c in response.tool_calls],
        )
    )
    return response


def _finalize(spec: LoopSpec, deps: LoopDeps, state: RunState, text: str) -> None:
    """Accept a final answer (raise Finished) or repair it; raises OutputInvalid when repairs run out."""
    while True:
        errors = _check_final(spec, deps, state, text)
        if not errors:
            raise Finished(_payload(spec, text))
        if state.repairs >= spec.max_repairs:
            raise OutputInvalid("; ".join(errors)[:2000])
        state.messages.append(Message(role="assistant", content=text))
        _add_prompt(deps, state, "repair", REPAIR_PROMPT.format(errors="\n".join(f"- {e}" for e in errors)))
        text = _call_model(spec, deps, state, "repair", []).text
        state.repairs += 1  # counted once the repair turn happened (a refused call is no repair)


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
    errors, ungrounded, ratio = list(check.errors), [], None
    if check.valid and check.payload is not None:
        checks = ground_evidence(list(check.payload.get("evidence") or []), deps.workspace_root)
        ratio = grounded_ratio(checks)
        ungrounded = [f"{c.item} ({c.reason})" for c in checks if not c.grounded]
        state.grounded = ratio
        if ungrounded and spec.require_grounded:
            errors.append(f"evidence not found in the workspace: {ungrounded}; cite only lines you have seen")
    deps.trace.emit(
        ContractChecked(
            run_id=deps.trace.run_id,
            step=state.steps,
            valid=not errors,
            errors=errors,
            grounded_ratio=ratio,
            ungrounded=ungrounded,
        )
    )
    return errors


def _grace(spec: LoopSpec, deps: LoopDeps, state: RunState, stop: Stop) -> dict[str, Any] | None:
    """One turn without tools to collect partial findings; None if it cannot fit or fails."""
    state.grace_used = True
    prompt = GRACE_PROMPT if spec.contract else GRACE_PROMPT_FREE
    _add_prompt(deps, state, "grace", prompt.format(why=stop.detail or stop.reason))
    try:
        _finalize(spec, deps, state, _call_model(spec, deps, state, "grace", []).text)
    except Finished as done:
        payload = done.payload
        if "status" in payload:
            payload["status"] = "partial"
        return payload
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
    )


def _ended_fields(outcome: LoopOutcome) -> dict[str, Any]:
    return outcome.model_dump(
        include={
            "terminal_reason",
            "status",
            "detail",
            "contract",
            "usage",
            "steps",
            "model_calls",
            "repairs_used",
            "grace_used",
            "elapsed_s",
            "model_time_s",
            "grounded_ratio",
        }
    )
