"""One model call behind its budget decision: count the prompt, compact it into the context budget,
admit it against the total budget, call, charge what the provider reports.

Exact counts come from the model's own tokenizer where it has one (``count_prompt``), else from a
conservative estimate; every decision and call is a trace event.
"""

from __future__ import annotations

import time
from typing import Any, Literal, NoReturn

from subagent_lab.core.budget import count_call, whole
from subagent_lab.core.context import compact
from subagent_lab.core.contracts import contract_schema
from subagent_lab.core.evidence import bounded_answer
from subagent_lab.core.judge import TOP_LOGPROBS, p_yes
from subagent_lab.core.loop_state import Run
from subagent_lab.core.model import ModelCallError, same_model
from subagent_lab.core.policy import FINISH_SCHEMA, ActionMenu
from subagent_lab.core.tokens import TokenCount, prompt_counter
from subagent_lab.core.trace import BudgetDecision, CandidateJudged, Compacted, ModelCalled, ModelCallFailed
from subagent_lab.core.types import (
    Cancelled,
    LimitReached,
    Message,
    ModelFailed,
    ModelMismatch,
    ModelRequest,
    ModelResponse,
    Usage,
    request_digest,
)

Purpose = Literal["step", "final", "repair", "grace", "check", "score"]
COMPACT_TARGET = 0.7
"""Compaction shrinks the prompt to this share of the context budget, so it does not run every step."""


def call_model(
    run: Run,
    purpose: Purpose,
    *,
    phase: Literal["act", "final"] = "act",
    menu: ActionMenu | None = None,
    narrowed_by: list[str] | None = None,
    schema: dict[str, Any] | None = None,
    max_tokens: int | None = None,
    greedy: bool = False,
) -> ModelResponse:
    """One model call behind its budget decision. ``menu`` is an action call's offered choices;
    ``schema`` replaces the final answer's schema and ``max_tokens`` the phase's output cap (a short
    question of the harness's own); ``greedy`` samples at temperature 0 whatever the run's
    temperature (a yes/no question of the harness's)."""
    request, count = fit_context(run, _request(run, phase, menu, schema, greedy))
    wanted = max_tokens or (
        run.spec.caps.action_max_tokens if phase == "act" else run.spec.limits.max_output_tokens
    )
    _admit(run, request, count, wanted, purpose)
    try:
        response = run.deps.model.complete(request)
    except ModelCallError as exc:
        _charge_failure(run, count, exc, purpose)
    _charge(run, count, response, purpose)
    run.trace.emit(
        ModelCalled,
        purpose=purpose,
        prompt_tokens_est=count.tokens,
        prompt_exact=count.exact,
        max_tokens=request.max_tokens,
        usage=run.state.usage_by_call[-1],
        latency_s=response.latency_s,
        finish_reason=response.finish_reason,
        attempts=response.attempts,
        model_id=response.model_id,
        text=response.text,
        raw_text=response.raw_text,
        adapted=response.adapted,
        parse_ok=response.parse_ok,
        cache_hit=response.cache_hit,
        tool_calls=[c.model_dump() for c in response.tool_calls],
        allowed_tools=request.allowed_tools,
        arg_choices=request.arg_choices,
        narrowed_by=narrowed_by or [],
        request_key=request_digest(request),
    )
    _check_served(run, response)
    return response


def _check_served(run: Run, response: ModelResponse) -> None:
    """Record the model the endpoint reported serving; one other than the one asked for ends the
    run (``model_mismatch``) unless the run allows a fallback. A call already made is charged."""
    served, asked = response.model_id, response.requested_model
    if not served or not asked:
        return
    if served not in run.state.served:
        run.state.served.append(served)
    if served != asked and not same_model(asked, served) and not run.deps.allow_model_fallback:
        raise ModelMismatch(
            f"asked the endpoint for model {asked!r}, it reported serving {served!r} "
            "(allow_model_fallback lets a run go on)"
        )


