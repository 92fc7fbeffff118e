"""The main agent with scripted models: delegation, parallel children, the cap, the gate, the tools."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import GOOD, REPO

from subagent_lab.agents.parent import MainAgent, MainRunResult
from subagent_lab.agents.result import gate_passes
from subagent_lab.config.agent_profile import AgentProfile
from subagent_lab.config.build import loop_spec, policies
from subagent_lab.config.profiles import LabConfig, load_config
from subagent_lab.core.tool import ToolDeniedError, ToolError
from subagent_lab.core.trace import ModelCalled, PromptAdded, RunEnded, RunStarted, SubagentEvent, read_trace
from subagent_lab.core.types import ModelRequest, ModelResponse
from subagent_lab.models.scripted import ScriptedModel, Turn, final, tool_call, tool_calls
from subagent_lab.scaffold.require_tool_first import RequireToolFirst
from subagent_lab.tools import edit as edit_module
from subagent_lab.tools.bash import bash, classify_command
from subagent_lab.tools.edit import ReadStamps, edit, tracked_read
from subagent_lab.workspace.sandbox import Workspace

PLAN = {
    "status": "completed",
    "summary": "Add logging to login.",
    "steps": [
        {"description": "Import logging in the auth module", "files": ["app/auth.py"]},
        {"description": "Log each attempt in login", "files": ["app/auth.py"]},
    ],
    "evidence": ["app/auth.py:4"],
    "unresolved_questions": [],
}


def _verdict(verdict: str, reason: str) -> ModelResponse:
    return final({"verdict": verdict, "reasons": [reason], "findings": [], "evidence": ["app/auth.py:4"]})


def _task(prompt: str, kind: str = "explore", **extra: Any) -> tuple[str, dict[str, Any]]:
    return ("Task", {"description": f"{kind} job", "prompt": prompt, "subagent_type": kind, **extra})


def _agent(
    config: LabConfig, workspace: Path, tmp_path: Path, turns: list[Turn], **kwargs: Any
) -> tuple[MainAgent, ScriptedModel]:
    """A main agent whose parent and children share one scripted model (for sequential flows)."""
    model = ScriptedModel(turns)
    agent = MainAgent(
        config, workspace, model_factory=lambda choice, cfg: model, scratch_dir=tmp_path, **kwargs
    )
    return agent, model


def _with_main(config: LabConfig, **fields: Any) -> LabConfig:
    main = config.agents["main"].model_copy(update=fields)
    return config.model_copy(update={"agents": {**config.agents, "main": main}})


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


# --- delegation ------------------------------------------------------------------------------


def test_parent_delegates_uses_the_envelope_and_finishes(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    task = _task("Where is login implemented? Cite path:line.", context={"hints": ["app/auth.py"]})
    turns = [tool_calls(task), final(GOOD), final("login is implemented in app/auth.py:4-5.")]
    agent, model = _agent(config, workspace, tmp_path, turns)
    result = agent.run("Where is login implemented?")

    assert (result.status, result.terminal_reason) == ("completed", "completed")
    assert result.answer == "login is implemented in app/auth.py:4-5."
    child_prompt = model.requests[1].messages[1].content
    assert "Context from the parent agent" in child_prompt and "app/auth.py" in child_prompt
    observation = model.requests[2].messages[-1]
    assert observation.role == "tool" and observation.content.startswith("[explore sub-agent: completed")
    assert GOOD["summary"] in observation.content and "app/auth.py:4-5" in observation.content
    [child] = result.children
    assert (child.profile, child.via, child.status, child.result) == ("explore", "task", "completed", GOOD)
    _check_rollup(result)
    assert set(result.usage_by_model) == {"main", "light"}  # explore runs on light, the parent on main
    assert result.cost_by_model["light"] == pytest.approx(child.cost_usd)

    # traces link both ways
    parent_events = read_trace(result.trace_path)
    start = parent_events[0]
    assert isinstance(start, RunStarted) and start.profile == "main" and start.session_id == result.session_id
    assert start.workspace == result.workspace == result.scratch_path
    sub = [e for e in parent_events if isinstance(e, SubagentEvent)]
    assert [e.kind for e in sub] == ["subagent_requested", "subagent_started", "subagent_completed"]
    assert {e.child_run_id for e in sub} == {child.run_id} and {e.child_trace for e in sub} == {
        child.trace_path
    }
    ended = [e for e in parent_events if isinstance(e, RunEnded)]
    assert len(ended) == 1 and ended[0].usage == result.usage and ended[0].status == "completed"
    child_start = read_trace(child.trace_path)[0]
    assert isinstance(child_start, RunStarted)
    assert child_start.parent_run_id == result.run_id and child_start.parent_trace == result.trace_path
    assert child_start.parent_session_id == result.session_id
    assert Path(child.trace_path).parent == Path(result.trace_path).parent  # one folder per session


def _check_rollup(result: MainRunResult) -> None:
    """Parent usage is its own calls; the total is parent + children; costs add up per model."""
    assert result.usage.total_tokens == sum(u.total_tokens for u in result.usage_by_call) > 0
    children = sum(c.usage.total_tokens for c in result.children)
    assert result.children_usage.total_tokens == children > 0
    assert result.total_usage.total_tokens == result.usage.total_tokens + children
    assert sum(u.total_tokens for u in result.usage_by_model.values()) == result.total_usage.total_tokens
    assert result.total_cost_usd == pytest.approx(sum(result.cost_by_model.values()))
    assert result.total_cost_usd == pytest.approx(result.cost_usd + sum(c.cost_usd for c in result.children))


def test_plan_profile_runs_through_task(config: LabConfig, workspace: Path, tmp_path: Path) -> None:
    turns = [
        tool_calls(_task("Plan how to add logging to login.", "plan")),
        final(PLAN),
        final("Plan ready."),
    ]
    agent, model = _agent(config, workspace, tmp_path, turns)
    result = agent.run("Plan logging for login")
    [child] = result.children
    assert (child.profile, child.status) == ("plan", "completed")
    assert child.result is not None and [s["files"] for s in child.result["steps"]] == [["app/auth.py"]] * 2
    assert model.requests[2].messages[-1].content.startswith("[plan sub-agent: completed")
    assert result.status == "completed"


def test_two_task_calls_run_concurrently_and_return_in_call_order(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    intervals: dict[str, tuple[float, float]] = {}

    def child(request: ModelRequest) -> ModelResponse:
        name = "alpha" if "alpha" in request.messages[1].content else "beta"
        start = time.monotonic()
        time.sleep(1.0 if name == "alpha" else 0.2)  # alpha is called first but finishes last
        intervals[name] = (start, time.monotonic())
        return final({**GOOD, "summary": f"{name} answered"})

    parent = ScriptedModel([tool_calls(_task("alpha question"), _task("beta question")), final("both done")])
    light = ScriptedModel([child, child])
    agent = MainAgent(
        config,
        workspace,
        model_factory=lambda choice, cfg: parent if choice == "main" else light,
        scratch_dir=tmp_path,
    )
    result = agent.run("Answer alpha and beta")

    (a_start, a_end), (b_start, b_end) = intervals["alpha"], intervals["beta"]
    assert a_start < b_end and b_start < a_end, "the two children did not overlap"
    assert b_end < a_end
    observations = [m for m in parent.requests[1].messages if m.role == "tool"]
    assert "alpha answered" in observations[0].content and "beta answered" in observations[1].content
    completed = [e for e in read_trace(result.trace_path) if e.kind == "subagent_completed"]
    by_run = {c.run_id: c.result["summary"] for c in result.children if c.result}  # type: ignore[index]
    assert [by_run[e.child_run_id] for e in completed] == ["beta answered", "alpha answered"]
    assert len({c.trace_path for c in result.children}) == 2  # each child has its own trace


def test_children_token_cap_stops_further_delegation(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    turns = [
        tool_calls(_task("first question")),
        final(GOOD),
        tool_calls(_task("second question")),
        final("Answered with what the first sub-agent found."),
    ]
    agent, model = _agent(config, workspace, tmp_path, turns, children_token_cap=3000)
    result = agent.run("Two questions")
    assert len(result.children) == 1 and result.children[0].status == "completed"
    refused = model.requests[-1].messages[-1]
    assert refused.role == "tool" and "children's token cap (3000) is spent" in refused.content
    assert "answer with what you have" in refused.content
    assert result.children_usage.total_tokens <= 3000
    assert result.tool_usage["Task"] == {"executed": 1, "failed": 1}
    assert result.status == "completed"


def test_parallel_children_share_the_cap_and_never_exceed_it(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    def slow(request: ModelRequest) -> ModelResponse:
        time.sleep(0.2)
        return final(GOOD)

    parent = ScriptedModel([tool_calls(_task("alpha"), _task("beta")), final("done")])
    light = ScriptedModel([slow, slow])
    agent = MainAgent(
        config,
        workspace,
        model_factory=lambda choice, cfg: parent if choice == "main" else light,
        scratch_dir=tmp_path,
        children_token_cap=3000,
    )
    result = agent.run("Two questions at once")
    observations = [m.content for m in parent.requests[1].messages if m.role == "tool"]
    assert sum("reserved by sub-agents still running" in o for o in observations) == 1
    assert len(result.children) == 1 and result.children_usage.total_tokens <= 3000


# --- the verification gate -------------------------------------------------------------------


def test_gate_turns_a_false_done_into_a_retry(config: LabConfig, workspace: Path, tmp_path: Path) -> None:
    old = "def login(user, password):\n"
    new = "def login(user, password):\n    print('login attempt', user)\n"
    turns = [
        final("I added logging to login in app/auth.py."),  # a false claim: nothing was edited
        _verdict("FAIL", "app/auth.py:4 login has no logging call"),
        tool_call("Read", path="app/auth.py"),
        tool_call("Edit", path="app/auth.py", old=old, new=new),
        final("login in app/auth.py now prints each attempt."),
        _verdict("PASS", "app/auth.py:5 prints the attempt"),
    ]
    agent, model = _agent(config, workspace, tmp_path, turns, verify=True)
    result = agent.run("Add logging to login.")

    assert [v.verdict for v in result.verifications] == ["FAIL", "PASS"]
    assert (result.status, result.verdict, result.attempts, result.steps) == ("completed", "PASS", 2, 4)
    assert result.answer == "login in app/auth.py now prints each attempt."
    retry = model.requests[2].messages
    assert retry[-2].role == "assistant" and retry[-2].content == "I added logging to login in app/auth.py."
    assert retry[-1].role == "user" and "verdict FAIL" in retry[-1].content
    assert "login has no logging call" in retry[-1].content
    assert "verification" in model.requests[1].messages[0].content  # the child ran the verification profile
    assert "I added logging" in model.requests[1].messages[1].content  # ...on the claim
    assert [c.via for c in result.children] == ["verification", "verification"]
    assert result.changed_files == ["app/auth.py"]
    assert "print('login attempt'" in (Path(result.workspace) / "app/auth.py").read_text()
    assert "print" not in (workspace / "app/auth.py").read_text()
    events = read_trace(result.trace_path)
    assert (
        sum(isinstance(e, RunStarted) for e in events) == 1
        and sum(isinstance(e, RunEnded) for e in events) == 1
    )
    assert any(isinstance(e, PromptAdded) and e.purpose == "verification" for e in events)
    steps = [e.step for e in events if e.kind == "model_called"]
    assert steps == sorted(steps) == [0, 1, 2, 3]  # step numbers continue across segments
    _check_rollup(result)


def test_a_retry_segment_continues_the_conversation_and_the_step_numbers(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    turns = [
        tool_call("Grep", pattern="def login"),
        final("I looked at login."),
        _verdict("FAIL", "the answer names no location"),
        tool_call("Read", path="app/auth.py"),
        final("login is defined at app/auth.py:4."),
        _verdict("PASS", "app/auth.py:4 defines login"),
    ]
    agent, model = _agent(config, workspace, tmp_path, turns, verify=True)
    result = agent.run("Where is login?")
    assert (result.status, result.attempts, result.steps) == ("completed", 2, 4)
    # The second segment starts from the first one's conversation (its tool result, its answer as
    # the model wrote it), then the verifier's feedback: the loop's outcome carried it over.
    first_final, retry = model.requests[1].messages, model.requests[3].messages
    assert first_final[-1].role == "tool" and "app/auth.py:4" in first_final[-1].content
    assert retry[: len(first_final)] == first_final
    assert [(m.role, m.content[:18]) for m in retry[len(first_final) :]] == [
        ("assistant", "I looked at login."),
        ("user", "A verification sub"),
    ]
    events = read_trace(result.trace_path)
    own = [(e.kind, e.step) for e in events if not isinstance(e, SubagentEvent)]
    assert [step for _, step in own] == sorted(step for _, step in own)
    assert [
        (kind, step) for kind, step in own if kind in ("model_called", "tool_started", "prompt_added")
    ] == [
        ("model_called", 0),
        ("tool_started", 1),
        ("model_called", 1),
        ("prompt_added", 2),  # the feedback, between the segments
        ("model_called", 2),
        ("tool_started", 3),
        ("model_called", 3),
    ]
    assert [(kind, step) for kind, step in own if kind == "run_ended"] == [("run_ended", 4)]
    # The parent's model is no longer wrapped: its own counter makes the pre-call counts exact.
    assert result.prompt_counts_exact and all(e.prompt_exact for e in events if isinstance(e, ModelCalled))


def test_gate_retries_are_bounded(config: LabConfig, workspace: Path, tmp_path: Path) -> None:
    cfg = _with_main(config, max_verification_retries=1)
    turns = [
        final("done"),
        _verdict("FAIL", "no"),
        final("done now"),
        _verdict("PARTIAL", "half"),
        final("x"),
    ]
    agent, model = _agent(cfg, workspace, tmp_path, turns, verify=True)
    result = agent.run("Do it")
    assert [v.verdict for v in result.verifications] == ["FAIL", "PARTIAL"]
    assert (result.status, result.verdict, result.answer) == ("partial", "PARTIAL", "done now")
    assert result.detail.startswith("verification PARTIAL after 2 checks")
    assert len(model.turns) == 1  # no third attempt


def test_budgets_stay_global_across_retries(config: LabConfig, workspace: Path, tmp_path: Path) -> None:
    cfg = _with_main(config, max_steps=2, max_verification_retries=5)
    turns = [final("a"), _verdict("FAIL", "no"), final("b"), _verdict("FAIL", "still no"), final("c")]
    agent, model = _agent(cfg, workspace, tmp_path, turns, verify=True)
    result = agent.run("Do it")
    assert result.steps == 2 and result.attempts == 2  # the profile's 2 steps, not 2 per attempt
    assert (result.status, result.verdict, result.answer) == ("partial", "FAIL", "b")
    assert len(model.turns) == 1


def test_gate_is_off_by_default(config: LabConfig, workspace: Path, tmp_path: Path) -> None:
    agent, _model = _agent(config, workspace, tmp_path, [final("done")])
    result = agent.run("Do it")
    assert result.verifications == [] and result.verdict is None and result.status == "completed"


def _with_verification(config: LabConfig, **fields: Any) -> LabConfig:
    profile = config.profile("verification").model_copy(update=fields)
    return config.model_copy(update={"profiles": {**config.profiles, "verification": profile}})


def test_a_verdict_without_reasons_still_sends_back_what_the_verifier_found(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    """Seen in a real trace: a FAIL whose reasons are empty, its findings and evidence pointing at the
    code. The feedback carries them, so the retry has something to go on."""
    silent = {"verdict": "FAIL", "reasons": [], "findings": ["login is in app/auth.py"],
              "evidence": ["app/auth.py:4"]}  # fmt: skip
    turns = [
        final("There is no login function."),
        final(silent),
        final("login is defined in app/auth.py:4."),
        _verdict("PASS", "app/auth.py:4 defines login"),
    ]
    agent, model = _agent(config, workspace, tmp_path, turns, verify=True)
    result = agent.run("Where is login defined?")
    assert [v.verdict for v in result.verifications] == ["FAIL", "PASS"] and result.attempts == 2
    sent = model.requests[2].messages[-1].content
    assert "(no reasons given)" in sent
    assert "What it found:\n- login is in app/auth.py" in sent and "Its evidence: app/auth.py:4" in sent


def test_a_verdict_from_a_grace_turn_is_unverified_and_does_not_pass(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    cfg = _with_verification(config, max_steps=1)  # the child hits max_steps after one tool call
    turns = [
        final("I added logging to login."),  # a false claim
        tool_call("Grep", pattern="print"),  # the verification child's only working step
        _verdict("PASS", "looks fine"),  # ...and its grace turn: a verdict nothing checked
    ]
    agent, model = _agent(cfg, workspace, tmp_path, turns, verify=True)
    result = agent.run("Add logging to login.")
    (record,) = result.verifications
    assert (record.verdict, record.child_verdict, record.child_terminal_reason) == (
        "UNVERIFIED",
        "PASS",
        "max_steps",
    )
    assert "grace turn" in record.reasons[0]
    assert (result.status, result.verdict) == ("partial", "UNVERIFIED")
    assert result.detail.startswith("verification UNVERIFIED after 1 checks")
    assert model.turns == []  # UNVERIFIED names nothing to fix: no retry of the parent


def test_accept_unverified_lets_the_answer_stand(config: LabConfig, workspace: Path, tmp_path: Path) -> None:
    cfg = _with_main(_with_verification(config, max_steps=1), accept_unverified=True)
    turns = [final("done"), tool_call("Grep", pattern="print"), _verdict("PASS", "looks fine")]
    agent, _ = _agent(cfg, workspace, tmp_path, turns, verify=True)
    result = agent.run("Do it")
    assert (result.status, result.verdict) == ("completed", "UNVERIFIED")


def test_a_verification_child_without_a_verdict_does_not_pass(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    cfg = _with_verification(config, max_contract_repairs=0)
    agent, _ = _agent(cfg, workspace, tmp_path, [final("done"), final("no JSON here")], verify=True)
    result = agent.run("Do it")
    (record,) = result.verifications
    assert (record.verdict, record.child_terminal_reason, record.child_verdict) == (
        "UNVERIFIED",
        "invalid_output",
        None,
    )
    assert (result.status, result.verdict, result.answer) == ("partial", "UNVERIFIED", "done")


def test_gate_passes_only_pass_unless_unverified_is_accepted() -> None:
    assert [gate_passes(v) for v in ("PASS", "FAIL", "PARTIAL", "UNVERIFIED")] == [True, False, False, False]
    assert gate_passes("UNVERIFIED", accept_unverified=True)
    assert not gate_passes("FAIL", accept_unverified=True)


def test_parent_spec_is_the_child_spec_builder(config: LabConfig, workspace: Path, tmp_path: Path) -> None:
    cfg = _with_main(config, min_tool_calls=2, max_parallel_tools=3)
    agent, _ = _agent(cfg, workspace, tmp_path, [])
    _, model_cfg, _ = cfg.resolve_model(agent.profile.model)
    plan = agent.plan("Find the entry point.", Workspace(workspace))
    assert plan.spec == loop_spec(agent.profile, model_cfg)
    assert (plan.spec.limits.max_parallel_tools, plan.spec.contract) == (3, None)
    assert RequireToolFirst(2) in policies(agent.profile)  # min_tool_calls is a policy's parameter now
    assert plan.policies == policies(agent.profile)
    assert [m.role for m in plan.messages] == ["system", "user"]
    assert plan.started is not None and plan.messages[1].content == plan.started.task == plan.task_message
    assert plan.trace_path.name == f"main-{plan.run_id}.jsonl"


def test_parent_trace_uses_the_launchers_redactor(
    config: LabConfig, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "odd-variable-value-0123456789"
    monkeypatch.setenv("MY_ODD_SETTING", secret)  # a name no heuristic calls secret
    main = config.models["main"]
    assert main is not None
    models = {**config.models, "main": main.model_copy(update={"api_key_env": "MY_ODD_SETTING"})}
    cfg = config.model_copy(update={"models": models})
    agent, _ = _agent(cfg, workspace, tmp_path, [final(f"the key is {secret}")])
    result = agent.run(f"Report {secret}")
    text = Path(result.trace_path).read_text()
    assert secret not in text and "REDACTED" in text


# --- scratch copy, Edit and Bash through the agent --------------------------------------------


def test_scratch_copy_leaves_the_target_untouched(config: LabConfig, workspace: Path, tmp_path: Path) -> None:
    (workspace / ".git").mkdir()
    (workspace / ".git" / "config").write_text("[core]\n")
    secret = tmp_path / "outside.txt"
    secret.write_text("not for the agent\n")
    os.symlink(secret, workspace / "leak.txt")
    before = _files(workspace)
    turns = [
        tool_calls(("Bash", {"command": "ls"}), ("Bash", {"command": "rm -rf /"})),
        tool_call("Read", path="app/views.py"),
        tool_call("Edit", path="app/views.py", old="return 'hi'", new="return 'hello'"),
        final("views.index now returns 'hello'."),
    ]
    agent, model = _agent(config, workspace, tmp_path, turns)
    result = agent.run("Make index say hello")
    assert _files(workspace) == before
    scratch = Path(result.workspace)
    assert scratch != workspace and "hello" in (scratch / "app/views.py").read_text()
    assert not (scratch / ".git").exists() and not (scratch / "leak.txt").exists()
    assert result.changed_files == ["app/views.py"]
    listing, refused = (m.content for m in model.requests[1].messages if m.role == "tool")
    assert listing.startswith("[exit code 0]") and "README.md" in listing
    assert refused.startswith("Denied: command refused")
    assert result.tool_usage["Bash"] == {"executed": 1, "denied": 1}
    assert result.tool_usage["Edit"] == {"executed": 1}


def test_without_scratch_the_ask_policy_gates_writes(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    before = _files(workspace)
    turns = [
        tool_call("Read", path="app/views.py"),
        tool_call("Edit", path="app/views.py", old="return 'hi'", new="return 'hello'"),
        final("could not edit"),
    ]
    agent, model = _agent(config, workspace, tmp_path, turns, scratch=False)
    result = agent.run("Make index say hello")
    assert result.scratch_path is None and result.workspace == str(workspace.resolve())
    assert model.requests[2].messages[-1].content.startswith("Denied: Edit needs approval")
    assert _files(workspace) == before


def test_model_setup_failure_is_a_model_error(config: LabConfig, workspace: Path, tmp_path: Path) -> None:
    def broken(choice: str, cfg: Any) -> ScriptedModel:
        raise RuntimeError("no endpoint")

    agent = MainAgent(config, workspace, model_factory=broken, scratch_dir=tmp_path)  # type: ignore[arg-type]
    result = agent.run("anything")
    assert (result.terminal_reason, result.status) == ("model_error", "failed")
    assert "no endpoint" in result.detail and read_trace(result.trace_path)[-1].kind == "run_ended"


# --- Edit --------------------------------------------------------------------------------------


@dataclass
class _EditCtx:
    workspace: Workspace
    stamps: ReadStamps


@pytest.fixture
def ectx(workspace: Path) -> _EditCtx:
    return _EditCtx(Workspace(workspace), ReadStamps())


def test_edit_refuses_a_file_changed_since_it_was_read(ectx: _EditCtx, workspace: Path) -> None:
    with pytest.raises(ToolError, match="has not been read"):
        edit(ectx, "app/views.py", "'hi'", "'hello'")
    tracked_read(ectx, "app/views.py")
    (workspace / "app/views.py").write_text("def index():\n    return 'changed by someone else'\n")
    with pytest.raises(ToolError, match="changed since you last read it"):
        edit(ectx, "app/views.py", "'changed by someone else'", "'x'")
    tracked_read(ectx, "app/views.py")
    assert "lines 2-2" in edit(ectx, "app/views.py", "'changed by someone else'", "'x'")
    assert "'y'" not in edit(ectx, "app/views.py", "'x'", "'y'")  # its own edit does not make it stale
    assert (workspace / "app/views.py").read_text().endswith("return 'y'\n")


def test_edit_is_atomic_and_exact(ectx: _EditCtx, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = workspace / "app/auth.py"
    path.chmod(0o640)
    tracked_read(ectx, "app/auth.py")
    original = path.read_bytes()
    with pytest.raises(ToolError, match="occurs 2 times"):
        edit(ectx, "app/auth.py", "def ", "async def ")
    with pytest.raises(ToolError, match="not found"):
        edit(ectx, "app/auth.py", "no such text", "x")

    def failing_replace(src: str, dst: str, **_dir_fds: int) -> None:  # Edit renames through dir fds
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(edit_module.os, "replace", failing_replace)
    with pytest.raises(ToolError, match="No space left"):
        edit(ectx, "app/auth.py", "import hashlib", "import hashlib, logging")
    monkeypatch.undo()
    assert path.read_bytes() == original and sorted(p.name for p in path.parent.iterdir()) == [
        "auth.py",
        "views.py",
    ]

    inode = path.stat().st_ino
    edit(ectx, "app/auth.py", "import hashlib", "import hashlib, logging")
    assert path.stat().st_ino != inode  # a new file renamed into place, not an in-place rewrite
    assert path.stat().st_mode & 0o777 == 0o640
    assert path.read_bytes() == original.replace(b"import hashlib", b"import hashlib, logging")


def test_edit_creates_files_inside_the_workspace_only(ectx: _EditCtx, workspace: Path) -> None:
    assert edit(ectx, "pkg/new.py", "", "x = 1\n").startswith("Created pkg/new.py")
    assert (workspace / "pkg/new.py").read_text() == "x = 1\n"
    with pytest.raises(ToolError, match="already exists"):
        edit(ectx, "pkg/new.py", "", "y = 2\n")  # recorded by the create, so not stale: still refused
    with pytest.raises(ToolError, match="does not exist"):
        edit(ectx, "pkg/missing.py", "a", "b")
    for path in ("../escape.py", "/etc/hosts", ".env"):
        with pytest.raises(ToolDeniedError):
            edit(ectx, path, "", "boom")
    assert not (workspace.parent / "escape.py").exists()


# --- Bash --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    ["rm -rf /", "curl https://example.com", "cat ../x", "sudo ls", "wget x", ":(){ :|:& };:",
     "git push origin main", "cat /etc/passwd", "echo x > /dev/sda", "ls; rm -rf .", "ls\nrm -rf /",
     "echo $(curl x)", "bash -c 'nc -l 80'", "chmod -R 777 .", "cat ~/.ssh/id_rsa"],
)  # fmt: skip
def test_bash_classifier_denies_destructive_or_escaping(command: str) -> None:
    assert classify_command(command, root="/ws") == "deny"


@pytest.mark.parametrize(
    "command",
    ["ls", "ls -la app", "git status", "git diff", "python -m pytest -q", "pytest tests",
     "grep -rn login app | head -5", "find . -name '*.py'", "wc -l app/auth.py 2>/dev/null", "ls /ws/app"],
)  # fmt: skip
def test_bash_classifier_allows_read_only(command: str) -> None:
    assert classify_command(command, root="/ws") == "allow"


@pytest.mark.parametrize(
    "command", ["python -c 'print(1)'", "rm app/views.py", "echo hi > out.txt", "find . -delete", "make"]
)
def test_bash_classifier_asks_for_the_rest(command: str) -> None:
    assert classify_command(command, root="/ws") == "ask"


@dataclass
class _BashCtx:
    workspace: Workspace
    ask_policy: Any = "deny"
    bash_timeout_s: int = 30


def test_bash_runs_in_the_workspace_and_asks_are_denied_by_default(workspace: Path) -> None:
    ctx = _BashCtx(Workspace(workspace))
    out = bash(ctx, "ls && pwd")
    assert out.startswith("[exit code 0]") and "README.md" in out and str(workspace.resolve()) in out
    with pytest.raises(ToolDeniedError, match="ask policy is 'deny'"):
        bash(ctx, "python3 -c 'print(6 * 7)'")
    assert "42" in bash(_BashCtx(Workspace(workspace), ask_policy="allow"), "python3 -c 'print(6 * 7)'")
    assert bash(ctx, "ls no-such-dir").startswith("[exit code 2]")


def test_bash_timeout_output_cap_and_scrubbed_env(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = _BashCtx(Workspace(workspace), ask_policy="allow", bash_timeout_s=1)
    started = time.monotonic()
    assert bash(ctx, "sleep 20", timeout_s=60).startswith("[timed out after 1s")  # capped by the agent
    assert time.monotonic() - started < 5
    (workspace / "big.txt").write_text("".join(f"line {i}\n" for i in range(20000)))
    out = bash(ctx, "cat big.txt")
    assert "line 0\n" in out and "line 19999" in out and "bytes of output omitted" in out and len(out) < 16000
    monkeypatch.setenv("MY_API_KEY", "very-secret-value")
    monkeypatch.setenv("GITHUB_TOKEN", "another-secret")
    env_out = bash(ctx, "env")
    assert "very-secret-value" not in env_out and "another-secret" not in env_out
    # HOME is an empty tmpfs in the sandbox, never the workspace (a repo-shipped .gitconfig would
    # otherwise become git's global config)
    assert "HOME=/tmp/home" in env_out and f"HOME={workspace.resolve()}" not in env_out


# --- the profile ---------------------------------------------------------------------------------


def test_main_profile_comes_from_profiles_yaml(config: LabConfig, workspace: Path, tmp_path: Path) -> None:
    main = load_config(REPO / "profiles.yaml", env={}).agents["main"]
    assert (main.max_steps, main.model, main.verify, main.max_verification_retries) == (20, "main", False, 2)
    assert {"Edit", "Bash", "Task"} <= set(main.tools) and main.ask_policy == "deny"
    prompt = MainAgent(config, workspace, model_factory=lambda c, m: ScriptedModel([])).system_prompt()
    assert "main agent" in prompt and "- plan:" in prompt and "- verification:" in prompt
    with pytest.raises(ValueError, match="unknown tools"):
        AgentProfile(tools=("Read", "WebFetch"))
    with pytest.raises(ValueError, match="context_token_budget"):
        AgentProfile(context_token_budget=10, total_token_budget=5)


def test_cancelled_parent_stops(config: LabConfig, workspace: Path, tmp_path: Path) -> None:
    cancel = threading.Event()

    def cancel_then_read(request: ModelRequest) -> ModelResponse:
        cancel.set()
        return tool_call("Glob", pattern="*")

    agent, _ = _agent(config, workspace, tmp_path, [cancel_then_read, final("x")])
    result = agent.run("anything", cancel=cancel)
    assert result.terminal_reason == "cancelled" and result.steps == 1


def test_json_wrapped_answers_are_unwrapped(config: LabConfig, workspace: Path, tmp_path: Path) -> None:
    agent, _ = _agent(config, workspace, tmp_path, [final({"answer": "login is in app/auth.py:4"})])
    result = agent.run("Where is login?")
    assert result.answer == "login is in app/auth.py:4"


# --- an action is not an answer ---------------------------------------------------------------

_ACTION = '{"thought": "search more", "tool": "Grep", "pattern": "def login"}'


@pytest.mark.parametrize("reply", [_ACTION, f"```json\n{_ACTION}\n```"])
def test_a_parent_grace_answer_that_is_an_action_is_sent_back(
    config: LabConfig, workspace: Path, tmp_path: Path, reply: str
) -> None:
    # The real trace's shape: the parent's loop ends ``loop_detected`` and the grace turn answers
    # with its next action; that is no answer, and the repair's text is the one that stands.
    stale = [tool_call("Grep", _id=f"g{i}", pattern="def login") for i in range(4)]
    turns = [*stale, final(reply), final("login is defined at app/auth.py:4.")]
    agent, model = _agent(config, workspace, tmp_path, turns)
    result = agent.run("Where is login?")
    assert result.terminal_reason == "loop_detected"
    assert result.answer == "login is defined at app/auth.py:4."
    repair = model.requests[-1].messages[-1].content
    assert "that is a call of Grep, not an answer" in repair


def test_a_parent_that_only_answers_with_actions_has_no_answer(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    stale = [tool_call("Grep", _id=f"g{i}", pattern="def login") for i in range(4)]
    agent, _ = _agent(config, workspace, tmp_path, [*stale, *[final(_ACTION)] * 4])
    result = agent.run("Where is login?")
    assert result.terminal_reason == "loop_detected" and result.answer is None


def test_prose_that_quotes_an_action_is_an_answer(config: LabConfig, workspace: Path, tmp_path: Path) -> None:
    quoted = f"login is at app/auth.py:4; I did not run {_ACTION}."
    agent, _ = _agent(config, workspace, tmp_path, [tool_call("Grep", pattern="def login"), final(quoted)])
    result = agent.run("Where is login?")
    assert (result.terminal_reason, result.answer) == ("completed", quoted)


def test_a_parent_trace_failing_mid_run_keeps_the_result(
    config: LabConfig, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The parent's trace is guarded as a child's: a full disk mid-run is recorded, never raised.
    import errno

    from subagent_lab.core.trace import TraceWriter

    real_write = TraceWriter._write
    parent_lines: list[str] = []

    def full_disk(self: TraceWriter, event: Any) -> None:
        if self.path.name.startswith("main-"):
            if len(parent_lines) >= 2:
                raise OSError(errno.ENOSPC, "No space left on device")
            parent_lines.append(event.kind)
        real_write(self, event)

    monkeypatch.setattr(TraceWriter, "_write", full_disk)
    agent, _ = _agent(
        config, workspace, tmp_path, [tool_call("Grep", pattern="def login"), final("app/auth.py:4.")]
    )
    result = agent.run("Where is login?")
    assert (result.status, result.answer) == ("completed", "app/auth.py:4.")
    assert result.trace_error is not None and "No space left" in result.trace_error
    assert "trace incomplete" in result.detail
    assert len(read_trace(result.trace_path)) == 2  # what made it out is a valid prefix
