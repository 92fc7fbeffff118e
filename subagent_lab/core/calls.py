"""One model call behind its budget decision: count the prompt, compact it into the context budget,
admit it against the total budget, call, charge what the provider reports.

Exact counts come from the model's own tokenizer where it has one (``count_prompt``), else from a
conservative estimate; every decision and call is a trace event.
"""

from __future__ import annotations

import time
from typing import Any, Literal

from subagent_lab.core.budget import count_call
from subagent_lab.core.context import compact
from subagent_lab.core.contracts import contract_schema
from subagent_lab.core.dispatch import FINISH_SCHEMA
from subagent_lab.core.loop_state import LoopDeps, LoopSpec, RunState
from subagent_lab.core.model import ModelCallError
from subagent_lab.core.provenance import bounded_answer, citable, constrain_evidence, evidence_choices
from subagent_lab.core.tokens import TokenCount, prompt_counter
from subagent_lab.core.trace import BudgetDecision, Compacted, ModelCalled, ModelCallFailed
from subagent_lab.core.types import (
    Cancelled,
    LimitReached,
    Message,
    ModelFailed,
    ModelRequest,
    ModelResponse,
    Usage,
)

Purpose = Literal["step", "final", "repair", "grace", "check"]
COMPACT_TARGET = 0.7
"""Compaction shrinks the prompt to this share of the context budget, so it does not run every step."""


def _count(deps: LoopDeps, request: ModelRequest) -> TokenCount:
    return (deps.counter or prompt_counter(deps.model))(request)


