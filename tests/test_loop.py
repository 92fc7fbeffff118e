"""The loop end to end with a scripted model: every terminal reason, budgets, denials, grace."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from conftest import LauncherFactory
from pydantic import ValidationError

from subagent_lab.agents.launcher import SubagentRequest
from subagent_lab.analysis.metrics import child_metrics
from subagent_lab.config.profiles import LabConfig
from subagent_lab.core.budget import BudgetNode
from subagent_lab.core.loop import LoopDeps, LoopOutcome, LoopSpec, Review, Reviewer, RunLimits, run_loop
from subagent_lab.core.model import ModelCallError
from subagent_lab.core.permissions import PermissionGate
from subagent_lab.core.trace import (
    ActionForced,
    BudgetDecision,
    Compacted,
    Event,
    ModelCalled,
    RunEnded,
    RunStarted,
    TraceWriter,
    read_trace,
)
from subagent_lab.core.types import Message, ModelRequest, ModelResponse
from subagent_lab.models.scripted import ScriptedModel, Turn, final, tool_call, tool_calls
from subagent_lab.tools.registry import build_tools
from subagent_lab.workspace.sandbox import Workspace

GOOD = {
    "status": "completed",
    "summary": "login is defined in app/auth.py and checks the password hash.",
    "findings": ["login calls check_password"],
    "evidence": ["app/auth.py:4-5", "app/auth.py:8"],
    "unresolved_questions": [],
}


def _request(**overrides: object) -> SubagentRequest:
    return SubagentRequest(task="Where is login implemented?", overrides=dict(overrides))


def test_completed_run_records_contract_usage_and_tools(make_launcher: LauncherFactory) -> None:
    launcher, _ = make_launcher(
        [tool_call("Grep", pattern="def login"), tool_call("Read", path="app/auth.py"), final(GOOD)]
    )
    result = launcher.launch(_request())
    assert (result.status, result.terminal_reason) == ("completed", "completed")
    assert result.contract is not None and result.contract["evidence"] == GOOD["evidence"]
    assert result.grounded_ratio == 1.0
    assert result.tool_usage == {"Grep": {"executed": 1}, "Read": {"executed": 1}}
    assert result.steps == 3 and result.model_calls == 3
    assert result.usage.total_tokens == sum(u.total_tokens for u in result.usage_by_call) > 0
    events = read_trace(result.trace_path)
    metrics = child_metrics(events)
    assert metrics.terminal_reason == "completed"
    assert metrics.token_usage == result.usage
    assert metrics.tool_usage == result.tool_usage
    grep_result = next(e for e in events if e.kind == "tool_finished" and e.tool == "Grep")
    assert "app/auth.py:4" in grep_result.text  # the model saw real matches, not just a count


def test_max_steps_grace_turn_keeps_partial_findings(make_launcher: LauncherFactory) -> None:
    turns = [tool_call("Glob", _id=f"g{i}", pattern=f"**/*{i}.py") for i in range(3)]
    launcher, model = make_launcher([*turns, final({**GOOD, "status": "completed"})])
    result = launcher.launch(_request(max_steps=3))
    assert result.terminal_reason == "max_steps"
    assert result.status == "partial" and result.grace_used  # the run keeps the guard's reason
    assert result.contract is not None and result.contract["status"] == "completed"  # as the model gave it
    assert result.contract["findings"] == GOOD["findings"]
    grace_request = model.requests[-1]
    assert grace_request.phase == "final"  # the grace turn asks for the answer, offers no action
    assert "limit" in grace_request.messages[-1].content
    # the tool results of the last step were seen by the model in the grace turn
    assert grace_request.messages[-2].role == "tool"


def test_token_budget_never_starts_a_call_that_could_overshoot(make_launcher: LauncherFactory) -> None:
    turns = [tool_call("Read", _id=f"r{i}", path="app/auth.py", start=1 + i) for i in range(20)]
    launcher, model = make_launcher([*turns, final(GOOD)])
    budget = 3000
    result = launcher.launch(_request(total_token_budget=budget, context_token_budget=2500))
    assert result.terminal_reason == "token_budget"
    assert result.usage.total_tokens <= budget
    events = read_trace(result.trace_path)
    decisions = [e for e in events if isinstance(e, BudgetDecision)]
    assert decisions[-1].allowed is False
    for d in decisions:
        if d.allowed:  # every started call fit: estimate + its output cap within what was left
            assert d.used_total + d.prompt_tokens_est + d.max_tokens <= budget
    assert len(model.requests) == sum(d.allowed for d in decisions)


def test_context_budget_compacts_old_observations_then_stops(
    make_launcher: LauncherFactory, workspace: Path
) -> None:
    (workspace / "big.py").write_text(
        "".join(f"x_{i} = {i}  # filler line for the context test\n" for i in range(400))
    )
    turns = [tool_call("Read", _id=f"r{i}", path="big.py", start=1 + 100 * i, limit=100) for i in range(4)]
    launcher, model = make_launcher([*turns, final(GOOD), final(GOOD)])
    result = launcher.launch(_request(context_token_budget=4000, total_token_budget=60000))
    events = read_trace(result.trace_path)
    assert any(isinstance(e, Compacted) and e.messages_compacted > 0 for e in events)
    for request in model.requests:  # old observations were shortened, not dropped
        assert any(m.content.startswith("[shortened") for m in request.messages) or len(request.messages) < 8
        assert all(m.content for m in request.messages if m.role == "tool")
    calls = [e for e in events if isinstance(e, ModelCalled)]
    assert all(c.prompt_tokens_est <= 4000 for c in calls)
    assert result.terminal_reason == "completed"


def test_context_budget_terminal_when_the_task_alone_does_not_fit(make_launcher: LauncherFactory) -> None:
    launcher, model = make_launcher([final(GOOD)])
    result = launcher.launch(
        SubagentRequest(task="explain " * 4000, overrides={"context_token_budget": 1500})
    )
    assert result.terminal_reason == "context_budget"
    assert result.status == "failed" and model.requests == []


def test_timeout(make_launcher: LauncherFactory) -> None:
    def slow(request: ModelRequest) -> ModelResponse:
        time.sleep(0.4)
        return tool_call("Glob", pattern="*.py")

    launcher, _ = make_launcher([slow, slow, slow, slow])
    result = launcher.launch(_request(timeout_s=0.6))
    assert result.terminal_reason == "timeout"
    assert result.elapsed_s < 2.0


def test_invalid_output_after_repairs(make_launcher: LauncherFactory) -> None:
    launcher, model = make_launcher([final("```json\n{}\n```"), final({"status": "done"}), final("not json")])
    result = launcher.launch(_request(max_contract_repairs=2))
    assert result.terminal_reason == "invalid_output"
    assert result.repairs_used == 2 and result.status == "failed"
    repair_prompt = model.requests[1].messages[-1].content
    assert "markdown fences" in repair_prompt  # the exact validation error is fed back
    assert "summary" in model.requests[2].messages[-1].content


def test_ungrounded_evidence_triggers_repair_when_required(make_launcher: LauncherFactory) -> None:
    invented = {**GOOD, "evidence": ["app/auth.py:400", "app/missing.py:1"]}
    launcher, model = make_launcher([final(invented), final(GOOD)])
    result = launcher.launch(_request(require_grounded_evidence=True))
    assert result.terminal_reason == "completed" and result.repairs_used == 1
    assert "app/missing.py:1 (no such file)" in model.requests[1].messages[-1].content


def test_model_error_keeps_usage_spent_before(make_launcher: LauncherFactory) -> None:
    err = ModelCallError("HTTP 500 from http://x/v1: boom", retryable=True, attempts=3)
    launcher, _ = make_launcher([tool_call("Grep", pattern="login"), err])
    result = launcher.launch(_request())
    assert result.terminal_reason == "model_error" and "HTTP 500" in result.detail
    assert result.usage.total_tokens > 0 and result.tool_usage == {"Grep": {"executed": 1}}
    metrics = child_metrics(read_trace(result.trace_path))
    assert metrics.failed_model_calls == 1 and metrics.model_attempts == 4


def test_loop_detected(make_launcher: LauncherFactory) -> None:
    same = [tool_call("Grep", _id=f"s{i}", pattern="login") for i in range(5)]
    launcher, _ = make_launcher([*same, final(GOOD)])
    result = launcher.launch(_request(max_stale_turns=3))
    assert result.terminal_reason == "loop_detected"
    assert result.status == "partial"  # the grace turn still collected the findings
    # the repeats were answered from the record, never run again; three stale turns end the run
    assert result.tool_usage["Grep"] == {"executed": 1, "repeated": 3}
    results = [e for e in read_trace(result.trace_path) if e.kind == "tool_finished"]
    assert "Already shown at step 1" not in results[0].text and not results[0].from_record
    assert all("Already shown at step 1" in r.text and r.from_record for r in results[1:])


def test_a_new_observation_resets_the_stale_count(make_launcher: LauncherFactory) -> None:
    grep = tool_call("Grep", _id="g", pattern="login")
    other = tool_call("Grep", _id="o", pattern="check_password")
    launcher, _ = make_launcher([grep, grep, grep, other, grep, grep, final(GOOD)])
    result = launcher.launch(_request(max_stale_turns=3))
    assert (result.terminal_reason, result.steps) == ("completed", 7)  # never 3 stale turns in a row
    assert result.tool_usage["Grep"] == {"executed": 2, "repeated": 4}


def test_a_recall_after_compaction_is_no_repeat(make_launcher: LauncherFactory, workspace: Path) -> None:
    (workspace / "big.py").write_text("".join(f"y_{i} = {i}  # filler for compaction\n" for i in range(300)))
    first = tool_call("Read", _id="r0", path="big.py", start=1, limit=150)
    fillers = [tool_call("Read", _id=f"f{i}", path="big.py", start=150 + 50 * i, limit=50) for i in range(3)]
    launcher, _ = make_launcher([first, *fillers, first, final(GOOD)])
    result = launcher.launch(_request(context_token_budget=3000, total_token_budget=60000))
    events = read_trace(result.trace_path)
    assert any(isinstance(e, Compacted) for e in events)
    reads = [e for e in events if e.kind == "tool_finished"]
    assert not reads[-1].from_record  # its first result had been shortened: run again
    assert result.tool_usage["Read"] == {"executed": 5}


def test_cancelled(make_launcher: LauncherFactory) -> None:
    cancel = threading.Event()

    def cancel_then_call(request: ModelRequest) -> ModelResponse:
        cancel.set()
        return tool_call("Glob", pattern="*")

    launcher, _ = make_launcher([cancel_then_call, final(GOOD)])
    result = launcher.launch(_request(), cancel=cancel)
    assert result.terminal_reason == "cancelled" and result.steps == 1


def test_harness_crash_is_recorded_not_raised(make_launcher: LauncherFactory) -> None:
    def broken(request: ModelRequest) -> ModelResponse:
        raise RuntimeError("adapter bug")

    launcher, _ = make_launcher([broken])
    result = launcher.launch(_request())
    assert result.terminal_reason == "crashed" and "adapter bug" in result.detail
    assert read_trace(result.trace_path)[-1].kind == "run_ended"


def test_forbidden_tools_are_denied_and_counted_apart(
    make_launcher: LauncherFactory, workspace: Path
) -> None:
    before = {p: p.read_bytes() for p in workspace.rglob("*") if p.is_file()}
    calls = tool_calls(
        ("Edit", {"path": "app/auth.py", "old": "login", "new": "pwned"}),
        ("Bash", {"command": "rm -rf ."}),
        ("Task", {"description": "x", "prompt": "y"}),
        ("Read", {"path": "app/auth.py"}),
    )
    launcher, _ = make_launcher([calls, final(GOOD)])
    result = launcher.launch(_request())
    assert result.terminal_reason == "completed"
    assert result.tool_usage == {
        "Edit": {"denied": 1},
        "Bash": {"denied": 1},
        "Task": {"denied": 1},
        "Read": {"executed": 1},
    }
    assert {p: p.read_bytes() for p in workspace.rglob("*") if p.is_file()} == before


def test_light_falls_back_to_main_visibly(make_launcher: LauncherFactory, config) -> None:  # type: ignore[no-untyped-def]
    models = {**config.models, "light": None}
    launcher, _ = make_launcher([final(GOOD)], cfg=config.model_copy(update={"models": models}))
    result = launcher.launch(_request())
    assert (result.model_choice, result.model_used, result.fallback) == ("light", "main", True)
    start = read_trace(result.trace_path)[0]
    assert isinstance(start, RunStarted) and start.fallback and start.model_used == "main"


def test_trace_is_complete_and_ends_with_run_ended(make_launcher: LauncherFactory) -> None:
    launcher, _ = make_launcher([tool_call("Grep", pattern="login"), final(GOOD)])
    result = launcher.launch(_request())
    events = read_trace(result.trace_path)
    assert isinstance(events[0], RunStarted) and isinstance(events[-1], RunEnded)
    assert [e.seq for e in events] == list(range(len(events)))
    started = {e.call_id for e in events if e.kind == "tool_started"}
    finished = {e.call_id for e in events if e.kind == "tool_finished"}
    assert started == finished and started  # tool calls and results join by id


def test_blind_answer_is_nudged_until_a_tool_ran(make_launcher: LauncherFactory) -> None:
    launcher, model = make_launcher([final(GOOD), tool_call("Grep", pattern="def login"), final(GOOD)])
    result = launcher.launch(_request(min_tool_calls=1))
    assert result.terminal_reason == "completed" and result.steps == 3
    assert "finish" not in (model.requests[0].allowed_tools or [])  # decoding offers tools only
    assert "call a tool first" in model.requests[1].messages[-1].content
    assert "finish" in (model.requests[2].allowed_tools or [])


def test_after_a_repeat_the_grammar_offers_something_else(make_launcher: LauncherFactory) -> None:
    grep = tool_call("Grep", _id="g", pattern="login")
    launcher, model = make_launcher([grep, grep, tool_call("Read", path="app/auth.py"), final(GOOD)])
    result = launcher.launch(_request(read_after_hits=False))
    assert result.terminal_reason == "completed"
    assert "Grep" in (model.requests[1].allowed_tools or [])
    assert "Grep" not in (model.requests[2].allowed_tools or [])  # the repeated tool sits out a turn
    assert "Grep" in (model.requests[3].allowed_tools or [])


def test_after_a_search_hit_the_grammar_offers_read_or_finish(make_launcher: LauncherFactory) -> None:
    miss = tool_call("Grep", _id="m", pattern="no_such_name_anywhere")
    hit = tool_call("Grep", _id="h", pattern="def login")
    launcher, model = make_launcher([miss, hit, tool_call("Read", path="app/auth.py"), final(GOOD)])
    result = launcher.launch(_request(read_after_hits=True))
    assert result.terminal_reason == "completed"
    assert "Grep" in (model.requests[1].allowed_tools or [])  # after a miss: search again
    assert model.requests[2].allowed_tools == ["Read", "finish"]  # after a hit: read it (or finish)
    assert "Grep" in (model.requests[3].allowed_tools or [])


def test_constrained_paths_only_name_what_a_tool_showed(make_launcher: LauncherFactory) -> None:
    launcher, model = make_launcher(
        [tool_call("Read", _id="r0", path="app/auth.py"), tool_call("Grep", pattern="def login"),
         tool_call("Read", _id="r1", path="app/auth.py"), final(GOOD)]
    )  # fmt: skip
    result = launcher.launch(_request(constrain_paths=True))
    assert model.requests[0].arg_choices["Read"]["path"] == [] and "Read" not in (
        model.requests[0].allowed_tools or []
    )
    reads = [e for e in read_trace(result.trace_path) if e.kind == "tool_finished" and e.tool == "Read"]
    assert reads[0].status == "error" and "search" in reads[0].text  # a guessed path is refused
    assert reads[1].status == "ok"
    assert model.requests[2].arg_choices["Read"]["path"] == ["app/auth.py"]
    assert model.requests[2].arg_choices["Grep"]["path"] == [".", "app/auth.py"]


def test_final_prompt_lists_the_locations_the_tools_showed(make_launcher: LauncherFactory) -> None:
    launcher, model = make_launcher(
        [tool_call("Grep", pattern="def login"), tool_call("finish"), final(GOOD)]
    )
    result = launcher.launch(_request())
    assert result.terminal_reason == "completed"
    final_request = model.requests[-1]
    assert final_request.phase == "final"
    assert "app/auth.py:4" in final_request.messages[-1].content


def test_after_a_stale_turn_the_run_finishes_instead_of_looping(make_launcher: LauncherFactory) -> None:
    grep = tool_call("Grep", _id="g", pattern="login")
    launcher, model = make_launcher([grep, grep, final(GOOD)])
    result = launcher.launch(_request(finish_after_stale=1, max_stale_turns=3))
    assert (result.terminal_reason, result.status) == ("completed", "completed")
    assert [r.phase for r in model.requests] == ["act", "act", "final"]  # the forced finish costs no call
    assert result.steps == 3 and result.model_calls == 3


def test_model_overrides_tune_the_profile_for_the_model_that_runs(
    make_launcher: LauncherFactory, config: LabConfig
) -> None:
    explore = config.profiles["explore"].model_copy(
        update={"model_overrides": {"light": {"min_evidence": 1}}, "evidence_from_seen": True}
    )
    cfg = config.model_copy(update={"profiles": {**config.profiles, "explore": explore}})
    turns = [tool_call("Grep", pattern="def login"), tool_call("finish"), final(GOOD)]
    launcher, model = make_launcher(turns, cfg)
    launcher.launch(SubagentRequest(task="Where is login?", model="light"))
    evidence = model.requests[-1].final_schema["properties"]["evidence"]
    assert evidence["minItems"] == 1 and evidence["items"]["enum"] == ["app/auth.py:4"]
    assert list(model.requests[-1].final_schema["properties"])[:2] == ["status", "evidence"]
    assert model.requests[-1].final_schema["required"][:2] == ["status", "evidence"]
    launcher, model = make_launcher(turns, cfg)
    launcher.launch(SubagentRequest(task="Where is login?", model="main"))
    assert "minItems" not in model.requests[-1].final_schema["properties"]["evidence"]


def test_a_bad_model_override_names_its_field(config: LabConfig) -> None:
    with pytest.raises(ValidationError, match=r"model_overrides.light: max_steps"):
        config.profiles["explore"].model_validate(
            {**config.profiles["explore"].model_dump(), "model_overrides": {"light": {"max_steps": 0}}}
        )


def test_the_final_answer_grammar_fits_the_output_cap() -> None:
    from subagent_lab.core.contracts import contract_schema
    from subagent_lab.core.evidence import bounded_answer

    schema = bounded_answer(contract_schema("ExploreResult"), 768)
    props = schema["properties"]
    worst = props["summary"]["maxLength"] + sum(
        props[k]["maxItems"] * props[k]["items"].get("maxLength", 30)
        for k in ("findings", "evidence", "unresolved_questions")
    )
    assert worst / 3 <= 768 * 1.1  # at ~3 characters a token the longest answer still closes its JSON
    assert props["status"] == contract_schema("ExploreResult")["properties"]["status"]  # enums untouched


# --- the outcome carries the conversation; a review starts another attempt -----------------


def _direct(
    workspace: Path, tmp_path: Path, turns: list[Turn], *, review: Reviewer | None = None
) -> tuple[LoopOutcome, list[Event], ScriptedModel, list[Message]]:
    """``run_loop`` itself (no launcher): its outcome, its trace's events and the scripted model."""
    model = ScriptedModel(turns)
    tools = build_tools(["Grep", "Read"], "full")
    trace = TraceWriter(tmp_path / "direct.jsonl", "run-direct")
    limits = RunLimits(max_steps=5, context_token_budget=12000, total_token_budget=60000, timeout_s=30)
    spec = LoopSpec(limits=limits, contract=None)
    loop_deps = LoopDeps(
        model=model,
        tools=tools,
        gate=PermissionGate(mode="readonly_subagent", allowlist=frozenset(tools)),
        tool_context=Workspace(workspace),
        workspace_root=workspace,
        trace=trace,
        review=review,
    )
    start = [
        Message(role="system", content="Answer from the tools."),
        Message(role="user", content="Where is login?"),
    ]
    try:
        outcome = run_loop(spec, loop_deps, start)
    finally:
        trace.close()
    return outcome, read_trace(trace.path), model, start


