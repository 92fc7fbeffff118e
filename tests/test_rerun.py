"""Re-running a recorded child from its start (``sl.rerun``, ``subagent-lab rerun``), scripted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import copy_profiles

import subagent_lab as sl
from subagent_lab.agents.launch_io import render_task
from subagent_lab.agents.launcher import SubagentLauncher, SubagentRequest
from subagent_lab.api.rerun import recorded_start, split_rendered_task
from subagent_lab.cli.main import main as cli_main
from subagent_lab.config.profiles import LabConfig, ModelConfig
from subagent_lab.config.scaffolds import PLAIN, Scaffold
from subagent_lab.core.trace import RunStarted, TraceWriter, read_trace
from subagent_lab.core.types import Message
from subagent_lab.local_models import factory as factory_module
from subagent_lab.models.scripted import ScriptedModel, final, tool_call

ANSWER = {
    "status": "completed",
    "summary": "login is defined in app/auth.py.",
    "findings": ["login calls check_password"],
    "evidence": ["app/auth.py:4-5"],
    "unresolved_questions": [],
}
CONTEXT = {"hints": ["app/auth.py"], "earlier": {"found": 1}}


def _script() -> list[Any]:
    return [tool_call("Grep", pattern="def login"), final(ANSWER)]


def _start(path: str) -> RunStarted:
    event = read_trace(path)[0]
    assert isinstance(event, RunStarted)
    return event


class Models:
    """Stands in for the configured models' factory: a fresh scripted model per choice, kept."""

    def __init__(self) -> None:
        self.made: list[tuple[str, ScriptedModel]] = []

    def __call__(self, choice: str, cfg: ModelConfig) -> ScriptedModel:
        model = ScriptedModel(_script())
        self.made.append((choice, model))
        return model


@pytest.fixture
def models(monkeypatch: pytest.MonkeyPatch) -> Models:
    made = Models()
    monkeypatch.setattr(factory_module, "default_model_factory", lambda lab: made)
    return made


def test_rerun_starts_exactly_like_the_recorded_run(
    config: LabConfig, workspace: Path, tmp_path: Path, models: Models
) -> None:
    first_model = ScriptedModel(_script())
    first = sl.explore(
        "Where is login?",
        workspace,
        first_model,
        config=config,
        runs_dir=tmp_path,
        context=CONTEXT,
        seed=7,
        temperature=0.3,
        max_steps=5,
    )
    again = sl.rerun(first, config=config, runs_dir=tmp_path)  # on main, the default

    assert again.status == "completed" and again.rerun_of == first.trace_path
    assert (again.model_choice, again.model_used) == ("main", "main") and first.model_used == "light"
    [(choice, model)] = models.made
    assert choice == "main"
    old, new = first_model.requests[0], model.requests[0]
    assert [m.content for m in new.messages] == [m.content for m in old.messages]  # system + task + context
    assert (new.seed, new.temperature) == (old.seed, old.temperature) == (7, 0.3)
    start = _start(again.trace_path)
    assert start.rerun_of == first.trace_path and start.workspace == _start(first.trace_path).workspace
    assert (start.request_task, start.request_context) == ("Where is login?", CONTEXT)
    assert start.budgets["max_steps"] == 5
    assert start.overrides == {"max_steps": 5}  # only what differs from today's profile is passed on


def test_rerun_changes_only_what_is_asked(config: LabConfig, workspace: Path, tmp_path: Path) -> None:
    first = sl.explore(
        "Where is login?",
        workspace,
        ScriptedModel(_script()),
        config=config,
        runs_dir=tmp_path,
        read_window=30,
    )
    again = sl.rerun(
        first.trace_path, ScriptedModel(_script()), config=config, runs_dir=tmp_path, max_steps=2, seed=3
    )
    before, after = _start(first.trace_path), _start(again.trace_path)
    assert after.budgets["max_steps"] == 2 and before.budgets["max_steps"] != 2
    assert _ran(again.trace_path).observation.read_window == 30 and after.seed == 3
    changed = {k for k in before.profile_fields if before.profile_fields[k] != after.profile_fields[k]}
    assert changed == {"max_steps"}
    row = {"trace_path": again.trace_path}  # a sweep row works too
    third = sl.rerun(row, ScriptedModel(_script()), config=config, runs_dir=tmp_path)
    assert third.rerun_of == again.trace_path and _start(third.trace_path).budgets["max_steps"] == 2


def test_another_model_runs_the_recorded_scaffold_unless_told_otherwise(
    config: LabConfig, workspace: Path, tmp_path: Path, models: Models
) -> None:
    # A model's own tuning (model_overrides) must not come along when the model changes: the
    # comparison is then of the models, not of two scaffolds.
    tuned = config.profiles["explore"].model_copy(update={"model_overrides": {"light": {"read_window": 20}}})
    lab = config.model_copy(update={"profiles": {**config.profiles, "explore": tuned}})
    first = sl.explore("Where is login?", workspace, ScriptedModel(_script()), config=lab, runs_dir=tmp_path)
    assert _ran(first.trace_path).observation.read_window == 20
    on_main = sl.rerun(first, config=lab, runs_dir=tmp_path)
    assert _ran(on_main.trace_path).observation.read_window == 20
    assert _ran(on_main.trace_path) == _ran(first.trace_path)
    plain = sl.rerun(first, config=lab, runs_dir=tmp_path, scaffold="plain")
    assert _ran(plain.trace_path) == PLAIN


