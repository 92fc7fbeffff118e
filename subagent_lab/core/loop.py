"""The one ReAct loop, shared by parent and child.

``_attempt`` is the only place a ``Stop`` is caught; everything below it raises. A turn is one
short *action* (a brief thought and a tool call, or ``finish``); the final answer is a call of its
own. Every model call is preceded by a budget decision on the counted prompt (exact where the model
has a tokenizer): the prompt is fitted into the context budget by compaction, and a call whose
prompt plus output cap could overshoot the total budget is never started.

The scaffold is the run's policies (``core.policy``), called at fixed points in tuple order: they
narrow each turn's action menu, check calls and answers, shape the final prompt and the answer's
schema. The loop tests no scaffold setting and names no tool.

An accepted answer may pass a review (``LoopDeps.review``, as inspect's ``attempts``): feedback
starts another attempt, with fresh state and policies, on the conversation so far and under what
the attempts and the reviews' own spend left of the run's limits. A parent's verification is one.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Sequence
from typing import Any, NoReturn, cast

from subagent_lab.core.budget import Budget, BudgetNode
from subagent_lab.core.calls import Purpose, answer_schema, call_judge, call_model
from subagent_lab.core.contracts import (
    action_in_answer,
    final_prompt,
    ground_evidence,
    grounded_ratio,
    parse_contract,
)
from subagent_lab.core.dispatch import run_tools
from subagent_lab.core.evidence import seen_check
from subagent_lab.core.loop_state import (
    GrammarCaps,
    LoopDeps,
    LoopOutcome,
    LoopSpec,
    Review,
    Reviewer,
    Run,
    RunLimits,
    RunState,
    Sampling,
)
from subagent_lab.core.policy import FINISH, HARNESS_CALL, ActionMenu, AnswerCheck, RunContext
from subagent_lab.core.prompts import GRACE_PROMPT, OFF_MENU_PROMPT, REPAIR_PROMPT, RETRY_PROMPT
from subagent_lab.core.schema_check import off_menu, schema_breaches
from subagent_lab.core.trace import ActionForced, ContractChecked, PromptAdded, RunEnded, RunTrace
from subagent_lab.core.types import (
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

__all__ = [
    "GrammarCaps", "LoopDeps", "LoopOutcome", "LoopSpec", "Review", "Reviewer", "RunLimits", "Sampling",
    "run_loop",
]  # fmt: skip


class _LoopRun(Run):
    """The run as the loop holds it: a ``Run`` whose ``ask`` is a budgeted model call."""

    def ask(self, purpose: str, schema: dict[str, Any], max_tokens: int) -> str:
        """A short greedy question of the harness's own; its reply joins the conversation."""
        asked = cast(Purpose, purpose)  # a harness question's purpose (``check``)
        response = call_model(self, asked, phase="final", schema=schema, max_tokens=max_tokens, greedy=True)
        self.state.messages.append(Message(role="assistant", content=response.text))
        return response.text

    def judge(self, messages: list[Message], item: str, rank: int) -> float:
        """One candidate judged apart from the conversation (``calls.call_judge``)."""
        return call_judge(self, messages, item, rank)

    def call_tools(self, calls: Sequence[ToolCall]) -> None:
        """Tool calls of the harness's own, one after another, each run as a turn's call; the
        conversation shows each as an action the harness wrote followed by its result (a prompt
        protocol renders one action per assistant message)."""
        for call in calls:
            if not call.id.startswith(HARNESS_CALL):
                call = call.model_copy(update={"id": HARNESS_CALL + call.id})
            self.state.messages.append(Message(role="assistant", content="", tool_calls=[call]))
            results, _ = run_tools(self, [call])
            self.state.messages.extend(results)


def run_loop(spec: LoopSpec, deps: LoopDeps, messages: list[Message]) -> LoopOutcome:
    """Run until a contract is accepted (and its review lets it stand) or a ``Stop`` ends the run;
    always returns a value. A review's feedback starts another attempt on the conversation so far,
    under what the attempts and the reviews left of the run's budget scope."""
    started = time.monotonic()
    budget = deps.budget or BudgetNode("run", tokens=spec.limits.total_token_budget)
    own_deadline = started + spec.limits.timeout_s
    budget.deadline = own_deadline if budget.deadline is None else min(budget.deadline, own_deadline)
    attempts: list[LoopOutcome] = []
    trace = RunTrace(deps.trace, lambda: sum(o.steps for o in attempts))
    current: LoopSpec | None = spec
    while current is not None:
        attempts.append(attempt := _attempt(current, deps, budget, messages, trace.step()))
        if deps.review is None or attempt.terminal_reason != "completed":
            break
        review = _review(deps.review, attempts, budget)
        if review.feedback is None:
            break
        current = spec.left_after(attempts, budget)
        if current is not None:
            messages = [*attempt.messages, Message(role="user", content=review.feedback)]
            trace.emit(PromptAdded, purpose=review.purpose, content=review.feedback)
    outcome = LoopOutcome.of_attempts(attempts, time.monotonic() - started)
    if deps.emit_run_ended:
        trace.emit(RunEnded, **outcome.ended_fields())
    return outcome


