"""``SubagentLauncher.launch`` never raises for runtime conditions; one spec builder for every profile."""

from __future__ import annotations

import dataclasses
import datetime as dt
import errno
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from conftest import GOOD, LauncherFactory

from subagent_lab.agents import plan as plan_module
from subagent_lab.agents.launch_io import plain_json
from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest
from subagent_lab.config import build
from subagent_lab.config.agent_profile import AgentProfile, apply_overrides
from subagent_lab.config.build import loop_spec
from subagent_lab.config.limits import Limits
from subagent_lab.config.profiles import LabConfig, ModelConfig, RuntimeProfile
from subagent_lab.core.loop import LoopSpec, RunLimits
from subagent_lab.core.trace import RunEnded, RunStarted, TraceWriter, read_trace
from subagent_lab.core.types import ConfigError
from subagent_lab.models.scripted import ScriptedModel, final, tool_call
from subagent_lab.scaffold.grace import Grace
from subagent_lab.scaffold.require_evidence import RequireEvidence
from subagent_lab.scaffold.require_tool_first import RequireToolFirst
from subagent_lab.workspace.sandbox import Workspace

TASK = "Where is login implemented?"


def _kinds(path: str) -> list[str]:
    return [e.kind for e in read_trace(path)]


# --- the workspace ------------------------------------------------------------------------------


def test_removed_workspace_is_a_failed_result_not_an_exception(
    make_launcher: LauncherFactory, workspace: Path
) -> None:
    launcher, model = make_launcher([final(GOOD)])
    shutil.rmtree(workspace)
    result = launcher.launch(SubagentRequest(task=TASK))
    assert (result.status, result.terminal_reason) == ("failed", "crashed")
    assert "is unavailable" in result.detail and "FileNotFoundError" in result.detail
    assert model.requests == []  # nothing was spent on a run that could not look at anything
    events = read_trace(result.trace_path)
    assert [e.kind for e in events] == ["run_started", "run_ended"]
    assert isinstance(events[-1], RunEnded) and events[-1].terminal_reason == "crashed"