def _ran(trace: str) -> Scaffold:
    return Scaffold.model_validate(_start(trace).profile_fields["scaffold"])


def test_split_rendered_task_inverts_render_task() -> None:
    task = "Where is login?\n\nCite path:line."
    layout = "Workspace top level: app/, README.md"
    assert split_rendered_task(render_task(task, CONTEXT, layout)) == (task, CONTEXT)
    assert split_rendered_task(render_task(task, None, layout)) == (task, None)
    assert split_rendered_task(render_task(task, None)) == (task, None)
    broken = task + "\n\nContext from the parent agent (JSON):\n{not json"
    assert split_rendered_task(broken) == (broken, None)


def _old_trace(path: Path, workspace: Path, config: LabConfig, **fields: Any) -> Path:
    """A trace as written before the request was recorded (only the rendered first message)."""
    writer = TraceWriter(path, "run-old")
    writer.emit(
        RunStarted(
            run_id="run-old",
            session_id="session-old",
            profile=fields.pop("profile", "explore"),
            model_choice="light",
            model_used="light",
            model_id="qwen",
            endpoint="http://127.0.0.1:8765/v1",
            workspace=str(workspace),
            system_prompt=config.profiles["explore"].system_prompt,
            task=render_task("Where is login?", CONTEXT, "Workspace top level: app/, README.md"),
            budgets={"max_steps": 3.0, "context_token_budget": 8000.0, "total_token_budget": 16000.0},
            tools=["Read", "Grep", "Glob"],
            **fields,
        )
    )
    writer.close()
    return path


def test_a_trace_from_before_the_request_was_recorded(
    config: LabConfig, workspace: Path, tmp_path: Path
) -> None:
    old = _old_trace(tmp_path / "old.jsonl", workspace, config)
    start = recorded_start(old)
    assert (start.task, start.context, start.profile_fields["max_steps"]) == ("Where is login?", CONTEXT, 3)
    model = ScriptedModel(_script())
    again = sl.rerun(old, model, config=config, runs_dir=tmp_path)
    assert again.status == "completed" and again.rerun_of == str(old)
    assert model.requests[0].messages[1].content == render_task("Where is login?", CONTEXT)
    assert _start(again.trace_path).budgets["max_steps"] == 3


def test_rerun_refuses_what_is_not_a_child_run(config: LabConfig, workspace: Path, tmp_path: Path) -> None:
    parent = _old_trace(tmp_path / "main.jsonl", workspace, config, profile="main")
    with pytest.raises(ValueError, match="not a sub-agent profile"):
        sl.rerun(parent, ScriptedModel([]), config=config)
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(ValueError, match="no run_started"):
        sl.rerun(tmp_path / "empty.jsonl", ScriptedModel([]), config=config)


def test_cli_rerun(
    config: LabConfig, workspace: Path, tmp_path: Path, models: Models, capsys: pytest.CaptureFixture[str]
) -> None:
    path = copy_profiles(tmp_path / "profiles.yaml", tmp_path / "cli-runs")
    first = sl.explore(
        "Where is login?", workspace, ScriptedModel(_script()), config=config, runs_dir=tmp_path
    )

    status = cli_main(
        ["--config", str(path), "rerun", first.trace_path, "--model", "light", "--set", "max_steps=3"]
    )
    out = capsys.readouterr().out
    assert status == 0 and f"re-run of: {first.trace_path}" in out and "status: completed" in out
    [new_trace] = (tmp_path / "cli-runs").rglob("*.jsonl")
    start = _start(str(new_trace))
    assert (
        start.rerun_of == first.trace_path and start.budgets["max_steps"] == 3 and start.model_used == "light"
    )
    assert models.made[0][0] == "light"

    assert cli_main(["--config", str(path), "rerun", str(tmp_path / "missing.jsonl")]) == 2
    assert "missing.jsonl" in capsys.readouterr().err


def test_a_forked_child_reruns_from_the_parent_messages_it_was_given(
    config: LabConfig, workspace: Path, tmp_path: Path, models: Models
) -> None:
    prior = [
        Message(role="user", content="Find where login is checked."),
        Message(role="assistant", content="I will ask an explore child."),
    ]
    first_model = ScriptedModel(_script())
    launcher = SubagentLauncher(config, workspace, model_factory=lambda c, m: first_model, trace_dir=tmp_path)
    first = launcher.launch(SubagentRequest(task="Where is login?", prior_messages=prior))
    assert first.status == "completed", first.detail
    assert recorded_start(first.trace_path).prior_messages == prior

    again = sl.rerun(first, config=config, runs_dir=tmp_path)
    [(_, model)] = models.made
    sent = [m.content for m in model.requests[0].messages]
    assert sent == [m.content for m in first_model.requests[0].messages]  # system, the prior, the task
    assert [m.content for m in prior] == sent[1:3]
    assert _start(again.trace_path).prior_messages == prior