def _review(reviewer: Reviewer, attempts: list[LoopOutcome], budget: BudgetNode) -> Review:
    """The reviewer's word on the last attempt. A reviewer that raises (a harness bug: recorded,
    never raised) lets no further attempt start and ends the run ``crashed``, its answer kept."""
    try:
        return reviewer(attempts[-1], budget)
    except Exception as exc:
        detail = "the answer's review failed: " + "".join(traceback.format_exception(exc))[-4000:]
        update = {"terminal_reason": "crashed", "status": "partial", "detail": detail}
        attempts[-1] = attempts[-1].model_copy(update=update)
        return Review(feedback=None)


def _attempt(
    spec: LoopSpec, deps: LoopDeps, budget: BudgetNode, messages: list[Message], step_offset: int
) -> LoopOutcome:
    """One attempt: fresh state and policies under ``spec``, until an answer or a ``Stop``; its
    tokens are charged to the run's scope (``budget``) as they are spent."""
    limits = spec.limits
    state = RunState(
        messages=list(messages),
        budget=Budget(limits.total_token_budget, limits.context_token_budget, cost=deps.cost, node=budget),
        seen=list(deps.shown),
    )
    run = _LoopRun(spec, deps, state, step_offset)
    contract: dict[str, Any] | None = None
    try:
        context = RunContext(deps.task, deps.tool_context, deps.workspace_root, tuple(deps.tools))
        run.policies = tuple(p.for_run(context) for p in deps.policies)
        for policy in run.policies:
            policy.start(run)
        while True:
            _step(run)
    except Finished as done:
        reason, detail, contract = done.reason, done.detail, done.payload
    except Stop as stop:
        reason, detail = stop.reason, stop.detail
        if any(p.grace(run, stop) for p in run.policies):
            contract = _grace(run, stop)
    except Exception as exc:  # a harness bug: record it, never lose the run
        reason, detail = "crashed", "".join(traceback.format_exception(exc))[-4000:]
    return _outcome(run, reason, detail, contract)


def _step(run: Run) -> None:
    """One turn: an action, then its tools (or the final answer, which ends the run)."""
    state = run.state
    if state.steps >= run.spec.limits.max_steps:
        raise LimitReached("max_steps", f"reached max_steps={run.spec.limits.max_steps}")
    response = _act(run)
    state.steps += 1
    if not response.parse_ok:
        return _stale(run)
    finishing = not response.tool_calls or any(c.name == FINISH for c in response.tool_calls)
    refusal = next((n for p in run.policies if (n := p.check_finish(run))), None) if finishing else None
    if refusal is not None:
        state.messages.append(Message(role="assistant", content=response.text))
        run.add_prompt("nudge", refusal)
        return _stale(run)
    if finishing:
        _finish(run, response)
    calls = response.tool_calls
    state.messages.append(Message(role="assistant", content=response.text, tool_calls=calls))
    results, new = run_tools(run, calls)
    state.messages.extend(results)
    if new:
        state.stale_turns = 0
    else:
        _stale(run)


def _stale(run: Run) -> None:
    run.state.stale_turns += 1
    if run.state.stale_turns >= run.spec.limits.max_stale_turns:
        raise LimitReached(
            "loop_detected", f"{run.state.stale_turns} consecutive turns without a new observation"
        )


def _menu(run: Run) -> tuple[ActionMenu, list[str]]:
    """This turn's action menu: every tool and ``finish``, narrowed by each policy in turn; and
    the names of the policies that changed it."""
    menu = ActionMenu(allowed=[*run.deps.tools, FINISH])
    narrowed_by = []
    for policy in run.policies:
        before = (list(menu.allowed), repr(menu.choices))
        policy.narrow(run, menu)
        if (menu.allowed, repr(menu.choices)) != before:
            narrowed_by.append(policy.name)
    return menu, narrowed_by


def _act(run: Run) -> ModelResponse:
    """One action; a truncated or unparseable one gets one retry with a note, never becomes an answer."""
    menu, narrowed_by = _menu(run)
    if menu.allowed == [FINISH]:  # nothing to decide: no call for an action the grammar would force
        run.trace.emit(ActionForced, action=FINISH, narrowed_by=narrowed_by)
        return ModelResponse(tool_calls=[ToolCall(id=f"finish-{run.state.steps + 1}", name=FINISH)])
    for attempt in range(2):
        response = call_model(run, "step", menu=menu, narrowed_by=narrowed_by)
        cut = response.finish_reason == "length"
        # Without a grammar the menu is a check: an action off it is sent back once, then let be.
        off = off_menu(menu, response.tool_calls) if not run.deps.grammar and attempt == 0 else []
        if response.parse_ok and not cut and not off:
            return response
        if off:
            run.state.messages.append(
                Message(role="assistant", content=response.text, tool_calls=response.tool_calls)
            )
            run.state.messages.extend(
                Message(role="tool", content="Not run.", tool_call_id=c.id, name=c.name)
                for c in response.tool_calls
            )
            run.add_prompt("repair", OFF_MENU_PROMPT.format(why="; ".join(off)))
        elif attempt == 0:
            why = f"cut off at {run.spec.caps.action_max_tokens} tokens" if cut else "not a valid action"
            run.add_prompt("retry", RETRY_PROMPT.format(why=why))
    return ModelResponse(tool_calls=[], text="", parse_ok=False, finish_reason=response.finish_reason)