def test_unreadable_workspace_is_a_failed_result(
    make_launcher: LauncherFactory, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_iterdir = Path.iterdir

    def denied(self: Path) -> Any:
        if self == workspace.resolve():
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real_iterdir(self)

    monkeypatch.setattr(Path, "iterdir", denied)  # the tests run as root: chmod would not stop it
    launcher, model = make_launcher([final(GOOD)])
    result = launcher.launch(SubagentRequest(task=TASK))
    assert result.terminal_reason == "crashed" and "PermissionError" in result.detail
    assert model.requests == []


# --- structured context -----------------------------------------------------------------------


class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


def test_odd_context_is_rendered_not_raised(make_launcher: LauncherFactory) -> None:
    cycle: list[Any] = ["start"]
    cycle.append(cycle)
    context: dict[Any, Any] = {
        1: "int key",
        "1": "string key",
        (2, 3): "tuple key",
        None: "none key",
        "when": dt.datetime(2024, 5, 1, 12, 0),
        "tags": {"b", "a"},
        "ratio": float("nan"),
        "blob": b"\xffbytes",
        "obj": _Unprintable(),
        "cycle": cycle,
        "lone": "\ud800surrogate",
    }
    launcher, model = make_launcher([tool_call("Grep", pattern="def login"), final(GOOD)])
    result = launcher.launch(SubagentRequest(task=TASK, context=context))
    assert result.terminal_reason == "completed"
    first = model.requests[0].messages[1].content
    block = first.split("Context from the parent agent (JSON):\n", 1)[1].split("\n\nWorkspace top level")[0]
    rendered = json.loads(block)
    assert rendered["1"] in {"int key", "string key"} and rendered["1 (again)"] in {"int key", "string key"}
    assert rendered["(2, 3)"] == "tuple key" and rendered["None"] == "none key"
    assert rendered["when"] == "2024-05-01 12:00:00" and rendered["tags"] == ["a", "b"]
    assert rendered["ratio"] == "nan" and rendered["obj"] == "<unprintable _Unprintable>"
    assert rendered["cycle"] == ["start", "<cycle>"] and "\ud800" not in rendered["lone"]
    assert any(isinstance(e, RunStarted) and "tuple key" in e.task for e in read_trace(result.trace_path))


def test_plain_json_cuts_deep_nesting() -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(50):
        node["x"] = {}
        node = node["x"]
    text = json.dumps(plain_json(deep))
    assert "nested too deeply" in text and text.count('"x"') < 20


# --- the trace directory ----------------------------------------------------------------------


def test_trace_directory_that_is_a_file_fails_the_run_with_a_reason(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the trace directory should be")
    model = ScriptedModel([final(GOOD)])
    launcher = SubagentLauncher(config, workspace, model_factory=lambda c, m: model, trace_dir=blocker)
    result = launcher.launch(SubagentRequest(task=TASK))
    assert (result.status, result.terminal_reason) == ("failed", "crashed")
    assert result.trace_error is not None and "cannot write the trace" in result.trace_error
    assert "not started" in result.detail and model.requests == []
    assert blocker.read_text().startswith("a file")


def test_a_trace_failing_mid_run_keeps_the_result(
    make_launcher: LauncherFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write = TraceWriter._write
    written: list[str] = []

    def full_disk(self: TraceWriter, event: Any) -> None:
        if len(written) >= 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        written.append(event.kind)
        real_write(self, event)

    monkeypatch.setattr(TraceWriter, "_write", full_disk)
    launcher, _ = make_launcher([tool_call("Grep", pattern="def login"), final(GOOD)])
    result = launcher.launch(SubagentRequest(task=TASK))
    assert (result.status, result.terminal_reason) == ("completed", "completed")
    assert result.contract is not None and result.contract["evidence"] == GOOD["evidence"]
    assert result.trace_error is not None and "No space left" in result.trace_error
    assert "trace incomplete" in result.detail
    assert len(_kinds(result.trace_path)) == 3  # what made it out is still a valid prefix


def test_a_failing_parent_trace_does_not_lose_the_child(
    make_launcher: LauncherFactory, tmp_path: Path
) -> None:
    class Broken(TraceWriter):
        def emit(self, event: Any) -> None:
            raise OSError(errno.EIO, "parent trace gone")

    parent = Broken(tmp_path / "parent.jsonl", "run-parent")
    launcher, _ = make_launcher([tool_call("Grep", pattern="def login"), final(GOOD)], parent_trace=parent)
    assert launcher.launch(SubagentRequest(task=TASK)).terminal_reason == "completed"


def test_harness_bug_outside_the_loop_is_recorded_once(
    make_launcher: LauncherFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("tool registry bug")

    monkeypatch.setattr(plan_module, "build_tools", broken)
    launcher, model = make_launcher([final(GOOD)])
    result = launcher.launch(SubagentRequest(task=TASK))
    assert result.terminal_reason == "crashed" and "tool registry bug" in result.detail
    assert _kinds(result.trace_path).count("run_ended") == 1 and model.requests == []


def test_caller_mistakes_still_raise(make_launcher: LauncherFactory) -> None:
    launcher, _ = make_launcher([])
    with pytest.raises(ConfigError, match="unknown profile"):
        launcher.launch(SubagentRequest(task=TASK, profile="nope"))
    with pytest.raises(ConfigError, match="max_steps"):
        launcher.launch(SubagentRequest(task=TASK, overrides={"max_steps": 0}))


# --- seed and temperature per run -------------------------------------------------------------


def test_seed_and_temperature_overrides_reach_every_request(make_launcher: LauncherFactory) -> None:
    launcher, model = make_launcher([tool_call("Grep", pattern="def login"), final(GOOD)] * 2)
    default = launcher.launch(SubagentRequest(task=TASK))
    assert (default.seed, default.temperature) == (0, 0.0)  # the model's, from profiles.yaml
    assert {(r.seed, r.temperature) for r in model.requests} == {(0, 0.0)}
    model.requests.clear()
    chosen = launcher.launch(SubagentRequest(task=TASK, seed=7, temperature=0.7))
    assert (chosen.seed, chosen.temperature) == (7, 0.7)
    assert {(r.seed, r.temperature) for r in model.requests} == {(7, 0.7)}


# --- one spec builder ---------------------------------------------------------------------------

NOT_LOOP_FIELDS = {
    RuntimeProfile: {
        "name", "description", "system_prompt", "tools", "model",
        "model_overrides",  # applied to the profile before the spec is built
        "cost_budget_usd",  # the run's cost account (LoopDeps.cost, at its model's prices)
        "allow_model_fallback",  # LoopDeps: what the run does when another model answers
    },
    AgentProfile: {
        "description", "system_prompt", "system_prompt_file", "tools", "model", "children_token_cap",
        "verify", "max_verification_retries", "accept_unverified", "bash_timeout_s", "ask_policy",
        "bash_sandbox", "bash_ro_paths", "cost_budget_usd", "allow_model_fallback",
    },
}  # fmt: skip
"""Profile fields that are neither loop limits nor policy parameters. A new profile field must reach
the LoopSpec (a limit under its own name in ``RunLimits``, or the contract), be read by
``build.policies`` and ``build.grammar_caps`` (``POLICY_FIELDS``: the scaffold) or be listed here:
a limit the builder silently drops is the bug this test exists for."""


def _differing(profile: Any, spec: LoopSpec) -> dict[str, tuple[Any, Any]]:
    """The spec's limits whose values differ from the profile's limits of the same name."""
    out = {}
    for f in dataclasses.fields(RunLimits):
        assert f.name in Limits.model_fields, f.name  # one name for a limit, profile and loop alike
        if getattr(profile, f.name) != getattr(spec.limits, f.name):
            out[f.name] = (getattr(profile, f.name), getattr(spec.limits, f.name))
    return out


POLICY_FIELDS = {"scaffold"}
"""What ``build.policies`` and ``build.grammar_caps`` read of a profile."""


@pytest.mark.parametrize("kind", [RuntimeProfile, AgentProfile])
def test_every_profile_field_is_a_loop_limit_or_declared_otherwise(kind: type) -> None:
    consumed = {f.name for f in dataclasses.fields(RunLimits)} | {"contract"} | POLICY_FIELDS
    assert set(kind.model_fields) - consumed - NOT_LOOP_FIELDS[kind] == set()


def test_one_spec_builder_carries_every_shared_field(config: LabConfig) -> None:
    model = ModelConfig(model="m", max_output_tokens=500, temperature=0.3, seed=11)
    child = apply_overrides(
        RuntimeProfile,
        config.profile("explore"),
        {"min_tool_calls": 2, "require_grounded_evidence": True, "grace_turn": False},
        where="test",
    )
    parent = AgentProfile(min_tool_calls=1, max_parallel_tools=3, max_repairs=1, max_steps=7)
    for profile in (child, parent):
        spec = loop_spec(profile, model)
        assert _differing(profile, spec) == {"max_output_tokens": (None, 500)}  # the model's cap
        assert (spec.sampling.temperature, spec.sampling.seed) == (0.3, 11)
        sizes = profile.scaffold.observation
        caps = (sizes.action_max_tokens, sizes.thought_max_chars, sizes.arg_max_chars)
        assert dataclasses.astuple(spec.caps) == caps and spec.contract == profile.contract
    child_spec, parent_spec = loop_spec(child, model), loop_spec(parent, model)
    child_policies, parent_policies = build.policies(child), build.policies(parent)
    assert RequireEvidence(grounded=True) in child_policies and RequireToolFirst(2) in child_policies
    assert child_spec.contract == "ExploreResult"
    assert child_spec.limits.max_repairs == child.max_repairs and Grace() not in child_policies
    assert (parent_spec.contract, parent_spec.limits.max_repairs) == (None, 1)
    assert RequireToolFirst(1) in parent_policies
    assert (parent_spec.limits.max_parallel_tools, parent_spec.limits.max_steps) == (3, 7)
    seeded = loop_spec(child, model, seed=5, temperature=0.9).sampling
    assert (seeded.seed, seeded.temperature, loop_spec(child, model).sampling.seed) == (5, 0.9, 11)


# --- the run plan -------------------------------------------------------------------------------


def test_a_child_is_planned_once_and_the_loop_starts_from_the_plan(
    make_launcher: LauncherFactory, config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    overrides = {"tool_interface": "simple", "symbol_tools": True, "tool_guide": True}
    request = SubagentRequest(task=TASK, context={"hint": "app/"}, overrides=overrides)
    plan = plan_module.plan_run(
        config, request, Workspace(workspace), session_id="s", trace_dir=tmp_path / "runs"
    )
    system, first = plan.messages
    assert plan.started is not None
    assert system.content == plan.started.system_prompt and first.content == plan.started.task
    # The restated task is the first message up to its appended sections (the tool guide here).
    assert first.content.startswith(plan.task_message + "\n\n") and "app/" in plan.task_message
    assert plan.task == TASK and plan.problem is None
    assert list(plan.tools) == plan.started.tools and plan.gate.allowlist == frozenset(plan.tools)
    assert plan.trace_path == tmp_path / "runs" / "s" / f"explore-{plan.run_id}.jsonl"
    launcher, model = make_launcher([final(GOOD)])
    launcher.launch(request)
    assert model.requests[0].messages[1].content == first.content  # the launch runs the same plan


def test_an_unreadable_workspace_is_the_plans_problem_not_an_exception(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    root = Workspace(workspace)
    shutil.rmtree(workspace)  # removed after the launcher was made
    plan = plan_module.plan_run(config, SubagentRequest(task=TASK), root, session_id="s", trace_dir=tmp_path)
    assert plan.problem is not None and "is unavailable" in plan.problem
    assert plan.started is not None and plan.started.task.startswith(TASK)