def _request(
    run: Run,
    phase: Literal["act", "final"],
    menu: ActionMenu | None,
    schema: dict[str, Any] | None,
    greedy: bool,
) -> ModelRequest:
    """The request as the run's state and this turn's menu make it (before the budget decision)."""
    if run.deps.cancel is not None and run.deps.cancel.is_set():
        raise Cancelled("cancelled by the caller")
    spec = run.spec
    time_left = spec.limits.timeout_s - (time.monotonic() - run.state.started)
    if time_left <= 0:
        raise LimitReached("timeout", f"wall-clock limit of {spec.limits.timeout_s:.0f}s reached")
    return ModelRequest(
        messages=run.state.messages,
        tools=[*(t.schema() for t in run.deps.tools.values()), FINISH_SCHEMA],
        final_schema=schema if schema is not None else answer_schema(run),
        phase=phase,
        allowed_tools=menu.allowed if menu is not None else None,
        arg_choices=(menu.choices if menu is not None else None) or {},
        thought_max_chars=spec.caps.thought_max_chars,
        arg_max_chars=spec.caps.arg_max_chars,
        text_tools=[name for name, tool in run.deps.tools.items() if tool.kind == "read"],
        temperature=0.0 if greedy else spec.sampling.temperature,
        seed=spec.sampling.seed,
        timeout_s=time_left,
    )


def _admit(run: Run, request: ModelRequest, count: TokenCount, wanted: int, purpose: Purpose) -> None:
    """Set the request's output cap and retry allowance, or refuse the call (LimitReached)."""
    budget, spec = run.state.budget, run.spec
    cap = budget.output_cap(count.tokens, wanted)
    # An action keeps the price of one final answer, so a cost cap still leaves the grace turn.
    reserve = spec.limits.max_output_tokens if purpose == "step" else 0
    cost = budget.cost
    decision = dict(
        purpose=purpose,
        prompt_tokens_est=count.tokens,
        prompt_exact=count.exact,
        max_tokens=max(cap, 0),
        used_total=run.state.usage.total_tokens,
        total_budget=spec.limits.total_token_budget,
        context_budget=spec.limits.context_token_budget,
        cost_spent_usd=cost.spent_usd if cost is not None else None,
        cost_budget_usd=cost.limit_usd if cost is not None else None,
    )
    try:
        request.max_tokens = budget.admit(count.tokens, wanted, reserve)
        # Reserved: one prompt and the output cap; each retry after a lost attempt costs a prompt more.
        spare = budget.remaining - count.tokens - request.max_tokens
        attempts = spare // max(count.tokens, 1)
        if cost is not None and cost.prices.input_per_mtok > 0:
            price = cost.prices
            spare_usd = cost.left_usd - price.cost(count.tokens, request.max_tokens + reserve)
            attempts = min(attempts, whole(spare_usd / max(price.cost(count.tokens), 1e-12)))
        request.max_spent_attempts = max(attempts, 0)
    except LimitReached as refused:
        run.trace.emit(BudgetDecision, **decision, allowed=False, detail=refused.detail)
        raise
    run.trace.emit(BudgetDecision, **decision, allowed=True)


def _charge_failure(run: Run, count: TokenCount, exc: ModelCallError, purpose: Purpose) -> NoReturn:
    """Charge a failed call's lost attempts, record it, and end the run (timeout or model error)."""
    lost = _lost_attempts(count, exc.spent_attempts)
    run.state.budget.charge(lost)
    run.state.model_time_s += exc.latency_s
    run.trace.emit(
        ModelCallFailed,
        purpose=purpose,
        error=str(exc),
        attempts=exc.attempts,
        latency_s=exc.latency_s,
        retryable=exc.retryable,
        usage=lost,
    )
    if time.monotonic() - run.state.started >= run.spec.limits.timeout_s:
        raise LimitReached(
            "timeout", f"wall-clock limit of {run.spec.limits.timeout_s:.0f}s reached"
        ) from None
    raise ModelFailed(str(exc)) from None


def _charge(run: Run, count: TokenCount, response: ModelResponse, purpose: Purpose) -> None:
    """Charge what the call used, plus its lost attempts: the provider's report, or the harness's
    own count where the report is missing, zero or below an exact count (``Budget.charge``)."""
    state = run.state
    lost = response.spent_attempts
    reported = response.usage + _lost_attempts(count, lost) if lost > 0 else response.usage
    usage = state.budget.charge(reported, count_call(count.tokens, count.exact, response))
    state.usage_by_call.append(usage)
    state.model_time_s += response.latency_s
    state.grace_used = state.grace_used or purpose == "grace"