def call_model(
    spec: LoopSpec,
    deps: LoopDeps,
    state: RunState,
    purpose: Purpose,
    *,
    phase: Literal["act", "final"] = "act",
    allowed_tools: list[str] | None = None,
    arg_choices: dict[str, dict[str, list[str]]] | None = None,
    schema: dict[str, Any] | None = None,
    max_tokens: int | None = None,
    greedy: bool = False,
) -> ModelResponse:
    """One model call behind its budget decision. ``schema`` replaces the final answer's schema
    and ``max_tokens`` the phase's output cap (a short question of the harness's own); ``greedy``
    samples at temperature 0 whatever the run's temperature (a yes/no question of the harness's)."""
    if deps.cancel is not None and deps.cancel.is_set():
        raise Cancelled("cancelled by the caller")
    time_left = spec.timeout_s - (time.monotonic() - state.started)
    if time_left <= 0:
        raise LimitReached("timeout", f"wall-clock limit of {spec.timeout_s:.0f}s reached")
    final_schema = schema if schema is not None else answer_schema(spec, state)
    request = ModelRequest(
        messages=state.messages,
        tools=[*(t.schema() for t in deps.tools.values()), FINISH_SCHEMA],
        final_schema=final_schema,
        phase=phase,
        allowed_tools=allowed_tools,
        arg_choices=arg_choices or {},
        thought_max_chars=spec.thought_max_chars,
        arg_max_chars=spec.arg_max_chars,
        temperature=0.0 if greedy else spec.temperature,
        seed=spec.seed,
        timeout_s=time_left,
    )
    count = fit_context(spec, deps, state, request)
    request = request.model_copy(update={"messages": list(state.messages)})
    wanted = max_tokens or (spec.action_max_tokens if phase == "act" else spec.max_output_tokens)
    cap = state.budget.output_cap(count.tokens, wanted)
    decision = BudgetDecision(
        run_id=deps.trace.run_id,
        step=state.steps,
        purpose=purpose,
        prompt_tokens_est=count.tokens,
        prompt_exact=count.exact,
        max_tokens=max(cap, 0),
        used_total=state.usage.total_tokens,
        total_budget=spec.total_token_budget,
        context_budget=spec.context_token_budget,
        allowed=True,
    )
    try:
        request.max_tokens = state.budget.admit(count.tokens, wanted)
        # Reserved: one prompt and the output cap; each retry after a lost attempt costs a prompt more.
        spare = state.budget.remaining - count.tokens - request.max_tokens
        request.max_spent_attempts = max(spare // max(count.tokens, 1), 0)
    except LimitReached:
        deps.trace.emit(decision.model_copy(update={"allowed": False}))
        raise
    deps.trace.emit(decision)
    try:
        response = deps.model.complete(request)
    except ModelCallError as exc:
        lost = _lost_attempts(count, exc.spent_attempts)
        state.budget.charge(lost)
        state.model_time_s += exc.latency_s
        deps.trace.emit(
            ModelCallFailed(
                run_id=deps.trace.run_id,
                step=state.steps,
                purpose=purpose,
                error=str(exc),
                attempts=exc.attempts,
                latency_s=exc.latency_s,
                retryable=exc.retryable,
                usage=lost,
            )
        )
        if time.monotonic() - state.started >= spec.timeout_s:
            raise LimitReached("timeout", f"wall-clock limit of {spec.timeout_s:.0f}s reached") from None
        raise ModelFailed(str(exc)) from None
    # The provider's report, or the harness's own count where the report is missing, zero or
    # below an exact count (``Budget.charge``).
    reported = response.usage + _lost_attempts(count, response.spent_attempts)
    usage = state.budget.charge(reported, count_call(count.tokens, count.exact, response))
    state.usage_by_call.append(usage)
    state.model_time_s += response.latency_s
    state.grace_used = state.grace_used or purpose == "grace"
    deps.trace.emit(
        ModelCalled(
            run_id=deps.trace.run_id,
            step=state.steps,
            purpose=purpose,
            prompt_tokens_est=count.tokens,
            prompt_exact=count.exact,
            max_tokens=request.max_tokens,
            usage=usage,
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


def answer_schema(spec: LoopSpec, state: RunState) -> dict[str, Any] | None:
    """The final answer's schema: the contract's, its evidence limited to what the tools showed
    (only the citable lines with ``cite_anchors``; none after an absence check said "no")."""
    if not spec.contract:
        return None
    schema = contract_schema(spec.contract)
    if spec.evidence_from_seen:
        if state.absent:
            choices: list[str] = []
        elif spec.cite_anchors:
            choices = state.cite_choices if state.cite_choices is not None else citable(state.seen_groups)
        else:
            choices = evidence_choices(state.seen)
        minimum = 0 if state.absent else spec.min_evidence
        schema = constrain_evidence(schema, choices, minimum, spec.max_evidence)
    return bounded_answer(schema, spec.max_output_tokens)


def _lost_attempts(count: TokenCount, attempts: int) -> Usage:
    """Attempts that evaluated the prompt but whose reply was lost: their prompt, as an estimate.

    HTTP errors and refused connections are not charged (the server answered before computing,
    or was not there); timeouts and unusable 200 replies are.
    """
    if attempts <= 0:
        return Usage()
    return Usage(prompt_tokens=count.tokens * attempts, estimated=True)


def fit_context(spec: LoopSpec, deps: LoopDeps, state: RunState, request: ModelRequest) -> TokenCount:
    """Count the prompt; over the context budget, compact ``state.messages`` and count again."""
    count = _count(deps, request)
    state.counts_exact = state.counts_exact and count.exact
    if count.tokens <= spec.context_token_budget:
        return count
    target = int(spec.context_token_budget * COMPACT_TARGET)

    def fits(messages: list[Message]) -> bool:
        return _count(deps, request.model_copy(update={"messages": messages})).tokens <= target

    state.messages, edits = compact(state.messages, fits)
    after = _count(deps, request.model_copy(update={"messages": state.messages}))
    deps.trace.emit(
        Compacted(
            run_id=deps.trace.run_id,
            step=state.steps,
            before_tokens=count.tokens,
            after_tokens=after.tokens,
            messages_compacted=edits,
        )
    )
    # Shortened results are no longer in view: calling those tools again is no repeat.
    return after