def _finish(run: Run, response: ModelResponse) -> NoReturn:
    """End the working phase: accept a text answer given as the action, else ask for the answer."""
    state = run.state
    candidate = response.text if not response.tool_calls else ""
    if candidate:
        _judge(run, candidate)
    else:
        state.messages.append(
            Message(role="assistant", content=response.text, tool_calls=response.tool_calls)
        )
        state.messages.extend(
            Message(role="tool", content="Finishing.", tool_call_id=c.id, name=c.name)
            for c in response.tool_calls
        )
        for policy in run.policies:
            policy.before_final(run)
        run.add_prompt("final", _final_prompt(run))
        written = next((w for p in run.policies if (w := p.write_answer(run)) is not None), None)
        if written is not None:  # the harness's own answer: accepted, or the model repairs it
            _judge(run, json.dumps(written, ensure_ascii=False))
            candidate = "harness"
    _final_answer(run, "repair" if candidate else "final")


def _final_prompt(run: Run, lead: str | None = None) -> str:
    """The prompt that asks for the final answer, as the policies shape it."""
    contract = run.spec.contract
    lead = lead or final_prompt(contract)
    prompt = lead
    for policy in run.policies:
        prompt = policy.final_prompt(run, lead, prompt)
    return prompt


def _final_answer(run: Run, purpose: Purpose) -> NoReturn:
    """Final-answer calls until one passes the contract (raises Finished) or repairs run out."""
    while True:
        text = call_model(run, purpose, phase="final").text
        run.state.repairs += purpose == "repair"  # counted once the repair call happened
        _judge(run, text)
        purpose = "repair"


def _judge(run: Run, text: str) -> None:
    """Accept ``text`` (raises Finished), give up (raises OutputInvalid) or ask for a repair."""
    errors = _check_final(run, text)
    if not errors:
        _accept(run, text)
    if run.state.repairs >= run.spec.limits.max_repairs:
        raise OutputInvalid("; ".join(errors)[:2000])
    run.state.messages.append(Message(role="assistant", content=text))
    run.add_prompt("repair", REPAIR_PROMPT.format(errors="\n".join(f"- {e}" for e in errors)))


def _accept(run: Run, text: str) -> NoReturn:
    """The answer stands: it ends the conversation (as the model wrote it) and the run."""
    if run.spec.contract is None:
        payload: dict[str, Any] = {"answer": text.strip()}
    else:
        check = parse_contract(text, run.spec.contract)
        assert check.payload is not None
        payload = check.payload
    run.state.messages.append(Message(role="assistant", content=text))
    raise Finished(payload)


def _check_final(run: Run, text: str) -> list[str]:
    """The contract's errors, then the policies' (on a valid answer); every check is a trace event."""
    if run.spec.contract is None:
        if not text.strip():
            return ["the reply was empty"]
        if (tool := action_in_answer(text, frozenset(run.deps.tools))) is not None:
            return [f"that is a call of {tool}, not an answer: no tool can run now; write the answer as text"]
        return []
    check = parse_contract(text, run.spec.contract)
    errors, ratio, seen = list(check.errors), None, None
    ungrounded: list[str] = []
    unseen: list[str] = []
    if check.valid and check.payload is not None:
        items = list(check.payload.get("evidence") or [])
        checks = ground_evidence(items, run.deps.workspace_root)
        ratio = grounded_ratio(checks)
        ungrounded = [f"{c.item} ({c.reason})" for c in checks if not c.grounded]
        seen, unseen = seen_check(items, run.state.seen)
        run.state.grounded, run.state.seen_ratio = ratio, seen
        measured = AnswerCheck(check.payload, ungrounded, unseen)
        errors += [e for policy in run.policies for e in policy.check_answer(run, measured)]
        if not run.deps.grammar:  # what the answer's grammar would have held, checked instead
            schema = answer_schema(run)
            errors += schema_breaches(check.payload, schema) if schema is not None else []
    run.trace.emit(
        ContractChecked,
        valid=not errors,
        errors=errors,
        grounded_ratio=ratio,
        ungrounded=ungrounded,
        seen_ratio=seen,
        unseen=unseen,
    )
    return errors


def _grace(run: Run, stop: Stop) -> dict[str, Any] | None:
    """One final-answer call without tools to collect findings; None if it cannot fit or fails."""
    run.add_prompt("grace", _final_prompt(run, GRACE_PROMPT.format(why=stop.detail or stop.reason)))
    try:
        _final_answer(run, "grace")
    except Finished as done:
        return done.payload  # the model's own status is kept; the run keeps the guard's reason
    except Stop:
        return None


def _outcome(run: Run, reason: TerminalReason, detail: str, contract: dict[str, Any] | None) -> LoopOutcome:
    state = run.state
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
        served_model_ids=state.served,
        messages=state.messages,
    )