def answer_schema(run: Run) -> dict[str, Any] | None:
    """The final answer's schema: the contract's, as the policies shape it (evidence limited to
    what the tools showed, for instance), bounded to fit the output cap."""
    if not run.spec.contract:
        return None
    schema = contract_schema(run.spec.contract)
    for policy in run.policies:
        schema = policy.answer_schema(run, schema)
    return bounded_answer(schema, run.spec.limits.max_output_tokens)


def _lost_attempts(count: TokenCount, attempts: int) -> Usage:
    """Attempts that evaluated the prompt but whose reply was lost: their prompt, as an estimate.

    HTTP errors and refused connections are not charged (the server answered before computing,
    or was not there); timeouts and unusable 200 replies are.
    """
    if attempts <= 0:
        return Usage()
    return Usage(prompt_tokens=count.tokens * attempts, estimated=True)


def fit_context(run: Run, request: ModelRequest) -> tuple[ModelRequest, TokenCount]:
    """The request to send and its prompt count: ``request`` itself when it fits the context
    budget; over it, ``run.state.messages`` compacted and the request on them, counted again. The
    request counted last is the one sent, so a model that builds its wire form to count (the
    OpenAI adapter) sends that same build."""
    state, budget = run.state, run.spec.limits.context_token_budget
    count_prompt = run.deps.counter or prompt_counter(run.deps.model)
    count = count_prompt(request)
    state.counts_exact = state.counts_exact and count.exact
    if count.tokens <= budget:
        return request, count
    target = int(budget * COMPACT_TARGET)

    def fits(messages: list[Message]) -> bool:
        return count_prompt(request.model_copy(update={"messages": messages})).tokens <= target

    state.messages, edits = compact(state.messages, fits)
    request = request.model_copy(update={"messages": list(state.messages)})
    after = count_prompt(request)
    run.trace.emit(Compacted, before_tokens=count.tokens, after_tokens=after.tokens, messages_compacted=edits)
    # Shortened results are no longer in view: calling those tools again is no repeat.
    return request, after


def call_judge(run: Run, messages: list[Message], item: str, rank: int) -> float:
    """One candidate judged: a one-token yes/no call on ``messages`` of its own (not the
    conversation, which it leaves as it was), greedy, asking for the first token's log-probabilities;
    budgeted, charged and traced like any call (``ModelCalled`` with purpose ``score``), then one
    ``CandidateJudged`` event with its P(yes) (``judge.p_yes``). A refused or failed call ends the
    run as any call's would."""
    if run.deps.cancel is not None and run.deps.cancel.is_set():
        raise Cancelled("cancelled by the caller")
    time_left = run.spec.limits.timeout_s - (time.monotonic() - run.state.started)
    if time_left <= 0:
        raise LimitReached("timeout", f"wall-clock limit of {run.spec.limits.timeout_s:.0f}s reached")
    request = ModelRequest(
        messages=messages, phase="final", temperature=0.0, seed=run.spec.sampling.seed, timeout_s=time_left,
        top_logprobs=TOP_LOGPROBS,
    )  # fmt: skip
    count = (run.deps.counter or prompt_counter(run.deps.model))(request)
    _admit(run, request, count, 1, "score")
    try:
        response = run.deps.model.complete(request)
    except ModelCallError as exc:
        _charge_failure(run, count, exc, "score")
    _charge(run, count, response, "score")
    run.trace.emit(
        ModelCalled, purpose="score", prompt_tokens_est=count.tokens, prompt_exact=count.exact,
        max_tokens=request.max_tokens, usage=run.state.usage_by_call[-1], latency_s=response.latency_s,
        finish_reason=response.finish_reason, attempts=response.attempts, model_id=response.model_id,
        text=response.text, parse_ok=response.parse_ok, cache_hit=response.cache_hit,
        top_logprobs=response.top_logprobs, request_key=request_digest(request),
    )  # fmt: skip
    _check_served(run, response)
    p, source = p_yes(response.top_logprobs, response.text)
    run.trace.emit(CandidateJudged, item=item, rank=rank, p_yes=p, source=source, answer=response.text[:40])
    return p