def test_the_outcome_returns_the_conversation(workspace: Path, tmp_path: Path) -> None:
    turns = [tool_call("Grep", pattern="def login"), final("login is defined in app/auth.py:4.")]
    outcome, events, model, start = _direct(workspace, tmp_path, turns)
    assert outcome.terminal_reason == "completed"
    assert [m.role for m in outcome.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert outcome.messages[:2] == start
    assert outcome.messages[2].tool_calls[0].name == "Grep"
    assert "app/auth.py:4" in outcome.messages[3].content  # the tool result the model saw
    assert outcome.messages[-1].content == "login is defined in app/auth.py:4."  # the answer, as written
    assert model.requests[-1].messages == outcome.messages[:-1]  # the last prompt, then the answer
    assert "messages" not in outcome.model_dump()  # in memory only: results and traces never carry it
    assert sum(isinstance(e, RunEnded) for e in events) == 1


class _SendBackOnce:
    """A reviewer that sends the first answer back (its review spending ``spend`` tokens) and
    lets the second stand; it records what it was given."""

    def __init__(self, spend: int) -> None:
        self.spend, self.seen = spend, list[tuple[str, int, int]]()

    def __call__(self, attempt: LoopOutcome, budget: BudgetNode) -> Review:
        tokens_left = budget.free_tokens()
        assert tokens_left is not None
        self.seen.append(
            (str((attempt.contract or {}).get("answer")), tokens_left, attempt.usage.total_tokens)
        )
        review = budget.grant("review", tokens=self.spend, min_tokens=0)  # its child budget, then spent
        review.charge(tokens=min(self.spend, tokens_left))
        review.close()
        feedback = "Check app/auth.py again." if len(self.seen) == 1 else None
        return Review(feedback=feedback, purpose="verification")


def test_a_review_sends_the_answer_back_for_a_fresh_attempt_under_what_is_left(
    workspace: Path, tmp_path: Path
) -> None:
    grep = tool_call("Grep", pattern="def login")
    turns = [grep, final("in app/auth.py"), grep, final("login is defined in app/auth.py:4.")]
    reviewer = _SendBackOnce(spend=1000)
    outcome, events, model, _ = _direct(workspace, tmp_path, turns, review=reviewer)
    first_answer, left, first_tokens = reviewer.seen[0]
    assert first_answer == "in app/auth.py" and left == 60000 - first_tokens  # the run's total, less spent
    assert reviewer.seen[1][1] == 60000 - 1000 - outcome.usage.total_tokens  # less the review's spend too
    assert (outcome.terminal_reason, outcome.attempts, outcome.steps) == ("completed", 2, 4)
    assert outcome.contract == {"answer": "login is defined in app/auth.py:4."}
    assert outcome.usage.total_tokens == sum(u.total_tokens for u in outcome.usage_by_call)
    # The feedback continues the conversation after the answer as written.
    second = model.requests[2].messages
    assert second[-1] == Message(role="user", content="Check app/auth.py again.")
    assert second[-2] == Message(role="assistant", content="in app/auth.py")
    # A fresh attempt: the repeated Grep is run again, not answered from the first attempt's record.
    started = [e for e in events if e.kind == "tool_started"]
    assert len(started) == 2 and outcome.tool_usage["Grep"]["executed"] == 2
    # Its budget is what the first attempt and the review left; its steps continue the run's.
    budgets = [e for e in events if e.kind == "budget_decision"]
    assert budgets[0].total_budget == 60000
    assert budgets[-1].total_budget == 60000 - first_tokens - 1000
    added = [e for e in events if e.kind == "prompt_added" and e.purpose == "verification"]
    assert [(e.step, e.content) for e in added] == [(2, "Check app/auth.py again.")]
    assert [e.step for e in started] == [1, 3]
    ended = [e for e in events if isinstance(e, RunEnded)]
    assert len(ended) == 1 and (ended[0].steps, ended[0].model_calls) == (4, 4)


def test_no_review_of_an_attempt_that_did_not_complete(workspace: Path, tmp_path: Path) -> None:
    grep = tool_call("Grep", pattern="def login")
    reviewer = _SendBackOnce(spend=0)
    outcome, _, _, _ = _direct(workspace, tmp_path, [grep] * 6, review=reviewer)
    assert outcome.terminal_reason != "completed" and outcome.attempts == 1
    assert reviewer.seen == []


def test_a_review_that_raises_ends_the_run_crashed_with_its_answer(workspace: Path, tmp_path: Path) -> None:
    """A harness bug in the review is recorded, never raised: the run still ends, once, in the trace."""

    def broken(attempt: LoopOutcome, budget: BudgetNode) -> Review:
        raise RuntimeError("verification launcher broke")

    outcome, events, _, _ = _direct(workspace, tmp_path, [final("in app/auth.py")], review=broken)
    assert (outcome.terminal_reason, outcome.status) == ("crashed", "partial")
    assert (
        outcome.contract == {"answer": "in app/auth.py"} and "verification launcher broke" in outcome.detail
    )
    ended = [e for e in events if isinstance(e, RunEnded)]
    assert len(ended) == 1 and ended[0].terminal_reason == "crashed"


def test_feedback_without_budget_left_ends_the_run_with_the_answer(workspace: Path, tmp_path: Path) -> None:
    """A review that spends all that is left: no second attempt starts; the first answer stands."""
    reviewer = _SendBackOnce(spend=10**6)
    outcome, events, model, _ = _direct(workspace, tmp_path, [final("in app/auth.py")], review=reviewer)
    assert (outcome.attempts, len(model.requests), outcome.contract) == (1, 1, {"answer": "in app/auth.py"})
    assert not any(e.kind == "prompt_added" and e.purpose == "verification" for e in events)


# --- the trace names the policies, the grammar's offer and the harness's own actions -----------


def test_the_trace_records_the_policies_the_offer_and_a_forced_finish(make_launcher: LauncherFactory) -> None:
    """A Grep that hits, then a repeat of it (a stale turn): finish is forced without a model call."""
    grep = tool_call("Grep", _id="g", pattern="def login")
    launcher, model = make_launcher([grep, grep, final(GOOD)])
    result = launcher.launch(
        _request(constrain_paths=True, finish_after_stale=1, first_search=0, max_steps=6)
    )
    events = read_trace(result.trace_path)
    [start] = [e for e in events if isinstance(e, RunStarted)]
    assert start.policies[:3] == ["paths_from_seen", "skip_repeated", "finish_when"] == result.policies[:3]
    assert start.policy_params["finish_when"] == {"stale": 1, "reads": 0}
    steps = [e for e in events if isinstance(e, ModelCalled) and e.purpose == "step"]
    assert len(steps) == 2 and len(model.requests) == 3  # two actions and the answer: no call for finish
    assert steps[0].allowed_tools == ["Grep", "Glob", "finish"] and steps[0].arg_choices["Grep"] == {
        "path": ["."]
    }
    assert steps[0].arg_choices["Read"] == {"path": []} and "paths_from_seen" in steps[0].narrowed_by
    assert steps[1].allowed_tools is not None and "Read" in steps[1].allowed_tools  # a file was shown
    [forced] = [e for e in events if isinstance(e, ActionForced)]
    assert (forced.action, forced.narrowed_by[-1], forced.step) == ("finish", "finish_when", 2)
